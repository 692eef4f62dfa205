#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/test.sh -- builds kcache and runs every test suite:
#   default   gcc, RelWithDebInfo: all tests on every backend (a backend
#             missing here is reported as skipped, with the reason)
#   asan      gcc, AddressSanitizer + UndefinedBehaviorSanitizer
#   tsan      gcc, ThreadSanitizer
#   clang     clang -Werror build of everything (the tests run too)
#   reliability  fault injection, compiler faults, model test, stress, and a
#             1-minute soak (scripts/soak.sh; KC_SOAK_MINUTES)
#             (scripts/reliability.sh: ASan + fault-injection build)
#   fuzz      every fuzz target for a bounded time (scripts/fuzz.sh), after
#             the corpus and regression inputs were replayed by the others
#   python    the Python package (python/): a wheel built by pip with
#             scikit-build-core into a virtual environment it creates
#             (build-python/venv: pytest, numpy, scikit-build-core from
#             pip), checked to need no libkcache, installed, and its
#             pytest suite run on every backend (a missing one is skipped)
#   lint      the house rules (scripts/check-layout.py: no file cycles, the
#             one-way doors, the lock and room tables of doc/) and the style
#             (scripts/format.sh --check)
#   quick     the edit-build-test loop, in under 3 minutes on 2 cores: lint,
#             the default build, every suite on the host backend (install
#             and benchmark checks left out) and a short oracle run
#             (KC_ORACLE_STEPS, 300); not part of the default list, which
#             runs everything
# Each prints CTest's summary; the last line adds them up.
#
#   scripts/test.sh [suite...]      (default: all of them)
#   KC_FUZZ_SECONDS=N               seconds per fuzz target (default 40)
#   KC_TEST_JOBS=N                  CTest suites run at once (default: cores + 1)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

