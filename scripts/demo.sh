#!/usr/bin/env bash
# scripts/demo.sh -- builds kcache and runs the demo on the default backend
# (CUDA if a GPU and driver are present, else OpenCL, else the host CPU).
# KC_BACKEND=host|opencl|cuda picks one.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/deps.sh demo
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKC_BUILD_TESTS=OFF >/dev/null
cmake --build build -j"$(nproc)" --target kc_demo >/dev/null
exec build/kc_demo
