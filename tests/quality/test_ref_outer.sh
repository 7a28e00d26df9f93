#!/usr/bin/env bash
# test_ref_outer.sh GEOTRAIN CONFIG PYTHON — geotrain's outer step, round by round, against the
# textbook one (ref_outer.py: torch.optim.SGD(nesterov=True) in float64 on the token-weighted mean
# of the deltas the sites submitted): short three-site runs with run.dump=rounds, each replayed.
# Cases: Nesterov with an overlap (tau 2, fp32: the rebase keeps the overlap's steps), Nesterov
# synchronous over int8 (the replay takes the decoded result: the codec's error is not the
# optimizer's), plain averaging. The straggler deadline is long, so every round waits for
# every site however loaded the machine (the replay averages every site's delta of every round;
# a contribution folded late would be another experiment). Exit 77 (skipped) without PyTorch.
set -u
geotrain=$1 config=$2 python=$3
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d /tmp/gt-refouter-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$python" -c 'import torch, numpy' 2>/dev/null || { echo "SKIP: no PyTorch for $python"; exit 77; }
run_case() {
  name=$1
  shift
  "$geotrain" launch "$config" --run-dir "$dir/$name" --set run.rounds=6 --set inner.steps=10 \
    --set wan.emulation.enabled=false --set outer.deadline_min_ms=30000 \
    --set outer.deadline_max_ms=60000 --set run.dump=rounds "$@" >"$dir/$name.out" 2>&1 ||
    { tail -40 "$dir/$name.out"; fail "$name: launch exited $?"; }
  echo "== $name ($*)"
  "$python" "$here/ref_outer.py" "$dir/$name" --quiet || fail "$name: geotrain's outer step is not the reference's"
}
run_case nesterov-tau2 --set codec.name=fp32 --set outer.overlap_steps=2
run_case nesterov-int8 --set codec.name=int8 --set outer.overlap_steps=0
run_case average --set codec.name=fp32 --set outer.optimizer=average --set outer.overlap_steps=2
echo "ok: every round of every case agrees with the reference"
