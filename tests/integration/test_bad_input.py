"""Malformed and hostile input: every case gets an -ERR (a protocol error may
then close the connection, as Redis does), the server keeps serving other
connections, and the state is unchanged."""

import random
import socket
import time
import unittest

from harness import (ConnectionClosed, LockTestMixin, ReplyTimeout, RespError,
                     SharedServerTestCase, encode_command, state_snapshot)

# Protocol-level garbage. The reply must be an -ERR; the connection may close.
PROTOCOL_CASES = [
    ("huge multibulk count", b"*999999999\r\n"),
    ("huge multibulk count with data", b"*999999999\r\n$4\r\nPING\r\n"),
    ("huge bulk length", b"*1\r\n$999999999\r\n"),
    ("bulk length 2^64", b"*1\r\n$18446744073709551616\r\n"),
    ("negative bulk length", b"*1\r\n$-5\r\nPING\r\n"),
    ("null bulk in request", b"*2\r\n$4\r\nPING\r\n$-1\r\n"),
    ("non-numeric multibulk count", b"*abc\r\n$4\r\nPING\r\n"),
    ("non-numeric bulk length", b"*1\r\n$abc\r\nPING\r\n"),
    ("bulk length with sign and junk", b"*1\r\n$+4x\r\nPING\r\n"),
    ("missing $ in multibulk", b"*1\r\nPING\r\n"),
    ("missing CRLF after bulk data", b"*1\r\n$4\r\nPINGXX*1\r\n$4\r\nPING\r\n"),
    ("bare LF after bulk data", b"*1\r\n$4\r\nPING\nX"),
    ("too many arguments", encode_command(*(["PING"] + ["x"] * 100))),
    ("argument over the request bound", encode_command("PING", b"x" * 100000)),
    ("unbalanced double quote inline", b'PING "hello\r\n'),
    ("unbalanced single quote inline", b"SESSION OPEN 'abc\r\n"),
    ("closing quote followed by a letter", b'PING "a"b\r\n'),
]

# Well-formed requests with bad contents: -ERR, the connection stays usable.
COMMAND_CASES = [
    ("garbage word", b"\x01\x02garbage\x7f\r\n"),
    ("unknown command", encode_command("FLUSHALL")),
    ("unknown command lower", b"nosuchcommand a b c\r\n"),
    ("bulk header at top level", b"$4\r\n"),
    ("LOCK arity", encode_command("LOCK", "x")),
    ("UNLOCK arity", encode_command("UNLOCK")),
    ("SESSION arity", encode_command("SESSION")),
    ("SESSION OPEN arity", encode_command("SESSION", "OPEN")),
    ("CHECK arity", encode_command("CHECK", "x", 1, 2)),
    ("ttl 99", encode_command("SESSION", "OPEN", 99)),
    ("ttl 3600001", encode_command("SESSION", "OPEN", 3600001)),
    ("ttl -100", encode_command("SESSION", "OPEN", -100)),
    ("ttl 2^64", encode_command("SESSION", "OPEN", 2**64)),
    ("ttl text", encode_command("SESSION", "OPEN", "1000ms")),
    ("ttl empty", encode_command("SESSION", "OPEN", "")),
    ("ttl inline", b"SESSION OPEN 99\r\n"),
    ("WAIT 86400001", None),   # filled in per test (needs a session)
    ("WAIT -1", None),
    ("WAIT abc", None),
    ("WAIT 2^64", None),
    ("COUNT 0", encode_command("LOCKS", "COUNT", 0)),
    ("COUNT 100001", encode_command("LOCKS", "COUNT", 100001)),
    ("COUNT -5", encode_command("LOCKS", "COUNT", -5)),
    ("SESSION LIST COUNT 0", encode_command("SESSION", "LIST", "COUNT", 0)),
    ("token abc", encode_command("CHECK", "x", "abc")),
    ("token -1", encode_command("CHECK", "x", -1)),
    ("token 2^64", encode_command("CHECK", "x", 2**64)),
    ("token 1e3", encode_command("CHECK", "x", "1e3")),
    ("session abc", encode_command("LOCK", "x", "abc")),
    ("session -1", encode_command("UNLOCK", "x", -1)),
    ("session 2^64", encode_command("SESSION", "KEEPALIVE", 2**64)),
    ("empty name", None),
]


