"""Engine benchmarks: how agrad schedules a backward, next to its own alternatives and a numpy limit.

Five measurements, in one process, each printed as a table:

* **responsiveness** — a 1 ms ticker task (``await asyncio.sleep(0.001)`` in a
  loop, recording how late each tick wakes) runs on the event loop while one
  backward of about two seconds of kernels runs on the same loop: awaited with
  the default scheduling (big kernels offloaded), awaited with every kernel
  inline (``offload="never"``), and the blocking twin called inside the
  coroutine (the same backward run synchronously on the loop); and awaited
  with BLAS at one thread per usable core (``agrad.set_num_threads``) instead
  of agrad's default of one (Note [BLAS threads]): an offloaded matmul then
  runs BLAS's threads on every core, where the loop needs one too.  The
  workload is a residual chain ``h = h + tanh(h @ W_i) * 0.1`` on (512, 512)
  float32 arrays, its length calibrated so the backward takes about two
  seconds.
  Reported: lateness p50 / p99 / max of the ticks due while the backward ran
  (medians over samples), and the backward's wall time.
* **parallel branches** — a (2**20,) float32 leaf feeds 16 independent
  branches of elementwise ops, summed: agrad awaited with offload (default)
  against agrad forced inline, and the same backward written by hand in numpy,
  run serially and with the branches split over two threads (what this
  machine gives two threads on these kernels: the limit).  Two branch bodies:
  ``sin``/``tanh``/multiply (partly memory-bound) and ``x*x``/``pow``/``sin``
  (compute-bound).  Each sample builds a fresh forward, untimed.
* **concurrent throughput** — 64 independent MLP backwards (ReLU,
  cross-entropy, each its own parameters and graph; forwards built untimed)
  awaited together in one task group (default scheduling, and all inline),
  against the same 64 awaited one after another and run blocking one after
  another; a small MLP (256-256-10, batch 32: every kernel below the offload
  threshold) and a medium one (512-512-512-10, batch 128: its matmuls above).
* **per-node overhead** — bench_perf's W1, the 4000-node chain on (1,) arrays, awaited
  and blocking: the scheduler (slice checks, offload decisions) should cost
  nothing on small nodes, which all run inline.
* **offload threshold** — the cost of sending one node to a thread and back:
  30 unary nodes (``sin``, ``* 0.9``, ``tanh`` in turn) on arrays of 2**15 to
  2**22 elements, backward through ``agrad.autograd.grad`` (which runs one
  node per job, Note [Offloaded chains]), inline against every node
  offloaded, for one chain and for two independent chains.  This is the
  measurement behind the default threshold (Note [Offload threshold]).

Throughput, branches and overhead use ``_harness``'s block timing (A B C … C B
A, per-block medians printed); responsiveness alternates modes sample by
sample, each sample on a fresh event loop.  Gradients of the systems are
checked to agree before timing.  ``--plot PATH`` also draws the figures as a
PNG (matplotlib).

Run ``python bench/bench_engine.py`` (a few minutes) or ``--quick`` for a
smoke run (a 0.1 s backward, 2 branches, 16 MLPs, sizes up to 2**20, few
samples: about half a minute); ``--loop uvloop`` runs everything on uvloop.
Each section prints a line as it starts.  Nothing here asserts on timings.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import gc
import os
import statistics
import sys
import textwrap
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import numpy as np
from threadpoolctl import threadpool_info

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_perf  # noqa: E402  (the W1 chain and the MLP)
from _harness import (  # noqa: E402
    Measurement,
    System,
    blocking_on_purpose,
    check_same_gradients,
    format_table,
    machine_info,
    measure,
    progress,
    require,
)

import agrad  # noqa: E402
from agrad._blas import USER_VARIABLES  # noqa: E402
from agrad._engine._options import current_options  # noqa: E402
from agrad.autograd.graph import engine_options  # noqa: E402

_clock = time.perf_counter
Offload = Literal["auto", "always", "never"]  # engine_options' offload modes


def _awaited(label: str, build: Callable[[], agrad.Tensor], offload: Offload = "auto") -> System:
    """A system awaiting ``build()``'s backward with the given offload mode."""

    async def sample() -> float:
        loss = build()
        with engine_options(offload=offload):
            t0 = _clock()
            await loss.backward()
            return _clock() - t0

    return System(label, sample, is_async=True)


