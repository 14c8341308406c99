"""Drivers: run a GraphTask's generator on an event loop, or blocking.

The GraphTask's generator (:meth:`GraphTask.run`) holds the whole backward,
its commit and its abort.  A driver only answers its two requests, "the time
slice is spent" and "await this ``async def backward``": the async driver
awaits them (through ``_traps``, the only await points), the blocking driver
ignores slices and runs coroutines to completion itself.  Whatever goes wrong
while a driver waits is thrown into the generator, which aborts the task.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import sys
from collections.abc import Awaitable, Generator
from typing import Any

from agrad._engine import _traps
from agrad._engine._graph_task import SLICE_SPENT, TIME_SLICE, GraphTask


def _advance(steps: Generator[Any, Any, None], value: Any = None, exc: BaseException | None = None) -> Any:
    """Resume the task's generator; return its next request, or None when it is done."""
    try:
        return steps.send(value) if exc is None else steps.throw(exc)
    except StopIteration:
        return None


async def execute(task: GraphTask) -> None:
    """Run ``task`` in the awaiting coroutine, yielding to the loop per time slice."""
    await _traps.check_cancelled()
    steps = task.run(TIME_SLICE)
    request = _advance(steps)
    while request is not None:
        try:
            if request is SLICE_SPENT:
                result = await _traps.yield_slice()
            else:
                result = await _traps.await_backward(request)
        except BaseException as exc:  # cancellation included: the task aborts
            request = _advance(steps, exc=exc)
        else:
            request = _advance(steps, result)
    await _traps.after_commit()


def execute_sync(task: GraphTask) -> None:
    """Run ``task`` to completion on this thread, blocking (the blocking twin)."""
    steps = task.run(None)
    with _CoroutineRunner() as run_coroutine:
        request = _advance(steps)
        while request is not None:
            try:
                result = run_coroutine(request)
            except BaseException as exc:
                request = _advance(steps, exc=exc)
            else:
                request = _advance(steps, result)


# Note [Async backward]
# ~~~~~~~~~~~~~~~~~~~~~
# A custom Function may define ``async def backward``.  The async driver simply
# awaits it.  The blocking driver must run the coroutine itself: on a thread
# with no running event loop it uses a private asyncio loop, created on the
# first async node of the backward and closed when the backward ends; on a
# thread whose loop is running (a blocking call made from async code, on
# asyncio, uvloop or trio) it cannot run a second loop there, so it runs the
# coroutine on a fresh loop in a helper thread and blocks for the result.
# Either way the coroutine runs in a copy of the caller's context, so it sees
# the backward's grad mode.
class _CoroutineRunner:
    def __init__(self) -> None:
        self._runner: asyncio.Runner | None = None

    def __enter__(self) -> "_CoroutineRunner":
        return self

    def __exit__(self, *exc: object) -> None:
        if self._runner is not None:
            self._runner.close()

    def __call__(self, aw: Awaitable[Any]) -> Any:
        ctx = contextvars.copy_context()
        if _loop_running_here():
            with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="agrad-async-backward") as pool:
                return pool.submit(ctx.run, _run_in_fresh_loop, aw).result()
        if self._runner is None:
            self._runner = asyncio.Runner()
        return self._runner.run(_as_coroutine(aw), context=ctx)


def _loop_running_here() -> bool:
    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        pass
    trio = sys.modules.get("trio")
    if trio is not None:
        try:
            trio.lowlevel.current_root_task()
            return True
        except RuntimeError:
            pass
    return False


def _run_in_fresh_loop(aw: Awaitable[Any]) -> Any:
    # The copied context may say "trio" to sniffio (the caller's library);
    # this thread runs asyncio.
    sniffio = sys.modules.get("sniffio")
    if sniffio is not None:
        sniffio.current_async_library_cvar.set(None)
    return asyncio.run(_as_coroutine(aw))


async def _as_coroutine(aw: Awaitable[Any]) -> Any:
    return await aw
