#!/usr/bin/env bash
# test_launch_runid.sh GEOTRAIN CONFIG — a run id is claimed (docs/diloco.md#run-ids-are-claimed).
# Against one etcd of the test's own (membership.endpoints, as a user's etcd would be), run 1
# finishes under run id "run"; its keys stay in etcd. Run 2 under the same id is refused at once
# on every site, saying the id is taken and how to pick another or clear it (before: every site
# waited as a joiner and failed after ~64 s, "no running site to join"). Run 3 under the same id
# with --reuse-run-id clears the old run's keys and finishes.
set -u
geotrain=$1 config=$2
dir=$(mktemp -d /tmp/gt-runid-XXXXXX)
etcd_pid=
cleanup() { [ -n "$etcd_pid" ] && kill "$etcd_pid" 2>/dev/null && wait "$etcd_pid" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; for f in "$dir"/*/run/logs/*.log; do echo "== $f" >&2; tail -n 12 "$f" >&2; done; exit 1; }
. "$(dirname "$0")/etcd_one.sh"
start_etcd runid "$dir" || fail "etcd did not come up"
# The run id is the run directory's name: "run" for all three.
launch() { # N [ARGS...]
  local n=$1; shift
  mkdir -p "$dir/$n"
  timeout 200 "$geotrain" launch "$config" --run-dir "$dir/$n/run" \
    --set membership.endpoints="http://127.0.0.1:$cport" --set membership.plain_http=true "$@" >"$dir/$n/out" 2>&1
}
status() { python3 -c "import json;print(json.load(open('$dir/$1/run/$2/summary.json'))['status'])" 2>/dev/null; }

launch 1 || fail "run 1 failed"
for s in a b; do [ "$(status 1 $s)" = finished ] || fail "run 1, site $s: $(status 1 $s)"; done

t0=$(date +%s)
launch 2
rc=$?
elapsed=$(( $(date +%s) - t0 ))
[ $rc -ne 124 ] || fail "run 2 did not end within 200 s"
[ $rc -ne 0 ] || fail "run 2 exited 0"
for s in a b; do
  grep -q "site $s: run id 'run' is taken: etcd (/geotrain/run) holds the keys of a run" \
    "$dir/2/run/logs/$s.log" || fail "run 2, site $s does not say the run id is taken"
  grep -q -- "--reuse-run-id" "$dir/2/run/logs/$s.log" || fail "run 2, site $s: no way out named"
  [ "$(status 2 $s)" = failed ] || fail "run 2, site $s: $(status 2 $s)"
  ! grep -q "cannot join the run" "$dir/2/run/logs/$s.log" || fail "run 2, site $s tried to join"
done
# At once: not after a joiner's wait (wan.connect_timeout_ms, 20 s here, and more).
[ "$elapsed" -lt 20 ] || fail "run 2 took $elapsed s to be refused"

launch 3 --reuse-run-id || fail "run 3 (--reuse-run-id) failed"
for s in a b; do [ "$(status 3 $s)" = finished ] || fail "run 3, site $s: $(status 3 $s)"; done
grep -q "held the keys of a finished or abandoned run in etcd" "$dir"/3/run/logs/*.log ||
  fail "run 3 does not say it cleared the old run's keys"
echo "ok: run 2 refused in ${elapsed} s, run 3 cleared the id and finished"
grep -h "is taken" "$dir"/2/run/logs/a.log
