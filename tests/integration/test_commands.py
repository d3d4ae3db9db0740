"""Every command of PROTOCOL.md and its replies, every error code, and the
lock semantics of docs/commands.md, against a real tumblerd."""

import time
import unittest

from harness import (NO_REPLY, LockTestMixin, RespError, RespMap, SharedServerTestCase,
                     SimpleString, TumblerTestCase, Verbatim, as_map, encode_command,
                     inspect_lock, parse_info, s, session_info, state_snapshot,
                     wait_until)


# ---------------------------------------------------------------------------
# Connection-level commands: PING, HELLO, AUTH (no password), INFO
# ---------------------------------------------------------------------------

class ConnectionCommandsTest(SharedServerTestCase, LockTestMixin):

    def test_ping(self):
        r = self.c.call("PING")
        self.assertEqual(r, "PONG")
        self.assertIsInstance(r, SimpleString)
        self.assertEqual(self.c.last_raw, b"+PONG\r\n")
        r = self.c.call("PING", "hello world")
        self.assertEqual(r, b"hello world")
        self.assertEqual(self.c.last_raw, b"$11\r\nhello world\r\n")
        self.assertEqual(self.c.call("PING", b"\x00\r\n\xff"), b"\x00\r\n\xff")
        self.assertEqual(self.c.call("ping"), "PONG")
        self.assertEqual(self.c.call("PiNg", ""), b"")

    def test_ping_inline(self):
        self.c.send(b"PING\r\n")
        self.assertEqual(self.c.read_reply(), "PONG")
        self.c.send(b"PING hi\r\n")
        self.assertEqual(self.c.read_reply(), b"hi")
        self.c.send(b'PING "two words"\r\n')
        self.assertEqual(self.c.read_reply(), b"two words")
        self.c.send(b"PING\n")  # Redis accepts a bare LF in inline commands
        self.assertEqual(self.c.read_reply(), "PONG")

    def test_hello_default_and_2(self):
        r = self.c.call("HELLO")
        self.assertIsInstance(r, list, "RESP2 HELLO reply is a flat array: %r" % (r,))
        m = as_map(r)
        self.assertEqual(m["proto"], 2)
        for k in ("server", "version", "proto"):
            self.assertIn(k, m)
        r = self.c.call("HELLO", "2")
        self.assertIsInstance(r, list)
        self.assertEqual(as_map(r)["proto"], 2)

    def test_hello_3_switches_to_resp3(self):
        c = self.conn()
        sid = self.open_session(c)
        name = self.name("h3")
        other = self.open_session(c)
        self.assertGrant(self.lock(name, other, conn=c))
        r = c.call("HELLO", "3")
        self.assertIsInstance(r, RespMap, "HELLO 3 reply is a RESP3 map: %r" % (r,))
        self.assertTrue(c.last_raw.startswith(b"%"))
        m = as_map(r)
        self.assertEqual(m["proto"], 3)
        self.assertIn("server", m)
        self.assertIn("version", m)
        # Now RESP3 types.
        self.assertEqual(c.call("PING"), "PONG")
        r = c.call("SESSION", "INFO", sid)
        self.assertIsInstance(r, RespMap, "SESSION INFO in RESP3: %r" % (r,))
        r = c.call("INSPECT", name)
        self.assertIsInstance(r, RespMap, "INSPECT in RESP3: %r" % (r,))
        holders = as_map(r)["holders"]
        self.assertIsInstance(holders[0], RespMap)
        # a try-lock that fails: RESP3 null
        r = c.call("LOCK", name, sid)
        self.assertNullLock(r, c, resp3=True)
        r = c.call("INFO")
        self.assertIsInstance(r, (bytes, Verbatim))
        self.assertEqual(parse_info(r)["role"], "leader")
        self.assertEqual(c.call("CHECK", name, 2**63), 0)
        # back to RESP2
        r = c.call("HELLO", "2")
        self.assertIsInstance(r, list)
        r = c.call("LOCK", name, sid)
        self.assertNullLock(r, c, resp3=False)
        self.assertIsInstance(c.call("INSPECT", name), list)
        self.assertEqual(self.unlock(name, other), 0)

    def test_hello_setname_and_bad_version(self):
        r = self.c.call("HELLO", "3", "SETNAME", "it-client")
        self.assertIsInstance(r, RespMap)
        r = self.c.call("HELLO", "4")
        self.assertIsInstance(r, RespError, "HELLO 4 must fail: %r" % (r,))
        r = self.c.call("HELLO", "abc")
        self.assertIsInstance(r, RespError)
        # still RESP3 and usable after the failed HELLO
        self.assertIsInstance(self.c.call("HELLO"), RespMap)

    def test_auth_without_password_configured(self):
        r = self.c.call("AUTH", "nopass")
        self.assertIsInstance(r, RespError, "AUTH without --requirepass: %r" % (r,))
        self.assertIn(r.code, ("ERR", "WRONGPASS"))
        self.assertEqual(self.c.call("PING"), "PONG")

    def test_info_fields(self):
        r = self.c.call("INFO")
        self.assertIsInstance(r, bytes, "INFO is a bulk string in RESP2: %r" % (r,))
        info = parse_info(r)
        for k in ("role", "leader", "term", "commit_index", "sessions", "locks",
                  "waiters", "connections", "uptime_s", "version"):
            self.assertIn(k, info, "INFO lacks %s: %r" % (k, info))
        self.assertEqual(info["role"], "leader")
        self.assertTrue(info["leader"])
        self.assertTrue(info["version"])
        for k in ("term", "commit_index", "sessions", "locks", "waiters",
                  "connections", "uptime_s"):
            self.assertRegex(info[k], r"^\d+$", "INFO %s:%s" % (k, info[k]))
        self.assertGreaterEqual(int(info["term"]), 1)
        self.assertGreaterEqual(int(info["connections"]), 1)
        # section argument accepted
        r = self.c.call("INFO", "server")
        self.assertIsInstance(r, bytes)

    def test_info_counts_follow_state(self):
        before = parse_info(self.c.call("INFO"))
        extra = [self.conn() for _ in range(3)]
        sid = self.open_session()
        sid2 = self.open_session()
        name = self.name("cnt")
        self.assertGrant(self.lock(name, sid))
        w = self.waiter(name, sid2, "WAIT", 10000)
        after = parse_info(self.c.call("INFO"))
        self.assertEqual(int(after["sessions"]), int(before["sessions"]) + 2)
        self.assertEqual(int(after["locks"]), int(before["locks"]) + 1)
        self.assertEqual(int(after["waiters"]), int(before["waiters"]) + 1)
        self.assertGreaterEqual(int(after["connections"]), int(before["connections"]) + 4)
        self.assertGreater(int(after["commit_index"]), int(before["commit_index"]))
        self.assertGreaterEqual(int(after["uptime_s"]), int(before["uptime_s"]))
        self.assertEqual(self.unlock(name, sid), 0)
        self.assertGrant(w.read_reply(3))
        self.c.call("SESSION", "CLOSE", sid)
        self.c.call("SESSION", "CLOSE", sid2)
        for e in extra:
            e.close()
        final = parse_info(self.c.call("INFO"))
        self.assertEqual(int(final["sessions"]), int(before["sessions"]))
        self.assertEqual(int(final["locks"]), int(before["locks"]))
        self.assertEqual(int(final["waiters"]), int(before["waiters"]))

    def test_unknown_command_and_arity(self):
        for args in (["NOSUCHCMD"], ["GET", "x"], ["SET", "x", "y"], ["SESSION", "BOGUS"],
                     ["LOCK"], ["LOCK", "a"], ["UNLOCK"], ["UNLOCK", "a"], ["CHECK"],
                     ["CHECK", "a"], ["CHECK", "a", 1, 2], ["INSPECT"], ["INSPECT", "a", "b"],
                     ["SESSION"], ["SESSION", "OPEN"], ["SESSION", "KEEPALIVE"],
                     ["SESSION", "CLOSE"], ["SESSION", "INFO"], ["SESSION", "KEEPALIVE", 1, 2],
                     ["PING", "a", "b"], ["LOCKS", "MATCH"], ["LOCKS", "COUNT"],
                     ["LOCKS", "BOGUS", "x"], ["SESSION", "LIST", "COUNT"],
                     ["SESSION", "OPEN", 1000, "NAME"], ["SESSION", "OPEN", 1000, "BOGUS", "x"],
                     ["LOCK", "a", 1, "BOGUS"], ["LOCK", "a", 1, "WAIT"], ["LOCK", "a", 1, "OWNER"],
                     ["UNLOCK", "a", 1, "OWNER"], ["UNLOCK", "a", 1, "SHARED"]):
            r = self.c.call(*args)
            self.assertErr(r, "ERR", "%r" % (args,))
        self.assertEqual(self.c.call("PING"), "PONG")


