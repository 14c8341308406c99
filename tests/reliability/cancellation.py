"""Seeded random cancellation of awaited backwards, by every mechanism of the loop it runs on.

A quarter of the trials (by a draw of their own) run the calls' blocking twins
inside ``agrad.cooperative`` instead; such a call may commit and still be
cancelled, so its gradient may or may not be in ``.grad``, but whole.

Trial ``seed`` builds graph ``seed`` (``_graphs.build``), snapshots every
leaf's ``.grad``, and runs the graph's calls (one, or several at once into
shared leaves) under the loop's mechanisms in turn (seed modulo their number), cancelling
after a random number of loop passes or a random small delay.  Then
(``_invariants``): ``.grad`` is what it was plus exactly the reference
gradient of each call that returned (a flag set right after its ``await``),
``grad()`` results match, ``_PROVISIONAL`` is empty, nothing of the engine
still runs after a short settle, and a small backward works.

Replay one trial: ``python -m tests.reliability.run --replay cancellation:<backend>:<seed>``.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import sniffio

import agrad
from tests.helpers import blocking_on_the_loop
from tests.reliability import _graphs, _invariants
from tests.reliability._invariants import Tally

Body = Callable[[], Awaitable[None]]


class Boom(Exception):
    """What a failing sibling raises."""


def _delay(rs: random.Random) -> float:
    return rs.choice((0.0, rs.uniform(0, 0.0005), rs.uniform(0, 0.005), rs.uniform(0, 0.05)))


async def _passes(rs: random.Random) -> None:
    """Let the loop run a random number of passes, or wait a random small delay."""
    if rs.random() < 0.5:
        for _ in range(rs.randrange(0, 40)):
            await anyio.lowlevel.checkpoint()
    else:
        await anyio.sleep(_delay(rs))


async def _failing_sibling(rs: random.Random) -> None:
    await _passes(rs)
    raise Boom("sibling failed")


# -- asyncio (and uvloop) ---------------------------------------------------------------------------


async def _task_cancel(body: Body, rs: random.Random) -> None:
    task = asyncio.ensure_future(body())
    await _passes(rs)
    task.cancel()
    await task


async def _asyncio_timeout(body: Body, rs: random.Random) -> None:
    async with asyncio.timeout(_delay(rs)):
        await body()


async def _wait_for(body: Body, rs: random.Random) -> None:
    await asyncio.wait_for(body(), _delay(rs))


async def _asyncio_taskgroup(body: Body, rs: random.Random) -> None:
    async with asyncio.TaskGroup() as tg:
        tg.create_task(body())
        tg.create_task(_failing_sibling(rs))


# -- trio ------------------------------------------------------------------------------------------


async def _trio_move_on_after(body: Body, rs: random.Random) -> None:
    import trio
    with trio.move_on_after(_delay(rs)):
        await body()


async def _trio_fail_after(body: Body, rs: random.Random) -> None:
    import trio
    with trio.fail_after(_delay(rs)):
        await body()


async def _trio_nursery_cancel(body: Body, rs: random.Random) -> None:
    import trio

    async def canceller() -> None:
        await _passes(rs)
        nursery.cancel_scope.cancel()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(canceller)
        await body()


async def _trio_failing_sibling(body: Body, rs: random.Random) -> None:
    import trio
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_failing_sibling, rs)
        await body()


# -- anyio (on asyncio and on trio) ----------------------------------------------------------------


async def _anyio_scope_cancel(body: Body, rs: random.Random) -> None:
    async def canceller() -> None:
        await _passes(rs)
        scope.cancel()

    async with anyio.create_task_group() as tg:
        with anyio.CancelScope() as scope:
            tg.start_soon(canceller)
            await body()


async def _anyio_fail_after(body: Body, rs: random.Random) -> None:
    with anyio.fail_after(_delay(rs)):
        await body()


async def _anyio_move_on_after(body: Body, rs: random.Random) -> None:
    with anyio.move_on_after(_delay(rs)):
        await body()


async def _anyio_failing_sibling(body: Body, rs: random.Random) -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(_failing_sibling, rs)
        await body()


Mechanism = Callable[[Body, random.Random], Awaitable[None]]
_ANYIO: dict[str, Mechanism] = {
    "anyio CancelScope.cancel()": _anyio_scope_cancel,
    "anyio.fail_after": _anyio_fail_after,
    "anyio.move_on_after": _anyio_move_on_after,
    "anyio task group, failing sibling": _anyio_failing_sibling,
}
MECHANISMS: dict[str, dict[str, Mechanism]] = {
    "asyncio": {
        "Task.cancel()": _task_cancel,
        "asyncio.timeout": _asyncio_timeout,
        "asyncio.wait_for": _wait_for,
        "asyncio.TaskGroup, failing sibling": _asyncio_taskgroup,
        **_ANYIO,
    },
    "trio": {
        "trio.move_on_after": _trio_move_on_after,
        "trio.fail_after": _trio_fail_after,
        "nursery.cancel_scope.cancel()": _trio_nursery_cancel,
        "trio nursery, failing sibling": _trio_failing_sibling,
        **_ANYIO,
    },
}


try:
    import greenlet  # noqa: F401  (agrad.cooperative needs it)
    _COOPERATIVE = True
except ImportError:  # the soak runs without the serving extra, minus the cooperative trials
    _COOPERATIVE = False


def _expected(exc: BaseException) -> bool:
    """How a cancelled trial may end: cancellation, a deadline, or the sibling's failure."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_expected(e) for e in exc.exceptions)
    return isinstance(exc, asyncio.CancelledError | TimeoutError | Boom) or type(exc).__name__ == "TooSlowError"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return f"{type(exc).__name__}[{', '.join(map(_describe, exc.exceptions))}]"
    return f"{type(exc).__name__}: {exc}"