class BadInputTest(SharedServerTestCase, LockTestMixin):
    TEST_TIMEOUT = 120

    def setUp(self):
        super().setUp()
        self.sid = self.open_session(label="sentinel")
        self.other = self.open_session()
        self.lk = self.name("held")
        self.assertGrant(self.lock(self.lk, self.sid))
        self.assertGrant(self.lock(self.lk, self.sid))
        self.sh = self.name("shared")
        self.assertGrant(self.lock(self.sh, self.sid, "SHARED", "OWNER", "o"))
        self.waiting = self.waiter(self.lk, self.other, "WAIT", 60000)
        self.before = self.snapshot()

    def snapshot(self):
        return state_snapshot(self.c, [self.lk, self.sh, "x"], [self.sid, self.other])

    def assert_server_fine(self, what):
        self.assertTrue(self.server.running(), "server died after %s\n%s" % (what, self.server.log_tail(40)))
        fresh = self.conn()
        self.assertEqual(fresh.call("PING"), "PONG", "fresh connection after %s" % what)
        fresh.close()
        self.assertEqual(self.c.call("PING"), "PONG")
        self.assertEqual(self.snapshot(), self.before, "state changed by %s" % what)

    def first_reply(self, conn, what):
        try:
            r = conn.read_reply(5)
        except ConnectionClosed:
            # the reply may still be in what was received before the close
            raise AssertionError("%s: connection closed without an -ERR reply (got %r)"
                                 % (what, bytes(conn.buf)))
        except ReplyTimeout:
            raise AssertionError("%s: no reply within 5 s" % what)
        return r

    def test_protocol_errors(self):
        for what, data in PROTOCOL_CASES:
            with self.subTest(what):
                c = self.conn()
                try:
                    c.send(data)
                except OSError:
                    pass
                r = self.first_reply(c, what)
                self.assertIsInstance(r, RespError, "%s: got %r" % (what, r))
                self.assertEqual(r.code, "ERR", "%s: got %r" % (what, r))
                # either closed, or still speaking RESP
                if not c.is_closed_by_peer(0.2):
                    try:
                        c.send(b"PING\r\n")
                        rest = c.read_reply(2)
                        self.assertTrue(rest == "PONG" or isinstance(rest, RespError), rest)
                    except (ConnectionClosed, OSError):
                        pass
                c.close()
                self.assert_server_fine(what)

    def test_command_errors_keep_connection(self):
        c = self.conn()
        for what, data in COMMAND_CASES:
            if data is None:
                if what == "empty name":
                    data = encode_command("LOCK", "", self.sid)
                else:
                    val = {"WAIT 86400001": 86400001, "WAIT -1": -1, "WAIT abc": "abc",
                           "WAIT 2^64": 2**64}[what]
                    data = encode_command("LOCK", self.lk, self.other, "WAIT", val)
            with self.subTest(what):
                c.send(data)
                r = self.first_reply(c, what)
                self.assertIsInstance(r, RespError, "%s: got %r" % (what, r))
                self.assertEqual(r.code, "ERR", "%s: got %r" % (what, r))
                self.assertEqual(c.call("PING", "still"), b"still", "after %s" % what)
                self.assert_server_fine(what)

    def test_negative_multibulk_count(self):
        # Redis ignores '*-1' / '*0' requests (no reply); an -ERR is also fine.
        for data in (b"*-1\r\n", b"*-5\r\n", b"*0\r\n"):
            with self.subTest(data):
                c = self.conn()
                c.send(data + b"PING\r\n")
                r = self.first_reply(c, repr(data))
                if isinstance(r, RespError):
                    self.assertEqual(r.code, "ERR")
                else:
                    self.assertEqual(r, "PONG")
                c.close()
                self.assert_server_fine(repr(data))

    def test_inline_1mib_without_newline(self):
        c = self.conn()
        chunk = b"A" * 8192
        got = b""
        sent = 0
        c.sock.setblocking(False)
        deadline = time.monotonic() + 20
        # Send 1 MiB without a newline, reading as we go: the server answers
        # -ERR once the line is over its bound and may then close.
        while sent < 1024 * 1024 and time.monotonic() < deadline:
            try:
                sent += c.sock.send(chunk)
            except BlockingIOError:
                time.sleep(0.005)
            except OSError:
                break
            try:
                data = c.sock.recv(65536)
                if not data:
                    break
                got += data
                if b"\r\n" in got:
                    break
            except BlockingIOError:
                pass
            except OSError:
                break
        c.sock.setblocking(True)
        c.buf += got
        r = self.first_reply(c, "1 MiB inline line")
        self.assertIsInstance(r, RespError, "1 MiB inline: got %r" % (r,))
        self.assertEqual(r.code, "ERR")
        c.close()
        self.assert_server_fine("1 MiB inline line")

    def test_binary_junk(self):
        rng = random.Random(20240611)
        for i in range(20):
            junk = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 2000)))
            c = self.conn()
            try:
                c.send(junk + b"\r\n")
            except OSError:
                pass
            # Junk may parse as several inline commands, or wait for more bytes
            # (e.g. '*5' header); whatever comes back must be errors, never a
            # state change, and the server must live.
            deadline = time.monotonic() + 0.5
            while time.monotonic() < deadline:
                try:
                    r = c.read_reply(max(0.01, deadline - time.monotonic()))
                except (ReplyTimeout, ConnectionClosed):
                    break
                except Exception as e:  # reply bytes that are not RESP: a bug
                    self.fail("junk #%d: server sent unparsable bytes: %r (%r)" % (i, e, bytes(c.buf[:200])))
                self.assertIsInstance(r, RespError, "junk #%d %r -> %r" % (i, junk[:60], r))
            c.close()
            self.assert_server_fine("junk #%d" % i)

    def test_junk_after_valid_command_on_same_connection(self):
        c = self.conn()
        c.send(encode_command("PING", "ok") + b"*1\r\n$-7\r\n")
        self.assertEqual(c.read_reply(3), b"ok")
        r = self.first_reply(c, "junk after valid")
        self.assertIsInstance(r, RespError)
        self.assertEqual(r.code, "ERR")
        self.assert_server_fine("junk after valid")

    def test_half_request_then_close(self):
        for data in (b"*3\r\n$4\r\nLOCK\r\n$3\r\nabc", b"*2\r\n", b"SESSION OPEN 1000"):
            c = self.conn()
            c.send(data)
            c.sock.shutdown(socket.SHUT_WR)
            try:
                c.read_all_until_close(2)
            finally:
                c.close()
            self.assert_server_fine("half request %r" % data)

    def test_many_connections_abandoned(self):
        for i in range(50):
            c = self.conn()
            c.send(encode_command("LOCK", self.lk, self.other, "WAIT", 60000)[:10 + i])
            c.close()
        self.assert_server_fine("50 abandoned connections")


if __name__ == "__main__":
    unittest.main()
