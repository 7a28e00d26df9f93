#!/usr/bin/env bash
# quickstart.sh — the README's two commands.
#   ./quickstart.sh demo   install what is needed, build, run the default demo
#   ./quickstart.sh test   install what is needed, build, run the whole test suite
# Both are idempotent; the build lives in ./build.
set -euo pipefail
cd "$(dirname "$0")"

what=${1:-}
case "$what" in
  demo|test) ;;
  *) echo "usage: ./quickstart.sh demo|test" >&2; exit 2 ;;
esac

./scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j "$(nproc)"

if [ "$what" = test ]; then
  # The whole suite in parallel: -j is 2 x the CPUs and each test declares its share in
  # PROCESSORS units of half a core (tests/CMakeLists.txt), so the adversarial tests (mostly
  # sleeps) run several at a time, the launch tests two at a time on 2 cores, and the tests
  # that train flat out, or compare waits, alone.
  exec ctest --test-dir build --output-on-failure --timeout 900 -j "$((3 * $(nproc)))"
fi
exec ./scripts/demo.sh
