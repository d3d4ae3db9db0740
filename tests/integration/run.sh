#!/usr/bin/env bash
# Runs tumbler's integration tests against build/tumblerd (or $TUMBLER_BIN_DIR).
# Usage: tests/integration/run.sh [unittest args...]   e.g. -k test_fifo
# Bounded: the whole run is killed after ${TUMBLER_IT_TIMEOUT:-900} s.
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
export TUMBLER_BIN_DIR="${TUMBLER_BIN_DIR:-$repo/build}"
if [[ ! -x "$TUMBLER_BIN_DIR/tumblerd" ]]; then
  echo "run.sh: $TUMBLER_BIN_DIR/tumblerd not found (build it, or set TUMBLER_BIN_DIR)" >&2
fi
cd "$repo"
timeout --signal=TERM --kill-after=30 "${TUMBLER_IT_TIMEOUT:-900}" \
  python3 -m unittest discover -s tests/integration -p 'test_*.py' -v "$@"
rc=$?
if [[ $rc -eq 124 || $rc -eq 137 ]]; then
  echo "run.sh: the test run exceeded ${TUMBLER_IT_TIMEOUT:-900} s and was stopped" >&2
fi
exit $rc
