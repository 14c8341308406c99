"""Core benchmarks: agrad next to PyTorch and a hand-written numpy limit, in one process.

Two workloads, each run by four systems:

* **chain** — per-node backward overhead.  ``x`` is a (1,) float32 leaf;
  2000 times ``y = y * 1.0001 + 0.0001`` (4000 nodes), then ``y.sum()``.
  Only the backward is timed; the result is reported in µs per node
  (backward time / 4000).  The numpy limit is the same 2000 multiplications
  by 1.0001 on (1,) arrays in a Python loop: the kernels with no engine.
* **mlp** — one training step (forward + backward, no optimizer update) of a
  784-1024-1024-10 ReLU MLP with cross-entropy, batch 64, float32, in ms per
  step.  The numpy limit is a hand-written forward and backward.

The systems are agrad awaited (a coroutine awaiting the backward, run on an
``asyncio.Runner`` kept for the block; the clock runs inside the coroutine),
agrad's blocking twin, PyTorch, and numpy.

Fair measurement: numpy (OpenBLAS) and PyTorch (OpenMP) keep their worker
threads spinning for a while after a call, so systems are never interleaved
sample by sample.  Each system runs in its own block, in the order
A B C D D C B A with a short pause between blocks, after a warm-up; a
system's figure is the median over both of its blocks (the per-block medians
are printed too, so drift shows).  Before timing, every workload checks once
that all systems produce the same gradients and aborts loudly if not.

Run ``python bench/bench_core.py`` (well under two minutes) or
``--quick`` for a smoke run.  Nothing here asserts on timings.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import gc
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import numpy as np

import agrad
import agrad.nn.functional as AF

try:
    import torch
    import torch.nn.functional as TF
except ImportError:  # pragma: no cover - the peer is optional for agrad, required here
    sys.exit("bench_core.py compares agrad with PyTorch: pip install torch==2.13.0")

_clock = time.perf_counter

# -- the timing harness (one helper, used by every system) ---------------------------


@dataclass(frozen=True)
class System:
    """One implementation of a workload.

    ``sample`` prepares one repetition, times the part being measured and
    returns its duration in seconds.  For an async system it is a coroutine
    function; the harness runs it on an event loop kept for the block.
    """

    label: str
    sample: Callable[[], float] | Callable[[], Awaitable[float]]
    is_async: bool = False


@dataclass
class Measurement:
    """The samples (seconds) of one system, one list per block."""

    system: System
    blocks: list[list[float]]

    @property
    def median(self) -> float:
        return statistics.median([s for block in self.blocks for s in block])

    def block_medians(self) -> list[float]:
        return [statistics.median(block) for block in self.blocks]


def _time_block(system: System, warmup: int, repeats: int) -> list[float]:
    """Warm up, then take ``repeats`` samples of ``system`` back to back.

    Garbage from the previous sample is collected before each one, outside
    the timed region; collections the sample itself triggers are part of its
    cost, as they would be in a real program.
    """
    with ExitStack() as stack:
        if system.is_async:
            runner = stack.enter_context(asyncio.Runner())
            one: Callable[[], float] = lambda: runner.run(system.sample())  # type: ignore[arg-type]  # noqa: E731
        else:
            one = system.sample  # type: ignore[assignment]
        samples = []
        for i in range(warmup + repeats):
            gc.collect()
            elapsed = one()
            if i >= warmup:
                samples.append(elapsed)
        return samples


def measure(systems: Sequence[System], warmup: int, repeats: int, pause: float) -> list[Measurement]:
    """Time every system in two blocks, in the order A B C … C B A, pausing between blocks."""
    results = {s.label: Measurement(s, []) for s in systems}
    order = list(systems) + list(reversed(systems))
    for i, system in enumerate(order):
        if i:
            time.sleep(pause)  # let the previous system's spinning threads go idle
        results[system.label].blocks.append(_time_block(system, warmup, repeats))
    return [results[s.label] for s in systems]


# -- gradient agreement ------------------------------------------------------------------


def check_same_gradients(workload: str, grads: dict[str, Sequence[np.ndarray]], rtol: float, atol: float) -> None:
    """Abort the run if any system's gradients differ from the first system's."""
    (ref_label, ref), *others = grads.items()
    for label, got in others:
        for k, (a, b) in enumerate(zip(ref, got, strict=True)):
            if a.shape != b.shape or not np.allclose(a, b, rtol=rtol, atol=atol):
                diff = float(np.max(np.abs(a - b))) if a.shape == b.shape else float("nan")
                sys.exit(
                    f"\n*** GRADIENT MISMATCH in workload {workload!r}: gradient {k} of {label!r} differs from "
                    f"{ref_label!r} (shapes {a.shape} vs {b.shape}, max |diff| {diff:.3g}). "
                    "Timings would be meaningless; aborting. ***"
                )
    n = len(ref)
    print(f"  gradients agree: {workload} ({n} tensor{'s' if n > 1 else ''}, {len(grads)} systems)")


# -- workload 1: a chain of tiny ops (per-node overhead) ---------------------------------

CHAIN = 2000
CHAIN_NODES = 2 * CHAIN  # one MulBackward0 and one AddBackward0 per step
SCALE, SHIFT = 1.0001, 0.0001


def _agrad_chain() -> tuple[agrad.Tensor, agrad.Tensor]:
    x = agrad.ones(1, requires_grad=True)
    y = x
    for _ in range(CHAIN):
        y = y * SCALE + SHIFT
    return x, y.sum()


def _torch_chain() -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.ones(1, requires_grad=True)
    y = x
    for _ in range(CHAIN):
        y = y * SCALE + SHIFT
    return x, y.sum()


def _numpy_chain_backward() -> np.ndarray:
    """The kernels of the chain's backward with no engine: SumBackward's ones,
    then one multiplication by 1.0001 per MulBackward0 (AddBackward0 passes
    its gradient through)."""
    scale = np.asarray(SCALE, dtype=np.float32)
    g = np.ones(1, dtype=np.float32)
    for _ in range(CHAIN):
        g = g * scale
    return g


def chain_systems() -> tuple[list[System], dict[str, list[np.ndarray]]]:
    """The chain workload's systems, and each one's gradient of ``x`` for the check."""

    async def agrad_awaited() -> float:
        _, loss = _agrad_chain()
        t0 = _clock()
        await loss.backward()
        return _clock() - t0

    def agrad_blocking() -> float:
        _, loss = _agrad_chain()
        t0 = _clock()
        loss.backward_sync()
        return _clock() - t0

    def pytorch() -> float:
        _, loss = _torch_chain()
        t0 = _clock()
        loss.backward()
        return _clock() - t0

    def numpy_limit() -> float:
        t0 = _clock()
        _numpy_chain_backward()
        return _clock() - t0

    systems = [
        System("agrad await", agrad_awaited, is_async=True),
        System("agrad blocking", agrad_blocking),
        System("pytorch", pytorch),
        System("numpy (limit)", numpy_limit),
    ]

    async def awaited_grad() -> np.ndarray:
        x, loss = _agrad_chain()
        await loss.backward()
        return x.grad.numpy()

    xa, la = _agrad_chain()
    la.backward_sync()
    xt, lt = _torch_chain()
    lt.backward()
    grads = {
        "agrad await": [asyncio.run(awaited_grad())],
        "agrad blocking": [xa.grad.numpy()],
        "pytorch": [xt.grad.numpy()],
        "numpy (limit)": [_numpy_chain_backward()],
    }
    return systems, grads


# -- workload 2: an MLP training step ------------------------------------------------------

BATCH, SIZES = 64, (784, 1024, 1024, 10)


def _mlp_data(seed: int = 0) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """Weights and biases (PyTorch's Linear init and layout: weight is (out, in)), inputs, targets."""
    rng = np.random.default_rng(seed)
    params = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:]):
        bound = 1.0 / np.sqrt(fan_in)
        params.append(rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32))
        params.append(rng.uniform(-bound, bound, (fan_out,)).astype(np.float32))
    x = rng.standard_normal((BATCH, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], BATCH).astype(np.int64)
    return params, x, y


