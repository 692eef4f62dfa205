#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/fuzz.sh -- builds the libFuzzer targets of tests/fuzz in build-fuzz
# (clang; the library with -fsanitize=fuzzer-no-link,address,undefined) and
# runs each for a bounded time from a copy of its seed corpus and its
# regression inputs. Installs nothing: scripts/deps.sh installs clang and
# libclang-rt-dev.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [--merge] [TARGET...]
#
#   SECONDS_PER_TARGET  default 60
#   --merge             afterwards, add the inputs that found new coverage to
#                       tests/fuzz/corpus/<target>/ (otherwise the repository
#                       is never written)
#   TARGET              scan, file, params, store, options (default: all)
#
# The targets run side by side, as many at once as there are cores, each
# for SECONDS_PER_TARGET. Prints per target: executions, executions per
# second, coverage and new inputs, crashes. A crashing input is saved under build-fuzz/crashes/<target>/;
# once the bug is fixed, copy it to tests/fuzz/regress/<target>/ so that CTest
# replays it forever. Exits non-zero if any target crashed or did not run.
# The last line is the summary: "fuzz: 5 targets, N executions, 0 crashes".
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

secs=60 merge=0 targets=()
for a in "$@"; do
  case $a in
  --merge) merge=1 ;;
  -h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  scan | file | params | store | options) targets+=("$a") ;;
  *)
    [[ $a =~ ^[0-9]+$ ]] || { echo "fuzz: unknown argument '$a' (see --help)" >&2; exit 2; }
    secs=$a
    ;;
  esac
done
((${#targets[@]})) || targets=(scan file params store options)

command -v clang >/dev/null || { echo "fuzz: clang not found (scripts/deps.sh test installs it)" >&2; exit 1; }

build=build-fuzz
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
echo "fuzz: building $build (clang, $flags)"
mkdir -p "$build"
CC=clang cmake -S . -B "$build" -DKC_FUZZ=ON -DKC_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_C_FLAGS=$flags" >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log"; echo "fuzz: configure failed" >&2; exit 1; }
cmake --build "$build" -j"$(nproc)" --target "${targets[@]/#/fuzz_}" >"$build/build.log" 2>&1 ||
  { tail -50 "$build/build.log"; echo "fuzz: build failed" >&2; exit 1; }

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
total_execs=0 total_crashes=0 failed=()

stat_of() { sed -nE "s/^stat::$1: *([0-9]+).*/\1/p" "$2" | tail -1; }

# Runs target $1 (its exit status into its log's .rc file).
run_target() {
  local t=$1 bin=$build/tests/fuzz/fuzz_$1 work=$build/fuzz-work/$1 crashes=$build/crashes/$1
  local log=$build/fuzz-work/$1.log rc=0
  local opts=(-max_total_time="$secs" -rss_limit_mb=2048 -timeout=30 -print_final_stats=1
              -artifact_prefix="$crashes/")
  [[ -f tests/fuzz/$t.dict ]] && opts+=(-dict=tests/fuzz/"$t".dict)
  timeout -k 10 $((secs * 2 + 120)) "$bin" "${opts[@]}" "$work/corpus" >"$log" 2>&1 || rc=$?
  echo "$rc" >"$log.rc"
}

declare -A inputs
for t in "${targets[@]}"; do
  work=$build/fuzz-work/$t
  rm -rf "$work" "$build/crashes/$t" "$build/fuzz-work/$t.log.rc"
  mkdir -p "$work/corpus" "$build/crashes/$t"
  # libFuzzer writes new inputs into its first directory: a copy, never the repository's
  cp tests/fuzz/corpus/"$t"/* "$work/corpus/"
  [[ -d tests/fuzz/regress/$t ]] && find tests/fuzz/regress/"$t" -maxdepth 1 -type f ! -name 'README*' \
    -exec cp {} "$work/corpus/" \;
  inputs[$t]=$(ls "$work/corpus" | wc -l)
  while (($(jobs -rp | wc -l) >= $(nproc))); do wait -n || true; done
  run_target "$t" &
done
wait

for t in "${targets[@]}"; do
  bin=$build/tests/fuzz/fuzz_$t
  work=$build/fuzz-work/$t
  crashes=$build/crashes/$t
  log=$build/fuzz-work/$t.log
  echo "=== fuzz_$t: ${secs}s from ${inputs[$t]} inputs"
  rc=$(cat "$log.rc" 2>/dev/null || echo 1)

  execs=$(stat_of number_of_executed_units "$log")
  rate=$(stat_of average_exec_per_sec "$log")
  new=$(stat_of new_units_added "$log")
  cov0=$(sed -nE 's/.*INITED cov: ([0-9]+).*/\1/p' "$log" | tail -1)
  cov=$(grep -oE '\bcov: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || true)
  ncrash=$(find "$crashes" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
    -o -name 'oom-*' \) | wc -l)
  printf '    executions %s, %s exec/s, coverage %s -> %s edges (%s new inputs), crashes %s\n' \
    "${execs:-?}" "${rate:-?}" "${cov0:-?}" "${cov:-?}" "${new:-?}" "$ncrash"
  total_execs=$((total_execs + ${execs:-0}))
  total_crashes=$((total_crashes + ncrash))
  if ((ncrash)); then
    grep -E -A1 'fuzz check failed|runtime error|ERROR: [A-Za-z]+Sanitizer' "$log" | head -6 | sed 's/^/    | /'
    grep -E '^SUMMARY|ERROR: libFuzzer' "$log" | head -2 | sed 's/^/    | /'
    for f in "$crashes"/*; do
      echo "    saved $f; reproduce: $bin $f (or ${bin}_replay in any build)"
    done
    failed+=("$t")
  elif ((rc != 0)) || [[ -z $execs ]]; then
    echo "    fuzz_$t did not finish cleanly (exit $rc):"
    tail -20 "$log" | sed 's/^/    | /'
    failed+=("$t")
  fi
  if ((merge && ncrash == 0)); then
    before=$(ls tests/fuzz/corpus/"$t" | wc -l)
    "$bin" -merge=1 -rss_limit_mb=2048 tests/fuzz/corpus/"$t" "$work/corpus" >"$log.merge" 2>&1 ||
      { tail -5 "$log.merge"; failed+=("$t(merge)"); }
    echo "    merged: tests/fuzz/corpus/$t has $(ls tests/fuzz/corpus/"$t" | wc -l) inputs (was $before)"
  fi
done

((${#failed[@]} == 0)) || echo "fuzz: FAILED: ${failed[*]}"
echo "fuzz: ${#targets[@]} targets, $total_execs executions, $total_crashes crashes"
((${#failed[@]} == 0))
