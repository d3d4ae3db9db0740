"""Integration-test harness for tumblerd (Python 3 standard library only).

- A small RESP2/RESP3 client over raw sockets: every reply type is parsed, raw
  bytes and pipelines can be sent, and every read has a deadline so that no test
  can hang.
- `Server`: starts build/tumblerd on a free loopback port with a temp data dir,
  waits until INFO shows role:leader, captures stderr to a file, stops it by PID
  (SIGTERM, then SIGKILL after a bound), and supports kill9() and restart() on the
  same data dir. It only ever signals the processes it started.
- `TumblerTestCase`: a unittest base with a per-test time bound and the server
  logs printed when a test fails.
"""

import atexit
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN_DIR = os.environ.get("TUMBLER_BIN_DIR", os.path.join(REPO, "build"))
TUMBLERD = os.path.join(BIN_DIR, "tumblerd")

sys.path.insert(0, os.path.join(REPO, "scripts"))
from free_ports import free_ports  # noqa: E402  (scripts/free_ports.py)

DEFAULT_READ_TIMEOUT = 5.0


# --------------------------------------------------------------------------
# RESP values
# --------------------------------------------------------------------------

class Incomplete(Exception):
    """More bytes are needed to parse one whole reply."""


class ProtocolError(Exception):
    """The peer sent bytes that are not valid RESP."""


class ReplyTimeout(Exception):
    """No whole reply arrived before the deadline."""


class ConnectionClosed(Exception):
    """The peer closed the connection (or reset it) before a whole reply."""


class RespError(Exception):
    """A RESP error reply ('-CODE text' or '!len blob error'). Returned as a
    value by Conn.call (not raised), so tests can assert on it."""

    def __init__(self, text):
        if isinstance(text, (bytes, bytearray)):
            text = bytes(text).decode("utf-8", "surrogateescape")
        super().__init__(text)
        self.text = text
        self.code = text.split(" ", 1)[0] if text else ""
        self.message = text.split(" ", 1)[1] if " " in text else ""

    def __eq__(self, other):
        return isinstance(other, RespError) and other.text == self.text

    def __hash__(self):
        return hash(("RespError", self.text))

    def __repr__(self):
        return "RespError(%r)" % self.text


class SimpleString(str):
    """'+OK' -> SimpleString('OK'). A str, so it compares equal to 'OK'."""

    def __repr__(self):
        return "Simple(%s)" % str.__repr__(self)


class Verbatim(bytes):
    """RESP3 verbatim string: bytes of the payload, .fmt is e.g. 'txt'."""
    fmt = ""


class BigNumber(int):
    """RESP3 big number '('."""


class RespSet(list):
    """RESP3 set '~' (order kept as sent)."""


class Push(list):
    """RESP3 push '>'."""


class RespMap(dict):
    """RESP3 map '%'. Keys are hashable forms of the parsed keys."""


def _hashable(v):
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple((k, _hashable(x)) for k, x in v.items())
    return v


def _read_line(buf, pos):
    end = buf.find(b"\r\n", pos)
    if end < 0:
        if len(buf) - pos > 64 * 1024:
            raise ProtocolError("reply line too long")
        raise Incomplete()
    return buf[pos:end], end + 2


def _parse_int(raw, what):
    try:
        if not re.fullmatch(rb"-?[0-9]+", raw):
            raise ValueError
        return int(raw)
    except ValueError:
        raise ProtocolError("bad %s: %r" % (what, raw))


MAX_DEPTH = 64