# ---------------------------------------------------------------------------
# Sessions
# ---------------------------------------------------------------------------

class SessionCommandsTest(SharedServerTestCase, LockTestMixin):

    def test_open_ids_increase_never_reused(self):
        a = self.open_session()
        b = self.open_session()
        self.assertGreater(b, a)
        self.assertEqual(self.c.call("SESSION", "CLOSE", b), 0)
        c = self.open_session()
        self.assertGreater(c, b)

    def test_open_ttl_bounds(self):
        self.open_session(ttl=100)
        self.open_session(ttl=3600000)
        for ttl in (99, 0, 3600001, -1, "abc", "", "1e3", 2**64, "100x"):
            self.assertErr(self.c.call("SESSION", "OPEN", ttl), "ERR", "ttl %r" % (ttl,))

    def test_open_with_name_and_info(self):
        sid = self.open_session(ttl=5000, label="worker-7")
        info = session_info(self.c, sid)
        self.assertEqual(info["id"], sid)
        self.assertEqual(info["name"], "worker-7")
        self.assertEqual(info["ttl_ms"], 5000)
        self.assertIsInstance(info["expires_in_ms"], int)
        self.assertGreater(info["expires_in_ms"], 0)
        self.assertLessEqual(info["expires_in_ms"], 5000)
        self.assertEqual(info["holds"], [])
        self.assertEqual(info["waiting"], [])
        # binary-safe label, case-insensitive keywords
        sid2 = self.c.call("session", "open", 5000, "name", b"bin\x00\xfflabel")
        self.assertIsInstance(sid2, int)
        r = as_map(self.c.call("SESSION", "INFO", sid2))
        self.assertEqual(r["name"], b"bin\x00\xfflabel")

    def test_info_holds_and_waiting(self):
        sid = self.open_session()
        other = self.open_session()
        names = [self.name(x) for x in ("c", "a", "b")]
        for n in names:
            self.assertGrant(self.lock(n, sid))
        blocked = self.name("zz-blocked")
        self.assertGrant(self.lock(blocked, other))
        w = self.waiter(blocked, sid, "WAIT", 10000)
        info = session_info(self.c, sid)
        self.assertEqual(info["holds"], sorted(names))
        self.assertEqual(info["waiting"], [blocked])
        self.assertEqual(self.unlock(blocked, other), 0)
        self.assertGrant(w.read_reply(3), 1)
        info = session_info(self.c, sid)
        self.assertEqual(info["holds"], sorted(names + [blocked]))
        self.assertEqual(info["waiting"], [])

    def test_keepalive(self):
        sid = self.open_session(ttl=7000)
        r = self.c.call("SESSION", "KEEPALIVE", sid)
        self.assertEqual(r, 7000)
        self.assertErr(self.c.call("SESSION", "KEEPALIVE", 999999999), "NOSESSION")
        self.assertErr(self.c.call("SESSION", "KEEPALIVE", "abc"), "ERR")

    def test_close_counts_holds(self):
        sid = self.open_session()
        a, b, c = self.name("a"), self.name("b"), self.name("c")
        self.assertGrant(self.lock(a, sid), 1)
        self.assertGrant(self.lock(a, sid), 2)          # reentrant: still one hold
        self.assertGrant(self.lock(b, sid, "OWNER", "x", "SHARED"))
        self.assertGrant(self.lock(b, sid, "OWNER", "y", "SHARED"))
        self.assertGrant(self.lock(c, sid, "OWNER", "z"))
        self.assertEqual(self.c.call("SESSION", "CLOSE", sid), 4)
        for n in (a, b, c):
            li = inspect_lock(self.c, n)
            self.assertEqual(li["mode"], "free")
            self.assertEqual(li["holders"], [])
        self.assertErr(self.c.call("SESSION", "CLOSE", sid), "NOSESSION")
        self.assertErr(self.c.call("SESSION", "INFO", sid), "NOSESSION")
        self.assertErr(self.c.call("SESSION", "KEEPALIVE", sid), "NOSESSION")
        self.assertErr(self.lock(a, sid), "NOSESSION")
        self.assertErr(self.unlock(a, sid), "NOSESSION")

    def test_close_frees_for_next_waiter(self):
        sid = self.open_session()
        nxt = self.open_session()
        n = self.name("l")
        self.assertGrant(self.lock(n, sid))
        w = self.waiter(n, nxt, "WAIT", 10000)
        self.assertEqual(self.c.call("SESSION", "CLOSE", sid), 1)
        self.assertGrant(w.read_reply(3), 1)
        self.assertEqual(self.holder_sessions(n), [nxt])

    def test_list(self):
        ids = [self.open_session() for _ in range(3)]
        r = self.c.call("SESSION", "LIST")
        self.assertIsInstance(r, list)
        self.assertEqual(r, sorted(r), "ids ascending")
        for i in ids:
            self.assertIn(i, r)
        self.assertEqual(len(self.c.call("SESSION", "LIST", "COUNT", 1)), 1)
        self.assertEqual(self.c.call("SESSION", "LIST", "COUNT", 2), r[:2])
        self.assertEqual(self.c.call("session", "list", "count", 100000), r)
        self.c.call("SESSION", "CLOSE", ids[1])
        r2 = self.c.call("SESSION", "LIST")
        self.assertNotIn(ids[1], r2)
        self.assertIn(ids[0], r2)
        for n in (0, -1, 100001, "abc"):
            self.assertErr(self.c.call("SESSION", "LIST", "COUNT", n), "ERR", "COUNT %r" % (n,))

    def test_nosession(self):
        bogus = 987654321
        n = self.name("x")
        for args in (["LOCK", n, bogus], ["LOCK", n, bogus, "WAIT", 100],
                     ["UNLOCK", n, bogus], ["SESSION", "KEEPALIVE", bogus],
                     ["SESSION", "CLOSE", bogus], ["SESSION", "INFO", bogus]):
            self.assertErr(self.c.call(*args), "NOSESSION", "%r" % (args,))
        self.assertEqual(inspect_lock(self.c, n)["mode"], "free")
        self.assertNotIn(n.encode(), self.c.call("LOCKS", "MATCH", n))


# ---------------------------------------------------------------------------
# LOCK / UNLOCK / CHECK / INSPECT / LOCKS
# ---------------------------------------------------------------------------

