#!/usr/bin/env bash
# test_launch_sigkill.sh GEOTRAIN CONFIG — `geotrain launch` killed with SIGKILL mid-run leaves
# nothing behind: its etcd and every site process die with it (PR_SET_PDEATHSIG), so a crashed
# or OOM-killed launcher never leaves a control plane or sites holding ports.
set -u
geotrain=$1 config=$2
dir=$(mktemp -d /tmp/gt-sigkill-XXXXXX)
trap 'pkill -KILL -f "$dir" 2>/dev/null; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$geotrain" launch "$config" --run-dir "$dir/run" --set run.rounds=1000 >"$dir/launch.out" 2>&1 &
launcher=$!
# Wait until etcd and both sites are up (each site writes a status.json once it trains).
for _ in $(seq 1 600); do
  n=$(ls "$dir"/run/*/status.json 2>/dev/null | wc -l)
  [ "$n" -ge 2 ] && pgrep -f "$dir/run/etcd" >/dev/null && break
  kill -0 "$launcher" 2>/dev/null || { cat "$dir/launch.out"; fail "launch exited early"; }
  sleep 0.1
done
pgrep -f "$dir/run/etcd" >/dev/null || fail "etcd never started"
before=$(pgrep -f "$dir/run" | wc -l)
[ "$before" -ge 3 ] || fail "expected etcd and 2 sites, found $before processes"
echo "launch $launcher running with $before child processes; SIGKILL"
kill -KILL "$launcher"
wait "$launcher" 2>/dev/null
# Sites leave on SIGTERM after their step; give them (and etcd) a generous while.
for _ in $(seq 1 300); do
  left=$(pgrep -f "$dir/run" | wc -l)
  [ "$left" -eq 0 ] && { echo "ok: every child of the killed launcher is gone"; exit 0; }
  sleep 0.1
done
pgrep -af "$dir/run" >&2
fail "$left processes of the run outlived the launcher"
