#!/usr/bin/env bash
# Long fuzz runs: each target in build-fuzz/ for SECONDS (default 600), one after the other (JOBS=2 runs two at a
# time). Each target keeps a working corpus in build-fuzz/long/<target>/corpus (seeded from tests/fuzz/corpus/, and
# growing over runs) and writes crashing inputs to build-fuzz/long/<target>/artifacts/. Prints, per target,
# executions, exec/s, coverage (cov: edges, ft: features from libFuzzer's final stats line), corpus size and
# crashes. A crash's input belongs, once fixed, in tests/fuzz/corpus/<target>/ as a regression input.
# Usage: tests/fuzz/run_long.sh [SECONDS] [TARGET...]      (build first: see tests/fuzz/CMakeLists.txt)
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-600}
shift || true
build=${BUILD_DIR:-build-fuzz}
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(http_infer grpc_infer model_config server_config http_request slo_yaml pricing_yaml audio_decode
  openai_request triton_generate multipart_form)

run_one() {
  local what=$1 dir="$build/long/$1" dict=()
  mkdir -p "$dir/corpus" "$dir/artifacts"
  cp -n tests/fuzz/corpus/"$what"/* "$dir/corpus/" 2>/dev/null || true
  [[ -f tests/fuzz/$what.dict ]] && dict=(-dict="tests/fuzz/$what.dict")
  # -fork=1 -ignore_crashes=1: a crash is recorded and the run goes on, so one run finds more than one crash.
  "$build/fuzz_$what" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 "${dict[@]}" -artifact_prefix="$dir/artifacts/" \
    "$dir/corpus" >"$dir/log" 2>&1 || true
  local execs cov ft corp crashes
  # With -fork, the parent's status lines carry cov/ft/corp/exec; without, the last "#N ... cov:" line does.
  execs=$(grep -oE '^#[0-9]+' "$dir/log" | tail -1 | tr -d '#')
  cov=$(grep -oE 'cov: [0-9]+' "$dir/log" | tail -1 | grep -oE '[0-9]+')
  ft=$(grep -oE 'ft: [0-9]+' "$dir/log" | tail -1 | grep -oE '[0-9]+')
  corp=$(find "$dir/corpus" -type f | wc -l)
  crashes=$(find "$dir/artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  printf '%-20s %6ss  execs %-10s exec/s %-7s cov %-6s ft %-7s corpus %-6s crashes %s\n' "fuzz_$what" "$seconds" \
    "${execs:-?}" "$(( ${execs:-0} / seconds ))" "${cov:-?}" "${ft:-?}" "$corp" "$crashes"
}
export -f run_one
export build seconds

printf '%s\n' "${targets[@]}" | xargs -P "${JOBS:-1}" -I{} bash -c 'run_one {}'
