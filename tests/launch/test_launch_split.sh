#!/usr/bin/env bash
# test_launch_split.sh GEOTRAIN CONFIG — bandwidth-aware chunk ownership end to end: CONFIG
# (bench/thin_site.yaml) has one site behind links 10x thinner, so outer.chunk_split:
# bandwidth gives it (almost) no chunks to aggregate and the others bigger ones. The run must
# finish at every site with the anchors equal across sites after every round (I1), every
# contribution on time or late (none dropped), and an exchange time in each summary; then a
# site killed at round 2 (its chunks move to the next live site: their sizes were cut for
# another owner) must not stop the others.
set -u
geotrain=$1 config=$2
dir=$(mktemp -d /tmp/gt-split-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; for f in "$dir"/*/logs/*.log; do echo "== $f" >&2; tail -n 25 "$f" >&2; done; exit 1; }
sets=(--set run.rounds=4 --set inner.steps=10 --set outer.overlap_steps=5)

"$geotrain" launch "$config" --run-dir "$dir/run" "${sets[@]}" >"$dir/run.out" 2>&1 ||
  { cat "$dir/run.out"; fail "the run failed"; }
for s in a b c; do
  [ "$(grep -c '"round"' "$dir/run/$s/anchors.jsonl")" -eq 4 ] || fail "site $s did not log 4 rounds"
  cmp -s "$dir/run/a/anchors.jsonl" "$dir/run/$s/anchors.jsonl" || fail "site $s's anchors differ from a's"
  grep -q '"exchange_s_median": [0-9]' "$dir/run/$s/summary.json" || fail "site $s has no exchange time"
  grep -q '"status": "finished"' "$dir/run/$s/summary.json" || fail "site $s did not finish"
done
! grep -q '"dropped": [1-9]' "$dir/run/summary.json" || fail "contributions were dropped"
grep -q 'outer.chunk_split: bandwidth\|chunk_split: bandwidth' "$dir/run/config.yaml" ||
  fail "the run did not use outer.chunk_split: bandwidth"

# c (the thin site) killed after round 2: a and b go on and agree.
"$geotrain" launch "$config" --run-dir "$dir/kill" "${sets[@]}" --kill c@2 >"$dir/kill.out" 2>&1
grep -q "chaos: stopping after 2 rounds for the launcher to kill it" "$dir/kill/logs/c.log" || fail "site c was not killed"
for s in a b; do
  grep -q '"status": "finished"' "$dir/kill/$s/summary.json" || fail "site $s did not finish after c's loss"
  [ "$(grep -c '"round"' "$dir/kill/$s/anchors.jsonl")" -eq 4 ] || fail "site $s did not log 4 rounds after c's loss"
done
cmp -s "$dir/kill/a/anchors.jsonl" "$dir/kill/b/anchors.jsonl" || fail "a and b disagree after c's loss"
echo "ok"
