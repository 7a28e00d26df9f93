#!/usr/bin/env bash
# test_launch_retire.sh GEOTRAIN CONFIG — `geotrain sites remove` retires a site for good from a
# running run (docs/diloco.md#retiring-a-site). Against an etcd of the test's own, three sites
# train 14 rounds (steps of 50 ms); once a has applied 3, `geotrain sites remove CONFIG c`
# marks c retired and revokes its lease: c leaves (exit 4, summary status "retired", its log says why), launch does
# not start it again and exits 0, a and b finish every round with the same anchors, and c's
# anchors are theirs for every round it applied. A second launch under the same run id: c is
# refused after it registers (exit 4), naming the retirement. `geotrain sites list` shows c
# registered before, retired after.
set -u
geotrain=$1 config=$2
dir=$(mktemp -d /tmp/gt-retire-XXXXXX)
etcd_pid= launch_pid=
cleanup() {
  [ -n "$launch_pid" ] && kill "$launch_pid" 2>/dev/null && wait "$launch_pid" 2>/dev/null
  [ -n "$etcd_pid" ] && kill "$etcd_pid" 2>/dev/null && wait "$etcd_pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; for f in "$dir"/*/logs/*.log "$dir"/*.out; do echo "== $f" >&2; tail -n 15 "$f" >&2; done; exit 1; }
. "$(dirname "$0")/etcd_one.sh"
start_etcd retire "$dir" || fail "etcd did not come up"
sets=(--set membership.endpoints="http://127.0.0.1:$cport" --set membership.plain_http=true)
# the run id is the run directory's name: "run"
timeout 240 "$geotrain" launch "$config" --run-dir "$dir/run" --set run.rounds=14 \
  --set inner.emulated_step_ms=50 "${sets[@]}" \
  >"$dir/launch.out" 2>&1 &
launch_pid=$!
round() { python3 -c "import json;print(json.load(open('$dir/run/$1/status.json')).get('round',0))" 2>/dev/null || echo 0; }
for _ in $(seq 600); do [ "$(round a)" -ge 3 ] && break; sleep 0.2; done
[ "$(round a)" -ge 3 ] || fail "site a did not reach round 3"
"$geotrain" sites list "$config" --run-id run "${sets[@]}" >"$dir/list1.out" 2>&1 ||
  fail "sites list failed: $(cat "$dir/list1.out")"
grep -Eq "^  c +registered +127\.0\.0\.1:" "$dir/list1.out" || fail "sites list before: $(cat "$dir/list1.out")"
"$geotrain" sites remove "$config" c --run-id run "${sets[@]}" >"$dir/remove.out" 2>&1 ||
  fail "sites remove failed: $(cat "$dir/remove.out")"
grep -q "c retired from run 'run': it was registered" "$dir/remove.out" ||
  fail "sites remove did not find c registered: $(cat "$dir/remove.out")"
"$geotrain" sites list "$config" --run-id run "${sets[@]}" >"$dir/list2.out" 2>&1 ||
  fail "sites list failed: $(cat "$dir/list2.out")"
grep -Eq "^  c +retired" "$dir/list2.out" || fail "sites list after: $(cat "$dir/list2.out")"
grep -Eq "^  a +registered" "$dir/list2.out" || fail "sites list after: $(cat "$dir/list2.out")"
wait "$launch_pid"
rc=$?
launch_pid=
[ $rc -eq 0 ] || fail "launch exited $rc"
grep -q -- "-- c was retired from the run" "$dir/launch.out" || fail "launch does not say c was retired"
grep -q "site c: retired from the run for good" "$dir/run/logs/c.log" || fail "c's log does not say why it left"
status() { python3 -c "import json;print(json.load(open('$dir/run/$1/summary.json'))['status'])" 2>/dev/null; }
[ "$(status c)" = retired ] || fail "c's summary status: $(status c)"
for s in a b; do [ "$(status $s)" = finished ] || fail "site $s: $(status $s)"; done
python3 - "$dir/run" <<'PY' || fail "anchors differ"
import json, sys
run = sys.argv[1]
def anchors(s):
    return {j["round"]: j["anchor_hash"] for j in map(json.loads, open(f"{run}/{s}/anchors.jsonl"))}
a, b, c = anchors("a"), anchors("b"), anchors("c")
assert len(a) == 14 and a == b, (len(a), len(b))
assert 3 <= len(c) < 14 and all(a[r] == h for r, h in c.items()), c
print(f"ok: a and b applied 14 rounds alike; c applied {len(c)}, each as they did")
PY
# started again under the same run id: refused once it has registered
timeout 120 "$geotrain" launch "$config" --run-dir "$dir/again/run" --set run.rounds=2 "${sets[@]}" \
  >"$dir/again.out" 2>&1
grep -q "site c was retired from run 'run'" "$dir/again/run/logs/c.log" ||
  fail "c started again was not refused as retired"
grep -q -- "-- c was retired from the run" "$dir/again.out" || fail "launch did not see c's exit 4"
echo "ok: c retired mid-run and refused when started again"
