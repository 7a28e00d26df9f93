#!/usr/bin/env bash
# test_launch_resume.sh GEOTRAIN CONFIG — a whole multi-site run killed and resumed with
# `geotrain launch --resume RUN_DIR` ends with the same anchors, bit for bit, as the same run
# left alone (CONFIG is deterministic: see the comment at its top). Every site is SIGKILLed
# once it applied round 3 (before it could checkpoint that round); site a's newest outer-state
# checkpoint is then damaged, so a must fall back to its previous one, and the run resumes at
# the newest step that every site has intact. RANKS (optional, default 1): every site runs that
# many ranks (mpirun), each rank saving and resuming its own lanes' outer state; or A,B,C: site
# a runs A ranks, b B and c C (sites with different ranks: a rank of a site with fewer ranks
# than the run's WAN groups saves and resumes several groups' engines). DAMAGE (optional,
# default byte): how a's newest outer state is spoiled — byte (one byte flipped: the checksum),
# site (site b's file of the same step copied over it: whole, but another site's), rename (a's
# older file copied over the newest's name: whole, but of another step).
set -u
geotrain=$1 config=$2 ranks=${3:-1} damage=${4:-byte}
IFS=, read -r ranks_a ranks_b ranks_c <<<"$ranks"
ranks_b=${ranks_b:-$ranks_a} ranks_c=${ranks_c:-$ranks_a}
declare -A R=([a]=$ranks_a [b]=$ranks_b [c]=$ranks_c)
extra=()
for s in a b c; do [ "${R[$s]}" -gt 1 ] && extra+=(--set sites.$s.ranks="${R[$s]}"); done
dir=$(mktemp -d /tmp/gt-resume-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; for f in "$dir"/*/logs/*.log; do echo "== $f" >&2; tail -n 25 "$f" >&2; done; exit 1; }
last_hash() { tail -n 1 "$1/$2/anchors.jsonl" | sed 's/.*"anchor_hash":"\([0-9a-f]*\)".*/\1/'; }

"$geotrain" launch "$config" --run-dir "$dir/straight" "${extra[@]}" >"$dir/straight.out" 2>&1 ||
  { cat "$dir/straight.out"; fail "the uninterrupted run failed"; }

# (launch counts a --kill as planned: its exit status says nothing here)
"$geotrain" launch "$config" --run-dir "$dir/cut" "${extra[@]}" --kill a@3 --kill b@3 --kill c@3 \
  >"$dir/cut.out" 2>&1
for s in a b c; do
  # (with ranks, mpirun takes the other rank down at once and may lose the line its killed
  # rank wrote: then the missing rounds say it)
  grep -q "chaos: stopping after 3 rounds for the launcher to kill it" "$dir/cut/logs/$s.log" ||
    { [ "${R[$s]}" -gt 1 ] && ! grep -q '"round":5' "$dir/cut/$s/anchors.jsonl"; } ||
    fail "site $s was not killed"
done
for s in a b c; do
  n=$(ls "$dir/cut/$s/checkpoints/outer/" | grep -c '\.gtos$')
  [ "$n" -eq $((2 * ${R[$s]})) ] || fail "site $s keeps $n outer checkpoints, expected the newest 2 of each of ${R[$s]} ranks"
  grep -q '"round":2' "$dir/cut/$s/anchors.jsonl" || fail "site $s never applied round 2"
done
# Damage site a's newest outer state: one byte in the middle of the anchor.
newest=$(ls "$dir/cut/a/checkpoints/outer/"*.gtos | sort | tail -n 1)
older=$(ls "$dir/cut/a/checkpoints/outer/"*.gtos | sort | head -n 1)
case $damage in
  byte)
    size=$(stat -c %s "$newest")
    printf '\x5a' | dd of="$newest" bs=1 seek=$((size / 2)) conv=notrunc status=none
    why="unusable: checksum mismatch" ;;
  site)
    cp "$dir/cut/b/checkpoints/outer/$(basename "$newest")" "$newest" ||
      fail "site b has no outer state of a's newest step"
    why="unusable: written by another site" ;;
  rename)
    cp "$older" "$newest"
    why="unusable: its header's step is not the step in its name" ;;
  *) fail "unknown DAMAGE $damage" ;;
esac
want_step=$(basename "$older" .gtos | sed 's/outer-0*\([0-9]*\).*/\1/')

"$geotrain" launch --resume "$dir/cut" >"$dir/resume.out" 2>&1 ||
  { cat "$dir/resume.out"; fail "launch --resume failed"; }
grep -q "$why" "$dir/cut/logs/a.log" ||
  fail "site a did not report its damaged checkpoint"
for s in a b c; do
  grep -q "resumed the run at step $want_step " "$dir/cut/logs/$s.log" ||
    fail "site $s did not resume at step $want_step (the newest step every site has intact)"
  h1=$(last_hash "$dir/straight" "$s") h2=$(last_hash "$dir/cut" "$s")
  [ -n "$h1" ] && [ "$h1" = "$h2" ] ||
    fail "site $s: final anchor $h2 after resume, $h1 uninterrupted"
  r=$(python3 -c "import json;print(json.load(open('$dir/cut/$s/summary.json'))['status'])")
  [ "$r" = finished ] || fail "site $s: status $r"
done
# The anchors of every round after the resume match too, and each round is logged once.
for s in a b c; do
  diff <(sort -u "$dir/straight/$s/anchors.jsonl") <(sort "$dir/cut/$s/anchors.jsonl") >&2 ||
    fail "site $s: per-round anchors differ from the uninterrupted run"
done
echo "ok: resumed at step $want_step; final anchors identical to the uninterrupted run"