def _blocking(label: str, build: Callable[[], agrad.Tensor]) -> System:
    def sample() -> float:
        loss = build()
        t0 = _clock()
        loss.backward_sync()
        return _clock() - t0

    return System(label, sample)


# -- 1. event-loop responsiveness ----------------------------------------------------------

TICK = 0.001
WIDTH = 512  # h is (WIDTH, WIDTH), every W_i is (WIDTH, WIDTH)
N_WEIGHTS = 8
BLAS_THREADS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
# mode -> (offload, BLAS threads or None for agrad's default, time slice or None for
# the default); blocking: offload None.
RESP_MODES: dict[str, tuple[Offload | None, int | None, float | None]] = {
    "await": ("auto", None, None), f"await, BLAS {BLAS_THREADS} threads": ("auto", BLAS_THREADS, None),
    "await, 1 ms slice": ("auto", None, 0.001), "await, inline": ("never", None, None),
    "blocking": (None, None, None),
}


@contextlib.contextmanager
def _blas_threads(n: int | None) -> Iterator[None]:
    """BLAS at ``n`` threads inside the block (``agrad.set_num_threads``); None: as configured."""
    before = agrad.get_num_threads()
    if n is not None:
        agrad.set_num_threads(n)
    try:
        yield
    finally:
        agrad.set_num_threads(before)


def _weights(seed: int = 0) -> list[agrad.Tensor]:
    rng = np.random.default_rng(seed)
    return [agrad.from_numpy((rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(np.float32))
            .requires_grad_() for _ in range(N_WEIGHTS)]


def _residual_chain(weights: Sequence[agrad.Tensor], blocks: int) -> agrad.Tensor:
    """``h = h + tanh(h @ W_i) * 0.1`` ``blocks`` times; per block the backward runs one
    MmBackward (two 512^3 matmuls: offloaded by default), TanhBackward, MulBackward,
    AddBackward and a buffer sum where the residual meets the branch (inline)."""
    rng = np.random.default_rng(1)
    h = agrad.from_numpy(rng.standard_normal((WIDTH, WIDTH)).astype(np.float32))
    for i in range(blocks):
        h = h + agrad.tanh(h @ weights[i % len(weights)]) * 0.1
    return h.mean()


def _calibrate(target: float) -> int:
    """Blocks whose backward takes about ``target`` seconds here (blocking, best of 3)."""
    weights, probe = _weights(), 40
    best = float("inf")
    for _ in range(3):
        loss = _residual_chain(weights, probe)
        gc.collect()
        t0 = _clock()
        loss.backward_sync()
        best = min(best, _clock() - t0)
        del loss
    return max(20, round(target / (best / probe)))


def _graph_nodes(loss: agrad.Tensor) -> list[Any]:
    assert loss.grad_fn is not None
    seen, stack = {loss.grad_fn}, [loss.grad_fn]
    while stack:
        for edge in stack.pop().next_edges:
            if edge is not None and edge[0] not in seen:
                seen.add(edge[0])
                stack.append(edge[0])
    return list(seen)


async def _ticker(ticks: list[tuple[float, float]], stop: asyncio.Event) -> None:
    """Sleep 1 ms at a time; record (wake time, lateness) of every tick."""
    while not stop.is_set():
        t0 = _clock()
        await asyncio.sleep(TICK)
        t1 = _clock()
        ticks.append((t1, t1 - t0 - TICK))


async def _ticked(mode: str, blocks: int) -> tuple[float, list[float]]:
    """Build the graph, start the ticker, run the backward; the backward's wall time
    and the lateness of every tick that was due while it ran."""
    loss = _residual_chain(_weights(), blocks) if mode != "idle" else None
    gc.collect()
    ticks: list[tuple[float, float]] = []
    stop = asyncio.Event()
    ticker = asyncio.create_task(_ticker(ticks, stop))
    await asyncio.sleep(0.02)  # ticker in its steady state
    offload, blas, time_slice = RESP_MODES.get(mode, (None, None, None))
    with _blas_threads(blas), blocking_on_purpose():
        t0 = _clock()
        if mode == "idle":
            await asyncio.sleep(0.3)
        elif offload is None:
            loss.backward_sync()  # type: ignore[union-attr]
        else:
            with engine_options(offload=offload, time_slice=time_slice):
                await loss.backward()  # type: ignore[union-attr]
        t1 = _clock()
    await asyncio.sleep(0.01)  # the tick delayed by the backward lands
    stop.set()
    await ticker
    window = [late for wake, late in ticks if wake >= t0 and wake - late <= t1]
    return t1 - t0, window


def _pct(xs: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q)) if xs else float("nan")


