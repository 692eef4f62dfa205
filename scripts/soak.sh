#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/soak.sh -- the soak test (RELIABILITY.md, "Soak"): several
# processes with several threads on one store and one redis-server, under
# kill -9, a stopped / restarted / flushed server, a store on a small tmpfs
# that fills up (as root), corrupted entries and compilers killed
# mid-compile. Builds the worker (incrementally), runs tests/reliability/soak.py.
#
#   scripts/soak.sh                       10 minutes, build/
#   scripts/soak.sh --minutes 1           the short run of scripts/test.sh
#   scripts/soak.sh --minutes 30 --procs 6 --threads 4 --seed 7 --build DIR
#   KC_SOAK_LOG=bench/results/soak-X.log scripts/soak.sh   also keeps the output there
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
args=()
while (($#)); do
  case $1 in
  --build) build=$2; shift 2 ;;
  *) args+=("$1"); shift ;;
  esac
done
command -v redis-server >/dev/null || { echo "soak: redis-server is not installed (scripts/deps.sh test)"; exit 77; }
# always (incremental): a worker left from older sources would lack what soak.py asks of it
[[ -f $build/CMakeCache.txt ]] || cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j2 --target soak_worker kcache_cli >/dev/null
if [[ -n ${KC_SOAK_LOG:-} ]]; then
  { echo "# scripts/soak.sh ${args[*]:-} at $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(date -u +%FT%TZ)"
    echo "# $(uname -srm), $(nproc) cores, $(cc --version | head -1)"; } | tee "$KC_SOAK_LOG"
  python3 tests/reliability/soak.py --build "$build" ${args[@]+"${args[@]}"} 2>&1 | tee -a "$KC_SOAK_LOG"
  exit "${PIPESTATUS[0]}"
fi
exec python3 tests/reliability/soak.py --build "$build" ${args[@]+"${args[@]}"}
