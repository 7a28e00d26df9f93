#!/usr/bin/env python3
"""bench/soak.py — a soak that hunts: many short `geotrain launch --chaos SEED` runs with seeds
drawn from one base seed, each checked for the invariants of docs/design.md §2 that a run's files can
show, instead of one fixed seed that a test keeps passing.

Each run draws its own mix (both transports, outer.catch_up on and off, outer.fragments 1 and 2,
2-4 sites, 1-2 ranks a site: a config written for it from --base-config) and its own chaos seed,
and is checked after it ends:
  I1      every round's anchor hash is the same in every site's anchors.jsonl (every line, every
          life), and summary.json's hash_mismatches is 0 (no corruption is injected here, so a
          mismatch means two sites applied different bytes);
  I3      the token ledger (submits.jsonl against the results' tokens in anchors.jsonl): no
          prefix of the rounds has more tokens in results than were submitted for it (nothing
          counted twice); what was submitted and is in no result is at most what the sites that
          died or were removed had in flight; every round has a result; and the contribution
          counters: no ledger left unclosed (but to a site launch stopped behind), a peer took
          no more frames from a sender of one life than it sent (runs without detours), and a
          sender whose peers all sent their FINs counts as unreceived exactly what it sent
          beyond their counts;
  end     launch finished (exit 0) with every site finished or stopped behind by launch, or
          failed with a named cause (a site's error, launch's own message); no life ended by a
          signal other than the chaos's SIGKILL or launch's SIGTERM (a crash); nothing of
          launch's process group outlives it by 5 s; a run still going after --timeout is a
          hang, stopped and kept.
A run that fails any check keeps its folder with repro.sh, the exact command that reruns it
(etcd's data folders dropped); a passing run's folder is deleted (--keep-passing keeps them).
A failing run during which the binary was rebuilt is inconclusive and run again. One JSON line
per run on stdout, then a summary line with goodput / goodput_bound as median and worst over
the soak. Exit status 1 when a run violated an invariant or failed without a named cause, 0
otherwise (a run that failed with a named cause is kept and counted, and does not by itself
fail the soak), 2 on bad arguments.

stdlib only; docs/diloco.md, "The soak: bench/soak.py", describes it.
"""
import argparse
import collections
import glob
import hashlib
import json
import os
import random
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The short rounds of tests/launch/test_launch_chaos.sh: steps of 15 ms (the rest slept), rounds
# of ~0.5 s on any machine, a 5-s lease; 4 lanes so that 2 fragments x 2 WAN groups fit.
DEFAULT_SETS = ["run.rounds=24", "inner.steps=30", "inner.emulated_step_ms=15",
                "membership.lease_ttl_s=5", "wan.lanes=4"]
DEFAULT_CHAOS = "--chaos-round-s 0.5 --mtbf-rounds 8"
SITE_NAMES = "abcdefgh"
# (outer.catch_up, outer.fragments): catch-up needs fragments 1 (topology/schema.c)
OUTER_MIX = [(True, 1), (False, 1), (False, 2)]


def log(msg):
    print(f"soak: {msg}", file=sys.stderr, flush=True)


# ---- the mix --------------------------------------------------------------------------------

def draw_runs(args):
    """The runs of the soak, drawn from --seed alone: the same arguments, the same runs. The mix
    walks a shuffled cross product (transport x outer mix x sites) so that a few runs already
    cover both transports and every outer mix; ranks and chaos seeds are drawn per run."""
    rng = random.Random(args.seed)
    runs = []
    if args.config:
        for i in range(args.runs):
            runs.append({"index": i, "chaos_seed": rng.randrange(1, 2**31)})
        return given_seeds(args, runs)
    cross = [(t, o, s) for t in args.transports for o in OUTER_MIX for s in args.sites]
    deck = []
    for i in range(args.runs):
        if not deck:
            deck = cross[:]
            rng.shuffle(deck)
        transport, (catch_up, fragments), n_sites = deck.pop(0)
        ranks = [2 if rng.random() < args.two_rank_share else 1 for _ in range(n_sites)]
        while sum(ranks) > args.max_procs:  # keep the machine's load bounded
            ranks[ranks.index(2)] = 1
        runs.append({"index": i, "chaos_seed": rng.randrange(1, 2**31), "transport": transport,
                     "catch_up": catch_up, "fragments": fragments, "sites": n_sites,
                     "ranks": ranks})
    return given_seeds(args, runs)


def given_seeds(args, runs):
    """--seeds: these chaos seeds, in order, instead of the drawn ones (the mix stays drawn)."""
    for run, seed in zip(runs, args.seeds or []):
        run["chaos_seed"] = seed
    return runs


def site_names_of(config_path):
    names = []
    in_sites = False
    for line in open(config_path):
        if re.match(r"^sites:\s*$", line):
            in_sites = True
            continue
        if in_sites and re.match(r"^\S", line) and not line.startswith("#"):
            in_sites = False
        m = re.match(r"^\s*-\s*name:\s*\"?([A-Za-z0-9_.-]+)\"?", line) if in_sites else None
        if m:
            names.append(m.group(1))
    return names


