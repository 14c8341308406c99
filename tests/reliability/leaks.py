"""Leak check: many backwards in every mode, then nothing has grown.

Modes: awaited on asyncio, uvloop and trio (plain, offloaded to threads,
cancelled, failed, reentrant checkpoints spilling to fresh stacks, two at
once into shared leaves), and blocking (plain, failed, reentrant).  After a
warm-up round, two equal rounds A and B run; after each (collected, settled)
the check counts threads, gc-tracked agrad objects (``Node``, ``Tensor``,
``GraphTask``) and event loops (all closed by then), and traced memory.  Round B may not end with more threads or
objects than round A, and its traced-memory growth must stay well under round
A's (a leak grows both rounds alike; warm-up caches only the first), and no
agrad task is left on a loop when it closes.
"""

from __future__ import annotations

import asyncio
import gc
import math
import random
import threading
import time
import tracemalloc
from collections import Counter
from typing import Any

import anyio

import agrad
from agrad._engine._graph_task import GraphTask
from agrad._graph._node import Node
from agrad.autograd.graph import engine_options
from agrad.utils.checkpoint import checkpoint
from tests.helpers import WAIT_S
from tests.reliability import _invariants
from tests.reliability._invariants import Tally
from tests.reliability.cancellation import backend_args

BACKENDS = ("asyncio", "uvloop", "trio")
ASYNC_MODES = ("plain", "offloaded", "cancelled", "failed", "reentrant", "concurrent")
SYNC_MODES = ("plain", "failed", "reentrant")
# Traced-memory growth of round B allowed beyond half of round A's.
SLACK_BYTES = 64 * 1024


class Failure(Exception):
    pass


def _fail(g: agrad.Tensor) -> None:
    raise Failure("a hook fails on purpose")


def _graph(rs: random.Random, mode: str) -> tuple[agrad.Tensor, agrad.Tensor]:
    x = agrad.tensor([rs.uniform(-1, 1) for _ in range(64)], dtype=agrad.float64, requires_grad=True)
    h = x
    if mode == "reentrant":
        h = checkpoint(lambda a: checkpoint(lambda b: b.sin() * 2, a, use_reentrant=True).tanh(), h,
                       use_reentrant=rs.random() < 0.5)
    for _ in range(rs.randrange(1, 10)):
        h = h.sin() * 1.5
    if mode == "failed":
        h.register_hook(_fail)
    return x, h.sum()


async def _async_step(rs: random.Random, mode: str, tally: Tally, backend: str) -> None:
    tally.trials[f"{backend}: {mode}"] += 1
    x, y = _graph(rs, mode)
    with engine_options(offload="always" if mode == "offloaded" else "auto", max_recursion_depth=1):
        if mode == "cancelled":
            with anyio.move_on_after(rs.uniform(0, 0.001)):
                await y.backward()
        elif mode == "failed":
            try:
                await y.backward()
            except Failure:
                pass
        elif mode == "concurrent":
            z = (x * 2.0).sum()
            async with anyio.create_task_group() as tg:
                tg.start_soon(y.backward)
                tg.start_soon(z.backward)
        else:
            await y.backward()


def _sync_step(rs: random.Random, mode: str, tally: Tally) -> None:
    tally.trials[f"blocking: {mode}"] += 1
    _, y = _graph(rs, mode)
    with engine_options(max_recursion_depth=1):
        try:
            y.backward_sync()
        except Failure:
            pass


async def _async_round(steps: int, seed: int, tally: Tally, backend: str) -> None:
    rs = random.Random(seed)
    for step in range(steps):  # modes in turn: a round of any size runs each (Note [Soak sizes])
        await _async_step(rs, ASYNC_MODES[step % len(ASYNC_MODES)], tally, backend)
    left = await _invariants.settle_async()
    if left:
        tally.violation(seed, f"{backend} round", [f"when the loop closes: {p}" for p in left])


def _round(steps: int, seed: int, tally: Tally) -> None:
    for k, backend in enumerate(BACKENDS):
        anyio.run(_async_round, steps, seed + k, tally, backend, **backend_args(backend))
    rs = random.Random(seed + len(BACKENDS))
    for step in range(steps):
        _sync_step(rs, SYNC_MODES[step % len(SYNC_MODES)], tally)


def _agrad_objects() -> Counter[str]:
    """Live agrad objects, and event loops (each round's loops are closed: none may stay alive)."""
    gc.collect()
    kinds = (Node, agrad.Tensor, GraphTask, asyncio.AbstractEventLoop)
    # type(o), not isinstance: isinstance reads o.__class__, which some module proxies (torch's
    # deprecated aliases) answer with a warning.
    return Counter(next(k.__name__ for k in kinds if issubclass(type(o), k)) for o in gc.get_objects()
                   if issubclass(type(o), kinds))


def _threads() -> int:
    # trio keeps idle worker threads in its own cache for seconds ("Trio thread N" while idle); they are
    # not the engine's to end, and how many are cached depends on timing.
    return sum(1 for t in threading.enumerate() if not t.name.startswith("Trio thread"))


def _measure(threads_at_most: float = math.inf) -> dict[str, Any]:
    """Threads, agrad objects and traced memory once the engine is quiet; threads still ending are
    given until ``WAIT_S`` to end, while more than ``threads_at_most`` are left (a condition, not a nap:
    a loaded machine may be slow to end a thread, and a leak never ends it)."""
    _invariants.settle_sync()
    deadline = time.monotonic() + WAIT_S
    while _threads() > threads_at_most and time.monotonic() < deadline:
        time.sleep(0.01)
    return {"threads": _threads(), "objects": _agrad_objects(), "traced": tracemalloc.get_traced_memory()[0]}


def soak(steps: int, seed: int) -> Tally:
    """A warm-up round and rounds A and B of ``steps`` backwards per loop and for the blocking twin."""
    tally = Tally("leaks")
    start = time.perf_counter()
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    try:
        _round(max(steps // 4, 10), seed, tally)
        warm = _measure()
        _round(steps, seed + 100, tally)
        a = _measure()
        _round(steps, seed + 200, tally)
        b = _measure(threads_at_most=a["threads"])
    finally:
        if not tracing:
            tracemalloc.stop()
    problems = []
    if b["threads"] > a["threads"]:
        problems.append(f"threads grew: {warm['threads']} -> {a['threads']} -> {b['threads']}")
    grown = {k: (a["objects"][k], b["objects"][k]) for k in b["objects"] if b["objects"][k] > a["objects"][k]}
    if grown:
        problems.append(f"agrad objects grew (after A, after B): {grown}")
    growth_a, growth_b = a["traced"] - warm["traced"], b["traced"] - a["traced"]
    if growth_b > SLACK_BYTES + max(growth_a, 0) / 2:
        problems.append(f"traced memory grew {growth_a / 1024:.0f} KiB in round A and {growth_b / 1024:.0f} KiB in B")
    tally.outcomes["traced memory growth, round A (KiB)"] = round(growth_a / 1024)
    tally.outcomes["traced memory growth, round B (KiB)"] = round(growth_b / 1024)
    if problems:
        tally.violation(seed, f"{steps} backwards per mode family and round", problems)
    tally.seconds = time.perf_counter() - start
    return tally
