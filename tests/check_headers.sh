#!/usr/bin/env bash
# Compiles every public header (<folder>/gt_<folder>.h and base/gt_base.h; not *_internal.h)
# alone, as C11 with -pedantic and as C++, so each includes what it uses and has its
# extern "C" guards. Usage: check_headers.sh CC CXX SOURCE_DIR
set -euo pipefail
cc=$1 cxx=$2 src=$3
incs=()
for d in "$src"/*/; do incs+=(-I "$d"); done
n=0
for h in "$src"/*/gt_*.h; do
  case "$h" in *_internal.h|*/tests/*|*/cli/*) continue ;; esac
  echo "#include \"$h\"" | "$cc" -std=c11 -pedantic -Wall -Wextra -Werror "${incs[@]}" -fsyntax-only -x c - \
    || { echo "FAIL (C11): $h"; exit 1; }
  echo "#include \"$h\"" | "$cxx" -std=c++17 -Wall -Wextra -Werror "${incs[@]}" -fsyntax-only -x c++ - \
    || { echo "FAIL (C++): $h"; exit 1; }
  echo "ok: ${h#$src/}"
  n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "no public headers found under $src"; exit 1; }
echo "$n headers compile alone"
