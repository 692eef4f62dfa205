#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/reliability.sh -- the reliability checks of RELIABILITY.md in one
# go: builds build-fault (gcc, ASan+UBSan+LeakSanitizer, fault injection)
# and runs, under CTest (label "reliability"):
#   faults               fault-injection sweeps: allocations (hook and
#                        kc__alloc), disk cache file operations, backend calls
#   compiler_faults_*    host compilers that crash, hang, write garbage; an
#                        OpenCL build failure
#   model                random sequences against a recompute-everything model
#   oracle_*             random programs and steps, every launch against a cold
#                        compile of its world (KC_ORACLE_STEPS; scripts/oracle.sh: long)
#   stress_*             threads against a reference model (short)
# then prints the figures each test reported ("RELIABILITY: ..." lines).
#
#   scripts/reliability.sh
#   KC_STRESS_SECONDS=60 KC_MODEL_SEQUENCES=100000 scripts/reliability.sh   (longer)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/deps.sh test

dir=build-fault
jobs=$(nproc)
# the sanitizer runtime's __tls_get_addr trap at exit: scripts/test.sh says why
export ASAN_OPTIONS=intercept_tls_get_addr=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}
start=$SECONDS
echo "=== reliability: configuring and building $dir (ASan + fault injection)"
mkdir -p "$dir"
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKC_SANITIZE=address -DKC_FAULT_INJECTION=ON \
  -DKC_BUILD_BENCH=OFF >"$dir/configure.log" 2>&1 || { cat "$dir/configure.log"; exit 1; }
cmake --build "$dir" -j"$jobs" --target test_faults test_compiler_faults test_model test_stress test_transient test_fork_backend test_oracle \
  >"$dir/build.log" 2>&1 || { tail -50 "$dir/build.log"; exit 1; }
built=$SECONDS

echo "=== reliability: running (KC_STRESS_SECONDS=${KC_STRESS_SECONDS:-5})"
rc=0
ctest --test-dir "$dir" -L reliability -j"$jobs" --output-on-failure --timeout 900 2>&1 |
  tee "$dir/reliability.log" || rc=$?
grep -q "tests passed, 0 tests failed" "$dir/reliability.log" || rc=1

echo
echo "=== reliability figures (build $((built - start)) s, tests $((SECONDS - built)) s)"
sed -n 's/^RELIABILITY: /  /p' "$dir/Testing/Temporary/LastTest.log" | sort -u
if ((rc)); then
  echo "reliability: FAILED"
else
  echo "reliability: all passed, nothing lost"
fi
exit "$rc"
