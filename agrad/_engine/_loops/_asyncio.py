"""The engine's event loop on asyncio and uvloop."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import weakref
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["AsyncioLoop"]


# Note [Holding a loop weakly]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# anyio's RunVar keeps its value for an asyncio loop in a WeakKeyDictionary
# keyed by the loop, so a value that refers to its loop keeps the loop alive
# for good: every loop that ever offloaded a kernel leaked, with its pool (the
# reliability suite's leak check, and 20 of 20 ``asyncio.run`` loops alive
# after a collection).  So the adapter, which the pool and the workers keep,
# holds its loop through a weak reference.  It is called only while the loop
# is alive: on its thread, or by a kernel the loop's backward waits for.
class AsyncioLoop:
    """An asyncio (or uvloop) event loop, held weakly (Note [Holding a loop weakly])."""

    __slots__ = ("_ref", "_tasks")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._ref = weakref.ref(loop)
        self._tasks: set[asyncio.Task[None]] = set()  # the loop keeps only weak references to tasks

    def _loop(self) -> asyncio.AbstractEventLoop:
        loop = self._ref()
        if loop is None:  # collected: a closed loop
            raise RuntimeError("Event loop is closed")
        return loop

    def start_thread(self, fn: Callable[[], None]) -> None:
        # The loop's default executor, which the loop shuts down when it closes
        # (``asyncio.run`` joins its threads).  Started in an empty context: the
        # asyncio future run_in_executor returns keeps the context it was created
        # in until the loop hears that the thread's function ended, and the
        # caller's context names its graph task (current_graph_task), which would
        # stay reachable after the backward.
        contextvars.Context().run(self._loop().run_in_executor, None, fn)

    def post(self, fn: Callable[[], None]) -> None:
        # Only a loop closed around a running backward refuses; nobody is left to tell.
        with contextlib.suppress(RuntimeError):
            self._loop().call_soon_threadsafe(fn)

    def spawn(self, fn: Callable[[], Coroutine[Any, Any, None]], name: str) -> None:
        task = self._loop().create_task(fn(), name=name, context=contextvars.Context())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
