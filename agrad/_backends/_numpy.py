"""The CPU backend: numpy arrays, computed on synchronously.

The engine never routes CPU work through this interface (a graph task's
CPU nodes run in the coroutine that awaits it, see ``agrad/_engine``); it is
here so that every device type, the CPU included, answers the same questions.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np

from agrad._backends._base import Backend

__all__ = ["NumpyBackend"]


class NumpyBackend(Backend):
    type = "cpu"
    xp = np
    array_types = (np.ndarray,)

    def device_count(self) -> int:
        return 1

    def index_of(self, array: Any) -> Any:
        return None

    def context(self, index: int, engine: bool) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()

    def from_host(self, array: np.ndarray, index: int) -> np.ndarray:
        return array

    def to_host(self, array: np.ndarray) -> np.ndarray:
        return array

    def move(self, array: np.ndarray, index: int) -> np.ndarray:
        return array

    def when_idle(self, index: int, callback: Callable[[], None]) -> None:
        callback()

    def synchronize(self, index: int) -> None:
        pass