def write_config(base, path, ranks):
    """base's text with its sites: list replaced by len(ranks) sites on loopback (a, b, c, ...),
    site k with ranks[k] ranks; whatever follows the list (links:, ...) is kept."""
    head, tail, state = [], [], 0
    for line in open(base):
        if state == 0 and re.match(r"^sites:\s*$", line):
            state = 1
            continue
        if state == 1 and re.match(r"^\S", line) and not line.startswith("#"):
            state = 2
        (head if state == 0 else tail if state == 2 else []).append(line)
    out = head + [f"# sites written by bench/soak.py from {os.path.relpath(base, ROOT)}\n",
                  "sites:\n"]
    for k, r in enumerate(ranks):
        out.append(f"  - name: {SITE_NAMES[k]}\n    address: 127.0.0.1:0\n")
        if r > 1:
            out.append(f"    ranks: {r}\n")
    with open(path, "w") as f:
        f.writelines(out + tail)


def chaos_argv(text, names):
    """--chaos-args split; `--slow F` (no SITE=) means every site, as `bench chaos --slow F`."""
    argv, out = shlex.split(text), []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--slow" and i + 1 < len(argv) and "=" not in argv[i + 1]:
            out += [x for n in names for x in ("--slow", f"{n}={argv[i + 1]}")]
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def launch_argv(args, run, config, run_dir):
    names = site_names_of(config)
    sets = [] if args.config else list(DEFAULT_SETS)
    if not args.config:
        sets += [f"wan.transport={run['transport']}",
                 f"outer.catch_up={'true' if run['catch_up'] else 'false'}",
                 f"outer.fragments={run['fragments']}"]
    sets += args.set
    chaos = args.chaos_args if args.chaos_args is not None else (
        "--chaos-round-s 3" if args.config else DEFAULT_CHAOS)
    if args.config and "--chaos-round-s" not in chaos:
        chaos += " --chaos-round-s 3"  # bench chaos's default: bench/chaos.yaml's rounds
    argv = [args.geotrain, "launch", config, "--run-dir", run_dir]
    for s in sets:
        argv += ["--set", s]
    argv += ["--chaos", str(run["chaos_seed"])] + chaos_argv(chaos, names)
    return argv, names


# ---- running one -----------------------------------------------------------------------------

def leftovers(pgid, grace_s):
    """True when processes of launch's process group outlive it by grace_s (then killed)."""
    t0 = time.monotonic()
    while True:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        if time.monotonic() - t0 > grace_s:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            return True
        time.sleep(0.5)


def site_states(run_dir, names, sub="."):
    """Where each site stood: its status.json (under run_dir/SITE/sub), as launch shows it."""
    states = []
    for s in names:
        st = load_json(os.path.join(run_dir, s, sub, "status.json")) or {}
        states.append(f"{s}: {st.get('state', '?')} at round {st.get('round', '?')}, "
                      f"step {st.get('step', '?')}")
    return states


def snapshot_states(run_dir, names):
    """Copies each site's status.json to SITE/hang-status/ before the run is stopped."""
    for s in names:
        src = os.path.join(run_dir, s, "status.json")
        if os.path.exists(src):
            os.makedirs(os.path.join(run_dir, s, "hang-status"), exist_ok=True)
            shutil.copy(src, os.path.join(run_dir, s, "hang-status", "status.json"))


def run_launch(argv, out_path, timeout, env, on_hang=None):
    """Runs launch in a session of its own; past the timeout: SIGTERM to the session (launch
    stops its sites and etcd), then SIGKILL 40 s later. Returns (rc, hung, wall_s, left):
    left, processes of its group still running 5 s after it exited."""
    t0 = time.monotonic()
    with open(out_path, "w") as out:
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env,
                             start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
            wall = time.monotonic() - t0
            return rc, False, wall, leftovers(p.pid, 5)
        except subprocess.TimeoutExpired:
            pass
        except KeyboardInterrupt:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            raise
        wall = time.monotonic() - t0
        if on_hang:
            on_hang()
        try:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=40)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        except ProcessLookupError:
            p.wait()
        return p.returncode, True, wall, leftovers(p.pid, 5)


def read_jsonl(path):
    rows = []
    if not os.path.exists(path):
        return rows
    for line in open(path):
        line = line.strip()
        if line:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                rows.append({"_bad": line})
    return rows


def load_json(path):
    try:
        return json.load(open(path))
    except (OSError, json.JSONDecodeError):
        return None


# ---- the checks -------------------------------------------------------------------------------

def site_anchors(run_dir, s):
    """SITE/anchors.jsonl without what a life that ended removed declared void in
    SITE/void.jsonl: {"void_after": R, "lines": [L0, L1]} drops the lines L0..L1-1 whose round
    is after R (diloco/files.c, dl_log_void: the others may have redone those rounds without
    it after removing it, and nobody used its anchors of them)."""
    rows = read_jsonl(f"{run_dir}/{s}/anchors.jsonl")
    voids = [v for v in read_jsonl(f"{run_dir}/{s}/void.jsonl") if "void_after" in v]

    def void(k, j):
        return any(v["lines"][0] <= k < v["lines"][1] and j.get("round", -1) > v["void_after"]
                   for v in voids)
    return [j for k, j in enumerate(rows) if not void(k, j)]


