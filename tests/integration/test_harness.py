"""Self-tests of the harness that need no server: the RESP parser on canned
bytes, the encoder, the helpers, and the Conn class against a fake in-process
socket server."""

import math
import os
import socket
import subprocess
import sys
import threading
import time
import unittest

from harness import (BigNumber, ConnectionClosed, Conn, Incomplete, NO_REPLY,
                     ProtocolError, Push, ReplyTimeout, RespError, RespMap,
                     RespSet, SimpleString, Verbatim, as_map, encode_command,
                     parse_info, parse_reply)
import free_ports  # scripts/free_ports.py, on sys.path through harness


def parse_all(data):
    v, p = parse_reply(data, 0)
    assert p == len(data), (p, len(data))
    return v


class ParserTest(unittest.TestCase):
    def test_simple_types(self):
        v = parse_all(b"+OK\r\n")
        self.assertIsInstance(v, SimpleString)
        self.assertEqual(v, "OK")
        e = parse_all(b"-NOSESSION session 7 does not exist\r\n")
        self.assertIsInstance(e, RespError)
        self.assertEqual(e.code, "NOSESSION")
        self.assertEqual(e.message, "session 7 does not exist")
        self.assertEqual(parse_all(b"-ERR\r\n").code, "ERR")
        self.assertEqual(parse_all(b":42\r\n"), 42)
        self.assertEqual(parse_all(b":-3\r\n"), -3)
        self.assertEqual(parse_all(b":18446744073709551615\r\n"), 2**64 - 1)
        self.assertEqual(parse_all(b"$5\r\nhello\r\n"), b"hello")
        self.assertEqual(parse_all(b"$0\r\n\r\n"), b"")
        self.assertEqual(parse_all(b"$4\r\na\r\nb\r\n"), b"a\r\nb")  # binary safe
        self.assertIsNone(parse_all(b"$-1\r\n"))
        self.assertIsNone(parse_all(b"*-1\r\n"))
        self.assertEqual(parse_all(b"*0\r\n"), [])

    def test_resp3_types(self):
        self.assertIsNone(parse_all(b"_\r\n"))
        self.assertIs(parse_all(b"#t\r\n"), True)
        self.assertIs(parse_all(b"#f\r\n"), False)
        self.assertEqual(parse_all(b",1.5\r\n"), 1.5)
        self.assertEqual(parse_all(b",inf\r\n"), math.inf)
        self.assertEqual(parse_all(b",-inf\r\n"), -math.inf)
        self.assertTrue(math.isnan(parse_all(b",nan\r\n")))
        b = parse_all(b"(3492890328409238509324850943850943825024385\r\n")
        self.assertIsInstance(b, BigNumber)
        self.assertEqual(b, 3492890328409238509324850943850943825024385)
        v = parse_all(b"=15\r\ntxt:Some string\r\n")
        self.assertIsInstance(v, Verbatim)
        self.assertEqual(v, b"Some string")
        self.assertEqual(v.fmt, "txt")
        e = parse_all(b"!21\r\nSYNTAX invalid syntax\r\n")
        self.assertIsInstance(e, RespError)
        self.assertEqual(e.code, "SYNTAX")
        st = parse_all(b"~2\r\n+a\r\n:1\r\n")
        self.assertIsInstance(st, RespSet)
        self.assertEqual(st, ["a", 1])
        pu = parse_all(b">2\r\n$7\r\nmessage\r\n:1\r\n")
        self.assertIsInstance(pu, Push)
        m = parse_all(b"%2\r\n+first\r\n:1\r\n$6\r\nsecond\r\n*2\r\n:2\r\n:3\r\n")
        self.assertIsInstance(m, RespMap)
        self.assertEqual(m, {"first": 1, b"second": [2, 3]})
        # attribute dropped, value kept
        self.assertEqual(parse_all(b"|1\r\n+ttl\r\n:3\r\n:7\r\n"), 7)
        # aggregate keys become hashable
        m = parse_all(b"%1\r\n*2\r\n:1\r\n:2\r\n+v\r\n")
        self.assertEqual(m, {(1, 2): "v"})

    def test_nested(self):
        data = (b"*3\r\n:1\r\n*2\r\n$1\r\na\r\n%1\r\n+k\r\n_\r\n$-1\r\n")
        self.assertEqual(parse_all(data), [1, [b"a", {"k": None}], None])

    def test_incomplete_at_every_split(self):
        samples = [
            b"+OK\r\n", b"-ERR x\r\n", b":12\r\n", b"$5\r\nhello\r\n", b"$-1\r\n",
            b"*2\r\n$1\r\na\r\n:3\r\n", b"%1\r\n+a\r\n#t\r\n", b"=7\r\ntxt:abc\r\n",
            b"|1\r\n+a\r\n+b\r\n:1\r\n", b"_\r\n", b",3.25\r\n",
        ]
        for data in samples:
            for cut in range(len(data)):
                with self.assertRaises(Incomplete, msg=(data, cut)):
                    parse_reply(data[:cut], 0)
            parse_all(data)

    def test_two_replies_in_buffer(self):
        data = b"+PONG\r\n$2\r\nhi\r\n"
        v1, p = parse_reply(data, 0)
        v2, p2 = parse_reply(data, p)
        self.assertEqual((v1, v2, p2), ("PONG", b"hi", len(data)))

    def test_malformed(self):
        for data in [b"?x\r\n", b":abc\r\n", b"$abc\r\n", b"$-2\r\n", b"*-5\r\n",
                     b"$3\r\nabcXY", b"#x\r\n", b"_x\r\n", b",abc\r\n",
                     b"=3\r\nabc\r\n", b"%-1\r\n"]:
            with self.assertRaises(ProtocolError, msg=data):
                parse_reply(data, 0)

    def test_encode(self):
        self.assertEqual(encode_command("PING"), b"*1\r\n$4\r\nPING\r\n")
        self.assertEqual(encode_command("LOCK", b"a\x00b", 7),
                         b"*3\r\n$4\r\nLOCK\r\n$3\r\na\x00b\r\n$1\r\n7\r\n")
        self.assertEqual(encode_command("X", ""), b"*2\r\n$1\r\nX\r\n$0\r\n\r\n")

    def test_helpers(self):
        self.assertEqual(as_map([b"a", 1, b"b", b"x"]), {"a": 1, "b": b"x"})
        self.assertEqual(as_map(RespMap({b"a": 1})), {"a": 1})
        with self.assertRaises(AssertionError):
            as_map([1, 2, 3])
        info = parse_info(b"# Server\r\nrole:leader\r\nterm:3\r\n\r\nversion:0.1.0\r\n")
        self.assertEqual(info, {"role": "leader", "term": "3", "version": "0.1.0"})


