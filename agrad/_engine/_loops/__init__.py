"""The event loop the engine runs on, behind one small interface per backend.

As anyio keeps one module per backend, the engine's few needs of its event
loop are written once per backend here: ``_asyncio.py`` (asyncio and uvloop)
and ``_trio.py``.  Everything else in the engine calls :func:`current_loop`.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

import anyio.lowlevel

__all__ = ["Loop", "current_loop", "running_here"]


class Loop(Protocol):
    """What the engine needs of an event loop."""

    def start_thread(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` in a thread the loop lends (its executor's, trio's thread
        cache), in an empty context; raise RuntimeError if none is to be had."""

    def post(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` on the loop's thread soon; callable from any thread."""

    def spawn(self, fn: Callable[[], Coroutine[Any, Any, None]], name: str) -> None:
        """Start ``fn()`` as a task of the loop, in an empty context."""


_LOOP: anyio.lowlevel.RunVar[Loop] = anyio.lowlevel.RunVar("agrad_loop")


def current_loop() -> Loop:
    """The running event loop's adapter, created on first use."""
    loop = _LOOP.get(None)
    if loop is None:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            from agrad._engine._loops._trio import TrioLoop

            loop = TrioLoop()
        else:
            from agrad._engine._loops._asyncio import AsyncioLoop

            loop = AsyncioLoop(running)
        _LOOP.set(loop)
    return loop


def running_here() -> bool:
    """Whether an event loop (asyncio, uvloop or trio) runs on this thread."""
    if asyncio._get_running_loop() is not None:
        return True
    trio = sys.modules.get("trio")
    return trio is not None and bool(trio.lowlevel.in_trio_run())
