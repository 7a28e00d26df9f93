#!/usr/bin/env bash
# test_launch_add.sh GEOTRAIN CONFIG — `geotrain sites add` adds a site that was never in the
# run's sites.yaml while the run goes on, and `sites remove` retires one of the first sites
# (docs/diloco.md#adding-a-site). Against an etcd of the test's own, launch trains CONFIG's three
# sites a, b, c for 16 rounds (steps of 50 ms) with outer.site_slots = 4 and keys of the test's.
# Before anything is added, a description of a site "evil" written straight into etcd, unsigned
# (what anyone who can write to etcd could do), is refused by every site and by `sites add`.
# Once a has applied 3 rounds, `sites add FULL d` (FULL: CONFIG with d appended) writes d into
# the run's etcd, signed with the operator's admin key (security.admin_key), and returns once a,
# b and c have pinned d's key; d, started by hand with
# `geotrain run --config FULL --site d`, joins and trains the rest. Once d has applied 3 rounds, b
# is retired. Asserts: launch and d exit 0 (b: exit 4, retired); a, c and d finish with the same
# anchor for every round each applied (b's too, up to its retirement); d applied rounds, owned
# chunks (it aggregated contributions) and every other finisher took its contributions; `sites
# list` shows d added and registered. A second `sites add` of d is refused.
set -u
geotrain=$1 config=$2
dir=$(mktemp -d /tmp/gt-add-XXXXXX)
etcd_pid= launch_pid= d_pid=
cleanup() {
  for p in $launch_pid $d_pid; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  [ -n "$etcd_pid" ] && kill "$etcd_pid" 2>/dev/null && wait "$etcd_pid" 2>/dev/null
  [ -n "${KEEP:-}" ] || rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$dir"/run/logs/*.log "$dir"/*.out; do echo "== $f" >&2; tail -n 20 "$f" >&2; done
  exit 1
}
. "$(dirname "$0")/etcd_one.sh"
start_etcd add "$dir" || fail "etcd did not come up"
"$geotrain" keygen --admin --out "$dir/admin" >"$dir/admin.out" || fail "keygen --admin"
sets=(--set membership.endpoints="http://127.0.0.1:$cport" --set membership.plain_http=true
  --set outer.site_slots=4 --set run.rounds=16 --set inner.emulated_step_ms=50
  --set "security.admin_key=$(sed 's/^admin_key: //' "$dir/admin.out")")
for s in a b c d; do
  "$geotrain" keygen --site $s --out "$dir/keys" >/dev/null || fail "keygen $s"
  sets+=(--set "sites.$s.public_key=$(sed -n 2p "$dir/keys/$s.pub")"
    --set "sites.$s.secret_key=$dir/keys/$s.key")
done
first=("${sets[@]:0:12}") # without d's key: CONFIG has no site d
for s in a b c; do
  first+=(--set "sites.$s.public_key=$(sed -n 2p "$dir/keys/$s.pub")"
    --set "sites.$s.secret_key=$dir/keys/$s.key")
done
cp "$config" "$dir/full.yaml"
printf '  - name: d\n    address: 127.0.0.1:0\n' >>"$dir/full.yaml"
# the run id is the run directory's name: "run"
timeout 300 "$geotrain" launch "$config" --run-dir "$dir/run" "${first[@]}" >"$dir/launch.out" 2>&1 &
launch_pid=$!
round() { python3 -c "import json;print(json.load(open('$dir/run/$1/status.json')).get('round',0))" 2>/dev/null || echo 0; }
for _ in $(seq 600); do [ "$(round a)" -ge 3 ] && break; sleep 0.2; done
[ "$(round a)" -ge 3 ] || fail "site a did not reach round 3"
# an unsigned description written into etcd by someone who can write there
b64() { printf '%s' "$1" | base64 -w0; }
evil='{"run":"run","name":"evil","slot":3,"ranks":1,"public_key":"'"$(sed -n 2p "$dir/keys/d.pub")"'"}'
curl -sf -d '{"key":"'"$(b64 /geotrain/run/added/evil)"'","value":"'"$(b64 "{\"desc\":$(python3 -c 'import json,sys;print(json.dumps(sys.argv[1]))' "$evil"),\"sig\":\"\"}")"'"}' \
  "http://127.0.0.1:$cport/v3/kv/put" >/dev/null || fail "cannot write the forged description"
for _ in $(seq 50); do grep -q "refuses an added site's description in etcd: it is not signed" "$dir/run/logs/a.log" && break; sleep 0.2; done
grep -q "refuses an added site's description in etcd: it is not signed by security.admin_key" \
  "$dir/run/logs/a.log" || fail "a did not refuse the unsigned description"
