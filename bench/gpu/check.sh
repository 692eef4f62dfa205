#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/gpu/check.sh -- the GPU check: on a machine with an NVIDIA GPU, its
# driver and the CUDA toolkit, build kcache from scratch (build-gpu/), run the
# whole test suite with the CUDA backend, then the CUDA benchmark, and print
# a short table at the end.
#
#   bench/gpu/check.sh            # from anywhere; exit status 0 iff all passed
#
# It installs nothing and needs no network; it only reads the GPU's state
# (nvidia-smi -L / --query-gpu) and never changes a GPU setting. Every step
# runs under a time limit so the whole check ends in about 7 minutes
# (KC_CHECK_BUDGET seconds, default 420). Logs are kept in build-gpu/check/.
#
# Environment: CUDA_HOME (default: from nvcc on PATH, else /usr/local/cuda),
# KC_CHECK_JOBS (parallel tests, default min(nproc, 8)), KC_CHECK_BUDGET.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$(pwd)
BUILD="$ROOT/build-gpu"
LOGS="$BUILD/check"
BUDGET=${KC_CHECK_BUDGET:-420}
T0=$(date +%s)
JOBS=${KC_CHECK_JOBS:-$(n=$(nproc 2>/dev/null || echo 4); echo $((n > 8 ? 8 : n)))}

