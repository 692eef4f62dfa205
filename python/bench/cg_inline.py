# SPDX-License-Identifier: MIT
"""Instructions per inline launch, k[1, 1](...), against kcache's C launch
in the same process (kcache._kcache._c_launch_batch: a C loop of kc_launch
with the same converted arguments), counted by callgrind and split by
where they run:

  extension    the _kcache module (with libkcache linked in statically):
               the conversion, kc_launch, the entry, the backend's launch
  interpreter  libpython: the for loop, the call of the config object
  the rest     libc and, on OpenCL, the platform (PoCL) and its threads

Each figure is (count for 3000 launches - count for 1000) / 2000, so that
start-up and compiles cancel; each count is one process under callgrind,
after an uncounted warm-up run that fills the platform's own compile
cache, all with one hash seed (PYTHONHASHSEED=0: else start-up's dict
work differs by some 100,000 instructions from process to process), and
host objects compiled for x86-64-v3 (KC_HOST_OPT: AVX2 without AVX-512,
which valgrind cannot run; -march=native would use it). The kernels and arguments are python/bench/bench_launch.py's (a
kcache.Buffer for the pointer).

  python python/bench/cg_inline.py [--backend opencl host] [--nargs 0 1 4]
                                   [--build LABEL=DIR ...]

--build runs the same with DIR first on PYTHONPATH (an unpacked wheel),
for builds side by side; without it, the kcache that python imports.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

KERNELS = {
    0: ("o0", "KC_KERNEL void o0(void) { }"),
    1: ("o1", "KC_KERNEL void o1(KC_GLOBAL float *y) { if (kc_global_id(0) == 0) y[0] += 1.0f; }"),
    4: ("o4", "KC_KERNEL void o4(KC_GLOBAL float *y, float a, int b, float c) { if (kc_global_id(0) == 0) "
              "y[0] = a * (float)b + c; }"),
}


def run0(launch, n):
    for _ in range(n):
        launch()


def run1(launch, n, x):
    for _ in range(n):
        launch(x)


def run4(launch, n, x, y, z, w):
    for _ in range(n):
        launch(x, y, z, w)


def child(form, n, nargs, backend):
    import kcache

    rt = kcache.Runtime(backend=backend, cache_disable=True)
    name, src = KERNELS[nargs]
    rt.define(name, src)
    k = rt.kernel(name).compile()
    buf = rt.buffer(256)
    a = [buf, 1.5, 3, 2.5][:nargs]
    launch = k[1, 1]
    launch(*a)
    kcache._kcache._c_launch_batch(k, 1, *a)
    rt.finish()
    if form == "py":
        {0: run0, 1: run1, 4: run4}[nargs](launch, n, *a)
    else:
        kcache._kcache._c_launch_batch(k, n, *a)
    rt.finish()
    rt.close()


def where(fn):
    if "_kcache" in fn:
        return "extension"
    if "libpython" in fn or "/Python/" in fn or "/Objects/" in fn or "/Include/" in fn:
        return "interpreter"
    return "rest"


def counts(path):
    out = subprocess.run(["callgrind_annotate", "--threshold=100", path], capture_output=True, text=True,
                         check=True).stdout
    d = {}
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+(.*)", line)
        if m and "PROGRAM TOTALS" not in line:
            w = where(m.group(2))
            d[w] = d.get(w, 0) + int(m.group(1).replace(",", ""))
    return d


def measure(env, form, nargs, backend, tmp):
    c = {}
    for n in (1000, 3000):
        out = os.path.join(tmp, f"cg.{form}.{n}.out")
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, __file__,
                        "--child", form, str(n), str(nargs), backend], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        c[n] = counts(out)
    return {w: (c[3000].get(w, 0) - c[1000].get(w, 0)) / 2000 for w in ("extension", "interpreter", "rest")}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", nargs="+", default=["opencl", "host"])
    ap.add_argument("--nargs", nargs="+", type=int, default=[0, 1, 4])
    ap.add_argument("--build", nargs="+", default=[], help="LABEL=DIR: DIR first on PYTHONPATH")
    o = ap.parse_args()
    builds = [b.split("=", 1) for b in o.build] or [["installed", None]]
    print("instructions per launch (callgrind; (3000 launches - 1000) / 2000): the inline form k[1, 1](...) "
          "and kcache's C loop in the same process")
    print(f"{'build':>10} {'backend':>7} {'args':>4} | {'extension':>9} {'interp.':>8} {'rest':>8} {'total':>8} | "
          f"{'C: ext.':>8} {'rest':>8} {'total':>8} | {'py - C':>7}")
    for label, path in builds:
        # start-up's dict work the same in every process; host objects for AVX2 without AVX-512, which
        # callgrind cannot run (as bench/kc_bench.c's)
        env = dict(os.environ, PYTHONHASHSEED="0", KC_HOST_OPT="-O3 -march=x86-64-v3")
        if path:
            env["PYTHONPATH"] = path + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        for backend in o.backend:
            for nargs in o.nargs:
                subprocess.run([sys.executable, __file__, "--child", "py", "10", str(nargs), backend], env=env,
                               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                with tempfile.TemporaryDirectory() as tmp:
                    p = measure(env, "py", nargs, backend, tmp)
                    c = measure(env, "c", nargs, backend, tmp)
                tp, tc = sum(p.values()), sum(c.values())
                print(f"{label:>10} {backend:>7} {nargs:>4} | {p['extension']:9.1f} {p['interpreter']:8.1f} "
                      f"{p['rest']:8.1f} {tp:8.1f} | {c['extension']:8.1f} {c['rest']:8.1f} {tc:8.1f} | "
                      f"{tp - tc:7.1f}", flush=True)


if __name__ == "__main__":
    main()
