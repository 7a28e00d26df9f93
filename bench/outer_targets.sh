#!/usr/bin/env bash
# outer_targets.sh — the cross-site targets of the outer-loop issue, measured side by side in
# one `geotrain bench outer` run: overlapped DiLoCo, synchronous DiLoCo and sync-dp with a
# 100 ms round trip (50 ms each way, +-5 ms jitter) and 1.5 Mbit/s links, narrow enough that a
# round's exchange (int4 both ways) takes over a fifth of a round's compute (H = 270 steps of
# the tiny model). sync-dp's bytes and loss do not depend on the link, so it runs on an
# unlimited one (--dp-set) to finish in seconds rather than hours.
#   usage: bench/outer_targets.sh [CONFIG] [extra geotrain bench outer options]
set -euo pipefail
cd "$(dirname "$0")/.."
config=${1:-bench/two_sites.yaml}
shift || true
exec ${GT_CLI:-./build/cli/geotrain} bench outer --config "$config" --json \
  --set inner.steps=270 --set run.rounds=8 --set codec.name=int4 \
  --set wan.emulation.latency_ms=50 --set wan.emulation.jitter_ms=5 \
  --set wan.emulation.bandwidth_mbps=1.5 --set outer.deadline_min_ms=1000 \
  --dp-set wan.emulation.bandwidth_mbps=0 --dp-set wan.emulation.latency_ms=0 \
  --dp-set wan.emulation.jitter_ms=0 "$@"
