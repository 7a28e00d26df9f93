#!/usr/bin/env bash
# test_multihost.sh GEOTRAIN TRANSPORT — three sites on separate kernel network stacks, each
# started on its own with `geotrain run` as on separate hosts (no launcher), against one etcd
# member in a namespace of its own.
#
#   ns br (router): bridge br0 10.77.0.1/24; 10.77.1.1/24 toward site a; nftables NAT:
#                   10.77.9.1 (owned by nobody) DNAT to a's 10.77.1.2, a's traffic SNAT to it
#   ns e  (etcd)    10.77.0.10     ns b  10.77.0.12    ns c  10.77.0.13
#   ns a            10.77.1.2, binds 0.0.0.0:7000 and advertises 10.77.9.1:7000 (a 1:1 NAT)
#   ns x (outsider) 10.77.0.66: no key; sends garbage to every site port and a connection flood
#   ns d  10.77.0.14: a fourth site, never in the run's sites.yaml, added mid-run
#
# Each site's link is shaped by `tc tbf` both ways, at a rate of its own (a 200, b 100, c 50
# Mbit/s); latency comes from geotrain's emulator. The run: encrypted, the transport given; site b
# killed (SIGKILL) and started again (it joins), site c's link down (`ip link set down`) for 2 s
# and up again, the outsider's attack while they train; site d, in no file the run started from,
# added mid-run with `geotrain sites add` (outer.site_slots: 4) from an operator's host and
# started in its own namespace (it joins), then b retired with `geotrain sites remove`. Asserts: every site finishes (b: retired), the anchors
# of every round they share are bit-identical (void ones left out), no frame rejected and no hash
# mismatch, the outsider's connections counted as refused or timed out, a's metrics scraped
# through the NAT, and the WAN bytes each of a and c reported within a few percent of what
# `tc -s` counted on its link less its etcd traffic (which nftables counts apart). Prints the
# figures. Skips (77) where network namespaces, tc or nftables cannot be used (not root).
# Site a's firewall admits new connections on its control, metrics and wan.data_port_min..max
# ports only. Every namespace is removed at the end, also when a check fails; no address
# leaves them.
set -u
geotrain=$1 tp=$2
tag=gt$$
dir=$(mktemp -d /tmp/gt-multihost-XXXXXX)
pids=()
NS_BR=$tag-br NS_E=$tag-e NS_A=$tag-a NS_B=$tag-b NS_C=$tag-c NS_X=$tag-x NS_D=$tag-d
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  wait 2>/dev/null
  # what runs inside a namespace (etcd, a site) may not be a child of ours: `ns NAME CMD &`
  # forks a subshell whose pid is the one we hold
  for n in $NS_A $NS_B $NS_C $NS_D $NS_E $NS_X $NS_BR; do
    ip netns pids "$n" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
    ip netns del "$n" 2>/dev/null
  done
  [ -n "${KEEP:-}" ] || rm -rf "$dir"
}
trap cleanup EXIT
skip() { echo "SKIP: $*"; exit 77; }
fail() {
  echo "FAIL: $*" >&2
  for f in "$dir"/*.log; do echo "== $f" >&2; tail -n 12 "$f" >&2; done
  exit 1
}
[ "$(id -u)" = 0 ] || skip "needs root for network namespaces"
for t in ip tc nft etcd curl python3; do command -v $t >/dev/null || skip "no $t"; done
ip netns add $NS_BR 2>/dev/null || skip "cannot create network namespaces"
ns() { ip netns exec "$@"; }
# ---- the network ----
ip -n $NS_BR link set lo up
ip -n $NS_BR link add br0 type bridge
ip -n $NS_BR addr add 10.77.0.1/24 dev br0
ip -n $NS_BR link set br0 up
ns $NS_BR sysctl -qw net.ipv4.ip_forward=1
# host NS NAME ADDR/NN GATEWAY RATE [bridge]: a namespace with eth0, its peer vNAME in br.
host() {
  local n=$1 name=$2 addr=$3 gw=$4 rate=$5 onbr=${6:-}
  ip netns add $n
  ip -n $n link set lo up
  ip -n $n link add eth0 type veth peer name v$name netns $NS_BR || return 1
  ip -n $n addr add $addr dev eth0
  ip -n $n link set eth0 up
  ip -n $n route add default via $gw
  if [ -n "$onbr" ]; then
    ip -n $NS_BR link set v$name master br0
  fi
  ip -n $NS_BR link set v$name up
  if [ "$rate" != 0 ]; then # both directions: the site's egress, and br's toward it
    tc -n $n qdisc add dev eth0 root tbf rate $rate burst 32kb latency 100ms || return 1
    tc -n $NS_BR qdisc add dev v$name root tbf rate $rate burst 32kb latency 100ms || return 1
  fi
}
host $NS_E e 10.77.0.10/24 10.77.0.1 0 br || skip "cannot make veth pairs"
host $NS_B b 10.77.0.12/24 10.77.0.1 100mbit br || skip "no tc tbf"
host $NS_C c 10.77.0.13/24 10.77.0.1 50mbit br
host $NS_X x 10.77.0.66/24 10.77.0.1 0 br
host $NS_D d 10.77.0.14/24 10.77.0.1 80mbit br
host $NS_A a 10.77.1.2/24 10.77.1.1 200mbit
ip -n $NS_BR addr add 10.77.1.1/24 dev va
ns $NS_BR nft -f - <<'EOF' || skip "no nftables NAT"
table ip gtnat {
  chain pre { type nat hook prerouting priority dstnat; ip daddr 10.77.9.1 dnat to 10.77.1.2; }
  chain post { type nat hook postrouting priority srcnat; ip saddr 10.77.1.2 snat to 10.77.9.1; }
}
EOF
# Site a's firewall lets in new connections on its control port, its metrics port and
# wan.data_port_min..max only (libfabric's passive endpoints must take their ports there).
ns $NS_A nft -f - <<'EOF' || skip "no nftables filter"
table inet fw {
  chain in {
    type filter hook input priority 0; policy accept;
    ct state established,related accept
    iif lo accept
    tcp dport { 7000, 9400, 7100-7131 } accept
    tcp flags syn counter drop
  }
}
EOF
# What each site sends to etcd and serves as metrics, counted apart from the WAN.
for n in $NS_A $NS_C; do
  ns $n nft -f - <<'EOF' || skip "no nftables"
table inet acct {
  counter etcd {}
  counter scrape {}
  chain out { type filter hook output priority 0; ip daddr 10.77.0.10 counter name etcd; tcp sport 9400 counter name scrape; }
}
EOF
done

# ---- certificates: a throwaway CA, etcd's (server and peer), one client certificate a site ----
t=$dir/tls
mkdir -p "$t"
cert() { # cert NAME CN [SAN]: NAME.pem and NAME.key signed by the CA
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$t/$1.key" \
    -out "$t/$1.csr" -subj "/CN=$2" 2>/dev/null || return 1
  openssl x509 -req -in "$t/$1.csr" -CA "$t/ca.pem" -CAkey "$t/ca.key" -CAcreateserial \
    -days 1 -out "$t/$1.pem" ${3:+-extfile <(printf 'subjectAltName=%s\n' "$3")} 2>/dev/null
  chmod 600 "$t/$1.key"
}
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$t/ca.key" \
  -out "$t/ca.pem" -days 1 -subj /CN=geotrain-test-ca 2>/dev/null || skip "openssl cannot make a CA"
cert etcd etcd IP:10.77.0.10 || fail "cannot make etcd's certificate"
for s in a b c d x op; do cert $s site-$s || fail "cannot make $s's certificate"; done
tlsc() { echo --cacert "$t/ca.pem" --cert "$t/$1.pem" --key "$t/$1.key"; }

# ---- etcd: TLS for clients and peers, client certificates required ----
ns $NS_E etcd --name e --data-dir "$dir/etcd" --listen-client-urls https://10.77.0.10:2379 \
  --advertise-client-urls https://10.77.0.10:2379 --listen-peer-urls https://10.77.0.10:2380 \
  --initial-advertise-peer-urls https://10.77.0.10:2380 \
  --initial-cluster e=https://10.77.0.10:2380 \
  --cert-file "$t/etcd.pem" --key-file "$t/etcd.key" --trusted-ca-file "$t/ca.pem" \
  --client-cert-auth --peer-cert-file "$t/etcd.pem" --peer-key-file "$t/etcd.key" \
  --peer-trusted-ca-file "$t/ca.pem" --peer-client-cert-auth >"$dir/etcd.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do
  ns $NS_B curl -s -m 1 $(tlsc b) https://10.77.0.10:2379/health | grep -q true && break
  sleep 0.1
done
ns $NS_B curl -s -m 1 $(tlsc b) https://10.77.0.10:2379/health | grep -q true ||
  fail "etcd did not start"

# ---- keys and the config every host holds ----
mkdir -p "$dir/keys"
for s in a b c d; do
  "$geotrain" keygen --site $s --out "$dir/keys" | grep public_key: | sed 's/^ *//' >"$dir/$s.pub"
done
pub() { cat "$dir/$1.pub"; }
# the operator's signing key, which admits a site added mid-run (kept on the operator's host)
"$geotrain" keygen --admin --out "$dir/admin" | sed 's/^/  /' >"$dir/admin.pub" || fail "keygen --admin"
cat >"$dir/sites.yaml" <<EOF
run:
  name: multihost-$tag
  seed: 7
  rounds: 24
  checkpoint_every: 0
  log_every: 5
model:
  preset: tiny
data:
  kind: synthetic
  synthetic_branching: 4
  synthetic_tokens: 200000
inner:
  steps: 10
  lr: 3.0e-3
  warmup_steps: 5
  emulated_step_ms: 40
outer:
  overlap_steps: 2
  deadline_min_ms: 500
  deadline_max_ms: 5000
  site_slots: 4
codec:
  name: int8
  block_size: 64
wan:
  transport: $tp
  lanes: 2
  connect_timeout_ms: 20000
  peer_timeout_ms: 5000
  preauth_timeout_ms: 1000
  data_port_min: 7100
  data_port_max: 7131
  emulation:
    enabled: true
    latency_ms: 10
    jitter_ms: 2
membership:
  endpoints: [https://10.77.0.10:2379]
  lease_ttl_s: 5
  heartbeat_ms: 1000
  tls:
    ca: $t/ca.pem
security:
  mode: encrypted
  key_dir: $dir/keys
$(cat "$dir/admin.pub")
sites:
  - name: a
    address: 0.0.0.0:7000
    advertise: 10.77.9.1:7000
    metrics: 0.0.0.0:9400
    $(pub a)
  - name: b
    address: 10.77.0.12:7000
    metrics: 10.77.0.12:9400
    $(pub b)
  - name: c
    address: 10.77.0.13:7000
    metrics: 10.77.0.13:9400
    $(pub c)
EOF
# The file the new datacenter's operator holds: the run's, with d appended.
cp "$dir/sites.yaml" "$dir/full.yaml"
printf '  - name: d\n    address: 10.77.0.14:7000\n    metrics: 10.77.0.14:9400\n    %s\n' \
  "$(pub d)" >>"$dir/full.yaml"
# What an operator runs on each host first: the file and that host's key hold up across hosts.
own() { echo --set membership.tls.cert=$t/$1.pem --set membership.tls.key=$t/$1.key; }
for s in a b c; do
  "$geotrain" config check "$dir/sites.yaml" $(own $s) --deploy --site $s -q >"$dir/check.log" 2>&1 ||
    fail "config check --deploy --site $s: $(cat "$dir/check.log")"
done
grep -q "one etcd member" "$dir/check.log" || fail "config check --deploy: no warning of one etcd member"
grep -q "1 slot(s) wait for a site added mid-run" "$dir/check.log" ||
  fail "config check --deploy: no warning of the vacant slot: $(cat "$dir/check.log")"
"$geotrain" config check "$dir/full.yaml" $(own d) --deploy --site d -q >"$dir/check-d.log" 2>&1 ||
  fail "config check --deploy --site d: $(cat "$dir/check-d.log")"
# ... and refuses what cannot work: a key not pinned, a key that is not the pinned one's pair
awk -v key="$(cut -d' ' -f2 "$dir/a.pub")" '/^    public_key/ { next }
  { print } /^  - name: c$/ { print "    public_key: " key }' "$dir/sites.yaml" >"$dir/bad.yaml"
"$geotrain" config check "$dir/bad.yaml" $(own c) --deploy --site c -q >"$dir/check-bad.log" 2>&1 &&
  fail "config check --deploy accepted unpinned keys"
grep -q "sites\[1\] (b): no public_key" "$dir/check-bad.log" || fail "no error for b's missing key: $(cat "$dir/check-bad.log")"
grep -q "site c: its secret key .* is not the key pair" "$dir/check-bad.log" ||
  fail "no error for c's wrong key: $(cat "$dir/check-bad.log")"

# ---- the sites: each `geotrain run` in its own namespace, restarted as an operator's unit
# would be when it exits 3 (removed from the run: it rejoins) ----
site() { # site NAME NS [CONFIG]: runs until the site's process exits with anything but 3
  local s=$1 n=$2 life=0 rc conf=${3:-$dir/sites.yaml}
  while :; do
    life=$((life + 1))
    ns $n "$geotrain" run --config "$conf" --site $s --run-dir "$dir/run-$s" \
      $(own $s) >>"$dir/$s.log" 2>&1
    rc=$?
    echo "life $life exit $rc" >>"$dir/$s.lives"
    [ $rc = 3 ] || return $rc
  done
}
site a $NS_A & pa=$!
site b $NS_B & pb=$!
site c $NS_C & pc=$!
pids+=($pa $pb $pc)
round_of() { # the rounds site S applied so far
  local f="$dir/run-$1/$1/anchors.jsonl"
  local n=0
  [ -f "$f" ] && n=$(grep -c round "$f")
  echo "${n:-0}"
}
wait_round() { # wait_round SITE R [SECONDS]
  for _ in $(seq 1 $((${3:-90} * 10))); do
    [ "$(round_of $1)" -ge $2 ] && return 0
    sleep 0.1
  done
  fail "site $1 did not reach round $2"
}
wait_round b 4
# b killed with SIGKILL (its process, inside the namespace), started again a second later
bpid=$(pgrep -f -- "--site b --run-dir $dir/run-b" | head -1)
[ -n "$bpid" ] || fail "no process of site b"
kill -KILL "$bpid"
sleep 1
ns $NS_B "$geotrain" run --config "$dir/sites.yaml" --site b --run-dir "$dir/run-b" $(own b) \
  >>"$dir/b2.log" 2>&1 &
pb2=$!
pids+=($pb2)
# the outsider: garbage on every port of every site, and a connection flood at b and a
ns $NS_X python3 - >"$dir/outsider.log" 2>&1 <<'EOF' &
import os, socket, time
targets = [("10.77.9.1", 7000), ("10.77.0.12", 7000), ("10.77.0.13", 7000),
           ("10.77.9.1", 9400), ("10.77.0.12", 9400), ("10.77.0.13", 9400)]
payloads = [b"\xff" * 16, b"\0" * 64, os.urandom(4096), b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
            b"\x47\x74\x57\x46" + b"\xff" * 68, b"POST /metrics HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n"]
sent = 0
for host, port in targets:
    for p in payloads:
        try:
            s = socket.create_connection((host, port), timeout=2)
            s.sendall(p)
            time.sleep(0.05)
            s.close()
            sent += 1
        except OSError as e:
            print("poke %s:%d: %s" % (host, port, e))
held = []
for host in ("10.77.0.12", "10.77.9.1"):
    for _ in range(100):
        try:
            held.append(socket.create_connection((host, 7000), timeout=2))
        except OSError:
            pass
print("garbage connections %d, flood connections held %d" % (sent, len(held)))
time.sleep(4)
for s in held:
    s.close()
EOF
pids+=($!)
# The outsider and etcd: without a client certificate it reads and writes nothing (plain HTTP,
# TLS without a certificate, a certificate of another CA); the same request with a valid
# certificate is answered, so the check can fail.
range='{"key":"AA==","range_end":"AA=="}'
revoke='{"ID":"1"}'
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$t/rogue.key" \
  -out "$t/rogue.pem" -days 1 -subj /CN=rogue 2>/dev/null
for how in "http" "https --cacert $t/ca.pem" "https -k" "https -k --cert $t/rogue.pem --key $t/rogue.key"; do
  proto=${how%% *}
  opts=${how#$proto}
  for req in "kv/range $range" "lease/revoke $revoke" "kv/put {\"key\":\"AA==\",\"value\":\"AA==\"}"; do
    out=$(ns $NS_X curl -s -m 3 $opts -d "${req#* }" $proto://10.77.0.10:2379/v3/${req%% *} 2>&1)
    case "$out" in *'"header"'*|*'"kvs"'*) fail "the outsider ($how) got an answer to ${req%% *}: $out" ;; esac
  done
done
ns $NS_X curl -s -m 3 $(tlsc x) -d "$range" https://10.77.0.10:2379/v3/kv/range | grep -q '"kvs"' ||
  fail "etcd does not answer a request with a valid client certificate (the check above proves nothing)"
# d, a datacenter the run never had, added from an operator's host through the TLS control
# plane; started in its own namespace once every running site has pinned its key
wait_round a 6
ns $NS_B "$geotrain" sites add "$dir/full.yaml" d --run-id multihost-$tag $(own op) \
  --admin-key "$dir/admin/admin.key" \
  >"$dir/add.out" 2>&1 || fail "sites add d: $(cat "$dir/add.out")"
site d $NS_D "$dir/full.yaml" & pd=$!
pids+=($pd)
wait_round c 12
# c's link down for 2 s, then up again
ip -n $NS_C link set eth0 down
sleep 2
ip -n $NS_C link set eth0 up
ip -n $NS_C route add default via 10.77.0.1 2>/dev/null
# a's metrics through the NAT, from b's host
ns $NS_B curl -s -m 5 http://10.77.9.1:9400/metrics >"$dir/a.metrics" || fail "a's metrics not reachable at its advertised address"
grep -q '^geotrain_live_sites{site="a",rank="0"}' "$dir/a.metrics" || fail "a's metrics: $(head -3 "$dir/a.metrics")"
# b retired for good once d has applied rounds of its own
wait_round d 3
ns $NS_B "$geotrain" sites remove "$dir/sites.yaml" b --run-id multihost-$tag $(own op) \
  >"$dir/remove.out" 2>&1 || fail "sites remove b: $(cat "$dir/remove.out")"
wait $pa || fail "site a exited $?"
wait $pc || fail "site c exited $?"
wait $pd || fail "site d exited $?"
wait $pb2
rc=$?
[ $rc = 4 ] || fail "site b (started again, then retired) exited $rc, not 4"
wait $pb # its first process, killed: 137

# ---- the checks ----
for n in $NS_A $NS_C; do ns $n nft -j list counters >"$dir/nft-$n.json"; done
for s in a c; do tc -n $tag-$s -s -j qdisc show dev eth0 >"$dir/tc-$s.json"; done
python3 - "$dir" "$tag" <<'EOF' || fail "checks"
import json, sys
d, tag = sys.argv[1], sys.argv[2]
bad = []
def voids(s):
    try:
        lines = open('%s/run-%s/%s/void.jsonl' % (d, s, s)).read().splitlines()
    except FileNotFoundError:
        return []
    return [tuple(json.loads(l)['lines']) for l in lines if l.strip()]
anchors = {}
want = {'a': 'finished', 'b': 'retired', 'c': 'finished', 'd': 'finished'}
for s in 'abcd':
    lines = open('%s/run-%s/%s/anchors.jsonl' % (d, s, s)).read().splitlines()
    void = voids(s)
    got = {}
    for i, l in enumerate(lines):
        if any(a <= i < b for a, b in void):
            continue
        r = json.loads(l)
        if r['round'] in got and got[r['round']] != r['anchor_hash']:
            bad.append('%s: round %d has two anchors' % (s, r['round']))
        got[r['round']] = r['anchor_hash']
    anchors[s] = got
    summ = json.load(open('%s/run-%s/%s/summary.json' % (d, s, s)))
    if summ['status'] != want[s]: bad.append('%s: %s' % (s, summ['status']))
    if summ['hash_mismatches']: bad.append('%s: %d hash mismatches' % (s, summ['hash_mismatches']))
    if summ['frames_rejected']: bad.append('%s: %d frames rejected' % (s, summ['frames_rejected']))
    w = summ['wan']
    print('%s: %d rounds applied, joined at round %d, %d on time, %d late, %d dropped; '
          'handshakes refused %d, timed out %d, capped %d; reconnects %d; utilization %.3f'
          % (s, summ['rounds_applied'], summ['joined_round'], summ['contributions']['on_time'],
             summ['contributions']['late'], summ['contributions']['dropped'],
             w['handshakes_refused'], w['handshakes_timed_out'], w['connections_capped'],
             w['reconnects'], summ['compute_utilization']))
    anchors[s + '_summary'] = summ
for r in range(24):
    hs = {s: anchors[s][r] for s in 'abcd' if r in anchors[s]}
    if len(set(hs.values())) > 1: bad.append('round %d: anchors differ %s' % (r, hs))
last = {s: anchors[s].get(23) for s in 'acd'}
if None in last.values() or len(set(last.values())) != 1:
    bad.append('the last round is not held alike: %s' % last)
# d, added mid-run, trained rounds of its own and aggregated chunks of its slot; a and c took
# its contributions
dsum = anchors['d_summary']
if dsum['rounds_applied'] < 3 or dsum['contributions']['on_time'] + dsum['contributions']['late'] == 0:
    bad.append('d: %d rounds applied, contributions %s' % (dsum['rounds_applied'], dsum['contributions']))
for s in 'ac':
    if anchors[s + '_summary']['ledger'].get('d', {}).get('took', 0) == 0:
        bad.append('%s took nothing from d: %s' % (s, anchors[s + '_summary']['ledger']))
# the outsider: b and a saw its connections and refused them, or let them time out
for s in 'ab':
    w = anchors[s + '_summary']['wan']
    if w['handshakes_refused'] + w['handshakes_timed_out'] + w['connections_capped'] == 0:
        bad.append('%s: the outsider\'s connections were not counted' % s)
# bytes: what the site reported against what tc counted on its link, less etcd and scrapes
for s in 'ac':
    summ = anchors[s + '_summary']
    tcq = [q for q in json.load(open('%s/tc-%s.json' % (d, s))) if q['kind'] == 'tbf'][0]
    cnt = {c['counter']['name']: c['counter']['bytes'] for c in
           json.load(open('%s/nft-%s-%s.json' % (d, tag, s)))['nftables'] if 'counter' in c}
    wire = tcq['bytes'] - cnt['etcd'] - cnt['scrape']
    ratio = wire / summ['wan_bytes_sent']
    print('%s: WAN payload sent %d B; tc counted %d B on its link, %d B of it to etcd, %d B '
          'metrics; the rest is %.3f x the payload' % (s, summ['wan_bytes_sent'], tcq['bytes'],
                                                      cnt['etcd'], cnt['scrape'], ratio))
    if not 1.0 <= ratio <= 1.15:
        bad.append('%s: wire bytes %.3f x the payload' % (s, ratio))
for b in bad: print('  ' + b)
sys.exit(1 if bad else 0)
EOF
grep -q "advertised as 10.77.9.1:7000" "$dir/a.log" || fail "a does not say it advertises 10.77.9.1:7000"
echo "ok: 4 sites on 4 network stacks (d added mid-run, b retired) with identical anchors ($tp)"