left() { echo $((BUDGET - ($(date +%s) - T0))); }
# limit CAP: the smaller of CAP seconds and what is left of the budget (>= 1)
limit() { local l; l=$(left); ((l > $1)) && l=$1; ((l < 1)) && l=1; echo "$l"; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

declare -a ROWS=()
row() { ROWS+=("$(printf '%-26s %-10s %8s  %s' "$1" "$2" "$3" "${4:-}")"); }
OVERALL=0
BUILT=0

echo "== kcache GPU check ($(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -n))"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi -L || true
  GPU=$(nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>/dev/null |
    head -1 || true)
else
  echo "nvidia-smi: not found"
  GPU=""
fi

if [[ -z "${CUDA_HOME:-}" ]]; then
  if command -v nvcc >/dev/null 2>&1; then
    CUDA_HOME=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
  elif [[ -d /usr/local/cuda ]]; then
    CUDA_HOME=/usr/local/cuda
  fi
fi
export CUDA_HOME=${CUDA_HOME:-}
echo "CUDA_HOME=${CUDA_HOME:-(unset)}"
if [[ -n "$CUDA_HOME" && -x "$CUDA_HOME/bin/nvcc" ]]; then
  "$CUDA_HOME/bin/nvcc" --version | tail -2 || true
fi

rm -rf "$BUILD"
mkdir -p "$LOGS"

# ---------------------------------------------------------------- configure
GEN=()
command -v ninja >/dev/null 2>&1 && GEN=(-G Ninja)
# A GPU machine without network may lack libcmocka-dev / libxxhash-dev: a
# folder .gpu-deps/{include,lib} with their headers and library (copied from
# a Debian machine, never committed) stands in for them; .gpu-deps/bin (with
# its libraries in lib/) for redis-server and other programs.
if [[ -d "$ROOT/.gpu-deps" ]]; then
  # exported, so that the builds the tests make (install, static,
  # subproject) and the Python package's find them too
  export CMAKE_PREFIX_PATH="$ROOT/.gpu-deps${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  GEN+=(-DCMAKE_PREFIX_PATH="$ROOT/.gpu-deps")
  export LD_LIBRARY_PATH="$ROOT/.gpu-deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # .gpu-deps/bin: redis-server for the Redis tier's tests, if copied there
  [[ -d "$ROOT/.gpu-deps/bin" ]] && export PATH="$ROOT/.gpu-deps/bin:$PATH"
fi
# shellcheck disable=SC2206
GEN+=(${KC_CHECK_CMAKE_ARGS:-})
t=$(now)
if timeout "$(limit 60)" cmake -S "$ROOT" -B "$BUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release \
  >"$LOGS/configure.txt" 2>&1; then
  row configure ok "$(secs "$t" "$(now)")"
else
  tail -30 "$LOGS/configure.txt"
  row configure FAILED "$(secs "$t" "$(now)")" "see $LOGS/configure.txt"
  OVERALL=1
fi

# -------------------------------------------------------------------- build
if ((OVERALL == 0)); then
  t=$(now)
  if timeout "$(limit 150)" cmake --build "$BUILD" -j "$(nproc 2>/dev/null || echo 4)" \
    >"$LOGS/build.txt" 2>&1; then
    row build ok "$(secs "$t" "$(now)")"
    BUILT=1
  else
    tail -40 "$LOGS/build.txt"
    row build FAILED "$(secs "$t" "$(now)")" "see $LOGS/build.txt"
    OVERALL=1
  fi
fi

# -------------------------------------------------------------------- tests
# Parses ctest's per-test lines into rows: name, result, seconds.
ctest_rows() {
  sed -nE 's/^ *[0-9]+\/[0-9]+ +Test +#[0-9]+: +([^ ]+) +\.*[ *]*([A-Za-z][A-Za-z ]*[A-Za-z]).* ([0-9.]+) sec.*$/\1|\2|\3/p' "$1" |
    while IFS='|' read -r name res sec; do
      printf '  %-24s %-10s %8s\n' "$name" "$res" "$sec"
    done
}
ctest_count() { # passed failed skipped
  local p f s
  p=$(grep -cE ' Passed +[0-9.]+ sec' "$1" || true)
  s=$(grep -cE 'Skipped +[0-9.]+ sec' "$1" || true)
  f=$(grep -cE '\*\*\*(Failed|Timeout|Exception)|Not Run| Failed +[0-9.]+ sec' "$1" || true)
  echo "$p passed, $f failed, $s skipped"
}
TESTS_TABLE=""
SKIPS=""
if ((BUILT)); then
  if [[ -f "$BUILD/CTestTestfile.cmake" ]]; then
    t=$(now)
    echo "== ctest (KC_BACKEND=cuda, -j $JOBS)"
    if KC_BACKEND=cuda timeout "$(limit 240)" ctest --test-dir "$BUILD" --output-on-failure \
      -j "$JOBS" 2>&1 | tee "$LOGS/ctest.txt"; then
      res=ok
    else
      res=FAILED
      OVERALL=1
    fi
    row "tests (all backends)" "$res" "$(secs "$t" "$(now)")" "$(ctest_count "$LOGS/ctest.txt")"
    TESTS_TABLE=$(ctest_rows "$LOGS/ctest.txt")
    # ctest shows no output for skipped tests; their reasons are in its log.
    SKIPS=$(grep -hE '^SKIPPED' "$BUILD/Testing/Temporary/LastTest.log" 2>/dev/null | sort | uniq -c || true)
    # Every CUDA test must have run here: a skip on a GPU machine is a failure.
    if grep -qE 'Test +#[0-9]+: +[^ ]*_cuda .*Skipped' "$LOGS/ctest.txt"; then
      row "cuda tests ran" FAILED "" "CUDA tests skipped on a GPU machine (reasons below)"
      OVERALL=1
    fi

    # The driver-JIT path: the CUDA tests again with PTX instead of cubins.
    if (($(left) > 100)); then
      t=$(now)
      echo "== ctest -L cuda with KC_CUDA_FORCE_PTX=1 (PTX, JIT-compiled by the driver)"
      if KC_BACKEND=cuda KC_CUDA_FORCE_PTX=1 timeout "$(limit 60)" ctest --test-dir "$BUILD" \
        --output-on-failure -L cuda -j "$JOBS" 2>&1 | tee "$LOGS/ctest-ptx.txt"; then
        res=ok
      else
        res=FAILED
        OVERALL=1
      fi
      row "cuda tests via PTX" "$res" "$(secs "$t" "$(now)")" "$(ctest_count "$LOGS/ctest-ptx.txt")"
    else
      row "cuda tests via PTX" skipped "" "not enough time left"
    fi
  else
    row tests "NOT RUN" "" "no CTest files in $BUILD (tests not configured?)"
    OVERALL=1
  fi
fi

# --------------------------------------------------------------------- demo
if ((BUILT)) && [[ -x "$BUILD/kc_demo" ]]; then
  t=$(now)
  echo "== kc_demo (KC_BACKEND=cuda)"
  if KC_BACKEND=cuda timeout "$(limit 60)" "$BUILD/kc_demo" 2>&1 | tee "$LOGS/demo.txt"; then
    row "demo (cuda)" ok "$(secs "$t" "$(now)")"
  else
    row "demo (cuda)" FAILED "$(secs "$t" "$(now)")" "see $LOGS/demo.txt"
    OVERALL=1
  fi
fi

# ------------------------------------- interop: the caller's driver objects
# tests/interop/test_interop_cuda.c (also in the ctest run above): a primary
# context the test retained, its non-blocking stream and cuMemAlloc memory
# handed to kcache; shared memory, cooperative and cluster launches; a graph
# capture (an unprepared kernel refused with KC_EBUSY) and its replay. Run
# again here so that its lines show in the summary.
ITEST="$BUILD/tests/interop/test_interop_cuda"
if ((BUILT)) && [[ -x "$ITEST" ]]; then
  t=$(now)
  echo "== $ITEST --backend cuda"
  if timeout "$(limit 60)" "$ITEST" --backend cuda 2>&1 | tee "$LOGS/interop.txt"; then
    if grep -q '^SKIPPED' "$LOGS/interop.txt"; then
      row "interop + capture (cuda)" FAILED "$(secs "$t" "$(now)")" "skipped on a GPU machine"
      OVERALL=1
    else
      row "interop + capture (cuda)" ok "$(secs "$t" "$(now)")"
    fi
  else
    row "interop + capture (cuda)" FAILED "$(secs "$t" "$(now)")" "see $LOGS/interop.txt"
    OVERALL=1
  fi
fi

# ---------------------------------------------------------------- benchmark
BENCH="$BUILD/bench/kc_bench_cuda"
if [[ -x "$BENCH" ]]; then
  t=$(now)
  echo "== $BENCH"
  if KC_BACKEND=cuda timeout "$(limit 90)" "$BENCH" 2>&1 | tee "$LOGS/bench.txt"; then
    row "benchmark (cuda)" ok "$(secs "$t" "$(now)")"
  else
    row "benchmark (cuda)" FAILED "$(secs "$t" "$(now)")" "see $LOGS/bench.txt"
    OVERALL=1
  fi
elif ((BUILT)); then
  row "benchmark (cuda)" MISSING "" "build-gpu/bench/kc_bench_cuda does not exist in this tree"
  OVERALL=1
else
  row "benchmark (cuda)" "NOT RUN" "" "build failed"
fi

# ------------------------------------------- disk cache: warm vs cold start
SBENCH="$BUILD/bench/kc_bench_store"
if ((BUILT)) && [[ -x "$SBENCH" ]] && (($(left) > 40)); then
  t=$(now)
  echo "== $SBENCH --backend cuda --quick"
  if timeout "$(limit 90)" "$SBENCH" --backend cuda --quick 2>&1 | tee "$LOGS/bench-store.txt"; then
    row "disk cache bench (cuda)" ok "$(secs "$t" "$(now)")"
  else
    row "disk cache bench (cuda)" FAILED "$(secs "$t" "$(now)")" "see $LOGS/bench-store.txt"
    OVERALL=1
  fi
fi

# ------------------------------------------- cold start on every core (NVRTC)
# kc_bench_scale's cold start: 50 kernels prepared in a new process on one
# compile thread and on one per core, CUDA (NVRTC + link), then the host
# backend with cc -O2 if time is left (goal: at least 8x on 16 cores).
SCALE="$BUILD/bench/kc_bench_scale"
if ((BUILT)) && [[ -x "$SCALE" ]] && (($(left) > 60)); then
  for be in cuda host; do
    (($(left) > 40)) || { row "cold start ($be)" skipped "" "not enough time left"; continue; }
    t=$(now)
    echo "== $SCALE --skip-costs --cold-backend $be"
    if timeout "$(limit 90)" "$SCALE" --skip-costs --cold-backend "$be" 2>&1 | tee "$LOGS/cold-$be.txt"; then
      row "cold start ($be)" ok "$(secs "$t" "$(now)")" "$(grep -E '^  (cuda|host) ' "$LOGS/cold-$be.txt" | tr -s ' ')"
    else
      row "cold start ($be)" FAILED "$(secs "$t" "$(now)")" "see $LOGS/cold-$be.txt"
      OVERALL=1
    fi
  done
fi

# ------------------------------------------------- the Python package (cuda)
# Built with CMake (KC_PYTHON, libkcache static; the OpenCL compile helper
# kcache-clc named by KC_OPENCL_HELPER: a build tree's library does not look
# beside the module as a wheel's does) and tested with pytest when
# this machine's python3 has the headers, pytest and numpy (nothing is
# installed: no network); python/tests skip CuPy and PyTorch cases without them.
if ((BUILT)) && (($(left) > 60)) && python3 -c 'import pytest, numpy, sysconfig, os, sys;
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' 2>/dev/null; then
  t=$(now)
  PYB="$BUILD-python"
  echo "== the Python package: cmake -DKC_PYTHON=ON in $PYB, pytest python/tests"
  if timeout "$(limit 120)" bash -c "cmake -S '$ROOT' -B '$PYB' -DKC_PYTHON=ON -DBUILD_SHARED_LIBS=OFF \
      -DKC_BUILD_TESTS=OFF -DKC_BUILD_BENCH=OFF -DKC_BUILD_DEMO=OFF -DPython_EXECUTABLE=$(command -v python3) &&
      cmake --build '$PYB' -j$JOBS --target kcache_python kcache-clc" >"$LOGS/python-build.txt" 2>&1 &&
    (cd "$BUILD" && KC_OPENCL_HELPER="$PYB/kcache-clc" PYTHONPATH="$PYB/python" timeout "$(limit 120)" python3 -m pytest -q -rs -p no:cacheprovider \
      "$ROOT/python/tests") 2>&1 | tee "$LOGS/python.txt" | tail -3 && [[ ${PIPESTATUS[0]} == 0 ]]; then
    row "python (all backends)" ok "$(secs "$t" "$(now)")" "$(tail -1 "$LOGS/python.txt")"
  else
    row "python (all backends)" FAILED "$(secs "$t" "$(now)")" "see $LOGS/python-build.txt, $LOGS/python.txt"
    OVERALL=1
  fi
  # The launch from Python against kcache's C launch and CuPy's RawKernel.
  if [[ -f "$PYB/python/kcache/__init__.py" ]] && (($(left) > 30)); then
    t=$(now)
    echo "== python/bench/bench_launch.py --only cuda"
    if (cd "$BUILD" && PYTHONPATH="$PYB/python" timeout "$(limit 60)" python3 "$ROOT/python/bench/bench_launch.py" \
      --only cuda --both --rounds 201) >"$LOGS/python-bench.txt" 2>&1; then
      row "python launch bench" ok "$(secs "$t" "$(now)")"
    else
      row "python launch bench" FAILED "$(secs "$t" "$(now)")" "see $LOGS/python-bench.txt"
      OVERALL=1
    fi
  fi
else
  row "python (all backends)" skipped "" "no python3 with headers, pytest and numpy here (or no time left)"
fi

# ------------------------------------------------------------------ summary
echo
echo "================================ kcache GPU check ================================"
echo "GPU:        ${GPU:-unknown (no nvidia-smi)}"
echo "CUDA_HOME:  ${CUDA_HOME:-(unset)}"
printf '%-26s %-10s %8s  %s\n' step result seconds notes
printf '%s\n' "${ROWS[@]}"
if [[ -n "$TESTS_TABLE" ]]; then
  echo
  echo "tests:"
  echo "$TESTS_TABLE"
fi
if [[ -n "$SKIPS" ]]; then
  echo
  echo "skip reasons (count, reason):"
  echo "$SKIPS"
fi
if [[ -s "$LOGS/bench.txt" ]]; then
  echo
  echo "benchmark (last lines; full output in $LOGS/bench.txt):"
  tail -n 32 "$LOGS/bench.txt" | sed 's/^/  /'
fi
if [[ -s "$LOGS/interop.txt" ]]; then
  echo
  echo "interop (what the suite printed):"
  grep -vE '^\[ *(RUN|OK|PASSED|=+) ' "$LOGS/interop.txt" | tail -n 12 | sed 's/^/  /'
fi
if [[ -s "$LOGS/bench-store.txt" ]]; then
  echo
  echo "disk cache benchmark (last lines):"
  tail -n 12 "$LOGS/bench-store.txt" | sed 's/^/  /'
fi
if [[ -s "$LOGS/python-bench.txt" ]]; then
  echo
  echo "python launch benchmark (the table; JSON in $LOGS/python-bench.txt):"
  sed -n '1,/^{/p' "$LOGS/python-bench.txt" | grep -v '^{' | tail -n 12 | sed 's/^/  /'
fi
echo
echo "total: $(($(date +%s) - T0)) s; overall: $([[ $OVERALL == 0 ]] && echo PASS || echo FAIL)"
exit "$OVERALL"