def _agrad_mlp_loss(params: Sequence[agrad.Tensor], x: agrad.Tensor, y: agrad.Tensor) -> agrad.Tensor:
    h = x
    for i in range(0, len(params) - 2, 2):
        h = AF.relu(AF.linear(h, params[i], params[i + 1]))
    return AF.cross_entropy(AF.linear(h, params[-2], params[-1]), y)


def _torch_mlp_loss(params: Sequence[torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    h = x
    for i in range(0, len(params) - 2, 2):
        h = TF.relu(TF.linear(h, params[i], params[i + 1]))
    return TF.cross_entropy(TF.linear(h, params[-2], params[-1]), y)


def _numpy_mlp_step(params: Sequence[np.ndarray], x: np.ndarray, y: np.ndarray) -> tuple[float, list[np.ndarray]]:
    """Forward and backward written by hand: the loss and one gradient per parameter."""
    acts = [x]  # the input of each linear layer
    h = x
    n_layers = len(params) // 2
    for i in range(n_layers):
        h = h @ params[2 * i].T + params[2 * i + 1]
        if i < n_layers - 1:
            h = np.maximum(h, 0)
            acts.append(h)
    shifted = h - h.max(axis=1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    rows = np.arange(len(y))
    loss = float(-logp[rows, y].mean())
    g = np.exp(logp)
    g[rows, y] -= 1
    g /= len(y)
    grads: list[np.ndarray] = [None] * len(params)  # type: ignore[list-item]
    for i in reversed(range(n_layers)):
        a = acts[i]
        grads[2 * i] = g.T @ a
        grads[2 * i + 1] = g.sum(axis=0)
        if i:
            g = (g @ params[2 * i]) * (a > 0)
    return loss, grads


def mlp_systems() -> tuple[list[System], dict[str, list[np.ndarray]]]:
    """The MLP workload's systems, and each one's parameter gradients for the check."""
    params, xs, ys = _mlp_data()
    a_params = [agrad.from_numpy(p.copy()).requires_grad_() for p in params]
    a_x, a_y = agrad.from_numpy(xs), agrad.from_numpy(ys)
    t_params = [torch.from_numpy(p.copy()).requires_grad_() for p in params]
    t_x, t_y = torch.from_numpy(xs), torch.from_numpy(ys)

    def reset(ps: Sequence[Any]) -> None:
        for p in ps:
            p.grad = None

    async def agrad_awaited() -> float:
        reset(a_params)
        t0 = _clock()
        await _agrad_mlp_loss(a_params, a_x, a_y).backward()
        return _clock() - t0

    def agrad_blocking() -> float:
        reset(a_params)
        t0 = _clock()
        _agrad_mlp_loss(a_params, a_x, a_y).backward_sync()
        return _clock() - t0

    def pytorch() -> float:
        reset(t_params)
        t0 = _clock()
        _torch_mlp_loss(t_params, t_x, t_y).backward()
        return _clock() - t0

    def numpy_limit() -> float:
        t0 = _clock()
        _numpy_mlp_step(params, xs, ys)
        return _clock() - t0

    systems = [
        System("agrad await", agrad_awaited, is_async=True),
        System("agrad blocking", agrad_blocking),
        System("pytorch", pytorch),
        System("numpy (limit)", numpy_limit),
    ]

    def collect(ps: Sequence[Any]) -> list[np.ndarray]:
        return [p.grad.detach().numpy().copy() for p in ps]

    grads: dict[str, list[np.ndarray]] = {}
    asyncio.run(agrad_awaited())
    grads["agrad await"] = collect(a_params)
    agrad_blocking()
    grads["agrad blocking"] = collect(a_params)
    pytorch()
    grads["pytorch"] = collect(t_params)
    grads["numpy (limit)"] = _numpy_mlp_step(params, xs, ys)[1]
    reset(a_params)
    reset(t_params)
    return systems, grads


# -- report ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """A workload: how to build its systems, and how its seconds are reported."""

    name: str
    build: Callable[[], tuple[list[System], dict[str, list[np.ndarray]]]]
    unit: str
    scale: float  # multiply seconds by this to get ``unit``
    rtol: float
    atol: float


WORKLOADS = (
    Workload(f"chain: backward of {CHAIN_NODES} nodes on (1,) float32", chain_systems,
             "µs/node", 1e6 / CHAIN_NODES, rtol=1e-5, atol=0.0),
    Workload(f"mlp: fwd+bwd {'-'.join(map(str, SIZES))}, relu, cross-entropy, batch {BATCH}, float32",
             mlp_systems, "ms/step", 1e3, rtol=1e-3, atol=1e-5),
)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> str:
    """One paragraph describing where the figures were taken."""
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    threads = {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
               if k in os.environ}
    return "\n".join([
        f"date       {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"machine    {_cpu_model()}; os.cpu_count()={os.cpu_count()}, usable cores={affinity}",
        f"python     {platform.python_version()} ({platform.python_implementation()}), {platform.platform()}",
        f"versions   agrad {agrad.__version__}, numpy {np.__version__}, torch {torch.__version__} "
        f"(torch threads {torch.get_num_threads()}){', env ' + str(threads) if threads else ''}",
        "event loop asyncio (default policy)",
    ])


def format_table(workload: Workload, results: Sequence[Measurement]) -> str:
    """Medians per system, per-block medians, and ratios to PyTorch and to the numpy limit."""
    by_label = {m.system.label: m for m in results}
    torch_med = by_label["pytorch"].median
    numpy_med = by_label["numpy (limit)"].median
    n = sum(len(b) for b in results[0].blocks)
    lines = [
        f"{workload.name}  [{workload.unit}, median of {n} samples in 2 blocks]",
        f"  {'system':<16}{'median':>10}{'block 1':>10}{'block 2':>10}{'/ torch':>10}{'/ numpy':>10}",
    ]
    for m in results:
        b1, b2 = (v * workload.scale for v in m.block_medians())
        med = m.median
        lines.append(
            f"  {m.system.label:<16}{med * workload.scale:>10.3f}{b1:>10.3f}{b2:>10.3f}"
            f"{med / torch_med:>9.2f}x{med / numpy_med:>9.2f}x"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Check gradients, time every workload, print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="few repeats, short pauses: a smoke run")
    parser.add_argument("--repeats", type=int, help="samples per block (default 25, or 3 with --quick)")
    parser.add_argument("--warmup", type=int, help="untimed samples per block (default 3, or 1 with --quick)")
    parser.add_argument("--pause", type=float, help="seconds between blocks (default 0.5, or 0.05 with --quick)")
    args = parser.parse_args(argv)
    repeats = args.repeats or (3 if args.quick else 25)
    warmup = args.warmup if args.warmup is not None else (1 if args.quick else 3)
    pause = args.pause if args.pause is not None else (0.05 if args.quick else 0.5)

    print(machine_info())
    print(f"settings   {repeats} samples per block after {warmup} warm-up, {pause} s pause between blocks, "
          "order A B C D D C B A\n")
    started = _clock()
    built = []
    for workload in WORKLOADS:
        systems, grads = workload.build()
        check_same_gradients(workload.name.split(":")[0], grads, workload.rtol, workload.atol)
        built.append((workload, systems))
    print()
    for workload, systems in built:
        print(format_table(workload, measure(systems, warmup, repeats, pause)))
        print()
    print(f"total time {_clock() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
