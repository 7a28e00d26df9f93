#!/usr/bin/env bash
# setup.sh — installs the Debian packages geotrain needs to build, test and run its demo.
# Idempotent: packages already present are skipped, and apt-get runs only when something is
# missing. Needs root (or sudo) for apt-get.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  clang clang-format libclang-rt-14-dev      # libFuzzer, sanitizers, format check
  libyaml-dev libjansson-dev libxxhash-dev   # sites.yaml, JSON, checksums
  libcurl4-openssl-dev libssl-dev            # etcd v3 JSON gateway client, its TLS certificates
  libmicrohttpd-dev prometheus               # the /metrics endpoint, and the server its test runs
  libzstd-dev libsodium-dev libopenblas-dev  # codecs, crypto, matmuls
  libucx-dev ucx-utils                       # UCX transport (+ ucx_perftest)
  libfabric-dev libfabric-bin                # libfabric transport (+ fi_pingpong)
  libopenmpi-dev openmpi-bin                 # multi-rank sites
  etcd-server etcd-client                    # membership
  iperf3 iproute2 nftables                   # WAN benchmark baseline, netns tests (NAT)
  gnuplot-nox                                # geotrain report (PNG plots)
  fortunes                                   # the demo's English text corpus
  python3 python3-numpy python3-torch        # golden gradient checks, PyTorch benchmark
)

missing=()
for p in "${packages[@]}"; do
  [[ $p == \#* ]] && continue
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
