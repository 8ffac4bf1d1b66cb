#!/usr/bin/env bash
# The Dockerfiles in CI, without building them: hadolint 2.15.1 (deploy/docker/.hadolint.yaml; it also runs
# ShellCheck on every RUN) and check_dockerfiles.py on BuildKit's parse of each file, then a negative case.
# Building and running the CPU image is tests/deploy/docker_image_test.sh (slow, not in CI).
#   tests/deploy/dockerfile_test.sh TOOLS_DIR      (CTest passes <build>/deploy-tools)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tools="$(mkdir -p "${1:?usage: dockerfile_test.sh TOOLS_DIR}" && cd "$1" && pwd)"
fail() { echo "dockerfile_test: FAIL: $*" >&2; exit 1; }
source "$here/tools.sh"
ensure_tools venv
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

dockerfiles=("$root/deploy/docker/Dockerfile" "$root/deploy/docker/Dockerfile.neuron")
passed=0
failed=0
if "$venv/bin/hadolint" --no-color --config "$root/deploy/docker/.hadolint.yaml" "${dockerfiles[@]}"; then
  echo "dockerfile_test: hadolint $("$venv/bin/hadolint" --version | awk '{print $NF}'): no findings"
  passed=$((passed + 1))
else
  echo "FAIL hadolint"; failed=$((failed + 1))
fi
if "$python" "$here/check_dockerfiles.py" "${dockerfiles[@]}"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi

# Negative: the same checks refuse a single-stage root image with a shell-form entrypoint.
cat > "$work/Dockerfile.bad" <<'BAD'
ARG BASE=debian:12
FROM ${BASE}
RUN apt-get update && apt-get install -y --no-install-recommends build-essential && rm -rf /var/lib/apt/lists/*
EXPOSE 8000
ENTRYPOINT /usr/local/bin/sluice-server --config /etc/sluice/config.yaml
BAD
if "$python" "$here/check_dockerfiles.py" "$work/Dockerfile.bad" > "$work/bad.out"; then
  cat "$work/bad.out"; echo "FAIL check_dockerfiles.py accepted a bad Dockerfile"; failed=$((failed + 1))
else
  echo "dockerfile_test: refused as expected: $(grep -c '^FAIL' "$work/bad.out") findings in a bad Dockerfile"
  passed=$((passed + 1))
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