def parse_reply(buf, pos=0, depth=0):
    """Parses one RESP2/RESP3 reply at buf[pos:]. Returns (value, new_pos).
    Raises Incomplete when more bytes are needed, ProtocolError if malformed.
    Null bulk/array and RESP3 null all become None (see Conn.last_raw to tell
    them apart)."""
    if depth > MAX_DEPTH:
        raise ProtocolError("nesting too deep")
    if pos >= len(buf):
        raise Incomplete()
    t = buf[pos:pos + 1]
    line, p = _read_line(buf, pos + 1)
    if t == b"+":
        return SimpleString(line.decode("utf-8", "surrogateescape")), p
    if t == b"-":
        return RespError(line), p
    if t == b":":
        return _parse_int(line, "integer"), p
    if t == b"(":
        return BigNumber(_parse_int(line, "big number")), p
    if t == b",":
        s = line.decode("ascii", "replace").lower()
        try:
            return float(s), p
        except ValueError:
            raise ProtocolError("bad double %r" % line)
    if t == b"#":
        if line == b"t":
            return True, p
        if line == b"f":
            return False, p
        raise ProtocolError("bad boolean %r" % line)
    if t == b"_":
        if line != b"":
            raise ProtocolError("bad null %r" % line)
        return None, p
    if t in (b"$", b"=", b"!"):
        n = _parse_int(line, "bulk length")
        if n == -1 and t == b"$":
            return None, p
        if n < 0:
            raise ProtocolError("bad bulk length %d" % n)
        if len(buf) < p + n + 2:
            raise Incomplete()
        data = bytes(buf[p:p + n])
        if buf[p + n:p + n + 2] != b"\r\n":
            raise ProtocolError("bulk not followed by CRLF")
        p += n + 2
        if t == b"$":
            return data, p
        if t == b"!":
            return RespError(data), p
        if len(data) < 4 or data[3:4] != b":":
            raise ProtocolError("bad verbatim string %r" % data)
        v = Verbatim(data[4:])
        v.fmt = data[:3].decode("ascii", "replace")
        return v, p
    if t in (b"*", b"~", b">"):
        n = _parse_int(line, "aggregate length")
        if n == -1 and t == b"*":
            return None, p
        if n < 0:
            raise ProtocolError("bad aggregate length %d" % n)
        out = [] if t == b"*" else (RespSet() if t == b"~" else Push())
        for _ in range(n):
            v, p = parse_reply(buf, p, depth + 1)
            out.append(v)
        return out, p
    if t in (b"%", b"|"):
        n = _parse_int(line, "map length")
        if n < 0:
            raise ProtocolError("bad map length %d" % n)
        m = RespMap()
        for _ in range(n):
            k, p = parse_reply(buf, p, depth + 1)
            v, p = parse_reply(buf, p, depth + 1)
            m[_hashable(k)] = v
        if t == b"|":
            # An attribute: drop it, the real reply follows.
            return parse_reply(buf, p, depth)
        return m, p
    raise ProtocolError("unknown reply type byte %r" % t)


