#!/usr/bin/env bash
# kernels_vs_torch.sh — `geotrain bench kernels` against the same GPT in PyTorch
# (bench/torch_gpt.py), run alternately so both see the same machine load, under
# OPENBLAS_CORETYPE=Haswell (what these machines export) and with it unset. Prints each run's
# tokens/s, both medians and the ratio geotrain / PyTorch per setting.
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

field() { "$py" -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])[sys.argv[1]])' "$1"; }
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "preset=$preset threads=$threads rounds=$rounds host=$(hostname) cpus=$(nproc) load=$(cut -d' ' -f1-3 /proc/loadavg)"
for core in Haswell unset; do
  if [ "$core" = unset ]; then unset OPENBLAS_CORETYPE; else export OPENBLAS_CORETYPE=$core; fi
  gt=() pt=()
  for r in $(seq 1 "$rounds"); do
    g=$("$bin" bench kernels --preset "$preset" --threads "$threads" --json | field tokens_per_s)
    p=$("$py" "$here/torch_gpt.py" --preset "$preset" --threads "$threads" | field tokens_per_s)
    echo "  OPENBLAS_CORETYPE=$core round $r: geotrain $g tokens/s, pytorch $p tokens/s"
    gt+=("$g") pt+=("$p")
  done
  mg=$(median "${gt[@]}") mp=$(median "${pt[@]}")
  ratio=$(awk -v a="$mg" -v b="$mp" 'BEGIN {printf "%.2f", a / b}')
  echo "OPENBLAS_CORETYPE=$core: geotrain median $mg tokens/s, pytorch median $mp tokens/s, ratio $ratio"
  echo "{\"bench\":\"kernels_vs_torch\",\"preset\":\"$preset\",\"threads\":$threads,\"openblas_coretype\":\"$core\",\"geotrain_tokens_per_s\":$mg,\"torch_tokens_per_s\":$mp,\"ratio\":$ratio}"
done
