"""The driver protocol: what a running job asks of whoever drives it.

A graph task's :meth:`~agrad._engine._graph_task.GraphTask.run` and a
cooperative call's greenlet are plain synchronous code that *yield* a request
whenever they need something they cannot do themselves: a turn of the event
loop, a kernel thread, a device's worker, their caller.  The drivers (the CPU
worker and the awaiting caller, the blocking twin, a cooperative call running
a blocking backward) answer the same requests in their own way, so the
backward's logic exists once (as in trio's ``_core/_traps.py``, requests are
values; the drivers are the interpreters).

Each request says what its driver answers with.  Requests without fields are
singletons, compared by identity on the hot path.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeAlias

if TYPE_CHECKING:
    from agrad._device import device
    from agrad._graph._node import Node

__all__ = ["DRAIN", "FINISH", "SLICE_SPENT", "WAIT", "DeviceIdle", "DeviceJob", "Finish", "Request", "RunKernel",
           "SliceSpent", "WaitKernels"]


@dataclass(frozen=True, slots=True)
class SliceSpent:
    """Let the event loop run: the time slice is spent (Note [Time slices]).  Answer: None."""


@dataclass(frozen=True, slots=True)
class WaitKernels:
    """Wait until woken: a kernel of this job finished, or a kernel slot was
    handed to it (Note [Kernel slots]).  Answer: None.

    ``shielded`` while an aborting job waits for its last kernels (Note
    [Kernels of a stopped task]): a cancellation must not cut that short.
    """

    shielded: bool


@dataclass(frozen=True, slots=True)
class RunKernel:
    """Run ``job`` in a kernel thread if a slot is free, with up to ``helpers``
    idle slots for its products' row blocks (Note [Products in row blocks]).
    Answer: True if it started, False if the job is now in line for a slot."""

    job: Callable[[], None]
    helpers: int = 0


@dataclass(frozen=True, slots=True)
class DeviceJob:
    """Run ``job`` (``node``'s kernel and its chain) on ``device``'s worker (Note
    [Device workers]).  ``first``: the task's first job there, so the device's
    engine stream must first wait for the caller's work; ``leaves``: its
    gradients leave the device, so the worker waits for the device to be idle
    before running it (Note [Engine streams]).  Answer: None; the job's
    results reach the task through its inbox."""

    device: device
    job: Callable[[], None]
    node: Node
    depth: int
    first: bool
    leaves: bool


@dataclass(frozen=True, slots=True)
class DeviceIdle:
    """Wake the task once every kernel queued so far on ``device`` has finished.  Answer: None."""

    device: device


@dataclass(frozen=True, slots=True)
class Finish:
    """The graph has run: commit in the caller's own turn (Note [The caller
    commits]).  Answer: None."""


SLICE_SPENT: Final = SliceSpent()
FINISH: Final = Finish()
WAIT: Final = WaitKernels(shielded=False)
DRAIN: Final = WaitKernels(shielded=True)

# Besides these, a job hands its caller an ``async def backward``'s coroutine
# (or what a cooperative call's code awaits), and is resumed with its result.
Request: TypeAlias = SliceSpent | WaitKernels | RunKernel | DeviceJob | DeviceIdle | Finish | Awaitable[Any]
