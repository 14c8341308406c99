"""Which ``agrad.cooperative`` call runs on this thread, if any.

A leaf module: op dispatch (``_registry.apply``) and the blocking twins read
``local.job`` to hand their kernel or backward to the call (Note [Cooperative
calls] in ``_cooperative.py``), without importing the engine.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["local"]


class _Local(threading.local):
    # The running call (a ``_cooperative._Cooperative``): set only while its
    # greenlet runs, so kernel threads and the worker itself see None.
    job: Any = None


local = _Local()
