#!/usr/bin/env bash
# test_launch_etcd.sh GEOTRAIN CONFIG — the control plane is replicated: geotrain launch starts
# a 3-member etcd cluster and every site lists all three endpoints, so killing the member the
# sites talk to (m0, their first endpoint) mid-run, and starting it again later, changes nothing
# for training: the run finishes, both sites done, anchors agree (hash checks, no mismatch),
# every contribution aggregated, and no site so much as logs a membership problem. With one
# member (--etcd-members 1) the same kill leaves the sites without etcd, which shows the test
# exercises the control plane at all. Losing quorum (two of three) freezes membership, not
# training: the run goes on with the last agreed view and resumes membership when quorum returns.
# launch's etcd takes TLS with client certificates: an outsider without the run's gets nothing.
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
grep -q "membership.endpoints=https://127.0.0.1:[0-9]*,https://127.0.0.1:[0-9]*,https://" \
  "$dir/a/sites.yaml" || fail "sites were not given all three endpoints (over TLS)"
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
# TLS by default: launch's etcd answers only clients with a certificate of the run's CA. While a
# run trains, an outsider on this host asks it for every key of the run: over plain HTTP, over
# TLS without a certificate, and with a client certificate of another CA (geotrain certs); none
# gets an answer, while the same request with site a's certificate gets the run's keys. Then the
# same over --etcd-plain, where the plain request is answered: the check can tell.
outsider() { # RUN_DIR PLAIN: 0 when every request is as it must be
  local run=$1 plain=$2 ep t code
  for _ in $(seq 150); do
    grep -q "^# membership.endpoints=" "$run/sites.yaml" 2>/dev/null &&
      grep -q '"state": *"training"' "$run"/a/status.json 2>/dev/null && break
    sleep 0.2
  done
  ep=$(sed -n 's/^# membership.endpoints=\([^,]*\).*/\1/p' "$run/sites.yaml")
  t=$run/etcd/tls
  echo "outsider: launch's etcd at $ep"
  ask() { # curl options...: prints the HTTP code, the answer in $dir/ans
    rm -f "$dir/ans"
    curl -s -m 3 -o "$dir/ans" -w '%{http_code}' "$@" -X POST -d '{"key":"AA==","range_end":"AA=="}'
  }
  got_keys() { [ -f "$dir/ans" ] && grep -q '"kvs"' "$dir/ans"; }
  if [ "$plain" = 1 ]; then
    case $ep in http://*) ;; *) echo "FAIL: --etcd-plain gave $ep"; return 1 ;; esac
    code=$(ask "$ep/v3/kv/range")
    got_keys || { echo "FAIL: plain etcd did not answer a plain request ($code)"; return 1; }
    return 0
  fi
  case $ep in https://*) ;; *) echo "FAIL: launch's etcd is not TLS: $ep"; return 1 ;; esac
  [ "$(stat -c %a "$t/ca.key")" = 600 ] && [ "$(stat -c %a "$t/site-a.key")" = 600 ] ||
    { echo "FAIL: keys in $t are not 0600"; return 1; }
  code=$(ask "http${ep#https}/v3/kv/range")
  ! got_keys || { echo "FAIL: plain HTTP was answered ($code)"; return 1; }
  code=$(ask --cacert "$t/ca.crt" "$ep/v3/kv/range")
  ! got_keys || { echo "FAIL: TLS without a certificate was answered ($code)"; return 1; }
  code=$(ask -k "$ep/v3/kv/range")
  ! got_keys || { echo "FAIL: TLS without a certificate (-k) was answered ($code)"; return 1; }
  "$geotrain" certs --out "$dir/rogue" --client x >/dev/null 2>&1 || { echo "FAIL: certs"; return 1; }
  code=$(ask --cacert "$t/ca.crt" --cert "$dir/rogue/x.crt" --key "$dir/rogue/x.key" "$ep/v3/kv/range")
  ! got_keys || { echo "FAIL: a certificate of another CA was answered ($code)"; return 1; }
  code=$(ask --cacert "$t/ca.crt" --cert "$t/site-a.crt" --key "$t/site-a.key" "$ep/v3/kv/range")
  got_keys || { echo "FAIL: site a's certificate was refused ($code)"; return 1; }
  echo "outsider: plain HTTP, TLS without a certificate and another CA's certificate refused; site a's answered"
}
"$geotrain" launch "$config" --run-dir "$dir/t" --set run.rounds=60 $slow >"$dir/t.out" 2>&1 &
lp=$!
outsider "$dir/t" 0 || { kill $lp; fail "launch's etcd over TLS"; }
wait $lp || fail "launch over TLS exited $?"
check_summary "$dir/t" 60 || fail "run over TLS"
"$geotrain" launch "$config" --run-dir "$dir/p" --set run.rounds=60 $slow --etcd-plain >"$dir/p.out" 2>&1 &
lp=$!
outsider "$dir/p" 1 || { kill $lp; fail "launch --etcd-plain"; }
wait $lp || fail "launch --etcd-plain exited $?"

echo "ok: one member's death is invisible, a loss of quorum freezes membership only; with one member the sites lose etcd; launch's etcd answers only its run's certificates"