async def trial(seed: int, tally: Tally, backend: str) -> None:
    """One seeded trial on the running loop; violations go to ``tally``."""
    rs = random.Random(seed ^ 0x5EED)
    family = "trio" if sniffio.current_async_library() == "trio" else "asyncio"
    names = sorted(MECHANISMS[family])
    name = names[seed % len(names)]  # in turn: any run of len(names) seeds tries each (Note [Soak sizes])
    mechanism = MECHANISMS[family][name]
    graph = _graphs.build(seed)
    # The reference, and the graph's setup, run blocking on this loop's thread before the trial starts.
    with blocking_on_the_loop():
        reference = _graphs.reference(seed)
        with _graphs.options(graph):
            for c in graph.pre:
                _graphs.run_sync(c)
    before = _invariants.snapshot(graph.leaves)
    results: list[Any] = [None] * len(graph.calls)
    returned = [False] * len(graph.calls)
    # A quarter of the trials run each call's blocking twin inside agrad.cooperative
    # (its own draw, so the other draws of a seed stay what they were).
    cooperative = _COOPERATIVE and random.Random(seed ^ 0xC00).random() < 0.25

    async def one(i: int) -> None:
        if cooperative:
            results[i] = await agrad.cooperative(_graphs.run_sync, graph.calls[i])
        else:
            results[i] = await _graphs.run_async(graph.calls[i])
        returned[i] = True

    async def body() -> None:
        with _graphs.options(graph):
            if len(graph.calls) == 1:
                await one(0)
            else:
                async with anyio.create_task_group() as tg:
                    for i in range(len(graph.calls)):
                        tg.start_soon(one, i)

    what = f"{backend} {name}{' in agrad.cooperative' if cooperative else ''} on {graph.describe()}"
    mechanism_name = f"{backend}: {name}"
    tally.trials[mechanism_name] += 1
    problems: list[str] = []
    try:
        await mechanism(body, rs)
    except BaseException as exc:  # noqa: BLE001  (classified below)
        if not _expected(exc):
            problems.append(f"unexpected {_describe(exc)}")
        tally.outcomes[f"raised {type(exc).__name__}"] += 1
    else:
        tally.outcomes["completed"] += 1
    if cooperative:
        tally.outcomes["(of which in agrad.cooperative)"] += 1
    problems += _invariants.provisional_problems()
    added = [ref for ref, ok, c in zip(reference, returned, graph.calls) if ok and c.mode == "backward"]
    # A cancelled cooperative call may have committed its backward before the
    # cancellation reached fn (Note [Backwards inside a cooperative call]).
    maybe = [ref for ref, ok, c in zip(reference, returned, graph.calls)
             if cooperative and not ok and c.mode == "backward"]
    problems += _invariants.grad_problems(graph.leaves, before, added, maybe)
    problems += _invariants.result_problems(
        [r if ok else None for r, ok in zip(results, returned)], reference)
    problems += await _invariants.settle_async()
    problems += await _invariants.engine_works_async()
    if problems:
        tally.violation(seed, what, problems, mechanism_name)


async def soak(trials: int, seed: int, backend: str) -> Tally:
    """``trials`` seeded trials (seeds ``seed``, ``seed + 1``, ...) on the running loop."""
    tally = Tally("cancellation")
    start = time.perf_counter()
    for s in range(seed, seed + trials):
        await trial(s, tally, backend)
    tally.seconds = time.perf_counter() - start
    return tally


def backend_args(backend: str) -> dict[str, Any]:
    """``anyio.run`` arguments for ``backend`` ("asyncio", "uvloop" or "trio")."""
    if backend == "uvloop":
        return {"backend": "asyncio", "backend_options": {"use_uvloop": True}}
    return {"backend": backend}
