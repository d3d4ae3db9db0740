"""History checks for the cluster fault tests. Every function returns a list
of violations (strings); empty means the property held.

Inputs: the workers' JSON-lines logs (see worker.py) and the fenced
resource's history (see fenced_resource.py). All times are time.monotonic()
values of this machine (CLOCK_MONOTONIC), comparable across processes.
"""

import glob
import json
import os


def load_worker_logs(logdir):
    """Every event of every worker log in `logdir`, with "client" set to the
    log's base name. A torn last line (worker killed mid-write) is skipped."""
    out = []
    for path in sorted(glob.glob(os.path.join(logdir, "*.log"))):
        client = os.path.splitext(os.path.basename(path))[0]
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                ev["client"] = client
                out.append(ev)
    return out


def grants_of(logs):
    return [e for e in logs if e["ev"] == "grant"]


def lost_sessions(logs, resource=None):
    """Sessions known to have ended under their client: a NOSESSION was seen,
    or a resource write of one of its tokens was refused as STALE."""
    lost = {e["sid"] for e in logs if e["ev"] == "session_lost"}
    if resource is not None:
        stale_tokens = {(w["lock"], w["token"]) for w in resource["stale"]}
        for g in grants_of(logs):
            if (g["lock"], g["token"]) in stale_tokens:
                lost.add(g["sid"])
    return lost


def check_history(logs, resource, excused_sessions=None):
    """Safety of one run:
    1. the fenced resource flagged no OVERLAP;
    2. no two acknowledged grants share a token (except the same holder's
       reentrant re-acquire of one lock);
    3. tokens follow real time: a grant acknowledged before another was
       requested has a lower token (over all locks: one counter);
    4. no two sessions held one lock at once: the definite hold of a grant is
       [ack received, UNLOCK sent]; two such intervals of one lock by
       different sessions must not intersect unless the earlier holder's
       session was lost (expired);
    5. every interruption the resource saw (a newer token began while an
       older one was open) hit a holder whose session was lost."""
    errs = []
    lost = lost_sessions(logs, resource)
    if excused_sessions is not None:
        lost |= set(excused_sessions)
    grants = grants_of(logs)

    for e in logs:
        if e["ev"] == "unexpected_reentrant":
            errs.append("%s got a reentrant grant (count %d, token %d) of %s that no request of "
                        "it was granted with a lost reply: a request answered with an error "
                        "(TRYAGAIN/NOTLEADER/timeout-free) changed the state: %r"
                        % (e["client"], e["count"], e["token"], e["lock"], e))
    for o in resource["overlaps"]:
        errs.append("OVERLAP at the fenced resource: %r" % (o,))

    by_token = {}
    for g in grants:
        by_token.setdefault(g["token"], []).append(g)
    for tok, gs in sorted(by_token.items()):
        holders = {(g["lock"], g["sid"]) for g in gs}
        if len(holders) > 1:
            errs.append("acknowledged grants share token %d: %s" % (
                tok, ", ".join("%s sid=%s by %s" % (g["lock"], g["sid"], g["client"]) for g in gs)))

    # 3: sweep grants by request time against the max token acked before it.
    # A reentrant re-acquire (count > 1) returns the token of the hold it
    # extends (one whose UNLOCK or LOCK reply was lost in a crash): not a new grant.
    new_grants = [g for g in grants if g.get("count", 1) == 1]
    acked = sorted(new_grants, key=lambda g: g["t_ack"])
    reqs = sorted(new_grants, key=lambda g: g["t_req"])
    i, best = 0, None
    for b in reqs:
        while i < len(acked) and acked[i]["t_ack"] < b["t_req"]:
            a = acked[i]
            if best is None or a["token"] > best["token"]:
                best = a
            i += 1
        if best is not None and best["token"] >= b["token"] and not (
                best["token"] == b["token"] and best["sid"] == b["sid"] and best["lock"] == b["lock"]):
            errs.append("tokens out of real-time order: token %d (%s %s) acknowledged at %.3f, "
                        "then token %d (%s %s) requested at %.3f" % (
                            best["token"], best["lock"], best["client"], best["t_ack"],
                            b["token"], b["lock"], b["client"], b["t_req"]))
            if len(errs) > 50:
                break

    # 4: definite hold intervals per lock.
    unlocks = {}
    for e in logs:
        if e["ev"] == "unlock":
            unlocks.setdefault((e["lock"], e["token"], e["sid"]), []).append(e)
    by_lock = {}
    for g in grants:
        us = [u for u in unlocks.get((g["lock"], g["token"], g["sid"]), []) if u["t_req"] >= g["t_ack"]]
        if not us:
            continue
        end = min(u["t_req"] for u in us)
        by_lock.setdefault(g["lock"], []).append((g["t_ack"], end, g))
    for lock, ivs in by_lock.items():
        ivs.sort(key=lambda x: x[0])
        for k in range(len(ivs)):
            s1, e1, g1 = ivs[k]
            for m in range(k + 1, len(ivs)):
                s2, e2, g2 = ivs[m]
                if s2 >= e1:
                    break
                if g1["sid"] == g2["sid"]:
                    continue
                if g1["sid"] in lost:
                    continue
                errs.append("lock %s both held: token %d sid %s (%s) [%.3f, %.3f] and token %d "
                            "sid %s (%s) [%.3f, %.3f], and the first session was not lost" % (
                                lock, g1["token"], g1["sid"], g1["client"], s1, e1,
                                g2["token"], g2["sid"], g2["client"], s2, e2))

    # 5: interruptions at the resource.
    tok_sid = {(g["lock"], g["token"]): g for g in grants}
    for it in resource["interruptions"]:
        g = tok_sid.get((it["lock"], it["old_token"]))
        if g is None:
            errs.append("interrupted holder with token %d of %s has no acknowledged grant: %r"
                        % (it["old_token"], it["lock"], it))
        elif g["sid"] not in lost:
            errs.append("holder token %d of %s (sid %s, %s) interrupted by token %d while its "
                        "session was alive: %r" % (it["old_token"], it["lock"], g["sid"],
                                                   g["client"], it["new_token"], it))
    return errs


