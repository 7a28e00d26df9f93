#!/usr/bin/env bash
# test_launch_stuck.sh GEOTRAIN CONFIG — a site whose training thread blocks for good (the
# GT_TEST_HANG hook: site b before step 25) while its heartbeat thread keeps its lease alive is
# let go by the stuck-site watch (membership.stuck_after_s): b says why and exits 3, a and c see
# an ordinary site loss and finish every round with identical anchors, and launch ends. Without
# the watch the others wait on b as a straggler and launch never ends (the timeout fails it).
set -u
geotrain=$1 config=$2
dir=$(mktemp -d /tmp/gt-stuck-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; tail -n 20 "$dir/out" >&2; for f in "$dir"/run/logs/*.log; do echo "== $f" >&2; tail -n 15 "$f" >&2; done; exit 1; }
GT_TEST_HANG=b@25 timeout 150 "$geotrain" launch "$config" --run-dir "$dir/run" \
  --set membership.stuck_after_s=3 --set inner.emulated_step_ms=6 >"$dir/out" 2>&1
rc=$?
[ $rc -ne 124 ] || fail "launch did not end within 150 s"
grep -q "its training thread has not come back into geotrain" "$dir/run/logs/b.log" ||
  fail "site b's log does not say why it left"
rounds=$(grep -c '"round"' "$dir/run/a/anchors.jsonl")
for s in a c; do
  st=$(python3 -c "import json;print(json.load(open('$dir/run/$s/summary.json'))['status'])")
  [ "$st" = finished ] || fail "site $s: status $st"
done
[ "$rounds" -eq 6 ] || fail "site a applied $rounds rounds, not 6"
cmp -s "$dir/run/a/anchors.jsonl" "$dir/run/c/anchors.jsonl" || fail "a's and c's anchors differ"
grep -q "site b did not finish" "$dir/out" || fail "launch does not report b's end"
echo "ok: b let go after its training thread stuck; a and c finished 6 rounds"
