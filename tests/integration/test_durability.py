"""Durability: kill -9 under load, restart on the same data dir, nothing
acknowledged is lost and fencing tokens never go back. Also a clean SIGTERM
stop + restart."""

import random
import signal
import threading
import time
import unittest

from harness import (ConnectionClosed, Conn, LockTestMixin, ReplyTimeout,
                     RespError, TumblerTestCase, inspect_lock,
                     normalize_inspect, parse_info, session_info, wait_until)

LONG_TTL = 3600000
THREADS = 4
MAX_OPS_PER_THREAD = 50000   # keeps LOCKS MATCH <prefix> under its COUNT bound


class Ledger:
    """What clients saw acknowledged. held[name] = dict(sid, owner, token,
    count); uncertain[name] = sid of the only session that touched it (a
    request on it was sent but its reply never came)."""

    def __init__(self):
        self.sessions = set()
        self.prefixes = set()      # every name a LoadThread made starts with one
        self.held = {}
        self.uncertain = {}
        self.max_token = 0
        self.acks = 0

    def merge(self, other):
        self.sessions |= other.sessions
        self.prefixes |= other.prefixes
        self.held.update(other.held)
        self.uncertain.update(other.uncertain)
        self.max_token = max(self.max_token, other.max_token)
        self.acks += other.acks


class LoadThread(threading.Thread):
    """One client: its own connection and session; locks fresh names (some with
    an owner tag), re-enters some, unlocks some; records every ack."""

    def __init__(self, port, prefix, seed, stop, reuse=None):
        super().__init__(daemon=True)
        self.port, self.prefix, self.stop = port, prefix, stop
        self.rng = random.Random(seed)
        self.led = Ledger()
        self.reuse = reuse            # (sid, {name: entry}) from an earlier round
        self.error = None
        self.n = 0

    def run(self):
        try:
            self._run()
        except (ConnectionClosed, ReplyTimeout, OSError):
            pass  # the server was killed
        except Exception as e:  # a wrong reply: reported by the test
            self.error = e

    def _run(self):
        c = Conn(self.port, timeout=5)
        try:
            if self.reuse:
                sid, mine = self.reuse
                self.sid = sid
                held = dict(mine)
            else:
                r = c.call("SESSION", "OPEN", LONG_TTL)
                if not isinstance(r, int):
                    raise AssertionError("SESSION OPEN -> %r" % (r,))
                self.sid = r
                self.led.sessions.add(r)
                held = {}
            self.led.held = held
            self.led.prefixes.add("%s%d-" % (self.prefix, self.sid))
            while not self.stop.is_set() and self.n < MAX_OPS_PER_THREAD:
                x = self.rng.random()
                if x < 0.65 or not held:
                    name = "%s%d-%d" % (self.prefix, self.sid, self.n)
                    self.n += 1
                    owner = "t%d" % self.rng.randint(0, 2) if self.rng.random() < 0.5 else ""
                    args = ["LOCK", name, self.sid] + (["OWNER", owner] if owner else [])
                    self._send(c, args, name)
                    r = self._read(c, name)
                    tok = self._grant(r, args)
                    if r[1] != 1:
                        raise AssertionError("%r -> %r: a fresh lock has count 1" % (args, r))
                    held[name] = {"sid": self.sid, "owner": owner, "token": tok, "count": 1}
                elif x < 0.8:
                    name = self.rng.choice(list(held))
                    e = held[name]
                    args = ["LOCK", name, self.sid] + (["OWNER", e["owner"]] if e["owner"] else [])
                    self._send(c, args, name, held)
                    r = self._read(c, name, held)
                    tok = self._grant(r, args)
                    if tok != e["token"] or r[1] != e["count"] + 1:
                        raise AssertionError("%r -> %r, expected [%d, %d]"
                                             % (args, r, e["token"], e["count"] + 1))
                    e["count"] += 1
                else:
                    name = self.rng.choice(list(held))
                    e = held[name]
                    args = ["UNLOCK", name, self.sid] + (["OWNER", e["owner"]] if e["owner"] else [])
                    self._send(c, args, name, held)
                    r = self._read(c, name, held)
                    if r != e["count"] - 1:
                        raise AssertionError("%r -> %r, expected %d" % (args, r, e["count"] - 1))
                    e["count"] -= 1
                    if e["count"] == 0:
                        del held[name]
                self.led.acks += 1
        finally:
            c.close()

    def _send(self, c, args, name, held=None):
        try:
            c.send_cmd(*args)
        except OSError:
            self._lost(name, held)
            raise

    def _read(self, c, name, held=None):
        try:
            return c.read_reply(5)
        except (ConnectionClosed, ReplyTimeout, OSError):
            self._lost(name, held)
            raise

    def _lost(self, name, held):
        if held is not None:
            held.pop(name, None)
        self.led.uncertain[name] = self.sid

    def _grant(self, r, args):
        if not (isinstance(r, list) and len(r) == 2 and all(isinstance(v, int) for v in r)):
            raise AssertionError("%r -> %r" % (args, r))
        self.led.max_token = max(self.led.max_token, r[0])
        return r[0]


