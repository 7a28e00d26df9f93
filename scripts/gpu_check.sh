#!/usr/bin/env bash
# gpu_check.sh — the GPU checks, as one script for a lent GPU machine (../shared/gpu/README.md):
# the CUDA model (every attention path) and the quantize kernels against their CPU references,
# the NCCL all-reduce on one rank, compute-sanitizer (memcheck, racecheck) over the CUDA model
# test, a three-site DiLoCo launch whose sites train on the GPU, a single-site run on the GPU
# beside the same run on the CPU, GPT-2 124M training-step throughput for each attention path
# beside PyTorch's in the same run, and the WAN channel's encrypted throughput on the
# machine's cores (GT_WAN_CRYPTO_THREADS 0, 4, 8).
#
# Here:  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DGT_CUDA=ON
#        cmake --build build-gpu && ../shared/gpu/make-bundle.sh build-gpu .gpu
# There: scripts/gpu_check.sh [--quick]   (logs and a summary table under $OUT, or /tmp/gpu-out)
# --quick leaves out racecheck (minutes) and torch.compile. ATTNS="flash naive" (the default)
# names the GT_CUDA_ATTN values to time. BASE=.gpu/base/geotrain (an earlier build's binary,
# carried beside the bundle) is timed alternately with this one, as gt_base_ATTN_N rows: a
# before/after pair from one run on one card. SKIP="name ..." leaves out those steps (e.g.
# "single_cuda single_cpu launch_cuda"); SANITIZE_ATTN=flash runs compute-sanitizer over that
# attention path's cases only (GT_TEST_ATTN). Each step has its own time limit; the table at
# the end gives each step's exit code.
set -uo pipefail
quick=0
[ "${1:-}" = --quick ] && quick=1
ATTNS=${ATTNS:-flash naive}
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
root=$PWD
# shellcheck disable=SC1091
source .gpu/device-env.sh >"$OUT/env.log" 2>&1
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader |
  tee "$OUT/gpu.txt"

summary=()
SKIP=" ${SKIP:-} "
step() { # step NAME LIMIT_S CMD...: runs CMD, log in $OUT/NAME.log, the tail printed
  local name=$1 limit=$2 t0 rc
  shift 2
  [[ $SKIP == *" $name "* ]] && return 0
  t0=$EPOCHREALTIME
  timeout "$limit" "$@" >"$OUT/$name.log" 2>&1
  rc=$?
  summary+=("$(printf '%-16s rc=%-3d %6.1f s' "$name" "$rc" "$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN{print b-a}')")")
  echo "== $name (rc $rc)"
  tail -n "${TAILN:-8}" "$OUT/$name.log"
}

cd "$GTB/tests" || exit 1
step kernels_cuda 180 env LD_LIBRARY_PATH="$GTB/lib" ./test_kernels_cuda
step compress_gpu 120 env LD_LIBRARY_PATH="$GTB/lib" ./test_compress_gpu
step nccl_1rank 120 env LD_LIBRARY_PATH="$GTB/lib" ./test_local_nccl
sanitize=(env LD_LIBRARY_PATH="$GTB/lib" GT_TEST_ATTN="${SANITIZE_ATTN:-}" compute-sanitizer)
step memcheck 240 "${sanitize[@]}" --tool memcheck --error-exitcode 9 ./test_kernels_cuda
[ $quick = 1 ] || step racecheck 240 "${sanitize[@]}" --tool racecheck --error-exitcode 9 \
  ./test_kernels_cuda
cd "$root" || exit 1

# Two sites, each training on the GPU, over the emulated WAN (UCX, encrypted).
step launch_cuda 240 env LD_LIBRARY_PATH="$GTB/lib" "$GT" launch tests/launch/three_sites.yaml \
  --run-dir /tmp/gt-cuda-run --set run.rounds=6 --set sites.a.backend=cuda \
  --set sites.b.backend=cuda --set sites.c.backend=cuda --etcd-members 1
cp /tmp/gt-cuda-run/summary.json "$OUT/launch_summary.json" 2>/dev/null

# One site on the GPU and the same run on the CPU (same seed, data and steps): the loss curves.
fortunes="$GTB/fortunes/{computers,cookie,definitions,literature,people,science,songs-poems,wisdom,work}"
for dev in cuda cpu; do
  step "single_$dev" 240 env LD_LIBRARY_PATH="$GTB/lib" "$GT" run --config configs/single-site.yaml \
    --site solo --run-dir "/tmp/gt-single-$dev" --set run.rounds=2 --set local.threads=16 \
    --set "sites.solo.backend=$dev" --set "data.path=$fortunes"
  grep -h '"step"' "/tmp/gt-single-$dev/solo/metrics.jsonl" >"$OUT/single_$dev.jsonl" 2>/dev/null
done

# GPT-2 124M (B 8, T 1024): geotrain's CUDA step with each attention path (GT_CUDA_ATTN),
# PyTorch's eager (and compiled) steps, then geotrain's again (the order evens out drift).
bench_gt() { # bench_gt NAME ATTN [BINARY]
  step "$1" 180 env GT_CUDA_ATTN="$2" LD_LIBRARY_PATH="$GTB/lib" "${3:-$GT}" bench kernels \
    --device cuda --preset gpt2-124m --threads 16 --json
}
bench_all() { # bench_all N: every attention path, the base binary's beside this one's
  for a in $ATTNS; do
    [ -n "${BASE:-}" ] && bench_gt "gt_base_${a}_$1" "$a" "$root/$BASE"
    bench_gt "gt_${a}_$1" "$a"
  done
}
bench_all 1
step torch_eager 180 python3 .gpu/torch_gpt2_gpu_bench.py eager 8 1024 5 20
[ $quick = 1 ] || step torch_compile 240 python3 .gpu/torch_gpt2_gpu_bench.py compile 8 1024 5 20
bench_all 2

# The WAN channel, encrypted, with 0, 4 and 8 crypto threads (this machine has the cores).
for t in 0 4 8; do
  step "wan_crypto$t" 120 env GT_WAN_CRYPTO_THREADS=$t LD_LIBRARY_PATH="$GTB/lib" "$GT" bench wan \
    --transport ucx --min 1M --max 16M --bytes 64M --reps 3 --no-tools --json
done

echo "== summary"
printf '%s\n' "${summary[@]}" | tee "$OUT/summary.txt"
grep -h '^{' "$OUT"/gt_*.log "$OUT"/torch_*.log "$OUT"/wan_*.log 2>/dev/null |
  tee "$OUT/bench.jsonl"
# at most a few files come back from a lent machine: the logs go in one archive
cp -r /tmp/gt-cuda-run/logs "$OUT/launch_logs" 2>/dev/null
tar -C "$OUT" -czf "$OUT/logs.tar.gz" --remove-files $(cd "$OUT" && ls -d ./*.log launch_logs 2>/dev/null)
