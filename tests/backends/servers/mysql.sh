#!/usr/bin/env bash
# Starts one MariaDB server on 127.0.0.1 with everything under DIR, for the
# mysql:// backend's tests and the benchmark.
#
#   tests/backends/servers/mysql.sh DIR
#
# On success prints
#   URL=mysql://tumbler:tumbler@127.0.0.1:<port>/tumbler
#   PIDS=<mariadbd pid>
# and exits 0, leaving the server running (stop it with kill -TERM <pid>). On
# failure prints why on stderr, stops what it started and exits non-zero.
#
# mariadbd refuses to run as root: when run as root (CI) the data folder is
# owned by and the server runs as the user `mysql` (the Debian package creates
# it; MYSQL_USER overrides), and DIR is handed to that user. The server reads
# no option file (--no-defaults). The database `tumbler` and the user
# tumbler@127.0.0.1 (password "tumbler", all rights on that database) are
# created for the tests.
set -u

dir=${1:?usage: mysql.sh DIR}
if [[ ! -d $dir ]]; then
  echo "mysql.sh: $dir is not a directory" >&2
  exit 2
fi
dir=$(cd "$dir" && pwd)
server=${MARIADBD:-$(command -v mariadbd || echo /usr/sbin/mariadbd)}
install_db=$(command -v mariadb-install-db || echo /usr/bin/mariadb-install-db)
client=$(command -v mariadb || echo /usr/bin/mariadb)
for program in "$server" "$install_db" "$client"; do
  if [[ ! -x $program ]]; then
    echo "mysql.sh: $program not found (Debian packages mariadb-server, mariadb-client)" >&2
    exit 2
  fi
done

user_args=()
if [[ $(id -u) -eq 0 ]]; then
  user=${MYSQL_USER:-mysql}
  if ! id "$user" >/dev/null 2>&1; then
    echo "mysql.sh: running as root but there is no user '$user' to run mariadbd as" >&2
    exit 2
  fi
  chown "$user:" "$dir"
  user_args=(--user="$user")
fi

free_ports="$(cd "$(dirname "$0")/../../../scripts" && pwd)/free_ports.py"  # outside the ephemeral range
port=$(python3 "$free_ports" 1) || { echo "mysql.sh: could not pick a free port" >&2; exit 1; }
sock=$dir/mysql.sock

if ! "$install_db" --no-defaults --datadir="$dir/data" "${user_args[@]}" \
    --auth-root-authentication-method=normal --skip-test-db \
    >"$dir/install-db.log" 2>&1; then
  echo "mysql.sh: mariadb-install-db failed:" >&2
  tail -n 20 "$dir/install-db.log" >&2
  exit 1
fi

# setsid: the server must not share the caller's process group or terminal, so
# that a signal meant for the test does not stop it before its teardown.
# mariadbd switches to --user itself, keeping its pid, so $! is the server.
setsid "$server" --no-defaults --datadir="$dir/data" "${user_args[@]}" \
  --socket="$sock" --port="$port" --bind-address=127.0.0.1 --skip-name-resolve \
  --pid-file="$dir/mariadbd.pid" --log-error="$dir/mariadbd.log" \
  --max-connections=300 --innodb-buffer-pool-size=32M \
  >"$dir/mariadbd.out" 2>&1 </dev/null &
pid=$!

fail() {
  echo "mysql.sh: $1 (log: $dir/mariadbd.log)" >&2
  tail -n 20 "$dir/mariadbd.log" >&2 2>/dev/null
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || exit 1; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null
  exit 1
}

setup_sql="CREATE DATABASE IF NOT EXISTS tumbler;
CREATE USER IF NOT EXISTS 'tumbler'@'127.0.0.1' IDENTIFIED BY 'tumbler';
GRANT ALL ON tumbler.* TO 'tumbler'@'127.0.0.1';"

# Ready when root can log in on the socket and the database and user exist.
# Bounded: 60 s.
for _ in $(seq 600); do
  if ! kill -0 "$pid" 2>/dev/null; then fail "mariadbd exited during start-up"; fi
  if [[ -S $sock ]] &&
      "$client" --no-defaults --protocol=socket --socket="$sock" -uroot \
        --connect-timeout=2 -e "SELECT 1" >/dev/null 2>&1; then
    if ! "$client" --no-defaults --protocol=socket --socket="$sock" -uroot \
        -e "$setup_sql" 2>"$dir/setup.log"; then
      fail "creating the database and user failed: $(cat "$dir/setup.log")"
    fi
    echo "URL=mysql://tumbler:tumbler@127.0.0.1:$port/tumbler"
    echo "PIDS=$pid"
    exit 0
  fi
  sleep 0.1
done
fail "mariadbd did not accept connections within 60 s"
