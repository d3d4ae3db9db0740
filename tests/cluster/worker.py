"""A lock-using client process for the cluster fault tests.

    python3 worker.py --id W --nodes 127.0.0.1:P1,127.0.0.1:P2,... \
        --resource PORT --locks a,b --log FILE [--ttl 2000] [--duration 30]
        [--cs-ms 5] [--wait-ms 1000]

Opens a session (TTL --ttl), keeps it alive every TTL/3 on a thread, and loops:
LOCK <name> <session> WAIT <wait-ms> on a random one of --locks; on a grant
[token, count] it logs the acknowledged grant, writes `begin` to the fenced
resource, sleeps --cs-ms, writes `end`, UNLOCKs (as many times as the count
says). NOTLEADER is followed, TRYAGAIN and network errors are retried with a
bounded backoff across the node list. On session loss (NOSESSION) it opens a
new session. Stops after --duration s or on SIGTERM (then closes its session).

Log: one JSON object per line, flushed at once, times from time.monotonic():
  {"ev":"session", "sid", "t"}                    session opened
  {"ev":"session_lost", "sid", "t", "how"}        NOSESSION seen
  {"ev":"grant", "lock", "token", "count", "sid", "port", "t_req", "t_ack"}
  {"ev":"write", "lock", "token", "phase", "reply", "t"}
  {"ev":"unlock", "lock", "token", "sid", "reply", "t_req", "t_ack"}
  {"ev":"unknown", "lock", "sid", "t_req", "t", "why"}   LOCK outcome unknown
  {"ev":"exit", "t", "grants", "errors"}
"""

import argparse
import json
import os
import random
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (Conn, RespError, NET_ERRORS, is_grant, parse_notleader)  # noqa: E402


class Stop(Exception):
    pass


class ClusterClient:
    """Sends commands to whoever leads: follows NOTLEADER, retries TRYAGAIN and
    network errors over the node list with a bounded backoff. One connection."""

    def __init__(self, addrs, stop_event, name=""):
        self.addrs = addrs
        self.stop = stop_event
        self.conn = None
        self.port = None
        self.idx = random.randrange(len(addrs))
        self.name = name

    def close(self):
        if self.conn:
            self.conn.close()
            self.conn = None

    def _connect(self, port):
        self.close()
        self.conn = Conn(port, timeout=2.0, connect_timeout=0.5)
        self.port = port

    def call(self, args, read_timeout, deadline, on_sent=None, honor_stop=True, on_retry=None):
        # on_sent(port) is called just before every send of the request;
        # on_retry(text, port) for every NOTLEADER / TRYAGAIN answer.
        """Returns the first reply that is not NOTLEADER/TRYAGAIN. Raises Stop
        when stopping or past `deadline`. A network error after the request was
        sent raises ConnectionError-like `Unknown` for callers that must know."""
        backoff = 0.02
        redirect = None
        while True:
            if (honor_stop and self.stop.is_set()) or time.monotonic() > deadline:
                raise Stop()
            try:
                if redirect is not None:
                    target, redirect = redirect, None   # one try; then the node list
                    if self.port != target or self.conn is None:
                        self._connect(target)
                elif self.conn is None:
                    host, port = self.addrs[self.idx % len(self.addrs)].rsplit(":", 1)
                    self._connect(int(port))
            except NET_ERRORS:
                self.close()
                self.idx += 1
                time.sleep(backoff)
                backoff = min(backoff * 2, 0.3)
                continue
            sent = False
            try:
                # The hook runs BEFORE the send: its time is a lower bound of
                # when the server can have seen the request (a time taken after
                # sendall can be late by a whole GIL switch or preemption).
                if on_sent:
                    on_sent(self.port)
                self.conn.send_cmd(*args)
                sent = True
                r = self.conn.read_reply(read_timeout)
            except NET_ERRORS as e:
                self.close()
                self.idx += 1
                if sent:
                    raise Unknown(str(e), self.port)
                time.sleep(backoff)
                backoff = min(backoff * 2, 0.3)
                continue
            if on_retry and isinstance(r, RespError) and r.code in ("NOTLEADER", "TRYAGAIN"):
                on_retry(r.text, self.port)
            if isinstance(r, RespError) and r.code == "NOTLEADER":
                addr = parse_notleader(r)
                if addr and addr[1] != self.port:
                    redirect = addr[1]
                else:
                    self.close()
                    self.idx += 1
                    time.sleep(backoff)
                    backoff = min(backoff * 2, 0.3)
                continue
            if isinstance(r, RespError) and r.code == "TRYAGAIN":
                time.sleep(backoff)
                backoff = min(backoff * 2, 0.3)
                # stay on this node a little, then try the others
                if backoff >= 0.3:
                    self.close()
                    self.idx += 1
                continue
            return r