class LockCommandsTest(SharedServerTestCase, LockTestMixin):

    def test_lock_plain_and_inspect(self):
        sid = self.open_session()
        n = self.name("plain")
        li = inspect_lock(self.c, n)
        self.assertEqual(li["name"], n)
        self.assertEqual(li["mode"], "free")
        self.assertEqual(li["token"], 0)
        self.assertEqual(li["holders"], [])
        self.assertEqual(li["waiters"], [])
        r = self.lock(n, sid)
        t = self.assertGrant(r, 1)
        self.assertEqual(self.c.last_raw, b"*2\r\n:%d\r\n:1\r\n" % t)
        li = inspect_lock(self.c, n)
        self.assertEqual(li["name"], n)
        self.assertEqual(li["mode"], "exclusive")
        self.assertEqual(li["token"], t)
        self.assertEqual(li["holders"], [{"session": sid, "owner": "", "count": 1, "token": t}])
        self.assertEqual(li["waiters"], [])
        self.assertIn("lock_delay_ms", li)
        self.assertEqual(li["lock_delay_ms"], 0)
        # try-lock by another session: null (RESP2 null array)
        other = self.open_session()
        self.assertNullLock(self.lock(n, other), self.c)
        self.assertNullLock(self.lock(n, other, "WAIT", 0), self.c)
        self.assertEqual(self.unlock(n, sid), 0)
        self.assertEqual(inspect_lock(self.c, n)["mode"], "free")
        self.assertEqual(inspect_lock(self.c, n)["token"], 0)

    def test_binary_names_and_case(self):
        sid = self.open_session()
        n = self.name("bin").encode() + b"\x00\r\n\xff"
        t = self.assertGrant(self.c.call("lock", n, sid, "owner", b"o\x00"))
        r = as_map(self.c.call("INSPECT", n))
        self.assertEqual(r["name"], n)
        self.assertEqual(as_map(r["holders"][0])["owner"], b"o\x00")
        self.assertEqual(self.c.call("CHECK", n, t), 1)
        self.assertEqual(self.c.call("unlock", n, sid, "OWNER", b"o\x00"), 0)

    def test_empty_name_is_err(self):
        sid = self.open_session()
        self.assertErr(self.lock("", sid), "ERR")
        self.assertErr(self.lock("", 987654321), "ERR")  # ERR before NOSESSION

    def test_owner_tags_are_distinct_holders(self):
        sid = self.open_session()
        n = self.name("own")
        ta = self.assertGrant(self.lock(n, sid, "OWNER", "a"), 1)
        self.assertNullLock(self.lock(n, sid, "OWNER", "b"), self.c)
        self.assertNullLock(self.lock(n, sid), self.c)   # empty owner: another holder
        self.assertErr(self.unlock(n, sid), "NOTHELD")
        self.assertErr(self.unlock(n, sid, "OWNER", "b"), "NOTHELD")
        li = inspect_lock(self.c, n)
        self.assertEqual(li["holders"], [{"session": sid, "owner": "a", "count": 1, "token": ta}])
        self.assertEqual(self.unlock(n, sid, "OWNER", "a"), 0)

    def test_shared(self):
        s1, s2, s3 = self.open_session(), self.open_session(), self.open_session()
        n = self.name("sh")
        t1 = self.assertGrant(self.lock(n, s1, "SHARED"), 1)
        t2 = self.assertGrant(self.lock(n, s2, "SHARED"), 1)
        self.assertGreater(t2, t1, "a shared holder gets its own, newer token")
        li = inspect_lock(self.c, n)
        self.assertEqual(li["mode"], "shared")
        self.assertEqual(li["token"], t2)
        self.assertEqual(li["holders"], [
            {"session": s1, "owner": "", "count": 1, "token": t1},
            {"session": s2, "owner": "", "count": 1, "token": t2}])
        self.assertNullLock(self.lock(n, s3), self.c)    # exclusive try: null
        self.assertEqual(self.c.call("CHECK", n, t1), 1)
        self.assertEqual(self.c.call("CHECK", n, t2), 1)
        self.assertEqual(self.unlock(n, s1), 0)
        self.assertEqual(self.c.call("CHECK", n, t1), 0)
        li = inspect_lock(self.c, n)
        self.assertEqual(li["mode"], "shared")
        self.assertEqual([h["session"] for h in li["holders"]], [s2])
        self.assertEqual(self.unlock(n, s2), 0)
        t3 = self.assertGrant(self.lock(n, s3), 1)
        self.assertGreater(t3, t2)
        self.assertEqual(inspect_lock(self.c, n)["mode"], "exclusive")
        self.assertEqual(self.unlock(n, s3), 0)

    def test_reentrancy(self):
        sid = self.open_session()
        n = self.name("re")
        t = self.assertGrant(self.lock(n, sid), 1)
        self.assertEqual(self.lock(n, sid), [t, 2])
        self.assertEqual(self.lock(n, sid, "WAIT", 1000), [t, 3])
        self.assertEqual(self.lock(n, sid, "WAIT", "FOREVER"), [t, 4])
        self.assertEqual(inspect_lock(self.c, n)["holders"][0]["count"], 4)
        self.assertEqual(self.unlock(n, sid), 3)
        self.assertEqual(self.unlock(n, sid), 2)
        self.assertEqual(self.unlock(n, sid), 1)
        self.assertEqual(self.c.call("CHECK", n, t), 1)
        self.assertEqual(self.unlock(n, sid), 0)
        self.assertEqual(self.c.call("CHECK", n, t), 0)
        self.assertErr(self.unlock(n, sid), "NOTHELD")
        # shared reentrancy: same token, count up
        ts = self.assertGrant(self.lock(n, sid, "SHARED"), 1)
        self.assertGreater(ts, t)
        self.assertEqual(self.lock(n, sid, "SHARED"), [ts, 2])
        self.assertEqual(self.unlock(n, sid), 1)
        self.assertEqual(self.unlock(n, sid), 0)

    def test_reentrant_with_waiters_queued(self):
        s1, s2 = self.open_session(), self.open_session()
        n = self.name("rq")
        t = self.assertGrant(self.lock(n, s1))
        w = self.waiter(n, s2, "WAIT", 10000)
        self.assertEqual(self.lock(n, s1), [t, 2], "a holder never waits for itself")
        self.assertEqual(self.lock(n, s1, "WAIT", 500), [t, 3])
        self.assertEqual(self.unlock(n, s1), 2)
        self.assertEqual(self.unlock(n, s1), 1)
        self.assertIs(w.poll_reply(0.2), NO_REPLY)
        self.assertEqual(self.unlock(n, s1), 0)
        self.assertGreater(self.assertGrant(w.read_reply(3), 1), t)

    def test_reentrant_does_not_take_a_token(self):
        sid = self.open_session()
        a, b = self.name("a"), self.name("b")
        t1 = self.assertGrant(self.lock(a, sid))
        self.assertEqual(self.lock(a, sid), [t1, 2])
        t2 = self.assertGrant(self.lock(b, sid))
        self.assertEqual(t2, t1 + 1, "the reentrant grant took no token")

    def test_tokens_strictly_increase(self):
        sids = [self.open_session() for _ in range(3)]
        seen = []
        for i in range(12):
            n = self.name("t%d" % (i % 4))
            sid = sids[i % 3]
            r = self.lock(n, sid, "SHARED") if i % 2 else self.lock(n, sid)
            if r is None:
                continue
            seen.append(self.assertGrant(r, 1))
            if i % 3 == 2:
                self.unlock(n, sid)
        self.assertGreater(len(seen), 5)
        for x, y in zip(seen, seen[1:]):
            self.assertLess(x, y, "tokens %r" % (seen,))

    def test_wait_ms_and_forever_on_free_lock(self):
        sid = self.open_session()
        a, b, c = self.name("a"), self.name("b"), self.name("c")
        self.assertGrant(self.lock(a, sid, "WAIT", 1000), 1)
        self.assertGrant(self.lock(b, sid, "WAIT", "FOREVER"), 1)
        self.assertGrant(self.lock(c, sid, "wait", "forever", "shared", "owner", "o"), 1)
        self.assertGrant(self.lock(self.name("d"), sid, "WAIT", 86400000), 1)
        self.assertEqual(inspect_lock(self.c, c)["mode"], "shared")

    def test_wait_granted_on_release(self):
        s1, s2, s3 = self.open_session(), self.open_session(), self.open_session()
        n = self.name("w")
        t1 = self.assertGrant(self.lock(n, s1))
        w = self.waiter(n, s2, "WAIT", 10000)
        w3 = self.waiter(n, s3, "OWNER", "q", "SHARED", "WAIT", "FOREVER")
        li = inspect_lock(self.c, n)
        self.assertEqual(li["waiters"], [
            {"session": s2, "owner": "", "mode": "exclusive"},
            {"session": s3, "owner": "q", "mode": "shared"}])
        self.assertEqual(session_info(self.c, s2)["waiting"], [n])
        self.assertIs(w.poll_reply(0.2), NO_REPLY)
        self.assertEqual(self.unlock(n, s1), 0)
        t2 = self.assertGrant(w.read_reply(3), 1)
        self.assertGreater(t2, t1)
        self.assertIs(w3.poll_reply(0.2), NO_REPLY)
        self.assertEqual(self.unlock(n, s2), 0)
        t3 = self.assertGrant(w3.read_reply(3), 1)
        self.assertGreater(t3, t2)
        li = inspect_lock(self.c, n)
        self.assertEqual(li["holders"], [{"session": s3, "owner": "q", "count": 1, "token": t3}])
        self.assertEqual(li["waiters"], [])

    def test_wait_timeout_returns_null(self):
        s1, s2 = self.open_session(), self.open_session()
        n = self.name("to")
        self.assertGrant(self.lock(n, s1))
        t0 = time.monotonic()
        r = self.lock(n, s2, "WAIT", 300)
        el = time.monotonic() - t0
        self.assertNullLock(r, self.c)
        self.assertGreaterEqual(el, 0.28, "WAIT 300 returned after %.3fs" % el)
        self.assertLess(el, 3.0)
        self.assertEqual(inspect_lock(self.c, n)["waiters"], [])
        self.assertEqual(session_info(self.c, s2)["waiting"], [])
        # RESP3: '_'
        c3 = self.conn()
        c3.call("HELLO", "3")
        r = c3.call("LOCK", n, s2, "WAIT", 100)
        self.assertNullLock(r, c3, resp3=True)
        self.assertEqual(self.holder_sessions(n), [s1])

    def test_closing_waiting_connection_removes_wait(self):
        s1, s2, s3 = self.open_session(), self.open_session(), self.open_session()
        n = self.name("cw")
        self.assertGrant(self.lock(n, s1))
        w2 = self.waiter(n, s2, "WAIT", "FOREVER")
        w3 = self.waiter(n, s3, "WAIT", 10000)
        self.assertEqual(self.waiter_sessions(n), [s2, s3])
        w2.close()
        wait_until(lambda: self.waiter_sessions(n) == [s3], what="closed connection's wait removed")
        self.assertEqual(session_info(self.c, s2)["waiting"], [])
        self.assertEqual(self.unlock(n, s1), 0)
        self.assertGrant(w3.read_reply(3))
        self.assertEqual(self.holder_sessions(n), [s3])

    def test_same_holder_already_waiting_is_err(self):
        s1, s2 = self.open_session(), self.open_session()
        n = self.name("dup")
        self.assertGrant(self.lock(n, s1))
        w = self.waiter(n, s2, "WAIT", 10000)
        before = state_snapshot(self.c, [n], [s1, s2])
        self.assertErr(self.lock(n, s2, "WAIT", 1000), "ERR")
        self.assertEqual(state_snapshot(self.c, [n], [s1, s2]), before)
        self.unlock(n, s1)
        self.assertGrant(w.read_reply(3))

    def test_unlock(self):
        s1, s2 = self.open_session(), self.open_session()
        n = self.name("u")
        self.assertErr(self.unlock(n, s1), "NOTHELD")               # free lock
        self.assertGrant(self.lock(n, s1, "OWNER", "me"))
        self.assertErr(self.unlock(n, s2), "NOTHELD")               # other session
        self.assertErr(self.unlock(n, s1), "NOTHELD")               # other owner
        self.assertErr(self.unlock(n, 987654321), "NOSESSION")
        self.assertEqual(self.unlock(n, s1, "OWNER", "me"), 0)
        self.assertErr(self.unlock(n, s1, "OWNER", "me"), "NOTHELD")

    def test_check(self):
        s1 = self.open_session()
        n, m = self.name("c1"), self.name("c2")
        t = self.assertGrant(self.lock(n, s1))
        tm = self.assertGrant(self.lock(m, s1))
        self.assertEqual(self.c.call("CHECK", n, t), 1)
        self.assertEqual(self.c.call("CHECK", n, tm), 0)        # token of another lock
        self.assertEqual(self.c.call("CHECK", n, t - 1), 0)
        self.assertEqual(self.c.call("CHECK", n, t + 1000), 0)
        self.assertEqual(self.c.call("CHECK", self.name("none"), t), 0)
        self.assertEqual(self.c.call("CHECK", n, 2**64 - 1), 0)
        self.assertEqual(self.c.call("CHECK", n, 0), 0)
        self.unlock(n, s1)
        self.assertEqual(self.c.call("CHECK", n, t), 0)        # released
        for bad in ("abc", -1, 2**64, "", "1.0"):
            self.assertErr(self.c.call("CHECK", n, bad), "ERR", "token %r" % (bad,))

    def test_locks_match_count(self):
        s1, s2 = self.open_session(), self.open_session()
        p = self.name("L")
        names = [p + x for x in ("b", "a", "c", "a2")]
        for x in names:
            self.assertGrant(self.lock(x, s1))
        waited = p + "d"
        self.assertGrant(self.lock(waited, s2))
        w = self.waiter(waited, s1, "WAIT", 10000)
        expect = sorted(n.encode() for n in names + [waited])
        r = self.c.call("LOCKS", "MATCH", p)
        self.assertEqual(r, expect)
        self.assertEqual(self.c.call("LOCKS", "MATCH", p, "COUNT", 2), expect[:2])
        self.assertEqual(self.c.call("locks", "count", 3, "match", p), expect[:3])
        self.assertEqual(self.c.call("LOCKS", "MATCH", p + "a"), [(p + "a").encode(), (p + "a2").encode()])
        self.assertEqual(self.c.call("LOCKS", "MATCH", p + "*"), [], "MATCH is a prefix, not a glob")
        self.assertEqual(self.c.call("LOCKS", "MATCH", self.name("nothing")), [])
        allr = self.c.call("LOCKS", "COUNT", 100000)
        self.assertEqual(allr, sorted(allr))
        for x in expect:
            self.assertIn(x, allr)
        self.assertLessEqual(len(self.c.call("LOCKS", "COUNT", 1)), 1)
        for n in (0, -1, 100001, "x"):
            self.assertErr(self.c.call("LOCKS", "COUNT", n), "ERR", "COUNT %r" % (n,))
        # released locks no longer exist
        self.unlock(names[0], s1)
        self.assertNotIn(names[0].encode(), self.c.call("LOCKS", "MATCH", p))
        self.unlock(waited, s2)
        self.assertGrant(w.read_reply(3))