class FakeServer:
    """Accepts one connection and replays a script: for each expected request
    prefix, sends the given reply bytes (with an optional delay)."""

    def __init__(self, script):
        self.script = script
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(1)
        self.port = self.lsock.getsockname()[1]
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        c, _ = self.lsock.accept()
        c.settimeout(5)
        buf = b""
        try:
            for expect, reply, delay in self.script:
                while len(buf) < len(expect):
                    chunk = c.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                assert buf.startswith(expect), (buf, expect)
                buf = buf[len(expect):]
                time.sleep(delay)
                if reply is None:
                    c.close()
                    return
                # dribble the reply byte by byte to exercise reassembly
                for i in range(len(reply)):
                    c.sendall(reply[i:i + 1])
        finally:
            c.close()
            self.lsock.close()


class ConnTest(unittest.TestCase):
    def test_call_pipeline_timeout_close(self):
        ping = encode_command("PING")
        srv = FakeServer([
            (ping, b"+PONG\r\n", 0),
            (ping + ping, b"+PONG\r\n*2\r\n:1\r\n:2\r\n", 0),
            (ping, b"$-1\r\n", 0.5),
            (ping, None, 0),
        ])
        with Conn(srv.port, timeout=2) as c:
            self.assertEqual(c.call("PING"), "PONG")
            self.assertEqual(c.pipeline([["PING"], ["PING"]]), ["PONG", [1, 2]])
            c.send_cmd("PING")
            self.assertIs(c.poll_reply(0.1), NO_REPLY)
            self.assertIsNone(c.read_reply(2))
            self.assertEqual(c.last_raw, b"$-1\r\n")
            c.send_cmd("PING")
            with self.assertRaises(ConnectionClosed):
                c.read_reply(2)

    def test_read_timeout(self):
        srv = FakeServer([(encode_command("PING"), b"+PO", 0)])
        with Conn(srv.port, timeout=0.3) as c:
            t0 = time.monotonic()
            with self.assertRaises((ReplyTimeout, ConnectionClosed)):
                c.call("PING")
            self.assertLess(time.monotonic() - t0, 2)


class FreePortsTest(unittest.TestCase):
    """scripts/free_ports.py: ports that no outgoing connection can take."""

    def bindable(self, port):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sk:
            try:
                sk.bind(("127.0.0.1", port))
                return True
            except OSError:
                return False

    def test_ports_are_distinct_free_and_outside_the_ephemeral_range(self):
        first, last = free_ports.ephemeral_range()
        ports = free_ports.free_ports(8)
        self.assertEqual(len(set(ports)), 8)
        for p in ports:
            self.assertFalse(first <= p <= last, (p, first, last))
            self.assertTrue(self.bindable(p), p)

    def test_windows_around_the_ephemeral_range(self):
        self.assertEqual(free_ports.windows(32768, 60999), [(10000, 32767), (61000, 65535)])
        self.assertEqual(free_ports.windows(5000, 40000), [(1024, 4999), (40001, 65535)])
        self.assertEqual(free_ports.windows(1024, 65535), [])

    def test_reads_the_kernel_range_and_falls_back_on_a_bad_file(self):
        first, last = free_ports.ephemeral_range()
        self.assertLessEqual(first, last)
        self.assertEqual(free_ports.ephemeral_range("/nonexistent/range"), (32768, 60999))

    def test_a_bound_port_is_never_handed_out(self):
        # A window of exactly 4 ports (10000-10003): three avoided, the fourth
        # held bound here, so nothing in the window may be returned.
        held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            try:
                held.bind(("127.0.0.1", 10003))
            except OSError:
                pass  # someone else holds it: as good for this test
            avoid = {10000, 10001, 10002}
            port = free_ports.free_ports(1, avoid=avoid, port_range=(10004, 65535))[0]
            self.assertNotIn(port, avoid | {10003})
            self.assertTrue(self.bindable(port), port)
        finally:
            held.close()

    def test_no_room_outside_the_range_lets_the_kernel_choose(self):
        ports = free_ports.free_ports(3, port_range=(1024, 65535))
        self.assertEqual(len(set(ports)), 3)

    def test_bad_counts_are_refused(self):
        for n in (0, -1, 1001):
            with self.assertRaises(ValueError):
                free_ports.free_ports(n)

    def test_command_line(self):
        script = os.path.join(os.path.dirname(free_ports.__file__), "free_ports.py")
        out = subprocess.run([sys.executable, script, "3"], capture_output=True, text=True,
                             timeout=30)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(len(set(int(p) for p in out.stdout.split())), 3)
        bad = subprocess.run([sys.executable, script, "three"], capture_output=True, text=True,
                             timeout=30)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("usage", bad.stderr)


if __name__ == "__main__":
    unittest.main()
