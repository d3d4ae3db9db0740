"""Fault scenarios against a real tumblerd cluster under load.

Each test starts its own cluster (3 nodes, election timeout 300 ms, or 5
nodes), a fenced resource and 4 worker processes on 2 locks, injects one kind
of fault several times, stops the workers and then checks (see checks.py):

- the fenced resource flagged no OVERLAP, and every interruption it saw hit a
  holder whose session had really ended;
- no two acknowledged grants share a token; tokens follow real time;
- no two sessions held one lock at once (from the workers' logs);
- no acknowledged grant lost: every acknowledged token <= INFO last_token,
  and a fresh grant afterwards gets a higher token;
- every node's state_digest is equal at equal applied_index;
- the cluster serves again: a fresh client locks and unlocks every lock;
- no node crashed on its own; no worker session was lost unless the test
  meant it to be (sessions survive leader changes by design);
plus the per-scenario checks written in each test.

Everything is bounded: SIGALRM per test (TEST_TIMEOUT), bounded waits, every
process killed by PID at the end. On failure the temp dir (node logs, worker
logs, resource history) is kept and its path printed.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checks  # noqa: E402
from fenced_resource import FencedResource  # noqa: E402
from harness import (Cluster, Conn, RespError, NET_ERRORS, ReplyTimeout, ConnectionClosed,  # noqa: E402
                     is_grant, kill_tracked, track, wait_until, as_map, s, dump_json)

HERE = os.path.dirname(os.path.abspath(__file__))
ROUNDS = int(os.environ.get("TUMBLER_CLUSTER_ROUNDS", "3"))
ELECTION_MS = 300
TTL_MS = 2000
RESULTS = []      # per-scenario summaries, printed at the end by run.sh


class TestTimeout(Exception):
    pass


def _alarm(signum, frame):
    raise TestTimeout("scenario exceeded its time bound")


class ClusterFaultTest(unittest.TestCase):
    TEST_TIMEOUT = 75
    N = 3
    PROXIES = False
    WORKERS = 4
    LOCKS = ("L1", "L2")

    def run(self, result=None):
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(self.TEST_TIMEOUT)
        try:
            return super().run(result)
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)

    # -- setup / teardown
    def setUp(self):
        self.t0 = time.monotonic()
        self.failed = True
        self.cluster = None
        self.workers = {}
        self.resource = FencedResource().start()
        self.cluster = Cluster(n=self.N, election_timeout_ms=ELECTION_MS, proxies=self.PROXIES,
                               name=self._testMethodName)
        self.logdir = os.path.join(self.cluster.root, "workers")
        os.makedirs(self.logdir)
        self.notes = {}
        self.allowed_lost = set()      # sids the test expects to lose
        self.expected_exits = set()
        self.cluster.start(timeout=20)

    def tearDown(self):
        for p in self.workers.values():
            kill_tracked(p)
        keep = self.failed or bool(os.environ.get("TUMBLER_KEEP_TMP"))
        if self.cluster is not None:
            try:
                dump_json(os.path.join(self.cluster.root, "resource.json"), self.resource.history())
                dump_json(os.path.join(self.cluster.root, "events.json"), self.cluster.events)
            except Exception:
                pass
            if self.failed:
                sys.stderr.write("\n%s\n" % self.cluster.log_tails(30))
            self.cluster.teardown(keep=keep)
        self.resource.close()

    def start_workers(self, n=None, extra=None, duration=120):
        n = self.WORKERS if n is None else n
        for i in range(n):
            wid = "w%d" % i
            cmd = [sys.executable, os.path.join(HERE, "worker.py"), "--id", wid,
                   "--nodes", ",".join(self.cluster.client_addrs()),
                   "--resource", str(self.resource.port), "--locks", ",".join(self.LOCKS),
                   "--log", os.path.join(self.logdir, wid + ".log"),
                   "--ttl", str(TTL_MS), "--duration", str(duration), "--seed", str(i)]
            cmd += (extra or {}).get(wid, [])
            self.workers[wid] = track(subprocess.Popen(cmd, stdin=subprocess.DEVNULL))

    def stop_workers(self, timeout=10.0):
        for p in self.workers.values():
            if p.poll() is None:
                try:
                    os.kill(p.pid, signal.SIGCONT)
                    os.kill(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + timeout
        for wid, p in self.workers.items():
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            kill_tracked(p)

    def logs(self):
        return checks.load_worker_logs(self.logdir)

    def grants_between(self, t1, t2, port=None):
        return [g for g in checks.grants_of(self.logs())
                if t1 <= g["t_ack"] <= t2 and (port is None or g["port"] == port)]

    def wait_grants_after(self, t, n=3, timeout=15.0, what="workers granted again"):
        wait_until(lambda: len(self.grants_between(t, float("inf"))) >= n, timeout,
                   interval=0.1, what=what)

    def sleep_load(self, secs):
        time.sleep(secs)

    def open_probe_session(self, ttl=15000):
        sid = self.cluster.call_leader("SESSION", "OPEN", ttl, "NAME", "probe", timeout=10)
        self.assertIsInstance(sid, int, "probe SESSION OPEN -> %r" % (sid,))
        return sid

    def assert_not_held_by(self, name, sid, reply, what):
        """A request answered with an error must have changed nothing: after
        recovery `name` is not held by `sid` (unless the reply was a grant)."""
        if is_grant(reply):
            return
        insp = as_map(self.cluster.call_leader("INSPECT", name, timeout=10))
        holders = [as_map(h) for h in insp.get("holders") or []]
        self.assertFalse([h for h in holders if h.get("session") == sid],
                         "%s: LOCK %s answered %r, yet after recovery session %s holds it: %r"
                         % (what, name, reply, sid, insp))

    def wait_caught_up(self, node, timeout=15.0):
        """Until `node` has applied what the leader has committed."""
        node = self.cluster.node(node)

        def ok():
            infos = self.cluster.infos()
            mine = infos.get(node.id)
            ldr = [inf for inf in infos.values() if inf and inf.get("role") == "leader"]
            if not mine or not ldr:
                return False
            return int(mine.get("applied_index", -1)) >= int(ldr[0].get("commit_index", 1 << 62)) - 50
        wait_until(ok, timeout, interval=0.1, what="node %d caught up" % node.id)

    # -- the common checks
    def finish(self, min_grants=20):
        """Stops the workers and runs every whole-history check."""
        self.stop_workers()
        cl = self.cluster
        errs = []
        crashed = [n.id for n in cl.nodes.values()
                   if n.proc is not None and n.proc.poll() is not None and n.id not in self.expected_exits]
        if crashed:
            errs.append("node(s) %s exited on their own (rc %s)" % (
                crashed, [cl.nodes[i].proc.returncode for i in crashed]))
            for i in crashed:
                cl.nodes[i].start()
        logs = self.logs()
        hist = self.resource.history()
        errs += checks.check_history(logs, hist)
        lost = {e["sid"] for e in logs if e["ev"] == "session_lost"}
        unexpected = lost - self.allowed_lost
        if unexpected:
            evs = [e for e in logs if e["ev"] == "session_lost" and e["sid"] in unexpected]
            errs.append("worker sessions lost although no holder was paused: %r" % evs)
        grants = checks.grants_of(logs)
        if len(grants) < min_grants:
            errs.append("only %d grants under load (want >= %d)" % (len(grants), min_grants))
        # serving again, and a fresh grant above every acknowledged token
        fresh = []
        try:
            cl.wait_serving(20)
            for name in self.LOCKS:
                fresh.append(cl.fresh_lock_cycle(name, timeout=15))
        except AssertionError as e:
            errs.append("cluster not serving after the run: %s" % e)
        try:
            d = cl.digests(timeout=15)
            errs += checks.check_digests(d)
            info = cl.leader(5).info()
            last_token = int(info.get("last_token")) if info and info.get("last_token") else None
            if last_token is None:
                errs.append("INFO has no last_token")
        except AssertionError as e:
            errs.append("nodes did not converge: %s\n%s" % (e, cl.describe()))
            d, last_token = None, None
        errs += checks.check_tokens_kept(logs, last_token, min(fresh) if fresh else None)
        summ = checks.summary(logs, hist)
        summ.update({"scenario": self._testMethodName, "seconds": round(time.monotonic() - self.t0, 1),
                     "digests": {k: v for k, v in (d or {}).items()}, "fresh_tokens": fresh,
                     "last_token": last_token, "violations": len(errs)})
        summ.update(self.notes)
        RESULTS.append(summ)
        sys.stderr.write("\n[%s] %s\n" % (self._testMethodName, json.dumps(summ, default=str)))
        if errs:
            self.fail("%d violation(s):\n- " % len(errs) + "\n- ".join(errs[:30]))
        self.failed = False


class ThreeNodes(ClusterFaultTest):

    def test_kill_leader_restart(self):
        """kill -9 the leader under load, a new one serves; restart the old one."""
        self.start_workers()
        self.wait_grants_after(self.t0, 10, what="first grants")
        failover = []
        for r in range(ROUNDS):
            self.sleep_load(1.0)
            old = self.cluster.leader(10)
            t_kill = time.monotonic()
            self.cluster.kill9(old)
            self.cluster.wait_serving(15, exclude=[old])
            failover.append(round(time.monotonic() - t_kill, 3))
            self.wait_grants_after(time.monotonic(), 3, what="grants after failover %d" % r)
            self.cluster.restart(old)
            self.wait_caught_up(old)
        self.notes["failover_s"] = failover
        self.finish()

    def test_kill_follower(self):
        """kill -9 a follower: the two others keep granting; restart it."""
        self.start_workers()
        self.wait_grants_after(self.t0, 10, what="first grants")
        for r in range(ROUNDS):
            self.sleep_load(0.5)
            ldr = self.cluster.leader(10)
            fol = [n for n in self.cluster.nodes.values() if n is not ldr][r % 2]
            t_kill = time.monotonic()
            self.cluster.kill9(fol)
            self.sleep_load(2.0)
            during = self.grants_between(t_kill + 0.5, time.monotonic())
            self.assertGreater(len(during), 0, "no grant while one follower was down")
            self.cluster.restart(fol)
            self.wait_caught_up(fol)
        self.finish()

    def test_kill_two_followers_no_quorum(self):
        """kill -9 both followers: the survivor grants nothing (TRYAGAIN or
        NOTLEADER); restart them and the cluster serves again."""
        self.start_workers()
        self.wait_grants_after(self.t0, 10, what="first grants")
        probes = []
        for r in range(min(ROUNDS, 2)):
            self.sleep_load(0.5)
            probe_sid = self.open_probe_session()
            ldr = self.cluster.leader(10)
            fols = [n for n in self.cluster.nodes.values() if n is not ldr]
            t_kill = time.monotonic()
            for f in fols:
                self.cluster.kill9(f)
            time.sleep(0.3)
            # a try-lock on the survivor
            t_probe = time.monotonic()
            try:
                with ldr.conn(timeout=6.0) as c:
                    reply = c.call("LOCK", "probe-noquorum-%d" % r, probe_sid, timeout=6.0)
            except ReplyTimeout:
                reply = "no reply within 6 s"
            except NET_ERRORS as e:
                reply = "network error %r" % (e,)
            dt = round(time.monotonic() - t_probe, 3)
            probes.append({"reply": repr(reply), "seconds": dt})
            self.assertFalse(is_grant(reply), "the survivor without quorum granted: %r" % (reply,))
            self.assertTrue(isinstance(reply, RespError) and reply.code in ("TRYAGAIN", "NOTLEADER"),
                            "LOCK on the node without quorum answered %r after %.3f s "
                            "(want -TRYAGAIN or -NOTLEADER)" % (reply, dt))
            # more load without quorum: nothing may be granted
            self.sleep_load(1.5)
            t_restart = time.monotonic()
            bad = self.grants_between(t_kill + 1.0, t_restart)
            self.assertEqual(bad, [], "grants acknowledged while no quorum existed")
            for f in fols:
                self.cluster.restart(f)
            self.cluster.wait_serving(20)
            self.wait_grants_after(t_restart, 3, what="grants after quorum came back")
            self.assert_not_held_by("probe-noquorum-%d" % r, probe_sid, reply, "no quorum")
            try:
                self.cluster.call_leader("SESSION", "CLOSE", probe_sid, timeout=5)
            except AssertionError:
                pass
        self.notes["no_quorum_probe"] = probes
        self.finish()

    def test_failed_lock_changes_nothing(self):
        """A LOCK answered -TRYAGAIN/-NOTLEADER must change nothing (PROTOCOL.md:
        'A request that fails changes nothing'; TRYAGAIN is 'safe to retry').
        Freeze both followers, send LOCK to the leader, let it fail, thaw the
        followers: the lock must not be held by that session afterwards."""
        results = []
        for r in range(min(ROUNDS, 2)):
            name = "failed-lock-%d" % r
            sid = self.open_probe_session(ttl=60000)
            ldr = self.cluster.leader(10)
            fols = [n for n in self.cluster.nodes.values() if n is not ldr]
            for f in fols:
                self.cluster.stop(f)
            t = time.monotonic()
            try:
                with ldr.conn(timeout=8.0) as c:
                    reply = c.call("LOCK", name, sid, timeout=8.0)
            except NET_ERRORS as e:
                reply = "no reply: %r" % (e,)
            dt = round(time.monotonic() - t, 3)
            for f in fols:
                self.cluster.cont(f)
            self.cluster.wait_serving(15)
            insp = as_map(self.cluster.call_leader("INSPECT", name))
            holders = [as_map(h) for h in insp.get("holders") or []]
            results.append({"reply": repr(reply), "seconds": dt,
                            "holders_after": [(h.get("session"), h.get("token")) for h in holders]})
            self.cluster.call_leader("SESSION", "CLOSE", sid, timeout=5)
            if is_grant(reply):
                continue   # it committed after all: consistent
            if str(reply).startswith("no reply"):
                # The node closed the connection: "outcome unknown" is the
                # honest answer for an entry that may still commit, and the
                # one tumblerd gives (it never answers TRYAGAIN/NOTLEADER for
                # an appended entry). Either state is then consistent.
                continue
            self.assertEqual(holders, [], "LOCK %s answered %r (after %.3f s, followers frozen), "
                             "yet after recovery the lock is held: %r" % (name, reply, dt, insp))
        self.notes["failed_lock"] = results
        self.finish(min_grants=0)

    def test_sigstop_leader(self):
        """SIGSTOP the leader for > election timeout; a new leader takes over;
        after SIGCONT the old one grants nothing: a LOCK sent to it while it
        was stopped is not granted (or, if granted, the cluster knows it)."""
        self.start_workers()
        self.wait_grants_after(self.t0, 10, what="first grants")
        probes = []
        for r in range(ROUNDS):
            self.sleep_load(1.0)
            probe_sid = self.open_probe_session()
            old = self.cluster.leader(10)
            pc = old.conn(timeout=8.0)
            t_stop = time.monotonic()
            self.cluster.stop(old)
            pc.send_cmd("LOCK", "probe-stopped-%d" % r, probe_sid)
            new = self.cluster.wait_serving(15, exclude=[old])
            took_over = round(time.monotonic() - t_stop, 3)
            time.sleep(max(0.0, 1.5 - (time.monotonic() - t_stop)))
            t_cont = time.monotonic()
            self.cluster.cont(old)
            try:
                reply = pc.read_reply(8.0)
            except (ReplyTimeout, ConnectionClosed) as e:
                reply = "no reply: %s" % e
            pc.close()
            # when does the old node admit it is not the leader?
            def stepped():
                inf = old.info()
                return inf is not None and inf.get("role") != "leader"
            try:
                wait_until(stepped, 5, interval=0.02, what="old leader steps down")
                t_down = time.monotonic()
            except AssertionError:
                t_down = None
            probes.append({"reply": repr(reply), "takeover_s": took_over,
                           "stepdown_after_cont_s": round(t_down - t_cont, 3) if t_down else None,
                           "new_leader": new.id})
            self.wait_caught_up(old)
            self.assert_not_held_by("probe-stopped-%d" % r, probe_sid, reply, "resumed old leader")
            if is_grant(reply):
                insp = as_map(self.cluster.call_leader("INSPECT", "probe-stopped-%d" % r))
                holders = [as_map(h) for h in insp.get("holders") or []]
                self.assertTrue(any(h.get("session") == probe_sid and h.get("token") == reply[0]
                                    for h in holders),
                                "the resumed old leader granted %r but the cluster's leader shows %r"
                                % (reply, insp))
            self.assertIsNotNone(t_down, "old leader still claims leadership 5 s after SIGCONT")
            # Grants the old node acknowledged between SIGCONT and stepping down.
            # One requested before the freeze may have been replicated and then
            # committed by the new leader: acknowledging it late is right (the
            # whole-history checks catch a token the cluster does not know). One
            # requested while it was frozen cannot have been committed.
            late = self.grants_between(t_cont, t_down + 0.2, port=old.client_port)
            probes[-1]["late_acks_of_earlier_requests"] = len([g for g in late if g["t_req"] < t_stop])
            late = [g for g in late if g["t_req"] >= t_stop]
            self.assertEqual(late, [], "the resumed old leader granted requests sent while frozen")
            try:
                self.cluster.call_leader("SESSION", "CLOSE", probe_sid, timeout=5)
            except AssertionError:
                pass
            self.wait_caught_up(old)
        self.notes["stopped_leader_probes"] = probes
        self.finish()

    def test_sigstop_holder(self):
        """SIGSTOP a worker inside its critical section for longer than its TTL:
        its session expires, the next waiter gets the lock; on SIGCONT its write
        is refused as STALE; no OVERLAP."""
        victim = "w0"
        self.start_workers(extra={victim: ["--cs-ms", "300"]})
        self.wait_grants_after(self.t0, 10, what="first grants")
        vp = self.workers[victim]
        rounds = []
        for r in range(ROUNDS):
            # stop the victim while its begin is open at the resource
            deadline = time.monotonic() + 15
            caught = None
            while time.monotonic() < deadline and caught is None:
                h = self.resource.history()
                opened = [(lk, tok) for lk, o in h["open"].items() for tok, cli in o.items() if cli == victim]
                if not opened:
                    time.sleep(0.01)
                    continue
                os.kill(vp.pid, signal.SIGSTOP)
                t_stop = time.monotonic()
                time.sleep(0.05)
                h = self.resource.history()
                still = [(lk, tok) for lk, tok in opened if h["open"].get(lk, {}).get(tok) == victim]
                if still:
                    caught = still[0]
                else:
                    os.kill(vp.pid, signal.SIGCONT)
                    time.sleep(0.05)
            self.assertIsNotNone(caught, "could not catch the victim inside its critical section")
            lock, token = caught
            sid = [g for g in checks.grants_of(self.logs())
                   if g["client"] == victim and g["token"] == token][0]["sid"]
            self.allowed_lost.add(sid)
            time.sleep(TTL_MS / 1000.0 + 2.0)
            t_cont = time.monotonic()
            os.kill(vp.pid, signal.SIGCONT)

            def refused():
                return [w for w in self.resource.history()["stale"]
                        if w["client"] == victim and w["token"] == token]
            stale = wait_until(refused, 5, interval=0.05, what="the victim's late write refused")
            h = self.resource.history()
            its = [i for i in h["interruptions"] if i["lock"] == lock and i["old_token"] == token]
            self.assertTrue(its, "nobody else got %s while the victim was stopped" % lock)
            self.assertTrue(its[0]["fenced"], "interruption not fenced: %r" % its)
            # the next holder was granted only after the victim's lease could run out
            nxt = [g for g in checks.grants_of(self.logs())
                   if g["lock"] == lock and g["token"] == its[0]["new_token"]][0]
            waited = nxt["t_ack"] - t_stop
            self.assertGreaterEqual(waited, TTL_MS / 1000.0 * 0.6,
                                    "the paused holder's lock was re-granted %.3f s after it stopped "
                                    "(TTL %d ms): the session expired early" % (waited, TTL_MS))
            rounds.append({"lock": lock, "token": token, "next_token": its[0]["new_token"],
                           "regranted_after_s": round(waited, 3), "stale_writes": len(stale)})
            self.wait_grants_after(t_cont, 3, what="grants after the victim resumed")
        self.notes["holder_pauses"] = rounds
        self.finish()

    def test_full_cluster_restart(self):
        """kill -9 every node under load and start them all again."""
        self.start_workers()
        self.wait_grants_after(self.t0, 10, what="first grants")
        took = []
        for r in range(min(ROUNDS, 2)):
            self.sleep_load(1.5)
            before = max([g["token"] for g in checks.grants_of(self.logs())] or [0])
            self.cluster.stop_all()
            time.sleep(0.5)
            t = time.monotonic()
            self.cluster.start_all(timeout=20)
            took.append(round(time.monotonic() - t, 3))
            self.wait_grants_after(t, 3, what="grants after the full restart")
            after = min(g["token"] for g in self.grants_between(t, float("inf")))
            self.assertGreater(after, before, "token after full restart did not exceed tokens before")
        self.notes["full_restart_serving_s"] = took
        self.finish()


class ThreeNodesTransfer(ClusterFaultTest):

    def test_transfer_leader(self):
        """CLUSTER TRANSFER under load, repeatedly: leadership moves, nothing
        acknowledged is lost, no request answered with an error takes effect."""
        self.start_workers()
        self.wait_grants_after(self.t0, 10, what="first grants")
        moves = []
        for r in range(ROUNDS * 2):
            self.sleep_load(0.7)
            old = self.cluster.leader(10)
            t = time.monotonic()
            reply = old.call("CLUSTER", "TRANSFER", timeout=5.0)
            self.assertFalse(isinstance(reply, RespError), "CLUSTER TRANSFER -> %r" % (reply,))
            new = self.cluster.wait_serving(10, exclude=[old])
            moves.append({"from": old.id, "to": new.id, "reply": repr(reply),
                          "serving_s": round(time.monotonic() - t, 3)})
            self.wait_grants_after(time.monotonic(), 3, what="grants after transfer %d" % r)
        self.notes["transfers"] = moves
        self.finish()


class ThreeNodesPartition(ClusterFaultTest):
    PROXIES = True

    def test_partition_leader(self):
        """Cut the leader off from its peers (raft proxies), a new leader
        serves the majority; the isolated one grants nothing; heal."""
        self.start_workers()
        self.wait_grants_after(self.t0, 10, what="first grants")
        rounds = []
        for r in range(ROUNDS):
            self.sleep_load(1.0)
            probe_sid = self.open_probe_session()
            old = self.cluster.leader(10)
            t_cut = time.monotonic()
            self.cluster.isolate(old)
            new = self.cluster.wait_serving(15, exclude=[old])
            took = round(time.monotonic() - t_cut, 3)
            # the isolated node may still believe it leads: it must not grant
            t_probe = time.monotonic()
            try:
                with old.conn(timeout=5.0) as c:
                    reply = c.call("LOCK", "probe-isolated-%d" % r, probe_sid, timeout=5.0)
            except ReplyTimeout:
                reply = "no reply within 5 s"
            except NET_ERRORS as e:
                reply = "network error %r" % (e,)
            self.assertFalse(is_grant(reply), "the isolated old leader granted %r" % (reply,))
            self.sleep_load(max(0.0, 2.0 - (time.monotonic() - t_cut)))
            t_heal = time.monotonic()
            late = self.grants_between(t_cut + 2 * ELECTION_MS / 1000.0 * 2 + 0.5, t_heal,
                                       port=old.client_port)
            self.assertEqual(late, [], "the isolated node acknowledged grants")
            self.cluster.heal()
            self.wait_caught_up(old)
            self.assert_not_held_by("probe-isolated-%d" % r, probe_sid, reply, "isolated leader")
            rounds.append({"new_leader": new.id, "takeover_s": took,
                           "isolated_probe": repr(reply),
                           "isolated_probe_s": round(time.monotonic() - t_probe, 3)})
            try:
                self.cluster.call_leader("SESSION", "CLOSE", probe_sid, timeout=5)
            except AssertionError:
                pass
        self.notes["partitions"] = rounds
        self.finish()


class FiveNodes(ClusterFaultTest):
    N = 5

    def test_five_kill_leader_and_follower(self):
        """5 nodes: kill -9 the leader and a follower (2 of 5), the other 3
        serve; restart both."""
        self.start_workers()
        self.wait_grants_after(self.t0, 10, what="first grants")
        took = []
        for r in range(min(ROUNDS, 2)):
            self.sleep_load(1.0)
            old = self.cluster.leader(10)
            fol = [n for n in self.cluster.nodes.values() if n is not old][r]
            t = time.monotonic()
            self.cluster.kill9(old)
            self.cluster.kill9(fol)
            self.cluster.wait_serving(15, exclude=[old, fol])
            took.append(round(time.monotonic() - t, 3))
            self.wait_grants_after(time.monotonic(), 3, what="grants with 3 of 5")
            self.cluster.restart(old)
            self.cluster.restart(fol)
            self.wait_caught_up(old)
            self.wait_caught_up(fol)
        self.notes["failover_s"] = took
        self.finish()


def tearDownModule():
    if RESULTS:
        path = os.environ.get("TUMBLER_CLUSTER_RESULTS")
        if path:
            with open(path, "w") as f:
                json.dump(RESULTS, f, indent=1, default=str)


if __name__ == "__main__":
    unittest.main()
