"""Draw ``docs/images/engine_layout.png``: where a backward's work runs, as the engine's code lays it out.

Boxes and arrows, drawn from ``agrad/_engine``: the event loop's thread with
the callers, the admission gate, the CPU worker and its line of jobs
(``_cpu_worker.py``), the graph tasks with their ready queues
(``_graph_task.py``, ``_ready_queue.py``), the cooperative calls
(``_cooperative.py``), the spilled reentrant tasks (``_drivers.py``) and the
device workers (``_device_workers.py``); beside it the kernel pool's threads
(``_pool.py``), the blocking twins on other threads, and the CUDA streams.
Each box names its module.

    python docs/_tools/figures/engine_layout.py          # writes docs/images/engine_layout.png
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

if __package__ in (None, ""):  # run as a script: _style beside this file
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from _style import COLORS, DPI, IMAGES, WIDTH_IN, save  # noqa: E402

__all__ = ["draw", "main"]

HEIGHT_IN = 8.6  # the canvas is 120 x 86 units: 10 px each
_FONT = 9


def _box(ax: Any, x: float, y: float, w: float, h: float, title: str, lines: tuple[str, ...] = (),
         color: str = "#ffffff", edge: str = COLORS["edge"], dashed: bool = False) -> None:
    """A rounded box with its lower-left corner at (x, y), a bold title at its top and ``lines`` under it."""
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.0,rounding_size=0.8", facecolor=color,
                                edgecolor=edge, linewidth=1.2, linestyle="--" if dashed else "-"))
    if title:
        ax.text(x + 0.8, y + h - 0.7, title, ha="left", va="top", fontsize=_FONT + 1, weight="bold")
    if lines:
        ax.text(x + 0.8, y + h - 3.0, "\n".join(lines), ha="left", va="top", fontsize=_FONT, linespacing=1.3)


def _arrow(ax: Any, start: tuple[float, float], end: tuple[float, float], label: str = "",
           at: tuple[float, float] | None = None, color: str = COLORS["edge"], dashed: bool = False,
           ha: str = "center") -> None:
    """An arrow from ``start`` to ``end`` with ``label`` written at ``at`` (default: its middle)."""
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color=color, linewidth=1.3,
                                 linestyle="--" if dashed else "-", shrinkA=0, shrinkB=0))
    if label:
        x, y = at if at is not None else ((start[0] + end[0]) / 2, (start[1] + end[1]) / 2)
        ax.text(x, y, label, ha=ha, va="center", fontsize=_FONT, color=color,
                bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.9})


def _loop_thread(ax: Any) -> None:
    """Everything that runs on the event loop's thread."""
    _box(ax, 1, 1.5, 71, 79, "The event loop's thread (asyncio, uvloop or trio): all bookkeeping runs here",
         color="#eef4fb", edge=COLORS["worker"])
    _box(ax, 3, 63, 36, 14.5, "Callers: request handlers", (
        "await loss.backward(), await autograd.grad(...):",
        "  make a GraphTask, submit it, wait for its turns;",
        "  await its async def backwards; commit .grad",
        "  in its own turn (Note [The caller commits])",
        "await agrad.cooperative(fn, x): a job for fn"))
    _box(ax, 44, 67, 26, 10.5, "Admission (_admission.py)", (
        "at most 16 cooperative calls per",
        "loop; the next waits its turn"))
    _box(ax, 3, 41.5, 67, 16, "CPU worker: one task per loop (_cpu_worker.py)", (
        "a line of runnable jobs, a heap by (-reentrant depth, arrival): deeper first, then first come",
        "runs the first job until it parks (kernels away), needs its caller, ends, or spends the",
        "  slice; then it goes to the back of the line, so a big backward cannot starve a small one",
        "one Budget for every job: 0.5 ms per loop pass, then yield_slice() (_traps.py) gives the",
        "  loop a turn, and every other coroutine runs (Note [Time slices])"), color="#dbe9f7")
    _box(ax, 4.5, 23.5, 32, 13, "", dashed=True)  # another graph task behind it: any number per loop
    _box(ax, 3, 22, 32, 13, "GraphTask: one per backward", (
        "(_graph_task.py) a sans-I/O generator:",
        "nodes, routing, staged .grad, commit",
        "ReadyQueue: (-reentrant depth, -seq_nr)",
        "inbox: results from its kernel threads"))
    _box(ax, 40, 22, 30, 13, "Cooperative call: one per call", (
        "(_cooperative.py) fn in a greenlet,",
        "pausing at agrad ops when the slice",
        "is spent; its backward_sync() runs",
        "here, in the same slices"))
    _box(ax, 3, 3, 32, 13, "Spilled reentrant backward", (
        "(_drivers.py) nested max_recursion_depth",
        "(60) deep: a fresh task of this loop",
        "(_traps.in_fresh_task), which the",
        "parent's node awaits"))
    _box(ax, 40, 3, 30, 13, "Device workers (_device_workers.py)", (
        "one task per device and loop;",
        "a ReadyQueue shared by every task;",
        "launches each job on the device's",
        "engine stream, never waits"), color="#f3ebe8", edge=COLORS["device"])


