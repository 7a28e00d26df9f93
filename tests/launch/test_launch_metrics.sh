#!/usr/bin/env bash
# test_launch_metrics.sh GEOTRAIN CONFIG — every site serves Prometheus' text format at
# GET /metrics (metrics.listen: site i on port + i). A 2-site launch is scraped with curl while
# it trains: each scrape parses as the exposition format (a TYPE for every name, every sample
# `name{labels} value` with a number), the counters rise between scrapes, the per-peer bytes add
# up to the site's total, other paths are 404, and the last scrape is at most what summary.json
# reports at the end. Debian's prometheus server scrapes both sites every second meanwhile, and
# the series are read back through its HTTP API after the run. Without metrics.listen nothing
# listens (the scrape is refused).
set -u
geotrain=$1 config=$2
dir=$(mktemp -d /tmp/gt-metrics-XXXXXX)
launcher=
trap '[ -n "$launcher" ] && kill "$launcher" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; tail -n 20 "$dir/out" >&2; exit 1; }

# Three consecutive free ports on loopback: the two sites', then prometheus'.
port=$(python3 - <<'EOF'
import random, socket
for _ in range(200):
    p = random.randint(20000, 60000)
    try:
        for q in (p, p + 1, p + 2):
            s = socket.socket(); s.bind(("127.0.0.1", q)); s.close()
        print(p); break
    except OSError:
        pass
EOF
)
[ -n "$port" ] || fail "no free port triple"
command -v prometheus >/dev/null || fail "no prometheus (scripts/setup.sh installs Debian's)"
prom=127.0.0.1:$((port + 2))
cat >"$dir/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: geotrain
    static_configs:
      - targets: ['127.0.0.1:$port', '127.0.0.1:$((port + 1))']
EOF
prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/prom" \
  --web.listen-address=$prom >"$dir/prometheus.log" 2>&1 &
prompid=$!
trap '[ -n "$launcher" ] && kill "$launcher" 2>/dev/null; kill $prompid 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 1 100); do
  curl -s -m 1 "http://$prom/-/ready" | grep -qi ready && break
  sleep 0.1
done
curl -s -m 1 "http://$prom/-/ready" | grep -qi ready ||
  fail "prometheus did not start: $(tail -3 "$dir/prometheus.log")"

"$geotrain" launch "$config" --run-dir "$dir/run" --set metrics.listen=127.0.0.1:$port \
  --set run.rounds=30 --set inner.emulated_step_ms=40 >"$dir/out" 2>&1 &
launcher=$!
scrape() { # scrape SITE_INDEX NAME: into $dir/NAME, 0 on HTTP 200
  curl -s -m 5 -o "$dir/$2" -w '%{http_code}' "http://127.0.0.1:$((port + $1))/metrics" | grep -q 200
}
# The first scrape once both sites train (round 2 or later).
ok=0
for _ in $(seq 1 600); do
  kill -0 "$launcher" 2>/dev/null || fail "launch ended before it was scraped"
  if scrape 0 a1 && scrape 1 b1 && grep -q '^geotrain_state{.*state="training"} 1' "$dir/a1" &&
     awk '/^geotrain_rounds_applied_total/ {exit !($2 >= 2)}' "$dir/b1"; then ok=1; break; fi
  sleep 0.2