def encode_command(*args):
    """A RESP array of bulk strings. Args: bytes, str (utf-8) or int."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, bool):
            a = str(int(a))
        if isinstance(a, int):
            a = str(a)
        if isinstance(a, str):
            a = a.encode("utf-8")
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


# --------------------------------------------------------------------------
# Helpers to read replies
# --------------------------------------------------------------------------

def s(v):
    """bytes/str/SimpleString/Verbatim -> str."""
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", "surrogateescape")
    if isinstance(v, str):
        return str(v)
    raise TypeError("not a string reply: %r" % (v,))


def as_map(v):
    """A RESP3 map or a RESP2 flat key/value array -> dict with str keys."""
    if isinstance(v, dict):
        return {s(k) if isinstance(k, (bytes, str)) else k: x for k, x in v.items()}
    if isinstance(v, list) and len(v) % 2 == 0:
        out = {}
        for i in range(0, len(v), 2):
            k = v[i]
            out[s(k) if isinstance(k, (bytes, str)) else k] = v[i + 1]
        return out
    raise AssertionError("not a map reply: %r" % (v,))


def parse_info(v):
    """INFO bulk (or verbatim) text -> dict of key -> str value."""
    text = s(v)
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if ":" in line:
            k, val = line.split(":", 1)
            out[k] = val
    return out


def inspect_lock(conn, name):
    """INSPECT name normalised: dict with str keys; holders/waiters lists of
    dicts; owner/mode/name as str."""
    return normalize_inspect(conn.call("INSPECT", name), name)


def normalize_inspect(r, name=None):
    """An INSPECT reply (RESP2 or RESP3) as in inspect_lock."""
    if isinstance(r, RespError):
        raise AssertionError("INSPECT %r failed: %r" % (name, r))
    m = as_map(r)
    out = dict(m)
    out["name"] = s(m["name"]) if "name" in m else None
    out["mode"] = s(m["mode"]) if "mode" in m else None
    holders = []
    for h in m.get("holders", []) or []:
        hm = as_map(h)
        if "owner" in hm and hm["owner"] is not None:
            hm["owner"] = s(hm["owner"])
        holders.append(hm)
    out["holders"] = holders
    waiters = []
    for w in m.get("waiters", []) or []:
        wm = as_map(w)
        if "owner" in wm and wm["owner"] is not None:
            wm["owner"] = s(wm["owner"])
        if "mode" in wm and wm["mode"] is not None:
            wm["mode"] = s(wm["mode"])
        waiters.append(wm)
    out["waiters"] = waiters
    return out


def session_info(conn, sid):
    r = conn.call("SESSION", "INFO", sid)
    if isinstance(r, RespError):
        return r
    m = as_map(r)
    if "name" in m and isinstance(m["name"], (bytes, str)):
        m["name"] = s(m["name"])
    m["holds"] = [s(x) for x in (m.get("holds") or [])]
    m["waiting"] = [s(x) for x in (m.get("waiting") or [])]
    return m


def wait_until(pred, timeout=5.0, interval=0.02, what="condition"):
    """Polls pred() until truthy (returns its value) or raises AssertionError."""
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


NO_REPLY = object()


# --------------------------------------------------------------------------
# Connection
# --------------------------------------------------------------------------

class Conn:
    """One RESP connection. Every read has a deadline."""

    def __init__(self, port, host="127.0.0.1", timeout=DEFAULT_READ_TIMEOUT,
                 connect_timeout=5.0):
        self.host, self.port = host, port
        self.timeout = timeout
        self.sock = socket.create_connection((host, port), timeout=connect_timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.last_raw = b""
        self.closed = False
        self.eof = False

    # -- sending
    def send(self, data):
        """Sends raw bytes."""
        self.sock.settimeout(self.timeout)
        self.sock.sendall(data)

    def send_cmd(self, *args):
        self.send(encode_command(*args))

    # -- receiving
    def _recv_some(self, deadline):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ReplyTimeout("no reply before deadline (buffered %r)" % bytes(self.buf[:200]))
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(65536)
        except socket.timeout:
            raise ReplyTimeout("no reply before deadline (buffered %r)" % bytes(self.buf[:200]))
        except (ConnectionResetError, BrokenPipeError) as e:
            self.eof = True
            raise ConnectionClosed("connection reset: %s (buffered %r)" % (e, bytes(self.buf[:200])))
        if not chunk:
            self.eof = True
            raise ConnectionClosed("connection closed by peer (buffered %r)" % bytes(self.buf[:200]))
        self.buf += chunk

    def read_reply(self, timeout=None):
        """Reads one whole reply (returns a RespError for error replies)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            try:
                v, p = parse_reply(self.buf, 0)
            except Incomplete:
                self._recv_some(deadline)
                continue
            self.last_raw = bytes(self.buf[:p])
            del self.buf[:p]
            return v

    def poll_reply(self, timeout):
        """A reply if one arrives within `timeout` seconds, else NO_REPLY."""
        try:
            return self.read_reply(timeout)
        except ReplyTimeout:
            return NO_REPLY

    def read_all_until_close(self, timeout=3.0):
        """Reads bytes until EOF/reset or timeout; returns everything received
        (including whatever is still buffered)."""
        deadline = time.monotonic() + timeout
        while not self.eof:
            try:
                self._recv_some(deadline)
            except (ReplyTimeout, ConnectionClosed):
                break
        data = bytes(self.buf)
        self.buf.clear()
        return data

    def call(self, *args, timeout=None):
        self.send_cmd(*args)
        return self.read_reply(timeout)

    def call_ok(self, *args, timeout=None):
        """As call, but raises AssertionError on an error reply."""
        r = self.call(*args, timeout=timeout)
        if isinstance(r, RespError):
            raise AssertionError("%r -> %r" % (args, r))
        return r

    def pipeline(self, cmds, timeout=None):
        """Sends every command in one write, then reads as many replies."""
        self.send(b"".join(encode_command(*c) for c in cmds))
        return [self.read_reply(timeout) for _ in cmds]

    def is_closed_by_peer(self, timeout=2.0):
        """True if the peer closes the connection within `timeout` (any data that
        arrives is kept in the buffer)."""
        deadline = time.monotonic() + timeout
        while not self.eof:
            try:
                self._recv_some(deadline)
            except ConnectionClosed:
                return True
            except ReplyTimeout:
                return False
        return True

    def close(self):
        if not self.closed:
            self.closed = True
            try:
                self.sock.close()
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# --------------------------------------------------------------------------
# Server
# --------------------------------------------------------------------------

