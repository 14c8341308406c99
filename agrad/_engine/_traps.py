"""The only places where a backward pass gives control back to the event loop.

Like trio's ``_core/_traps.py``: if you want to know where a running backward
can be interleaved with other tasks (or cancelled), it is here and nowhere
else.  Everything else in the engine is synchronous bookkeeping.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Generator
from typing import Any

import anyio
import anyio.lowlevel


async def checkpoint() -> None:
    """A checkpoint in trio's sense (a pending cancellation is raised, other
    tasks run) before a backward starts.

    There is none after it: once ``.grad`` is committed the call has
    succeeded, and an await there could only report a cancellation as if the
    backward had not happened (Note [After the commit]).
    """
    await anyio.lowlevel.checkpoint()


async def yield_slice() -> None:
    """Give the loop a turn after a time slice of node execution.

    A checkpoint: other tasks run, and a pending cancellation of the awaiting
    task is delivered here.  See Note [Time slices].
    """
    await anyio.lowlevel.checkpoint()
    # Note [Two schedule points per slice]
    # ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    # A task whose timer or I/O became due during our slice is not runnable
    # yet when we yield: the loop's next pass runs the callbacks already queued
    # (our own resumption first) and only *then* the timer's, which queues
    # that task for the pass after.  With one schedule point the loop would
    # resume us for a whole second slice before the woken task runs; yielding
    # again lets it run right after the first pass.  This halves the worst
    # lateness other tasks see, for one more loop pass (a few microseconds)
    # per slice.  trio needs it for the same reason: timeouts are processed
    # between batches.
    await anyio.lowlevel.checkpoint()


async def in_fresh_task(fn: Callable[[Any], Awaitable[None]], arg: Any) -> None:
    """Await ``fn(arg)`` in a new task of this event loop, on a fresh stack
    (Note [Reentrant depth]).

    Cancelling the awaiting task cancels the new one; its exception, if any,
    is raised here as it is (not wrapped in an exception group).
    """
    failure: list[BaseException] = []

    async def run() -> None:
        try:
            await fn(arg)
        except BaseException as exc:  # re-raised in the awaiting task, below
            failure.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
    if failure:
        try:
            raise failure[0]
        finally:
            failure.clear()  # no cycle through the traceback


async def wait_admitted(event: anyio.Event) -> None:
    """Wait in line until the admission gate lets this cooperative call in (Note
    [Admission]): ``event`` is set when it does.  A checkpoint: a cancelled call
    leaves the line here."""
    await event.wait()


async def wait_shielded(arm: Callable[[Callable[[], None]], None]) -> None:
    """Call ``arm`` with a function that ends this wait (on the loop's thread),
    then wait for it, shielded from cancellation: what it waits for (a
    device's kernels) cannot be called back."""
    event = anyio.Event()
    arm(event.set)
    with anyio.CancelScope(shield=True):
        await event.wait()


async def in_context(aw: Awaitable[Any], context: contextvars.Context) -> Any:
    """Await ``aw`` with its steps run in ``context``: an ``async def backward``
    of a custom Function in its graph task's context (its grad mode, current
    graph task and hooks; Note [Async backward]), or what ``agrad.cooperative``'s
    code waits for, in that code's context."""
    return await _InContext(aw.__await__(), context)


class _InContext:
    """Awaiting it runs ``coro`` (an ``__await__`` iterator) with each step in ``context``; the
    awaiting task stays the one that is cancelled, as for a plain ``await``."""

    __slots__ = ("_coro", "_context")

    def __init__(self, coro: Generator[Any, Any, Any], context: contextvars.Context) -> None:
        self._coro = coro
        self._context = context

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, run = self._coro, self._context.run
        value: Any = None
        exc: BaseException | None = None
        while True:
            try:
                yielded = run(coro.send, value) if exc is None else run(coro.throw, exc)
            except StopIteration as stop:
                return stop.value
            try:
                value, exc = (yield yielded), None
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as error:  # thrown in by the event loop: cancellation
                value, exc = None, error


class TurnWaiter:
    """Where the caller of an awaited backward or cooperative call waits for its
    job's turn (Note [One worker per loop]).

    The CPU worker calls :meth:`wake` on the loop's thread when the job needs
    its caller or ends; a wake while nobody waits is dropped, which is safe
    because the caller checks the job's state before it waits.
    """

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event: anyio.Event | None = None

    def wake(self) -> None:
        if self._event is not None:
            self._event.set()

    async def wait(self, shielded: bool) -> None:
        """Wait for :meth:`wake`; a checkpoint unless ``shielded`` (see Note
        [Kernels of a stopped task])."""
        self._event = event = anyio.Event()
        try:
            if shielded:
                with anyio.CancelScope(shield=True):
                    await event.wait()
            else:
                await event.wait()
        finally:
            self._event = None
