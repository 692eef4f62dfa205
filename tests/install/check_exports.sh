#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_exports.sh LIB HEADER [CC] -- the export test of a shared libkcache:
#  - `nm -D --defined-only LIB` lists exactly the functions that HEADER
#    (include/kcache.h) declares, each in version node KCACHE_0, and nothing
#    else but the version node itself;
#  - no call inside LIB goes through its own PLT to a kc_ function.
# The header's declarations are the `kc_name (` of its text once it went
# through the preprocessor (CC -E: no comments, no macro definitions; the
# system headers it includes name no kc_).
# Exits 77 (skipped) for a static library or without nm/objdump.
set -euo pipefail
lib=$1 header=$2 cc=${3:-cc}
case $lib in
*.a) echo "SKIPPED: $lib is a static library (BUILD_SHARED_LIBS=OFF)"; exit 77 ;;
esac
for t in nm objdump "$cc"; do
  command -v "$t" >/dev/null || { echo "SKIPPED: $t not found"; exit 77; }
done
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$cc" -E -P "$header" | grep -v '^[[:space:]]*#' |
  grep -oE '\bkc_[A-Za-z0-9_]+[[:space:]]*\(' | sed 's/[[:space:](]//g' | sort -u >"$tmp/declared"
[[ -s $tmp/declared ]] || { echo "FAIL: no kc_ function declarations found in $header"; exit 1; }

nm -D --defined-only "$lib" >"$tmp/nm"
# "ADDRESS TYPE NAME@@VERSION"; the version node is "0 A KCACHE_0".
: >"$tmp/exported"
while read -r addr type name rest; do
  [[ -z $name ]] && { name=$type type=$addr; }
  if [[ $type == A && $name == KCACHE_0 ]]; then continue; fi
  if [[ $name != *@@KCACHE_0 ]]; then
    echo "FAIL: exported symbol not in version KCACHE_0: $type $name $rest"
    fail=1
  fi
  if [[ $type != T ]]; then
    echo "FAIL: exported symbol is not a function (nm type $type): $name"
    fail=1
  fi
  echo "${name%%@*}" >>"$tmp/exported"
done <"$tmp/nm"
sort -u -o "$tmp/exported" "$tmp/exported"
grep -q '^[0-9a-f]* A KCACHE_0$' "$tmp/nm" || { echo "FAIL: no version node KCACHE_0 in $lib"; fail=1; }

if ! diff -u --label declared-in-kcache.h --label exported-by-libkcache "$tmp/declared" "$tmp/exported"; then
  echo "FAIL: the exports differ from the header's functions (- declared only, + exported only)"
  fail=1
fi

if objdump -d "$lib" | grep -E '(call|jmp).*<kc_[A-Za-z0-9_]*@plt>'; then
  echo "FAIL: calls inside $lib through its own PLT (above)"
  fail=1
fi
((fail == 0)) || exit 1
echo "ok: $(wc -l <"$tmp/exported") functions exported, all kc_ in KCACHE_0, as declared in $(basename "$header"); no kc_ call through the PLT"