def _beside(ax: Any) -> None:
    """The threads and devices beside the loop's thread."""
    _box(ax, 78, 58, 41, 22.5, "Kernel pool: per loop (_pool.py)", (
        "threads borrowed from the loop's executor",
        "(trio: its thread cache), given back when idle",
        "at most n = get_num_interop_threads() run,",
        "2n in flight; jobs wait in line for a slot,",
        "deeper first, then first come (Note [Kernel slots])",
        "a kernel takes the straight chain below it;",
        "big products run in row blocks on idle threads",
        "the threads only compute: no bookkeeping"), color="#fff1e0", edge=COLORS["kernel"])
    _box(ax, 78, 27, 41, 20, "Other threads: the blocking twins", (
        "backward_sync(), grad_sync(), ... (_drivers.py):",
        "the same GraphTask.run(), driven inline on",
        "the calling thread; no slices, kernels inline",
        "async def backward: a private asyncio loop",
        "nested past depth 60: a fresh thread",
        "on a thread whose loop runs: holds that loop",
        "(BlockingCallWarning once per line)"), color="#fbeaea", edge=COLORS["blocking"])
    _box(ax, 78, 3, 41, 13, "CUDA: one engine stream per device", (
        "(agrad/_backends/_cupy.py) kernels run in",
        "launch order; a stream callback posts",
        "their completion to the loop"), color="#f3ebe8", edge=COLORS["device"])


def _flows(ax: Any) -> None:
    """What passes between the boxes."""
    _arrow(ax, (12, 63), (12, 57.5), "submit(task)", at=(12.8, 60.2), ha="left")
    _arrow(ax, (31, 57.5), (31, 63), "its turns", at=(31.8, 60.2), ha="left")
    _arrow(ax, (39, 72), (44, 72))
    _arrow(ax, (57, 67), (57, 57.5), "admitted: joins the line", at=(56.2, 62.2), ha="right")
    _arrow(ax, (18, 41.5), (18, 35), "advance(): run its steps", at=(18.8, 38.6), ha="left",
           color=COLORS["worker"])
    _arrow(ax, (55, 41.5), (55, 35), "switch() into the greenlet", at=(55.8, 38.6), ha="left",
           color=COLORS["worker"])
    _arrow(ax, (70, 54), (78, 70), "RunKernel", at=(74, 63.5), color=COLORS["kernel"])
    _arrow(ax, (78, 62), (70, 47), "done: wake", at=(74, 53), color=COLORS["kernel"])
    _arrow(ax, (15, 22), (15, 16), "nested too deep", at=(15.8, 19), ha="left")
    _arrow(ax, (35, 23), (45, 16), "DeviceJob", at=(41.5, 19.5), color=COLORS["device"])
    _arrow(ax, (70, 11), (78, 11), "launch", at=(74, 12.8), color=COLORS["device"])
    _arrow(ax, (78, 6.5), (70, 6.5), "done", at=(74, 4.8), color=COLORS["device"])
    _arrow(ax, (78, 30), (70, 30), "", color=COLORS["blocking"], dashed=True)
    ax.text(74, 30.8, "inside a\ncooperative\ncall", ha="center", va="bottom", fontsize=_FONT - 1,
            color=COLORS["blocking"])


def draw(out: Path) -> None:
    fig = plt.figure(figsize=(WIDTH_IN, HEIGHT_IN))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, 120)
    ax.set_ylim(0, 86)
    ax.axis("off")
    ax.text(1, 85, "Where a backward runs: the event loop's CPU worker, the kernel pool, devices, and the "
            "blocking twins", fontsize=13, va="top")
    _loop_thread(ax)
    _beside(ax)
    _flows(ax)
    save(fig, out)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=IMAGES / "engine_layout.png")
    args = parser.parse_args(argv)
    draw(args.out)
    print(f"wrote {args.out} ({int(WIDTH_IN * DPI)} px wide)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
