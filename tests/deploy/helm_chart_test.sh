#!/usr/bin/env bash
# The Helm chart (deploy/helm/sluice) in CI: `helm lint --strict` and `helm template` for every values file, and
# every rendered object validated offline against the Kubernetes OpenAPI schemas (kubernetes-validate, strict) of
# the oldest and newest Kubernetes versions below, plus the chart's own promises (tests/deploy/validate_manifests.py).
# Then negative cases: what must be refused is refused.
#
#   tests/deploy/helm_chart_test.sh TOOLS_DIR      (CTest passes <build>/deploy-tools)
#
# Tools are installed once into TOOLS_DIR and reused (tests/deploy/tools.sh): helm from the Go module proxy,
# kubernetes-validate from PyPI in a venv. If either cannot be installed the test FAILS: it never skips.
set -euo pipefail

# kubernetes-validate 1.37.0 (tests/deploy/requirements.txt) ships schemas for Kubernetes 1.30 ... 1.37: the oldest
# and the newest. helm's version is in tools.sh.
KUBERNETES_VERSIONS=(1.30.0 1.37.0)

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
chart="$root/deploy/helm/sluice"
tools="$(mkdir -p "${1:?usage: helm_chart_test.sh TOOLS_DIR}" && cd "$1" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
fail() { echo "helm_chart_test: FAIL: $*" >&2; exit 1; }

# --- tools -----------------------------------------------------------------------------------------------------
source "$here/tools.sh"
ensure_tools helm venv
echo "helm_chart_test: helm $HELM_VERSION ($("$helm" version --template '{{.GoVersion}}')), kubernetes-validate $("$python" -c 'import kubernetes_validate as k; print(k.__version__)')"

validate() {  # validate MANIFEST [extra validator args]
  local manifest="$1"; shift
  local versions=()
  for v in "${KUBERNETES_VERSIONS[@]}"; do versions+=(--kubernetes-version "$v"); done
  "$python" "$here/validate_manifests.py" "${versions[@]}" --crd-dir "$here/crds" "$@" "$manifest"
}

# --- every values file: lint, render, validate --------------------------------------------------------------
values_files=("$chart/values.yaml")
for f in "$chart"/values-*.yaml; do values_files+=("$f"); done
passed=0
failed=0
for values in "${values_files[@]}"; do
  name="$(basename "$values" .yaml)"
  args=()
  [ "$name" = values ] || args=(-f "$values")
  if ! "$helm" lint --strict "$chart" "${args[@]}" > "$work/$name.lint" 2>&1; then
    cat "$work/$name.lint"; echo "FAIL helm lint $name"; failed=$((failed + 1)); continue
  fi
  for kv in "${KUBERNETES_VERSIONS[@]}"; do
    if ! "$helm" template sluice "$chart" "${args[@]}" --namespace sluice-test --kube-version "$kv" \
        > "$work/$name-$kv.yaml" 2> "$work/$name.err"; then
      cat "$work/$name.err"; echo "FAIL helm template $name (Kubernetes $kv)"; failed=$((failed + 1)); continue 2
    fi
  done
  # The chart does not branch on the Kubernetes version: both renders must be identical.
  if ! cmp -s "$work/$name-${KUBERNETES_VERSIONS[0]}.yaml" "$work/$name-${KUBERNETES_VERSIONS[-1]}.yaml"; then
    echo "FAIL $name renders differently for Kubernetes ${KUBERNETES_VERSIONS[*]}"; failed=$((failed + 1)); continue
  fi
  if validate "$work/$name-${KUBERNETES_VERSIONS[0]}.yaml"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
  fi
done