def anchor_lives(rows):
    """anchors.jsonl cut into the lives that wrote it: a new life starts at a line without
    "tokens" (an anchor a joiner fetched) or at a round not after the one before."""
    lives, cur, last = [], [], None
    for j in rows:
        new = "tokens" not in j or (last is not None and j.get("round", 0) <= last)
        if new and cur:
            lives.append(cur)
            cur = []
        cur.append(j)
        last = j.get("round")
    if cur:
        lives.append(cur)
    return lives


def check_i1(run_dir, sites, summary):
    """Every (site, life)'s anchor for each round; rounds where they differ, each version with
    its holders, and whether each minority holder was the last round of a life that died
    (kill -9) or was removed (exit 3) — the case docs/diloco.md's "Kills" describes."""
    held = collections.defaultdict(lambda: collections.defaultdict(list))
    bad_lines = []
    ends = {s: [l.get("end") for l in (summary or {}).get("sites", {}).get(s, {}).get("lives", [])]
            for s in sites}
    for s in sites:
        rows = site_anchors(run_dir, s)
        bad_lines += [f"{s}: {j['_bad'][:80]}" for j in rows if "_bad" in j]
        lives = anchor_lives([j for j in rows if "_bad" not in j])
        for k, life in enumerate(lives):
            for n, j in enumerate(life):
                # (a life that wrote no line leaves no mark here: the site's last anchors
                # life counts as dead when any of its processes died or was removed)
                last_of_dead = n == len(life) - 1 and (
                    k < len(lives) - 1 or any(e != "exit 0" for e in ends[s]))
                held[j["round"]][j["anchor_hash"]].append(
                    {"site": s, "life": k, "applied": "tokens" in j,
                     "tokens": j.get("tokens"), "last_of_dead_life": last_of_dead})
    disagree = []
    for r in sorted(held):
        versions = held[r]
        if len(versions) < 2:
            continue
        major = max(versions, key=lambda h: len({x["site"] for x in versions[h]}))
        disagree.append({
            "round": r,
            "versions": {h: [f"{x['site']}#{x['life']}" + ("" if x["applied"] else "(fetched)")
                             + (f" {x['tokens']:g} tok" if x["tokens"] is not None else "")
                             for x in v] for h, v in versions.items()},
            "minority_only_dead_lives": all(x["last_of_dead_life"] for h, v in versions.items()
                                            if h != major for x in v)})
    return disagree, bad_lines, held


def stopped_late_sites(text, sites):
    """The sites launch stopped behind at the end, or that ended without rejoining (its
    messages, as test_launch_chaos.sh reads them)."""
    return {s for s in sites if any(x in text for x in (
        f"-- chaos: {s} (restarted) had not finished", f"-- {s} (restarted) ended without "
        "rejoining", f"-- chaos: {s} stopped at step"))}


