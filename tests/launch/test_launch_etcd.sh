#!/usr/bin/env bash
# test_launch_etcd.sh GEOTRAIN CONFIG — the control plane is replicated: geotrain launch starts
# a 3-member etcd cluster and every site lists all three endpoints, so killing the member the
# sites talk to (m0, their first endpoint) mid-run, and starting it again later, changes nothing
# for training: the run finishes, both sites done, anchors agree (hash checks, no mismatch),
# every contribution aggregated, and no site so much as logs a membership problem. With one
# member (--etcd-members 1) the same kill leaves the sites without etcd, which shows the test
# exercises the control plane at all. Losing quorum (two of three) freezes membership, not
# training: the run goes on with the last agreed view and resumes membership when quorum returns.
set -u
geotrain=$1 config=$2
dir=$(mktemp -d /tmp/gt-etcd-XXXXXX)
trap 'pkill -KILL -f "$dir" 2>/dev/null; rm -rf "$dir"' EXIT
fail() { # the message, then what the sites of the runs so far logged at warning level or above
  echo "FAIL: $*" >&2
  grep -H "geotrain \(warn\|error\)" "$dir"/*/logs/*.log 2>/dev/null | tail -40 >&2
  exit 1
}
check_summary() { # RUN_DIR ROUNDS: every site done, anchors agree, contributions on time
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, sys
run, rounds = sys.argv[1], int(sys.argv[2])
s = json.load(open(run + "/summary.json"))
bad = []
for name, site in s["sites"].items():
    if site.get("rounds_applied") != rounds or site.get("status") != "finished":
        bad.append(f"{name}: {site.get('status')} after {site.get('rounds_applied')} rounds")
if s["hash_checks"] <= 0: bad.append("no hash checks")
if s["hash_mismatches"] != 0: bad.append(f"{s['hash_mismatches']} hash mismatches")
c = s["contributions"]
# Late ones are aggregated too (a busy machine makes a few); none may be lost or refused.
for k in ("dropped", "rejected", "open_at_end"):
    if c[k] != 0: bad.append(f"{c[k]} contributions {k}")
# The WAN thread (probes, state requests, deadlines) never waits on etcd: the view is read in a
# thread of its own. Read in the WAN thread, a request to a member without a leader held it
# for the request timeout (2 s) and peers looked unreachable.
for name, site in s["sites"].items():
    gap = site.get("wan_thread_gap_max_s")
    if gap is None or gap >= 1.5:
        bad.append(f"{name}: its WAN thread was held up {gap} s")
sent = sum(site["deltas_sent"] for site in s["sites"].values())
if c["on_time"] + c["late"] != sent or sent <= 0:
    bad.append(f"{sent} deltas sent, {c['on_time']} on time + {c['late']} late aggregated")
print("summary:", c, "hash checks", s["hash_checks"], "mismatches", s["hash_mismatches"],
      "WAN thread held up at most", {n: site.get("wan_thread_gap_max_s") for n, site in s["sites"].items()})
if bad: print("FAIL:", "; ".join(bad)); sys.exit(1)
PY
}

rounds=30
# ~0.2 s a round (steps of 5 ms, the rest slept, on any machine): the events land mid-run, and a
# lost lease shows. The two runs with three members use the default lease (5 s; the config has
# 3 s): etcd's leader election after the kill must stay within half of it (a site warns after
# half a lease without the view), and under a loaded CI (6 tests on 2 cores) 1.5 s was tight.
slow="--set inner.steps=40 --set inner.emulated_step_ms=5"
lease="--set membership.lease_ttl_s=5"
"$geotrain" launch "$config" --run-dir "$dir/a" --set run.rounds=$rounds $slow $lease \
  --kill-etcd 0@2 --restart-etcd 0@6 >"$dir/a.out" 2>&1
rc=$?
cat "$dir/a.out" | tail -8
[ $rc -eq 0 ] || fail "launch exited $rc with a member killed"
grep -q -- "-- killed etcd member 0 at round 2" "$dir/a.out" || fail "member 0 was not killed"
grep -q -- "-- restarted etcd member 0 at round 6" "$dir/a.out" || fail "member 0 not restarted"
[ "$(ls -d "$dir"/a/etcd/m* | wc -l)" -eq 3 ] || fail "expected 3 etcd members"
grep -q "membership.endpoints=http://127.0.0.1:[0-9]*,http://127.0.0.1:[0-9]*,http://" \
  "$dir/a/sites.yaml" || fail "sites were not given all three endpoints"
check_summary "$dir/a" $rounds || fail "run with a killed member"
! grep "membership lease\|cannot read the view\|no etcd endpoint" "$dir"/a/logs/*.log ||
  fail "a site noticed the kill"

# Quorum lost: two of three members killed at round 2, both back at round 22. etcd can then
# neither renew nor expire a lease nor change the view, so the sites train on with the last
# agreed view (they log that membership is frozen), and pick up again when quorum returns.
"$geotrain" launch "$config" --run-dir "$dir/q" --set run.rounds=40 --set inner.steps=80 \
  --set inner.emulated_step_ms=5 $lease \
  --kill-etcd 0@2 --kill-etcd 1@2 --restart-etcd 0@22 --restart-etcd 1@22 >"$dir/q.out" 2>&1
rc=$?
tail -4 "$dir/q.out"
[ $rc -eq 0 ] || fail "launch exited $rc when etcd lost quorum"
grep -q -- "-- restarted etcd member 1 at round 22" "$dir/q.out" || fail "quorum never returned"
check_summary "$dir/q" 40 || fail "run through a loss of quorum"
for site in a b; do
  grep -q "membership is frozen" "$dir/q/logs/$site.log" || fail "$site did not notice the freeze"
  grep -q "etcd answers again" "$dir/q/logs/$site.log" || fail "$site did not see etcd return"
done
! grep "membership lease" "$dir"/q/logs/*.log || fail "a site lost its lease without quorum"

# The control experiment: one member, killed at round 2: the sites lose their control plane
# (they log that they cannot read the view), so the check above can tell.
"$geotrain" launch "$config" --run-dir "$dir/b" --set run.rounds=$rounds $slow --etcd-members 1 \
  --kill-etcd 0@2 >"$dir/b.out" 2>&1
grep -q "cannot read the view\|membership lease" "$dir"/b/logs/*.log ||
  fail "with its only etcd member killed, no site noticed: the test does not reach etcd"
echo "ok: one member's death is invisible, a loss of quorum freezes membership only; with one member the sites lose etcd"
