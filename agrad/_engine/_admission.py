"""Admission: a bound on the backwards and cooperative calls in flight per event loop.

Note [Admission]
~~~~~~~~~~~~~~~~
A burst of requests must not exhaust memory: each awaited backward holds its
graph's saved tensors and buffers until it ends, and each cooperative call
(``agrad.cooperative``) the activations of its forward.  So at most
``get_admission_limit()`` top-level jobs (awaited backwards and grads,
cooperative calls) run at once on each event loop; the next one waits, first
come first served, until one ends: backpressure that waits, never fails.  A
job started *inside* a running one (a reentrant backward, a backward inside a
cooperative call, a spilled task) is part of it and never waits, or a full
loop would deadlock on itself.  Admission costs nothing in throughput as long
as the limit is above what the CPU worker and kernel pool can run at once
(they interleave jobs; they do not run more of them in parallel), and one
loop pass per waiting job when it is admitted.  Blocking twins are not
counted: they run in their caller's thread.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar

import anyio
import anyio.lowlevel

__all__ = ["admitted", "get_admission_limit", "mark_inside", "set_admission_limit"]

_limit = 16

# True in the context a job runs in: jobs started there are part of it.
_inside: ContextVar[bool] = ContextVar("agrad_inside_job", default=False)


def get_admission_limit() -> int:
    """How many awaited backwards and cooperative calls may run at once per event loop."""
    return _limit


def set_admission_limit(limit: int) -> None:
    """Bound the awaited backwards, grads and ``agrad.cooperative`` calls running at
    once on each event loop (agrad only; default 16; see Note [Admission] in
    ``agrad/_engine/_admission.py``).  Callers beyond the bound wait, first come
    first served; nested ones (a backward inside a running one) never wait.
    May be called at any time: a lower bound applies as jobs end."""
    global _limit
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"admission limit must be a positive int, got {limit!r}")
    _limit = limit


def mark_inside() -> None:
    """Mark the current context as a job's own (call it in the job's context)."""
    _inside.set(True)


class _Gate:
    """One event loop's admissions."""

    __slots__ = ("running", "waiting")

    def __init__(self) -> None:
        self.running = 0
        self.waiting: deque[anyio.Event] = deque()

    def release(self) -> None:
        self.running -= 1
        while self.waiting and self.running < _limit:
            self.running += 1  # handed to the first in line, which finds it taken for it
            self.waiting.popleft().set()


_GATE: anyio.lowlevel.RunVar[_Gate] = anyio.lowlevel.RunVar("agrad_admission")


@asynccontextmanager
async def admitted() -> AsyncIterator[None]:
    """Hold one of this loop's admissions while the block runs (Note [Admission]).

    Leaving the block never awaits, so nothing is reported after a job's
    commit (Note [After the commit])."""
    if _inside.get():
        yield
        return
    gate = _GATE.get(None)
    if gate is None:
        gate = _Gate()
        _GATE.set(gate)
    if gate.running < _limit and not gate.waiting:
        gate.running += 1
    else:
        event = anyio.Event()
        gate.waiting.append(event)
        try:
            await event.wait()
        except BaseException:
            if event.is_set():  # admitted, then cancelled before it ran: pass it on
                gate.release()
            else:
                gate.waiting.remove(event)
            raise
    try:
        yield
    finally:
        gate.release()
