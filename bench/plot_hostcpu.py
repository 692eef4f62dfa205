# SPDX-License-Identifier: MIT
"""Draws kc_bench_hostcpu's throughput against threads into a PNG.

Usage: python3 bench/plot_hostcpu.py LOG PNG

LOG is a committed log under bench/results/ (comment lines starting with '#',
the table, and the benchmark's --json line). One panel per kernel: the
throughput of kcache's host backend and of the same loop in C with OpenMP,
on 1, 2, ... threads, relative to the C loop built -O3 -march=native on one
thread (1.0, the dotted line); PoCL's throughput on every core (kcache's
OpenCL backend) is the dashed line. A second figure beside them: the pool's
crossover, microseconds per saxpy launch against the grid's size, on one
thread and on every core. Needs matplotlib.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    run = None
    with open(sys.argv[1]) as f:
        for line in f:
            if line.startswith("{"):
                run = json.loads(line)
    if run is None:
        sys.exit("%s: no JSON line (run kc_bench_hostcpu --json)" % sys.argv[1])
    threads = run["threads"]
    kernels = run["kernels"]
    n = len(kernels) + 1
    cols = 3
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.4 * rows), squeeze=False)
    for ax, k in zip(axes.flat, kernels):
        ref = k["c_o3_native_ms"]
        ax.plot(threads, [ref / ms for ms in k["kcache_ms"]], "o-", label="kcache host")
        ax.plot(threads, [ref / ms for ms in k["c_openmp_ms"]], "s-", label="C, OpenMP")
        ax.axhline(1.0, color="gray", linestyle=":", label="C -O3 -march=native, 1 thread")
        if k.get("opencl_ms", -1) > 0:
            ax.axhline(ref / k["opencl_ms"], color="red", linestyle="--", label="PoCL, every core")
        ax.set_title(k["name"])
        ax.set_xlabel("threads")
        ax.set_ylabel("throughput / C -O3 1 thread")
        ax.set_xticks(threads)
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
    axes.flat[0].legend(fontsize=7)
    ax = axes.flat[len(kernels)]
    cross = run.get("crossover", [])
    if cross:
        items = [c["items"] for c in cross]
        ax.plot(items, [c["one_thread_us"] for c in cross], "o-", label="1 thread")
        ax.plot(items, [c["all_threads_us"] for c in cross], "s-", label="every core")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("saxpy work items")
        ax.set_ylabel("us per launch (median)")
        ax.set_title("the pool's crossover")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    for extra in list(axes.flat)[n:]:
        extra.axis("off")
    fig.suptitle("kcache host backend, %s, %d cores (best of %d)" % (run["cpu"], run["cores"], run["reps"]),
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=90)


if __name__ == "__main__":
    main()