def responsiveness(target: float, repeats: int, new_loop: Callable[[], asyncio.Runner]) -> dict[str, Any]:
    blocks = _calibrate(target)
    nodes = _graph_nodes(_residual_chain(_weights(), blocks))
    threshold = current_options().offload_threshold
    offloaded = sum(1 for n in nodes if n.offload is None and n._work >= threshold)
    modes = list(RESP_MODES)
    stats: dict[str, list[tuple[float, float, float, float, int]]] = {m: [] for m in (*modes, "idle")}
    # minutes in a full run: one line, a number added as each round starts
    print(f"  {blocks} blocks; a warm-up, then {repeats} rounds of every mode:", end="", flush=True)
    with new_loop() as runner:
        runner.run(_ticked("idle", 0))
        for m in modes:  # warm-up
            runner.run(_ticked(m, blocks))
        for i in range(repeats):
            print(f" {i + 1}", end="", flush=True)
            for m in (modes if i % 2 == 0 else modes[::-1]) + (["idle"] if i % 2 == 0 else []):
                wall, late = runner.run(_ticked(m, blocks))
                stats[m].append((wall, _pct(late, 50), _pct(late, 99), max(late, default=float("nan")),
                                 len(late)))
    print()

    def med(m: str, k: int) -> float:
        return statistics.median(s[k] for s in stats[m])

    print(f"responsiveness: 1 ms ticker during one backward of {len(nodes)} nodes ({offloaded} above the "
          f"offload threshold) ({blocks} residual blocks on ({WIDTH},{WIDTH}) float32)  "
          f"[ms, median of {repeats} samples per mode]")
    print(f"  time slice {current_options().time_slice * 1e3:.1f} ms, offload threshold {threshold} elements")
    labels = {m: {"blocking": "blocking (sync)", "idle": "idle loop"}.get(m, "agrad " + m) for m in stats}
    w = max(len(v) for v in labels.values()) + 2
    print(f"  {'mode':<{w}}{'backward':>10}{'ticks':>7}{'late p50':>10}{'late p99':>10}{'late max':>10}")
    for m in (*modes, "idle"):
        wall_ms = "-" if m == "idle" else f"{med(m, 0) * 1e3:.0f}"
        print(f"  {labels[m]:<{w}}{wall_ms:>10}{med(m, 4):>7.0f}{med(m, 1) * 1e3:>10.3f}"
              f"{med(m, 2) * 1e3:>10.3f}{med(m, 3) * 1e3:>10.3f}")
    for other in modes[1:]:
        print(f"  {other + ' / await':<{w}}{med(other, 0) / med('await', 0):>9.2f}x{'':>7}"
              + "".join(f"{med(other, k) / med('await', k):>9.1f}x" for k in (1, 2, 3)))
    print(f"  agrad await: p99 lateness {med('await', 2) * 1e3:.2f} ms (target < 5 ms); worst sample max "
          f"{max(s[3] for s in stats['await']) * 1e3:.2f} ms")
    return {m: {"p50": med(m, 1), "p99": med(m, 2), "max": med(m, 3), "wall": med(m, 0)} for m in stats}


# -- 2. parallel branches ---------------------------------------------------------------------

BRANCH_N, BRANCHES, BRANCH_DEPTH = 1 << 20, 16, 3


