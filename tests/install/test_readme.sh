#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_readme.sh README INCLUDE_DIR LIBRARY CC [CFLAGS [NAME]] -- compiles
# README's example program NAME (app.c by default; see extract_example.sh)
# against the build (the header in INCLUDE_DIR, LIBRARY:
# libkcache.so or libkcache.a) and runs it on the default backend with a
# temporary disk cache: it must exit 0 and say "as expected".
set -euo pipefail
readme=$1 inc=$2 lib=$3 cc=$4 cflags=${5:-} name=${6:-app.c}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kc_readme.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$here/extract_example.sh" "$readme" "$name" >"$tmp/app.c"
# shellcheck disable=SC2086 # CFLAGS is a list of flags
"$cc" $cflags -Wall -Wextra -Werror -I"$inc" "$tmp/app.c" "$lib" -Wl,-rpath,"$(dirname "$lib")" \
  -ldl -lpthread -o "$tmp/app"
out=$(KC_CACHE_DIR=$tmp/cache "$tmp/app")
echo "$out"
grep -q 'as expected$' <<<"$out" || { echo "FAIL: the example did not say 'as expected'"; exit 1; }
