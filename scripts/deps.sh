#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/deps.sh -- installs the Debian packages kcache needs to build, test
# and benchmark, when run as root and something is missing; otherwise says
# exactly what is missing. Sourced or run by demo.sh and test.sh.
#
#   scripts/deps.sh [demo|test]
set -euo pipefail
what=${1:-test}

# package -> why
declare -A need=(
  [gcc]="the C compiler (also the host backend's kernel compiler)"
  [cmake]="the build"
  [make]="the build"
  [pkg-config]="finding cmocka"
  [libxxhash-dev]="content hashes (XXH3)"
  [ocl-icd-libopencl1]="the OpenCL ICD loader (opened with dlopen)"
  [ocl-icd-opencl-dev]="OpenCL headers for the OpenCL backend"
  [opencl-c-headers]="OpenCL headers for the OpenCL backend"
  [pocl-opencl-icd]="an OpenCL platform that runs kernels on the CPU"
)
if [[ $what == test ]]; then
  need+=(
    [libcmocka-dev]="the test framework"
    [clang]="the clang -Werror build and sanitizer runtimes"
    [g++]="the C++ header test (kcache.h built as C++17 by g++)"
    [clang-format]="the style check (scripts/format.sh --check)"
    [python3]="the layout check (scripts/check-layout.py) and JSON checks in tests"
    [libclang-rt-dev]="clang's sanitizer runtimes"
    [valgrind]="instruction counts in the benchmark"
    [tcc]="fast kernel compiles in benchmarks and tests"
    [strace]="a header missing at tcc's first lookups, made certain (strace's fault injection) in a test"
    [redis-server]="a real Redis for the remote tier's tests and benchmark (started on a free port)"
    [libhiredis-dev]="the remote tier's Redis client (hiredis, opened with dlopen; kcache builds without it)"
    [libssl-dev]="HMAC-SHA256 for KC_REMOTE_KEY (libcrypto, opened with dlopen)"
    [python3-dev]="the Python extension's headers (the python suite; pip brings the rest)"
    [python3-venv]="the python suite's virtual environment"
  )
fi

missing=()
for p in "${!need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
((${#missing[@]} == 0)) && exit 0

if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  exit 0
fi

echo "deps: these Debian packages are missing (run as root to install them, or: sudo apt-get install ${missing[*]}):" >&2
for p in "${missing[@]}"; do echo "  $p: ${need[$p]}" >&2; done
exit 1
