#!/usr/bin/env bash
# test_launch_resume_catchup.sh GEOTRAIN CONFIG — whole-run resume with outer.catch_up: site c,
# 3x slower, ends most rounds early (its step counter jumps to their ends), yet a round whose
# step r·H + τ is a checkpoint's ends only after it, so every site holds the same checkpoint
# steps and `launch --resume` continues from the newest of them instead of from the start.
# (Catch-up is timing-dependent, so unlike test_launch_resume this does not compare anchors
# with an uninterrupted run; the sites' anchors must agree with each other.)
set -u
geotrain=$1 config=$2
dir=$(mktemp -d /tmp/gt-resume-cu-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; for f in "$dir"/run/logs/*.log; do echo "== $f" >&2; tail -n 25 "$f" >&2; done; exit 1; }
sets=(--set outer.catch_up=true --slow c=3)

"$geotrain" launch "$config" --run-dir "$dir/run" "${sets[@]}" --kill a@4 --kill b@4 --kill c@4 \
  >"$dir/cut.out" 2>&1
cut=$(python3 -c "import json;print(json.load(open('$dir/run/c/summary.json')).get('rounds_cut', 0))" 2>/dev/null)
for s in a b c; do
  ls "$dir/run/$s/checkpoints/outer/" | grep '\.gtos$' >"$dir/$s.ck" || fail "site $s has no outer checkpoint"
done
cmp -s "$dir/a.ck" "$dir/c.ck" && cmp -s "$dir/a.ck" "$dir/b.ck" ||
  fail "the sites hold different checkpoint steps: a $(echo $(cat "$dir/a.ck")), b $(echo $(cat "$dir/b.ck")), c $(echo $(cat "$dir/c.ck"))"
newest=$(sort "$dir/a.ck" | tail -n 1 | sed 's/outer-0*\([0-9]*\).*/\1/')

"$geotrain" launch --resume "$dir/run" "${sets[@]}" >"$dir/resume.out" 2>&1 ||
  { cat "$dir/resume.out"; fail "launch --resume failed"; }
for s in a b c; do
  grep -q "resumed the run at step $newest " "$dir/run/logs/$s.log" ||
    fail "site $s did not resume at step $newest (the newest checkpoint step)"
  r=$(python3 -c "import json;print(json.load(open('$dir/run/$s/summary.json'))['status'])")
  [ "$r" = finished ] || fail "site $s: status $r"
done
[ "$(tail -n 1 "$dir/run/a/anchors.jsonl")" = "$(tail -n 1 "$dir/run/c/anchors.jsonl")" ] &&
  [ "$(tail -n 1 "$dir/run/a/anchors.jsonl")" = "$(tail -n 1 "$dir/run/b/anchors.jsonl")" ] ||
  fail "the sites' final anchors differ"
skipped=$(python3 -c "import json;print(json.load(open('$dir/run/c/summary.json'))['steps_skipped'])")
[ "$skipped" -gt 0 ] || fail "site c skipped no step: catch-up did not act (rounds cut before the kill: $cut)"
echo "ok: every site resumed at step $newest; c skipped $skipped steps in all"