jobs=$(nproc)
# CTest runs one more suite than there are cores: many suites spend part of
# their time waiting (on child processes, Redis, a lock's timeout, PoCL's
# compiles on its own threads), and on 2 cores -j3 took 15-25% off the wall
# time of the default and tsan suites (doc/testing.md). KC_TEST_JOBS
# overrides. Not the reliability suite (scripts/reliability.sh): its stress
# tests run for a fixed time and want their cores.
test_jobs=${KC_TEST_JOBS:-$((jobs + 1))}
[[ $test_jobs =~ ^[1-9][0-9]*$ ]] || { echo "test.sh: KC_TEST_JOBS must be a whole number of 1 or more, not '$test_jobs'" >&2; exit 2; }
scripts/deps.sh test
suites=("$@")
((${#suites[@]})) || suites=(lint default asan tsan clang reliability fuzz python)
supp=$PWD/tests/sanitizers
# The sanitizer runtime of GCC 12 (up to GCC 13 and LLVM 16) takes a dynamic
# TLS block that happens to sit at a certain offset in its page for the
# header of a glibc older than 2.25 and reads the two words before it as a
# block's address and size; LeakSanitizer's tracer then dies at exit, after
# the test itself passed ("Tracer caught signal 11", seen once, in
# native_opencl under ASan, where PoCL's libraries have such blocks). So
# __tls_get_addr is not intercepted: a block of dynamic TLS is then a heap
# block that LeakSanitizer reaches through the thread's own TLS, and the asan
# suite finds the same leaks (none) with it.
export ASAN_OPTIONS=intercept_tls_get_addr=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}
total_pass=0 total_fail=0 total_skip=0 total_case_skip=0 failed_suites=() notes=()

run_suite() {
  local name=$1 dir=build-$1
  shift
  echo "=== suite: $name"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >"$dir.configure.log" 2>&1 ||
    { cat "$dir.configure.log"; failed_suites+=("$name(configure)"); return 0; }
  cmake --build "$dir" -j"$jobs" >"$dir.build.log" 2>&1 ||
    { tail -50 "$dir.build.log"; failed_suites+=("$name(build)"); return 0; }
  local log=$dir/ctest.log rc=0
  ctest --test-dir "$dir" -j"$test_jobs" --output-on-failure --timeout 600 2>&1 | tee "$log" || rc=$?
  count_log "$name" "$log" "$rc"
}

# Adds a CTest log's summary to the totals. CTest counts a suite whose
# executable exits 77 as skipped; test cases that a passing suite skips
# itself (cmocka's skip(): a case for another backend, an optional library
# missing) are counted from the suite's full output, LastTest.log.
count_log() {
  local name=$1 log=$2 rc=$3
  local last
  last=$(dirname "$log")/Testing/Temporary/LastTest.log
  if [[ -f $last ]]; then
    total_case_skip=$((total_case_skip + $(sed -nE 's/^ *([0-9]+) SKIPPED TESTS?\(S\)$/\1/p' "$last" |
      awk '{s += $1} END {print s + 0}')))
  fi
  local line pass total skip
  line=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1 || true)
  if [[ -z $line ]]; then failed_suites+=("$name(no summary)"); return 0; fi
  total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line")
  local fail
  fail=$(sed -E 's/.*passed, ([0-9]+) tests? failed.*/\1/' <<<"$line")
  skip=$(grep -cE '^[[:space:]]+[0-9]+ - .* \(Skipped\)$' "$log" || true)
  pass=$((total - fail - skip))
  total_pass=$((total_pass + pass)) total_fail=$((total_fail + fail)) total_skip=$((total_skip + skip))
  ((fail == 0 && rc == 0)) || failed_suites+=("$name")
}

# Adds a pytest log's summary ("N passed, M failed, K skipped in ...") to the
# totals: each test case counts as one test.
count_pytest() {
  local log=$1 rc=$2 line pass fail skip
  line=$(grep -E '^(=+ )?[0-9]+ (passed|failed|skipped).* in [0-9.]+s' "$log" 2>/dev/null | tail -1 || true)
  if [[ -z $line ]]; then failed_suites+=("python(no summary)"); return 0; fi
  # the count before a word ("12 passed"), 0 if the word is not there
  n_of() { awk -v w="$1" '{ for (i = 2; i <= NF; i++) if ($i ~ "^" w) s += $(i - 1) } END { print s + 0 }' <<<"$line"; }
  pass=$(n_of passed) fail=$(($(n_of failed) + $(n_of error))) skip=$(n_of skipped)
  total_pass=$((total_pass + pass)) total_fail=$((total_fail + fail)) total_skip=$((total_skip + skip))
  ((fail == 0 && rc == 0)) || failed_suites+=(python)
}

for s in "${suites[@]}"; do
  case $s in
  default) run_suite default ;;
  asan) LSAN_OPTIONS=suppressions=$supp/lsan.supp run_suite asan -DKC_SANITIZE=address ;;
  tsan) TSAN_OPTIONS=suppressions=$supp/tsan.supp run_suite tsan -DKC_SANITIZE=thread ;;
  reliability)
    echo "=== suite: reliability"
    rc=0
    scripts/reliability.sh || rc=$?
    count_log reliability build-fault/reliability.log "$rc"
    echo "=== soak (${KC_SOAK_MINUTES:-1} min, RELIABILITY.md)"
    srk=0
    mkdir -p build-fault
    scripts/soak.sh --minutes "${KC_SOAK_MINUTES:-1}" --build build-fault 2>&1 | tee build-fault/soak.log ||
      srk=${PIPESTATUS[0]}
    ((srk == 0 || srk == 77)) || {
      failed_suites+=(soak)
      notes+=("$(grep -E '^soak: FAIL' build-fault/soak.log || echo "soak: exit $srk (build-fault/soak.log)")")
    }
    ;;
  fuzz)
    echo "=== suite: fuzz"
    scripts/fuzz.sh "${KC_FUZZ_SECONDS:-40}" || failed_suites+=(fuzz)
    ;;
  clang) CC=clang run_suite clang ;;
  python)
    echo "=== suite: python"
    rc=0
    scripts/python-test.sh || rc=$?
    count_pytest build-python/pytest.log "$rc"
    ;;
  quick)
    echo "=== suite: quick (lint; host suites; a short oracle)"
    python3 scripts/check-layout.py || failed_suites+=("lint(layout)")
    scripts/format.sh --check | tail -3 || failed_suites+=("lint(format)")
    cmake -S . -B build-default -DCMAKE_BUILD_TYPE=RelWithDebInfo >build-default.configure.log 2>&1 ||
      { cat build-default.configure.log; failed_suites+=("quick(configure)"); continue; }
    cmake --build build-default -j"$jobs" >build-default.build.log 2>&1 ||
      { tail -50 build-default.build.log; failed_suites+=("quick(build)"); continue; }
    rc=0
    ctest --test-dir build-default -j"$test_jobs" --output-on-failure --timeout 600 -L host -LE install \
      -E '^bench_' 2>&1 | tee build-default/ctest-quick.log || rc=$?
    count_log quick build-default/ctest-quick.log "$rc"
    echo "=== oracle, short (host, ${KC_ORACLE_STEPS:-300} steps)"
    if KC_ORACLE_STEPS=${KC_ORACLE_STEPS:-300} build-default/tests/reliability/test_oracle --backend host; then
      total_pass=$((total_pass + 1))
    else
      total_fail=$((total_fail + 1)) failed_suites+=("quick(oracle)")
    fi
    ;;
  lint)
    echo "=== suite: lint"
    python3 scripts/check-layout.py || failed_suites+=("lint(layout)")
    scripts/format.sh --check | tail -20 || failed_suites+=("lint(format)")
    ;;
  *) echo "unknown suite $s" >&2; exit 2 ;;
  esac
done

echo
if ((${#failed_suites[@]})); then
  echo "FAILED suites: ${failed_suites[*]}"
  ((${#notes[@]} == 0)) || printf '  %s\n' "${notes[@]}"
fi
echo "kcache tests: $total_pass passed, $total_fail failed, $total_skip skipped" \
  "($total_case_skip test cases skipped inside passing suites: grep SKIPPED build-*/Testing/Temporary/LastTest.log)"
((${#failed_suites[@]} == 0))
