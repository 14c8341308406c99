"""The time slice: how long the engine runs before it gives the event loop a turn.

One clock for everyone who runs engine work on the loop's thread: the CPU
worker and the graph tasks and cooperative calls it runs (which read
``Budget.deadline`` after each node or op), and the device workers.
"""

from __future__ import annotations

import time

__all__ = ["Budget", "clock"]

clock = time.perf_counter

# Note [Time slices]
# ~~~~~~~~~~~~~~~~~~
# The CPU worker (``_cpu_worker.py``) runs ready nodes back to back and yields
# to the event loop only when a time slice is spent, never per node: a
# checkpoint costs a few microseconds, as much as a small node, so yielding per
# node would double the cost of a chain of small ops.  The slice belongs to the
# worker, not to a graph task: every awaited backward on the loop spends the
# same ``Budget``, so other coroutines wait about one slice per loop pass
# however many backwards are in flight (Note [One worker per loop]).  A task
# reads ``budget.deadline`` after each node and yields ``SLICE_SPENT`` once it
# has passed; the worker then puts it at the back of its line.  A device
# worker keeps a budget of its own, for the jobs of every task on its device.
# The slice is an engine option (``EngineOptions.time_slice``).

# Note [The default slice]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# 0.5 ms.  Measured in one run on the 2-core VM (uvloop, the serving example's
# saliency, 8 concurrent cooperative calls, a 5 ms ticker beside them): batch 1
# 1,596 req/s and ticker lag p99 2.1 ms at 2 ms slices, 1,631 and 0.29 ms at
# 0.5 ms; batch 32 419 and 2.4 ms, 476 and 0.88 ms; 0.2 ms gained no more.  A
# yield costs two loop passes, some 10-20 µs, so shorter slices cost little
# throughput and give back the loop sooner; the 4,000-node W1 chain's awaited
# backward took 6.8-7.0 ms at 2 ms slices and 6.8-7.1 ms at 0.5 ms.


class Budget:
    """A worker's time slice (Note [Time slices]): work yields once ``clock()``
    passes ``deadline``; ``busy`` while other jobs wait in the worker's line
    (Note [Offloading when busy])."""

    __slots__ = ("deadline", "busy")

    def __init__(self) -> None:
        self.deadline = 0.0
        self.busy = False

    def restart(self, time_slice: float) -> None:
        """A new slice of ``time_slice`` seconds from now."""
        self.deadline = clock() + time_slice

    def spent(self) -> bool:
        """Whether the slice is over."""
        return clock() >= self.deadline
