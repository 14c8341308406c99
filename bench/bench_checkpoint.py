"""Checkpointing benchmark: peak memory and time of a 32-layer MLP step, agrad next to PyTorch.

The model is 32 layers of ``relu(linear(h, W_i, b_i))`` (width 256, batch
2048, float32: activations of 2 MiB per layer against 0.25 MiB of weights, so
that activations dominate memory, as they do where checkpointing is used),
then ``(h * h).mean()``; one step is forward + backward.
Each library runs it three ways: every activation kept (no checkpointing),
``checkpoint_sequential(layers, 4, x, use_reentrant=True)`` (recomputation
through a nested, reentrant backward: in agrad an awaited one) and the same
with ``use_reentrant=False`` (recomputation through saved-tensor hooks).
agrad runs awaited (``await loss.backward()``); its reentrant variant also
through the blocking twin (``loss.backward_sync()``), which drives the async
checkpoint node on a private event loop.

Memory: every system runs in a fresh subprocess.  It first runs one step of
a tiny model of the same system (so that what either library sets up lazily
is set up), builds the model, records its resident set size, runs one step
and reads the process's peak RSS (``ru_maxrss``): the difference is the
step's peak memory above the model, measured the same way for both
libraries.  For agrad, numpy's own
allocations are also traced (``tracemalloc``, a separate step): the exact
peak of array memory.  Time: the same subprocess then times ``--repeats``
steps after a warm-up.  Subprocesses run in the order A B C ... then reversed,
and a system's time is the median over both rounds.  Gradients of every
system are checked to agree before anything is reported.

Run ``python bench/bench_checkpoint.py`` (a few minutes) or ``--quick`` (batch
256, one round: a smoke run of about half a minute).  Each subprocess prints
a line as it starts.  Nothing here asserts on timings.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import machine_info, peak_rss_mib, progress, require, rss_mib, spawn_json  # noqa: E402

LAYERS, WIDTH, BATCH, SEGMENTS = 32, 256, 2048, 4
QUICK_BATCH = 256  # a smoke run: activations only as large as the weights, its memory figures not for quoting
# system -> (library, checkpointing: None, "reentrant" or "non-reentrant", how agrad runs the backward)
SYSTEMS: dict[str, tuple[str, str | None, str]] = {
    "agrad, no checkpoint": ("agrad", None, "await"),
    "agrad, reentrant": ("agrad", "reentrant", "await"),
    "agrad, reentrant, blocking": ("agrad", "reentrant", "blocking"),
    "agrad, non-reentrant": ("agrad", "non-reentrant", "await"),
    "torch, no checkpoint": ("torch", None, "-"),
    "torch, reentrant": ("torch", "reentrant", "-"),
    "torch, non-reentrant": ("torch", "non-reentrant", "-"),
}


def _arrays(width: int, batch: int, seed: int = 0) -> tuple[list[np.ndarray], np.ndarray]:
    rng = np.random.default_rng(seed)
    params = []
    for _ in range(LAYERS):
        params.append((rng.standard_normal((width, width)) * np.sqrt(2.0 / width)).astype(np.float32))
        params.append(np.zeros(width, np.float32))
    return params, rng.standard_normal((batch, width)).astype(np.float32)


def _step_fn(library: str, mode: str | None, driver: str, width: int = WIDTH, batch: int = BATCH
             ) -> tuple[Callable[[], Any], Callable[[], list[np.ndarray]]]:
    """One training step of the system, and a function returning its gradients."""
    params_np, x_np = _arrays(width, batch)
    lib: Any = importlib.import_module(library)  # agrad or torch: the same calls from here on
    checkpoint_sequential = importlib.import_module(f"{library}.utils.checkpoint").checkpoint_sequential
    params = [lib.from_numpy(p.copy()).requires_grad_() for p in params_np]
    x = lib.from_numpy(x_np.copy()).requires_grad_()
    F = lib.nn.functional
    layers = [lambda h, w=params[2 * i], b=params[2 * i + 1]: F.relu(F.linear(h, w, b)) for i in range(LAYERS)]

    def loss() -> Any:
        # x requires grad: the reentrant variant differentiates a segment only if one
        # of its inputs does (PyTorch's documented caveat); the same for every system.
        for p in [*params, x]:
            p.grad = None
        if mode is None:
            h = x
            for layer in layers:
                h = layer(h)
        else:
            h = checkpoint_sequential(layers, SEGMENTS, x, use_reentrant=mode == "reentrant")
        return (h * h).mean()

    if library == "torch":
        def step() -> None:
            loss().backward()
    elif driver == "blocking":
        def step() -> None:
            loss().backward_sync()
    else:
        runner = asyncio.Runner()

        def step() -> None:
            runner.run(loss().backward())

    return step, lambda: [p.grad.numpy().copy() for p in [*params, x]]


def run_one(name: str, repeats: int, warmup: int, batch: int) -> dict[str, Any]:
    """In a subprocess: peak memory of one step, then its time."""
    library, mode, driver = SYSTEMS[name]
    if library == "torch":
        import torch
        torch.set_num_threads(os.cpu_count() or 1)
    # A first step of a tiny model of the same system initializes whatever either
    # library sets up lazily, without raising the process's high-water mark.
    _step_fn(library, mode, driver, width=16, batch=4)[0]()
    step, grads = _step_fn(library, mode, driver, batch=batch)
    before = rss_mib()
    step()
    peak = peak_rss_mib() - before
    result: dict[str, Any] = {"peak_rss_mib": peak}
    g = grads()
    result["grad_checksums"] = [float(np.abs(a).sum()) for a in g]
    if library == "agrad":
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        step()
        result["traced_peak_mib"] = (tracemalloc.get_traced_memory()[1] - base) / 2**20
        tracemalloc.stop()
    for _ in range(warmup):
        step()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    result["times"] = times
    return result


def _spawn(name: str, repeats: int, warmup: int, batch: int) -> dict[str, Any]:
    return spawn_json(__file__, ["--child", name, "--repeats", str(repeats), "--warmup", str(warmup),
                                 "--batch", str(batch)])


def _check_gradients(results: dict[str, list[dict[str, Any]]]) -> None:
    ref_name = "torch, no checkpoint" if "torch, no checkpoint" in results else next(iter(results))
    ref = np.array(results[ref_name][0]["grad_checksums"])
    for name, runs in results.items():
        got = np.array(runs[0]["grad_checksums"])
        if not np.allclose(got, ref, rtol=1e-4, atol=1e-6):
            worst = int(np.argmax(np.abs(got - ref) / (np.abs(ref) + 1e-6)))
            sys.exit(f"gradients disagree: {name} vs {ref_name} at parameter {worst}: {got[worst]} vs {ref[worst]}")
    print(f"  gradients agree: {len(results)} systems, {len(ref)} parameters (sum |grad| per parameter)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"batch {QUICK_BATCH}, one round, few repeats: a smoke run")
    parser.add_argument("--repeats", type=int, help="timed steps per subprocess (default 5, 2 with --quick)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--rounds", type=int, help="rounds of subprocesses A B C ..., reversed every other round "
                        "(default 2, 1 with --quick)")
    parser.add_argument("--batch", type=int, help=f"rows of the input (default {BATCH}, {QUICK_BATCH} with --quick)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    repeats = args.repeats or (2 if args.quick else 5)
    rounds = args.rounds or (1 if args.quick else 2)
    batch = args.batch or (QUICK_BATCH if args.quick else BATCH)
    if args.child:
        print(json.dumps(run_one(args.child, repeats, args.warmup, batch)))
        return 0

    require(__file__, "torch")
    print(machine_info())
    print(f"settings   {LAYERS} layers of relu(linear), width {WIDTH}, batch {batch}, float32; checkpoint_sequential "
          f"with {SEGMENTS} segments; {repeats} timed steps per subprocess after {args.warmup} warm-up, "
          f"{rounds} round{'s' * (rounds > 1)}\n")
    names = list(SYSTEMS)
    results: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    runs = [(r, name) for r in range(rounds) for name in (names if r % 2 == 0 else names[::-1])]
    for i, (r, name) in enumerate(runs, 1):
        progress(i, len(runs), f"{name} (round {r + 1}): one step's peak memory, then {repeats} timed steps, "
                 "in a fresh process")
        results[name].append(_spawn(name, repeats, args.warmup, batch))
    _check_gradients(results)

    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in results[name])

    def time_ms(name: str) -> float:
        return statistics.median(statistics.median(r["times"]) for r in results[name]) * 1e3

    print(f"{LAYERS}-layer MLP step (forward + backward): peak memory above the model and time  "
          f"[MiB: median of {rounds} process{'es' * (rounds > 1)}; ms: median of {rounds} x {repeats} steps]")
    w = max(map(len, names)) + 2
    print(f"  {'system':<{w}}{'peak RSS':>10}{'numpy peak':>12}{'step ms':>10}{'vs no ckpt':>12}{'time vs torch':>15}")
    for name in names:
        library, mode, _ = SYSTEMS[name]
        base = f"{library}, no checkpoint"
        peer = name.replace("agrad", "torch").replace(", blocking", "")
        traced = f"{med(name, 'traced_peak_mib'):.1f}" if library == "agrad" else "-"
        vs_peer = f"{time_ms(name) / time_ms(peer):.2f}x" if library == "agrad" and peer in results else "-"
        print(f"  {name:<{w}}{med(name, 'peak_rss_mib'):>10.1f}{traced:>12}{time_ms(name):>10.1f}"
              f"{med(name, 'peak_rss_mib') / med(base, 'peak_rss_mib'):>11.2f}x{vs_peer:>15}")
    print("  (peak RSS: the step's high-water mark of resident memory above the built model; numpy peak: "
          "agrad's traced array memory;\n   vs no ckpt: peak RSS against the same library without checkpointing; "
          "time vs torch: the same variant in PyTorch)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
