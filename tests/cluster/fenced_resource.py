"""The fenced resource: a tiny TCP server that plays the storage a lock
protects, and records everything for the checks.

Line protocol (one request line, one reply line):

    WRITE <lock> <token> <client_id> begin|end   -> OK | STALE
    DUMP                                          -> one JSON line (see history())
    PING                                          -> PONG

Rules, per lock:
- a write whose token is lower than the highest token seen for that lock is
  refused: `STALE` (recorded, nothing else changes);
- a `begin` while another token of the same lock is still open (begun, not
  ended) either:
    * is an OVERLAP when the open holder's token is the same as the new one
      (two clients with one token) -- fencing cannot separate them; or
    * is an INTERRUPTION when the new token is higher: the open holder's token
      becomes stale and every later write of it is refused. An interruption is
      what fencing is for (a paused holder whose lease expired); the checks
      decide whether each one was excused (its session had expired) -- if not,
      the lock service granted a held lock. When the interrupted holder later
      writes and is refused, the interruption is marked `fenced`.
    If an interrupted holder's later write were NOT refused (cannot happen with
    the rule above, but checked anyway), that is an OVERLAP too.

Every write is recorded with the time it arrived (time.monotonic(), which is
CLOCK_MONOTONIC and so comparable with the workers' logs on this machine).

Run it in-process (`FencedResource().start()`) or standalone:
    python3 fenced_resource.py --port 0 --port-file F --dump-file D --duration S
"""

import argparse
import json
import os
import socketserver
import sys
import threading
import time


class FencedResource:
    def __init__(self, host="127.0.0.1", port=0):
        self.lock = threading.Lock()
        self.max_token = {}      # lock -> highest token accepted
        self.open = {}           # lock -> {token: client_id} begun, not ended
        self.writes = []         # every write: dict
        self.stale = []          # refused writes
        self.overlaps = []       # OVERLAP records
        self.interruptions = []  # {lock, old_token, old_client, new_token, new_client, t, fenced}
        self._server = None
        self._thread = None
        self.host, self.port = host, port

    # -- the rules (also usable directly, without TCP)
    def write(self, lock, token, client, phase, t=None):
        t = time.monotonic() if t is None else t
        with self.lock:
            rec = {"t": t, "lock": lock, "token": token, "client": client, "phase": phase}
            top = self.max_token.get(lock, 0)
            opened = self.open.setdefault(lock, {})
            if token < top:
                rec["reply"] = "STALE"
                self.writes.append(rec)
                self.stale.append(rec)
                for it in self.interruptions:
                    if it["lock"] == lock and it["old_token"] == token and not it["fenced"]:
                        it["fenced"] = True
                        it["fenced_at"] = t
                opened.pop(token, None)
                return "STALE"
            self.max_token[lock] = token
            if phase == "begin":
                for otok, ocli in list(opened.items()):
                    if otok == token and ocli != client:
                        self.overlaps.append({"t": t, "lock": lock, "token": token,
                                              "clients": [ocli, client],
                                              "why": "two clients began with one token"})
                    elif otok < token:
                        self.interruptions.append({"t": t, "lock": lock, "old_token": otok,
                                                   "old_client": ocli, "new_token": token,
                                                   "new_client": client, "fenced": False})
                        del opened[otok]
                opened[token] = client
            elif phase == "end":
                if opened.get(token) not in (None, client):
                    self.overlaps.append({"t": t, "lock": lock, "token": token,
                                          "clients": [opened.get(token), client],
                                          "why": "end by a client that did not begin"})
                opened.pop(token, None)
                for it in self.interruptions:
                    if it["lock"] == lock and it["old_token"] == token:
                        # an interrupted holder wrote and was accepted: overlap
                        self.overlaps.append({"t": t, "lock": lock, "token": token,
                                              "clients": [client, it["new_client"]],
                                              "why": "interrupted holder's write accepted"})
            else:
                rec["reply"] = "ERR"
                self.writes.append(rec)
                return "ERR bad phase"
            rec["reply"] = "OK"
            self.writes.append(rec)
            return "OK"

    def history(self):
        with self.lock:
            return {"writes": list(self.writes), "stale": list(self.stale),
                    "overlaps": list(self.overlaps),
                    "interruptions": [dict(x) for x in self.interruptions],
                    "max_token": dict(self.max_token),
                    "open": {k: dict(v) for k, v in self.open.items()}}

    def reset(self):
        with self.lock:
            self.max_token.clear()
            self.open.clear()
            self.writes.clear()
            self.stale.clear()
            self.overlaps.clear()
            self.interruptions.clear()

    # -- TCP
    def handle_line(self, line):
        parts = line.split()
        if not parts:
            return "ERR empty"
        cmd = parts[0].upper()
        if cmd == "PING":
            return "PONG"
        if cmd == "DUMP":
            return json.dumps(self.history())
        if cmd == "WRITE" and len(parts) == 5:
            try:
                token = int(parts[2])
            except ValueError:
                return "ERR bad token"
            return self.write(parts[1], token, parts[3], parts[4])
        return "ERR unknown request"

    def start(self):
        res = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self):
                self.connection.settimeout(120)
                while True:
                    try:
                        line = self.rfile.readline(4096)
                    except OSError:
                        return
                    if not line:
                        return
                    reply = res.handle_line(line.decode("utf-8", "replace").strip())
                    try:
                        self.wfile.write(reply.encode() + b"\n")
                        self.wfile.flush()
                    except OSError:
                        return

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server((self.host, self.port), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.2}, daemon=True)
        self._thread.start()
        return self

    def close(self):
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--dump-file")
    ap.add_argument("--duration", type=float, default=60.0)
    a = ap.parse_args()
    r = FencedResource(port=a.port).start()
    if a.port_file:
        with open(a.port_file + ".tmp", "w") as f:
            f.write(str(r.port))
        os.rename(a.port_file + ".tmp", a.port_file)
    print("fenced resource on 127.0.0.1:%d" % r.port, flush=True)
    try:
        time.sleep(a.duration)
    except KeyboardInterrupt:
        pass
    if a.dump_file:
        with open(a.dump_file, "w") as f:
            json.dump(r.history(), f)
    r.close()


if __name__ == "__main__":
    sys.exit(main())
