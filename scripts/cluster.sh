#!/usr/bin/env bash
# A local 3-node cluster on loopback: installs what is missing, builds a
# release build, starts nodes 1..3 (clients on 127.0.0.1:7421..7423, raft on
# 7521..7523, data in ./data-cluster/nodeN, logs beside), waits for a leader
# and prints the URL. The nodes run in the background.
#
#   scripts/cluster.sh           start (restart reuses the data dirs)
#   scripts/cluster.sh stop      stop the nodes this script started (by PID)
#   scripts/cluster.sh status    who leads
set -euo pipefail
cd "$(dirname "$0")/.."
dir=./data-cluster
peers="1=127.0.0.1:7521,2=127.0.0.1:7522,3=127.0.0.1:7523"
mkdir -p "$dir"

stop() {
  for i in 1 2 3; do
    f="$dir/node$i.pid"
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null && grep -q tumblerd "/proc/$pid/cmdline" 2>/dev/null; then
      kill -TERM "$pid"
      echo "stopped node $i (pid $pid)"
    fi
    rm -f "$f"
  done
}

case "${1:-start}" in
  stop) stop; exit 0 ;;
  status) exec build/tumbler --server tumbler://127.0.0.1:7421,127.0.0.1:7422,127.0.0.1:7423 cluster status ;;
  start) ;;
  *) echo "usage: scripts/cluster.sh [start|stop|status]" >&2; exit 2 ;;
esac

scripts/install-deps.sh
scripts/build.sh release
for i in 1 2 3; do
  if [ -f "$dir/node$i.pid" ] && kill -0 "$(cat "$dir/node$i.pid")" 2>/dev/null; then
    echo "node $i already runs (pid $(cat "$dir/node$i.pid"))"
    continue
  fi
  build/tumblerd --node-id "$i" --bind 127.0.0.1 --port "742$i" --peers "$peers" \
    --data-dir "$dir/node$i" >>"$dir/node$i.log" 2>&1 &
  echo $! >"$dir/node$i.pid"
done
for _ in $(seq 1 100); do
  for i in 1 2 3; do
    if build/tumbler --server "tumbler://127.0.0.1:742$i" --timeout 1s info replication 2>/dev/null |
        grep -q '^role:leader'; then
      echo "leader: node $i (127.0.0.1:742$i)"
      echo "URL: tumbler://127.0.0.1:7421,127.0.0.1:7422,127.0.0.1:7423"
      echo "logs: $dir/node{1,2,3}.log; stop with: scripts/cluster.sh stop"
      exit 0
    fi
  done
  sleep 0.1
done
echo "no leader after 10 s; see $dir/node*.log" >&2
exit 1
