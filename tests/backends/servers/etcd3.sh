#!/usr/bin/env bash
# Starts a 3-member etcd cluster on 127.0.0.1 with everything under DIR, for
# the etcd:// backend's fail-over test and the benchmark.
#
#   tests/backends/servers/etcd3.sh DIR
#
# On success prints
#   URL=etcd://127.0.0.1:<p0>,127.0.0.1:<p1>,127.0.0.1:<p2>
#   PIDS=<pid0> <pid1> <pid2>
# (member i serves the i-th address of the URL) and exits 0, leaving the
# cluster running. On failure prints why on stderr, stops what it started and
# exits non-zero. Default etcd timings (heartbeat 100 ms, election 1000 ms).
set -u

dir=${1:?usage: etcd3.sh DIR}
if [[ ! -d $dir ]]; then
  echo "etcd3.sh: $dir is not a directory" >&2
  exit 2
fi
dir=$(cd "$dir" && pwd)
etcd_bin=${ETCD:-$(command -v etcd || echo /usr/bin/etcd)}
if [[ ! -x $etcd_bin ]]; then
  echo "etcd3.sh: etcd not found (Debian package etcd-server)" >&2
  exit 2
fi

# Six distinct free ports, outside the ephemeral range (scripts/free_ports.py).
read -r -a ports < <(python3 "$(cd "$(dirname "$0")/../../../scripts" && pwd)/free_ports.py" 6)
if [[ ${#ports[@]} -ne 6 ]]; then
  echo "etcd3.sh: could not pick free ports" >&2
  exit 1
fi
client_ports=("${ports[@]:0:3}")
peer_ports=("${ports[@]:3:3}")
cluster="t0=http://127.0.0.1:${peer_ports[0]},t1=http://127.0.0.1:${peer_ports[1]},t2=http://127.0.0.1:${peer_ports[2]}"
token="tumbler-$$-$RANDOM"

pids=()
stop_all() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for _ in $(seq 50); do
    alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [[ $alive == 0 ]] && return
    sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done
}
fail() {
  echo "etcd3.sh: $1 (logs: $dir/etcd-*.log)" >&2
  for i in 0 1 2; do tail -n 5 "$dir/etcd-$i.log" >&2 2>/dev/null; done
  stop_all
  exit 1
}

for i in 0 1 2; do
  # setsid: the members must not share the caller's process group.
  setsid "$etcd_bin" --name "t$i" --data-dir "$dir/data-$i" \
    --listen-client-urls "http://127.0.0.1:${client_ports[$i]}" \
    --advertise-client-urls "http://127.0.0.1:${client_ports[$i]}" \
    --listen-peer-urls "http://127.0.0.1:${peer_ports[$i]}" \
    --initial-advertise-peer-urls "http://127.0.0.1:${peer_ports[$i]}" \
    --initial-cluster "$cluster" --initial-cluster-token "$token" \
    --initial-cluster-state new \
    >"$dir/etcd-$i.log" 2>&1 </dev/null &
  pids+=($!)
done

# Ready when every member reports health (it has a leader and serves a
# linearizable read). Bounded: 60 s.
for _ in $(seq 600); do
  healthy=0
  for i in 0 1 2; do
    if ! kill -0 "${pids[$i]}" 2>/dev/null; then fail "member t$i exited during start-up"; fi
    if curl -s --max-time 1 "http://127.0.0.1:${client_ports[$i]}/health" 2>/dev/null |
        grep -q '"health":"true"'; then
      healthy=$((healthy + 1))
    fi
  done
  if [[ $healthy == 3 ]]; then
    echo "URL=etcd://127.0.0.1:${client_ports[0]},127.0.0.1:${client_ports[1]},127.0.0.1:${client_ports[2]}"
    echo "PIDS=${pids[*]}"
    exit 0
  fi
  sleep 0.1
done
fail "the cluster did not become healthy within 60 s"
