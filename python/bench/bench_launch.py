# SPDX-License-Identifier: MIT
"""Launch overhead from Python, side by side in one run (medians):

  opencl  (PoCL) a cached launch of the same kernel with 0, 1 and 4
          arguments: kcache from Python (k[1, 1](...)), kcache bound
          arguments from Python (b.launch(1, 1), and go() for go =
          b[1, 1], which keeps the geometry), kcache's C launch (a C loop of kc_launch
          in the same process: kcache._kcache._c_launch_batch), and
          PyOpenCL's fastest form (typed set_args + a pre-fetched
          enqueue_nd_range_kernel), on the same device.
  cuda    (a GPU) the same three kernels: kcache from Python, bound
          arguments, kcache's C launch in the same process, and CuPy's
          RawKernel of the same source (its launch with a tuple of
          arguments), each on the default stream, on the same GPU.
  host    the host backend's cached launch of an empty kernel against a
          Numba @njit dispatch of an empty function with the same
          arguments (a NumPy array where the kernel has a pointer).

Like bench/kc_bench_opencl.c: batches of BATCH launches, ROUNDS rounds,
the sides interleaved in each round (in an order rotated from round to
round), each batch drained (finish) outside its timing; the figure is the
median of the per-launch times. On OpenCL "paired" is the median over the
rounds of (Python batch - C batch) of the same round, which cancels the
machine's slow swings that the two separate medians keep.

  python bench_launch.py [--json | --both] [--rounds N] [--only opencl|cuda|host]
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

import kcache

BATCH = 200
KERNELS = [
    ("o0", "KC_KERNEL void o0(void) { }", 0),
    ("o1", "KC_KERNEL void o1(KC_GLOBAL float *y) { if (kc_global_id(0) == 0) y[0] += 1.0f; }", 1),
    ("o4", "KC_KERNEL void o4(KC_GLOBAL float *y, float a, int b, float c) { if (kc_global_id(0) == 0) "
           "y[0] = a * (float)b + c; }", 4),
]


def timed(fn, finish):
    finish()
    t0 = time.perf_counter_ns()
    fn()
    t1 = time.perf_counter_ns()
    finish()
    return (t1 - t0) / BATCH


def loop_plain(f, args):
    # the same loop shape for every Python side: a for loop calling f(*args)
    n = range(BATCH)
    if not args:
        def run():
            for _ in n:
                f()
    elif len(args) == 1:
        (a,) = args

        def run():
            for _ in n:
                f(a)
    else:
        a, b, c, d = args

        def run():
            for _ in n:
                f(a, b, c, d)
    return run


def bench_opencl(rounds):
    import pyopencl as cl

    rt = kcache.Runtime(backend="opencl", cache_disable=True)
    buf = rt.buffer(256)
    args = [buf, 1.5, 3, 2.5]
    # PyOpenCL on the same device (kcache's default: the first platform with a device)
    dev = next(d for p in cl.get_platforms() for d in p.get_devices())
    cctx = cl.Context([dev])
    q = cl.CommandQueue(cctx)
    cbuf = cl.Buffer(cctx, cl.mem_flags.READ_WRITE, 256)
    cargs = [cbuf, 1.5, 3, 2.5]
    enqueue = cl.enqueue_nd_range_kernel
    out = {"device": rt.devices[0], "pyopencl": cl.VERSION_TEXT, "batch": BATCH, "rounds": rounds, "kernels": {}}
    for name, src, nargs in KERNELS:
        rt.define(name, src)
        k = rt.kernel(name).compile()
        prog = cl.Program(cctx, src.replace("KC_KERNEL", "__kernel").replace("KC_GLOBAL", "__global")
                          .replace("kc_global_id", "get_global_id")).build()
        knl = getattr(prog, name)
        # PyOpenCL's fastest form: scalar types declared once, so set_args takes Python numbers
        knl.set_scalar_arg_dtypes([None, np.float32, np.int32, np.float32][:nargs])
        a, ca = args[:nargs], cargs[:nargs]
        launch = k[1, 1]
        bound = k.bind(*a)
        blaunch = bound.launch
        go = bound[1, 1]  # a BoundLaunch: the geometry kept too

        def pycl(knl=knl, ca=ca):
            for _ in range(BATCH):
                knl.set_args(*ca)
                enqueue(q, knl, (1,), (1,))
        if nargs == 0:
            def pycl(knl=knl):
                for _ in range(BATCH):
                    knl.set_args()
                    enqueue(q, knl, (1,), (1,))
        elif nargs == 1:
            def pycl(knl=knl, c0=ca[0]):
                for _ in range(BATCH):
                    knl.set_args(c0)
                    enqueue(q, knl, (1,), (1,))
        else:
            def pycl(knl=knl, c0=ca[0], c1=ca[1], c2=ca[2], c3=ca[3]):
                for _ in range(BATCH):
                    knl.set_args(c0, c1, c2, c3)
                    enqueue(q, knl, (1,), (1,))

        def bound_loop():
            for _ in range(BATCH):
                blaunch(1, 1)

        def bound_call_loop(go=go):
            for _ in range(BATCH):
                go()

        c_side = [0.0]

        def c_loop():
            c_side[0] = kcache._kcache._c_launch_batch(k, BATCH, *a)

        def c_timed():
            rt.finish(); q.finish()
            c_loop()
            rt.finish()
            return c_side[0]

        sides = {"kcache_python": loop_plain(launch, a), "kcache_python_bound": bound_loop,
                 "kcache_python_bound_call": bound_call_loop, "pyopencl": pycl}
        t = {s: [] for s in list(sides) + ["kcache_c"]}
        for _ in range(3):  # warm up every side
            for f in sides.values():
                f()
            c_loop()
            rt.finish(); q.finish()
        order = list(t)
        for r in range(rounds):
            # the sides in a rotated order each round, so that none always runs
            # right after the same other one
            for s in order[r % len(order):] + order[:r % len(order)]:
                t[s].append(c_timed() if s == "kcache_c" else timed(sides[s], lambda: (rt.finish(), q.finish())))
        med = {s: statistics.median(v) / 1000.0 for s, v in t.items()}
        out["kernels"][str(nargs)] = {s: round(v, 4) for s, v in med.items()}
        # the same round's Python and C batches, paired: the median of their differences
        out["kernels"][str(nargs)]["python_minus_c_paired"] = round(
            statistics.median(p - c for p, c in zip(t["kcache_python"], t["kcache_c"])) / 1000.0, 4)
    s = rt.stats()
    out["fast_hits"] = s.fast_hits
    out["compiles"] = s.compiles
    rt.close()
    return out


def bench_cuda(rounds):
    try:
        import cupy as cp
    except ImportError as e:
        cp, cupy_why = None, str(e)
    rt = kcache.Runtime(backend="cuda", cache_disable=True)
    buf = rt.buffer(256)
    args = [buf, 1.5, 3, 2.5]
    out = {"device": rt.devices[0], "batch": BATCH, "rounds": rounds, "kernels": {},
           "cupy": cp.__version__ if cp else "missing: " + cupy_why}
    if cp:
        cy = cp.zeros(64, cp.float32)
        cargs = (cy, np.float32(1.5), np.int32(3), np.float32(2.5))

    def finish():
        rt.finish()
        if cp:
            cp.cuda.Device().synchronize()
    for name, src, nargs in KERNELS:
        rt.define(name + "c", src.replace(name, name + "c"))
        k = rt.kernel(name + "c").compile()
        a = args[:nargs]
        launch = k[1, 1]
        bound = k.bind(*a)
        blaunch = bound.launch
        go = bound[1, 1]

        def bound_loop():
            for _ in range(BATCH):
                blaunch(1, 1)

        def bound_call_loop(go=go):
            for _ in range(BATCH):
                go()
        sides = {"kcache_python": loop_plain(launch, a), "kcache_python_bound": bound_loop,
                 "kcache_python_bound_call": bound_call_loop}
        if cp:
            cu_src = 'extern "C" ' + (src.replace("KC_KERNEL", "__global__").replace("KC_GLOBAL ", "")
                                      .replace("kc_global_id(0)", "(blockIdx.x * blockDim.x + threadIdx.x)"))
            rk = cp.RawKernel(cu_src, name)
            ca = cargs[:nargs]

            def cupy_loop(rk=rk, ca=ca):
                for _ in range(BATCH):
                    rk((1,), (1,), ca)
            sides["cupy"] = cupy_loop
        c_side = [0.0]

        def c_timed():
            finish()
            c_side[0] = kcache._kcache._c_launch_batch(k, BATCH, *a)
            finish()
            return c_side[0]
        t = {s: [] for s in list(sides) + ["kcache_c"]}
        for _ in range(3):
            for f in sides.values():
                f()
            kcache._kcache._c_launch_batch(k, BATCH, *a)
            finish()
        order = list(t)
        for r in range(rounds):
            for s in order[r % len(order):] + order[:r % len(order)]:
                t[s].append(c_timed() if s == "kcache_c" else timed(sides[s], finish))
        out["kernels"][str(nargs)] = {s: round(statistics.median(v) / 1000.0, 4) for s, v in t.items()}
        out["kernels"][str(nargs)]["python_minus_c_paired"] = round(
            statistics.median(p - c for p, c in zip(t["kcache_python"], t["kcache_c"])) / 1000.0, 4)
    rt.close()
    return out


def bench_host(rounds):
    import numba

    rt = kcache.Runtime(backend="host", cache_disable=True)
    y = np.zeros(64, np.float32)
    buf = rt.buffer(256)
    empty = {0: numba.njit(lambda: None), 1: numba.njit(lambda y: None), 4: numba.njit(lambda y, a, b, c: None)}
    out = {"numba": numba.__version__, "batch": BATCH, "rounds": rounds, "kernels": {}}
    for name, src, nargs in KERNELS:
        rt.define(name + "h", src.replace(name, name + "h").replace("if (kc_global_id(0) == 0)", "if (0)"))
        k = rt.kernel(name + "h").compile()
        launch = k[1, 1]
        nb_args = [y, 1.5, 3, 2.5][:nargs]
        f = empty[nargs]
        f(*nb_args)  # compile
        sides = {"kcache_python_buffer": loop_plain(launch, [buf, 1.5, 3, 2.5][:nargs]),
                 "kcache_python_ndarray": loop_plain(launch, nb_args),
                 "numba_njit": loop_plain(f, nb_args)}
        t = {s: [] for s in list(sides) + ["kcache_c"]}
        for _ in range(3):
            for g in sides.values():
                g()
        c_args = [buf, 1.5, 3, 2.5][:nargs]
        order = list(t)
        for r in range(rounds):
            for s in order[r % len(order):] + order[:r % len(order)]:
                t[s].append(kcache._kcache._c_launch_batch(k, BATCH, *c_args) if s == "kcache_c"
                            else timed(sides[s], lambda: None))
        out["kernels"][str(nargs)] = {s: round(statistics.median(v) / 1000.0, 4) for s, v in t.items()}
    rt.close()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--both", action="store_true", help="print the table, then the JSON of the same run")
    ap.add_argument("--rounds", type=int, default=301)
    ap.add_argument("--only", choices=["opencl", "cuda", "host"])
    o = ap.parse_args()
    res = {"kcache": kcache.library_version, "python": sys.version.split()[0], "machine": platform.machine(),
           "unit": "us per launch (median)", "loadavg_before": os.getloadavg()}
    if o.only in (None, "opencl"):
        ok, why = kcache.backend_available("opencl")
        res["opencl"] = bench_opencl(o.rounds) if ok else {"skipped": why}
    if o.only in (None, "cuda"):
        ok, why = kcache.backend_available("cuda")
        res["cuda"] = bench_cuda(o.rounds) if ok else {"skipped": why}
    if o.only in (None, "host"):
        res["host"] = bench_host(o.rounds)
    res["loadavg_after"] = os.getloadavg()
    if o.json and not o.both:
        print(json.dumps(res, indent=1))
        return
    table(res)
    if o.both:
        print(json.dumps(res, indent=1))


def table(res):
    print(f"kcache {res['kcache']} Python launch benchmark (us per launch, medians of the same run)")
    if "kernels" in res.get("opencl", {}):
        print(f"\nOpenCL on {res['opencl']['device']} (PyOpenCL {res['opencl']['pyopencl']})")
        print(f"{'args':>4} {'kcache C':>9} {'kcache py':>10} {'py bound':>9} {'bound[]()':>9} {'PyOpenCL':>9} "
              f"{'py - C':>7} {'paired':>7} {'PyOpenCL/py':>11}")
        for n, r in res["opencl"]["kernels"].items():
            print(f"{n:>4} {r['kcache_c']:9.3f} {r['kcache_python']:10.3f} {r['kcache_python_bound']:9.3f} "
                  f"{r['kcache_python_bound_call']:9.3f} {r['pyopencl']:9.3f} {r['kcache_python'] - r['kcache_c']:7.3f} "
                  f"{r['python_minus_c_paired']:7.3f} {r['pyopencl'] / r['kcache_python']:10.2f}x")
    if "kernels" in res.get("cuda", {}):
        c = res["cuda"]
        print(f"\nCUDA on {c['device']} (CuPy {c['cupy']})")
        print(f"{'args':>4} {'kcache C':>9} {'kcache py':>10} {'py bound':>9} {'bound[]()':>9} {'CuPy':>9} "
              f"{'py/C':>6} {'paired':>7} {'CuPy/py':>8}")
        for n, r in c["kernels"].items():
            cupy = r.get("cupy", float("nan"))
            print(f"{n:>4} {r['kcache_c']:9.3f} {r['kcache_python']:10.3f} {r['kcache_python_bound']:9.3f} "
                  f"{r['kcache_python_bound_call']:9.3f} "
                  f"{cupy:9.3f} {r['kcache_python'] / r['kcache_c']:6.3f} {r['python_minus_c_paired']:7.3f} "
                  f"{cupy / r['kcache_python']:7.2f}x")
    elif "cuda" in res:
        print(f"\nCUDA: skipped ({res['cuda']['skipped']})")
    if "host" in res:
        print(f"\nHost backend vs Numba {res['host']['numba']} @njit dispatch of an empty function")
        print(f"{'args':>4} {'kcache C':>9} {'py Buffer':>10} {'py ndarray':>11} {'numba':>8} {'py/numba':>9}")
        for n, r in res["host"]["kernels"].items():
            print(f"{n:>4} {r['kcache_c']:9.3f} {r['kcache_python_buffer']:10.3f} {r['kcache_python_ndarray']:11.3f} "
                  f"{r['numba_njit']:8.3f} {r['kcache_python_buffer'] / r['numba_njit']:8.2f}x")


if __name__ == "__main__":
    main()