"$geotrain" sites add "$dir/full.yaml" d --run-id run --admin-key "$dir/keys/d.key" "${sets[@]}" \
  >"$dir/add-wrongkey.out" 2>&1 && fail "sites add took a site key for the admin key"
grep -q "cannot sign d's description" "$dir/add-wrongkey.out" || fail "wrong admin key: $(cat "$dir/add-wrongkey.out")"
"$geotrain" sites add "$dir/full.yaml" d --run-id run --admin-key "$dir/admin/admin.key" "${sets[@]}" >"$dir/add.out" 2>&1 ||
  fail "sites add failed: $(cat "$dir/add.out")"
grep -q "every registered site has pinned it" "$dir/add.out" || fail "sites add: $(cat "$dir/add.out")"
timeout 300 "$geotrain" run --config "$dir/full.yaml" --site d --run-dir "$dir/run" --run-id run \
  "${sets[@]}" >"$dir/d.out" 2>&1 &
d_pid=$!
if "$geotrain" sites add "$dir/full.yaml" d --run-id run --admin-key "$dir/admin/admin.key" "${sets[@]}" >"$dir/add2.out" 2>&1; then
  fail "a second add of d was taken"
fi
grep -q "d was added to run 'run' already" "$dir/add2.out" || fail "second add: $(cat "$dir/add2.out")"
for _ in $(seq 900); do [ "$(round d)" -ge 3 ] && break; sleep 0.2; done
[ "$(round d)" -ge 3 ] || fail "site d did not reach round 3"
"$geotrain" sites list "$config" --run-id run "${first[@]}" >"$dir/list.out" 2>&1 ||
  fail "sites list failed: $(cat "$dir/list.out")"
grep -Eq "^  d +registered +127\.0\.0\.1:.*added mid-run, slot 3" "$dir/list.out" ||
  fail "sites list: $(cat "$dir/list.out")"
# with the file that names d: d once, as added; the run's own three counted as configured
"$geotrain" sites list "$dir/full.yaml" --run-id run "${sets[@]}" >"$dir/list-full.out" 2>&1 ||
  fail "sites list (full) failed: $(cat "$dir/list-full.out")"
[ "$(grep -c "^  d " "$dir/list-full.out")" = 1 ] && grep -q "3 of 3 configured sites registered" "$dir/list-full.out" ||
  fail "sites list (full): $(cat "$dir/list-full.out")"
"$geotrain" sites remove "$config" b --run-id run "${first[@]}" >"$dir/remove.out" 2>&1 ||
  fail "sites remove failed: $(cat "$dir/remove.out")"
wait "$launch_pid"
rc=$?
launch_pid=
[ $rc -eq 0 ] || fail "launch exited $rc"
wait "$d_pid"
rc=$?
d_pid=
[ $rc -eq 0 ] || fail "site d exited $rc"
grep -q "site a: site d was added to the run (slot 3" "$dir/run/logs/a.log" || fail "a's log does not say d was added"
grep -q "site evil was added" "$dir/run/logs/"*.log "$dir/d.out" && fail "a site took the unsigned description"
python3 - "$dir/run" <<'PY' || fail "the run's checks"
import json, sys
run = sys.argv[1]
def anchors(s):
    return {j["round"]: j["anchor_hash"] for j in map(json.loads, open(f"{run}/{s}/anchors.jsonl"))}
def summary(s):
    return json.load(open(f"{run}/{s}/summary.json"))
an = {s: anchors(s) for s in "abcd"}
st = {s: summary(s)["status"] for s in "abcd"}
assert st == {"a": "finished", "b": "retired", "c": "finished", "d": "finished"}, st
assert len(an["a"]) == 16 and an["a"] == an["c"], (len(an["a"]), len(an["c"]))
for s in "bd":
    assert an[s] and all(an["a"][r] == h for r, h in an[s].items()), (s, an[s])
assert 4 <= len(an["d"]) < 16, an["d"]
for s in "ac":
    took = summary(s)["ledger"]["d"]["took"]
    assert took > 0, (s, summary(s)["ledger"])
owned = summary("d")["contributions"]["on_time"] + summary("d")["contributions"]["late"]
assert owned > 0, summary("d")["contributions"]
print(f"ok: a and c applied 16 rounds alike; d joined and applied {len(an['d'])} "
      f"(rounds {min(an['d'])}-{max(an['d'])}), aggregated {owned} contributions; "
      f"b applied {len(an['b'])} before it was retired, each as a did")
PY
echo "ok: d added mid-run and b retired"
