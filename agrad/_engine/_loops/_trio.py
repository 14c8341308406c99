"""The engine's event loop on trio."""

from __future__ import annotations

import contextlib
import contextvars
import sys
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["TrioLoop"]


class TrioLoop:
    """The current trio run."""

    __slots__ = ("_trio", "_token")

    def __init__(self) -> None:
        self._trio = sys.modules["trio"]
        self._token = self._trio.lowlevel.current_trio_token()

    def start_thread(self, fn: Callable[[], None]) -> None:
        # trio's thread cache: the threads behind ``trio.to_thread``.
        self._trio.lowlevel.start_thread_soon(fn, _ignore, name="agrad kernel worker")

    def post(self, fn: Callable[[], None]) -> None:
        # Kernels outlive no backward (Note [Kernels of a stopped task]), so the
        # run is still there; if it was torn down regardless, nobody is left to tell.
        with contextlib.suppress(self._trio.RunFinishedError):
            self._token.run_sync_soon(fn)

    def spawn(self, fn: Callable[[], Coroutine[Any, Any, None]], name: str) -> None:
        self._trio.lowlevel.spawn_system_task(fn, name=name, context=contextvars.Context())


def _ignore(_: Any) -> None:
    pass
