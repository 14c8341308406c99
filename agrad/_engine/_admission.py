"""Admission: a bound on the cooperative calls in flight per event loop.

Note [Admission]
~~~~~~~~~~~~~~~~
A burst of requests must not exhaust memory.  What a request's gradient costs
is mostly its forward's: the activations it saves for the backward.  So at
most ``get_admission_limit()`` cooperative calls (``agrad.cooperative``, which
run a forward and its backward) run at once on each event loop; the next one
waits, first come first served, until one ends: backpressure that waits,
never fails, before the call allocates anything.  A call started inside a
running one (from a custom Function's ``async def backward`` of a backward it
runs) is part of it and never waits, or a full loop would deadlock on itself.
Awaited backwards are not held back: their graph, and its memory, exists
already, and holding them would only keep it alive longer (and would deadlock
backwards that wait for one another).  Admission costs nothing in throughput
as long as the limit is above what the CPU worker and kernel pool can run at
once (they interleave calls; they do not run more of them in parallel), and
one loop pass per call that waited.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import anyio.lowlevel

from agrad._ambient import inside_job
from agrad._engine import _traps

__all__ = ["admitted", "get_admission_limit", "mark_inside", "set_admission_limit"]

_limit = 16


def get_admission_limit() -> int:
    """How many ``agrad.cooperative`` calls may run at once per event loop."""
    return _limit


def set_admission_limit(limit: int) -> None:
    """Bound the ``agrad.cooperative`` calls running at once on each event loop
    (agrad only; default 16; see Note [Admission] in
    ``agrad/_engine/_admission.py``).  Callers beyond the bound wait, first come
    first served; calls nested in a running one never wait.  May be called at
    any time: a lower bound applies as calls end."""
    global _limit
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"admission limit must be a positive int, got {limit!r}")
    _limit = limit


def mark_inside() -> None:
    """Mark the current context as a job's own (call it in the job's context)."""
    inside_job.set(True)


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
    if inside_job.get():
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
            await _traps.wait_admitted(event)
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