# ---------------------------------------------------------------------------
# Modes, fairness, deadlock
# ---------------------------------------------------------------------------

class FairnessTest(SharedServerTestCase, LockTestMixin):

    def test_wrongmode_both_directions(self):
        sid = self.open_session()
        a, b = self.name("ex"), self.name("sh")
        ta = self.assertGrant(self.lock(a, sid))
        tb = self.assertGrant(self.lock(b, sid, "SHARED"))
        before = state_snapshot(self.c, [a, b], [sid])
        self.assertErr(self.lock(a, sid, "SHARED"), "WRONGMODE")
        self.assertErr(self.lock(a, sid, "SHARED", "WAIT", 1000), "WRONGMODE")
        self.assertErr(self.lock(b, sid), "WRONGMODE")
        self.assertErr(self.lock(b, sid, "WAIT", "FOREVER"), "WRONGMODE")
        self.assertEqual(state_snapshot(self.c, [a, b], [sid]), before)
        # another owner of the same session is another holder: no WRONGMODE
        self.assertNullLock(self.lock(a, sid, "OWNER", "o", "SHARED"), self.c)
        self.assertNullLock(self.lock(b, sid, "OWNER", "o"), self.c)
        self.assertEqual(self.c.call("CHECK", a, ta), 1)
        self.assertEqual(self.c.call("CHECK", b, tb), 1)

    def test_fifo_five_waiters(self):
        sids = [self.open_session() for _ in range(6)]
        n = self.name("fifo")
        tokens = [self.assertGrant(self.lock(n, sids[0]))]
        ws = [None]
        for i in range(1, 6):
            ws.append(self.waiter(n, sids[i], "WAIT", 15000))
        self.assertEqual(self.waiter_sessions(n), sids[1:])
        for i in range(1, 6):
            self.assertEqual(self.unlock(n, sids[i - 1]), 0)
            r = ws[i].read_reply(3)
            tokens.append(self.assertGrant(r, 1, "waiter %d" % i))
            self.assertEqual(self.holder_sessions(n), [sids[i]])
            self.assertEqual(self.waiter_sessions(n), sids[i + 1:])
            for j in range(i + 1, 6):
                self.assertIs(ws[j].poll_reply(0.01), NO_REPLY, "waiter %d granted out of order" % j)
        self.assertEqual(tokens, sorted(tokens))
        self.assertEqual(len(set(tokens)), 6)
        self.assertEqual(self.unlock(n, sids[5]), 0)

    def test_shared_run_granted_together(self):
        sids = [self.open_session() for _ in range(6)]
        n = self.name("run")
        self.assertGrant(self.lock(n, sids[0]))
        w1 = self.waiter(n, sids[1], "SHARED", "WAIT", 15000)
        w2 = self.waiter(n, sids[2], "SHARED", "WAIT", 15000)
        w3 = self.waiter(n, sids[3], "SHARED", "WAIT", "FOREVER")
        w4 = self.waiter(n, sids[4], "WAIT", 15000)               # exclusive
        w5 = self.waiter(n, sids[5], "SHARED", "WAIT", 15000)     # behind the writer
        self.assertEqual(self.unlock(n, sids[0]), 0)
        toks = [self.assertGrant(w.read_reply(3), 1) for w in (w1, w2, w3)]
        self.assertEqual(toks, sorted(toks))
        self.assertEqual(len(set(toks)), 3)
        li = inspect_lock(self.c, n)
        self.assertEqual(li["mode"], "shared")
        self.assertEqual([h["session"] for h in li["holders"]], sids[1:4])
        self.assertEqual(li["waiters"], [
            {"session": sids[4], "owner": "", "mode": "exclusive"},
            {"session": sids[5], "owner": "", "mode": "shared"}])
        self.assertIs(w4.poll_reply(0.2), NO_REPLY)
        self.assertIs(w5.poll_reply(0.05), NO_REPLY, "a reader barged past a queued writer")
        self.unlock(n, sids[1])
        self.unlock(n, sids[2])
        self.assertIs(w4.poll_reply(0.1), NO_REPLY)
        self.assertIs(w5.poll_reply(0.05), NO_REPLY)
        self.unlock(n, sids[3])
        t4 = self.assertGrant(w4.read_reply(3), 1)
        self.assertGreater(t4, toks[-1])
        self.assertIs(w5.poll_reply(0.2), NO_REPLY)
        self.unlock(n, sids[4])
        self.assertGreater(self.assertGrant(w5.read_reply(3), 1), t4)

    def test_reader_does_not_barge_past_queued_writer(self):
        s1, s2, s3 = self.open_session(), self.open_session(), self.open_session()
        n = self.name("nb")
        self.assertGrant(self.lock(n, s1, "SHARED"))
        w2 = self.waiter(n, s2, "WAIT", 15000)
        self.assertNullLock(self.lock(n, s3, "SHARED"), self.c)
        self.assertNullLock(self.lock(n, s3, "SHARED", "WAIT", 200), self.c)
        li = inspect_lock(self.c, n)
        self.assertEqual([h["session"] for h in li["holders"]], [s1])
        self.assertEqual([w["session"] for w in li["waiters"]], [s2])
        # the shared holder itself may still re-enter (a holder never waits for itself)
        self.assertGrant(self.lock(n, s1, "SHARED"), 2)
        self.unlock(n, s1)
        self.unlock(n, s1)
        self.assertGrant(w2.read_reply(3), 1)

    def _deadlock_text_names(self, err, parts):
        for p in parts:
            if isinstance(p, int):
                self.assertRegex(err.text, r"(?<!\d)%d(?!\d)" % p,
                                 "DEADLOCK text should name session %d: %r" % (p, err.text))
            else:
                self.assertIn(p, err.text, "DEADLOCK text should name %r: %r" % (p, err.text))

    def test_deadlock_two_sessions(self):
        s1, s2 = self.open_session(), self.open_session()
        a, b = self.name("A"), self.name("B")
        self.assertGrant(self.lock(a, s1))
        self.assertGrant(self.lock(b, s2))
        w1 = self.waiter(b, s1, "WAIT", "FOREVER")
        before = state_snapshot(self.c, [a, b], [s1, s2])
        # a try-lock never waits, so it cannot deadlock
        self.assertNullLock(self.lock(a, s2), self.c)
        t0 = time.monotonic()
        r = self.lock(a, s2, "WAIT", 5000)
        self.assertLess(time.monotonic() - t0, 2.0, "DEADLOCK is immediate")
        self.assertErr(r, "DEADLOCK")
        self._deadlock_text_names(r, [s1, s2, a, b])
        self.assertErr(self.lock(a, s2, "WAIT", "FOREVER"), "DEADLOCK")
        self.assertEqual(state_snapshot(self.c, [a, b], [s1, s2]), before)
        self.assertEqual(self.unlock(b, s2), 0)
        self.assertGrant(w1.read_reply(3))

    def test_deadlock_three_sessions(self):
        s1, s2, s3 = self.open_session(), self.open_session(), self.open_session()
        a, b, c = self.name("A"), self.name("B"), self.name("C")
        self.assertGrant(self.lock(a, s1))
        self.assertGrant(self.lock(b, s2))
        self.assertGrant(self.lock(c, s3))
        w1 = self.waiter(b, s1, "WAIT", "FOREVER")
        w2 = self.waiter(c, s2, "WAIT", 15000)
        before = state_snapshot(self.c, [a, b, c], [s1, s2, s3])
        r = self.lock(a, s3, "WAIT", 5000)
        self.assertErr(r, "DEADLOCK")
        self._deadlock_text_names(r, [s1, s2, s3, a, b, c])
        self.assertEqual(state_snapshot(self.c, [a, b, c], [s1, s2, s3]), before)
        self.unlock(c, s3)
        self.assertGrant(w2.read_reply(3))
        self.unlock(b, s2)
        self.assertGrant(w1.read_reply(3))

    def test_deadlock_two_owners_one_session(self):
        sid = self.open_session()
        a, b = self.name("A"), self.name("B")
        oa, ob = "thread-alpha", "thread-beta"
        self.assertGrant(self.lock(a, sid, "OWNER", oa))
        self.assertGrant(self.lock(b, sid, "OWNER", ob))
        w = self.waiter(b, sid, "OWNER", oa, "WAIT", "FOREVER")
        before = state_snapshot(self.c, [a, b], [sid])
        r = self.lock(a, sid, "OWNER", ob, "WAIT", 5000)
        self.assertErr(r, "DEADLOCK")
        self._deadlock_text_names(r, [sid, oa, ob, a, b])
        self.assertEqual(state_snapshot(self.c, [a, b], [sid]), before)
        self.assertEqual(self.unlock(b, sid, "OWNER", ob), 0)
        self.assertGrant(w.read_reply(3))

    def test_deadlock_through_waiter_ahead(self):
        # A waiter has an edge to every waiter ahead of it (docs/commands.md).
        s1, s2, s3 = self.open_session(), self.open_session(), self.open_session()
        a, c = self.name("A"), self.name("C")
        self.assertGrant(self.lock(a, s1))
        self.assertGrant(self.lock(c, s3))
        w2a = self.waiter(a, s2, "WAIT", 15000)          # s2 -> s1 (holder of A)
        w2c = self.waiter(c, s2, "WAIT", 15000)          # s2 -> s3 (holder of C)
        before = state_snapshot(self.c, [a, c], [s1, s2, s3])
        # s3 queuing on A: s3 -> s1 (holder) and s3 -> s2 (waiter ahead) -> s3
        r = self.lock(a, s3, "WAIT", 5000)
        self.assertErr(r, "DEADLOCK")
        self.assertEqual(state_snapshot(self.c, [a, c], [s1, s2, s3]), before)
        self.unlock(c, s3)
        self.assertGrant(w2c.read_reply(3))
        self.unlock(a, s1)
        self.assertGrant(w2a.read_reply(3))


