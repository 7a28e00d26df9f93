#!/usr/bin/env bash
# test_launch_zombie.sh GEOTRAIN CONFIG — a zombie: site c is frozen (SIGSTOP) for well past
# its lease, so the others remove it and go on; then it is thawed (SIGCONT). It must notice it
# was removed before it sends or applies anything (exit 3, "removed from the run"), and
# `geotrain launch` starts it again as a joiner, which fetches the current anchor and finishes
# the run. Every round's anchor that c logged equals a's for that round (it never applied a
# stale result), and no hash vote failed. Removing c does not hold up a's and b's steps
# (step_held_max_s in their summaries).
set -u
geotrain=$1 config=$2
dir=$(mktemp -d /tmp/gt-zombie-XXXXXX)
cpid=
trap '[ -n "$cpid" ] && kill -CONT "$cpid" 2>/dev/null; pkill -KILL -f "$dir/run" 2>/dev/null; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; cat "$dir/launch.out" >&2; for f in "$dir"/run/logs/*.log; do echo "== $f" >&2; grep -v "info.*mesh" "$f" | tail -n 30 >&2; done; exit 1; }
rounds() { python3 -c "import json,sys;print(int(json.load(open(sys.argv[1])).get('rounds_applied',0)))" "$1" 2>/dev/null || echo 0; }

# c's connections outlive its lease (peer_timeout 10 s): it is removed while they still look
# healthy, as a frozen host's do. Steps of at least 15 ms whatever the machine: the freeze, the removal and the rejoin take
# seconds, and the run must still be going when c is back (at 10 ms a step, c once came back
# in the last rounds and found the run over).
"$geotrain" launch "$config" --run-dir "$dir/run" --set run.rounds=100 \
  --set membership.lease_ttl_s=3 --set inner.emulated_step_ms=15 \
  --set wan.peer_timeout_ms=10000 --set outer.carry_max_rounds=1000 >"$dir/launch.out" 2>&1 &
launcher=$!
for _ in $(seq 1 1200); do
  [ "$(rounds "$dir/run/c/status.json")" -ge 3 ] && break
  kill -0 "$launcher" 2>/dev/null || fail "launch ended before site c reached round 3"
  sleep 0.1
done
cpid=$(pgrep -f -- "run --config .* --site c --run-dir $dir/run" | head -n 1)
[ -n "$cpid" ] || fail "cannot find site c's process"
at=$(rounds "$dir/run/a/status.json")
kill -STOP "$cpid"
echo "froze site c (pid $cpid) at round $at"
# Well past the 3 s lease: the others move to a view without c and keep training.
for _ in $(seq 1 300); do
  grep -q "view [0-9]* -> [0-9]*, 2 live sites" "$dir/run/logs/a.log" && break
  sleep 0.1
done
grep -q "view [0-9]* -> [0-9]*, 2 live sites" "$dir/run/logs/a.log" || fail "a never removed c"
sleep 2
kill -CONT "$cpid"
cpid=
wait "$launcher" || fail "launch failed"
grep -q "removed from the run" "$dir/run/logs/c.log" || fail "c did not notice its removal"
grep -q "c was removed from the run (exit 3): started again" "$dir/launch.out" ||
  fail "launch did not start c again"
grep -q "joined at step" "$dir/run/logs/c.log" || fail "c did not rejoin as a joiner"
# What c trained after its last submit was kept (carry.c) and added to its first contribution
# after the rejoin (outer.carry_max_rounds, default 4: c is back within a round or two).
kept=$(grep -o "keeps the [0-9]* tokens" "$dir/run/logs/c.log" | tail -n 1 | grep -o "[0-9]*")
# (Frozen right after a submit, c has trained nothing since: then there is nothing to keep,
# which it says, and the checks of the kept work below are skipped.)
if [ -z "$kept" ]; then
  grep -q "trained nothing since its last submit" "$dir/run/logs/c.log" ||
    fail "c did not keep the work of its round in flight"
  kept=0
  echo "c was frozen right after a submit: nothing to keep"
else
  grep -q "adds the work its last life kept ($kept tokens" "$dir/run/logs/c.log" ||
    fail "the rejoined c did not add the $kept tokens its last life kept"
fi
# The survivors closed c's connections by force when the view dropped it: flushing them (to a
# frozen peer) blocked under the WAN thread's lock until the 2 s close deadline.
grep -h "could not flush an endpoint" "$dir/run/logs/a.log" "$dir/run/logs/b.log" &&
  fail "a survivor flushed the removed site's connection (held its WAN thread 2 s)"
for s in a b c; do
  st=$(python3 -c "import json;print(json.load(open('$dir/run/$s/summary.json'))['status'])")
  [ "$st" = finished ] || fail "site $s: status $st"
done
python3 - "$dir/run" "$kept" <<'PY' || fail "anchors, hash votes or the kept work disagree"
import json, sys
run = sys.argv[1]
def hashes(s):
    out = {}
    for line in open(f"{run}/{s}/anchors.jsonl"):
        j = json.loads(line)
        out.setdefault(j["round"], set()).add(j["anchor_hash"])
    return out
a, c = hashes("a"), hashes("c")
bad = [r for r in c if r in a and c[r] != a[r]]
assert not bad, f"c applied other anchors than a in rounds {bad[:5]}"
assert max(a) == max(c), "c did not finish the run"
tot = json.load(open(f"{run}/summary.json"))
assert tot.get("hash_mismatches", 0) == 0, f"hash mismatches: {tot.get('hash_mismatches')}"
print(f"ok: c's {len(c)} rounds agree with a's; final anchors equal")
# The kept tokens went out once, in c's first contribution after the rejoin: c's summary (its
# last life) counts them, its first submit after the rejoin weighs at least that much, and no
# prefix of rounds has more tokens in results than were submitted (nothing counted twice).
cj = json.load(open(f"{run}/c/summary.json"))
kept = int(sys.argv[2])
assert cj["carried_tokens"] == kept, f"c carried {cj['carried_tokens']} tokens, kept {kept}"
first = cj["joined_round"]
subs = {}
res = {}
for s in ("a", "b", "c"):
    for line in open(f"{run}/{s}/submits.jsonl"):
        j = json.loads(line)
        subs[j["round"]] = subs.get(j["round"], 0) + j["tokens"]
        if s == "c" and j["round"] == first: c_first = j["tokens"]
    for line in open(f"{run}/{s}/anchors.jsonl"):
        j = json.loads(line)
        if "tokens" in j: res[j["round"]] = max(res.get(j["round"], 0), j["tokens"])
assert c_first >= kept, f"c's first submit after the rejoin weighs {c_first} < {kept} kept"
cs = cr = 0.0
for r in range(max(res) + 1):
    cs += subs.get(r, 0); cr += res.get(r, 0)
    assert cr <= cs + 1, f"rounds 0..{r}: {cr} tokens in results > {cs} submitted"
print(f"ok: c kept {kept} tokens and its round-{first} contribution carried them ({c_first})")
# Removing the frozen c did not hold a's or b's training: the survivors closed its connection
# by force. (An orderly close flushed first, under the WAN thread's lock, which the training
# thread takes every step: both stood still until c thawed or the 2 s close deadline passed.)
for s in ("a", "b"):
    held = json.load(open(f"{run}/{s}/summary.json"))["step_held_max_s"]
    assert held < 0.5, f"{s}: a step was held {held:.2f} s beyond its waits (c's removal?)"
    print(f"ok: {s}'s longest step hold {held:.3f} s")
PY
echo "ok: the zombie noticed its removal and rejoined"
