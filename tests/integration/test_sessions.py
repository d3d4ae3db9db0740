"""Session leases: expiry, keepalive, independence from connections."""

import time
import unittest

from harness import (LockTestMixin, SharedServerTestCase, inspect_lock,
                     parse_info, session_info, wait_until)


class SessionLifecycleTest(SharedServerTestCase, LockTestMixin):

    def test_expiry_releases_holds_and_wakes_next_waiter(self):
        s1 = self.open_session(ttl=300)
        s2 = self.open_session()
        a, b = self.name("a"), self.name("b")
        self.assertGrant(self.lock(a, s1))
        self.assertGrant(self.lock(b, s1, "SHARED", "OWNER", "x"))
        t0 = time.monotonic()
        sessions_before = int(parse_info(self.c.call("INFO"))["sessions"])
        w = self.conn()
        w.send_cmd("LOCK", a, s2, "WAIT", 10000)
        r = w.read_reply(5)
        el = time.monotonic() - t0
        tok = self.assertGrant(r, 1, "the blocked LOCK is granted when the holder expires")
        self.assertGreaterEqual(el, 0.25, "session expired %.3fs after its last command (ttl 300 ms)" % el)
        self.assertLess(el, 3.0)
        li = inspect_lock(self.c, a)
        self.assertEqual(li["holders"], [{"session": s2, "owner": "", "count": 1, "token": tok}])
        self.assertEqual(inspect_lock(self.c, b)["mode"], "free")
        self.assertErr(self.c.call("SESSION", "INFO", s1), "NOSESSION")
        self.assertErr(self.c.call("SESSION", "KEEPALIVE", s1), "NOSESSION")
        self.assertErr(self.unlock(a, s1), "NOSESSION")
        self.assertErr(self.lock(self.name("c"), s1), "NOSESSION")
        self.assertNotIn(s1, self.c.call("SESSION", "LIST"))
        self.assertEqual(int(parse_info(self.c.call("INFO"))["sessions"]), sessions_before - 1)

    def test_expiry_without_waiters(self):
        s1 = self.open_session(ttl=200)
        n = self.name("solo")
        t = self.assertGrant(self.lock(n, s1))
        wait_until(lambda: inspect_lock(self.c, n)["mode"] == "free", timeout=5,
                   what="expiry releases the lock")
        self.assertEqual(self.c.call("CHECK", n, t), 0)
        self.assertErr(self.c.call("SESSION", "INFO", s1), "NOSESSION")

    def test_waiter_whose_session_expires_gets_nosession(self):
        s1 = self.open_session()
        s2 = self.open_session(ttl=300)
        n = self.name("w")
        self.assertGrant(self.lock(n, s1))
        t0 = time.monotonic()
        w = self.conn()
        w.send_cmd("LOCK", n, s2, "WAIT", "FOREVER")
        r = w.read_reply(5)
        el = time.monotonic() - t0
        self.assertErr(r, "NOSESSION")
        self.assertGreaterEqual(el, 0.25)
        li = inspect_lock(self.c, n)
        self.assertEqual(li["waiters"], [])
        self.assertEqual([h["session"] for h in li["holders"]], [s1])
        # the connection is still usable
        self.assertEqual(w.call("PING"), "PONG")

    def test_close_ends_waits_with_nosession(self):
        s1, s2 = self.open_session(), self.open_session()
        n = self.name("cl")
        self.assertGrant(self.lock(n, s1))
        w = self.waiter(n, s2, "WAIT", 15000)
        self.assertEqual(self.c.call("SESSION", "CLOSE", s2), 0)
        self.assertErr(w.read_reply(3), "NOSESSION")
        self.assertEqual(inspect_lock(self.c, n)["waiters"], [])

    def test_keepalive_keeps_session_alive(self):
        sid = self.open_session(ttl=300)
        n = self.name("ka")
        self.assertGrant(self.lock(n, sid))
        t_end = time.monotonic() + 1.2
        while time.monotonic() < t_end:
            self.assertEqual(self.c.call("SESSION", "KEEPALIVE", sid), 300)
            time.sleep(0.08)
        info = session_info(self.c, sid)
        self.assertEqual(info["holds"], [n])
        self.assertLessEqual(info["expires_in_ms"], 300)
        self.assertGreater(info["expires_in_ms"], 0)
        # stop renewing: it expires
        wait_until(lambda: inspect_lock(self.c, n)["mode"] == "free", timeout=5,
                   what="expiry after keepalives stopped")
        self.assertErr(self.c.call("SESSION", "KEEPALIVE", sid), "NOSESSION")

    def test_commands_naming_the_session_renew_it(self):
        sid = self.open_session(ttl=300)
        n = self.name("renew")
        self.assertGrant(self.lock(n, sid))
        t_end = time.monotonic() + 1.2
        i = 0
        while time.monotonic() < t_end:
            if i % 3 == 0:
                self.assertIsInstance(self.c.call("SESSION", "INFO", sid), list)
            elif i % 3 == 1:
                self.assertGrant(self.lock(n, sid), 2)
            else:
                self.assertEqual(self.unlock(n, sid), 1)
            i += 1
            time.sleep(0.08)
        self.assertEqual(session_info(self.c, sid)["holds"], [n])
        self.assertEqual(self.c.call("SESSION", "CLOSE", sid), 1)

    def test_session_survives_connection_close(self):
        c1 = self.conn()
        sid = self.open_session(c1, ttl=60000, label="roaming")
        n = self.name("sv")
        t = self.assertGrant(self.lock(n, sid, conn=c1))
        c1.close()
        time.sleep(0.3)
        c2 = self.conn()
        info = session_info(c2, sid)
        self.assertEqual(info["name"], "roaming")
        self.assertEqual(info["holds"], [n])
        self.assertEqual(inspect_lock(c2, n)["holders"],
                         [{"session": sid, "owner": "", "count": 1, "token": t}])
        self.assertEqual(c2.call("CHECK", n, t), 1)
        self.assertEqual(c2.call("LOCK", n, sid), [t, 2])   # same holder from a new connection
        self.assertEqual(c2.call("UNLOCK", n, sid), 1)
        self.assertEqual(c2.call("UNLOCK", n, sid), 0)
        self.assertEqual(c2.call("SESSION", "CLOSE", sid), 0)

    def test_waiter_closing_connection_keeps_session(self):
        s1, s2 = self.open_session(), self.open_session()
        n = self.name("wc")
        self.assertGrant(self.lock(n, s1))
        w = self.waiter(n, s2, "WAIT", 15000)
        w.close()
        wait_until(lambda: inspect_lock(self.c, n)["waiters"] == [], what="wait cancelled")
        self.assertEqual(session_info(self.c, s2)["waiting"], [])
        self.assertNullLock(self.lock(n, s2), self.c)        # s2 still exists
        self.unlock(n, s1)
        self.assertGrant(self.lock(n, s2))


if __name__ == "__main__":
    unittest.main()
