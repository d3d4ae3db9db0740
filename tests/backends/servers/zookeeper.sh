#!/usr/bin/env bash
# Starts a standalone ZooKeeper for the zookeeper:// backend's tests and
# benchmark: tests/backends/servers/zookeeper.sh DIR
#
# Everything (zoo.cfg, log4j config, data, logs, start-java.sh) lives under DIR, an existing
# empty folder. The server listens on a free 127.0.0.1 port. Java runs
# directly in the background (not through zkServer.sh) so that the PID printed
# is the server's own. tickTime=500 ms makes the server accept session
# timeouts from 1 s (2 ticks) to 10 s (20 ticks), so tests can watch sessions
# expire quickly. Prints
#   URL=zookeeper://127.0.0.1:PORT/tumbler
#   PIDS=<java pid>
# and exits 0, leaving the server running; on failure says why on stderr,
# kills what it started and exits non-zero. Works as root (ZooKeeper does not
# refuse it).
set -euo pipefail

dir=${1:?usage: zookeeper.sh DIR}
dir=$(cd "$dir" && pwd)
readonly start_timeout_s=60

fail() {
  echo "zookeeper.sh: $*" >&2
  if [[ -n "${pid:-}" ]]; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  if [[ -f "$dir/zookeeper.log" ]]; then
    echo "--- last lines of $dir/zookeeper.log:" >&2
    tail -n 20 "$dir/zookeeper.log" >&2 || true
  fi
  exit 1
}

command -v java >/dev/null || fail "java not found (apt-get install zookeeper)"
[[ -f /usr/share/java/zookeeper.jar ]] || fail "/usr/share/java/zookeeper.jar not found (apt-get install zookeeper)"

free_ports="$(cd "$(dirname "$0")/../../../scripts" && pwd)/free_ports.py"  # outside the ephemeral range
port=$(python3 "$free_ports" 1)

mkdir -p "$dir/data" "$dir/conf"
cat >"$dir/conf/zoo.cfg" <<CFG
tickTime=500
initLimit=10
syncLimit=5
dataDir=$dir/data
clientPort=$port
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,wchp
CFG
cat >"$dir/conf/log4j.properties" <<'LOG'
log4j.rootLogger=INFO, FILE
log4j.appender.FILE=org.apache.log4j.FileAppender
log4j.appender.FILE.File=${zookeeper.log.dir}/zookeeper.log
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n
LOG

# zookeeper.jar's manifest names its dependencies; slf4j's log4j 1.2 binding
# routes the server's log to the file above.
classpath="$dir/conf:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar"

# DIR/start-java.sh starts the server in the background and prints its PID;
# tests run it again to restart the server on the same port with the same
# data (a session then survives the restart). setsid: the server must not get
# the caller's terminal signals; its output goes to files so that the
# caller's pipe does not stay open. -XX:-UsePerfData: no
# /tmp/hsperfdata_<user>/<pid> file, which a JVM killed with SIGKILL (the
# tests do) would leave behind.
cat >"$dir/start-java.sh" <<START
#!/usr/bin/env bash
setsid java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData \\
  -Dzookeeper.log.dir="$dir" -Dlog4j.configuration="file:$dir/conf/log4j.properties" \\
  -Dzookeeper.admin.enableServer=false \\
  -cp "$classpath" org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/conf/zoo.cfg" \\
  >>"$dir/stdout.log" 2>&1 </dev/null &
echo \$!
START
chmod +x "$dir/start-java.sh"
pid=$(bash "$dir/start-java.sh")

deadline=$((SECONDS + start_timeout_s))
while :; do
  kill -0 "$pid" 2>/dev/null || fail "java exited during start-up (see $dir/stdout.log: $(tail -n 5 "$dir/stdout.log" 2>/dev/null))"
  # srvr answers "Mode: standalone" only once the server serves requests.
  reply=$(python3 - "$port" <<'PY' 2>/dev/null || true
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1)
s.sendall(b"srvr")
data = b""
s.settimeout(1)
while True:
    chunk = s.recv(4096)
    if not chunk:
        break
    data += chunk
print(data.decode(errors="replace"))
PY
)
  if [[ "$reply" == *"Mode: standalone"* ]]; then break; fi
  (( SECONDS < deadline )) || fail "ZooKeeper did not answer srvr on 127.0.0.1:$port within ${start_timeout_s}s"
  sleep 0.2
done

echo "URL=zookeeper://127.0.0.1:$port/tumbler"
echo "PIDS=$pid"
