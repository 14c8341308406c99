"""Draw ``docs/images/time_slices.png``: an awaited backward's time slices on the event loop, from a real run.

Two runs on one asyncio loop, each beside a coroutine that wants to run every
millisecond (a ticker, standing for the server's other requests) and a
second, small request whose backward starts 15 ms in:

* **awaited** — ``await loss.backward()`` of a residual MLP chain: the loop's
  CPU worker runs its nodes in 0.5 ms slices and gives the loop a turn after
  each, so the ticker keeps its schedule and the small request's backward
  takes its turns in the same worker's line; the biggest products run in the
  kernel pool's threads;
* **blocking** — ``loss.backward_sync()`` of the same graph, called inside the
  coroutine (the mistake agrad warns about with ``BlockingCallWarning``): one
  long block, the ticker and the small request starved until it returns.

What is drawn is recorded, not invented: the script wraps (for the run only,
agrad unchanged) the worker's turns (``Turns.advance``), the kernels handed
to the pool (``KernelPool.offload``) and the row blocks helpers run
(``_row_blocks._run_block``), and logs each tick of the ticker.  The timings
differ from run to run and machine to machine; the layout does not.

    python docs/_tools/figures/time_slices.py            # writes docs/images/time_slices.png
    python docs/_tools/figures/time_slices.py --out x.png
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import os
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

if __package__ in (None, ""):  # run as a script: the repository's agrad, and _style beside this file
    sys.path[:0] = [str(Path(__file__).resolve().parents[3]), str(Path(__file__).resolve().parent)]

from _style import COLORS, DPI, IMAGES, WIDTH_IN, save  # noqa: E402

import agrad  # noqa: E402
from agrad import nn  # noqa: E402
from agrad._engine import _cpu_worker, _pool, _row_blocks  # noqa: E402
from agrad._engine._slices import clock  # noqa: E402

__all__ = ["Recording", "record", "draw", "main"]

TICK_S = 0.001  # the ticker's period
OTHER_AT_S = 0.015  # when the small request's backward starts
MARGIN_S = 0.004  # ticker time drawn before and after the backward

# Which request a worker turn belongs to: set by each request's coroutine, read
# in the context the worker runs its job in (a copy of the caller's).
_REQUEST: contextvars.ContextVar[int] = contextvars.ContextVar("request", default=0)
MAIN, OTHER = 0, 1


@dataclass
class Recording:
    """One run, in seconds of ``clock()``: what ran on the loop and in the kernel threads."""

    worker: list[tuple[float, float, int]] = field(default_factory=list)  # (start, end, MAIN or OTHER)
    kernels: dict[int, list[tuple[float, float]]] = field(default_factory=dict)  # thread ident -> intervals
    ticks: list[float] = field(default_factory=list)  # when the ticker ran
    blocking: list[tuple[float, float]] = field(default_factory=list)  # the blocking call, start to end
    main: tuple[float, float] = (0.0, 0.0)  # the big backward, call to return
    other: tuple[float, float] = (0.0, 0.0)  # the small request's backward, call to return
    load: float = 0.0  # the machine's 1-minute load average when the run ended
    runs: int = 1  # how many runs it was chosen from (the median by the ticker's largest lateness)

    def kernel(self, start: float, end: float) -> None:
        self.kernels.setdefault(threading.get_ident(), []).append((start, end))  # list.append: thread-safe

    def lateness_ms(self) -> tuple[float, float]:
        """The ticker's median and largest lateness: how long past its period it waited."""
        gaps = sorted(b - a - TICK_S for a, b in zip(self.ticks, self.ticks[1:]))
        return 1e3 * max(gaps[len(gaps) // 2], 0.0), 1e3 * max(gaps[-1], 0.0)


def _timed(rec: Recording, fn: Callable[[], Any]) -> Callable[[], Any]:
    def run() -> Any:
        start = clock()
        try:
            return fn()
        finally:
            rec.kernel(start, clock())
    return run


@contextlib.contextmanager
def _recorded(rec: Recording) -> Iterator[None]:
    """agrad's worker turns and kernel threads, logged into ``rec`` while the block runs."""
    advance, offload, run_block = _cpu_worker.Turns.advance, _pool.KernelPool.offload, _row_blocks._run_block

    def logged_advance(turns: Any, exc: BaseException | None = None) -> None:
        start = clock()
        try:
            advance(turns, exc)
        finally:
            rec.worker.append((start, clock(), turns.context.run(_REQUEST.get)))

    def logged_offload(pool: Any, task: Any, job: Callable[[], None], helpers: int = 0) -> bool:
        return offload(pool, task, _timed(rec, job), helpers)

    def logged_block(block: tuple[Callable[[], Any], Any]) -> None:
        _timed(rec, lambda: run_block(block))()

    _cpu_worker.Turns.advance = logged_advance  # type: ignore[method-assign, assignment]
    _pool.KernelPool.offload = logged_offload  # type: ignore[method-assign, assignment]
    _row_blocks._run_block = logged_block
    try:
        yield
    finally:
        _cpu_worker.Turns.advance = advance  # type: ignore[method-assign]
        _pool.KernelPool.offload = offload  # type: ignore[method-assign]
        _row_blocks._run_block = run_block


def _loss(blocks: int, seed: int, side: bool) -> agrad.Tensor:
    """A residual chain ``h + tanh(layer(h)) * 0.1`` of small nodes (batch 64, width 256) and, if
    ``side``, a branch with one product (64 x 8192 x 256) big enough to run in the kernel pool."""
    agrad.manual_seed(seed)
    h = agrad.randn(64, 256)
    for _ in range(blocks):
        h = h + agrad.tanh(nn.Linear(256, 256)(h)) * 0.1
    loss = (h * h).mean()
    if side:
        u = agrad.tanh(nn.Linear(8192, 256)(agrad.randn(64, 8192)))
        loss = loss + (u * u).mean()
    return loss


async def _run(rec: Recording, blocking: bool, blocks: int) -> None:
    main, other = _loss(blocks, seed=0, side=True), _loss(4, seed=1, side=False)
    running = True
    other_done = anyio.Event()

    async def ticker() -> None:
        while running:
            rec.ticks.append(clock())
            await anyio.sleep(TICK_S)

    async def other_request() -> None:
        await anyio.sleep(OTHER_AT_S)
        _REQUEST.set(OTHER)
        start = clock()
        await other.backward()
        rec.other = (start, clock())
        other_done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await anyio.sleep(MARGIN_S)
        tg.start_soon(other_request)
        start = clock()
        if blocking:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", agrad.BlockingCallWarning)  # the mistake shown on purpose
                main.backward_sync()
            rec.blocking.append((start, clock()))
        else:
            await main.backward()
        rec.main = (start, clock())
        await other_done.wait()
        await anyio.sleep(MARGIN_S)
        running = False


def record(blocking: bool, blocks: int = 100) -> Recording:
    """Run one scenario on a fresh asyncio loop and return what ran when."""
    rec = Recording()
    with _recorded(rec):
        anyio.run(_run, rec, blocking, blocks)
    rec.load = os.getloadavg()[0]
    return rec


ZOOM_MS = 6.0  # the close-up's width


def _lanes(rec: Recording) -> list[tuple[str, list[tuple[float, float]], str]]:
    """The rows of one run, top to bottom: (label, spans in seconds, colour)."""
    def took(span: tuple[float, float]) -> str:
        return f"{1e3 * (span[1] - span[0]):.1f} ms"

    lanes = []
    if rec.blocking:
        lanes.append((f"loop: backward_sync()\nin the coroutine\n(big backward, {took(rec.main)})", rec.blocking,
                      COLORS["blocking"]))
    else:
        lanes.append((f"loop: CPU worker,\nbig backward\n({took(rec.main)})",
                      [(a, b) for a, b, job in rec.worker if job == MAIN], COLORS["worker"]))
    lanes.append((f"loop: CPU worker,\nsmall request\n({took(rec.other)})",
                  [(a, b) for a, b, job in rec.worker if job == OTHER], COLORS["other"]))
    lanes.append(("loop: ticker\n(wants every 1 ms)", [(t, t) for t in rec.ticks], COLORS["ticker"]))
    for i, (_, spans) in enumerate(sorted(rec.kernels.items(), key=lambda kv: kv[1][0][0])):
        lanes.append((f"kernel pool:\nthread {i + 1}", spans, COLORS["kernel"]))
    return lanes


def _panel(ax: Any, rec: Recording, title: str, window_ms: tuple[float, float]) -> None:
    """One run's lanes on a time axis in ms from ``MARGIN_S`` before its backward started."""
    t0 = rec.main[0] - MARGIN_S
    lanes = _lanes(rec)
    instant = (window_ms[1] - window_ms[0]) / 300  # how wide a tick is drawn
    for row, (_, spans, color) in enumerate(reversed(lanes)):
        bars = [(1e3 * (a - t0), max(1e3 * (b - a), instant)) for a, b in spans]
        ax.broken_barh(bars, (row - 0.35, 0.7), facecolor=color, edgecolor="white", linewidth=0.4)
    ax.set_yticks(range(len(lanes)), [label for label, _, _ in reversed(lanes)], fontsize=9)
    ax.set_ylim(-0.6, len(lanes) - 0.4)
    ax.set_xlim(*window_ms)
    ax.set_title(title, fontsize=11, loc="left")
    ax.grid(axis="x", color="#dddddd", lw=0.6)
    ax.set_axisbelow(True)


def _lateness(rec: Recording) -> str:
    p50, worst = rec.lateness_ms()
    return f"ticker late by {p50:.2f} ms (median), {worst:.1f} ms (max)"


def draw(awaited: Recording, blocking: Recording, out: Path) -> None:
    """Three panels: the awaited run, a close-up of it, the blocking run (time in ms)."""
    end = 1e3 * max(max(r.ticks) - r.main[0] + 2 * MARGIN_S for r in (awaited, blocking))
    zoom_at = 1e3 * (awaited.other[0] - awaited.main[0] + MARGIN_S) - 1.0  # where both requests interleave
    zoom = (zoom_at, zoom_at + ZOOM_MS)
    rows = [len(_lanes(r)) for r in (awaited, awaited, blocking)]
    fig, axes = plt.subplots(3, 1, figsize=(WIDTH_IN, 1.6 + 0.62 * sum(rows)), gridspec_kw={"height_ratios": rows})
    _panel(axes[0], awaited, f"await loss.backward(): the loop free between slices; {_lateness(awaited)}",
           (0.0, end))
    axes[0].axvspan(*zoom, color="#ffe680", alpha=0.5, lw=0)
    _panel(axes[1], awaited, f"The same run, {ZOOM_MS:.0f} ms up close (shaded above): 0.5 ms slices of both "
           "requests' backwards, the ticker between them", zoom)
    _panel(axes[2], blocking, f"loss.backward_sync() inside a coroutine: the loop held; {_lateness(blocking)}",
           (0.0, end))
    axes[2].set_xlabel(f"time (ms) on one asyncio event loop; {os.cpu_count()} CPUs, load average "
                       f"{awaited.load:.1f}; the awaited run is the median of {awaited.runs} by largest lateness")
    fig.suptitle("One backward pass on the event loop, beside a coroutine that wants to run every millisecond "
                 "and a second request", fontsize=13, x=0.01, ha="left")
    fig.tight_layout()
    save(fig, out)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=IMAGES / "time_slices.png")
    parser.add_argument("--runs", type=int, default=5, help="awaited runs to record; the one drawn is the median "
                        "by the ticker's largest lateness (default 5)")
    args = parser.parse_args(argv)
    _loss(2, seed=0, side=True).backward_sync()  # warm up: imports and first-call costs stay out of the picture
    runs = sorted((record(blocking=False) for _ in range(args.runs)), key=lambda r: r.lateness_ms()[1])
    print("awaited runs, ticker's largest lateness (ms):", ", ".join(f"{r.lateness_ms()[1]:.1f}" for r in runs))
    awaited, blocking = runs[len(runs) // 2], record(blocking=True)
    awaited.runs = len(runs)
    for name, rec in (("awaited", awaited), ("blocking", blocking)):
        p50, worst = rec.lateness_ms()
        print(f"{name}: backward {1e3 * (rec.main[1] - rec.main[0]):.1f} ms, {len(rec.worker)} worker turns, "
              f"{sum(len(s) for s in rec.kernels.values())} kernels in {len(rec.kernels)} threads, "
              f"ticker lateness median {p50:.2f} ms, max {worst:.1f} ms")
    draw(awaited, blocking, args.out)
    print(f"wrote {args.out} ({int(WIDTH_IN * DPI)} px wide)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
