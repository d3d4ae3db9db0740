#!/usr/bin/env python3
"""Failover benchmark: how long a 3-node tumbler cluster grants nothing after
its leader is killed.

    python3 bench/failover.py [--trials 20] [--election-timeout-ms 300]
                              [--bin-dir build] [--json out.json] [--max-seconds 150]

Each trial: find the serving leader, open a session, kill -9 the leader, and
time from the kill to the first successful grant of a try-lock that one
client thread per node retries every few ms (a fresh lock name per trial, so
the lock is free and only a serving leader can grant it). Then restart the
killed node and wait until it has caught up and one leader serves. Prints the
samples, median, p90 and max as JSON, and a one-line summary.

Python 3 standard library only; only 127.0.0.1; every process is killed by
PID at the end; the temp dir is removed unless the run failed.
"""

import argparse
import json
import os
import random
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "cluster"))
import harness  # noqa: E402
from harness import Cluster, Conn, RespError, NET_ERRORS, is_grant  # noqa: E402


def probe_until_grant(cluster, name, sid, go, deadline, retry_s=0.003):
    """One thread per node retries `LOCK name sid OWNER probe-i` (a try-lock)
    from `go` on; returns (monotonic time of the first grant, node id) or None."""
    won = {}
    done = threading.Event()
    lock = threading.Lock()

    def prober(node):
        c = None
        while not done.is_set() and time.monotonic() < deadline:
            try:
                if c is None:
                    c = Conn(node.client_port, timeout=0.5, connect_timeout=0.2)
                r = c.call("LOCK", name, sid, "OWNER", "probe-%d" % node.id, timeout=0.5)
                t = time.monotonic()
                if is_grant(r):
                    with lock:
                        if "t" not in won:
                            won.update(t=t, node=node.id)
                    done.set()
                    break
            except NET_ERRORS:
                if c is not None:
                    c.close()
                c = None
                time.sleep(retry_s)
                continue
            time.sleep(retry_s)
        if c is not None:
            c.close()

    threads = [threading.Thread(target=prober, args=(n,), daemon=True)
               for n in cluster.nodes.values()]
    go.wait()
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.1, deadline - time.monotonic()) + 1.0)
    done.set()
    return (won["t"], won["node"]) if won else None


def wait_healthy(cluster, node, timeout):
    """One serving leader, every node up, `node` applied up to the leader's commit."""
    deadline = time.monotonic() + timeout
    ldr = cluster.wait_serving(timeout)
    while time.monotonic() < deadline:
        infos = cluster.infos()
        if all(infos.values()):
            lid = {inf.get("leader_id") for inf in infos.values()}
            li = infos[ldr.id]
            if len(lid) == 1 and int(infos[node.id].get("applied_index", -1)) >= int(li.get("commit_index", 0)):
                return ldr
        time.sleep(0.05)
    raise AssertionError("not healthy within %.1fs:\n%s" % (timeout, cluster.describe()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--election-timeout-ms", type=int, default=300)
    ap.add_argument("--bin-dir", default=os.environ.get("TUMBLER_BIN_DIR"))
    ap.add_argument("--json", help="also write the result JSON here")
    ap.add_argument("--max-seconds", type=float, default=150.0)
    a = ap.parse_args()
    if a.bin_dir:
        os.environ["TUMBLER_BIN_DIR"] = os.path.abspath(a.bin_dir)
    t_start = time.monotonic()
    hard_deadline = t_start + a.max_seconds
    cluster = Cluster(n=3, election_timeout_ms=a.election_timeout_ms, name="failover-bench")
    samples, trials, ok = [], [], False
    error = None
    try:
        cluster.start(timeout=20)
        for i in range(a.trials):
            if time.monotonic() > hard_deadline - 10:
                error = "stopped after %d trials: --max-seconds reached" % i
                break
            ldr = cluster.wait_serving(15)
            sid = cluster.call_leader("SESSION", "OPEN", 15000, "NAME", "failover-bench", timeout=10)
            if not isinstance(sid, int):
                raise AssertionError("SESSION OPEN -> %r" % (sid,))
            # desynchronise the kill from the heartbeat / election timers
            time.sleep(random.uniform(0.1, 0.4))
            go = threading.Event()
            result = {}
            name = "failover-%d-%d" % (os.getpid(), i)
            th = threading.Thread(target=lambda: result.update(
                r=probe_until_grant(cluster, name, sid, go, time.monotonic() + 15)), daemon=True)
            th.start()
            t_kill = time.monotonic()
            cluster.kill9(ldr)
            go.set()
            th.join(20)
            r = result.get("r")
            if r is None:
                raise AssertionError("trial %d: no grant within 15 s of killing node %d\n%s"
                                     % (i, ldr.id, cluster.describe()))
            ms = (r[0] - t_kill) * 1000.0
            samples.append(round(ms, 1))
            trials.append({"trial": i, "killed": ldr.id, "new_leader": r[1], "ms": round(ms, 1)})
            try:
                cluster.call_leader("SESSION", "CLOSE", sid, timeout=5)
            except AssertionError:
                pass
            cluster.restart(ldr)
            wait_healthy(cluster, ldr, 20)
        ok = len(samples) >= a.trials
    except Exception as e:  # report what was measured, then fail
        error = "%s: %s" % (type(e).__name__, e)
    finally:
        cluster.teardown(keep=not ok)
    out = {
        "benchmark": "failover", "nodes": 3, "election_timeout_ms": a.election_timeout_ms,
        "trials": len(samples), "samples_ms": samples,
        "median_ms": round(statistics.median(samples), 1) if samples else None,
        "p90_ms": round(sorted(samples)[int(0.9 * (len(samples) - 1))], 1) if samples else None,
        "min_ms": min(samples) if samples else None,
        "max_ms": max(samples) if samples else None,
        "seconds": round(time.monotonic() - t_start, 1),
        "per_trial": trials, "error": error,
    }
    text = json.dumps(out, indent=1)
    print(text)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")
    if samples:
        print("failover (3 nodes, election %d ms, kill -9 leader -> first grant): %d trials, "
              "median %.0f ms, p90 %.0f ms, max %.0f ms, min %.0f ms%s"
              % (a.election_timeout_ms, len(samples), out["median_ms"], out["p90_ms"],
                 out["max_ms"], out["min_ms"], "" if ok else " (INCOMPLETE: %s)" % error))
    else:
        print("failover: no sample (%s)" % error)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
