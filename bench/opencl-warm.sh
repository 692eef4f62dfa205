#!/bin/sh
# SPDX-License-Identifier: MIT
# The OpenCL warm start of several builds, interleaved (issue 29 item 5):
# kc_bench_store --json for the OpenCL backend with PoCL's own kernel cache
# off, then on (fresh per run), then on and already holding the kernel
# (opencl+poclwarm: only kcache's store cold), for each build in turn,
# ROUNDS rounds, so that the builds share the machine's load. PoCL's cache is off in this
# process too, so the disk hit's trial load and link are PoCL's real work.
#
# Usage: bench/opencl-warm.sh [ROUNDS] LABEL=BUILD_DIR...
#   e.g. bench/opencl-warm.sh 4 27a3195=/work/old/build main=/work/main/build new=build
set -u
rounds=3
case "${1:-}" in [0-9]*) rounds=$1; shift ;; esac
[ $# -ge 1 ] || { echo "usage: $0 [ROUNDS] LABEL=BUILD_DIR..." >&2; exit 2; }
export POCL_KERNEL_CACHE=0
echo "# $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(nproc) cores, $(uname -r)"
for b in "$@"; do
  dir=${b#*=}
  echo "# ${b%%=*}: $dir ($(git -C "$dir/.." log -1 --format='%h %s' 2>/dev/null | cut -c1-72))"
done
r=1
while [ "$r" -le "$rounds" ]; do
  for b in "$@"; do
    label=${b%%=*}
    dir=${b#*=}
    for be in opencl opencl+pocl opencl+poclwarm; do
      printf '%s round %d load %s ' "$label" "$r" "$(cut -d' ' -f1 /proc/loadavg)"
      "$dir/bench/kc_bench_store" --json --runs 5 --backend "$be" 2>/dev/null | grep '"backend"' || echo "(failed)"
    done
  done
  r=$((r + 1))
done
