#!/usr/bin/env bash
# test_launch_chaos.sh GEOTRAIN CONFIG — a short `geotrain launch --chaos SEED` run: three
# sites, 24 rounds, a seeded schedule with kill -9 + restart, SIGSTOP past the lease (a
# zombie), a 3-10x slowdown window, etcd member kills and link cuts (a site cut off from both
# others for 5.9 s, longer than wan.peer_timeout_ms, and one link cut for 5 s). Checks:
#  - the same seed draws the same schedule (--dry-run twice), another seed another one, and
#    the run's chaos.json is that schedule; every kind of fault in it was fired; every drawn
#    cut was fired at its round into RUN_DIR/chaos_cuts (or skipped, said), every site's log
#    shows it took each from there, no site's config has a cut, and a message met a cut (the
#    emulators' emu_held_by_cut / emu_refused_by_cut in summary.json);
#  - the run finishes (launch exits 0, every site finished or, more than a round behind when
#    another finished, was stopped), no hash mismatch, and every
#    site's anchor for a round equals the others' for that round (I1);
#  - the token ledger: every round's result carries tokens, no prefix of the rounds has more
#    tokens in results than the sites submitted for those rounds (nothing counted twice), and
#    what was submitted but is in no result is at most what the killed or frozen sites had in
#    flight;
#  - goodput and goodput_bound in (0, 1]; goodput_breakdown adds up to 1 and shows the faults;
#    every process launch started is one recorded life.
set -u
geotrain=$1 config=$2
dir=$(mktemp -d /tmp/gt-chaos-XXXXXX)
trap 'pkill -KILL -f "$dir/run" 2>/dev/null; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; cat "$dir/launch.out" >&2 2>/dev/null; for f in "$dir"/run/logs/*.log; do echo "== $f" >&2; grep -v "info.*mesh" "$f" | tail -n 20 >&2; done; exit 1; }
# seed 180 draws every kind of fault, link cuts of both shapes among them, fired at their
# rounds: steps of 15 ms (the rest slept, inner.emulated_step_ms) make rounds of ~0.5 s on a
# fast machine, a slow one, or beside other tests
sets=(--set run.rounds=24 --set inner.steps=30 --set inner.emulated_step_ms=15 --set membership.lease_ttl_s=5 --set outer.catch_up=true --chaos-round-s 0.5)
seed=180

"$geotrain" launch "$config" "${sets[@]}" --chaos $seed --mtbf-rounds 8 --dry-run >"$dir/s1.json" ||
  fail "--dry-run failed"
"$geotrain" launch "$config" "${sets[@]}" --chaos $seed --mtbf-rounds 8 --dry-run >"$dir/s1b.json"
"$geotrain" launch "$config" "${sets[@]}" --chaos 2 --mtbf-rounds 8 --dry-run >"$dir/s2.json"
cmp -s "$dir/s1.json" "$dir/s1b.json" || fail "the same seed drew two schedules"
cmp -s "$dir/s1.json" "$dir/s2.json" && fail "seeds 1 and 2 drew the same schedule"
"$geotrain" launch "$config" "${sets[@]}" --chaos x --dry-run 2>/dev/null && fail "--chaos x accepted"
# --fault-rounds F: a kill's down time and a slowdown last F/2, F or 3F/2 rounds (default 2)
"$geotrain" launch "$config" "${sets[@]}" --chaos $seed --mtbf-rounds 8 --fault-rounds 0.5 \
  --dry-run >"$dir/short.json" || fail "--fault-rounds 0.5 --dry-run failed"
"$geotrain" launch "$config" "${sets[@]}" --chaos $seed --fault-rounds 0 --dry-run 2>/dev/null &&
  fail "--fault-rounds 0 accepted"
python3 - "$dir" <<'PY' || fail "--fault-rounds"
import json, sys
d = sys.argv[1]
for f, want in (("s1.json", {1, 2, 3}), ("short.json", {0.25, 0.5, 0.75})):
    j = json.load(open(f"{d}/{f}"))
    lens = {round(e["until_round"] - e["at_round"], 6) for e in j["events"]
            if e["kind"] in ("kill", "slow") and e["until_round"] < j["rounds"] - 3}
    assert lens and lens <= want, f"{f}: kill and slow lengths {sorted(lens)}, not within {want}"
    print(f"ok: {f}: fault_rounds {j['fault_rounds']}, kill/slow lengths {sorted(lens)}")