_running_servers = []
_running_lock = threading.Lock()


def _stop_all_at_exit():
    with _running_lock:
        servers = list(_running_servers)
    for srv in servers:
        try:
            srv.stop()
        except Exception:
            pass


atexit.register(_stop_all_at_exit)


def free_port(avoid=()):
    """A free loopback port outside the kernel's ephemeral range, so that no
    client connection takes it before the server binds it (scripts/free_ports.py)."""
    return free_ports(1, avoid=avoid)[0]


class ServerStartError(Exception):
    early_exit = False


class Server:
    """One tumblerd process on loopback.

    Server(lock_delay_ms=500, max_sessions=3, requirepass="pw", extra_args=[...])
    """

    READY_TIMEOUT = 15.0
    STOP_TIMEOUT = 10.0

    def __init__(self, lock_delay_ms=None, durability=None, max_sessions=None,
                 max_locks=None, max_waiters_per_lock=None, max_holds_per_session=None,
                 max_connections=None, requirepass=None, log_level=None,
                 extra_args=None, data_dir=None, name="tumblerd"):
        self.opts = []
        for flag, val in (("--lock-delay-ms", lock_delay_ms),
                          ("--max-sessions", max_sessions),
                          ("--max-locks", max_locks),
                          ("--max-waiters-per-lock", max_waiters_per_lock),
                          ("--max-holds-per-session", max_holds_per_session),
                          ("--max-connections", max_connections),
                          ("--requirepass", requirepass),
                          ("--log-level", log_level)):
            if val is not None:
                self.opts += [flag, str(val)]
        if durability is not None:
            self.opts.append("--durability=%s" % durability)
        self.opts += list(extra_args or [])
        self.requirepass = requirepass
        self.name = name
        self.own_dir = tempfile.mkdtemp(prefix="tumbler-it-")
        self.data_dir = data_dir or os.path.join(self.own_dir, "data")
        os.makedirs(self.data_dir, exist_ok=True)
        self.log_path = os.path.join(self.own_dir, "stderr.log")
        self.proc = None
        self.port = None
        # tumblerd's single-node raft transport has its own port (--raft-port,
        # default --port + 100). It is chosen once and kept across restarts,
        # since the raft configuration in the data dir names it.
        self.raft_port = None
        self.starts = 0
        self.starts_ok = 0
        self.last_rc = None

    # -- lifecycle
    def start(self, port=None, wait=True):
        if not os.access(TUMBLERD, os.X_OK):
            raise ServerStartError("tumblerd not found at %s (set TUMBLER_BIN_DIR)" % TUMBLERD)
        assert self.proc is None, "already running"
        errors = []
        for attempt in range(5):
            if attempt > 0 and self.starts_ok == 0:
                self.raft_port = None      # a first start may also move the raft port
            if self.raft_port is None:
                self.raft_port = free_port()
            p = port if (port is not None and attempt == 0) else free_port(avoid=(self.raft_port,))
            try:
                self._start_once(p, wait)
                self.starts_ok += 1
                return self
            except ServerStartError as e:
                errors.append(str(e))
                # A port clash shows as an early exit: retry on another port.
                # A server that runs but never becomes ready is a failure.
                if not e.early_exit:
                    raise
        raise ServerStartError("tumblerd did not start:\n" + "\n".join(errors))

    def _start_once(self, port, wait=True):
        self.port = port
        self.starts += 1
        cmd = [TUMBLERD, "--port", str(port), "--raft-port", str(self.raft_port),
               "--bind", "127.0.0.1", "--data-dir", self.data_dir] + self.opts
        logf = open(self.log_path, "ab")
        logf.write(("\n===== start #%d: %s\n" % (self.starts, " ".join(cmd))).encode())
        logf.flush()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=logf,
                                     stderr=logf, cwd=self.own_dir)
        logf.close()
        with _running_lock:
            _running_servers.append(self)
        if not wait:
            return
        try:
            self.wait_ready(self.READY_TIMEOUT)
        except ServerStartError:
            if self.proc.poll() is not None:
                self.last_rc = self.proc.returncode
                self._forget()
                self.proc = None
                e = ServerStartError("tumblerd exited early (rc=%s); log tail:\n%s"
                                     % (self.last_rc, self.log_tail(40)))
                e.early_exit = True
                raise e
            self.kill9()
            raise

    def wait_ready(self, timeout):
        """Until INFO reports role:leader (TRYAGAIN/refused are retried).

        The brief says role:leader means ready. As a safety net for the other
        tests, a command that needs the state (SESSION KEEPALIVE of an id that
        cannot exist) must then also answer something other than TRYAGAIN;
        test_durability.ReadinessTest checks that INFO does not claim
        role:leader before that."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.last_rc = self.proc.returncode
                raise ServerStartError("exited with rc=%s" % self.proc.returncode)
            try:
                with Conn(self.port, timeout=1.0, connect_timeout=1.0) as c:
                    if self.requirepass is not None:
                        c.call("AUTH", self.requirepass)
                    r = c.call("INFO")
                    last = r
                    if not isinstance(r, RespError) and parse_info(r).get("role") == "leader":
                        r = c.call("SESSION", "KEEPALIVE", 2**64 - 1)
                        last = r
                        if not (isinstance(r, RespError) and r.code == "TRYAGAIN"):
                            return
            except (OSError, ReplyTimeout, ConnectionClosed, ProtocolError) as e:
                last = e
            time.sleep(0.05)
        raise ServerStartError("not ready within %.1fs (last: %r); log tail:\n%s"
                               % (timeout, last, self.log_tail(40)))

    def _forget(self):
        with _running_lock:
            if self in _running_servers:
                _running_servers.remove(self)

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        """SIGTERM, then SIGKILL after STOP_TIMEOUT. Returns the exit status."""
        if self.proc is None:
            return None
        rc = self.proc.poll()
        if rc is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                rc = self.proc.wait(self.STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._log_note("did not stop within %.1fs of SIGTERM: SIGKILL" % self.STOP_TIMEOUT)
                self.proc.kill()
                rc = self.proc.wait(self.STOP_TIMEOUT)
        self.last_rc = rc
        self.proc = None
        self._forget()
        return rc

    def kill9(self):
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.kill()  # SIGKILL to our own child, by PID
        rc = self.proc.wait(self.STOP_TIMEOUT)
        self._log_note("killed with SIGKILL (rc=%s)" % rc)
        self.last_rc = rc
        self.proc = None
        self._forget()
        return rc

    def restart(self, kill=False):
        """Stops (SIGTERM, or SIGKILL if kill) and starts again on the same data
        dir, on the same port if it is free, else another."""
        if kill:
            self.kill9()
        else:
            self.stop()
        return self.start(port=self.port)

    def cleanup(self):
        self.stop()
        if os.environ.get("TUMBLER_KEEP_TMP"):
            return
        shutil.rmtree(self.own_dir, ignore_errors=True)

    def _log_note(self, text):
        try:
            with open(self.log_path, "ab") as f:
                f.write(("===== harness: %s\n" % text).encode())
        except OSError:
            pass

    def log_tail(self, lines=200):
        try:
            with open(self.log_path, "rb") as f:
                data = f.read()
        except OSError:
            return "(no log)"
        text = data.decode("utf-8", "replace").splitlines()
        return "\n".join(text[-lines:])

    # -- clients
    def conn(self, timeout=DEFAULT_READ_TIMEOUT, auth=True):
        c = Conn(self.port, timeout=timeout)
        if auth and self.requirepass is not None:
            r = c.call("AUTH", self.requirepass)
            assert r == "OK", r
        return c

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.cleanup()


# --------------------------------------------------------------------------
# unittest base
# --------------------------------------------------------------------------

class TestTimeout(Exception):
    pass


def _alarm_handler(signum, frame):
    raise TestTimeout("test exceeded its time bound")


class TumblerTestCase(unittest.TestCase):
    """Base class: per-test time bound (TEST_TIMEOUT seconds, SIGALRM in the main
    thread), connections closed after each test, and on failure the stderr of
    every server the test used is printed."""

    TEST_TIMEOUT = 60
    servers = ()          # class-level servers (set in setUpClass)

    def setUp(self):
        super().setUp()
        self._conns = []
        self._test_servers = []
        self.prefix = "%s-%08x-" % (self._testMethodName, random.getrandbits(32))

    def tearDown(self):
        for c in self._conns:
            c.close()
        super().tearDown()

    def conn(self, server=None, **kw):
        srv = server or self.server
        c = srv.conn(**kw)
        self._conns.append(c)
        return c

    def new_server(self, start=True, **kw):
        """A server owned by this test: stopped after it, its temp dir removed
        once its log has been printed (if the test failed)."""
        srv = Server(**kw)
        self._test_servers.append(srv)
        self.addCleanup(srv.stop)
        if start:
            srv.start()
        return srv

    def name(self, suffix):
        return self.prefix + suffix

    # -- assertions on replies
    def assertErr(self, reply, code, msg=None):
        """reply is a RESP error whose first word is `code`; returns it."""
        self.assertIsInstance(reply, RespError,
                              "expected -%s, got %r%s" % (code, reply, (" (%s)" % msg) if msg else ""))
        self.assertEqual(reply.code, code, "expected -%s, got %r%s"
                         % (code, reply, (" (%s)" % msg) if msg else ""))
        return reply

    def assertGrant(self, reply, count=None, msg=None):
        """reply is [token, hold_count]; returns the token."""
        self.assertIsInstance(reply, list, "expected a grant [token, count], got %r%s"
                              % (reply, (" (%s)" % msg) if msg else ""))
        self.assertEqual(len(reply), 2, "grant %r" % (reply,))
        token, n = reply
        self.assertIsInstance(token, int, "token %r" % (token,))
        self.assertIsInstance(n, int, "count %r" % (n,))
        self.assertGreater(token, 0)
        if count is not None:
            self.assertEqual(n, count, "hold count in %r%s" % (reply, (" (%s)" % msg) if msg else ""))
        return token

    def assertNullLock(self, reply, conn, resp3=False, msg=None):
        """reply is LOCK's null: RESP2 '*-1' (as BLPOP), RESP3 '_'."""
        self.assertIsNone(reply, "expected null, got %r%s" % (reply, (" (%s)" % msg) if msg else ""))
        self.assertEqual(conn.last_raw, b"_\r\n" if resp3 else b"*-1\r\n")

    def open_session(self, conn, ttl=60000, label=None):
        args = ["SESSION", "OPEN", ttl]
        if label is not None:
            args += ["NAME", label]
        sid = conn.call(*args)
        self.assertIsInstance(sid, int, "SESSION OPEN -> %r" % (sid,))
        self.assertGreater(sid, 0)
        return sid

    def run(self, result=None):
        if result is None:
            return super().run(result)
        before = len(result.failures) + len(result.errors)
        use_alarm = threading.current_thread() is threading.main_thread()
        if use_alarm:
            old = signal.signal(signal.SIGALRM, _alarm_handler)
            signal.alarm(int(self.TEST_TIMEOUT))
        try:
            return super().run(result)
        finally:
            if use_alarm:
                signal.alarm(0)
                signal.signal(signal.SIGALRM, old)
            if len(result.failures) + len(result.errors) > before:
                self._dump_logs()
            for srv in getattr(self, "_test_servers", []):
                srv.cleanup()

    def _dump_logs(self):
        seen = []
        for srv in list(getattr(type(self), "servers", ()) or ()) + list(getattr(self, "_test_servers", [])):
            if srv in seen:
                continue
            seen.append(srv)
            sys.stderr.write("\n----- %s stderr (%s) for %s -----\n%s\n----- end -----\n"
                             % (srv.name, srv.log_path, self.id(), srv.log_tail(150)))
            sys.stderr.flush()


