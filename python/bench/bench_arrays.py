# SPDX-License-Identifier: MIT
"""A NumPy array as a kernel's pointer argument on OpenCL, launch to result.

Each launch is `k[n // 64, 64](x, y)` with x (read, `const`) and y
(written) NumPy float32 arrays of n elements: the time from the call to
its return, which includes the wait for the kernel (the call returns with
y updated). Sizes 4 KiB to 16 MiB; the figure is the median of --rounds
launches, with an ordinary kcache.Buffer launch (no array: the kernel
alone, then `rt.finish()`) beside it as the floor.

  python python/bench/bench_arrays.py [--rounds N] [--json]

With kcache before kc_buffer_host the arrays were copied into a staging
buffer and y copied back; on a device that shares the host's memory
(PoCL's CPU device) they are now used in place.
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

import kcache

SRC = ("KC_KERNEL void axpy(KC_GLOBAL const float *x, KC_GLOBAL float *y) "
       "{ size_t i = kc_global_id(0); y[i] = 2.0f * x[i] + y[i]; }")


def median_us(fn, rounds):
    fn()
    t = []
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        fn()
        t.append(time.perf_counter_ns() - t0)
    return statistics.median(t) / 1000.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=101)
    ap.add_argument("--json", action="store_true")
    o = ap.parse_args()
    rt = kcache.Runtime(backend="opencl", cache_disable=True)
    rt.define("axpy", SRC)
    k = rt.kernel("axpy").compile()
    out = {"kcache": kcache.library_version, "device": rt.devices[0], "rounds": o.rounds,
           "loadavg": os.getloadavg(), "unit": "us per launch (median)", "sizes": {}}
    for n in (1024, 65536, 1 << 20, 1 << 22):
        x, y = np.ones(n, np.float32), np.zeros(n, np.float32)
        bx, by = rt.buffer(x), rt.buffer(y)
        launch = k[n // 64, 64]

        def arrays():
            launch(x, y)

        def buffers():
            launch(bx, by)
            rt.finish()
        out["sizes"][str(n * 4)] = {"numpy": round(median_us(arrays, o.rounds), 2),
                                    "buffers": round(median_us(buffers, o.rounds), 2)}
        assert y[0] == 2.0 * (o.rounds + 1)  # every launch ran on y itself (or its copy back)
    rt.close()
    if o.json:
        print(json.dumps(out, indent=1))
        return
    print(f"kcache {out['kcache']} on {out['device']}: NumPy arrays as pointer arguments, "
          f"median of {o.rounds} launches (us), load average {out['loadavg'][0]:.1f}")
    print(f"{'bytes':>10} {'NumPy arrays':>13} {'Buffers':>9} {'ratio':>7}")
    for b, r in out["sizes"].items():
        print(f"{b:>10} {r['numpy']:13.2f} {r['buffers']:9.2f} {r['numpy'] / r['buffers']:6.2f}x")


if __name__ == "__main__":
    sys.exit(main())
