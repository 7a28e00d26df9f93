#!/usr/bin/env bash
# gpu_golden.sh — `geotrain grad` against the float64 PyTorch GPT-2 of tests/golden/golden_grad.py
# on a lent GPU machine (bundle as in scripts/gpu_check.sh): the small cases on the GPU model
# with each attention path, then GPT-2 124M's shapes (B 4, T 1024) on the GPU model and on the
# CPU model (16 threads), the reference computed in float64 on the GPU. Prints every tensor's
# relative L2 error and the worst; logs under $OUT (or /tmp/gpu-out).
set -uo pipefail
OUT=${OUT:-/tmp/gpu-out}
mkdir -p "$OUT"
# shellcheck disable=SC1091
source .gpu/device-env.sh >"$OUT/env.log" 2>&1
g=(python3 tests/golden/golden_grad.py --cli "$GT")
export LD_LIBRARY_PATH=$GTB/lib
for attn in flash flash1 naive; do
  GT_CUDA_ATTN=$attn timeout 120 "${g[@]}" --device cuda >"$OUT/golden_small_$attn.log" 2>&1
  echo "== small, cuda, $attn (rc $?)"
  grep -E 'worst|^case|FAIL|MISMATCH|all gradients' "$OUT/golden_small_$attn.log"
done
for dev in cuda cpu; do
  timeout 300 "${g[@]}" --device "$dev" --shape gpt2-124m --threads 16 >"$OUT/golden_gpt2_$dev.log" 2>&1
  echo "== gpt2-124m, $dev (rc $?)"
  grep -E 'worst|^case|loss:|FAIL|MISMATCH|all gradients' "$OUT/golden_gpt2_$dev.log"
done
