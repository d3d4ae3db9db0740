"""Self-tests of the harness pieces that need no cluster: the fenced
resource's rules, the raft proxy (two fake endpoints speaking libraft's
handshake), the worker against a single tumblerd, and the checks themselves
(fed with histories that must fail)."""

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checks  # noqa: E402
from fenced_resource import FencedResource  # noqa: E402
from harness import Cluster, Conn, track, kill_tracked, wait_until  # noqa: E402
from raft_proxy import RaftProxy, encode_handshake, read_handshake  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


class ResourceRules(unittest.TestCase):
    def test_fencing_and_interruption(self):
        r = FencedResource()
        self.assertEqual(r.write("L", 5, "a", "begin"), "OK")
        # b gets a newer token while a is open: an interruption, not an overlap
        self.assertEqual(r.write("L", 6, "b", "begin"), "OK")
        self.assertEqual(r.write("L", 5, "a", "end"), "STALE")
        self.assertEqual(r.write("L", 6, "b", "end"), "OK")
        h = r.history()
        self.assertEqual(h["overlaps"], [])
        self.assertEqual(len(h["interruptions"]), 1)
        self.assertTrue(h["interruptions"][0]["fenced"])
        self.assertEqual(len(h["stale"]), 1)
        # a lower token later is stale too
        self.assertEqual(r.write("L", 4, "c", "begin"), "STALE")
        # other locks are independent
        self.assertEqual(r.write("M", 1, "c", "begin"), "OK")

    def test_same_token_two_clients_is_overlap(self):
        r = FencedResource()
        r.write("L", 7, "a", "begin")
        r.write("L", 7, "b", "begin")
        self.assertEqual(len(r.history()["overlaps"]), 1)

    def test_tcp(self):
        r = FencedResource().start()
        try:
            with socket.create_connection(("127.0.0.1", r.port), timeout=2) as sk:
                f = sk.makefile("rwb")
                for line, want in ((b"WRITE L 3 x begin\n", b"OK"), (b"WRITE L 2 y begin\n", b"STALE"),
                                   (b"WRITE L 3 x end\n", b"OK"), (b"PING\n", b"PONG")):
                    f.write(line)
                    f.flush()
                    self.assertEqual(f.readline().strip(), want)
                f.write(b"DUMP\n")
                f.flush()
                h = json.loads(f.readline())
                self.assertEqual(len(h["writes"]), 3)
        finally:
            r.close()