def check_tokens_kept(logs, last_token, fresh_token):
    """No acknowledged grant lost: every acknowledged token is <= the cluster's
    token counter (INFO last_token, after convergence) and < the token of a
    fresh grant made after the run."""
    errs = []
    grants = grants_of(logs)
    if not grants:
        return errs
    top = max(g["token"] for g in grants)
    if last_token is not None and top > last_token:
        errs.append("acknowledged token %d is above the cluster's last_token %d: "
                    "an acknowledged grant was lost" % (top, last_token))
    if fresh_token is not None and fresh_token <= top:
        errs.append("a fresh grant got token %d <= acknowledged token %d: the token counter "
                    "went back" % (fresh_token, top))
    return errs


def check_digests(d):
    """d: {node_id: (applied_index, state_digest)}: one applied index, one
    non-empty digest."""
    errs = []
    applied = {v[0] for v in d.values()}
    digests = {v[1] for v in d.values()}
    if len(applied) != 1:
        errs.append("applied_index differs: %r" % (d,))
    if None in digests or "" in digests:
        errs.append("a node reports no state_digest: %r" % (d,))
    elif len(digests) != 1:
        errs.append("state_digest differs at equal applied_index: %r" % (d,))
    return errs


def summary(logs, resource):
    grants = grants_of(logs)
    return {
        "grants": len(grants),
        "sessions": len([e for e in logs if e["ev"] == "session"]),
        "session_losses": len([e for e in logs if e["ev"] == "session_lost"]),
        "unknown_outcomes": len([e for e in logs if e["ev"] == "unknown"]),
        "reentrant_after_lost_reply": len([g for g in grants if g.get("count", 1) > 1]),
        "lock_error_replies": sorted({e["reply"][:60] for e in logs if e["ev"] == "lock_error"}),
        "lock_errors": len([e for e in logs if e["ev"] == "lock_error"]),
        "stale_writes": len(resource["stale"]),
        "interruptions": len(resource["interruptions"]),
        "overlaps": len(resource["overlaps"]),
        "max_token": max([g["token"] for g in grants] or [0]),
    }