def check_i3(run_dir, sites, summary, plan, finished, rounds, stopped_late):
    """The token ledger and the contribution counters; returns (violations, facts)."""
    v, facts = [], {}
    res, res_min, sub = {}, {}, collections.defaultdict(float)
    max_sub = collections.defaultdict(float)
    sub_by_site = {}
    for s in sites:
        for j in site_anchors(run_dir, s):
            if "tokens" in j:
                res[j["round"]] = max(res.get(j["round"], 0), j["tokens"])
                res_min[j["round"]] = min(res_min.get(j["round"], j["tokens"]), j["tokens"])
        for j in read_jsonl(f"{run_dir}/{s}/submits.jsonl"):
            if "_bad" in j:
                v.append(f"I3: {s}/submits.jsonl: unreadable line {j['_bad'][:60]!r}")
                continue
            sub[j["round"]] += j["tokens"]
            sub_by_site.setdefault(s, collections.defaultdict(float))[j["round"]] += j["tokens"]
    # a site's largest round (with outer.fragments F a round is F lines of a fragment each: the
    # largest line was half a round with two, and the bound below half what it should be)
    for s, rs in sub_by_site.items():
        max_sub[s] = max(rs.values())
    # A round whose only logged result tokens are in a removed life's voided lines (it applied
    # the round, then was removed before the hash vote confirmed it, while every other site
    # took that round's anchor by a fetch, which logs no tokens): those tokens count when the
    # voided line's anchor is one a kept line holds for the round (the same result).
    kept = collections.defaultdict(set)
    for s in sites:
        for j in site_anchors(run_dir, s):
            kept[j.get("round")].add(j.get("anchor_hash"))
    for s in sites:
        for j in read_jsonl(f"{run_dir}/{s}/anchors.jsonl"):
            r = j.get("round")
            if "tokens" in j and r not in res and j.get("anchor_hash") in kept.get(r, ()):
                res[r] = j["tokens"]
                res_min[r] = j["tokens"]
                facts.setdefault("result_tokens_from_voided_lines", []).append(r)
    R = rounds if rounds else (max(list(res) + list(sub)) + 1 if res or sub else 0)
    # Sites holding the same anchor may put a result's tokens in different rounds (a share of
    # one round's tokens in the next): listed, and the prefix check allows the spread so far.
    spread = {r: res[r] - res_min[r] for r in res if res[r] - res_min[r] > 1e-3}
    if spread:
        facts["result_tokens_differ"] = {str(r): [round(res_min[r], 3), round(res[r], 3)]
                                         for r in sorted(spread)[:8]}
    cs = cr = slack = 0.0
    for r in range(R):
        cs += sub.get(r, 0)
        cr += res.get(r, 0)
        slack += spread.get(r, 0)
        if cr > cs + 1e-6 * cs + 1 + slack:
            v.append(f"I3: rounds 0..{r}: {cr:.3f} tokens in results > {cs:.3f} submitted "
                     "(counted twice?)")
            break
    # rounds after the last configured one (a late fold) still count in the totals
    cs += sum(t for r, t in sub.items() if r >= R)
    cr += sum(t for r, t in res.items() if r >= R)
    lost = cs - cr
    facts.update(tokens_submitted=round(cs, 3), tokens_in_results=round(cr, 3),
                 tokens_lost=round(lost, 3))
    ssum = (summary or {}).get("sites", {})
    if finished:
        missing = [r for r in range(R) if res.get(r, 0) <= 0]
        if missing:
            v.append(f"I3: rounds without result tokens: {missing[:8]}")
        # a site that died or was removed with rounds in flight loses at most its own
        # contribution to the rounds it had submitted and not seen applied (two with overlap)
        # and, as an owner, what its open aggregations of those rounds held: its share of the
        # chunks (1/sites) of every site's contribution to them, late ones folded in included;
        # a SIGSTOP under the lease loses nothing, but counts
        events = collections.Counter(e.get("site") for e in (plan or {}).get("events", [])
                                     if e.get("kind") in ("kill", "stop"))
        owned = sum(max_sub.values()) / max(1, len(sites))
        bound = 1.0
        for s in sites:
            ends = [l.get("end") for l in ssum.get(s, {}).get("lives", [])]
            k = max(events.get(s, 0), sum(1 for e in ends if e != "exit 0"))
            bound += k * 2 * (max_sub.get(s, 0) + owned)
        # a site launch stopped behind (another finished the run) may be several rounds behind:
        # what it submitted from its last applied round on (late, folded into rounds nobody
        # closes any more: open at the end, or unreceived) is in flight, however many rounds
        for s in stopped_late:
            applied = [j["round"] for j in site_anchors(run_dir, s) if "tokens" in j]
            last = max(applied) if applied else -1
            bound += sum(t for r, t in sub_by_site.get(s, {}).items() if r >= last)
        facts["tokens_lost_bound"] = round(bound, 3)
        if lost > bound:
            v.append(f"I3: {lost:.3f} submitted tokens are in no result (bound {bound:.3f}: "
                     "what the sites that died or were removed had in flight)")
    slack = sum(spread.values())
    if lost < -(1e-6 * cs + 1 + slack):
        v.append(f"I3: {-lost:.3f} more tokens in results than submitted (counted twice?)")
    c = (summary or {}).get("contributions")
    if c is not None:
        facts["contributions"] = {k: c.get(k) for k in ("on_time", "late", "dropped", "rejected",
                                                        "open_at_end", "unreceived")}
        neg = {k: x for k, x in c.items() if isinstance(x, (int, float)) and x < 0}
        if neg:
            v.append(f"I3: negative contribution counters {neg}")
        # a site launch stopped behind, or that ended without rejoining, sends no FIN and
        # leaves its peers' ledgers with it open (docs/diloco.md: not a failure); so does a
        # last life that joined as the run ended and took part in nothing: its FINs race its
        # peers' exits (what its earlier lives were sent is in the token ledger's bound)
        idle = {s for s in sites
                if ssum.get(s, {}).get("status") == "finished"
                and not ssum.get(s, {}).get("steps_trained")
                and not ssum.get(s, {}).get("rounds_applied")}
        unclosed = [x for x in c.get("ledger_unclosed") or []
                    if x.split("->")[-1] not in stopped_late | idle] if finished else []
        if unclosed:
            v.append(f"I3: contribution ledgers left unclosed: {unclosed}")
        if finished and len(unclosed) != len(c.get("ledger_unclosed") or []):
            facts["ledger_unclosed_to_stopped_sites"] = sorted(
                set(c["ledger_unclosed"]) - set(unclosed))
        # per pair, the final lives' counts (a contributor's JOIN starts both ends' counts;
        # a taker keeps counting a sender's earlier lives until its next life joins, and a
        # contribution sent around a cut reaches its owner from a third site: "took <= sent"
        # holds only for a sender of one life in a run without detours)
        detours = sum((ssum.get(s, {}).get("contribution_detours") or 0) +
                      (ssum.get(s, {}).get("contribution_detours_passed") or 0) for s in sites)
        for a in sites:
            one_life = len(ssum.get(a, {}).get("lives", [])) == 1
            la = ssum.get(a, {}).get("ledger") or {}
            if not isinstance(la, dict):
                continue
            expect, closed = 0, bool(la)
            for b, e in la.items():
                back = (ssum.get(b, {}).get("ledger") or {}).get(a)
                sent = e.get("sent", 0)
                if one_life and not detours and back is not None and back.get("took", 0) > sent:
                    v.append(f"I3: {b} took {back['took']} contribution frames from {a}, "
                             f"which sent it {sent}")
                if not (e.get("engines", 0) > 0 and e.get("fins", 0) >= e.get("engines", 0)
                        and back is not None):
                    closed = False
                else:
                    expect += max(0, sent - back.get("took", 0))
            got = (ssum.get(a, {}).get("contributions") or {}).get("unreceived")
            if closed and got is not None and got != expect:
                v.append(f"I3: {a} counts {got} contributions unreceived, its ledger with "
                         f"every peer's FIN says {expect}")
    return v, facts


