"""How the engine takes SIGINT: held back while it changes ``.grad`` (Note
[Atomic commit]), and turned into a cancellation while a blocking call runs
an event loop of its own (Note [Interrupting a private loop]).

Python runs a signal's handler on the main thread between two bytecodes, so
a ``KeyboardInterrupt`` can land between any two steps of a commit.  While
:class:`deferred_interrupts` is entered, SIGINT's handler is swapped for one
that only records the signal; on exit the original handler is put back and,
if a signal came, called as the signal would have called it.  Whatever that
handler does (raise ``KeyboardInterrupt``, cancel asyncio's main task, hand
trio a KeyboardInterrupt for its next checkpoint) then happens after the
block, never inside it.

Note [Interrupting a private loop]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The blocking twin runs an ``async def backward`` on a private asyncio loop
of its own thread (Note [Async backward]); that coroutine may run a whole
awaited backward, with kernels in the loop's threads.  A KeyboardInterrupt
raised wherever it lands there can leave that backward half-run: the loop
stops with its task pending (and resumes it, committing, when the loop is
next run to shut down), or the kernel pool's bookkeeping half-updated.  So,
as ``asyncio.Runner`` does for ``asyncio.run``, SIGINT cancels the task
instead; the backward aborts at its next await as any cancelled backward
does (Note [Kernels of a stopped task]), and KeyboardInterrupt is raised
once the task has ended.  Further SIGINTs meanwhile are not lost: one
KeyboardInterrupt is raised for them all.
"""

from __future__ import annotations

import _signal  # ``signal``'s C module: no enum conversions (1.5 us per swap, not 25)
import threading
from signal import SIGINT, default_int_handler
from types import FrameType, TracebackType
from typing import Any

_MAIN = threading.main_thread().ident


class deferred_interrupts:
    """``with deferred_interrupts(): ...``: the block runs to its end before a
    SIGINT that arrives during it is handled.  Elsewhere than on the main
    thread, or where SIGINT has no Python handler, it does nothing (signals
    run their handlers on the main thread only)."""

    __slots__ = ("_handler", "_caught")

    def __init__(self) -> None:
        self._handler: Any = None
        self._caught: list[FrameType | None] = []

    def _record(self, signum: int, frame: FrameType | None) -> None:
        self._caught.append(frame)

    def __enter__(self) -> None:
        if threading.get_ident() != _MAIN:
            return
        handler = _signal.getsignal(SIGINT)
        if callable(handler):
            _signal.signal(SIGINT, self._record)
            self._handler = handler

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        handler = self._handler
        if handler is None:
            return
        self._handler = None
        _signal.signal(SIGINT, handler)
        if self._caught:
            frame = self._caught[0]
            self._caught.clear()
            handler(SIGINT, frame)


class cancel_on_interrupt:
    """``with cancel_on_interrupt(loop) as interrupt: interrupt.task = ...;
    loop.run_until_complete(interrupt.task)``: while a blocking call runs an
    asyncio task on a private loop on the main thread, SIGINT cancels that
    task (as ``asyncio.Runner`` does) instead of raising KeyboardInterrupt
    wherever it lands, and the block raises KeyboardInterrupt once the task
    has ended (Note [Interrupting a private loop]).

    Only where SIGINT's handler is Python's default one; a program that
    installed its own handler keeps it.
    """

    __slots__ = ("task", "_loop", "_installed", "_interrupted")

    def __init__(self, loop: Any) -> None:
        self.task: Any = None
        self._loop = loop
        self._installed = False
        self._interrupted = False

    def _cancel(self, signum: int, frame: FrameType | None) -> None:
        self._interrupted = True
        if self.task is not None:
            self._loop.call_soon_threadsafe(self.task.cancel)

    def __enter__(self) -> cancel_on_interrupt:
        if threading.get_ident() == _MAIN and _signal.getsignal(SIGINT) is default_int_handler:
            _signal.signal(SIGINT, self._cancel)
            self._installed = True
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if not self._installed:
            return
        self._installed = False
        _signal.signal(SIGINT, default_int_handler)
        if self._interrupted:
            self._interrupted = False
            raise KeyboardInterrupt
