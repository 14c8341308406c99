"""Engine benchmarks: what awaiting a backward buys and costs, next to its blocking twin.

Three measurements, in one process:

* **responsiveness** — a 1 ms ticker task (``await asyncio.sleep(0.001)`` in
  a loop, recording how late each tick wakes) runs on the event loop while
  one backward of about two seconds of kernel work runs on the same loop,
  (a) awaited (``await loss.backward()``), (b) blocking
  (``loss.backward_sync()`` called inside the coroutine).  The workload is a
  residual chain ``h = h + tanh(h @ W_i) * 0.1`` on (512, 512) float32 arrays
  (eight weights used in turn), its length calibrated on this machine so the
  backward takes about two seconds.  Reported: ticker lateness p50 / p99 /
  max over the ticks due while the backward ran (medians over repeats), the
  backward's wall time, and, from a separate instrumented pass, the longest
  single node step (node + routing of its gradients).  Kernels currently run
  inline on the loop, so one step longer than the time slice bounds the
  lateness from below; kernel offload to threads is not built yet.  An idle
  ticker (no backward) gives the loop's floor.
* **concurrent throughput** — 64 independent MLP backwards (256-256-10,
  ReLU, cross-entropy, batch 32, each its own parameters and graph; the
  forwards are built untimed) awaited together in one task group, vs awaited
  one after another, vs the blocking twin one after another.
* **per-node overhead** — bench_core's 4000-node chain on (1,) arrays,
  awaited vs blocking: the scheduler (time-slice checks) should cost nothing.

Throughput and overhead use bench_core's block timing (A B C C B A, per-block
medians printed); responsiveness alternates the two modes sample by sample
(A B, B A, ...), each sample on a fresh event loop.  Gradients of the systems
are checked to agree before timing.

Run ``python bench/bench_engine.py`` (under two minutes) or ``--quick`` for a
smoke run; ``--loop uvloop`` runs everything on uvloop.  Nothing here asserts
on timings.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_core  # noqa: E402  (the shared timing harness and machine header)
from bench_core import Measurement, System, check_same_gradients, measure  # noqa: E402

import agrad  # noqa: E402
from agrad._engine._graph_task import TIME_SLICE  # noqa: E402

_clock = time.perf_counter

# -- 1. event-loop responsiveness ----------------------------------------------------------

TICK = 0.001
WIDTH = 512  # h is (WIDTH, WIDTH), every W_i is (WIDTH, WIDTH)
N_WEIGHTS = 8


def _weights(seed: int = 0) -> list[agrad.Tensor]:
    rng = np.random.default_rng(seed)
    return [agrad.from_numpy((rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(np.float32))
            .requires_grad_() for _ in range(N_WEIGHTS)]


def _residual_chain(weights: Sequence[agrad.Tensor], blocks: int) -> agrad.Tensor:
    """``h = h + tanh(h @ W_i) * 0.1`` ``blocks`` times; per block the backward runs one
    MmBackward (two 512^3 matmuls), TanhBackward, MulBackward, AddBackward and a
    buffer sum where the residual meets the branch."""
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
    root = loss.grad_fn
    assert root is not None
    seen, stack = {root}, [root]
    while stack:
        fn = stack.pop()
        for edge in fn.next_edges:
            if edge is not None and edge[0] not in seen:
                seen.add(edge[0])
                stack.append(edge[0])
    return list(seen)


def node_steps(blocks: int) -> list[tuple[float, str]]:
    """One instrumented blocking backward: (duration, node name) of every node step.
    A step is measured from one node's pre-hook to the next one's, so it includes
    the node's routing (buffer sums) and the engine's bookkeeping."""
    loss = _residual_chain(_weights(), blocks)
    stamps: list[tuple[float, str]] = []
    for fn in _graph_nodes(loss):
        fn.register_prehook(lambda grads, name=fn.name(): stamps.append((_clock(), name)))
    gc.collect()
    loss.backward_sync()
    times = [t for t, _ in stamps] + [_clock()]
    return [(times[i + 1] - times[i], stamps[i][1]) for i in range(len(stamps))]


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
    t0 = _clock()
    if mode == "await":
        await loss.backward()  # type: ignore[union-attr]
    elif mode == "blocking":
        loss.backward_sync()  # type: ignore[union-attr]
    else:
        await asyncio.sleep(0.3)
    t1 = _clock()
    await asyncio.sleep(0.01)  # the tick delayed by the backward lands
    stop.set()
    await ticker
    window = [late for wake, late in ticks if wake >= t0 and wake - late <= t1]
    return t1 - t0, window


def _pct(xs: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q)) if xs else float("nan")


def responsiveness(target: float, repeats: int) -> None:
    blocks = _calibrate(target)
    probes = [node_steps(blocks) for _ in range(2)]  # also the blocking mode's warm-up
    n_nodes = len(probes[0])
    longest = statistics.median(max(p)[0] for p in probes)
    p99_step = statistics.median(_pct([d for d, _ in p], 99) for p in probes)
    by_kind: dict[str, list[float]] = {}
    for d, name in probes[0]:
        by_kind.setdefault(name, []).append(d)
    kinds = sorted(((statistics.median(v), k) for k, v in by_kind.items()), reverse=True)[:3]

    modes = ("await", "blocking")
    stats: dict[str, list[tuple[float, float, float, float, int]]] = {m: [] for m in (*modes, "idle")}
    with asyncio.Runner() as runner:
        runner.run(_ticked("idle", 0))
        runner.run(_ticked("await", blocks))  # warm-up (the probes warmed the blocking mode)
        for i in range(repeats + 1):
            for m in (modes if i % 2 == 0 else modes[::-1]) + ("idle",):
                if m != "idle" and i == repeats:
                    continue
                if m == "idle" and i % 2:
                    continue
                wall, late = runner.run(_ticked(m, blocks))
                stats[m].append((wall, _pct(late, 50), _pct(late, 99), max(late, default=float("nan")),
                                 len(late)))

    def med(m: str, k: int) -> float:
        return statistics.median(s[k] for s in stats[m])

    print(f"responsiveness: 1 ms ticker during one backward of {n_nodes} nodes "
          f"({blocks} residual blocks on ({WIDTH},{WIDTH}) float32)  "
          f"[ms, median of {repeats} samples per mode]")
    print(f"  time slice {TIME_SLICE * 1e3:.1f} ms; node steps (instrumented blocking pass, median of 2): "
          f"p99 {p99_step * 1e3:.2f} ms, longest {longest * 1e3:.2f} ms; median step by kind: "
          + ", ".join(f"{k} {v * 1e3:.2f}" for v, k in kinds))
    print(f"  {'mode':<16}{'backward':>10}{'ticks':>7}{'late p50':>10}{'late p99':>10}{'late max':>10}")
    for m, label in (("await", "agrad await"), ("blocking", "agrad blocking"), ("idle", "idle loop")):
        wall_ms = "-" if m == "idle" else f"{med(m, 0) * 1e3:.0f}"
        print(f"  {label:<16}{wall_ms:>10}{med(m, 4):>7.0f}{med(m, 1) * 1e3:>10.3f}"
              f"{med(m, 2) * 1e3:>10.3f}{med(m, 3) * 1e3:>10.3f}")
    print(f"  {'blocking/await':<16}{med('blocking', 0) / med('await', 0):>9.2f}x{'':>7}"
          + "".join(f"{med('blocking', k) / med('await', k):>9.0f}x" for k in (1, 2, 3)))
    bound = TIME_SLICE + longest
    print(f"  awaited max lateness / (slice + longest step = {bound * 1e3:.2f} ms): "
          f"{med('await', 3) / bound:.2f}; worst sample max {max(s[3] for s in stats['await']) * 1e3:.2f} ms")


# -- 2. concurrent throughput ----------------------------------------------------------------

N_MLP, MLP_BATCH, MLP_SIZES = 64, 32, (256, 256, 10)


def _mlp_models(seed: int = 0) -> list[tuple[list[agrad.Tensor], agrad.Tensor, agrad.Tensor]]:
    """N_MLP independent models: each its own parameters, inputs and targets."""
    rng = np.random.default_rng(seed)
    models = []
    for _ in range(N_MLP):
        params = []
        for fan_in, fan_out in zip(MLP_SIZES[:-1], MLP_SIZES[1:]):
            bound = 1.0 / np.sqrt(fan_in)
            params.append(rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32))
            params.append(rng.uniform(-bound, bound, (fan_out,)).astype(np.float32))
        x = rng.standard_normal((MLP_BATCH, MLP_SIZES[0])).astype(np.float32)
        y = rng.integers(0, MLP_SIZES[-1], MLP_BATCH).astype(np.int64)
        models.append(([agrad.from_numpy(p).requires_grad_() for p in params],
                       agrad.from_numpy(x), agrad.from_numpy(y)))
    return models


def throughput_systems() -> tuple[list[System], dict[str, Sequence[np.ndarray]]]:
    models = _mlp_models()

    def losses() -> list[agrad.Tensor]:
        for params, _, _ in models:
            for p in params:
                p.grad = None
        return [bench_core._agrad_mlp_loss(params, x, y) for params, x, y in models]

    async def task_group() -> float:
        ls = losses()
        t0 = _clock()
        async with asyncio.TaskGroup() as tg:
            for loss in ls:
                tg.create_task(loss.backward())
        return _clock() - t0

    async def sequential_await() -> float:
        ls = losses()
        t0 = _clock()
        for loss in ls:
            await loss.backward()
        return _clock() - t0

    def sequential_blocking() -> float:
        ls = losses()
        t0 = _clock()
        for loss in ls:
            loss.backward_sync()
        return _clock() - t0

    systems = [
        System("task group", task_group, is_async=True),
        System("await, in turn", sequential_await, is_async=True),
        System("blocking, in turn", sequential_blocking),
    ]

    def collect() -> list[np.ndarray]:
        return [p.grad.numpy().copy() for params, _, _ in models for p in params]  # type: ignore[union-attr]

    grads: dict[str, Sequence[np.ndarray]] = {}
    for s in systems:
        if s.is_async:
            asyncio.run(s.sample())  # type: ignore[arg-type]
        else:
            s.sample()
        grads[s.label] = collect()
    return systems, grads


# -- 3. per-node overhead ------------------------------------------------------------------------


def chain_systems() -> tuple[list[System], dict[str, Sequence[np.ndarray]]]:
    """bench_core's chain, agrad's two drivers only."""
    systems, grads = bench_core.chain_systems()
    keep = ("agrad await", "agrad blocking")
    return [s for s in systems if s.label in keep], {k: grads[k] for k in keep}


# -- report ------------------------------------------------------------------------------------------


def format_table(title: str, unit: str, scale: float, results: Sequence[Measurement]) -> str:
    ref = results[-1].median
    n = sum(len(b) for b in results[0].blocks)
    lines = [f"{title}  [{unit}, median of {n} samples in 2 blocks]",
             f"  {'system':<20}{'median':>10}{'block 1':>10}{'block 2':>10}{'/ ' + results[-1].system.label:>22}"]
    for m in results:
        b1, b2 = (v * scale for v in m.block_medians())
        lines.append(f"  {m.system.label:<20}{m.median * scale:>10.3f}{b1:>10.3f}{b2:>10.3f}"
                     f"{m.median / ref:>21.3f}x")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short backward, few repeats: a smoke run")
    parser.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    parser.add_argument("--target", type=float, help="seconds of backward in the responsiveness test "
                        "(default 2.0, or 0.3 with --quick)")
    parser.add_argument("--repeats", type=int, help="samples per block (default 15, or 3 with --quick)")
    args = parser.parse_args(argv)
    target = args.target or (0.3 if args.quick else 2.0)
    repeats = args.repeats or (3 if args.quick else 15)
    resp_repeats = 2 if args.quick else 4
    warmup, pause = (1, 0.05) if args.quick else (3, 0.5)
    if args.loop == "uvloop":
        import uvloop
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())

    header = bench_core.machine_info().splitlines()
    header[-1] = f"event loop {args.loop}" + (f" {__import__('uvloop').__version__}" if args.loop == "uvloop" else "")
    print("\n".join(header))
    print(f"settings   responsiveness: ~{target} s backward, {resp_repeats} samples per mode; "
          f"throughput/overhead: {repeats} samples per block after {warmup} warm-up, {pause} s pause\n")
    started = _clock()

    responsiveness(target, resp_repeats)
    print(f"  (section took {_clock() - started:.0f} s)\n")
    for name, build, title, unit, scale, rtol in (
        ("throughput", throughput_systems,
         f"throughput: {N_MLP} MLP backwards ({'-'.join(map(str, MLP_SIZES))}, batch {MLP_BATCH}, own graphs)",
         "ms total", 1e3, 1e-6),
        ("chain", chain_systems,
         f"overhead: backward of bench_core's {bench_core.CHAIN_NODES}-node chain on (1,) float32",
         "µs/node", 1e6 / bench_core.CHAIN_NODES, 1e-6),
    ):
        systems, grads = build()
        check_same_gradients(name, grads, rtol=rtol, atol=0.0)
        section = _clock()
        print(format_table(title, unit, scale, measure(systems, warmup, repeats, pause)))
        print(f"  (section took {_clock() - section:.0f} s)\n")
    print(f"total time {_clock() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
