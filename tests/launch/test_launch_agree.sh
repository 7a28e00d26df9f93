#!/usr/bin/env bash
# test_launch_agree.sh GEOTRAIN CONFIG MODE KEY=VALUE [TRANSPORT] — the sites of a run compare
# the keys they must hold alike (docs/diloco.md#what-sites-must-agree-on). Site c runs with
# KEY=VALUE (launch --set-site), a and b with the file's value.
#   start: all three start together. Every site stops at start with an error naming KEY and
#          both values; none trains a step or applies a round, and launch ends within seconds
#          (before: a codec or lanes that differ timed rounds out after ~57 s; another H,
#          number of rounds or outer learning rate trained on silently).
#   join:  c starts late (--join c@1): it is refused, naming KEY and both values, before it
#          takes part; a and b finish every round with identical anchors.
set -u
geotrain=$1 config=$2 mode=$3 kv=$4 transport=${5:-ucx}
key=${kv%%=*}
dir=$(mktemp -d /tmp/gt-agree-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; tail -n 20 "$dir/out" >&2; for f in "$dir"/run/logs/*.log; do echo "== $f" >&2; tail -n 15 "$f" >&2; done; exit 1; }
extra=()
# join: steps of 80 ms (a per-site key, here the same at every site), so that c comes while the
# others still train
[ "$mode" = join ] && extra=(--join c@1 --set inner.emulated_step_ms=80)
t0=$(date +%s)
timeout 200 "$geotrain" launch "$config" --run-dir "$dir/run" --set wan.transport="$transport" \
  --set-site c:"$kv" "${extra[@]}" >"$dir/out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - t0 ))
[ $rc -ne 124 ] || fail "launch did not end within 200 s"
status() { python3 -c "import json;print(json.load(open('$dir/run/$1/summary.json'))['status'])" 2>/dev/null; }
steps() { python3 -c "import json;print(json.load(open('$dir/run/$1/summary.json'))['steps_trained'])" 2>/dev/null; }
# "KEY: VALUE here, VALUE at site S", both ways round: c's value against a's and b's.
names_key() { # SITE PEER
  grep -q "site $1:   $key: .* here, .* at site $2\$" "$dir/run/logs/$1.log" ||
    fail "site $1's log does not name $key against site $2"
}
names_key c '[ab]'
grep -q "site c: it does not take part" "$dir/run/logs/c.log" || fail "c does not say it stops"
[ "$(status c)" = failed ] || fail "site c: status $(status c), not failed"
[ "$(steps c)" = 0 ] || fail "site c trained $(steps c) steps"
if [ "$mode" = start ]; then
  # c stops at the first site it compares with (a or b, whichever registered first); a and b
  # each compare with c, however late it registers (a site that stops stays registered until
  # every site has)
  names_key a c
  names_key b c
  for s in a b; do
    [ "$(status $s)" = failed ] || fail "site $s: status $(status $s), not failed"
    [ "$(steps $s)" = 0 ] || fail "site $s trained $(steps $s) steps"
    [ ! -s "$dir/run/$s/anchors.jsonl" ] || fail "site $s applied a round"
  done
  [ $rc -ne 0 ] || fail "launch exited 0"
  # Within seconds: well before any round could time out (the old failure took ~57 s).
  [ "$elapsed" -lt 45 ] || fail "launch took $elapsed s"
else
  for s in a b; do
    [ "$(status $s)" = finished ] || fail "site $s: status $(status $s), not finished"
  done
  rounds=$(grep -c '"round"' "$dir/run/a/anchors.jsonl")
  [ "$rounds" -eq 6 ] || fail "site a applied $rounds rounds, not 6"
  cmp -s "$dir/run/a/anchors.jsonl" "$dir/run/b/anchors.jsonl" || fail "a's and b's anchors differ"
fi
echo "ok ($mode, $transport): $key differing at c stopped it by name in ${elapsed} s"
grep -h "  $key: " "$dir"/run/logs/*.log