PY

timeout 600 "$geotrain" launch "$config" --run-dir "$dir/run" "${sets[@]}" --chaos $seed \
  --mtbf-rounds 8 >"$dir/launch.out" 2>&1 || fail "launch --chaos failed"

python3 - "$dir" <<'PY' || fail "chaos run checks"
import json, os, re, sys, collections
d = sys.argv[1]; run = f"{d}/run"
plan = json.load(open(f"{d}/s1.json"))
ran = json.load(open(f"{run}/chaos.json"))
assert plan == ran, "chaos.json differs from the --dry-run schedule"
kinds = {e["kind"] for e in plan["events"]}
assert {"kill", "stop", "slow", "etcd-kill", "cut"} <= kinds, f"the seed should draw every kind: {kinds}"
cuts = [e for e in plan["events"] if e["kind"] == "cut"]
assert {e["peer"] == "all" for e in cuts} == {True, False}, "cuts of one link and of a whole site"
out = open(f"{d}/launch.out").read()
for k, msg in [("kill", "chaos: kill -9 "), ("stop", "chaos: SIGSTOP"), ("slow", "chaos: slowed down"),
               ("etcd-kill", "chaos: kill -9 etcd member"), ("cut", "chaos: link cut begins"),
               ("cut", "chaos: link cut healed")]:
    assert msg in out, f"no {k} fault was fired ({msg!r})"
# the cuts reached the sites: launch fired each drawn cut at its round into RUN_DIR/chaos_cuts
# (or skipped it, saying so), every site's WAN thread took it from there (its log says so), and
# no site's config has a cut of its own
names = sorted(json.load(open(f"{run}/summary.json"))["sites"])
fired = [l.split() for l in open(f"{run}/chaos_cuts") if l.strip()]
skipped = out.count("chaos: skipped the link cut")
assert len(fired) + skipped == len(cuts), f"{len(cuts)} cuts drawn, {len(fired)} fired, {skipped} skipped"
assert fired, "no cut fired"
drawn = sorted((e["site"], "*" if e["peer"] == "all" else e["peer"], round(e["duration_s"], 3)) for e in cuts)
for f in fired:
    assert f[0] == "cut" and (f[1], f[2], round(float(f[4]), 3)) in drawn and float(f[3]) >= 0, f"fired {f}, drawn {drawn}"
starts = [float(f[3]) for f in fired]
assert starts == sorted(starts), f"cuts fired out of order: {starts}"
for s in names:
    log = open(f"{run}/logs/{s}.log").read()
    took = log.count("chaos: link cut ")
    assert took >= len(fired), f"site {s}'s log shows {took} of the {len(fired)} cuts fired"
for line in open(f"{run}/config.yaml"):
    assert not re.match(r"\s*cuts: \[.+\]", line), f"a cut in the sites' config: {line.strip()}"
# ... and met the run's traffic: some site's emulator held or refused a message across a cut
# (a site's summary is its last process's; one restarted after the cuts counts none)
met = {s: j.get("wan", {}).get("emu_held_by_cut", 0) + j.get("wan", {}).get("emu_refused_by_cut", 0)
       for s, j in json.load(open(f"{run}/summary.json"))["sites"].items()}
assert sum(met.values()) > 0, f"no message met a cut (held or refused, per site: {met})"
tot = json.load(open(f"{run}/summary.json"))
sites = sorted(tot["sites"])
stopped_late = [s for s in sites if f"-- chaos: {s} (restarted) had not finished" in out or f"-- {s} (restarted) ended without rejoining" in out
                or f"-- chaos: {s} stopped at step" in out]
for s in sites:
    st = tot["sites"][s].get("status")
    assert st == "finished" or s in stopped_late, f"site {s}: {st}"