class Unknown(Exception):
    def __init__(self, why, port):
        super().__init__(why)
        self.why = why
        self.port = port


class Worker:
    def __init__(self, a):
        self.a = a
        self.addrs = a.nodes.split(",")
        self.locks = a.locks.split(",")
        self.stop = threading.Event()
        self.logf = open(a.log, "a", buffering=1)
        self.log_lock = threading.Lock()
        self.sid = None
        self.sid_lock = threading.Lock()
        self.lost = set()
        self.maybe_held = set()   # locks whose LOCK/UNLOCK outcome is unknown
        self.grants = 0
        self.errors = 0
        self.main = ClusterClient(self.addrs, self.stop, "main")
        self.res = None

    def log(self, **kw):
        with self.log_lock:
            self.logf.write(json.dumps(kw) + "\n")

    # -- fenced resource
    def res_write(self, lock, token, phase):
        for attempt in range(3):
            try:
                if self.res is None:
                    self.res = socket.create_connection(("127.0.0.1", self.a.resource), timeout=5)
                    self.rf = self.res.makefile("rb")
                self.res.sendall(("WRITE %s %d %s %s\n" % (lock, token, self.a.id, phase)).encode())
                reply = self.rf.readline().decode().strip()
                if not reply:
                    raise OSError("resource closed")
                self.log(ev="write", lock=lock, token=token, phase=phase, reply=reply,
                         t=time.monotonic())
                return reply
            except OSError:
                try:
                    self.res.close()
                except Exception:
                    pass
                self.res = None
                time.sleep(0.05)
        self.log(ev="write", lock=lock, token=token, phase=phase, reply="NORESOURCE",
                 t=time.monotonic())
        return "NORESOURCE"

    # -- sessions
    def open_session(self, deadline):
        r = self.main.call(["SESSION", "OPEN", self.a.ttl, "NAME", "%s-%d" % (self.a.id, os.getpid())],
                           read_timeout=3.0, deadline=deadline)
        if not isinstance(r, int):
            raise RuntimeError("SESSION OPEN -> %r" % (r,))
        with self.sid_lock:
            self.sid = r
        self.maybe_held.clear()
        self.log(ev="session", sid=r, t=time.monotonic(), pid=os.getpid())
        return r

    def session_lost(self, sid, how):
        with self.sid_lock:
            if sid in self.lost:
                return
            self.lost.add(sid)
            if self.sid == sid:
                self.sid = None
        self.log(ev="session_lost", sid=sid, t=time.monotonic(), how=how)

    def keepalive_loop(self, deadline):
        client = ClusterClient(self.addrs, self.stop, "keepalive")
        period = self.a.ttl / 3000.0
        while not self.stop.is_set():
            with self.sid_lock:
                sid = self.sid
            if sid is not None:
                try:
                    r = client.call(["SESSION", "KEEPALIVE", sid], read_timeout=period,
                                    deadline=time.monotonic() + period)
                    if isinstance(r, RespError) and r.code == "NOSESSION":
                        self.session_lost(sid, "keepalive")
                except (Stop, Unknown):
                    pass
            self.stop.wait(period)
        client.close()

    # -- main loop
    def run(self):
        a = self.a
        deadline = time.monotonic() + a.duration
        ka = threading.Thread(target=self.keepalive_loop, args=(deadline,), daemon=True)
        ka.start()
        try:
            while not self.stop.is_set() and time.monotonic() < deadline:
                try:
                    self.iteration(deadline)
                except Stop:
                    break
                except Exception as e:  # keep going; log it
                    self.errors += 1
                    self.log(ev="error", t=time.monotonic(), what=repr(e))
                    time.sleep(0.05)
        finally:
            self.stop.set()
            with self.sid_lock:
                sid = self.sid
            if sid is not None:
                try:
                    c = ClusterClient(self.addrs, threading.Event(), "close")
                    r = c.call(["SESSION", "CLOSE", sid], read_timeout=2.0,
                               deadline=time.monotonic() + 3.0)
                    self.log(ev="close", sid=sid, reply=repr(r), t=time.monotonic())
                except (Stop, Unknown):
                    pass
            self.log(ev="exit", t=time.monotonic(), grants=self.grants, errors=self.errors)
            self.logf.close()

    def iteration(self, deadline):
        a = self.a
        with self.sid_lock:
            sid = self.sid
        if sid is None:
            sid = self.open_session(deadline)
        name = random.choice(self.locks)
        t_req = [time.monotonic()]
        port = [None]

        def sent(p):     # called just before each (re)send of the LOCK
            t_req[0] = time.monotonic()
            port[0] = p

        for attempt in range(4):
            try:
                r = self.main.call(["LOCK", name, sid, "WAIT", a.wait_ms],
                                   read_timeout=a.wait_ms / 1000.0 + 3.0,
                                   deadline=deadline, on_sent=sent,
                                   on_retry=lambda text, p: self.log(
                                       ev="retry", cmd="LOCK", lock=name, sid=sid, reply=text,
                                       port=p, t=time.monotonic()))
                break
            except Unknown as e:
                self.maybe_held.add(name)
                # The grant may have been committed: ask again for the same
                # lock at once, so that such a hold is found (the reply is then
                # reentrant, count > 1) and released instead of lingering.
                self.log(ev="unknown", lock=name, sid=sid, t_req=t_req[0], t=time.monotonic(),
                         why=e.why, port=e.port)
        else:
            return
        t_ack = time.monotonic()
        if is_grant(r):
            token, count = r
            self.grants += 1
            if count > 1 and name not in self.maybe_held:
                # A hold this worker never got a reply for, without any lost
                # reply: a request answered with an error changed the state.
                self.log(ev="unexpected_reentrant", lock=name, token=token, count=count,
                         sid=sid, t=t_ack)
            self.log(ev="grant", lock=name, token=token, count=count, sid=sid,
                     port=port[0], t_req=t_req[0], t_ack=t_ack)
            b = self.res_write(name, token, "begin")
            if b == "OK":
                time.sleep(a.cs_ms / 1000.0)
            e = self.res_write(name, token, "end") if b == "OK" else None
            left = count
            tries = 0
            while left > 0 and tries < 8:
                tries += 1
                u_req = time.monotonic()
                try:
                    u = self.main.call(["UNLOCK", name, sid], read_timeout=3.0,
                                       deadline=time.monotonic() + 10.0, honor_stop=False,
                                       on_retry=lambda text, p: self.log(
                                           ev="retry", cmd="UNLOCK", lock=name, sid=sid, reply=text,
                                           port=p, t=time.monotonic()))
                except Unknown as ex:
                    u = "unknown: %s" % ex.why
                except Stop:
                    u = "stopped"
                self.log(ev="unlock", lock=name, token=token, sid=sid, reply=repr(u),
                         t_req=u_req, t_ack=time.monotonic())
                if isinstance(u, RespError) and u.code == "NOSESSION":
                    self.session_lost(sid, "unlock")
                    break
                if isinstance(u, RespError) and u.code == "NOTHELD":
                    self.maybe_held.discard(name)
                    break      # an earlier UNLOCK whose reply was lost did release it
                if isinstance(u, int):
                    left = u
                    if u == 0:
                        self.maybe_held.discard(name)
                elif u == "stopped":
                    break
                else:
                    self.maybe_held.add(name)
                # unknown or another error: ask again (NOTHELD if it was done)
            if e == "STALE" or b == "STALE":
                pass  # logged by res_write; the session is most likely gone
            return
        if r is None:
            return  # WAIT ran out
        if isinstance(r, RespError):
            if r.code == "NOSESSION":
                self.session_lost(sid, "lock")
                return
            self.log(ev="lock_error", lock=name, sid=sid, reply=r.text, t=time.monotonic())
            time.sleep(0.05)
            return
        self.log(ev="lock_weird", lock=name, sid=sid, reply=repr(r), t=time.monotonic())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--id", required=True)
    ap.add_argument("--nodes", required=True)
    ap.add_argument("--resource", type=int, required=True)
    ap.add_argument("--locks", default="L1,L2")
    ap.add_argument("--log", required=True)
    ap.add_argument("--ttl", type=int, default=2000)
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--cs-ms", type=float, default=5.0)
    ap.add_argument("--wait-ms", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=None)
    a = ap.parse_args()
    random.seed(a.seed if a.seed is not None else os.getpid())
    w = Worker(a)
    signal.signal(signal.SIGTERM, lambda *_: w.stop.set())
    w.run()


if __name__ == "__main__":
    main()