class Branches:
    """A leaf feeding ``branches`` independent branches, each ``BRANCH_DEPTH`` times one body.

    The body exists twice: in agrad ops (``body``), and by hand in numpy as its
    forward, returning what the backward keeps (``numpy_fwd``), and its backward
    (``numpy_bwd``), so that numpy runs exactly the kernels agrad's backward runs.
    """

    def __init__(self, name: str, body: Callable[[agrad.Tensor], agrad.Tensor],
                 numpy_fwd: Callable[[np.ndarray], tuple[np.ndarray, tuple]],
                 numpy_bwd: Callable[[np.ndarray, tuple], np.ndarray], branches: int) -> None:
        self.name, self.body, self.numpy_fwd, self.numpy_bwd = name, body, numpy_fwd, numpy_bwd
        self.x = np.random.default_rng(0).standard_normal(BRANCH_N).astype(np.float32)
        self.scales = [np.float32(0.5 + 0.05 * b) for b in range(branches)]

    def agrad_loss(self) -> tuple[agrad.Tensor, agrad.Tensor]:
        x = agrad.from_numpy(self.x.copy()).requires_grad_()
        total = agrad.tensor(0.0)
        for a in self.scales:
            y = x * float(a)
            for _ in range(BRANCH_DEPTH):
                y = self.body(y)
            total = total + y.sum()
        return x, total

    def numpy_forward(self) -> list[list[tuple]]:
        saved = []
        for a in self.scales:
            y, kept = self.x * a, []
            for _ in range(BRANCH_DEPTH):
                y, keep = self.numpy_fwd(y)
                kept.append(keep)
            saved.append(kept)
        return saved

    def numpy_backward(self, saved: list[list[tuple]], pool: ThreadPoolExecutor | None) -> np.ndarray:
        """The backward by hand; with ``pool``, the branches split over its threads."""
        def branch(kept: list[tuple], a: np.float32) -> np.ndarray:
            g = np.ones(BRANCH_N, np.float32)
            for keep in reversed(kept):
                g = self.numpy_bwd(g, keep)
            return g * a

        parts = pool.map(branch, saved, self.scales) if pool is not None else map(branch, saved, self.scales)
        total = np.zeros(BRANCH_N, np.float32)
        for g in parts:
            total += g
        return total

    def systems(self, pool: ThreadPoolExecutor) -> tuple[list[System], dict[str, list[np.ndarray]]]:
        def numpy_system(label: str, threads: ThreadPoolExecutor | None) -> System:
            def sample() -> float:
                saved = self.numpy_forward()
                t0 = _clock()
                self.numpy_backward(saved, threads)
                return _clock() - t0
            return System(label, sample)

        def loss() -> agrad.Tensor:
            return self.agrad_loss()[1]

        systems = [_awaited("agrad offload", loss), _awaited("agrad inline", loss, "never"),
                   numpy_system("numpy 2 threads", pool), numpy_system("numpy serial", None)]
        grads: dict[str, list[np.ndarray]] = {}
        modes: tuple[tuple[str, Offload], ...] = (("agrad offload", "auto"), ("agrad inline", "never"))
        for label, mode in modes:
            x, total = self.agrad_loss()
            with engine_options(offload=mode):
                asyncio.run(total.backward())
            grads[label] = [x.grad.numpy()]  # type: ignore[union-attr]
        grads["numpy 2 threads"] = [self.numpy_backward(self.numpy_forward(), pool)]
        grads["numpy serial"] = [self.numpy_backward(self.numpy_forward(), None)]
        return systems, grads


def _sin_tanh_fwd(y: np.ndarray) -> tuple[np.ndarray, tuple]:
    t = np.tanh(np.sin(y) * np.float32(1.1))
    return t, (y, t)


def _sin_tanh_bwd(g: np.ndarray, keep: tuple) -> np.ndarray:
    y, t = keep
    return g * (1 - t * t) * np.float32(1.1) * np.cos(y)


