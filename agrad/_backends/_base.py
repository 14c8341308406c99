"""The interface a backend implements: one module per device type subclasses it."""

from __future__ import annotations

import builtins
import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["Backend"]


class Backend:
    """The interface a device type implements (numpy's is the trivial one).

    Subclasses set ``type`` and implement the methods; :meth:`load` runs once,
    on first use, and fills ``xp`` and ``array_types``.
    """

    type: str = ""
    #: The array module op forwards compute with (numpy's API).
    xp: Any = None
    #: The array types this backend owns (filled by :meth:`load`).
    array_types: tuple[builtins.type, ...] = ()  # builtins: ``type`` is the attribute above

    def load(self) -> None:
        """Import the array library; raise a clear RuntimeError if it cannot work here."""

    def device_count(self) -> int:
        raise NotImplementedError

    def current_index(self) -> int:
        """The index ``device("<type>")`` without one means."""
        return 0

    def index_of(self, array: Any) -> int:
        """The index of the device holding ``array``."""
        raise NotImplementedError

    def context(self, index: int, engine: bool) -> contextlib.AbstractContextManager[Any]:
        """Make device ``index`` current for the kernels launched inside; with
        ``engine``, make its engine stream current as well (Note [Engine streams])."""
        raise NotImplementedError

    def from_host(self, array: np.ndarray, index: int) -> Any:
        """Copy a numpy array to device ``index``."""
        raise NotImplementedError

    def to_host(self, array: Any) -> np.ndarray:
        """Copy ``array`` to a numpy array (waits for the work that produces it)."""
        raise NotImplementedError

    def move(self, array: Any, index: int) -> Any:
        """Copy ``array`` to another device ``index`` of this type."""
        raise NotImplementedError

    def join_caller(self, index: int) -> None:
        """Order the engine's work on device ``index`` after the work the caller
        queued so far (on the caller's current stream)."""

    def when_idle(self, index: int, callback: Callable[[], None]) -> None:
        """Call ``callback()``, from any thread, once every kernel queued so far on
        device ``index``'s engine stream has finished.  Never blocks."""
        raise NotImplementedError

    def synchronize(self, index: int) -> None:
        """Block until every kernel queued on device ``index``'s engine stream has finished."""
        raise NotImplementedError
