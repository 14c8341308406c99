"""Drivers: run a GraphTask's generator on an event loop, or blocking.

Both drivers answer the same two requests from :meth:`GraphTask.run`: "the
time slice is spent" and "await this ``async def backward``".  The async
driver awaits (through ``_traps``); the blocking driver ignores slices and runs
coroutines to completion itself.  Whatever happens, a task that did not
finish is aborted, so a failed or cancelled backward leaves ``.grad`` as it
was (Note [Staged gradients]).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Awaitable, Coroutine, Generator, Iterator
from contextlib import contextmanager
from typing import Any

from agrad._engine import _traps
from agrad._engine._graph_task import SLICE_SPENT, TIME_SLICE, GraphTask
from agrad._grad_mode import grad_enabled

# The graph task whose nodes are running in this context: queue_callback
# appends to it, and a backward started from inside a node's backward is a
# reentrant one, one level deeper.  See Note [Ambient state in contextvars].
current_graph_task: contextvars.ContextVar[GraphTask | None] = contextvars.ContextVar(
    "agrad_current_graph_task", default=None
)


@contextmanager
def _running(task: GraphTask) -> Iterator[None]:
    """Ambient state while nodes run: grad mode is ``create_graph``, as in PyTorch."""
    mode = grad_enabled.get()
    outer = current_graph_task.get()
    grad_enabled.set(task.create_graph)
    current_graph_task.set(task)
    try:
        yield
    finally:
        grad_enabled.set(mode)
        current_graph_task.set(outer)


def _advance(steps: Generator[Any, Any, None], value: Any = None, exc: BaseException | None = None) -> Any:
    """Resume the task's generator; return its next request, or None when it is done."""
    try:
        return steps.send(value) if exc is None else steps.throw(exc)
    except StopIteration:
        return None


async def execute(task: GraphTask) -> None:
    """Run ``task`` in the awaiting coroutine, yielding to the loop per time slice."""
    steps = task.run(TIME_SLICE)
    try:
        with _running(task):
            request = _advance(steps)
            while request is not None:
                if request is SLICE_SPENT:
                    await _traps.yield_slice()
                    request = _advance(steps)
                    continue
                try:
                    result = await _traps.await_backward(request)
                except BaseException as exc:
                    request = _advance(steps, exc=exc)
                else:
                    request = _advance(steps, result)
            task.finish()
    except BaseException:
        task.abort()
        raise
    finally:
        steps.close()


def execute_sync(task: GraphTask) -> None:
    """Run ``task`` to completion on this thread, blocking (the blocking twin)."""
    steps = task.run(None)
    try:
        with _running(task):
            request = _advance(steps)
            while request is not None:
                try:
                    result = run_coroutine_blocking(request)
                except BaseException as exc:
                    request = _advance(steps, exc=exc)
                else:
                    request = _advance(steps, result)
            task.finish()
    except BaseException:
        task.abort()
        raise
    finally:
        steps.close()


# Note [Async backward]
# ~~~~~~~~~~~~~~~~~~~~~
# A custom Function may define ``async def backward``.  The async driver simply
# awaits it.  The blocking driver must run the coroutine itself: on a thread
# with no running event loop it uses a private loop kept for that thread; on a
# thread whose loop is running (a blocking call made from async code) it
# cannot start a second loop there, so it runs the coroutine on a helper
# thread's loop and blocks for the result.  Either way the coroutine runs in a
# copy of the caller's context, so it sees the backward's grad mode.
_local = threading.local()


def run_coroutine_blocking(coro: Coroutine[Any, Any, Any] | Awaitable[Any]) -> Any:
    ctx = contextvars.copy_context()
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        runner = getattr(_local, "runner", None)
        if runner is None:
            runner = _local.runner = asyncio.Runner()
        return runner.run(_as_coroutine(coro), context=ctx)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="agrad-async-backward") as pool:
        return pool.submit(ctx.run, asyncio.run, _as_coroutine(coro)).result()


async def _as_coroutine(aw: Awaitable[Any]) -> Any:
    return await aw