def _pow_sin_fwd(y: np.ndarray) -> tuple[np.ndarray, tuple]:
    v = y * y + np.float32(1.0)
    u = v ** np.float32(0.75)
    return np.sin(u), (y, v, u)


def _pow_sin_bwd(g: np.ndarray, keep: tuple) -> np.ndarray:
    y, v, u = keep
    g = g * np.cos(u) * (np.float32(0.75) * v ** np.float32(-0.25))
    return g * y + g * y


def branch_kinds(branches: int) -> tuple[Branches, ...]:
    """The two branch bodies, each ``branches`` times on one leaf."""
    return (Branches("sin-tanh", lambda y: (y.sin() * 1.1).tanh(), _sin_tanh_fwd, _sin_tanh_bwd, branches),
            Branches("pow-sin", lambda y: ((y * y + 1.0) ** 0.75).sin(), _pow_sin_fwd, _pow_sin_bwd, branches))


# -- 3. concurrent throughput ----------------------------------------------------------------

N_MLP = 64
# (name, batch, sizes): small kernels (all inline), and matmuls above the offload threshold.
MLPS = (("small", 32, (256, 256, 10)), ("medium", 128, (512, 512, 512, 10)))


def _mlp_models(count: int, batch: int, sizes: Sequence[int], seed: int = 0
                ) -> list[tuple[list[agrad.Tensor], agrad.Tensor, agrad.Tensor]]:
    """``count`` independent models: each its own parameters, inputs and targets."""
    rng = np.random.default_rng(seed)
    models = []
    for _ in range(count):
        params, (x, y) = bench_perf.mlp_arrays(rng, sizes, batch)
        models.append(([agrad.from_numpy(p).requires_grad_() for p in params],
                       agrad.from_numpy(x), agrad.from_numpy(y)))
    return models


def throughput_systems(count: int, batch: int, sizes: Sequence[int]
                       ) -> tuple[list[System], dict[str, list[np.ndarray]]]:
    models = _mlp_models(count, batch, sizes)

    def losses() -> list[agrad.Tensor]:
        for params, _, _ in models:
            for p in params:
                p.grad = None
        return [bench_perf.mlp_loss(agrad, params, x, y) for params, x, y in models]

    def task_group(offload: Offload) -> Callable[[], Any]:
        async def sample() -> float:
            ls = losses()
            with engine_options(offload=offload):
                t0 = _clock()
                async with asyncio.TaskGroup() as tg:
                    for loss in ls:
                        tg.create_task(loss.backward())
                return _clock() - t0
        return sample

    async def in_turn() -> float:
        ls = losses()
        t0 = _clock()
        for loss in ls:
            await loss.backward()
        return _clock() - t0

    def blocking_in_turn() -> float:
        ls = losses()
        t0 = _clock()
        for loss in ls:
            loss.backward_sync()
        return _clock() - t0

    systems = [
        System("task group", task_group("auto"), is_async=True),
        System("task group, inline", task_group("never"), is_async=True),
        System("await, in turn", in_turn, is_async=True),
        System("blocking, in turn", blocking_in_turn),
    ]
    grads: dict[str, list[np.ndarray]] = {}
    for s in systems:
        if s.is_async:
            asyncio.run(s.sample())  # type: ignore[arg-type]
        else:
            s.sample()
        grads[s.label] = [p.grad.numpy().copy() for params, _, _ in models for p in params]  # type: ignore[union-attr]
    return systems, grads


# -- 4. per-node overhead ------------------------------------------------------------------------


def chain_systems() -> tuple[list[System], dict[str, list[np.ndarray]]]:
    """bench_perf's W1 chain, agrad's two drivers only."""
    return bench_perf.build(bench_perf.W1, bench_perf.AGRAD)


# -- 5. the offload threshold --------------------------------------------------------------------

SWEEP_SIZES = tuple(1 << k for k in range(15, 23))
SWEEP_NODES = 30


def _sweep_loss(n: int, chains: int) -> tuple[agrad.Tensor, agrad.Tensor]:
    x = agrad.from_numpy(np.random.default_rng(0).standard_normal(n).astype(np.float32)).requires_grad_()
    total = agrad.tensor(0.0)
    for c in range(chains):
        y = x * (1.0 + c)
        for i in range(SWEEP_NODES):
            y = y.sin() if i % 3 == 0 else (y * 0.9 if i % 3 == 1 else y.tanh())
        total = total + y.sum()
    return x, total