class _FakeRaftServer:
    """Accepts connections and records (handshake sender, bytes received)."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.got = []
        self.conns = []
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            threading.Thread(target=self._read, args=(c,), daemon=True).start()

    def _read(self, c):
        try:
            _, version, sender, addr = read_handshake(c)
            data = b""
            while True:
                chunk = c.recv(4096)
                if not chunk:
                    break
                data += chunk
                self.got.append((sender, addr, chunk))
        except OSError:
            pass

    def close(self):
        self.sock.close()
        for c in self.conns:
            try:
                c.close()
            except OSError:
                pass


class ProxyTest(unittest.TestCase):
    def test_handshake_forward_isolate_heal(self):
        srv = _FakeRaftServer()
        proxy = RaftProxy(2, 0, srv.port).start()
        try:
            def dial(sender):
                c = socket.create_connection(("127.0.0.1", proxy.listen_port), timeout=2)
                c.sendall(encode_handshake(sender, "127.0.0.1:%d" % (9000 + sender)))
                return c

            c1 = dial(1)
            c1.sendall(b"hello-from-1")
            wait_until(lambda: any(g[0] == 1 and g[2] == b"hello-from-1" for g in srv.got), 3,
                       what="forwarded bytes")
            self.assertEqual([g[1] for g in srv.got if g[0] == 1][0], "127.0.0.1:9001")
            c3 = dial(3)
            c3.sendall(b"x")
            wait_until(lambda: proxy.senders() == [1, 3], 3, what="two links")
            # isolating sender 1 drops its link only
            proxy.isolate(1)
            c1.settimeout(2)
            self.assertEqual(c1.recv(10), b"")
            self.assertEqual(proxy.senders(), [3])
            # a new connection from 1 is refused (closed right after the handshake)
            c1b = dial(1)
            c1b.settimeout(2)
            self.assertEqual(c1b.recv(10), b"")
            # isolating the proxy's own node drops everything
            proxy.isolate(2)
            c3.settimeout(2)
            self.assertEqual(c3.recv(10), b"")
            self.assertEqual(proxy.senders(), [])
            proxy.heal()
            c1c = dial(1)
            c1c.sendall(b"again")
            wait_until(lambda: any(g[2] == b"again" for g in srv.got), 3, what="after heal")
            for c in (c1b, c1c, c3, c1):
                c.close()
        finally:
            proxy.close()
            srv.close()


class SingleNodeWorkerTest(unittest.TestCase):
    """Workers against one tumblerd (no --peers): the grant logs, resource
    writes and checks work end to end."""

    def test_workers_single_node(self):
        cl = Cluster(n=1, name="single")
        res = FencedResource().start()
        ok = False
        try:
            cl.start()
            logdir = tempfile.mkdtemp(dir=cl.root)
            procs = []
            for i in range(3):
                log = os.path.join(logdir, "w%d.log" % i)
                procs.append(track(subprocess.Popen(
                    [sys.executable, os.path.join(HERE, "worker.py"), "--id", "w%d" % i,
                     "--nodes", ",".join(cl.client_addrs()), "--resource", str(res.port),
                     "--locks", "A,B", "--log", log, "--duration", "4", "--ttl", "2000"])))
            for p in procs:
                p.wait(20)
                kill_tracked(p)
            logs = checks.load_worker_logs(logdir)
            grants = [e for e in logs if e["ev"] == "grant"]
            self.assertGreater(len(grants), 20, "too few grants")
            errs = checks.check_history(logs, res.history())
            self.assertEqual(errs, [])
            info = cl.nodes[1].info()
            self.assertGreaterEqual(int(info["last_token"]), max(g["token"] for g in grants))
            cl.fresh_lock_cycle("A")
            ok = True
        finally:
            res.close()
            cl.teardown(keep=not ok)


class ChecksCanFail(unittest.TestCase):
    """The history checks flag bad histories."""

    def g(self, lock, token, sid, t_req, t_ack, client="w"):
        return {"ev": "grant", "lock": lock, "token": token, "count": 1, "sid": sid,
                "t_req": t_req, "t_ack": t_ack, "client": client}

    def u(self, lock, token, sid, t_req, reply="0"):
        return {"ev": "unlock", "lock": lock, "token": token, "sid": sid, "t_req": t_req,
                "t_ack": t_req + 0.001, "reply": reply}

    def empty(self):
        return FencedResource().history()

    def test_duplicate_token(self):
        logs = [self.g("L", 5, 1, 0, 1), self.u("L", 5, 1, 1.1), self.g("L", 5, 2, 2, 3)]
        self.assertTrue(any("share token" in e for e in checks.check_history(logs, self.empty())))

    def test_token_order(self):
        logs = [self.g("L", 9, 1, 0, 1), self.u("L", 9, 1, 1.1), self.g("L", 8, 2, 2, 3)]
        self.assertTrue(any("real-time order" in e for e in checks.check_history(logs, self.empty())))

    def test_overlapping_holds(self):
        logs = [self.g("L", 1, 1, 0, 1), self.g("L", 2, 2, 1.5, 2), self.u("L", 1, 1, 3),
                self.u("L", 2, 2, 4)]
        self.assertTrue(any("both held" in e for e in checks.check_history(logs, self.empty())))

    def test_unexcused_interruption(self):
        r = FencedResource()
        r.write("L", 1, "a", "begin")
        r.write("L", 2, "b", "begin")
        logs = [self.g("L", 1, 1, 0, 0.5), self.g("L", 2, 2, 0.6, 0.7)]
        self.assertTrue(any("interrupted" in e for e in checks.check_history(logs, r.history())))

    def test_lost_grant(self):
        logs = [self.g("L", 50, 1, 0, 1)]
        self.assertTrue(checks.check_tokens_kept(logs, last_token=49, fresh_token=None))
        self.assertTrue(checks.check_tokens_kept(logs, last_token=60, fresh_token=40))
        self.assertEqual(checks.check_tokens_kept(logs, last_token=60, fresh_token=61), [])

    def test_digests(self):
        self.assertTrue(checks.check_digests({1: (10, "ab"), 2: (10, "ac"), 3: (10, "ab")}))
        self.assertTrue(checks.check_digests({1: (10, None), 2: (10, None)}))
        self.assertEqual(checks.check_digests({1: (10, "ab"), 2: (10, "ab")}), [])


if __name__ == "__main__":
    unittest.main()