def failure_cause(run_dir, launch_out, sites, summary):
    """The named cause of a failed launch: launch's own messages, the failing sites' summary
    `error` and the error lines of their logs, then how their lives ended: (named, text);
    launch's "did not finish" alone names nothing."""
    causes, lives = [], []
    text = open(launch_out, errors="replace").read() if os.path.exists(launch_out) else ""
    for line in text.splitlines():
        if line.startswith("geotrain launch:") and not re.search(
                r"^geotrain launch: \d+ sites of |Open MPI session folder", line):
            causes.append(line.strip())
    for s in sites:
        st = (summary or {}).get("sites", {}).get(s, {})
        if st.get("error"):
            causes.append(f"{s}: {st['error']}")
        bad = st.get("status") not in (None, "finished")
        named = any(f"site {s} " in c for c in causes)
        if bad or named:
            logf = f"{run_dir}/logs/{s}.log"
            lines = open(logf, errors="replace").read().splitlines() if os.path.exists(logf) else []
            # geotrain's own error lines first (an MPI job's help text comes after them)
            errs = [l for l in lines if "[geotrain error" in l] or [
                l for l in lines if re.search(r"\berror\b|\bfatal\b|abort", l, re.I)]
            if errs:
                causes.append(f"{s}.log: {errs[-1].strip()[:300]}")
            ends = [l.get("end") for l in st.get("lives", [])]
            if ends:  # exit 127: the binary could not be started (being rebuilt?)
                lives.append(f"{s}'s lives ended: {', '.join(map(str, ends))}")
    named = not all("did not finish" in c for c in causes)
    return named, "; ".join(dict.fromkeys(causes + lives))


def check_run(run_dir, launch_out, rc, hung, names):
    summary = load_json(f"{run_dir}/summary.json")
    plan = load_json(f"{run_dir}/chaos.json")
    finished = rc == 0 and not hung
    out = {"violations": [], "cause": None}
    if hung:
        out["status"] = "hang"
        out["cause"] = "still running at the timeout (stopped); " + "; ".join(
            site_states(run_dir, names, "hang-status"))
    elif rc == 0 and summary is None:
        out["status"] = "failed_unnamed"
        out["cause"] = "launch exited 0 without a summary.json"
    elif rc == 0:
        out["status"] = "finished"
    else:
        named, cause = failure_cause(run_dir, launch_out, names, summary)
        out["status"] = "failed_named" if named else "failed_unnamed"
        out["cause"] = (cause + "; " if cause else "") + f"launch exited " + (
            f"by signal {-rc}" if rc < 0 else str(rc))
    text = open(launch_out, errors="replace").read() if os.path.exists(launch_out) else ""
    stopped_late = stopped_late_sites(text, names)
    if finished and summary:
        for s in names:
            st = summary.get("sites", {}).get(s, {}).get("status")
            if st != "finished" and s not in stopped_late:
                out["violations"].append(f"end: site {s} ended {st!r} and launch exited 0")
    # the chaos kills with SIGKILL and launch stops with SIGTERM: any other signal is a crash
    for s in names:
        for life in (summary or {}).get("sites", {}).get(s, {}).get("lives", []):
            m = re.match(r"signal (\d+)", str(life.get("end")))
            if m and int(m.group(1)) not in (signal.SIGKILL, signal.SIGTERM):
                out["violations"].append(f"end: a life of site {s} ended by {life['end']} "
                                         "(a crash)")
    rounds = (plan or {}).get("rounds")
    disagree, bad_lines, _ = check_i1(run_dir, names, summary)
    if bad_lines:
        out["violations"].append(f"I1: unreadable anchors.jsonl lines: {bad_lines[:3]}")
    if disagree:
        out["violations"].append(
            "I1: sites disagree on the anchor of rounds " + str([d["round"] for d in disagree][:8]))
        out["i1_disagreements"] = disagree
    mism = (summary or {}).get("hash_mismatches", 0)
    if mism:
        out["violations"].append(f"I1: summary.json counts {mism} hash mismatches")
    if disagree and summary is not None:
        out["hash_vote_saw_it"] = bool(mism)
    v3, facts = check_i3(run_dir, names, summary, plan, finished, rounds, stopped_late)
    if stopped_late:
        out["stopped_late"] = sorted(stopped_late)
    out["violations"] += v3
    out.update(facts)
    if summary:
        g, gb = summary.get("goodput"), summary.get("goodput_bound")
        out.update(goodput=g, goodput_bound=gb,
                   goodput_ratio=(g / gb if isinstance(g, (int, float)) and gb else None),
                   goodput_breakdown=summary.get("goodput_breakdown"),
                   hash_checks=summary.get("hash_checks"), hash_mismatches=mism,
                   chaos_skipped=summary.get("chaos_skipped"),
                   lives={s: [l.get("end") for l in summary.get("sites", {}).get(s, {})
                              .get("lives", [])] for s in names})
    if plan:
        out["faults"] = dict(collections.Counter(e["kind"] for e in plan.get("events", [])))
    return out