async def _sweep_sample(n: int, chains: int, offload: Offload) -> float:
    x, loss = _sweep_loss(n, chains)
    gc.collect()
    with engine_options(offload=offload):
        t0 = _clock()
        await agrad.autograd.grad(loss, x)  # one node per job: Note [Offloaded chains]
        return _clock() - t0


def threshold_sweep(repeats: int, sizes: Sequence[int], new_loop: Callable[[], asyncio.Runner]
                    ) -> list[dict[str, float]]:
    rows = []
    print(f"offload threshold: {SWEEP_NODES} unary nodes per chain (sin, *0.9, tanh), backward via grad(), "
          f"every node inline vs every node in a thread  [µs per node, median of {repeats}]")
    print(f"  {'elements':>9}{'work/node':>11}{'1 chain: inline':>17}{'offload':>9}{'ratio':>7}"
          f"{'2 chains: inline':>18}{'offload':>9}{'ratio':>7}")
    with new_loop() as runner:
        for n in sizes:
            row: dict[str, float] = {"elements": n}
            for chains in (1, 2):
                samples: dict[str, list[float]] = {"never": [], "always": []}
                runner.run(_sweep_sample(n, chains, "always"))  # warm-up
                for i in range(repeats):
                    for mode in (("never", "always") if i % 2 == 0 else ("always", "never")):
                        samples[mode].append(runner.run(_sweep_sample(n, chains, mode)))
                per_node = SWEEP_NODES * chains + 1
                for mode, t in samples.items():
                    row[f"{chains}:{mode}"] = statistics.median(t) / per_node
            rows.append(row)
            print(f"  {n:>9}{2 * n:>11}" + "".join(
                f"{row[f'{c}:never'] * 1e6:>{17 if c == 1 else 18}.1f}{row[f'{c}:always'] * 1e6:>9.1f}"
                f"{row[f'{c}:always'] / row[f'{c}:never']:>7.2f}" for c in (1, 2)))
    print(f"  (work/node: a unary node's Node._work, its gradient plus one saved tensor; default threshold "
          f"{current_options().offload_threshold})")
    return rows


# -- report ------------------------------------------------------------------------------------------


def _table(title: str, unit: str, scale: float, results: Sequence[Measurement], ref: str) -> str:
    return format_table(title, unit, scale, results, {f"/ {ref}": ref})


def plot(path: str, resp: dict[str, Any], ratios: dict[str, float], sweep: list[dict[str, float]]) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b, c) = plt.subplots(1, 3, figsize=(15, 4.2))
    modes = [m for m in resp if m != "idle"] + ["idle"]
    xs = np.arange(len(modes))
    for k, (stat, color) in enumerate((("p50", "#9ecae1"), ("p99", "#3182bd"), ("max", "#08519c"))):
        a.bar(xs + (k - 1) * 0.27, [resp[m][stat] * 1e3 for m in modes], 0.27, label=stat, color=color)
    a.axhline(5, color="crimson", lw=1, ls="--", label="target p99 (5 ms)")
    a.set_yscale("log")
    labels = {"blocking": "blocking\n(sync)", "idle": "idle\nloop"}
    a.set_xticks(xs, [labels.get(m, "\n".join(textwrap.wrap("agrad " + m, 8))) for m in modes], fontsize=8)
    a.set_ylabel("1 ms ticker lateness (ms)")
    a.set_title("Loop responsiveness during a ~2 s backward")
    a.legend(fontsize=8)

    names = list(ratios)
    b.barh(np.arange(len(names)), [ratios[k] for k in names],
           color=["#31a354" if "numpy" not in k else "#a1d99b" for k in names])
    b.axvline(1.0, color="black", lw=0.8)
    b.set_yticks(np.arange(len(names)), names, fontsize=8)
    b.invert_yaxis()
    b.set_xlabel("speed-up (x)")
    b.set_title("Parallel branches and concurrent throughput")

    sizes = [r["elements"] for r in sweep]
    for chains, style in ((1, "o-"), (2, "s--")):
        c.plot(sizes, [r[f"{chains}:always"] / r[f"{chains}:never"] for r in sweep], style,
               label=f"{chains} chain{'s' if chains > 1 else ''}")
    c.axhline(1.0, color="black", lw=0.8)
    c.axvline(current_options().offload_threshold / 2, color="crimson", lw=1, ls="--",
              label="default threshold (unary node)")
    c.set_xscale("log", base=2)
    c.set_xlabel("elements per array")
    c.set_ylabel("time offloaded / time inline")
    c.set_title("Cost of one node's trip to a thread")
    c.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot written to {path}")


