#!/bin/bash
# CTest docs_readme_test: tests/docs/readme_test.py (paths, flags, YAML, and every sh block of the READMEs run as
# written against a sluice-server on the example models) inside a network namespace of its own, so that the
# README's fixed ports 8000/8001 are the test's and never another test's or a real server's.
# Usage: tests/docs/readme_test.sh BUILD_DIR [readme_test.py options]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:?usage: readme_test.sh BUILD_DIR}" && pwd)
shift
if [ "${SLUICE_DOCS_NETNS:-}" != 1 ]; then
  # unshare needs root (CI runs as root) or unprivileged user namespaces.
  if unshare -n true 2>/dev/null; then
    exec env SLUICE_DOCS_NETNS=1 unshare -n "$0" "$build" "$@"
  elif unshare -rn true 2>/dev/null; then
    exec env SLUICE_DOCS_NETNS=1 unshare -rn "$0" "$build" "$@"
  fi
  echo "readme_test: cannot make a network namespace (unshare -n): the README's commands use the fixed ports" \
       "8000/8001, which this test will not take from the machine" >&2
  exit 1
fi
ip link set lo up
exec /usr/bin/python3 "$root/tests/docs/readme_test.py" --root "$root" --build "$build" "$@"
