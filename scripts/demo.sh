#!/usr/bin/env bash
# demo.sh — the README's demo: every site of the top-level sites.yaml (three sites on this
# machine, joined by an emulated intercontinental WAN) trains one small GPT-2 on the
# `fortunes` corpus with DiLoCo. Extra arguments go to `geotrain launch`, for example
#   scripts/demo.sh --kill ap-south@8 --slow eu-west=2
set -euo pipefail
cd "$(dirname "$0")/.."
exec ./build/cli/geotrain launch sites.yaml "$@"
