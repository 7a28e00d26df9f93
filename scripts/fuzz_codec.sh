#!/usr/bin/env bash
# fuzz_codec.sh [SECONDS] — fuzz the compress frame decoder and the codecs' round trips with
# libFuzzer under ASan+UBSan for SECONDS (default 60; CI runs ~30).
#
# Builds tests/fuzz/fuzz_codec with clang in its own build directory (GT_FUZZ_BUILD, default
# build-fuzz), seeds a corpus (GT_FUZZ_CORPUS, default fuzz-corpus-codec; both git-ignored)
# with valid frames of every codec, then runs. Exits non-zero on a crash, a sanitizer report,
# a leak, a timeout, or a broken invariant, including round-trip determinism (the same input
# and residual must give the same frame bytes, and decoding must reproduce them: see
# tests/fuzz/fuzz_codec.c). Crash inputs are left as crash-* / leak-* / timeout-* files in
# BUILD/fuzz-artifacts/ for reproduction: build-fuzz/tests/fuzz/fuzz_codec FILE.
set -euo pipefail
secs=${1:-60}
case "$secs" in ''|*[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;; esac
src=$(cd "$(dirname "$0")/.." && pwd)
build=${GT_FUZZ_BUILD:-$src/build-fuzz}
corpus=${GT_FUZZ_CORPUS:-$src/fuzz-corpus-codec}
jobs=${GT_FUZZ_BUILD_JOBS:-2}

if ! command -v clang >/dev/null; then echo "fuzz_codec.sh: clang is required" >&2; exit 2; fi
# -Wno-unknown-warning-option: the shared warning list is written for gcc.
CC=clang CXX=clang++ cmake -S "$src" -B "$build" -G Ninja -DGT_FUZZ=ON -DGT_SANITIZE=ON \
  -DGT_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_C_FLAGS=-Wno-unknown-warning-option" >/dev/null
ninja -C "$build" -j "$jobs" fuzz_codec fuzz_codec_seeds
mkdir -p "$corpus"
"$build/tests/fuzz/fuzz_codec_seeds" "$corpus"
artifacts="$build/fuzz-artifacts/"
mkdir -p "$artifacts"
echo "fuzz_codec.sh: fuzzing for ${secs}s (corpus $corpus)"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
rc=0
"$build/tests/fuzz/fuzz_codec" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
  -max_len=300000 -print_final_stats=1 -error_exitcode=1 -timeout_exitcode=1 \
  -artifact_prefix="$artifacts" "$corpus" || rc=$?
if [ "$rc" -ne 0 ]; then
  echo "fuzz_codec.sh: FAILED (exit $rc); reproducer(s) in $artifacts" >&2
  exit 1
fi
echo "fuzz_codec.sh: no crash in ${secs}s"
