#!/usr/bin/env bash
# Starts one etcd member on 127.0.0.1 with everything under DIR, for the
# etcd:// backend's tests and the benchmark.
#
#   tests/backends/servers/etcd.sh DIR
#
# On success prints
#   URL=etcd://127.0.0.1:<client port>
#   PIDS=<etcd pid>
# and exits 0, leaving etcd running (stop it with kill -TERM <pid>). On failure
# prints why on stderr, stops what it started and exits non-zero.
#
# etcd runs as whoever runs the script (it does not refuse root). Default
# timings (heartbeat 100 ms, election 1000 ms), so the smallest lease TTL the
# server grants is 2 s (3/2 election timeout, rounded up to whole seconds).
set -u

dir=${1:?usage: etcd.sh DIR}
if [[ ! -d $dir ]]; then
  echo "etcd.sh: $dir is not a directory" >&2
  exit 2
fi
dir=$(cd "$dir" && pwd)
etcd_bin=${ETCD:-$(command -v etcd || echo /usr/bin/etcd)}
if [[ ! -x $etcd_bin ]]; then
  echo "etcd.sh: etcd not found (Debian package etcd-server)" >&2
  exit 2
fi

free_ports="$(cd "$(dirname "$0")/../../../scripts" && pwd)/free_ports.py"  # outside the ephemeral range
read -r client_port peer_port < <(python3 "$free_ports" 2)
if [[ -z ${peer_port:-} ]]; then
  echo "etcd.sh: could not pick free ports" >&2
  exit 1
fi

# setsid: etcd must not share the caller's process group or terminal, so that
# a signal meant for the test does not stop the server before its teardown.
setsid "$etcd_bin" --name t --data-dir "$dir/data" \
  --listen-client-urls "http://127.0.0.1:$client_port" \
  --advertise-client-urls "http://127.0.0.1:$client_port" \
  --listen-peer-urls "http://127.0.0.1:$peer_port" \
  --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
  --initial-cluster "t=http://127.0.0.1:$peer_port" \
  --initial-cluster-state new \
  >"$dir/etcd.log" 2>&1 </dev/null &
pid=$!

fail() {
  echo "etcd.sh: $1 (log: $dir/etcd.log)" >&2
  tail -n 20 "$dir/etcd.log" >&2 2>/dev/null
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || exit 1; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null
  exit 1
}

# Ready when a write goes through the Raft log of this member: /health answers
# {"health":"true"} only once the member has a leader and can serve a
# linearizable read. Bounded: 60 s.
for _ in $(seq 600); do
  if ! kill -0 "$pid" 2>/dev/null; then fail "etcd exited during start-up"; fi
  if curl -s --max-time 1 "http://127.0.0.1:$client_port/health" 2>/dev/null |
      grep -q '"health":"true"'; then
    echo "URL=etcd://127.0.0.1:$client_port"
    echo "PIDS=$pid"
    exit 0
  fi
  sleep 0.1
done
fail "etcd did not become healthy within 60 s"
