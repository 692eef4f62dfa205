# SPDX-License-Identifier: MIT
"""Draws kc_bench_hostscale's figures per tenth of the run into a PNG.

Usage: python3 bench/plot_hostscale.py LOG PNG

LOG is a committed log under bench/results/ (comment lines starting with '#',
and the benchmark's --json line). Each panel is one figure against the
number of linked objects, with a dashed line at twice its first tenth: a
figure that stays under the line is flat within 2x. Needs matplotlib.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PANELS = [
    ("link_us", "link (first launch), us"),
    ("hot_ns", "hot kc_launch, ns"),
    ("rr_ns", "round-robin kc_launch (kernels), ns"),
    ("rr_ctx_ns", "round-robin (kernel, context), ns"),
    ("define_us", "kc_define (unrelated), us"),
    ("stats_us", "kc_stats_get, us"),
    ("collect_ms", "kc_collect (nothing to free), ms"),
    ("rss_per_ci_kb", "resident KB per code instance"),
    ("compile_ms", "tcc compile, ms"),
]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    run = None
    with open(sys.argv[1]) as f:
        for line in f:
            if line.startswith("{"):
                run = json.loads(line)
    if run is None:
        sys.exit("no --json line in " + sys.argv[1])
    parts = run["parts"]
    x = [p["linked"] for p in parts]
    fig, axes = plt.subplots(3, 3, figsize=(14, 10))
    for ax, (key, title) in zip(axes.flat, PANELS):
        y = [p[key] for p in parts]
        ax.plot(x, y, "o-", color="tab:blue")
        ax.axhline(2 * y[0], color="tab:red", linestyle="--", linewidth=1, label="2x first tenth")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("linked objects")
        ax.set_ylim(bottom=0, top=max(max(y), 2 * y[0]) * 1.15)
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(
        "kcache host backend (%s) growing to %d specializations x %d contexts = %d linked objects; "
        "\nruntime destroy %.0f ms (%.0f ms of CPU)"
        % (run["cc"], run["kernels"], run["contexts"], x[-1], run["destroy_ms"], run.get("destroy_cpu_ms", -1))
    )
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=80)


if __name__ == "__main__":
    main()
