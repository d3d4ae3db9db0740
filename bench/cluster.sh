#!/usr/bin/env bash
# The cluster benchmarks of docs/benchmarks.md ("Cluster"): starts a 3-node
# tumblerd cluster, a single durable tumblerd and a 3-member etcd cluster
# (tests/backends/servers/etcd3.sh) on free loopback ports, runs
#   1. uncontended 64 clients, interleaved rounds: the tumbler cluster (raw
#      RESP driver, on its leader), the tumbler cluster through the client
#      library, etcd through the client library (etcd's lock recipe), and
#      the single node;
#   2. failover: bench/failover.py (its own 3-node cluster, >= 20 kill -9s);
#   3. memory per node with 1,000,000 locks held by 10,000 sessions, and the
#      restart of the whole cluster with that state (kill -9 all, start all,
#      time until a leader serves and INSPECT shows a holder);
# stops every process it started (by PID) and prints a markdown report with
# the exact commands; --write puts it into docs/benchmarks.md between the
# bench:cluster markers.
#
#   bench/cluster.sh [--write] [--quick] [--rounds 5] [--trials 20]
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WRITE=0
QUICK=0
ROUNDS=5
DURATION=2s
WARMUP=0.5s
TRIALS=20
FILL_SESSIONS=10000
FILL_LOCKS=1000000
while [[ $# -gt 0 ]]; do
  case "$1" in
    --write) WRITE=1 ;;
    --quick) QUICK=1 ;;
    --rounds) ROUNDS="$2"; shift ;;
    --trials) TRIALS="$2"; shift ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "cluster.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
if [[ $QUICK -eq 1 ]]; then
  ROUNDS=2; DURATION=500ms; WARMUP=100ms; TRIALS=3; FILL_SESSIONS=1000; FILL_LOCKS=20000
fi

TUMBLERD="$ROOT/build/tumblerd"
BENCH="$ROOT/build/tumbler-bench"
for f in "$TUMBLERD" "$BENCH"; do
  [[ -x $f ]] || { echo "cluster.sh: $f missing: scripts/build.sh release" >&2; exit 2; }
