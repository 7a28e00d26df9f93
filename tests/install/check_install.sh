#!/usr/bin/env bash
# check_install.sh — `cmake --install` into a temporary prefix, then build and run programs
# outside the tree against it with pkg-config (geotrain.pc, libgeotrain.so, the headers):
# consumer.c (a codec round trip) and linreg.c (a linear regression of its own trained across
# two sites, with a real etcd, through the C API of gt_diloco.h).
# Usage: check_install.sh BINARY_DIR SOURCE_DIR CC
set -euo pipefail
bin=$1 src=$2 cc=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$bin" --prefix "$tmp/prefix" > "$tmp/install.log"
pc=$(dirname "$(find "$tmp/prefix" -name geotrain.pc | head -1)")
[ -n "$pc" ] || { echo "no geotrain.pc installed"; exit 1; }
[ -x "$tmp/prefix/bin/geotrain" ] || { echo "no geotrain binary installed"; exit 1; }
flags=$(PKG_CONFIG_PATH="$pc" pkg-config --cflags --libs geotrain)
libdir=$(PKG_CONFIG_PATH="$pc" pkg-config --variable=libdir geotrain)
"$cc" -std=c11 -Wall -Werror "$src/tests/install/consumer.c" $flags -Wl,-rpath,"$libdir" \
  -o "$tmp/consumer"
"$tmp/consumer"
"$cc" -std=c11 -Wall -Werror "$src/tests/install/linreg.c" $flags -Wl,-rpath,"$libdir" \
  -o "$tmp/linreg"
"$tmp/linreg"
"$tmp/prefix/bin/geotrain" --version
echo "install check passed"
