#!/usr/bin/env bash
# test_launch_chaos_ranks.sh GEOTRAIN CONFIG — a chaos kill of a site of two ranks reaches all of
# it: site b (2 ranks, an MPI job) is SIGKILLed by --chaos (seed 10 draws that kill and nothing
# else) and started again. Open MPI puts each rank in a process group of its own, so a signal to
# mpirun alone left the ranks running, holding b's site.lock and ports: the restarted b then
# failed ("another process of site b is running"; the soak's seed 8888 run 9). Checks: launch
# exits 0, the kill and the restart were fired, b's next life found no predecessor holding its
# lock (it logs a wait when one does), b finished, and no rank of b's killed life outlived the
# kill (every rank pid b's first life logged is gone right after launch reports the kill).
set -u
geotrain=$1 config=$2
dir=$(mktemp -d /tmp/gt-chaosranks-XXXXXX)
trap 'pkill -KILL -f "$dir/run" 2>/dev/null; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; cat "$dir/launch.out" >&2 2>/dev/null; tail -n 30 "$dir"/run/logs/b.log >&2; exit 1; }
command -v mpirun >/dev/null || { echo "SKIP: no mpirun"; exit 77; }
"$geotrain" launch "$config" --run-dir "$dir/run" --set sites.b.ranks=2 --set run.rounds=12 \
  --set inner.steps=30 --set inner.emulated_step_ms=15 --set membership.lease_ttl_s=5 \
  --chaos 10 --mtbf-rounds 6 --chaos-round-s 0.5 >"$dir/launch.out" 2>&1 &
lp=$!
# b's ranks of its first life, then (once launch has killed b) whether any is still there
pids=""
for _ in $(seq 600); do
  if grep -q -- "-- chaos: kill -9 b" "$dir/launch.out" 2>/dev/null; then
    sleep 0.3
    for p in $pids; do
      [ -d "/proc/$p" ] && grep -q "run" "/proc/$p/cmdline" 2>/dev/null &&
        ! grep -q "^State:.*Z" "/proc/$p/status" 2>/dev/null && { kill $lp; fail "rank pid $p of b's killed life still runs"; }
    done
    break
  fi
  # accumulated, not replaced: a sample taken after the kill but before launch printed it is
  # empty, and replacing lost the pids seen before (CI: "no process of b's first life seen")
  for p in $(pgrep -f -- "--site b --run-dir $dir/run"); do
    case " $pids " in *" $p "*) ;; *) pids="$pids $p" ;; esac
  done
  sleep 0.1
done
wait $lp
rc=$?
[ $rc -eq 0 ] || fail "launch exited $rc"
grep -q -- "-- chaos: kill -9 b" "$dir/launch.out" || fail "the chaos did not kill b"
grep -q -- "-- chaos: restarted b" "$dir/launch.out" || fail "b was not started again"
[ -n "$pids" ] || fail "no process of b's first life seen"
! grep -q "is held by another process\|another process of site b" "$dir/run/logs/b.log" ||
  fail "b's next life found its killed predecessor still holding site.lock"
/usr/bin/python3 - "$dir/run/summary.json" <<'PY' || fail "summary"
import json, sys
s = json.load(open(sys.argv[1]))
st = s["sites"]["b"]["status"]
assert "finished" in st, f"b ended {st}"
assert s["hash_mismatches"] == 0, s["hash_mismatches"]
print("b:", st, "lives", [l.get("end") for l in s["sites"]["b"].get("lives", [])])
PY
echo "ok: the chaos kill took b's whole MPI job down; its next life started clean and finished"