assert tot["hash_mismatches"] == 0, f"hash mismatches: {tot['hash_mismatches']}"
g = tot.get("goodput")
assert g is not None and 0 < g <= 1, f"goodput {g}"
gb = tot.get("goodput_bound")  # what the schedule's faults leave, whatever the protocol does
assert gb is not None and 0 < gb <= 1, f"goodput_bound {gb}"
# where the rest went: shares of tokens_possible that add up to 1 with goodput, each in
# [0, 1] but trained_not_in_anchor (what is left: it takes the others' measuring error); every
# process launch started is a recorded life, and the kills and zombies show as lives that
# ended with signal 9 or exit 3
bd = tot.get("goodput_breakdown")
assert bd and abs(bd["in_anchor"] - g) < 1e-9, f"goodput_breakdown {bd}"
assert abs(sum(bd.values()) - 1) < 1e-6, f"goodput_breakdown adds up to {sum(bd.values())}: {bd}"
for k, v in bd.items():
    assert k == "trained_not_in_anchor" or -1e-9 <= v <= 1, f"goodput_breakdown {k} = {v}"
assert -0.1 <= bd["trained_not_in_anchor"] <= 0.5, f"goodput_breakdown {bd}"
assert bd["down"] > 0 and bd["stopped"] > 0 and bd["slowed"] > 0, f"faults not in the breakdown: {bd}"
lives = {s: tot["sites"][s].get("lives", []) for s in tot["sites"]}
ends = [l["end"] for ls in lives.values() for l in ls]
restarts = out.count("chaos: restarted ") - out.count("chaos: restarted etcd") + out.count("was removed from the run (exit 3)")
assert len(ends) == len(lives) + restarts, f"{len(ends)} lives recorded, {len(lives)} sites and {restarts} restarts: {ends}"
assert "signal 9" in ends, f"no life ended by the kill: {ends}"
for s, ls in lives.items():
    for a, b in zip(ls, ls[1:]):
        assert a["end_unix"] <= b["start_unix"] + 0.5, f"{s}: lives overlap: {a} {b}"
# I1 across sites, and the token ledger
hashes = collections.defaultdict(set); res = {}; sub = collections.defaultdict(float)
last_two = collections.defaultdict(list)
for s in sites:
    # a life that ended removed voids the rounds it applied after the last one the others
    # confirmed (SITE/void.jsonl, diloco/files.c dl_log_void): they are no site's anchor
    voids = []
    if os.path.exists(f"{run}/{s}/void.jsonl"):
        voids = [json.loads(l) for l in open(f"{run}/{s}/void.jsonl") if l.strip()]
    rows = [json.loads(l) for l in open(f"{run}/{s}/anchors.jsonl")]
    rows = [j for k, j in enumerate(rows)
            if not any(v["lines"][0] <= k < v["lines"][1] and j["round"] > v["void_after"]
                       for v in voids)]
    for j in rows:
        hashes[j["round"]].add(j["anchor_hash"])
        if "tokens" in j: res[j["round"]] = max(res.get(j["round"], 0), j["tokens"])
    for line in open(f"{run}/{s}/submits.jsonl"):
        j = json.loads(line)
        sub[j["round"]] += j["tokens"]
        last_two[s].append(j["tokens"])
bad = [r for r, h in hashes.items() if len(h) != 1]
assert not bad, f"sites disagree on the anchor of rounds {bad[:5]}"
R = plan["rounds"]
missing = [r for r in range(R) if res.get(r, 0) <= 0]
assert not missing, f"rounds without result tokens: {missing}"
cs = cr = 0.0
for r in range(R):
    cs += sub.get(r, 0); cr += res.get(r, 0)
    assert cr <= cs + 1e-6 * cs + 1, f"rounds 0..{r}: {cr} tokens in results > {cs} submitted (counted twice?)"
lost = cs - cr
kills = [e for e in plan["events"] if e["kind"] in ("kill", "stop")]
# a site killed (or frozen past its lease and removed) with a round in flight loses at most its
# own contribution to the rounds it had submitted and not yet seen applied (two with overlap),
# and the chunks it owned of those
bound = sum(2 * max(last_two[e["site"]]) for e in kills) + 1
assert lost <= bound, f"{lost} submitted tokens are in no result (bound {bound})"
c = tot["contributions"]
print(f"ok: {len(plan['events'])} faults, goodput {g:.4f} (bound {gb:.4f}), {cr:.0f} of {cs:.0f} submitted tokens in "
      f"results ({lost:.0f} lost with killed sites), contributions {c}, "
      f"restarted late and stopped: {stopped_late}")
PY
echo "ok: launch --chaos finished with every check"