# ---------------------------------------------------------------------------
# Pipelining
# ---------------------------------------------------------------------------

class PipelineTest(SharedServerTestCase, LockTestMixin):

    def test_replies_in_order(self):
        n = self.name("p")
        replies = self.c.pipeline([["PING"], ["SESSION", "OPEN", 60000], ["PING", "x"],
                                   ["INSPECT", n], ["NOSUCH"], ["PING", "y"]])
        self.assertEqual(replies[0], "PONG")
        self.assertIsInstance(replies[1], int)
        self.assertEqual(replies[2], b"x")
        self.assertEqual(s(as_map(replies[3])["mode"]), "free")
        self.assertErr(replies[4], "ERR")
        self.assertEqual(replies[5], b"y")
        sid = replies[1]
        cmds = []
        for i in range(50):
            cmds.append(["LOCK", n + str(i), sid])
            cmds.append(["PING", str(i)])
        replies = self.c.pipeline(cmds)
        toks = []
        for i in range(50):
            toks.append(self.assertGrant(replies[2 * i], 1))
            self.assertEqual(replies[2 * i + 1], str(i).encode())
        self.assertEqual(toks, sorted(toks))
        self.assertEqual(len(set(toks)), 50)

    def test_inline_pipeline(self):
        self.c.send(b"PING\r\nPING a\r\nPING b\r\n")
        self.assertEqual([self.c.read_reply() for _ in range(3)], ["PONG", b"a", b"b"])

    def test_blocking_lock_holds_back_later_replies(self):
        s1, s2 = self.open_session(), self.open_session()
        n = self.name("blk")
        self.assertGrant(self.lock(n, s1))
        w = self.conn()
        w.send(encode_command("LOCK", n, s2, "WAIT", 5000) + encode_command("PING", "after")
               + b"PING\r\n")
        wait_until(lambda: self.waiter_sessions(n) == [s2], what="wait queued")
        self.assertIs(w.poll_reply(0.3), NO_REPLY, "reply behind a blocked LOCK came early")
        self.assertEqual(self.unlock(n, s1), 0)
        self.assertGrant(w.read_reply(3), 1)
        self.assertEqual(w.read_reply(3), b"after")
        self.assertEqual(w.read_reply(3), "PONG")
        # and a timed-out wait releases the replies behind it too
        w.send(encode_command("LOCK", n, s1, "WAIT", 200) + b"PING z\r\n")
        self.assertNullLock(w.read_reply(3), w)
        self.assertEqual(w.read_reply(3), b"z")


