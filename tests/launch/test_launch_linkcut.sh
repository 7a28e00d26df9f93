#!/usr/bin/env bash
# test_launch_linkcut.sh GEOTRAIN CONFIG — one link cut for longer than a result wait's limit
# (issue 11 item 5; `geotrain launch --chaos` draws such cuts). Three sites, the link a-c cut
# from 5 s to 45 s (`--set links[a,c].cuts=5+40`); b reaches both, so neither a nor c is a
# minority and the partition rule does not apply. Before the fix, a and c each gave up on a
# result that needed the other (`... has not arrived in 29 s; giving up`), exited 1, and the
# launch failed. Now a site that gives up leaves with exit 3 and launch starts it again as a
# joiner. Checks:
#  - launch exits 0 and every site finished;
#  - a or c was removed (exit 3) and started again;
#  - the cut met the run's traffic (emu_held_by_cut / emu_refused_by_cut in summary.json);
#  - I1: every site's anchor for a round equals the others'; no hash mismatch;
#  - the ledger: no prefix of the rounds has more tokens in results than were submitted.
set -u
geotrain=$1 config=$2
dir=$(mktemp -d /tmp/gt-linkcut-XXXXXX)
trap 'pkill -KILL -f "$dir/run" 2>/dev/null; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; cat "$dir/launch.out" >&2 2>/dev/null; for f in "$dir"/run/logs/*.log; do echo "== $f" >&2; grep -v "info.*mesh" "$f" | tail -n 20 >&2; done; exit 1; }

# Steps of 18 ms (6 ms, the rest slept, x3) so that the run outlasts the cut on any machine,
# beside other tests too: before, the steps were paced by the CPU, and with OpenBLAS's AVX-512
# kernels a and b finished before the cut healed, so c could not rejoin.
timeout 600 "$geotrain" launch "$config" --run-dir "$dir/run" --set run.rounds=40 \
  --set inner.steps=30 --set inner.emulated_step_ms=6 --set 'links[a,c].cuts=5+40' \
  --slow a=3 --slow b=3 --slow c=3 \
  >"$dir/launch.out" 2>&1 || fail "launch failed"
grep -Eq -- "-- (a|c) was removed from the run \(exit 3\)" "$dir/launch.out" ||
  fail "neither a nor c left: the cut did not outlast the result wait (slower machine?)"

python3 - "$dir/run" <<'PY' || fail "link cut checks"
import json, sys, collections
run = sys.argv[1]
tot = json.load(open(f"{run}/summary.json"))
for s, j in tot["sites"].items():
    assert j.get("status") == "finished", f"site {s}: {j.get('status')} ({j.get('error')})"
met = {s: j["wan"]["emu_held_by_cut"] + j["wan"]["emu_refused_by_cut"] for s, j in tot["sites"].items()}
assert met["b"] == 0, f"b's links were not cut, yet its emulator held messages: {met}"
assert tot["hash_mismatches"] == 0, f"hash mismatches: {tot['hash_mismatches']}"
hashes = collections.defaultdict(set); res = {}; sub = collections.defaultdict(float)
for s in tot["sites"]:
    for line in open(f"{run}/{s}/anchors.jsonl"):
        j = json.loads(line)
        hashes[j["round"]].add(j["anchor_hash"])
        if "tokens" in j: res[j["round"]] = max(res.get(j["round"], 0), j["tokens"])
    for line in open(f"{run}/{s}/submits.jsonl"):
        j = json.loads(line); sub[j["round"]] += j["tokens"]
bad = [r for r, h in hashes.items() if len(h) != 1]
assert not bad, f"sites disagree on the anchor of rounds {bad[:5]}"
R = max(hashes) + 1
assert R == 40, f"the run's last round applied is {R - 1}"
cs = cr = 0.0
for r in range(R):
    cs += sub.get(r, 0); cr += res.get(r, 0)
    assert cr <= cs + 1, f"rounds 0..{r}: {cr} tokens in results > {cs} submitted"
print(f"ok: 40 rounds, anchors equal, {cr:.0f} of {cs:.0f} submitted tokens in results, "
      f"contributions {tot['contributions']}, messages held or refused by the cut {met}")
PY
echo "ok: a long cut of one link: its ends left, rejoined, and the run finished"
