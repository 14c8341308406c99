"""Which ``agrad.cooperative`` call runs on this thread, if any.

A leaf module: op dispatch (``_registry.apply``) and the blocking twins ask
:func:`current` to hand their kernel or backward to the call (Note
[Cooperative calls] in ``_cooperative.py``), without importing the engine.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["current", "local"]


class _Local(threading.local):
    # The running call (a ``_cooperative._Cooperative``): set only while its
    # greenlet runs, so kernel threads and the worker itself see None.
    job: Any = None


local = _Local()

# How many cooperative calls' greenlets are switched in now, on any thread.
# Op dispatch reads the thread-local ``local.job`` (a few hundred instructions)
# only when this is non-zero, so ops outside cooperative calls pay one global
# read.  Counted without a lock: a lost update between two loops' threads can
# only leave it wrong by one, which costs a thread-local read per op; whether
# an op pauses is decided by ``local.job`` alone.
running = 0


def current() -> Any:
    """The cooperative call whose greenlet runs on this thread now, if any."""
    return local.job if running else None