# ---------------------------------------------------------------------------
# Errors: precedence, "a failed request changes nothing", lengths
# ---------------------------------------------------------------------------

class ErrorTest(SharedServerTestCase, LockTestMixin):

    def test_numbers_out_of_range(self):
        sid = self.open_session()
        n = self.name("num")
        for args in (["SESSION", "OPEN", 99], ["SESSION", "OPEN", 3600001],
                     ["SESSION", "OPEN", "ten"],
                     ["LOCK", n, sid, "WAIT", 86400001], ["LOCK", n, sid, "WAIT", -1],
                     ["LOCK", n, sid, "WAIT", "soon"], ["LOCK", n, sid, "WAIT", 2**64],
                     ["LOCK", n, "abc"], ["LOCK", n, -1], ["LOCK", n, 2**64],
                     ["UNLOCK", n, "abc"], ["SESSION", "INFO", "abc"],
                     ["SESSION", "CLOSE", -3], ["LOCKS", "COUNT", 0],
                     ["SESSION", "LIST", "COUNT", 0], ["CHECK", n, "abc"], ["CHECK", n, -1],
                     ["CHECK", n, 2**64]):
            self.assertErr(self.c.call(*args), "ERR", "%r" % (args,))
        self.assertEqual(inspect_lock(self.c, n)["mode"], "free")
        self.assertEqual(session_info(self.c, sid)["waiting"], [])

    def test_length_limits(self):
        sid = self.open_session()
        ok_name = self.prefix.encode() + b"n" * (1024 - len(self.prefix))
        self.assertEqual(len(ok_name), 1024)
        self.assertGrant(self.lock(ok_name, sid))
        long_name = b"n" * 1025
        before = state_snapshot(self.c, [ok_name], [sid])
        self.assertErr(self.lock(long_name, sid), "LIMIT")
        self.assertErr(self.lock(long_name, sid, "WAIT", 100), "LIMIT")
        self.assertErr(self.c.call("UNLOCK", long_name, sid), "LIMIT")
        self.assertErr(self.lock(self.name("o"), sid, "OWNER", b"o" * 257), "LIMIT")
        self.assertErr(self.c.call("UNLOCK", self.name("o"), sid, "OWNER", b"o" * 257), "LIMIT")
        self.assertErr(self.c.call("SESSION", "OPEN", 1000, "NAME", b"l" * 257), "LIMIT")
        self.assertEqual(state_snapshot(self.c, [ok_name], [sid]), before)
        self.assertGrant(self.lock(self.name("o"), sid, "OWNER", b"o" * 256))
        sid2 = self.open_session(label=b"l" * 256)
        self.assertEqual(session_info(self.c, sid2)["name"], "l" * 256)

    def test_error_precedence(self):
        bogus = 987654321
        n = self.name("prec")
        # syntax before numbers before lengths before state
        self.assertErr(self.c.call("LOCK", b"n" * 1025, bogus, "BOGUS"), "ERR")
        self.assertErr(self.c.call("LOCK", b"n" * 1025, bogus, "WAIT", 86400001), "ERR")
        self.assertErr(self.c.call("SESSION", "OPEN", 99, "NAME", b"l" * 257), "ERR")
        self.assertErr(self.c.call("LOCK", b"n" * 1025, bogus), "LIMIT")
        self.assertErr(self.c.call("LOCK", n, bogus, "OWNER", b"o" * 257), "LIMIT")
        self.assertErr(self.c.call("LOCK", n, bogus), "NOSESSION")

    def test_failed_requests_change_nothing(self):
        s1, s2 = self.open_session(), self.open_session()
        a, b = self.name("a"), self.name("b")
        self.assertGrant(self.lock(a, s1))
        self.assertGrant(self.lock(a, s1))
        self.assertGrant(self.lock(b, s2, "SHARED"))
        names, sids = [a, b, self.name("c")], [s1, s2]
        before = state_snapshot(self.c, names, sids)
        for args in (["LOCK", a, s1, "SHARED"], ["LOCK", b, s2], ["UNLOCK", a, s2],
                     ["UNLOCK", b, s1], ["UNLOCK", a, s1, "OWNER", "zz"],
                     ["LOCK", a, 987654321], ["LOCK", self.name("c"), 987654321, "WAIT", 100],
                     ["LOCK", a, s2, "WAIT", 86400001], ["LOCK", b"x" * 1025, s1],
                     ["LOCK", a, s2, "OWNER", b"x" * 257, "WAIT", 100],
                     ["SESSION", "OPEN", 50], ["SESSION", "OPEN", 1000, "NAME", b"x" * 257],
                     ["SESSION", "CLOSE", 987654321], ["LOCK", "", s1], ["NOSUCH", a],
                     ["LOCK", a, s2, "WAIT"], ["LOCKS", "COUNT", 0]):
            r = self.c.call(*args)
            self.assertIsInstance(r, RespError, "%r -> %r" % (args, r))
            self.assertEqual(state_snapshot(self.c, names, sids), before, "after %r -> %r" % (args, r))


