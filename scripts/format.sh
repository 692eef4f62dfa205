#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/format.sh -- clang-format (.clang-format) over every C file that
# git tracks; with --check, changes nothing and fails if a file is not in
# that style (scripts/test.sh runs it so).
#
#   scripts/format.sh [--check]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
fmt=${CLANG_FORMAT:-clang-format}
command -v "$fmt" >/dev/null || { echo "format: $fmt not found (apt-get install clang-format)" >&2; exit 1; }
# The style is clang-format 14's (Debian 12); another version formats some
# lines differently, so the check would fail on code that is in style.
ver=$("$fmt" --version | sed -nE 's/.*version ([0-9]+).*/\1/p')
if [[ $ver != 14 ]]; then
  echo "format: $fmt is version ${ver:-unknown}; the style is clang-format 14's (Debian 12: apt-get install clang-format-14, then CLANG_FORMAT=clang-format-14)" >&2
  exit 1
fi
# fuzz inputs (tests/fuzz/corpus, tests/fuzz/regress) are data, kept byte for byte
mapfile -t files < <(git ls-files '*.c' '*.h' | grep -v '^tests/fuzz/\(corpus\|regress\)/')
if [[ ${1:-} == --check ]]; then
  bad=0
  for f in "${files[@]}"; do
    if ! "$fmt" --style=file "$f" | cmp -s - "$f"; then
      echo "format: $f is not formatted (scripts/format.sh formats it)"
      bad=$((bad + 1))
    fi
  done
  echo "format: ${#files[@]} files, $bad not formatted"
  ((bad == 0))
else
  "$fmt" --style=file -i "${files[@]}"
fi
