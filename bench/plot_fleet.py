# SPDX-License-Identifier: MIT
"""Draws kc_bench_fleet's figures against the number of nodes into a PNG.

Usage: python3 bench/plot_fleet.py LOG PNG

LOG is a committed log under bench/results/ (comment lines starting with '#',
the benchmark's --json line, then its table). Three panels, one line per
deadline the run measured (kcache's default and the longer ones of
--timeouts): the fleet's wall time (release to the last node done) against
the number of nodes, with one node compiling alone without the tier as the
dotted line; the compiles in total across the fleet, with the goal (one per
kernel: single flight) dotted and one per kernel per node (no tier) dashed;
the median and worst first launch over every node's kernels. Needs
matplotlib.
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
        sys.exit("%s: no JSON line (run kc_bench_fleet --json)" % sys.argv[1])
    k = run["kernels"]
    fig, axes = plt.subplots(1, 3, figsize=(13.5, 4.0))
    wall, comp, lat = axes
    nodes_all = set()
    for i, mode in enumerate(run["modes"]):
        rows = [r for r in mode["rows"] if r["ok"]]
        nodes = [r["nodes"] for r in rows]
        nodes_all.update(nodes)
        label = "default (5 ms)" if mode["timeout_ms"] == 0 else "%d ms deadline" % mode["timeout_ms"]
        marker = "os^v"[i % 4]
        wall.plot(nodes, [r["wall_s"] for r in rows], marker + "-", label=label)
        comp.plot(nodes, [r["compiles"] for r in rows], marker + "-", label=label)
        color = lat.plot(nodes, [r["first_launch_median_ms"] for r in rows], marker + "-",
                         label=label + ", median")[0].get_color()
        lat.plot(nodes, [r["first_launch_worst_ms"] for r in rows], marker + ":", color=color,
                 label=label + ", worst")
    nodes = sorted(nodes_all)
    if run["alone"]["ok"]:
        wall.axhline(run["alone"]["wall_s"], color="gray", linestyle=":",
                     label="one node alone, no tier")
    comp.plot(nodes, [k] * len(nodes), color="gray", linestyle=":", label="goal: %d (single flight)" % k)
    comp.plot(nodes, [k * n for n in nodes], color="gray", linestyle="--", label="%d per node (no tier)" % k)
    for ax, title, ylabel in ((wall, "fleet wall time", "seconds (release to last node done)"),
                              (comp, "compiles in total", "compiles"),
                              (lat, "first launch per kernel", "ms (every node's kernels)")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(nodes)
        ax.set_xticklabels([str(n) for n in nodes])
        ax.set_xlabel("nodes (processes)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    comp.set_yscale("log")
    lat.set_yscale("log")
    load = run["load_start"]
    fig.suptitle("kcache fleet: N nodes cold-start the same %d kernels at once through one Redis "
                 "(%s, %d cores, load average %.0f at the start)" % (k, run["compiler"], run["cores"], load[0]),
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=90)


if __name__ == "__main__":
    main()