# --- negative cases: each must be refused -------------------------------------------------------------------
expect_refused() {  # expect_refused DESCRIPTION EXPECTED_MESSAGE COMMAND...: fails, and says why
  local what="$1" expected="$2"; shift 2
  if "$@" > "$work/negative.out" 2>&1; then
    cat "$work/negative.out"; echo "FAIL not refused: $what"; failed=$((failed + 1))
  elif ! grep -q -- "$expected" "$work/negative.out"; then
    cat "$work/negative.out"; echo "FAIL refused for another reason than '$expected': $what"; failed=$((failed + 1))
  else
    echo "refused as expected: $what ($(grep -m1 -- "$expected" "$work/negative.out" | cut -c1-150))"
    passed=$((passed + 1))
  fi
}
kube=(--kube-version "${KUBERNETES_VERSIONS[-1]}")   # helm template alone assumes Kubernetes 1.20
expect_refused "grace period shorter than preStop + drain" "kubelet would kill the server mid-drain" \
  "$helm" template sluice "$chart" "${kube[@]}" --set terminationGracePeriodSeconds=20
expect_refused "extraConfig repeating a chart-owned key" "server.extraConfig.model_repository" \
  "$helm" template sluice "$chart" "${kube[@]}" --set server.extraConfig.model_repository=/elsewhere
expect_refused "server.grpc.address (the chart owns it)" "server.grpc.address" \
  "$helm" template sluice "$chart" "${kube[@]}" --set server.grpc.address=0.0.0.0:9
expect_refused "HPA with no model to watch" "autoscaling.models" \
  "$helm" template sluice "$chart" "${kube[@]}" --set autoscaling.enabled=true --set 'autoscaling.models=null'
expect_refused "Kubernetes older than the chart's kubeVersion (gRPC probes need 1.27)" "requires kubeVersion" \
  "$helm" template sluice "$chart" --kube-version 1.26.0

# The validator itself: a field unknown to the schema, a wrong type in the CRD, an unknown kind, a broken promise.
"$helm" template sluice "$chart" "${kube[@]}" -f "$chart/values-production-cpu.yaml" > "$work/good.yaml"
"$python" - "$work" <<'EOF'
import sys, yaml
work = sys.argv[1]
docs = [d for d in yaml.safe_load_all(open(f"{work}/good.yaml")) if d]
def write(name, mutate):
    mutated = list(yaml.safe_load_all(yaml.safe_dump_all(docs)))  # a deep copy
    mutate(mutated)
    with open(f"{work}/{name}.yaml", "w") as f:
        yaml.safe_dump_all(mutated, f)
def kind(objs, k):
    return next(o for o in objs if o["kind"] == k)
write("unknown-field", lambda o: kind(o, "Deployment")["spec"]["template"]["spec"].update(restartPolicyX="Always"))
write("bad-crd-type", lambda o: kind(o, "ServiceMonitor")["spec"]["endpoints"][0].update(interval=15))
write("unknown-kind", lambda o: o.append({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}))
write("probe-http", lambda o: kind(o, "Deployment")["spec"]["template"]["spec"]["containers"][0].update(
    readinessProbe={"httpGet": {"path": "/v2/health/ready", "port": "http"}}))
write("neuron-partial", lambda o: (kind(o, "Deployment")["spec"]["template"]["spec"].update(
    nodeSelector={"node.kubernetes.io/instance-type": "trn1.32xlarge"}),
    kind(o, "Deployment")["spec"]["template"]["spec"]["containers"][0]["resources"].update(
    requests={"aws.amazon.com/neuroncore": 2}, limits={"aws.amazon.com/neuroncore": 2})))
EOF
expect_refused "validator: unknown field in a Deployment (strict schema)" "restartPolicyX" \
  validate "$work/unknown-field.yaml"
expect_refused "validator: wrong type in a ServiceMonitor (CRD schema)" "CRD schema" \
  validate "$work/bad-crd-type.yaml"
expect_refused "validator: a kind with no schema" "no schema" validate "$work/unknown-kind.yaml" --no-chart-checks
expect_refused "validator: readiness probe not on grpc.health.v1" "readinessProbe is not a grpc.health.v1" \
  validate "$work/probe-http.yaml"
expect_refused "validator: part of a trn1.32xlarge's NeuronCores" "trn1.32xlarge has 32 NeuronCores" \
  validate "$work/neuron-partial.yaml"

echo "helm_chart_test: ${#values_files[@]} values files, $(( $(date +%s) - start )) s"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