# ---- reporting ----------------------------------------------------------------------------

def wait_for_binary(path, limit_s):
    """True once path is an executable; a binary being rebuilt comes back within minutes."""
    t0 = time.monotonic()
    while not os.access(path, os.X_OK):
        if time.monotonic() - t0 > limit_s:
            return False
        time.sleep(5)
    time.sleep(0 if time.time() - os.path.getmtime(path) > 10 else 10)  # a link just written
    return True


def binary_id(path):
    try:
        h = hashlib.sha256(open(path, "rb").read()).hexdigest()[:16]
        return f"sha256 {h}, built {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(os.path.getmtime(path)))}"
    except OSError:
        return "unreadable"


def git_head():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"


def write_repro(path, argv, env_extra, run, result, bin_id):
    rerun = list(argv)
    i = rerun.index("--run-dir")
    rerun[i + 1] = rerun[i + 1] + "-rerun"
    cmd = " ".join(f"{k}={shlex.quote(v)}" for k, v in env_extra.items())
    cmd = (cmd + " " if cmd else "") + " ".join(shlex.quote(a) for a in rerun)
    with open(path, "w") as f:
        f.write("#!/bin/sh\n# bench/soak.py: the run that failed here, again (a new run directory "
                "beside it).\n")
        f.write(f"# geotrain: {argv[0]} ({bin_id}); git HEAD {git_head()}\n")
        f.write(f"# mix: {json.dumps({k: run[k] for k in run if k != 'index'})}\n")
        f.write(f"# status: {result['status']}; violations: {result['violations']}\n")
        if result.get("cause"):
            f.write(f"# cause: {result['cause'][:500]}\n")
        f.write(f"cd {shlex.quote(ROOT)} && {cmd}\n")
    os.chmod(path, 0o755)
    return cmd


def dist(xs):
    xs = [x for x in xs if isinstance(x, (int, float))]
    if not xs:
        return None
    return {"median": round(statistics.median(xs), 4), "worst": round(min(xs), 4),
            "best": round(max(xs), 4), "n": len(xs)}


def check_only(dirs):
    """--check: the checks of a soak run on run directories made elsewhere (launch exited 0
    is assumed when summary.json says every site finished)."""
    bad = 0
    for d in dirs:
        d = os.path.abspath(d)
        summary = load_json(f"{d}/summary.json") or {}
        names = sorted(summary.get("sites", {})) or sorted(
            n for n in os.listdir(d) if os.path.exists(f"{d}/{n}/anchors.jsonl"))
        # launch's output beside the run directory (the soak's layout) or in it
        launch_out = next((p for p in (f"{d}/launch.out", f"{os.path.dirname(d)}/launch.out")
                           if os.path.exists(p)), os.devnull)
        text = open(launch_out, errors="replace").read()
        failed = re.search(r"^geotrain launch: site \S+ (did not finish|was never started)", text,
                           re.M) or (launch_out == os.devnull and not all(
                               s.get("status") == "finished"
                               for s in summary.get("sites", {}).values()))
        res = check_run(d, launch_out, 1 if failed or not summary else 0, False, names)
        bad += bool(res["violations"])
        print(json.dumps({"soak": "check", "run_dir": d, **res}, separators=(",", ":")))
    return 1 if bad else 0


