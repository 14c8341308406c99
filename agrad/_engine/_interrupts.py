"""Holding SIGINT back while the engine changes ``.grad`` (Note [Atomic commit]).

Python runs a signal's handler on the main thread between two bytecodes, so
a ``KeyboardInterrupt`` can land between any two steps of a commit.  While
:class:`deferred_interrupts` is entered, SIGINT's handler is swapped for one
that only records the signal; on exit the original handler is put back and,
if a signal came, called as the signal would have called it.  Whatever that
handler does (raise ``KeyboardInterrupt``, cancel asyncio's main task, hand
trio a KeyboardInterrupt for its next checkpoint) then happens after the
block, never inside it.
"""

from __future__ import annotations

import _signal  # ``signal``'s C module: no enum conversions (1.5 us per swap, not 25)
import threading
from signal import SIGINT
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
