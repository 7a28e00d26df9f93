#!/usr/bin/env bash
# kernels_vs_torch.sh — `geotrain bench kernels` against the same GPT in PyTorch
# (bench/torch_gpt.py), run alternately so both see the same machine load, under
# OPENBLAS_CORETYPE=Haswell (what these machines export) and with it unset. Prints each run's
# tokens/s, both medians and the ratio geotrain / PyTorch per setting; also tokens per
# CPU-second of the whole process (all threads), which stays comparable when other jobs share
# the cores (it counts any spin-waiting a program does as work).
#
# usage: bench/kernels_vs_torch.sh [GEOTRAIN_BIN] [ROUNDS] [PRESET] [THREADS]
#   GEOTRAIN_BIN  default: $GT_CLI, else build/cli/geotrain
#   ROUNDS        alternations per setting (default 5)
#   PRESET        small (default) or tiny
#   THREADS       2 (default)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-${GT_CLI:-$here/../build/cli/geotrain}}
rounds=${2:-5}
preset=${3:-small}
threads=${4:-2}
py=/usr/bin/python3
[ -x "$bin" ] || { echo "no geotrain binary at $bin (pass it as the first argument)" >&2; exit 2; }
"$py" -c "import torch" 2>/dev/null || { echo "PyTorch missing: apt-get install python3-torch" >&2; exit 2; }
export OMP_WAIT_POLICY=passive OMP_NUM_THREADS=$threads

fields() { "$py" -c 'import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(*(d[k] for k in sys.argv[1:]))' "$@"; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "preset=$preset threads=$threads rounds=$rounds host=$(hostname) cpus=$(nproc) load=$(cut -d' ' -f1-3 /proc/loadavg)"
for core in Haswell unset; do
  # unset: OpenBLAS's own pick in both programs (GT_BLAS_CORE_AUTO=0: geotrain does not
  # choose a better kernel set for itself, see docs/kernels.md)
  if [ "$core" = unset ]; then unset OPENBLAS_CORETYPE; export GT_BLAS_CORE_AUTO=0
  else export OPENBLAS_CORETYPE=$core; unset GT_BLAS_CORE_AUTO; fi
  gt=() pt=() gc=() pc=()
  for r in $(seq 1 "$rounds"); do
    read -r g gcpu < <("$bin" bench kernels --preset "$preset" --threads "$threads" --json |
                       fields tokens_per_s tokens_per_cpu_s)
    read -r p pcpu < <("$py" "$here/torch_gpt.py" --preset "$preset" --threads "$threads" |
                       fields tokens_per_s tokens_per_cpu_s)
    echo "  OPENBLAS_CORETYPE=$core round $r: geotrain $g tokens/s ($gcpu per CPU-s), pytorch $p tokens/s ($pcpu per CPU-s), load $(cut -d' ' -f1 /proc/loadavg)"
    gt+=("$g") pt+=("$p") gc+=("$gcpu") pc+=("$pcpu")
  done
  mg=$(median "${gt[@]}") mp=$(median "${pt[@]}") mgc=$(median "${gc[@]}") mpc=$(median "${pc[@]}")
  ratio=$(awk -v a="$mg" -v b="$mp" 'BEGIN {printf "%.2f", a / b}')
  cratio=$(awk -v a="$mgc" -v b="$mpc" 'BEGIN {printf "%.2f", a / b}')
  echo "OPENBLAS_CORETYPE=$core: geotrain median $mg tokens/s, pytorch median $mp tokens/s, ratio $ratio; per CPU-second $mgc vs $mpc, ratio $cratio"
  echo "{\"bench\":\"kernels_vs_torch\",\"preset\":\"$preset\",\"threads\":$threads,\"openblas_coretype\":\"$core\",\"geotrain_tokens_per_s\":$mg,\"torch_tokens_per_s\":$mp,\"ratio\":$ratio,\"geotrain_tokens_per_cpu_s\":$mgc,\"torch_tokens_per_cpu_s\":$mpc,\"cpu_ratio\":$cratio}"
done