SECTIONS = ("responsiveness", "branches", "throughput", "overhead", "threshold")
# --quick: a smoke run of the same code, about half a minute (branches, MLPs, the largest array swept)
QUICK_BRANCHES, QUICK_MLPS, QUICK_SWEEP_MAX = 2, 16, 1 << 20


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"short backward, {QUICK_BRANCHES} branches, {QUICK_MLPS} MLPs, arrays up to "
                        f"{QUICK_SWEEP_MAX} elements, few repeats: a smoke run")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    parser.add_argument("--target", type=float, help="seconds of backward in the responsiveness test "
                        "(default 2.0, or 0.1 with --quick)")
    parser.add_argument("--repeats", type=int, help="samples per block (default 10, or 2 with --quick)")
    parser.add_argument("--plot", metavar="PATH", help="also draw the figures into this PNG file")
    parser.add_argument("--only", choices=SECTIONS, action="append",
                        help="run only this section (repeatable; --plot needs them all)")
    args = parser.parse_args(argv)
    only = set(args.only or SECTIONS)
    if args.plot and only != set(SECTIONS):
        parser.error("--plot draws every section: leave out --only")
    if args.plot:
        require(__file__, "matplotlib")
    target = args.target or (0.1 if args.quick else 2.0)
    repeats = args.repeats or (2 if args.quick else 10)
    resp_repeats = 2 if args.quick else 6
    warmup, pause = (1, 0.05) if args.quick else (2, 0.5)
    branches, n_mlp = (QUICK_BRANCHES, QUICK_MLPS) if args.quick else (BRANCHES, N_MLP)
    sweep_sizes = [n for n in SWEEP_SIZES if n <= QUICK_SWEEP_MAX] if args.quick else SWEEP_SIZES
    if args.loop == "uvloop":
        import uvloop
        new_loop: Callable[[], asyncio.Runner] = lambda: asyncio.Runner(loop_factory=uvloop.new_event_loop)  # noqa: E731
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    else:
        new_loop = asyncio.Runner

    header = machine_info().splitlines()
    header[-1] = f"event loop {args.loop}" + (f" {__import__('uvloop').__version__}" if args.loop == "uvloop" else "")
    header.append(f"engine     agrad.get_num_interop_threads()={agrad.get_num_interop_threads()}, "
                  f"defaults {current_options()}")
    header.append("blas       " + "; ".join(f"{i['internal_api']} {i.get('version')} {i.get('architecture')}, "
                                            f"{i['num_threads']} threads" for i in threadpool_info()
                                            if i["user_api"] == "blas")
                  + f" (agrad.get_num_threads()={agrad.get_num_threads()})")
    header.append("env        " + (", ".join(f"{k}={os.environ[k]}" for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
                                                                              *USER_VARIABLES)
                                             if k in os.environ) or "no OPENBLAS_* or other BLAS settings"))
    print("\n".join(header))
    print(f"settings   responsiveness: ~{target} s backward, {resp_repeats} samples per mode; "
          f"others: {repeats} samples per block after {warmup} warm-up, {pause} s pause\n")
    started = _clock()
    kinds = branch_kinds(branches) if "branches" in only else ()
    phases = (("responsiveness" in only) + len(kinds)
              + len(MLPS) * ("throughput" in only) + ("overhead" in only) + ("threshold" in only))
    phase = iter(range(1, phases + 1))

    resp: dict[str, Any] = {}
    if "responsiveness" in only:
        progress(next(phase), phases, f"responsiveness: a 1 ms ticker during a ~{target:g} s backward, "
                 f"{len(RESP_MODES)} modes")
        resp = responsiveness(target, resp_repeats, new_loop)
        print(f"  (section took {_clock() - started:.0f} s)\n")

    ratios: dict[str, float] = {}
    with ThreadPoolExecutor(2, thread_name_prefix="numpy-limit") as pool:
        for kind in kinds:
            section = _clock()
            progress(next(phase), phases, f"parallel branches ({kind.name})")
            systems, grads = kind.systems(pool)
            check_same_gradients(f"branches {kind.name}", grads, rtol=1e-4, atol=1e-4)
            results = measure(systems, warmup, repeats, pause)
            by = {m.system.label: m.median for m in results}
            print(_table(f"parallel branches ({kind.name}): {branches} branches x {BRANCH_DEPTH} "
                               f"on ({BRANCH_N},) float32, backward", "ms", 1e3, results, "agrad inline"))
            ratios[f"agrad offload vs inline ({kind.name})"] = by["agrad inline"] / by["agrad offload"]
            ratios[f"numpy 2 threads vs serial ({kind.name})"] = by["numpy serial"] / by["numpy 2 threads"]
            ours = ratios[f"agrad offload vs inline ({kind.name})"]
            limit = ratios[f"numpy 2 threads vs serial ({kind.name})"]
            print(f"  speed-up: agrad offload/inline {ours:.2f}x; numpy 2 threads/serial (this machine's limit) "
                  f"{limit:.2f}x; agrad reaches {ours / limit:.2f} of numpy's (issue 15's target: at least 0.9)")
            print(f"  (section took {_clock() - section:.0f} s)\n")

    sections: list[tuple[str, Callable[[], Any], str, str, float, str]] = [
        (f"throughput {name}", functools.partial(throughput_systems, n_mlp, batch, sizes),
         f"throughput: {n_mlp} MLP backwards ({'-'.join(map(str, sizes))}, batch {batch}, own graphs)",
         "ms total", 1e3, "blocking, in turn") for name, batch, sizes in MLPS if "throughput" in only]
    sections.extend([] if "overhead" not in only else [("chain", chain_systems,
                     f"overhead: backward of bench_perf's W1, the {bench_perf.CHAIN_NODES}-node chain on (1,) "
                     "float32", "µs/node", bench_perf.W1.per, "agrad blocking")])
    for name, build, title, unit, scale, ref in sections:
        section = _clock()
        progress(next(phase), phases, title)
        systems, grads = build()
        check_same_gradients(name, grads, rtol=1e-5, atol=1e-7)
        results = measure(systems, warmup, repeats, pause)
        print(_table(title, unit, scale, results, ref))
        if name.startswith("throughput"):
            by = {m.system.label: m.median for m in results}
            size = name.split()[1]
            ratios[f"{n_mlp} {size} MLPs: task group vs in turn"] = by["await, in turn"] / by["task group"]
            ratios[f"{n_mlp} {size} MLPs: task group vs blocking"] = by["blocking, in turn"] / by["task group"]
            print(f"  speed-up of the task group: {ratios[f'{n_mlp} {size} MLPs: task group vs in turn']:.2f}x "
                  f"over awaiting in turn, {ratios[f'{n_mlp} {size} MLPs: task group vs blocking']:.2f}x over "
                  "blocking in turn (target: not slower)")
        print(f"  (section took {_clock() - section:.0f} s)\n")

    sweep: list[dict[str, float]] = []
    if "threshold" in only:
        section = _clock()
        progress(next(phase), phases, "offload threshold: inline against offloaded, per array size")
        sweep = threshold_sweep(max(3, repeats // 2), sweep_sizes, new_loop)
        print(f"  (section took {_clock() - section:.0f} s)\n")
    if args.plot:
        plot(args.plot, resp, ratios, sweep)
    print(f"total time {_clock() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
