"""The only places where a backward pass gives control back to the event loop.

Like trio's ``_core/_traps.py``: if you want to know where a running backward
can be interleaved with other tasks (or cancelled), it is here and nowhere
else.  Everything else in the engine is synchronous bookkeeping.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import anyio.lowlevel


async def yield_slice() -> None:
    """Give the loop a turn after a time slice of node execution.

    A checkpoint: other tasks run, and a pending cancellation of the awaiting
    task is delivered here.  See Note [Time slices].
    """
    await anyio.lowlevel.checkpoint()


async def await_backward(coro: Awaitable[Any]) -> Any:
    """Await an ``async def backward`` of a custom Function (Note [Async backward])."""
    return await coro