# ---------------------------------------------------------------------------
# LIMIT with small bounds (one server per test)
# ---------------------------------------------------------------------------

class LimitsTest(TumblerTestCase, LockTestMixin):
    TEST_TIMEOUT = 60

    def start(self, **kw):
        self.server = self.new_server(**kw)
        self.c = self.conn()
        return self.server

    def test_max_sessions(self):
        self.start(max_sessions=3)
        ids = [self.open_session(self.c) for _ in range(3)]
        before = state_snapshot(self.c, [], ids)
        self.assertErr(self.c.call("SESSION", "OPEN", 60000), "LIMIT")
        self.assertEqual(state_snapshot(self.c, [], ids), before)
        self.assertEqual(self.c.call("SESSION", "CLOSE", ids[0]), 0)
        self.open_session(self.c)
        self.assertErr(self.c.call("SESSION", "OPEN", 60000), "LIMIT")

    def test_max_waiters_per_lock(self):
        self.start(max_waiters_per_lock=2)
        s = [self.open_session(self.c) for _ in range(5)]
        n = "lim-w"
        self.assertGrant(self.lock(n, s[0]))
        w1 = self.waiter(n, s[1], "WAIT", 15000)
        w2 = self.waiter(n, s[2], "WAIT", 15000)
        before = state_snapshot(self.c, [n], s)
        self.assertErr(self.lock(n, s[3], "WAIT", 5000), "LIMIT")
        self.assertErr(self.lock(n, s[3], "SHARED", "WAIT", "FOREVER"), "LIMIT")
        self.assertNullLock(self.lock(n, s[3]), self.c)   # a try-lock does not queue
        self.assertEqual(state_snapshot(self.c, [n], s), before)
        # another lock has its own queue
        m = "lim-w2"
        self.assertGrant(self.lock(m, s[0]))
        w3 = self.waiter(m, s[3], "WAIT", 15000)
        self.unlock(n, s[0])
        self.assertGrant(w1.read_reply(3))
        w4 = self.waiter(n, s[4], "WAIT", 15000)      # room again
        self.assertEqual(self.waiter_sessions(n), [s[2], s[4]])
        for w in (w2, w3, w4):
            w.close()

    def test_max_holds_per_session(self):
        self.start(max_holds_per_session=3)
        s1, s2 = self.open_session(self.c), self.open_session(self.c)
        self.assertGrant(self.lock("h-a", s1))
        self.assertGrant(self.lock("h-b", s1))
        self.assertGrant(self.lock("h-c", s2))
        w = self.waiter("h-c", s1, "WAIT", 15000)          # holds plus waits: 3
        before = state_snapshot(self.c, ["h-a", "h-b", "h-c", "h-d"], [s1, s2])
        self.assertErr(self.lock("h-d", s1), "LIMIT")
        self.assertErr(self.lock("h-d", s1, "OWNER", "other"), "LIMIT")
        self.assertEqual(state_snapshot(self.c, ["h-a", "h-b", "h-c", "h-d"], [s1, s2]), before)
        self.assertGrant(self.lock("h-d", s2))             # another session is not bound by it
        w.close()
        wait_until(lambda: self.waiter_sessions("h-c") == [], what="wait cancelled")
        self.assertGrant(self.lock("h-d2", s1))

    def test_max_locks(self):
        self.start(max_locks=3)
        s1, s2 = self.open_session(self.c), self.open_session(self.c)
        for n in ("k-a", "k-b", "k-c"):
            self.assertGrant(self.lock(n, s1))
        before = state_snapshot(self.c, ["k-a", "k-b", "k-c", "k-d"], [s1, s2])
        self.assertErr(self.lock("k-d", s2), "LIMIT")
        self.assertErr(self.lock("k-d", s1, "WAIT", 100), "LIMIT")
        self.assertEqual(state_snapshot(self.c, ["k-a", "k-b", "k-c", "k-d"], [s1, s2]), before)
        self.assertGrant(self.lock("k-a", s1), 2)          # reentrant: no new lock
        self.assertEqual(self.unlock("k-b", s1), 0)
        self.assertGrant(self.lock("k-d", s2))

    def test_max_connections(self):
        srv = self.start(max_connections=3)
        # the harness' readiness probe has closed; let the server notice
        wait_until(lambda: parse_info(self.c.call("INFO"))["connections"] == "1",
                   what="connections:1")
        c2 = self.conn()
        c3 = self.conn()
        self.assertEqual(c2.call("PING"), "PONG")
        self.assertEqual(c3.call("PING"), "PONG")
        c4 = self.conn()
        try:
            c4.send_cmd("PING")
        except OSError:
            pass
        data = c4.read_all_until_close(3)
        self.assertTrue(data.startswith(b"-LIMIT"), "4th connection got %r" % data)
        self.assertEqual(self.c.call("PING"), "PONG")
        c3.close()

        def fifth_ok():
            c = srv.conn(timeout=1)
            try:
                return c.call("PING") == "PONG"
            except Exception:
                return False
            finally:
                c.close()
        wait_until(fifth_ok, timeout=5, interval=0.1, what="a slot after a close")


