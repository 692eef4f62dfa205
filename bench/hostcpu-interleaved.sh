#!/bin/sh
# SPDX-License-Identifier: MIT
# kc_bench_hostcpu of several builds, interleaved (issue 29 items 1-3): each
# build's `kc_bench_hostcpu --json --reps REPS` in turn, ROUNDS rounds, so
# that the builds share the machine's load; then, per build, the median
# over the rounds of each figure, and the ratios the issue sets goals on
# (one thread against C -O3 -march=native, every core against PoCL, one
# core to every core). Each run's JSON line is kept in the output, so
# bench/plot_hostcpu.py can draw any of them.
#
# Usage: bench/hostcpu-interleaved.sh [ROUNDS [REPS]] LABEL=BUILD_DIR...
#   e.g. bench/hostcpu-interleaved.sh 3 5 before=/work/old/build after=build
set -u
rounds=3
reps=5
case "${1:-}" in [0-9]*) rounds=$1; shift ;; esac
case "${1:-}" in [0-9]*) reps=$1; shift ;; esac
[ $# -ge 1 ] || { echo "usage: $0 [ROUNDS [REPS]] LABEL=BUILD_DIR..." >&2; exit 2; }
tmp=$(mktemp "${TMPDIR:-/tmp}/hostcpu-interleaved.XXXXXX")
trap 'rm -f "$tmp"' EXIT
echo "# bench/hostcpu-interleaved.sh $rounds $reps $*"
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
    start=$(date +%s)
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    line=$("$dir/bench/kc_bench_hostcpu" --json --reps "$reps" 2>/dev/null | grep '^{')
    echo "# $label round $r: load at start $load, $(($(date +%s) - start)) s"
    if [ -n "$line" ]; then
      echo "$line"
      echo "$label $line" >>"$tmp"
    else
      echo "# (failed)"
    fi
  done
  r=$((r + 1))
done
python3 - "$tmp" <<'EOF'
import json, statistics, sys

runs = {}
for line in open(sys.argv[1]):
    label, js = line.split(" ", 1)
    runs.setdefault(label, []).append(json.loads(js))
for label, rs in runs.items():
    print("\n%s: medians over %d runs (ms)" % (label, len(rs)))
    threads = rs[0]["threads"]
    print("%-8s %9s %9s %9s %9s %9s %9s  %8s %9s %9s" % (
        "kernel", "C -O3nat", "kc 1t", "kc all", "omp all", "PoCL", "kc 1t/C",
        "PoCL/kc", "1t/all", "(runs)"))
    for i, k in enumerate(rs[0]["kernels"]):
        name = k["name"]
        def med(f):
            v = [f(r["kernels"][i]) for r in rs]
            v = [x for x in v if x > 0]
            return statistics.median(v) if v else -1
        c = med(lambda k: k["c_o3_native_ms"])
        k1 = med(lambda k: k["kcache_ms"][0])
        ka = med(lambda k: k["kcache_ms"][-1])
        oa = med(lambda k: k["c_openmp_ms"][-1])
        cl = med(lambda k: k["opencl_ms"])
        # the ratios: each run's own, then their median
        r1 = statistics.median([r["kernels"][i]["kcache_ms"][0] / r["kernels"][i]["c_o3_native_ms"] for r in rs])
        rcl = (statistics.median([r["kernels"][i]["opencl_ms"] / r["kernels"][i]["kcache_ms"][-1] for r in rs])
               if cl > 0 else -1)
        sp = statistics.median([r["kernels"][i]["kcache_ms"][0] / r["kernels"][i]["kcache_ms"][-1] for r in rs])
        print("%-8s %9.2f %9.2f %9.2f %9.2f %9.2f %8.2fx %8.2fx %8.2fx %9d" % (
            name, c, k1, ka, oa, cl, r1, rcl, sp, len(rs)))
    print("(kc 1t/C: one thread against C -O3 -march=native, goal at most 1.2x; PoCL/kc: PoCL's time over"
          " kcache's on %d threads, goal at least 1.0x; 1t/all: kcache's speedup from 1 to %d threads;"
          " each the median of the runs' own ratios)" % (threads[-1], threads[-1]))
EOF
