#!/usr/bin/env bash
# Starts five independent redis-servers on 127.0.0.1 (no replication between
# them) with everything under DIR/<n>, for the redlock:// backend's tests and
# the benchmark.
#
#   tests/backends/servers/redlock.sh DIR
#
# On success prints
#   URL=redlock://127.0.0.1:<p1>,127.0.0.1:<p2>,...,127.0.0.1:<p5>
#   PIDS=<pid1> <pid2> <pid3> <pid4> <pid5>
# in the same order, and exits 0 leaving the servers running (stop them with
# kill -TERM). On failure prints why on stderr, stops what it started and
# exits non-zero. The count can be changed with REDLOCK_INSTANCES (1..16).
set -u

dir=${1:?usage: redlock.sh DIR}
if [[ ! -d $dir ]]; then
  echo "redlock.sh: $dir is not a directory" >&2
  exit 2
fi
dir=$(cd "$dir" && pwd)
count=${REDLOCK_INSTANCES:-5}
if ! [[ $count =~ ^[0-9]+$ ]] || (( count < 1 || count > 16 )); then
  echo "redlock.sh: REDLOCK_INSTANCES must be 1..16" >&2
  exit 2
fi
redis_bin=${REDIS_SERVER:-$(command -v redis-server || echo /usr/bin/redis-server)}
if [[ ! -x $redis_bin ]]; then
  echo "redlock.sh: redis-server not found (Debian package redis-server)" >&2
  exit 2
fi
redis_cli=$(command -v redis-cli || echo /usr/bin/redis-cli)

free_ports="$(cd "$(dirname "$0")/../../../scripts" && pwd)/free_ports.py"  # outside the ephemeral range
pids=()
read -r -a ports < <(python3 "$free_ports" "$count")
if [[ ${#ports[@]} -ne $count ]]; then
  echo "redlock.sh: could not pick $count free ports" >&2
  exit 1
fi

fail() {
  echo "redlock.sh: $1" >&2
  for n in $(seq "$count"); do tail -n 5 "$dir/$n/redis.log" >&2 2>/dev/null; done
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for _ in $(seq 50); do
    alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    (( alive )) || exit 1
    sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  exit 1
}

for n in $(seq "$count"); do
  port=${ports[$((n - 1))]}
  mkdir -p "$dir/$n"
  # setsid: not in the caller's process group (see redis.sh).
  setsid "$redis_bin" --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    --dir "$dir/$n" --daemonize no --logfile "$dir/$n/redis.log" \
    >/dev/null 2>&1 </dev/null &
  pids+=("$!")
done

# Ready when every instance answers PING. Bounded: 60 s per instance.
url=""
for i in "${!ports[@]}"; do
  ready=0
  for _ in $(seq 600); do
    if ! kill -0 "${pids[$i]}" 2>/dev/null; then
      fail "redis-server on port ${ports[$i]} exited during start-up (log: $dir/$((i + 1))/redis.log)"
    fi
    if [[ $("$redis_cli" -h 127.0.0.1 -p "${ports[$i]}" PING 2>/dev/null) == PONG ]]; then
      ready=1
      break
    fi
    sleep 0.1
  done
  (( ready )) || fail "redis-server on port ${ports[$i]} did not answer PING within 60 s"
  url+="${url:+,}127.0.0.1:${ports[$i]}"
done
echo "URL=redlock://$url"
echo "PIDS=${pids[*]}"
exit 0
