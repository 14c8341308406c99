"""Plot the server benchmark's loop lag: health p99 against concurrency, one line per backend.

Reads the raw results that ``bench_serving.py --json PATH`` wrote, takes the
same medians over rounds as its tables (``median_cells``), and draws one
panel per batch size (1, 32): x is the number of closed-loop clients C,
y the ``GET /health`` p99 in ms (log scale); solid lines and dots with
probe connections pre-opened, dashed lines and crosses with a connection per
probe.  The title carries the run's load average, so the figure is never
read without it.

    python bench/bench_serving.py --json serve.json
    python bench/plot_serving.py serve.json docs/serving.png

Needs matplotlib (``pip install -e ".[bench]"``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from _health_probe import PROBE_MODES
from bench_serving import BACKENDS, median_cells

STYLES = {"pre-opened": "o-", "per-probe": "x--"}
COLORS = {"agrad": "tab:blue", "agrad-thread": "tab:cyan", "torch": "tab:red", "torch-thread": "tab:orange"}


def plot(run: dict[str, Any], path: str) -> None:
    """Draw ``run`` (the JSON ``bench_serving.py`` wrote) into the PNG file ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = median_cells(run["results"])
    backends = [b for b in BACKENDS if b in run["args"]["backends"]]
    closed_loop = [s for s in run["scenarios"] if s["clients"]]
    batches = sorted({s["batch"] for s in closed_loop})
    fig, axes = plt.subplots(1, len(batches), figsize=(5.5 * len(batches), 4.2), sharey=True, squeeze=False)
    for ax, batch in zip(axes[0], batches):
        clients = sorted(s["clients"] for s in closed_loop if s["batch"] == batch)
        for backend in backends:
            for mode in PROBE_MODES:
                p99 = [cells[mode, f"batch {batch}, C={c}", backend]["p99"] for c in clients]
                ax.plot(clients, p99, STYLES[mode], color=COLORS[backend],
                        label=f"{backend}, {mode}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(clients, [str(c) for c in clients])
        ax.set_yscale("log")
        ax.set_xlabel("concurrent clients C")
        ax.set_title(f"saliency, batch {batch}")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("GET /health p99, ms (log)")
    axes[0][0].legend(fontsize=7, loc="upper left")  # batch 1 leaves that corner empty
    load = " ".join(f"{v:.2f}" for v in run["load_before"])
    load_after = " ".join(f"{v:.2f}" for v in run["load_after"])
    args = run["args"]
    fig.suptitle(f"event-loop lag under load: {args['rounds']} round(s) x {args['duration']:g} s, medians; "
                 f"load average {load} before, {load_after} after", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot written to {path}")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="the JSON file written by bench_serving.py --json")
    parser.add_argument("png", help="the PNG file to write")
    args = parser.parse_args(argv)
    with open(args.results) as f:
        plot(json.load(f), args.png)


if __name__ == "__main__":
    main()
