"""What runs the CPU kernels of this thread's ops, if not the op itself.

A leaf module: op dispatch (``_registry.apply``) hands a CPU kernel to this
thread's *runner*, if it has one, and the blocking twins ask :func:`current`
whether they run inside an ``agrad.cooperative`` call, without importing the
engine.  A runner is a cooperative call while its greenlet is switched in
(Note [Cooperative calls] in ``_cooperative.py``), or a ``RowBlocks`` while a
kernel thread runs a job that may split its products (Note [Products in row
blocks] in ``_row_blocks.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["current", "local", "running", "runs_kernels"]


class _Local(threading.local):
    # The running cooperative call (a ``_cooperative._Cooperative``): set only
    # while its greenlet runs, so kernel threads and the worker itself see None.
    job: Any = None
    # What runs this thread's CPU kernels (``forward(op, arrays, attrs)``): the
    # cooperative call, or a kernel thread's ``RowBlocks``; None: the op itself.
    runner: Any = None


local = _Local()

# How many threads have a runner now.  Op dispatch reads the thread-local
# ``local.runner`` (a few hundred instructions) only when this is non-zero, so
# ops outside cooperative calls and split kernels pay one global read.  Kernel
# threads and loops' threads change it, so under a lock: a lost update could
# leave it at 0 while a runner is set, and that runner would be skipped.
running = 0
_lock = threading.Lock()


@contextmanager
def runs_kernels(runner: Any, job: Any = None) -> Iterator[None]:
    """Make ``runner`` run this thread's CPU kernels inside the block (and ``job``
    the cooperative call running here, if it is one)."""
    global running
    with _lock:
        running += 1
    local.runner, local.job = runner, job
    try:
        yield
    finally:
        local.runner = local.job = None
        with _lock:
            running -= 1


def current() -> Any:
    """The cooperative call whose greenlet runs on this thread now, if any."""
    return local.job if running else None
