"""Cluster fault-test harness for tumblerd (Python 3 standard library only).

- A minimal RESP2/RESP3 client (`Conn`): every read has a deadline.
- `Node`: one tumblerd process of a cluster (client port, advertised raft
  address, optional --raft-bind behind a `RaftProxy`, own data dir and log).
- `Cluster`: starts 3 or 5 nodes (or 1, without --peers), finds the leader,
  kill -9 / SIGSTOP / SIGCONT / restart of single nodes or all of them,
  `wait_serving`, `digests` (equal applied_index, then state_digest of every
  live node), and redirect-following client helpers.

Process hygiene: every process started here is tracked by PID and killed by PID
(SIGCONT then SIGKILL, so that a stopped process dies too) at teardown and at
interpreter exit. Nothing else is ever signalled. Only 127.0.0.1 is used; ports
come from scripts/free_ports.py (outside the ephemeral range).
"""

import atexit
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
# n distinct free ports outside the kernel's ephemeral range, so that no client
# connection takes one before (or while, across a restart) a node binds it.
sys.path.insert(0, os.path.join(REPO, "scripts"))
from free_ports import free_ports  # noqa: E402  (scripts/free_ports.py)
BIN_DIR = os.environ.get("TUMBLER_BIN_DIR", os.path.join(REPO, "build"))
HOST = "127.0.0.1"


def tumblerd_path():
    return os.path.join(os.environ.get("TUMBLER_BIN_DIR", BIN_DIR), "tumblerd")


# --------------------------------------------------------------------------
# RESP: the integration harness's codec (tests/integration/harness.py), loaded
# under another module name, since both files are called harness.py.
# --------------------------------------------------------------------------