done
[ $ok = 1 ] || fail "no scrape of both sites while training"
sleep 3
scrape 0 a2 || fail "second scrape of a"
scrape 1 b2 || fail "second scrape of b"
code=$(curl -s -m 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/other")
[ "$code" = 404 ] || fail "GET /other gave HTTP $code, not 404"
wait "$launcher"
rc=$?
launcher=
[ $rc -eq 0 ] || fail "launch exited $rc"

python3 - "$dir" <<'EOF' || fail "the scrapes do not hold what they should"
import json, math, re, sys
d = sys.argv[1]
line = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{((?:[a-zA-Z_][a-zA-Z0-9_]*="[^"\\]*",?)*)\} (\S+)$')
def parse(path):
    types, vals = {}, {}
    for ln in open(path).read().splitlines():
        if ln.startswith('# TYPE '):
            _, _, name, kind = ln.split(' ')
            assert kind in ('counter', 'gauge'), ln
            assert name not in types, 'two TYPE lines for ' + name
            types[name] = kind
            continue
        if ln.startswith('# HELP ') or not ln:
            continue
        m = line.match(ln)
        assert m, 'not a sample line: %r' % ln
        name, labels, v = m.groups()
        assert name in types, 'no TYPE before ' + name
        labels = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"', labels))
        value = float(v)  # NaN, +Inf parse too
        key = (name, tuple(sorted((k, x) for k, x in labels.items() if k not in ('site', 'rank'))))
        assert key not in vals, 'sample given twice: ' + ln
        vals[key] = value
        assert labels.get('rank') == '0', ln
    return types, vals
def v(vals, name, **lab):
    return vals[(name, tuple(sorted(lab.items())))]
bad = []
for site, peer in (('a', 'b'), ('b', 'a')):
    t1, s1 = parse('%s/%s1' % (d, site))
    t2, s2 = parse('%s/%s2' % (d, site))
    summ = json.load(open('%s/run/%s/summary.json' % (d, site)))
    assert len(t1) >= 40, '%s: only %d metrics' % (site, len(t1))
    for name in ('geotrain_step', 'geotrain_rounds_applied_total', 'geotrain_tokens_total',
                 'geotrain_wan_bytes_sent_total', 'geotrain_wan_bytes_received_total',
                 'geotrain_compute_seconds_total', 'geotrain_hash_checks_total',
                 'geotrain_scrapes_total', 'geotrain_sync_dp_bytes_equivalent_total'):
        a, b = v(s1, name), v(s2, name)
        if not b > a:
            bad.append('%s: %s did not rise (%g then %g)' % (site, name, a, b))
    ontime = v(s2, 'geotrain_contributions_total', outcome='on_time')
    if not ontime > v(s1, 'geotrain_contributions_total', outcome='on_time'):
        bad.append('%s: on-time contributions did not rise' % site)
    for name in t2:  # a counter never falls
        if t2[name] != 'counter': continue
        for key in s2:
            if key[0] == name and key in s1 and s2[key] < s1[key]:
                bad.append('%s: counter %s fell' % (site, key))
    # per peer: one peer, so its bytes are the site's
    for w in ('sent', 'received'):
        tot = v(s2, 'geotrain_wan_bytes_%s_total' % w)
        per = v(s2, 'geotrain_wan_peer_bytes_%s_total' % w, peer=peer)
        if per != tot:
            bad.append('%s: bytes %s to/from %s %g != total %g' % (site, w, peer, per, tot))
    if v(s2, 'geotrain_live_sites') != 2: bad.append('%s: live sites != 2' % site)
    if v(s2, 'geotrain_lease_ok') != 1: bad.append('%s: lease not ok' % site)
    if v(s2, 'geotrain_total_steps') != 300: bad.append('%s: total steps' % site)
    if not 0 < v(s2, 'geotrain_loss') < 10: bad.append('%s: loss %g' % (site, v(s2, 'geotrain_loss')))
    if v(s2, 'geotrain_status_age_seconds') > 5: bad.append('%s: stale status' % site)
    # a sum of training states is 1
    states = sum(val for (n, lab), val in s2.items() if n == 'geotrain_state')
    if states != 1: bad.append('%s: %g states set' % (site, states))
    # the summary at the end holds at least what the scrape saw
    for name, key in (('geotrain_wan_bytes_sent_total', 'wan_bytes_sent'),
                      ('geotrain_rounds_applied_total', 'rounds_applied'),
                      ('geotrain_tokens_total', 'tokens'),
                      ('geotrain_hash_checks_total', 'hash_checks')):
        if v(s2, name) > summ[key]:
            bad.append('%s: scrape %s %g > summary %s %g' % (site, name, v(s2, name), key, summ[key]))
    if v(s2, 'geotrain_rounds_applied_total') >= summ['rounds_applied']:
        bad.append('%s: the second scrape was not during the run' % site)
    print('%s: step %d, %d rounds applied, %d WAN bytes sent, %d on time at the second scrape'
          % (site, v(s2, 'geotrain_step'), v(s2, 'geotrain_rounds_applied_total'),
             v(s2, 'geotrain_wan_bytes_sent_total'), ontime))
for b in bad: print('  ' + b)
sys.exit(1 if bad else 0)
EOF
# What prometheus scraped, read back through its HTTP API (range functions: the targets are gone
# now, and their series ended with staleness markers).
q() { curl -s -m 5 --data-urlencode "query=$1" "http://$prom/api/v1/query"; }
q 'max_over_time(geotrain_rounds_applied_total[10m])' >"$dir/q_rounds.json"
q 'count_over_time(geotrain_step[10m])' >"$dir/q_count.json"
q 'max_over_time(geotrain_wan_peer_bytes_sent_total[10m])' >"$dir/q_peer.json"
q 'max_over_time(up{job="geotrain"}[10m])' >"$dir/q_up.json"
python3 - "$dir" <<'EOF' || fail "prometheus does not hold the series it should"
import json, sys
d = sys.argv[1]
def res(name):
    r = json.load(open('%s/q_%s.json' % (d, name)))
    assert r['status'] == 'success', r
    return {(m['metric'].get('site') or m['metric'].get('instance'), m['metric'].get('peer')):
            float(m['value'][1]) for m in r['data']['result']}
bad = []
rounds, count, peer, up = res('rounds'), res('count'), res('peer'), res('up')
for s, p in (('a', 'b'), ('b', 'a')):
    if rounds.get((s, None), 0) < 10:
        bad.append('site %s: max rounds applied %s' % (s, rounds.get((s, None))))
    if count.get((s, None), 0) < 3:
        bad.append('site %s: %s samples of geotrain_step' % (s, count.get((s, None))))
    if peer.get((s, p), 0) <= 0:
        bad.append('site %s: no bytes to %s' % (s, p))
if len(up) != 2 or min(up.values()) != 1:
    bad.append('up: %s' % up)
print('prometheus: rounds applied %s, samples of geotrain_step %s' % (rounds, count))
for b in bad: print('  ' + b)
sys.exit(1 if bad else 0)
EOF
# Without the key nobody serves metrics. (These sites talk over IPv6, [::1].)
"$geotrain" launch "$config" --run-dir "$dir/run2" --set run.rounds=2 \
  --set 'sites.a.address=[::1]:0' --set 'sites.b.address=[::1]:0' >"$dir/out2" 2>&1 &
launcher=$!
for _ in $(seq 1 300); do
  [ -f "$dir/run2/a/status.json" ] && break
  sleep 0.1
done
code=$(curl -s -m 2 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/metrics")
wait "$launcher" || fail "the launch without metrics failed"
launcher=
[ "$code" = 000 ] || fail "without metrics.listen something answered on $port (HTTP $code)"
grep -q "Prometheus metrics" "$dir/run2/logs/a.log" && fail "a served metrics without the key"
grep -q 'listening on \[::1\]:' "$dir/run2/logs/b.log" || fail "b did not listen on [::1]"
[ "$(grep -c round "$dir/run2/a/anchors.jsonl")" = 2 ] || fail "the IPv6 run did not apply 2 rounds"
echo "ok: both sites served /metrics; values parse and rise, bytes per peer add up"
