#!/usr/bin/env bash
# Starts one redis-server on 127.0.0.1 with everything under DIR, for the
# redis:// backend's tests and the benchmark.
#
#   tests/backends/servers/redis.sh DIR
#
# On success prints
#   URL=redis://127.0.0.1:<port>
#   PIDS=<redis-server pid>
# and exits 0, leaving the server running (stop it with kill -TERM <pid>). On
# failure prints why on stderr, stops what it started and exits non-zero.
#
# No persistence (--save '' --appendonly no): the tests do not restart it.
# redis-server runs as whoever runs the script (root included).
set -u

dir=${1:?usage: redis.sh DIR}
if [[ ! -d $dir ]]; then
  echo "redis.sh: $dir is not a directory" >&2
  exit 2
fi
dir=$(cd "$dir" && pwd)
redis_bin=${REDIS_SERVER:-$(command -v redis-server || echo /usr/bin/redis-server)}
if [[ ! -x $redis_bin ]]; then
  echo "redis.sh: redis-server not found (Debian package redis-server)" >&2
  exit 2
fi
redis_cli=$(command -v redis-cli || echo /usr/bin/redis-cli)

free_ports="$(cd "$(dirname "$0")/../../../scripts" && pwd)/free_ports.py"  # outside the ephemeral range
port=$(python3 "$free_ports" 1) || { echo "redis.sh: could not pick a free port" >&2; exit 1; }

# setsid: the server must not share the caller's process group or terminal,
# so that a signal meant for the test does not stop it before its teardown.
setsid "$redis_bin" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
  --dir "$dir" --daemonize no --logfile "$dir/redis.log" \
  >/dev/null 2>&1 </dev/null &
pid=$!

fail() {
  echo "redis.sh: $1 (log: $dir/redis.log)" >&2
  tail -n 20 "$dir/redis.log" >&2 2>/dev/null
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || exit 1; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null
  exit 1
}

# Ready when it answers PING. Bounded: 60 s.
for _ in $(seq 600); do
  if ! kill -0 "$pid" 2>/dev/null; then fail "redis-server exited during start-up"; fi
  if [[ $("$redis_cli" -h 127.0.0.1 -p "$port" PING 2>/dev/null) == PONG ]]; then
    echo "URL=redis://127.0.0.1:$port"
    echo "PIDS=$pid"
    exit 0
  fi
  sleep 0.1
done
fail "redis-server did not answer PING within 60 s"