done
TMP="$(mktemp -d "${TMPDIR:-/tmp}/tumbler-cluster-bench.XXXXXX")"
PIDS=()
NODE_PIDS=()
cleanup() {
  for pid in "${PIDS[@]}" "${NODE_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT

info_field() {  # port field
  redis-cli -p "$1" INFO 2>/dev/null | tr -d '\r' | sed -n "s/^$2://p"
}

read -r -a P < <(python3 "$ROOT/scripts/free_ports.py" 7)  # outside the ephemeral range
[[ ${#P[@]} -eq 7 ]] || { echo "cluster.sh: could not pick free ports" >&2; exit 1; }
CPORT=("${P[0]}" "${P[1]}" "${P[2]}")
RPORT=("${P[3]}" "${P[4]}" "${P[5]}")
SINGLE="${P[6]}"
PEERS="1=127.0.0.1:${RPORT[0]},2=127.0.0.1:${RPORT[1]},3=127.0.0.1:${RPORT[2]}"
CLUSTER_URL="tumbler://127.0.0.1:${CPORT[0]},127.0.0.1:${CPORT[1]},127.0.0.1:${CPORT[2]}"

start_node() {  # index
  local i=$1
  "$TUMBLERD" --node-id $((i + 1)) --bind 127.0.0.1 --port "${CPORT[$i]}" --peers "$PEERS" \
    --data-dir "$TMP/node$i" --log-level warn >>"$TMP/node$i.log" 2>&1 &
  NODE_PIDS[$i]=$!
}
leader_port() {  # waits (bounded) for a serving leader; prints its client port
  for _ in $(seq 1 200); do
    for p in "${CPORT[@]}"; do
      [[ "$(info_field "$p" role)" == leader ]] && { echo "$p"; return 0; }
    done
    sleep 0.05
  done
  return 1
}

for i in 0 1 2; do start_node $i; done
"$TUMBLERD" --bind 127.0.0.1 --port "$SINGLE" --raft-port 0 --data-dir "$TMP/single" \
  --log-level warn >"$TMP/single.log" 2>&1 &
PIDS+=($!)
mkdir -p "$TMP/etcd"
ETCD_OUT="$(bash "$ROOT/tests/backends/servers/etcd3.sh" "$TMP/etcd")" || {
  echo "cluster.sh: etcd3.sh failed" >&2; exit 1; }
ETCD_URL="$(sed -n 's/^URL=//p' <<<"$ETCD_OUT")"
read -r -a EPIDS <<<"$(sed -n 's/^PIDS=//p' <<<"$ETCD_OUT")"
PIDS+=("${EPIDS[@]}")
leader_port >/dev/null || { echo "cluster.sh: no tumbler leader" >&2; exit 1; }

REPORT="$TMP/report.md"
{
  echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') by \`bench/cluster.sh\` at $(git -C "$ROOT" rev-parse --short HEAD)."
  echo
  echo "- machine: $(nproc) cores, load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- all servers on this one machine, on loopback, each tumblerd and etcd member with its own data dir on the same disk"
  echo
  echo "### Throughput, 3 nodes"
  echo
  echo '```'
  CMD=("$BENCH" --target "$CLUSTER_URL" --target-label "tumbler 3 nodes (raw)"
       --peer "lib:$CLUSTER_URL" --peer-label "tumbler 3 nodes (client library)"
       --peer "$ETCD_URL" --peer-label "etcd 3 members (client library)"
       --peer "tumbler://127.0.0.1:$SINGLE" --peer-label "tumbler 1 node (raw)"
       --workload uncontended --clients 64 --rounds "$ROUNDS" --duration "$DURATION"
       --warmup "$WARMUP" --format markdown)
  echo "${CMD[*]}" | sed "s|$ROOT/||g"
  echo '```'
  echo
  "${CMD[@]}" 2>"$TMP/bench.err" || { echo "(failed: $(tail -3 "$TMP/bench.err"))"; }
  echo
  # The etcd cluster is not needed any more: free its CPU for what follows.
  for pid in "${EPIDS[@]}"; do kill -KILL "$pid" 2>/dev/null; done

  echo "### Failover"
  echo
  echo '```'
  echo "python3 bench/failover.py --trials $TRIALS --election-timeout-ms 300"
  echo '```'
  echo
  if python3 "$ROOT/bench/failover.py" --trials "$TRIALS" --election-timeout-ms 300 \
      --bin-dir "$ROOT/build" --json "$TMP/failover.json" >"$TMP/failover.out" 2>&1; then
    tail -1 "$TMP/failover.out"
  else
    echo "(failed: $(tail -3 "$TMP/failover.out"))"
  fi
  echo

  echo "### Memory per node and restart, $FILL_LOCKS locks held by $FILL_SESSIONS sessions"
  echo
  echo '```'
  FILL=("$BENCH" --target "$CLUSTER_URL" --workload fill --sessions "$FILL_SESSIONS"
        --locks "$FILL_LOCKS" --clients 16 --ttl 600000 --format markdown)
  echo "${FILL[*]}" | sed "s|$ROOT/||g"
  echo '```'
  echo
  if "${FILL[@]}" >"$TMP/fill.out" 2>&1; then
    # Followers apply asynchronously: wait until every node has the leader's index.
    lp="$(leader_port)"
    target="$(info_field "$lp" applied_index)"
    for _ in $(seq 1 600); do
      ok=1
      for p in "${CPORT[@]}"; do
        [[ "$(info_field "$p" applied_index)" -ge "$target" ]] 2>/dev/null || ok=0
      done
      [[ $ok -eq 1 ]] && break
      sleep 0.1
    done
    echo "| node | RSS |"
    echo "| --- | --- |"
    for i in 0 1 2; do
      rss_kb="$(sed -n 's/^VmRSS:\s*\([0-9]*\) kB/\1/p' "/proc/${NODE_PIDS[$i]}/status")"
      echo "| $((i + 1)) | $(awk -v k="$rss_kb" 'BEGIN { printf "%.1f MiB", k / 1024 }') |"
    done
    echo
    last_lock="$(redis-cli -p "$lp" LOCKS COUNT 1 | head -1)"
    for i in 0 1 2; do kill -KILL "${NODE_PIDS[$i]}"; done
    wait "${NODE_PIDS[@]}" 2>/dev/null
    t0=$(date +%s%N)
    for i in 0 1 2; do start_node $i; done
    lp="$(leader_port)" || lp=""
    served=""
    for _ in $(seq 1 600); do
      [[ -n $lp ]] || break
      if redis-cli -p "$lp" INSPECT "$last_lock" 2>/dev/null | grep -q session; then
        served=1; break
      fi
      sleep 0.02
    done
    t1=$(date +%s%N)
    if [[ -n $served ]]; then
      echo "Restart of all three nodes (kill -9, start, until a leader serves and INSPECT shows the holder of \`$last_lock\`): $(( (t1 - t0) / 1000000 )) ms."
    else
      echo "Restart: no leader served the state within 30 s."
    fi
  else
    echo "(fill failed: $(tail -3 "$TMP/fill.out"))"
  fi
} >"$REPORT"

cat "$REPORT"
if [[ $WRITE -eq 1 ]]; then
  "$ROOT/bench/doc-section.sh" cluster "$REPORT"
  echo "cluster.sh: wrote docs/benchmarks.md" >&2
fi
