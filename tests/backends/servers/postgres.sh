#!/usr/bin/env bash
# Starts one PostgreSQL server on 127.0.0.1 with everything under DIR, for the
# postgres:// backend's tests and the benchmark.
#
#   tests/backends/servers/postgres.sh DIR
#   tests/backends/servers/postgres.sh --cleanup DIR
#
# On success prints
#   URL=postgres://postgres@127.0.0.1:<port>/tumbler
#   PIDS=<postmaster pid>
#   CLEANUP=1
# and exits 0, leaving the server running (stop it with kill -TERM <pid>: no
# new sessions, the server stops once the open ones end; kill -INT ends them).
# On failure prints why on stderr, stops what it started and exits non-zero.
#
# CLEANUP=1: once the server is stopped, run `postgres.sh --cleanup DIR`
# before removing DIR. A postmaster killed with SIGKILL (the conformance
# tests' "server dies" case) leaves its shared memory behind, a System V
# segment and /dev/shm/PostgreSQL.<n> files, and they outlive the process and
# DIR. A postmaster started on the same data directory removes its
# predecessor's segments at start-up (postmaster.pid names them), so --cleanup
# starts one with no TCP listener, waits until it is up and stops it with a
# fast shutdown, which removes its own. It does nothing when the server shut
# down cleanly (no postmaster.pid). Bounded: 85 s (callers allow 90).
#
# PostgreSQL refuses to run as root, so when run as root (CI) the cluster is
# owned by and runs as the user `postgres` (the Debian package creates it;
# POSTGRES_USER overrides), and DIR is handed to that user. Authentication is
# `trust` on the loopback address only. max_connections is raised to 300
# because the backend opens one connection per thread that holds or waits.
set -u

cleanup=0
if [[ ${1:-} == --cleanup ]]; then
  cleanup=1
  shift
fi
dir=${1:?usage: postgres.sh [--cleanup] DIR}
if [[ ! -d $dir ]]; then
  echo "postgres.sh: $dir is not a directory" >&2
  exit 2
fi
dir=$(cd "$dir" && pwd)
bin=${POSTGRES_BIN:-}
if [[ -z $bin ]]; then
  for candidate in /usr/lib/postgresql/*/bin; do bin=$candidate; done
fi
if [[ ! -x $bin/postgres || ! -x $bin/initdb ]]; then
  echo "postgres.sh: postgres/initdb not found under '$bin' (Debian package postgresql)" >&2
  exit 2
fi

# As root, run every server program as an unprivileged user. setpriv execs the
# program in place (no wrapper process), so $! is the postmaster itself.
as_user=()
if [[ $(id -u) -eq 0 ]]; then
  user=${POSTGRES_USER:-postgres}
  if ! id "$user" >/dev/null 2>&1; then
    echo "postgres.sh: running as root but there is no user '$user' to run postgres as" >&2
    exit 2
  fi
  chown "$user:" "$dir"
  as_user=(setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups --)
fi

if (( cleanup )); then
  [[ -f $dir/data/postmaster.pid ]] || exit 0
  # The killed postmaster's backends exit once they notice; until then the
  # old segment is in use and postgres refuses to start: retry for up to 50 s
  # (the last try may wait 20 s more, the stop 15 s: 85 s in all).
  started=0
  until_s=$((SECONDS + 50))
  while (( SECONDS < until_s )); do
    if "${as_user[@]}" "$bin/pg_ctl" -D "$dir/data" -w -t 20 -l "$dir/cleanup.log" \
        -o "-k $dir -c listen_addresses=''" start >/dev/null 2>&1; then
      started=1
      break
    fi
    sleep 0.5
  done
  if (( ! started )); then
    echo "postgres.sh: --cleanup: postgres did not start on $dir/data (log: $dir/cleanup.log)" >&2
    exit 1
  fi
  "${as_user[@]}" "$bin/pg_ctl" -D "$dir/data" -w -t 15 -m fast stop >/dev/null 2>&1 || {
    echo "postgres.sh: --cleanup: postgres did not stop on $dir/data" >&2
    exit 1
  }
  exit 0
fi

free_ports="$(cd "$(dirname "$0")/../../../scripts" && pwd)/free_ports.py"  # outside the ephemeral range
port=$(python3 "$free_ports" 1) || { echo "postgres.sh: could not pick a free port" >&2; exit 1; }

if ! "${as_user[@]}" "$bin/initdb" -D "$dir/data" -U postgres --auth=trust --no-sync \
    -E UTF8 --locale=C >"$dir/initdb.log" 2>&1; then
  echo "postgres.sh: initdb failed:" >&2
  tail -n 20 "$dir/initdb.log" >&2
  exit 1
fi

# setsid: the server must not share the caller's process group or terminal, so
# that a signal meant for the test does not stop it before its teardown.
setsid "${as_user[@]}" "$bin/postgres" -D "$dir/data" -k "$dir" -h 127.0.0.1 -p "$port" \
  -c max_connections=300 -c shared_buffers=32MB -c logging_collector=off \
  >"$dir/postgres.log" 2>&1 </dev/null &
pid=$!

fail() {
  echo "postgres.sh: $1 (log: $dir/postgres.log)" >&2
  tail -n 20 "$dir/postgres.log" >&2 2>/dev/null
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || exit 1; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null
  exit 1
}

# Ready when the server accepts connections and the database exists.
# Bounded: 60 s.
for _ in $(seq 600); do
  if ! kill -0 "$pid" 2>/dev/null; then fail "postgres exited during start-up"; fi
  if "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" -t 1 2>/dev/null; then
    if ! "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres tumbler 2>"$dir/createdb.log"; then
      fail "createdb tumbler failed: $(cat "$dir/createdb.log")"
    fi
    echo "URL=postgres://postgres@127.0.0.1:$port/tumbler"
    echo "PIDS=$pid"
    echo "CLEANUP=1"
    exit 0
  fi
  sleep 0.1
done
fail "postgres did not accept connections within 60 s"
