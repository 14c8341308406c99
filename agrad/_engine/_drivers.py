"""Drivers: run a GraphTask's generator on an event loop, or blocking.

The GraphTask's generator (:meth:`GraphTask.run`) holds the whole backward,
its commit and its abort.  A driver only answers its requests: the async
driver awaits slices, kernel waits and ``async def backward`` coroutines
(through ``_traps``, the only await points) and hands kernels to the loop's
:class:`KernelPool`; the blocking driver runs every kernel inline and runs
coroutines to completion itself.  Whatever goes wrong while a driver waits is
thrown into the generator, which aborts the task.

The awaiting coroutine is its graph task's CPU worker, as PyTorch's calling
thread works its own local ready queue: concurrent backwards on one loop are
concurrent coroutines, interleaved at their time slices and kernel waits.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import sys
from collections.abc import Awaitable, Generator
from typing import Any

from agrad._engine import _traps
from agrad._engine._graph_task import SLICE_SPENT, GraphTask, Offload, WaitKernels, _nothing
from agrad._engine._options import current_options
from agrad._engine._pool import KernelPool, current_pool


def _advance(steps: Generator[Any, Any, None], value: Any = None, exc: BaseException | None = None) -> Any:
    """Resume the task's generator; return its next request, or None when it is done."""
    try:
        return steps.send(value) if exc is None else steps.throw(exc)
    except StopIteration:
        return None


async def execute(task: GraphTask) -> None:
    """Run ``task`` in the awaiting coroutine, yielding to the loop per time slice
    and while its kernels run in threads."""
    await _traps.check_cancelled()
    steps = task.run(current_options())
    waiter = _traps.KernelWaiter()
    task._wake = waiter.wake
    pool: KernelPool | None = None  # this loop's, looked up at the first offload
    try:
        request = _advance(steps)
        while request is not None:
            try:
                if request is SLICE_SPENT:
                    result = await _traps.yield_slice()
                elif type(request) is Offload:
                    if pool is None:
                        pool = current_pool()
                    result = pool.offload(task, request.job)
                elif type(request) is WaitKernels:
                    if request.shielded and pool is not None:
                        pool.forget(task)  # aborting: its place in line goes to others now
                    result = await waiter.wait(request.shielded)
                else:
                    result = await _traps.await_backward(request)
            except BaseException as exc:  # cancellation included: the task aborts
                request = _advance(steps, exc=exc)
            else:
                request = _advance(steps, result)
    finally:
        task._wake = _nothing
        if pool is not None:
            pool.forget(task)
    await _traps.after_commit()


def execute_sync(task: GraphTask) -> None:
    """Run ``task`` to completion on this thread, blocking (the blocking twin)."""
    steps = task.run(None)  # no time slices, no offload: never asks to wait for kernels
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