def _load_integration_harness():
    spec = importlib.util.spec_from_file_location(
        "tumbler_integration_harness", os.path.join(REPO, "tests", "integration", "harness.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_integration = _load_integration_harness()
Incomplete = _integration.Incomplete
ProtocolError = _integration.ProtocolError
ReplyTimeout = _integration.ReplyTimeout
ConnectionClosed = _integration.ConnectionClosed
RespError = _integration.RespError
parse_reply = _integration.parse_reply
encode_command = _integration.encode_command


class Conn:
    """One RESP connection; every read has a deadline (ReplyTimeout)."""

    def __init__(self, port, host=HOST, timeout=5.0, connect_timeout=1.0):
        self.host, self.port = host, port
        self.timeout = timeout
        self.sock = socket.create_connection((host, port), timeout=connect_timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()

    def send_cmd(self, *args):
        self.sock.settimeout(self.timeout)
        self.sock.sendall(encode_command(*args))

    def read_reply(self, timeout=None):
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            try:
                v, p = parse_reply(self.buf, 0)
                del self.buf[:p]
                return v
            except Incomplete:
                pass
            left = deadline - time.monotonic()
            if left <= 0:
                raise ReplyTimeout("no reply from %s:%d" % (self.host, self.port))
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                raise ReplyTimeout("no reply from %s:%d" % (self.host, self.port))
            except OSError as e:
                raise ConnectionClosed(str(e))
            if not chunk:
                raise ConnectionClosed("closed by %s:%d" % (self.host, self.port))
            self.buf += chunk

    def call(self, *args, timeout=None):
        self.send_cmd(*args)
        return self.read_reply(timeout)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


NET_ERRORS = (OSError, ReplyTimeout, ConnectionClosed, ProtocolError, ValueError)


def s(v):
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", "replace")
    return str(v)


def as_map(v):
    """RESP3 map or RESP2 flat key/value array -> dict with str keys."""
    if isinstance(v, dict):
        return {s(k): x for k, x in v.items()}
    if isinstance(v, list) and len(v) % 2 == 0:
        return {s(v[i]): v[i + 1] for i in range(0, len(v), 2)}
    raise AssertionError("not a map reply: %r" % (v,))


def parse_info(v):
    out = {}
    for line in s(v).splitlines():
        line = line.strip()
        if line and not line.startswith("#") and ":" in line:
            k, val = line.split(":", 1)
            out[k] = val
    return out


def is_grant(r):
    return isinstance(r, list) and len(r) == 2 and all(isinstance(x, int) for x in r)


def parse_notleader(err):
    """'-NOTLEADER host:port' -> (host, port) or None."""
    m = re.match(r"^\s*\[?([0-9a-fA-F.:]+?)\]?:(\d+)\s*$", err.message or "")
    if not m:
        return None
    return m.group(1), int(m.group(2))


# --------------------------------------------------------------------------
# Process tracking
# --------------------------------------------------------------------------

_procs = {}          # pid -> Popen
_procs_lock = threading.Lock()


def track(proc):
    with _procs_lock:
        _procs[proc.pid] = proc
    return proc


def kill_tracked(proc, timeout=5.0):
    """SIGCONT then SIGKILL of one tracked process (ours, by PID); reaps it."""
    if proc is None:
        return None
    if proc.poll() is None:
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(proc.pid, sig)
            except ProcessLookupError:
                break
    try:
        rc = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        rc = None
    with _procs_lock:
        _procs.pop(proc.pid, None)
    return rc


def _kill_all_tracked():
    with _procs_lock:
        procs = list(_procs.values())
    for p in procs:
        kill_tracked(p, timeout=2.0)


atexit.register(_kill_all_tracked)


def wait_until(pred, timeout, interval=0.05, what="condition"):
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = pred()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.1fs waiting for %s (last=%r)"
                                 % (timeout, what, last))
        time.sleep(interval)


# --------------------------------------------------------------------------
# Node
# --------------------------------------------------------------------------

class Node:
    def __init__(self, cluster, node_id, client_port, raft_port, raft_bind_port):
        self.cluster = cluster
        self.id = node_id
        self.client_port = client_port
        self.raft_port = raft_port            # advertised (in --peers)
        self.raft_bind_port = raft_bind_port  # where tumblerd listens (== raft_port without proxy)
        self.data_dir = os.path.join(cluster.root, "n%d" % node_id, "data")
        self.log_path = os.path.join(cluster.root, "n%d" % node_id, "tumblerd.log")
        os.makedirs(os.path.dirname(self.data_dir), exist_ok=True)
        self.proc = None
        self.stopped = False      # SIGSTOPped by us
        self.starts = 0
        self.join = False

    def __repr__(self):
        return "Node(%d, port=%d)" % (self.id, self.client_port)

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def command(self):
        c = self.cluster
        cmd = [tumblerd_path(), "--bind", HOST,
               "--port", str(self.client_port), "--data-dir", self.data_dir]
        if not c.single:
            cmd[1:1] = ["--node-id", str(self.id)]
        if c.single:
            cmd += ["--raft-port", str(self.raft_port)]
        else:
            cmd += ["--peers", c.peers_arg()]
            if self.raft_bind_port != self.raft_port:
                cmd += ["--raft-bind", "%s:%d" % (HOST, self.raft_bind_port)]
            cmd += ["--election-timeout-ms", str(c.election_timeout_ms)]
            if self.join:
                cmd += ["--join"]
        return cmd + list(c.extra_opts)

    def start(self):
        assert not self.alive(), "node %d already running" % self.id
        self.starts += 1
        cmd = self.command()
        with open(self.log_path, "ab") as logf:
            logf.write(("\n===== %.3f start #%d: %s\n"
                        % (time.monotonic(), self.starts, " ".join(cmd))).encode())
            logf.flush()
            self.proc = track(subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=logf,
                                               stderr=logf, cwd=os.path.dirname(self.data_dir)))
        self.stopped = False
        return self

    def note(self, text):
        try:
            with open(self.log_path, "ab") as f:
                f.write(("===== %.3f harness: %s\n" % (time.monotonic(), text)).encode())
        except OSError:
            pass

    def kill9(self):
        if self.proc is None:
            return None
        rc = kill_tracked(self.proc)
        self.note("SIGKILL (rc=%s)" % rc)
        self.proc = None
        self.stopped = False
        return rc

    def sigstop(self):
        assert self.alive()
        os.kill(self.proc.pid, signal.SIGSTOP)
        self.stopped = True
        self.note("SIGSTOP")

    def sigcont(self):
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.note("SIGCONT")
        self.stopped = False

    def conn(self, timeout=2.0):
        return Conn(self.client_port, timeout=timeout, connect_timeout=1.0)

    def info(self, timeout=1.0):
        """INFO as a dict, or None if the node does not answer in time."""
        if not self.alive() or self.stopped:
            return None
        try:
            with self.conn(timeout=timeout) as c:
                r = c.call("INFO", timeout=timeout)
        except NET_ERRORS:
            return None
        if isinstance(r, RespError):
            return None
        return parse_info(r)

    def digest(self, timeout=2.0):
        """(applied_index, state_digest) from `INFO digest` (both from one
        moment of the node), or None if it does not answer in time."""
        if not self.alive() or self.stopped:
            return None
        try:
            with self.conn(timeout=timeout) as c:
                r = c.call("INFO", "digest", timeout=timeout)
        except NET_ERRORS:
            return None
        if isinstance(r, RespError):
            return None
        inf = parse_info(r)
        return int(inf.get("applied_index", -1)), inf.get("state_digest")

    def call(self, *args, timeout=2.0):
        with self.conn(timeout=timeout) as c:
            return c.call(*args, timeout=timeout)

    def log_tail(self, lines=60):
        try:
            with open(self.log_path, "rb") as f:
                text = f.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(text[-lines:])


# --------------------------------------------------------------------------
# Cluster
# --------------------------------------------------------------------------

class Cluster:
    """N tumblerd nodes on loopback.

    n=1 starts a single node without --peers (what works before cluster mode).
    proxies=True puts a RaftProxy in front of every node's raft transport
    (advertised address = proxy, --raft-bind = real listener) for partitions.
    """

    def __init__(self, n=3, election_timeout_ms=300, proxies=False, extra_opts=(),
                 root=None, name="cluster"):
        assert n in (1, 3, 5), n
        self.n = n
        self.single = (n == 1)
        self.election_timeout_ms = election_timeout_ms
        self.extra_opts = list(extra_opts)
        self.root = root or tempfile.mkdtemp(prefix="tumbler-%s-" % name)
        self.proxies = {}
        self.nodes = {}
        ports = free_ports(3 * n)
        for i in range(1, n + 1):
            cp, rp, bp = ports[3 * (i - 1):3 * i]
            self.nodes[i] = Node(self, i, cp, rp, bp if (proxies and not self.single) else rp)
        if proxies and not self.single:
            from raft_proxy import RaftProxy
            for i, node in self.nodes.items():
                self.proxies[i] = RaftProxy(i, node.raft_port, node.raft_bind_port,
                                            log=self._proxy_log).start()
        self.events = []           # (monotonic time, text) of harness actions

    def _proxy_log(self, text):
        self.event("proxy: " + text)

    def event(self, text):
        self.events.append((time.monotonic(), text))

    # -- addresses
    def peers_arg(self):
        return ",".join("%d=%s:%d" % (i, HOST, n.raft_port) for i, n in sorted(self.nodes.items()))

    def client_addrs(self):
        return ["%s:%d" % (HOST, n.client_port) for _, n in sorted(self.nodes.items())]

    def node(self, x):
        return x if isinstance(x, Node) else self.nodes[x]

    def node_by_port(self, port):
        for n in self.nodes.values():
            if n.client_port == port:
                return n
        return None

    def live_nodes(self):
        return [n for _, n in sorted(self.nodes.items()) if n.alive() and not n.stopped]

    # -- lifecycle
    def start(self, timeout=20.0):
        for node in self.nodes.values():
            node.start()
        self.event("start all")
        self.wait_serving(timeout)
        return self

    def start_all(self, timeout=20.0):
        for node in self.nodes.values():
            if not node.alive():
                node.start()
        self.event("start_all")
        self.wait_serving(timeout)

    def stop_all(self):
        """kill -9 of every node."""
        self.event("kill -9 all")
        for node in self.nodes.values():
            node.kill9()

    def kill9(self, node):
        node = self.node(node)
        self.event("kill -9 node %d" % node.id)
        return node.kill9()

    def stop(self, node):
        node = self.node(node)
        self.event("SIGSTOP node %d" % node.id)
        node.sigstop()

    def cont(self, node):
        node = self.node(node)
        self.event("SIGCONT node %d" % node.id)
        node.sigcont()

    def restart(self, node, kill=True):
        node = self.node(node)
        if kill or not node.alive():
            node.kill9()
        self.event("restart node %d" % node.id)
        node.start()

    def isolate(self, node):
        node = self.node(node)
        self.event("isolate node %d" % node.id)
        for p in self.proxies.values():
            p.isolate(node.id)

    def heal(self):
        self.event("heal")
        for p in self.proxies.values():
            p.heal()

    def teardown(self, keep=False):
        for p in self.proxies.values():
            p.close()
        for node in self.nodes.values():
            node.kill9()
        if keep:
            sys.stderr.write("cluster data kept at %s\n" % self.root)
        else:
            shutil.rmtree(self.root, ignore_errors=True)

    # -- state
    def infos(self, timeout=1.0):
        """{node_id: INFO dict or None} for every node, queried in parallel."""
        out = {}
        threads = []

        def q(i, node):
            out[i] = node.info(timeout)

        for i, node in self.nodes.items():
            t = threading.Thread(target=q, args=(i, node), daemon=True)
            t.start()
            threads.append(t)
        for t in threads:
            t.join(timeout + 1.0)
        return {i: out.get(i) for i in self.nodes}

    def leader(self, timeout=10.0, exclude=()):
        """The node that reports role:leader and serving (a single one among the
        live nodes, and the others that know a leader agree), polled for at
        most `timeout` s. Raises AssertionError if there is none."""
        exclude = {self.node(x).id for x in exclude}

        def find():
            infos = self.infos()
            leaders = [i for i, inf in infos.items()
                       if inf and inf.get("role") == "leader" and inf.get("serving", "1") == "1"
                       and i not in exclude]
            if len(leaders) != 1:
                return None
            lid = leaders[0]
            term = infos[lid].get("term")
            # every other live node in the same term must point to it
            for i, inf in infos.items():
                if inf and i != lid and inf.get("term") == term and inf.get("leader_id") not in (None, "", "0", str(lid)):
                    return None
            return self.nodes[lid]

        return wait_until(find, timeout, interval=0.05, what="a single serving leader")

    def wait_serving(self, timeout=15.0, exclude=()):
        """A leader that answers a state command with something other than
        TRYAGAIN/NOTLEADER; returns it."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            dead = [n for n in self.nodes.values() if n.proc is not None and n.proc.poll() is not None]
            if dead:
                raise AssertionError("node(s) %s exited (rc %s)\n%s" % (
                    [n.id for n in dead], [n.proc.returncode for n in dead], self.log_tails(20)))
            try:
                ldr = self.leader(timeout=max(0.1, deadline - time.monotonic()), exclude=exclude)
            except AssertionError as e:
                last = e
                break
            try:
                r = ldr.call("SESSION", "KEEPALIVE", 2 ** 63 - 1, timeout=2.0)
                last = r
                if not (isinstance(r, RespError) and r.code in ("TRYAGAIN", "NOTLEADER")):
                    return ldr
            except NET_ERRORS as e:
                last = e
            time.sleep(0.05)
        raise AssertionError("cluster not serving within %.1fs (last: %r)\n%s"
                             % (timeout, last, self.describe()))

    def describe(self):
        lines = []
        for i, inf in self.infos().items():
            node = self.nodes[i]
            if inf is None:
                lines.append("node %d: %s" % (i, "down" if not node.alive() else
                                              ("stopped" if node.stopped else "no answer")))
            else:
                lines.append("node %d: " % i + " ".join(
                    "%s=%s" % (k, inf.get(k)) for k in
                    ("role", "serving", "term", "leader_id", "commit_index", "applied_index",
                     "last_token")))
        return "\n".join(lines)

    def digests(self, timeout=15.0):
        """Waits (bounded) until every live node reports the same applied_index
        and it equals the leader's commit_index; returns {node_id: (applied_index,
        state_digest)}."""
        def same():
            infos = {i: inf for i, inf in self.infos().items() if self.nodes[i].alive()}
            if any(inf is None for inf in infos.values()):
                return None
            applied = {inf.get("applied_index") for inf in infos.values()}
            if len(applied) != 1:
                return None
            commits = {inf.get("commit_index") for inf in infos.values()
                       if inf.get("role") == "leader"}
            if commits and commits != applied:
                return None
            # The digest is asked for separately (INFO leaves it out: it
            # encodes the whole state); every node must still be at that index.
            digests = {i: self.nodes[i].digest() for i in infos}
            if any(d is None or str(d[0]) != next(iter(applied)) for d in digests.values()):
                return None
            return digests

        return wait_until(same, timeout, interval=0.1,
                          what="equal applied_index on every live node")

    def log_tails(self, lines=40):
        return "\n".join("----- node %d (%s) -----\n%s" % (i, n.log_path, n.log_tail(lines))
                         for i, n in sorted(self.nodes.items()))

    # -- client helpers
    def call_leader(self, *args, timeout=10.0, per_call=2.0):
        """Sends one command to the cluster, following NOTLEADER and retrying
        TRYAGAIN / network errors across the nodes until `timeout`. Returns the
        first reply that is not NOTLEADER/TRYAGAIN."""
        deadline = time.monotonic() + timeout
        order = [n.client_port for _, n in sorted(self.nodes.items())]
        target = None
        i = 0
        last = None
        while time.monotonic() < deadline:
            port = target if target else order[i % len(order)]
            target = None
            i += 1
            try:
                with Conn(port, timeout=per_call, connect_timeout=0.5) as c:
                    r = c.call(*args, timeout=per_call)
            except NET_ERRORS as e:
                last = e
                time.sleep(0.02)
                continue
            last = r
            if isinstance(r, RespError) and r.code == "NOTLEADER":
                addr = parse_notleader(r)
                if addr:
                    target = addr[1]
                else:
                    time.sleep(0.05)
                continue
            if isinstance(r, RespError) and r.code == "TRYAGAIN":
                time.sleep(0.05)
                continue
            return r
        raise AssertionError("%r: no answer from a leader within %.1fs (last %r)"
                             % (args, timeout, last))

    def fresh_lock_cycle(self, name, timeout=15.0, wait_ms=5000):
        """A fresh client opens a session, locks `name` (waiting), unlocks and
        closes. Returns the token. Raises AssertionError if it cannot."""
        deadline = time.monotonic() + timeout
        sid = self.call_leader("SESSION", "OPEN", 10000, "NAME", "fresh-client",
                               timeout=max(1.0, deadline - time.monotonic()))
        assert isinstance(sid, int), "SESSION OPEN -> %r" % (sid,)
        try:
            r = self.call_leader("LOCK", name, sid, "WAIT", wait_ms,
                                 timeout=max(1.0, deadline - time.monotonic()),
                                 per_call=wait_ms / 1000.0 + 2.0)
            assert is_grant(r), "fresh LOCK %r -> %r" % (name, r)
            u = self.call_leader("UNLOCK", name, sid, timeout=max(1.0, deadline - time.monotonic()))
            assert u == 0, "fresh UNLOCK %r -> %r" % (name, u)
            return r[0]
        finally:
            try:
                self.call_leader("SESSION", "CLOSE", sid, timeout=5.0)
            except AssertionError:
                pass


def dump_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1, default=str)
