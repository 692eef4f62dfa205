#!/bin/sh
# SPDX-License-Identifier: MIT
# bench/pocl_after_launch.c, built and run: a PoCL binary fetched before the
# first launch (what kcache stores) against one fetched after it, each
# loaded by ROUNDS new processes, every process with PoCL's cache off and a
# fresh POCL_CACHE_DIR. Usage: bench/pocl-after-launch.sh [ROUNDS]
set -eu
rounds=${1:-5}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/pocl-after-launch.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cc -O2 "$here/pocl_after_launch.c" -o "$tmp/pal" -lOpenCL
export POCL_KERNEL_CACHE=0
run() { rm -rf "$tmp/pocl" && mkdir "$tmp/pocl" && POCL_CACHE_DIR="$tmp/pocl" "$tmp/pal" "$@"; }
echo "# $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
run early "$tmp/early.bin"
run late "$tmp/late.bin"
i=1
while [ "$i" -le "$rounds" ]; do
  printf 'early binary: '; run load "$tmp/early.bin"
  printf 'late binary:  '; run load "$tmp/late.bin"
  i=$((i + 1))
done
