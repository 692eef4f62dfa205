# SPDX-License-Identifier: MIT
"""Instructions per bound launch in the extension, counted by callgrind.

Runs N cached launches of an empty host-backend kernel with 0, 1 or 4
bound arguments, in one of two forms:

  launch   b.launch(1, 1)        (grid and block parsed at every call)
  call     go() for go = b[1, 1] (a BoundLaunch: the geometry kept)

  valgrind --tool=callgrind --callgrind-out-file=OUT \\
      python python/bench/cg_bound.py launch|call N 0|1|4
  callgrind_annotate --inclusive=yes --threshold=100 OUT | grep _kcache

The extension's entry point for the form (BoundArgs.launch, or the
BoundLaunch's vectorcall) is the top _kcache line; its inclusive count
divided by N+1 is the cost per launch, kc_launch_args and the host
backend's launch included (the same in both forms; their own line is the
library's kc_launch_args, also in the extension, which links the library
statically in a wheel).
"""
import sys

import kcache

form, n, nargs = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rt = kcache.Runtime(backend="host", cache_disable=True)
rt.define("o4", "KC_KERNEL void o4(KC_GLOBAL float *y, float a, int b, float c) { if (0) y[0] = a * (float)b + c; }")
rt.define("o1", "KC_KERNEL void o1(KC_GLOBAL float *y) { if (0) y[0] += 1.0f; }")
rt.define("o0", "KC_KERNEL void o0(void) { }")
buf = rt.buffer(256)
args = {"0": (), "1": (buf,), "4": (buf, 1.5, 3, 2.5)}[nargs]
b = rt.kernel("o" + nargs).compile().bind(*args)
launch, go = b.launch, b[1, 1]
if form == "launch":
    for _ in range(n + 1):
        launch(1, 1)
else:
    for _ in range(n + 1):
        go()
rt.close()
