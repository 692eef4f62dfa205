#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/oracle.sh -- the long run of the differential oracle
# (tests/reliability/test_oracle.c, RELIABILITY.md "Oracle"): several
# processes, each on its own seed, for a given time (or until the processes
# together have run a given number of steps), on the host backend
# (tcc) with the pinning and collecting threads; then the OpenCL backend for
# a bounded number of steps. Writes one log with every process's summary
# and a total.
#
#   scripts/oracle.sh [--minutes M (60) | --steps N] [--procs P (2)] [--seed S (1)]
#                     [--opencl-steps N (300)] [--build DIR (build)]
#   (--steps N: each process runs N/P steps, however long that takes)
#   KC_ORACLE_LOG=FILE  (default: build/oracle.log)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
minutes=60 steps=0 procs=2 seed=1 ocl=300 build=build
while (($#)); do
  case $1 in
  --minutes) minutes=$2; shift 2 ;;
  --steps) steps=$2; shift 2 ;;
  --procs) procs=$2; shift 2 ;;
  --seed) seed=$2; shift 2 ;;
  --opencl-steps) ocl=$2; shift 2 ;;
  --build) build=$2; shift 2 ;;
  *) echo "usage: $0 [--minutes M | --steps N] [--procs P] [--seed S] [--opencl-steps N] [--build DIR]" >&2; exit 2 ;;
  esac
done
exe=$build/tests/reliability/test_oracle
if [[ ! -x $exe ]]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$build" --target test_oracle -j"$(nproc)" >/dev/null
fi
log=${KC_ORACLE_LOG:-$build/oracle.log}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
{
  if ((steps)); then how="--steps $steps"; else how="--minutes $minutes"; fi
  echo "# scripts/oracle.sh $how --procs $procs --seed $seed --opencl-steps $ocl"
  echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) cores"
} >"$log"
rc=0
pids=()
for ((p = 0; p < procs; p++)); do
  if ((steps)); then limit=(KC_ORACLE_STEPS=$(((steps + procs - 1) / procs))); else limit=(KC_ORACLE_SECONDS=$((minutes * 60))); fi
  env KC_ORACLE_SEED=$((seed + p)) "${limit[@]}" "$exe" --backend host >"$dir/host$p.log" 2>&1 &
  pids+=($!)
done
for p in "${!pids[@]}"; do
  wait "${pids[$p]}" || rc=1
done
if ((ocl > 0)); then
  KC_ORACLE_SEED=$seed KC_ORACLE_STEPS=$ocl "$exe" --backend opencl >"$dir/opencl.log" 2>&1 || rc=1
fi
steps=0 compared=0 pinned=0 collects=0 mismatches=0
for f in "$dir"/*.log; do
  echo "## $(basename "$f" .log)" >>"$log"
  grep -E '^(RELIABILITY|oracle:|ERROR|\[  FAILED)' "$f" >>"$log" || true
  line=$(grep -E '^RELIABILITY: oracle_' "$f" || true)
  [[ -n $line ]] || { mismatches=$((mismatches + 1)); continue; }
  n() { sed -nE "s/.* ([0-9]+) $1.*/\1/p" <<<"$line"; }
  steps=$((steps + $(n steps))) compared=$((compared + $(n 'launches compared')))
  pinned=$((pinned + $(sed -nE 's/.*\(([0-9]+) (more )?in pinned.*/\1/p' <<<"$line")))
  collects=$((collects + $(n 'collects')))
done
echo "total: $steps steps, $compared launches compared with a cold compile in the latest world ($pinned more in pinned worlds)," \
  "$collects collects beside them, $mismatches runs with a mismatch or a crash" | tee -a "$log"
exit $rc
