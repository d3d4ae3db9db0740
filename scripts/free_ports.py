#!/usr/bin/env python3
"""Free loopback TCP ports for the servers that tests and benchmarks start.

    scripts/free_ports.py [N]      prints N (default 1) distinct ports, space-separated

or, from Python (with scripts/ on sys.path):

    from free_ports import free_ports
    a, b = free_ports(2)

The usual trick, bind to port 0 and take what the kernel gives, returns a port
from the kernel's *ephemeral* range (net.ipv4.ip_local_port_range, 32768-60999
by default). That is the range the kernel also takes the local port of every
outgoing connection from, so between the pick and the server's own bind a
client somewhere on the machine (redis-cli, a test, the benchmark's 64
connections) can take the port and the server fails with "address already in
use". bench/run.sh hit exactly that. A server restarted on the same port has
the same window, longer.

So the ports come from outside the ephemeral range, where the kernel never puts
an outgoing connection: first below it (10000 up to its start), else above it.
A port is handed out only after a bind to it succeeded (nothing listens on it,
nothing is connected from it), and the sockets stay bound until all N are
picked, so the N differ. Two scripts picking at the same moment can still pick
the same port; that is as unlikely as with port 0, and callers that can retry a
start on "address already in use" should.

The C++ tests' servers pick their ports the same way (FreePort in
src/client/test_server.cc).
"""

import os
import random
import socket
import sys

HOST = "127.0.0.1"
RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"
LOWEST = 10000  # below: well-known and registered services' usual ports
TRIES = 2000


def ephemeral_range(path=RANGE_FILE):
    """(first, last) of the kernel's ephemeral port range."""
    try:
        with open(path) as f:
            first, last = (int(v) for v in f.read().split()[:2])
        if 1 <= first <= last <= 65535:
            return first, last
    except (OSError, ValueError):
        pass
    return 32768, 60999  # Linux's default


def windows(first, last):
    """Port ranges outside [first, last], best first; may be empty."""
    out = []
    if first - 1 >= LOWEST:
        out.append((LOWEST, first - 1))
    elif first - 1 >= 1024:
        out.append((1024, first - 1))
    if last + 1 <= 65535:
        out.append((last + 1, 65535))
    return out


def _try_bind(port, host):
    sk = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sk.bind((host, port))
        return sk
    except OSError:
        sk.close()
        return None


def free_ports(n=1, avoid=(), host=HOST, port_range=None):
    """n distinct free ports on host, outside the ephemeral range when possible."""
    if n < 1 or n > 1000:
        raise ValueError("free_ports: n must be 1..1000, got %r" % (n,))
    first, last = port_range or ephemeral_range()
    rng = random.Random(os.getpid() ^ int.from_bytes(os.urandom(4), "little"))
    held, ports = [], []
    try:
        for lo, hi in windows(first, last):
            if hi - lo + 1 < 4 * n:
                continue
            for _ in range(TRIES):
                if len(ports) == n:
                    break
                port = rng.randint(lo, hi)
                if port in ports or port in avoid:
                    continue
                sk = _try_bind(port, host)
                if sk is not None:
                    held.append(sk)
                    ports.append(port)
            if len(ports) == n:
                return ports
        # No room outside the ephemeral range: let the kernel choose.
        for _ in range(TRIES):
            if len(ports) == n:
                return ports
            sk = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sk.bind((host, 0))
            held.append(sk)
            port = sk.getsockname()[1]
            if port not in ports and port not in avoid:
                ports.append(port)
        if len(ports) == n:
            return ports
        raise OSError("no %d free ports on %s" % (n, host))
    finally:
        for sk in held:
            sk.close()


def main(argv):
    if len(argv) > 2 or (len(argv) == 2 and not argv[1].isdigit()):
        print("usage: free_ports.py [N]", file=sys.stderr)
        return 2
    n = int(argv[1]) if len(argv) == 2 else 1
    try:
        print(" ".join(str(p) for p in free_ports(n)))
    except (ValueError, OSError) as e:
        print("free_ports.py: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
