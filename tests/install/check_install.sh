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
# linreg's self-contained mode starts its own etcd with the CLI's helper (cli/etcd_local.c and
# the certificates it can make, cli/certs.c: not part of the library), compiled in beside it.
cflags=$(PKG_CONFIG_PATH="$pc" pkg-config --cflags geotrain)
for f in etcd_local certs; do
  "$cc" -std=c11 -D_GNU_SOURCE -Wall -Werror -Wno-format-truncation -c "$src/cli/$f.c" $cflags \
    -o "$tmp/$f.o"
done
"$cc" -std=c11 -Wall -Werror -I "$src/cli" "$src/tests/install/linreg.c" "$tmp/etcd_local.o" \
  "$tmp/certs.o" $flags $(pkg-config --libs libcurl libcrypto) -Wl,-rpath,"$libdir" -o "$tmp/linreg"
"$tmp/linreg"
# The same program as the trainer of `geotrain launch CONFIG -- CMD`: two sites, encrypted,
# etcd and keys made by launch, the program told its site through GT_* variables.
cat > "$tmp/two.yaml" <<'YAML'
run: {name: linreg-launch, rounds: 6, log_every: 10}
inner: {steps: 20}
outer: {overlap_steps: 4}
codec: {name: int8, block_size: 16}
wan: {lanes: 1}
membership: {lease_ttl_s: 3, heartbeat_ms: 500}
sites:
  - {name: east, address: "127.0.0.1:0"}
  - {name: west, address: "127.0.0.1:0"}
YAML
"$tmp/prefix/bin/geotrain" launch "$tmp/two.yaml" --run-dir "$tmp/run" --etcd-members 1 \
  -- "$tmp/linreg" > "$tmp/launch.log" 2>&1 || { cat "$tmp/launch.log"; exit 1; }
python3 - "$tmp/run/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
for name, site in s["sites"].items():
    assert site["status"] == "finished" and site["rounds_applied"] == 6, (name, site)
    assert site["final_loss"] < 0.1, (name, site["final_loss"])
c = s["contributions"]
assert c["on_time"] == 6 * 2 * 2 and c["dropped"] == 0, c
assert s["hash_checks"] >= 2 * 5 and s["hash_mismatches"] == 0, s
print("launch -- linreg: both sites finished, %d contributions on time, %d hash checks"
      % (c["on_time"], s["hash_checks"]))
PY
# The Python package: cmake --install asks the Python for its site directory under the prefix.
# Debian's /usr/bin/python3 imports what a /usr/local (the default) or /usr install puts there.
for p in /usr/local /usr; do
  d=$(/usr/bin/python3 "$src/python/install_dir.py" "$p")
  /usr/bin/python3 -c 'import sys; sys.exit(sys.argv[1] not in sys.path)' "$d" ||
    { echo "install_dir.py $p gives $d, not on /usr/bin/python3's path"; exit 1; }
done
# Installed into a virtual environment (GT_PYTHON: its Python), it imports with no PYTHONPATH
# and finds the library installed beside it by itself (no GT_LIBRARY).
/usr/bin/python3 -m venv --system-site-packages --without-pip "$tmp/venv"
GT_PYTHON="$tmp/venv/bin/python" cmake --install "$bin" --prefix "$tmp/venv" > "$tmp/venv.log"
grep "Python package is in $tmp/venv/lib/python3" "$tmp/venv.log" ||
  { echo "cmake --install did not say where the package went:"; cat "$tmp/venv.log"; exit 1; }
(cd "$tmp" && env -u GT_LIBRARY -u PYTHONPATH "$tmp/venv/bin/python" -c \
  'import geotrain.diloco as d, sys; lib = d._library()._name; print("python: geotrain", __import__("geotrain").__version__, "from", d.__file__, "loads", lib); sys.exit(not lib.startswith(sys.argv[1]))' "$tmp/venv/")
# pip install ./python (a copy: pip builds in the tree) into a second one, against the library
# of the first prefix, found through its pkg-config file.
cp -r "$src/python" "$tmp/pysrc"
/usr/bin/python3 -m venv --system-site-packages --without-pip "$tmp/venv2"
"$tmp/venv2/bin/python" -m pip install -q --no-build-isolation --no-deps "$tmp/pysrc"
(cd "$tmp" && env -u GT_LIBRARY -u PYTHONPATH PKG_CONFIG_PATH="$pc" "$tmp/venv2/bin/python" -c \
  'import geotrain.diloco as d, os, sys; lib = os.path.realpath(d._library()._name); print("pip: loads", lib); sys.exit(not lib.startswith(sys.argv[1]))' "$tmp/prefix/")
"$tmp/prefix/bin/geotrain" --version
echo "install check passed"
