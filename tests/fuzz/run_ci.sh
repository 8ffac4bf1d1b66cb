#!/usr/bin/env bash
# The CI fuzz step (tests/run.sh): every target in build-fuzz/ runs for a short bounded time on a scratch copy of
# its seed corpus (the committed regression inputs run first), with its dictionary. Fails on any crash, leak,
# sanitizer report, timeout (-timeout=10 s per input) or out-of-memory (-rss_limit_mb=2048); the crashing input is
# left in the scratch directory, whose path is printed.
# Usage: tests/fuzz/run_ci.sh [BUILD_DIR (build-fuzz)] [SECONDS per target (30)] [JOBS in parallel (2)]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-fuzz}
seconds=${2:-30}
jobs=${3:-2}
targets=(http_infer grpc_infer model_config server_config http_request slo_yaml pricing_yaml audio_decode openai_request
  triton_generate multipart_form)
work=$(mktemp -d "${TMPDIR:-/tmp}/sluice-fuzz-ci.XXXXXX")

run_one() {
  local what=$1 dict=()
  mkdir -p "$work/$what/corpus" "$work/$what/artifacts"
  cp tests/fuzz/corpus/"$what"/* "$work/$what/corpus/"
  [[ -f tests/fuzz/$what.dict ]] && dict=(-dict="tests/fuzz/$what.dict")
  if "$build/fuzz_$what" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
      "${dict[@]}" -artifact_prefix="$work/$what/artifacts/" "$work/$what/corpus" >"$work/$what/log" 2>&1; then
    echo "fuzz_$what: ok, $(grep -o 'stat::number_of_executed_units: [0-9]*' "$work/$what/log" | grep -o '[0-9]*$') runs"
  else
    echo "fuzz_$what: FAILED (log and crashing input in $work/$what)"
    tail -n 40 "$work/$what/log"
    return 1
  fi
}
export -f run_one
export work build seconds

status=0
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -I{} bash -c 'run_one {}' || status=1
if [[ $status -eq 0 ]]; then rm -rf "$work"; else echo "tests/fuzz/run_ci.sh: a target failed; see $work"; fi
exit $status