class DurabilityTest(TumblerTestCase, LockTestMixin):
    TEST_TIMEOUT = 150

    def run_load(self, srv, led, seconds, tag, kill=True):
        """Runs THREADS clients for `seconds`, then kill -9 (or SIGTERM) the
        server while they are mid-request. Merges their acks into `led`."""
        stop = threading.Event()
        prefix = self.name("r%s-" % tag)
        # reuse half of the surviving sessions (with their holds) from before
        by_sid = {}
        for name, e in led.held.items():
            by_sid.setdefault(e["sid"], {})[name] = e
        reuse = list(by_sid.items())[:THREADS // 2]
        for sid, mine in reuse:
            for name in mine:
                del led.held[name]
        threads = []
        for i in range(THREADS):
            ru = reuse[i] if i < len(reuse) else None
            threads.append(LoadThread(srv.port, prefix, hash((tag, i)) & 0xffffffff, stop, ru))
        for t in threads:
            t.start()
        time.sleep(seconds)
        if kill:
            srv.kill9()
        else:
            rc = srv.stop()
            self.assertNotEqual(rc, -signal.SIGKILL, "SIGTERM did not stop the server")
        stop.set()
        for t in threads:
            t.join(15)
            self.assertFalse(t.is_alive(), "a load thread hung")
        for t in threads:
            if t.error:
                raise t.error
            led.merge(t.led)
        return sum(t.led.acks for t in threads)

    def verify(self, srv, led, prefix_all):
        c = self.conn(srv)
        for sid in led.sessions:
            info = session_info(c, sid)
            self.assertNotIsInstance(info, RespError, "acknowledged session %d lost after restart" % sid)
            self.assertEqual(info["ttl_ms"], LONG_TTL)
        seen_max = 0
        held = list(led.held.items())
        inspected, checked = {}, {}
        for i in range(0, len(held), 256):   # pipelined, so big ledgers verify fast
            batch = held[i:i + 256]
            cmds = []
            for n, e in batch:
                cmds += [["INSPECT", n], ["CHECK", n, e["token"]]]
            replies = c.pipeline(cmds, timeout=30)
            for j, (n, _) in enumerate(batch):
                inspected[n] = normalize_inspect(replies[2 * j], n)
                checked[n] = replies[2 * j + 1]
        for name, e in held:
            li = inspected[name]
            self.assertEqual(li["mode"], "exclusive", "acknowledged lock %r lost: %r" % (name, li))
            self.assertEqual(li["holders"], [{"session": e["sid"], "owner": e["owner"],
                                              "count": e["count"], "token": e["token"]}],
                             "lock %r after restart" % name)
            self.assertEqual(li["waiters"], [])
            self.assertEqual(checked[name], 1, "CHECK %r %d after restart" % (name, e["token"]))
        for name, sid in led.uncertain.items():
            li = inspect_lock(c, name)
            for h in li["holders"]:
                self.assertEqual(h["session"], sid, "unacknowledged lock %r held by a stranger: %r" % (name, li))
                seen_max = max(seen_max, h["token"])
        # no phantom locks: every lock under our prefixes was acknowledged or in flight
        existing = set()
        for p in sorted(led.prefixes):
            r = c.call("LOCKS", "MATCH", p, "COUNT", 100000)
            self.assertLess(len(r), 100000)
            existing |= {n.decode() for n in r}
        for n in existing:
            self.assertTrue(n in led.held or n in led.uncertain, "phantom lock %r after restart" % n)
        for n in led.held:
            if any(n.startswith(p) for p in led.prefixes):
                self.assertIn(n, existing)
        # fencing: a new grant is above every token acknowledged before
        sid = self.open_session(c, ttl=LONG_TTL)
        led.sessions.add(sid)
        r = c.call("LOCK", self.name("after-%d" % srv.starts), sid)
        tok = self.assertGrant(r, 1)
        self.assertGreater(tok, led.max_token, "token after restart not above acknowledged ones")
        self.assertGreater(tok, seen_max)
        led.held[self.name("after-%d" % srv.starts)] = {"sid": sid, "owner": "", "token": tok, "count": 1}
        led.max_token = tok
        # surviving sessions still work: re-enter and leave one of their locks
        for name, e in list(led.held.items())[:5]:
            args = ["OWNER", e["owner"]] if e["owner"] else []
            self.assertEqual(c.call("LOCK", name, e["sid"], *args), [e["token"], e["count"] + 1])
            self.assertEqual(c.call("UNLOCK", name, e["sid"], *args), e["count"])
        c.close()

    def test_kill9_under_load(self):
        srv = self.new_server()
        led = Ledger()
        prefix_all = self.name("")
        rng = random.Random(7)
        for rnd, base in enumerate((0.15, 0.7, 1.4)):
            acks = self.run_load(srv, led, base + rng.random() * 0.3, rnd)
            self.assertGreater(acks, 0, "no request was acknowledged in round %d" % rnd)
            srv.start(port=srv.port)
            self.verify(srv, led, prefix_all)
        self.assertGreater(len(led.held), 10)

    def test_kill9_with_frequent_snapshots(self):
        srv = self.new_server(extra_args=["--snapshot-threshold", "64"])
        led = Ledger()
        prefix_all = self.name("")
        for rnd, secs in enumerate((1.5, 0.4)):
            self.run_load(srv, led, secs, rnd)
            srv.start(port=srv.port)
            self.verify(srv, led, prefix_all)

    def test_sigterm_under_load(self):
        srv = self.new_server()
        led = Ledger()
        self.run_load(srv, led, 0.8, 0, kill=False)
        srv.start(port=srv.port)
        self.verify(srv, led, self.name(""))

    def test_clean_stop_restart_keeps_state(self):
        srv = self.new_server()
        c = self.conn(srv)
        s1 = self.open_session(c, ttl=LONG_TTL, label="first")
        s2 = self.open_session(c, ttl=LONG_TTL, label=b"bin\x00label")
        s3 = self.open_session(c, ttl=LONG_TTL)
        self.assertEqual(c.call("SESSION", "CLOSE", s3), 0)
        a, b, d = self.name("a"), self.name("b"), self.name("d")
        ta = self.assertGrant(c.call("LOCK", a, s1))
        self.assertEqual(c.call("LOCK", a, s1), [ta, 2])
        tb1 = self.assertGrant(c.call("LOCK", b, s1, "SHARED", "OWNER", "r1"))
        tb2 = self.assertGrant(c.call("LOCK", b, s2, "SHARED"))
        td = self.assertGrant(c.call("LOCK", d, s2))
        self.assertEqual(c.call("UNLOCK", d, s2), 0)
        before_locks = {n: inspect_lock(c, n) for n in (a, b, d)}
        before_sessions = {sid: session_info(c, sid) for sid in (s1, s2)}
        before_list = c.call("SESSION", "LIST")
        c.close()
        rc = srv.stop()
        self.assertNotEqual(rc, -signal.SIGKILL, "SIGTERM did not stop the server")
        srv.start(port=srv.port)
        c = self.conn(srv)
        for n, li in before_locks.items():
            self.assertEqual(inspect_lock(c, n), li, "lock %r after restart" % n)
        for sid, si in before_sessions.items():
            now = session_info(c, sid)
            self.assertNotIsInstance(now, RespError)
            for k in ("id", "name", "ttl_ms", "holds", "waiting"):
                self.assertEqual(now[k], si[k], "session %d %s" % (sid, k))
        self.assertEqual(c.call("SESSION", "LIST"), before_list)
        self.assertErr(c.call("SESSION", "INFO", s3), "NOSESSION")
        self.assertEqual(c.call("CHECK", b, tb1), 1)
        self.assertEqual(c.call("CHECK", b, tb2), 1)
        self.assertEqual(c.call("CHECK", d, td), 0)
        s4 = self.open_session(c, ttl=LONG_TTL)
        self.assertGreater(s4, s3, "session ids are never reused")
        self.assertGreater(self.assertGrant(c.call("LOCK", d, s4)), max(ta, tb1, tb2, td))
        self.assertEqual(c.call("UNLOCK", a, s1), 1)
        self.assertEqual(c.call("UNLOCK", a, s1), 0)

    def test_waits_of_dead_connections_are_gone_after_restart(self):
        srv = self.new_server()
        c = self.conn(srv)
        s1 = self.open_session(c, ttl=LONG_TTL)
        s2 = self.open_session(c, ttl=LONG_TTL)
        n = self.name("w")
        self.assertGrant(c.call("LOCK", n, s1))
        w = self.conn(srv)
        w.send_cmd("LOCK", n, s2, "WAIT", "FOREVER")
        wait_until(lambda: len(inspect_lock(c, n)["waiters"]) == 1, what="wait queued")
        srv.kill9()
        srv.start(port=srv.port)
        c = self.conn(srv)
        wait_until(lambda: inspect_lock(c, n)["waiters"] == [], timeout=5,
                   what="the dead connection's wait is dropped")
        self.assertEqual(session_info(c, s2)["waiting"], [])
        self.assertEqual(c.call("UNLOCK", n, s1), 0)
        # nobody (no ghost waiter) got it: s2 can take it now
        self.assertGrant(c.call("LOCK", n, s2), 1)

    def test_info_after_restart(self):
        srv = self.new_server()
        c = self.conn(srv)
        term1 = int(parse_info(c.call("INFO"))["term"])
        ci1 = int(parse_info(c.call("INFO"))["commit_index"])
        self.open_session(c, ttl=LONG_TTL)
        c.close()
        srv.kill9()
        srv.start(port=srv.port)
        c = self.conn(srv)
        info = parse_info(c.call("INFO"))
        self.assertEqual(info["role"], "leader")
        self.assertGreaterEqual(int(info["term"]), term1)
        self.assertGreaterEqual(int(info["commit_index"]), ci1)
        self.assertGreaterEqual(int(info["sessions"]), 1)


class ReadinessTest(TumblerTestCase):
    """The brief: tumblerd answers TRYAGAIN while starting up, and INFO shows
    role:leader once it is ready. So once INFO says role:leader, a command that
    needs the state must not get TRYAGAIN."""
    TEST_TIMEOUT = 90

    def poll_leader_then_command(self, srv):
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            self.assertTrue(srv.running(), srv.log_tail(30))
            try:
                with Conn(srv.port, timeout=2, connect_timeout=0.5) as c:
                    while time.monotonic() < deadline:
                        info = c.call("INFO")
                        if isinstance(info, RespError) or parse_info(info).get("role") != "leader":
                            time.sleep(0.001)
                            continue
                        r = c.call("SESSION", "OPEN", LONG_TTL)
                        self.assertNotIsInstance(
                            r, RespError,
                            "INFO said role:leader, then SESSION OPEN -> %r (INFO was %r)" % (r, info))
                        return r
            except (OSError, ConnectionClosed):
                time.sleep(0.002)
        self.fail("never became leader")

    def test_role_leader_means_ready(self):
        srv = self.new_server(start=False)
        srv.start(wait=False)
        self.poll_leader_then_command(srv)
        for _ in range(3):
            srv.kill9()
            srv.start(port=srv.port, wait=False)
            self.poll_leader_then_command(srv)


if __name__ == "__main__":
    unittest.main()
