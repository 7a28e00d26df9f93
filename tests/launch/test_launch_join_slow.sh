#!/usr/bin/env bash
# test_launch_join_slow.sh GEOTRAIN CONFIG — a joiner far slower than its peers (outer.catch_up,
# steps 100x slower than theirs, 20x the peers' 5x) still joins once. It starts at once from the
# anchor after R - 2 and must take the anchor after R - 1 before its peers drop it (they keep
# two rounds); too slow to train there, it takes it as soon as a peer submits round R (before
# the fix it found the anchor gone, left with exit 3 and rejoined, three times in a 24-round
# run, and the launch failed). Checks: launch exits 0, c joined once and did not fail to fetch —
# or, at most once, failed, left and joined again (see below) —, every site finished, and c's
# anchors equal a's for every round both logged.
#
# Why one miss is allowed: c looks for its peers' submit of round R between its own steps, and
# each of its steps lasts 20 of theirs, while they dropped the anchor after R - 1 when they
# applied R + 1, about 12 of their steps after that submit. When c's step boundary fell late, it
# found the anchor gone (1 run in ~4 of the whole parallel suite on 2 cores, 2026-11-27; twice
# in one run on 2026-11-28), left and rejoined, which the launch survives. Since 2026-11-28 the
# peers hold that anchor for a joiner three rounds longer (dl_hold_slot; 30 of their steps
# more), and no run here has missed since; one miss stays allowed for a machine stalled longer.
set -u
geotrain=$1 config=$2
dir=$(mktemp -d /tmp/gt-join-slow-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; for f in "$dir"/run/logs/*.log; do echo "== $f" >&2; tail -n 25 "$f" >&2; done; exit 1; }

"$geotrain" launch "$config" --run-dir "$dir/run" --set run.rounds=24 --set outer.catch_up=true \
  --join c@3 --slow a=5 --slow b=5 --slow c=100 >"$dir/out" 2>&1 ||
  { tail -n 20 "$dir/out" >&2; fail "launch failed"; }
log=$dir/run/logs/c.log
misses=$(grep -c "cannot fetch the anchor" "$log")
[ "$misses" -le 1 ] || fail "c could not fetch its anchor $misses times: $(grep 'cannot fetch' "$log" | head -n 1)"
joins=$(grep -c "site c: joined at step" "$log")
[ "$joins" = $((misses + 1)) ] || fail "c joined $joins times, missed the anchor $misses times"
[ "$misses" = 0 ] || echo "note: c missed the anchor once (its step boundary fell late) and joined again"
grep -q "its first round follows the next anchor" "$log" || fail "c did not start at once (fast join)"
grep -q "site c: took the anchor after round" "$log" || fail "c never took the anchor before its first round"
for s in a b c; do
  st=$(python3 -c "import json;print(json.load(open('$dir/run/$s/summary.json'))['status'])")
  [ "$st" = finished ] || fail "site $s: status $st"
done
# Rounds both logged: at least 10 of the 24 after one join; after a miss, the second join
# comes later (the leaving process's close and a new process's start, rounds of the peers' on a
# loaded machine: the CI machine's suite once rejoined 10 rounds later, 9 in common), so 5.
python3 - "$dir/run/a/anchors.jsonl" "$dir/run/c/anchors.jsonl" "$misses" <<'PY' || fail "c's anchors differ from a's"
import json, sys
a = {j["round"]: j["anchor_hash"] for j in map(json.loads, open(sys.argv[1]))}
c = {j["round"]: j["anchor_hash"] for j in map(json.loads, open(sys.argv[2]))}
need = 10 if sys.argv[3] == "0" else 5
both = sorted(set(a) & set(c))
bad = [r for r in both if a[r] != c[r]]
assert len(both) >= need and not bad, f"{len(both)} rounds in common (at least {need}), differing: {bad}"
print(f"ok: c's anchors equal a's for {len(both)} rounds")
PY
grep "takes it now" "$log" | head -n 1
echo "ok: the slow joiner joined once and finished"
