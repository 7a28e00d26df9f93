#!/usr/bin/env bash
# Every GT_ environment variable geotrain reads — getenv("GT_...") in the C sources outside
# tests/, os.environ in the Python package — has a row in docs/api.md's Environment table, and
# the table names no variable that nothing reads. Usage: check_env_table.sh SOURCE_DIR
set -euo pipefail
src=$1
doc="$src/docs/api.md"
read_by_code=$(
  { grep -rhoE 'getenv\("GT_[A-Z0-9_]+"\)' --include='*.c' --include='*.h' --include='*.cu' \
      "$src"/base "$src"/compress "$src"/kernels "$src"/topology "$src"/wan "$src"/outer \
      "$src"/diloco "$src"/local "$src"/cli
    grep -rhoE 'environ(\.get)?[(\[]"GT_[A-Z0-9_]+"' --include='*.py' "$src"/python; } |
    grep -oE 'GT_[A-Z0-9_]+' | sort -u)
table=$(sed -n '/^### Environment$/,/^##/p' "$doc" | grep '^| `GT_' | cut -d'|' -f2 |
  grep -oE 'GT_[A-Z0-9_]+' | sort -u)
[ -n "$read_by_code" ] || { echo "no GT_ variable found in the sources under $src"; exit 1; }
[ -n "$table" ] || { echo "$doc has no Environment table"; exit 1; }
missing=$(comm -23 <(echo "$read_by_code") <(echo "$table"))
stale=$(comm -13 <(echo "$read_by_code") <(echo "$table"))
# read in a library module through a helper rather than a literal getenv (faults.c's table)
for v in $stale; do
  grep -rqE "\"$v\"" "$src"/diloco "$src"/cli "$src"/local "$src"/wan "$src"/python && stale=$(echo "$stale" | grep -vx "$v" || true)
done
[ -z "$missing" ] || { echo "read by the code, not in $doc's Environment table:"; echo "$missing"; exit 1; }
[ -z "$stale" ] || { echo "in $doc's Environment table, read by nothing:"; echo "$stale"; exit 1; }
echo "$(echo "$read_by_code" | wc -l) GT_ variables read, every one in the table"
