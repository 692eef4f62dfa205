#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# test_cxx.sh INCLUDE_DIR LIBRARY CC [CXXFLAGS] -- kcache.h from C++:
# builds cxx_app.cpp with the C++ compiler of the build's C compiler CC
# (gcc: g++, clang: clang++, cc: c++; $CXX overrides), so that a sanitizer
# build links one runtime, at -std=c++17 -Wall -Wextra -Wpedantic -Werror
# against the build (LIBRARY: libkcache.so or libkcache.a) and runs it on
# the host backend: it must say "as expected". Exit 77 (skipped) when that
# C++ compiler is not installed.
set -euo pipefail
inc=$1 lib=$2 cc=$3 flags=${4:-}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [[ -n ${CXX:-} ]]; then
  cxx=$CXX
else # /usr/bin/gcc-12 -> /usr/bin/g++-12, clang-14 -> clang++-14, cc -> c++
  base=$(basename "$cc")
  case $base in
  *clang*) cxx=${base/clang/clang++} ;;
  *gcc*) cxx=${base/gcc/g++} ;;
  *) cxx=c++ ;;
  esac
  [[ $cc == */* ]] && [[ -x $(dirname "$cc")/$cxx ]] && cxx=$(dirname "$cc")/$cxx
fi
command -v "$cxx" >/dev/null || { echo "SKIP: no C++ compiler $cxx for $cc (set CXX)"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kc_cxx.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# shellcheck disable=SC2086 # flags is a list of flags
"$cxx" -std=c++17 -Wall -Wextra -Wpedantic -Werror $flags -I"$inc" "$here/cxx_app.cpp" "$lib" \
  -Wl,-rpath,"$(dirname "$lib")" -ldl -lpthread -o "$tmp/app"
out=$("$tmp/app")
echo "$out"
grep -q 'as expected$' <<<"$out" || { echo "FAIL: the C++ program did not say 'as expected'"; exit 1; }
