#!/usr/bin/env bash
# The backend comparison of docs/benchmarks.md ("Backends"): starts tumblerd
# (durable) and every other backend's server with tests/backends/servers/
# <scheme>.sh (redis, five Redis for redlock, etcd, zookeeper, postgres,
# mysql) on free loopback ports, and runs the same workloads against all of
# them through the client library (tumbler::Mutex; tumbler-bench's library
# driver: one thread and one Client per client), interleaved round by round:
#   uncontended with 1, 16 and 64 clients, contended with 16 clients;
# stops every server it started (by PID) and prints a markdown report with
# the exact commands; --write puts it into docs/benchmarks.md between the
# bench:backends markers.
#
#   bench/backends.sh [--write] [--quick] [--rounds 3] [--duration 2s]
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WRITE=0
ROUNDS=3
DURATION=2s
WARMUP=0.5s
while [[ $# -gt 0 ]]; do
  case "$1" in
    --write) WRITE=1 ;;
    --quick) ROUNDS=1; DURATION=500ms; WARMUP=100ms ;;
    --rounds) ROUNDS="$2"; shift ;;
    --duration) DURATION="$2"; shift ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "backends.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
BENCH="$ROOT/build/tumbler-bench"
[[ -x $BENCH ]] || { echo "backends.sh: $BENCH missing: scripts/build.sh release" >&2; exit 2; }
export TUMBLERD="$ROOT/build/tumblerd"

TMP="$(mktemp -d "${TMPDIR:-/tmp}/tumbler-backends-bench.XXXXXX")"
chmod 755 "$TMP"  # the postgres and mysql scripts run their servers as other users
PIDS=()
CLEANUPS=()  # schemes whose script printed CLEANUP=1: run `<scheme>.sh --cleanup DIR` once stopped
cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  sleep 1
  for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  for pid in "${PIDS[@]}"; do  # bounded: gone within 5 s of SIGKILL
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  done
  for scheme in "${CLEANUPS[@]}"; do
    timeout 90 bash "$ROOT/tests/backends/servers/$scheme.sh" --cleanup "$TMP/$scheme" ||
      echo "backends.sh: cleanup of $scheme failed" >&2
  done
  rm -rf "$TMP"
}
trap cleanup EXIT

declare -A URL
SCHEMES=(tumbler redis redlock etcd zookeeper postgres mysql)
for scheme in "${SCHEMES[@]}"; do
  mkdir -p "$TMP/$scheme"
  chmod 777 "$TMP/$scheme"
  out="$(bash "$ROOT/tests/backends/servers/$scheme.sh" "$TMP/$scheme")" || {
    echo "backends.sh: starting $scheme failed" >&2; exit 1; }
  URL[$scheme]="$(sed -n 's/^URL=//p' <<<"$out")"
  read -r -a started <<<"$(sed -n 's/^PIDS=//p' <<<"$out")"
  PIDS+=("${started[@]}")
  grep -qx 'CLEANUP=1' <<<"$out" && CLEANUPS+=("$scheme")
done

peers=()
for scheme in "${SCHEMES[@]:1}"; do
  # lib: makes tumbler-bench use the client library for redis:// too (it has
  # a raw RESP driver for it, the peer of docs/benchmarks.md's first table).
  url="${URL[$scheme]}"
  [[ $scheme == redis ]] && url="lib:$url"
  peers+=(--peer "$url" --peer-label "$scheme")
done
# tumblerd through the client library too, so that every column pays the same
# client costs.
target=(--target "lib:${URL[tumbler]}" --target-label "tumblerd (durable)")

REPORT="$TMP/report.md"
{
  echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') by \`bench/backends.sh\` at $(git -C "$ROOT" rev-parse --short HEAD)."
  echo
  echo "- machine: $(nproc) cores, load average before the run: $(cut -d' ' -f1-3 /proc/loadavg); every server and the load generator on it"
  echo "- servers as tests/backends/servers/<scheme>.sh start them: tumblerd durable (fsync before reply);"
  echo "  redis-server without persistence; five such for redlock; one etcd member (fsync on commit);"
  echo "  ZooKeeper standalone (fsync on commit); PostgreSQL and MariaDB defaults (advisory locks and"
  echo "  GET_LOCK are in memory; the token counters are a sequence / an InnoDB table)"
  echo "- every column through the client library (tumbler::Mutex), one thread and one Client per client"
  echo
  for spec in "uncontended 1" "uncontended 16" "uncontended 64" "contended 16"; do
    read -r workload clients <<<"$spec"
    echo "### $workload, $clients client(s)"
    echo
    CMD=("$BENCH" "${target[@]}" "${peers[@]}" --workload "$workload" --clients "$clients"
         --rounds "$ROUNDS" --duration "$DURATION" --warmup "$WARMUP" --ttl 10000
         --format markdown)
    echo '```'
    echo "${CMD[*]}" | sed "s|$ROOT/||g"
    echo '```'
    echo
    "${CMD[@]}" 2>"$TMP/bench.err" || echo "(failed: $(tail -3 "$TMP/bench.err"))"
    echo
  done
} >"$REPORT"

cat "$REPORT"
if [[ $WRITE -eq 1 ]]; then
  "$ROOT/bench/doc-section.sh" backends "$REPORT"
  echo "backends.sh: wrote docs/benchmarks.md" >&2
fi
