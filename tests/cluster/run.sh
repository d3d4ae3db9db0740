#!/usr/bin/env bash
# Runs tumbler's cluster fault tests against $TUMBLER_BIN_DIR/tumblerd
# (default build/). Usage: tests/cluster/run.sh [unittest args...]
#   e.g. tests/cluster/run.sh -k sigstop
# The whole run is bounded by ${TUMBLER_CLUSTER_TIMEOUT:-480} s.
# TUMBLER_CLUSTER_ROUNDS (default 3) sets how often each fault is repeated;
# TUMBLER_KEEP_TMP=1 keeps every scenario's temp dir (always kept on failure).
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
export TUMBLER_BIN_DIR="${TUMBLER_BIN_DIR:-$repo/build}"
if [[ ! -x "$TUMBLER_BIN_DIR/tumblerd" ]]; then
  echo "run.sh: $TUMBLER_BIN_DIR/tumblerd not found (build it, or set TUMBLER_BIN_DIR)" >&2
  exit 2
fi
if ! "$TUMBLER_BIN_DIR/tumblerd" --help 2>&1 | grep -q -- '--peers'; then
  echo "run.sh: $TUMBLER_BIN_DIR/tumblerd has no --peers (no cluster mode): the fault scenarios will fail" >&2
fi
results="${TUMBLER_CLUSTER_RESULTS:-$(mktemp -t tumbler-cluster-results.XXXXXX.json)}"
export TUMBLER_CLUSTER_RESULTS="$results"
cd "$here"
start=$(date +%s)
timeout --signal=TERM --kill-after=20 "${TUMBLER_CLUSTER_TIMEOUT:-480}" \
  python3 -m unittest -v test_pieces test_faults "$@"
rc=$?
if [[ $rc -eq 124 || $rc -eq 137 ]]; then
  echo "run.sh: the run exceeded ${TUMBLER_CLUSTER_TIMEOUT:-480} s and was stopped" >&2
fi
echo "run.sh: $(( $(date +%s) - start )) s, rc=$rc, scenario summaries in $results" >&2
exit $rc