# ---------------------------------------------------------------------------
# AUTH with --requirepass
# ---------------------------------------------------------------------------

class AuthTest(SharedServerTestCase, LockTestMixin):
    SERVER_KW = {"requirepass": "s3cret"}

    def test_noauth_then_auth(self):
        c = self.conn(auth=False)
        self.assertErr(c.call("SESSION", "OPEN", 1000), "NOAUTH")
        self.assertErr(c.call("LOCK", "x", 1), "NOAUTH")
        self.assertErr(c.call("INSPECT", "x"), "NOAUTH")
        self.assertErr(c.call("AUTH", "wrong"), "WRONGPASS")
        self.assertErr(c.call("SESSION", "OPEN", 1000), "NOAUTH")
        self.assertEqual(c.call("AUTH", "s3cret"), "OK")
        self.assertIsInstance(c.call("SESSION", "OPEN", 1000), int)

    def test_auth_with_username(self):
        c = self.conn(auth=False)
        self.assertErr(c.call("AUTH", "default", "wrong"), "WRONGPASS")
        self.assertErr(c.call("AUTH", "someone", "s3cret"), "WRONGPASS")
        self.assertEqual(c.call("AUTH", "default", "s3cret"), "OK")
        self.assertEqual(c.call("PING"), "PONG")

    def test_hello_auth(self):
        c = self.conn(auth=False)
        r = c.call("HELLO", "3")
        self.assertErr(r, "NOAUTH")
        self.assertErr(c.call("HELLO", "3", "AUTH", "default", "nope"), "WRONGPASS")
        r = c.call("HELLO", "3", "AUTH", "default", "s3cret")
        self.assertIsInstance(r, RespMap, "%r" % (r,))
        self.assertIsInstance(c.call("SESSION", "OPEN", 1000), int)

    def test_failed_auth_keeps_state(self):
        sid = self.open_session()
        n = self.name("a")
        self.assertGrant(self.lock(n, sid))
        before = state_snapshot(self.c, [n], [sid])
        c = self.conn(auth=False)
        self.assertErr(c.call("UNLOCK", n, sid), "NOAUTH")
        self.assertErr(c.call("SESSION", "CLOSE", sid), "NOAUTH")
        self.assertEqual(state_snapshot(self.c, [n], [sid]), before)


# ---------------------------------------------------------------------------
# Lock-delay
# ---------------------------------------------------------------------------

class LockDelayTest(SharedServerTestCase, LockTestMixin):
    SERVER_KW = {"lock_delay_ms": 500}

    def test_expired_session_lock_is_delayed(self):
        s1 = self.open_session(ttl=300)
        s2, s3 = self.open_session(), self.open_session()
        n = self.name("ld")
        self.assertGrant(self.lock(n, s1))
        t0 = time.monotonic()
        w = self.conn()
        w.send_cmd("LOCK", n, s2, "WAIT", 10000)
        # when the holder is gone (expired), the delay starts
        wait_until(lambda: self.holder_sessions(n) == [], timeout=5, interval=0.01,
                   what="expiry of session %d" % s1)
        t_free = time.monotonic()
        self.assertGreaterEqual(t_free - t0, 0.25, "expired before its ttl")
        li = inspect_lock(self.c, n)
        self.assertGreater(li["lock_delay_ms"], 0)
        self.assertLessEqual(li["lock_delay_ms"], 500)
        self.assertIn(n.encode(), self.c.call("LOCKS", "MATCH", n))
        self.assertNullLock(self.lock(n, s3), self.c)          # try-lock during delay: null
        r = w.read_reply(5)
        t_grant = time.monotonic()
        self.assertGrant(r, 1)
        self.assertGreaterEqual(t_grant - t_free, 0.40,
                                "granted %.3fs after expiry; lock-delay is 500 ms" % (t_grant - t_free))
        self.assertLess(t_grant - t_free, 2.5)
        self.assertGreaterEqual(t_grant - t0, 0.7)
        self.assertEqual(self.holder_sessions(n), [s2])

    def test_try_lock_during_delay_then_free(self):
        s1 = self.open_session(ttl=300)
        s2 = self.open_session()
        n = self.name("ld2")
        self.assertGrant(self.lock(n, s1))
        wait_until(lambda: self.holder_sessions(n) == [], timeout=5, interval=0.01,
                   what="expiry")
        t_free = time.monotonic()
        self.assertNullLock(self.lock(n, s2), self.c)
        tok = wait_until(lambda: self.lock(n, s2), timeout=5, interval=0.02, what="grant after delay")
        self.assertGreaterEqual(time.monotonic() - t_free, 0.40)
        self.assertGrant(tok, 1)

    def test_closed_or_unlocked_lock_free_at_once(self):
        s3, s4 = self.open_session(), self.open_session()
        n, m = self.name("cl"), self.name("ul")
        self.assertGrant(self.lock(n, s3))
        self.assertGrant(self.lock(m, s4))
        self.assertEqual(self.c.call("SESSION", "CLOSE", s3), 1)
        self.assertGrant(self.lock(n, s4), 1)
        self.assertEqual(inspect_lock(self.c, n)["lock_delay_ms"], 0)
        s5 = self.open_session()
        self.assertEqual(self.unlock(m, s4), 0)
        self.assertGrant(self.lock(m, s5), 1)


if __name__ == "__main__":
    unittest.main()


class WaitBookkeepingTest(TumblerTestCase, LockTestMixin):
    """The server's own record of each wait is dropped however the wait ends
    (INFO blocked_clients), so that closed connections leak nothing."""

    TEST_TIMEOUT = 60

    def blocked(self):
        return int(parse_info(self.c.call("INFO", "server"))["blocked_clients"])

    def test_every_way_a_wait_ends_drops_its_record(self):
        self.server = self.new_server()
        self.c = self.conn()
        s1, s2 = self.open_session(self.c), self.open_session(self.c)
        n = "bk"
        self.assertEqual(self.blocked(), 0)
        self.assertGrant(self.lock(n, s1))
        # Ended by the WAIT running out.
        w = self.waiter(n, s2, "WAIT", 200)
        wait_until(lambda: self.blocked() == 1, what="wait recorded")
        self.assertNullLock(w.read_reply(3), w)
        self.assertEqual(self.blocked(), 0)
        # Ended by its connection closing, many times over.
        for _ in range(20):
            w = self.waiter(n, s2, "WAIT", "FOREVER")
            w.close()
            wait_until(lambda: self.waiter_sessions(n) == [], what="closed wait cancelled")
        wait_until(lambda: self.blocked() == 0, what="closed waits' records dropped")
        # Ended by a grant.
        w = self.waiter(n, s2, "WAIT", 10000)
        wait_until(lambda: self.waiter_sessions(n) == [s2], what="queued")
        self.assertEqual(self.unlock(n, s1), 0)
        self.assertGrant(w.read_reply(3))
        self.assertEqual(self.blocked(), 0)
        # A grant racing with the connection's close is released again.
        self.assertGrant(self.lock(n + "2", s1))
        w = self.waiter(n + "2", s2, "WAIT", "FOREVER")
        wait_until(lambda: self.waiter_sessions(n + "2") == [s2], what="queued")
        self.c.send_cmd("UNLOCK", n + "2", s1)
        w.close()
        self.assertEqual(self.c.read_reply(3), 0)
        wait_until(lambda: self.holder_sessions(n + "2") == [], what="unseen grant released")
        wait_until(lambda: self.blocked() == 0, what="records dropped")