class SharedServerTestCase(TumblerTestCase):
    """One server for the whole class (SERVER_KW passed to Server)."""

    SERVER_KW = {}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.server = Server(**cls.SERVER_KW)
        cls.servers = (cls.server,)
        try:
            cls.server.start()
        except Exception:
            sys.stderr.write("\n----- server log -----\n%s\n" % cls.server.log_tail(100))
            cls.server.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.server.cleanup()
        super().tearDownClass()

    def open_session(self, conn=None, ttl=60000, label=None):
        return TumblerTestCase.open_session(self, conn or self.c, ttl, label)

    def setUp(self):
        super().setUp()
        if not self.server.running():
            raise AssertionError("server is not running (crashed?) rc=%s\n%s"
                                 % (self.server.proc and self.server.proc.poll(),
                                    self.server.log_tail(60)))
        self.c = self.conn()


def state_snapshot(conn, names=(), sids=()):
    """What a failed request must not change: INSPECT of `names`, SESSION INFO
    of `sids` (without the moving expires_in_ms) and INFO's counts."""
    snap = {"locks": {}, "sessions": {}}
    for n in names:
        snap["locks"][n] = inspect_lock(conn, n)
    for sid in sids:
        si = session_info(conn, sid)
        if isinstance(si, dict):
            si = dict(si)
            si.pop("expires_in_ms", None)
        snap["sessions"][sid] = si
    info = parse_info(conn.call("INFO"))
    snap["counts"] = {k: info.get(k) for k in ("sessions", "locks", "waiters")}
    return snap


class LockTestMixin:
    """Helpers shared by the lock tests (need self.c and self.conn())."""

    def lock(self, name, sid, *opts, conn=None):
        return (conn or self.c).call("LOCK", name, sid, *opts)

    def unlock(self, name, sid, *opts, conn=None):
        return (conn or self.c).call("UNLOCK", name, sid, *opts)

    def waiter(self, name, sid, *opts, server=None):
        """A new connection blocked in LOCK name sid opts... (WAIT given by opts);
        returns it once the server has queued the wait."""
        before = len(inspect_lock(self.c, name)["waiters"])
        w = self.conn(server)
        w.send_cmd("LOCK", name, sid, *opts)
        wait_until(lambda: len(inspect_lock(self.c, name)["waiters"]) > before,
                   what="wait of session %s on %r queued" % (sid, name))
        return w

    def waiter_sessions(self, name):
        return [w["session"] for w in inspect_lock(self.c, name)["waiters"]]

    def holder_sessions(self, name):
        return [h["session"] for h in inspect_lock(self.c, name)["holders"]]