def one_run(args, run, soak_dir, base, env, env_extra, suffix=""):
    """Runs and checks one run of the soak; its JSON line (printed), None when the binary
    did not come back."""
    i = run["index"]
    folder = os.path.join(soak_dir, f"run{i:03d}-seed{run['chaos_seed']}{suffix}")
    if not wait_for_binary(args.geotrain, 600):
        log(f"{args.geotrain} has not come back for 10 minutes; stopping the soak")
        return None
    bin_id = binary_id(args.geotrain)
    if os.path.exists(folder):
        shutil.rmtree(folder)
    os.makedirs(folder)
    if args.config:
        config = args.config
    else:
        config = os.path.join(folder, "sites.yaml")
        write_config(base, config, run["ranks"])
    run_dir = os.path.join(folder, "run")
    argv, names = launch_argv(args, run, config, run_dir)
    mix = {k: v for k, v in run.items() if k != "index"}
    log(f"run {i}: {json.dumps(mix)} ...")
    with open(os.path.join(folder, "command"), "w") as f:
        f.write(" ".join(shlex.quote(a) for a in argv) + "\n")
    if args.list:
        print(json.dumps({"soak": "list", "run": i, **mix,
                          "command": " ".join(shlex.quote(a) for a in argv)}))
        return {"list": True}
    rc, hung, wall, left = run_launch(argv, os.path.join(folder, "launch.out"), args.timeout,
                                      env, lambda: snapshot_states(run_dir, names))
    if hung:
        log(f"run {i}: still running after {args.timeout:g} s: a hang, stopped")
    res = check_run(run_dir, os.path.join(folder, "launch.out"), rc, hung, names)
    if left:
        res["violations"].append("end: processes of launch's group still ran 5 s after "
                                 "it exited (killed)")
    # launch starts restarted sites from the same path: a rebuild during the run can
    # put two builds in one run, or none (mid-link) in a restart
    rebuilt = binary_id(args.geotrain) != bin_id
    bad = bool(res["violations"]) or res["status"] in ("hang", "failed_unnamed")
    failed = bad or res["status"] != "finished"
    line = {"soak": "run", "run": i, **mix, "status": res["status"],
            "ok": not failed, "violations": res["violations"], "cause": res["cause"],
            "launch_rc": rc, "wall_s": round(wall, 1), "geotrain": bin_id}
    if rebuilt:
        line["geotrain_rebuilt_during_run"] = True
    line.update({k: v for k, v in res.items() if k not in line})
    if failed:
        # etcd's data folders (62 MB a member, preallocated WAL) tell nothing the logs do not
        if not args.keep_etcd_data:
            for m in glob.glob(os.path.join(run_dir, "etcd", "*", "data")):
                shutil.rmtree(m, ignore_errors=True)
        line["repro"] = write_repro(os.path.join(folder, "repro.sh"), argv, env_extra,
                                    run, res, bin_id)
        line["kept"] = folder
        with open(os.path.join(folder, "result.json"), "w") as f:
            json.dump(line, f, indent=1)
    elif not args.keep_passing:
        shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps(line, separators=(",", ":")), flush=True)
    g, gb = line.get("goodput"), line.get("goodput_bound")
    log(f"run {i}: {res['status']}{' VIOLATION ' + '; '.join(res['violations']) if res['violations'] else ''}"
        f"{', cause: ' + res['cause'][:200] if res['cause'] else ''}"
        + (f", goodput {g:.3f} / bound {gb:.3f}" if isinstance(g, float) and isinstance(gb, float) else "")
        + f", {wall:.0f} s" + (f", kept {folder}" if failed else ""))
    return line


