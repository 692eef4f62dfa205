#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# scripts/demo.sh -- builds kcache (the library, the demo and the kcache
# command) and runs the demo on the default backend (CUDA if a GPU and
# driver are present, else OpenCL, else the host CPU); KC_BACKEND=host|opencl|cuda
# picks one. The demo's disk cache is kept: the script says where it is and
# shows it with `kcache ls`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/deps.sh demo
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKC_BUILD_TESTS=OFF >/dev/null
cmake --build build -j"$(nproc)" --target kc_demo kcache_cli >/dev/null
out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0
build/kc_demo --keep | tee "$out" || rc=$?
dir=$(sed -n 's/^disk cache kept in //p' "$out")
if [[ -n $dir ]]; then
  echo
  echo "The demo's disk cache is kept in $dir. The kcache command looks after it:"
  echo "\$ build/cli/kcache --dir $dir ls"
  build/cli/kcache --dir "$dir" ls || rc=1
  echo "(also: stats, show KEY, explain k, verify; build/cli/kcache help. rm -r $dir removes it.)"
fi
exit "$rc"
