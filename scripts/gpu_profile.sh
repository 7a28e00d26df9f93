#!/usr/bin/env bash
# gpu_profile.sh — where a GPT-2 124M training step's GPU time goes: Nsight Compute (ncu) times
# every kernel of a window of `geotrain bench kernels --device cuda` (past the warm-up steps)
# and prints each kernel's share of the window, largest first. On a lent GPU machine, with the
# bundle of scripts/gpu_check.sh in .gpu/: scripts/gpu_profile.sh [SKIP=1500] [COUNT=1500]
# (output under $OUT, or /tmp/gpu-out; ATTNS="flash" profiles that path alone). ncu runs the
# kernels one at a time, so the times are each kernel's own, without overlap; the shares, not
# the sum, are the result.
set -uo pipefail
OUT=${OUT:-/tmp/gpu-out}
skip=${1:-1500} count=${2:-1500}
mkdir -p "$OUT"
# shellcheck disable=SC1091
source .gpu/device-env.sh >"$OUT/env.log" 2>&1
for attn in ${ATTNS:-flash naive}; do
  GT_CUDA_ATTN=$attn LD_LIBRARY_PATH="$GTB/lib" timeout 280 ncu --metrics gpu__time_duration.sum \
    --launch-skip "$skip" --launch-count "$count" --csv --print-units base \
    "$GT" bench kernels --device cuda --preset gpt2-124m --threads 16 --json \
    >"$OUT/ncu_$attn.csv" 2>"$OUT/ncu_$attn.err"
  echo "== $attn (rc $?)"
  python3 - "$OUT/ncu_$attn.csv" <<'PY'
import csv, collections, sys
rows = list(csv.reader(open(sys.argv[1])))
h = next(i for i, r in enumerate(rows) if "Kernel Name" in r and "Metric Value" in r)
head, rows = rows[h], rows[h:]
kn, mv = head.index("Kernel Name"), head.index("Metric Value")
rows = [r for r in rows if len(r) == len(head)]
t = collections.Counter(); n = collections.Counter()
for r in rows[1:]:
    try:
        v = float(r[mv].replace(",", ""))
    except ValueError:
        continue
    name = r[kn].split("(")[0][:70]
    t[name] += v; n[name] += 1
tot = sum(t.values())
print(f"{len(rows) - 1} kernels, {tot / 1e6:.2f} ms in all")
for name, v in t.most_common(25):
    print(f"{100 * v / tot:6.2f}%  {v / 1e6:8.3f} ms  {n[name]:5d}x  {name}")
PY
done