def main():
    ap = argparse.ArgumentParser(
        description="Chaos runs with seeds drawn from --seed, each checked for I1 (equal anchors), "
                    "I3 (token ledger and contribution counters) and a named end; one JSON line "
                    "per run and a summary. Exit 1 when a run violated an invariant or failed "
                    "without a named cause.")
    ap.add_argument("--runs", "-n", type=int, default=None, help="chaos runs (default 10)")
    ap.add_argument("--seed", type=int, default=1, help="base seed the runs are drawn from")
    ap.add_argument("--seeds", help="chaos seeds to use, comma-separated, instead of drawing "
                                    "them (--runs defaults to their count)")
    ap.add_argument("--check", nargs="+", metavar="RUN_DIR",
                    help="only check these finished run directories (launch's --run-dir) and "
                         "print a line for each; runs nothing")
    ap.add_argument("--geotrain", default=os.path.join(ROOT, "build/cli/geotrain"))
    ap.add_argument("--dir", help="folder of the runs (default runs/soak-TIME); kept failures "
                                  "stay in it")
    ap.add_argument("--timeout", type=float, default=300,
                    help="seconds a run may take before it is a hang (default 300)")
    ap.add_argument("--config", help="run this config as it is, for every seed (no mix), e.g. "
                                     "bench/chaos.yaml")
    ap.add_argument("--base-config", default=os.path.join(ROOT, "tests/launch/three_sites.yaml"),
                    help="the mix's configs are this one with 2-4 sites (default "
                         "tests/launch/three_sites.yaml)")
    ap.add_argument("--chaos-args", help="launch's chaos options after --chaos SEED (default '"
                    + DEFAULT_CHAOS + "'; with --config '--chaos-round-s 3'); --slow F without "
                    "SITE= slows every site")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="one more --set for every run (repeatable)")
    ap.add_argument("--transports", default="ucx,libfabric")
    ap.add_argument("--sites", default="2,3,4", help="site counts of the mix (default 2,3,4)")
    ap.add_argument("--two-rank-share", type=float, default=0.3,
                    help="odds that a site of the mix has 2 ranks (default 0.3)")
    ap.add_argument("--max-procs", type=int, default=6,
                    help="most site processes (ranks) in one run (default 6)")
    ap.add_argument("--debug-logs", action="store_true",
                    help="GT_LOG_LEVEL=debug GT_LOG_TIME=1 for every site")
    ap.add_argument("--keep-etcd-data", action="store_true",
                    help="keep the etcd members' data folders of a kept run (62 MB each)")
    ap.add_argument("--keep-passing", action="store_true", help="keep every run's folder")
    ap.add_argument("--list", action="store_true",
                    help="print each run's launch command and start nothing")
    ap.add_argument("--only", type=int, action="append", default=[], metavar="I",
                    help="run only the soak's run I (0-based; repeatable): the same draw")
    args = ap.parse_args()
    if args.check:
        return check_only(args.check)
    try:
        args.seeds = [int(x) for x in args.seeds.split(",") if x] if args.seeds else None
    except ValueError:
        ap.error("--seeds: expected integers like 180,13")
    if args.runs is None:
        args.runs = len(args.seeds) if args.seeds else 10
    args.transports = [t for t in args.transports.split(",") if t]
    try:
        args.sites = [int(x) for x in args.sites.split(",") if x]
    except ValueError:
        ap.error("--sites: expected counts like 2,3,4")
    if args.runs < 1 or not args.transports or not args.sites or \
            any(s < 2 or s > len(SITE_NAMES) for s in args.sites):
        ap.error("need --runs >= 1, a transport and site counts in [2, 8]")
    if not wait_for_binary(args.geotrain, 180):
        ap.error(f"{args.geotrain}: not an executable (build it, or --geotrain PATH)")
    args.geotrain = os.path.abspath(args.geotrain)
    if args.config:
        args.config = os.path.abspath(args.config)
    base = os.path.abspath(args.base_config)
    soak_dir = os.path.abspath(args.dir or os.path.join(
        ROOT, "runs", "soak-" + time.strftime("%Y%m%d-%H%M%S")))
    os.makedirs(soak_dir, exist_ok=True)
    env_extra = {"GT_LOG_LEVEL": "debug", "GT_LOG_TIME": "1"} if args.debug_logs else {}
    env = dict(os.environ, **env_extra)
    bin_id = binary_id(args.geotrain)
    log(f"{args.runs} runs from base seed {args.seed} in {soak_dir}; geotrain {bin_id}")

    results, t_soak = [], time.monotonic()
    runs = draw_runs(args)
    if args.only:
        runs = [r for r in runs if r["index"] in args.only]
    try:
        for run in runs:
            line = one_run(args, run, soak_dir, base, env, env_extra)
            if line is None:
                break
            if line.get("list"):
                continue
            results.append(line)
            if line.get("geotrain_rebuilt_during_run") and not line["ok"]:
                # two builds in one run (or none, mid-link, for a restart): the run is
                # inconclusive, and run again on the new build
                line["inconclusive"] = True
                log(f"run {run['index']}: the binary was rebuilt during it: inconclusive, again")
                again = one_run(args, run, soak_dir, base, env, env_extra, "-again")
                if again is None:
                    break
                results.append(again)
    except KeyboardInterrupt:
        log("interrupted; the summary covers the runs that ended")

    if args.list:
        shutil.rmtree(soak_dir, ignore_errors=True) if not args.dir else None
        return 0
    inconclusive = [r for r in results if r.get("inconclusive")]
    counted = [r for r in results if not r.get("inconclusive")]
    finished = [r for r in counted if r["status"] == "finished"]
    viol = [r for r in counted if r["violations"]]
    unnamed = [r for r in counted if r["status"] in ("hang", "failed_unnamed")]
    named = [r for r in counted if r["status"] == "failed_named"]
    ratios = [r.get("goodput_ratio") for r in finished]
    worst = min((r for r in finished if isinstance(r.get("goodput_ratio"), float)),
                key=lambda r: r["goodput_ratio"], default=None)
    summary = {
        "soak": "summary", "runs": len(results), "base_seed": args.seed,
        "config": os.path.relpath(args.config, ROOT) if args.config else "mix",
        "passed": sum(1 for r in counted if r["ok"]), "finished": len(finished),
        "inconclusive": [{"run": r["run"], "chaos_seed": r["chaos_seed"], "kept": r.get("kept")}
                         for r in inconclusive],
        "violations": len(viol), "failed_named": len(named), "failed_unnamed": len(unnamed),
        "violating_runs": [{"run": r["run"], "chaos_seed": r["chaos_seed"],
                            "violations": r["violations"][:3], "repro": r.get("repro")}
                           for r in viol],
        "unnamed_runs": [{"run": r["run"], "chaos_seed": r["chaos_seed"], "status": r["status"],
                          "repro": r.get("repro")} for r in unnamed if not r["violations"]],
        "named_failures": [{"run": r["run"], "chaos_seed": r["chaos_seed"],
                            "cause": (r["cause"] or "")[:300]} for r in named],
        "result_tokens_differ_runs": [r["run"] for r in results if r.get("result_tokens_differ")],
        "goodput": dist([r.get("goodput") for r in finished]),
        "goodput_bound": dist([r.get("goodput_bound") for r in finished]),
        "goodput_over_bound": dist(ratios),
        "worst_goodput_over_bound": ({"run": worst["run"], "chaos_seed": worst["chaos_seed"],
                                      "goodput": worst["goodput"],
                                      "goodput_bound": worst["goodput_bound"],
                                      "goodput_breakdown": worst.get("goodput_breakdown")}
                                     if worst else None),
        "wall_s": round(time.monotonic() - t_soak, 1), "dir": soak_dir, "geotrain": bin_id,
    }
    print(json.dumps(summary, separators=(",", ":")), flush=True)
    gr = summary["goodput_over_bound"]
    log(f"{len(results)} runs: {summary['passed']} passed, {len(viol)} with invariant violations, "
        f"{len(unnamed)} failed without a named cause (hangs included), {len(named)} failed with "
        f"one; goodput/bound median {gr['median'] if gr else '-'}, worst {gr['worst'] if gr else '-'}"
        f" ({summary['wall_s']:.0f} s)")
    if not any(not r["ok"] for r in results) and not os.listdir(soak_dir) and not args.dir:
        os.rmdir(soak_dir)
    return 1 if viol or unnamed else 0


if __name__ == "__main__":
    sys.exit(main())
