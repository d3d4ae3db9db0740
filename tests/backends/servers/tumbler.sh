#!/usr/bin/env bash
# Starts one tumblerd (durable, data under DIR) on a free 127.0.0.1 port for
# the backend tests; prints URL= and PIDS= (tests/backends/README.md).
# The binary: $TUMBLERD, else build/tumblerd of this checkout.
set -euo pipefail
dir="$1"
here="$(cd "$(dirname "$0")/../../.." && pwd)"
bin="${TUMBLERD:-$here/build/tumblerd}"
port=$(python3 "$here/scripts/free_ports.py" 1)  # outside the ephemeral range
"$bin" --bind 127.0.0.1 --port "$port" --raft-port 0 --data-dir "$dir/data" \
  >"$dir/tumblerd.log" 2>&1 &
pid=$!
for _ in $(seq 1 200); do
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "tumblerd exited; log:" >&2; cat "$dir/tumblerd.log" >&2; exit 1
  fi
  if python3 - "$port" <<'PY' 2>/dev/null
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1)
s.sendall(b"INFO\r\n"); data = b""
while b"role:" not in data or b"\r\n" not in data[data.find(b"role:"):]:
    chunk = s.recv(65536)
    if not chunk: break
    data += chunk
sys.exit(0 if b"role:leader" in data else 1)
PY
  then
    echo "URL=tumbler://127.0.0.1:$port"
    echo "PIDS=$pid"
    exit 0
  fi
  sleep 0.1
done
echo "tumblerd did not become leader in 20 s" >&2
kill -KILL "$pid" 2>/dev/null || true
exit 1
