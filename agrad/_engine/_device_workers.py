"""Device workers: one asyncio task per device (other than the CPU) and event loop.

Note [Engine streams] in ``agrad/_backends/_cupy.py`` says how their kernels
are ordered.  A worker is started when a job arrives at an idle device and
ends when its queue is empty, so a loop holds no task for a device it is not
using, and a closing loop has nothing of agrad's to cancel.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import anyio.lowlevel

from agrad import _backends
from agrad._device import index_of
from agrad._engine import _traps
from agrad._engine._loops import current_loop
from agrad._engine._options import current_options
from agrad._engine._ready_queue import ReadyQueue
from agrad._engine._requests import DeviceJob
from agrad._engine._slices import Budget

if TYPE_CHECKING:
    from agrad._device import device
    from agrad._engine._graph_task import GraphTask

__all__ = ["DeviceWorker", "worker_for", "run_inline", "synchronize"]

# Note [Device workers]
# ~~~~~~~~~~~~~~~~~~~~~
# As in PyTorch, a NodeTask runs on the device of its InputBuffer: the
# first device other than the CPU among its inputs' (``node_device``;
# the engine moves every gradient to its input's device when it routes
# it, so the buffer's device is known from the node's metadata).  CPU
# nodes run where the graph task runs: on the loop's CPU worker (Note [One
# worker per loop]) or in the thread of a blocking twin, as PyTorch's
# caller thread drives its CPU queue.  A node on another
# device becomes a job (its kernel and the straight chain below it on the
# same device, Note [Offloaded chains]) for that device's worker: one
# asyncio task per device and event loop, shared by every graph task on
# the loop, whose ready queue orders jobs as PyTorch's device queues do
# (deeper reentrant tasks first, then higher sequence numbers).  The
# worker runs the job on the loop's thread with the device's engine
# stream current, so on CUDA it only *launches* kernels, and hands the
# results back through the inbox like a kernel thread does; the graph
# task does all bookkeeping.  Jobs run in a copy of the task's context.
# The blocking twin runs device jobs inline.  ``async def`` backwards are
# awaited by the graph task's driver on every device, since only a
# coroutine can await them.
# A task looks at devices only once a gradient for another device than the
# CPU was routed (``GraphTask._devices`` stops being None): a CPU graph pays nothing
# per node for devices it does not use.




class DeviceWorker:
    """Runs the jobs of every graph task on one event loop for one device.

    Its :class:`ReadyQueue` is PyTorch's device ready queue, shared by all
    graph tasks: deeper reentrant tasks first, then higher ``sequence_nr``
    (of the job's first node), then first come first served.
    """

    __slots__ = ("device", "_backend", "_queue", "_running", "_spawn", "_post")

    def __init__(self, dev: "device", spawn: Callable[[Callable[[], Coroutine[Any, Any, None]], str], None],
                 post: Callable[[Callable[[], None]], None]) -> None:
        self.device = dev
        self._backend = _backends.backend(dev.type)
        self._queue = ReadyQueue()  # NodeTasks: (node, (graph task, job))
        self._running = False
        self._spawn = spawn
        self._post = post

    def submit(self, task: GraphTask, job: DeviceJob) -> None:
        """Queue ``job`` of ``task``; the task is woken when it has run."""
        task.in_flight.started()
        self._queue.push(job.node, (task, job), job.depth)  # type: ignore[arg-type]  # a job, not a buffer
        if not self._running:
            self._running = True
            self._spawn(self._run, f"agrad {self.device} worker")

    def wake_when_idle(self, task: GraphTask) -> None:
        """Wake ``task`` once every kernel queued so far on this device has finished."""
        in_flight = task.in_flight
        in_flight.started()
        post = self._post
        self._backend.when_idle(index_of(self.device), lambda: post(in_flight.finished))

    async def _run(self) -> None:
        queue = self._queue
        # The worker serves every graph task, so it runs in an empty context with
        # the default options: a caller's engine_options() do not reach it.
        time_slice = current_options().time_slice
        budget = Budget()  # Note [Time slices], for all tasks on this device
        budget.restart(time_slice)
        try:
            while (entry := queue.pop()) is not None:
                task, job = entry[2]
                try:
                    if not task.stopped:  # an aborted task's jobs are dropped
                        await self._execute(task, job)
                finally:
                    task.in_flight.finished()
                if budget.spent():
                    await _traps.yield_slice()
                    budget.restart(time_slice)
        finally:
            self._running = False

    async def _execute(self, task: GraphTask, job: DeviceJob) -> None:
        dev = self.device
        try:
            if job.first:
                with _backends.on(dev, engine=True):
                    self._backend.join_caller(index_of(dev))
            if job.leaves:
                await self._idle()
        except Exception as exc:  # the task raises it
            task.deliver(([], (job.node, exc), dev))
            return
        except BaseException:  # the worker is cancelled: the task must not wait for this job's results
            task.deliver(([], (job.node, RuntimeError(
                f"the {dev} worker was stopped before running {job.node.name()}")), dev))
            raise
        with _backends.on(dev, engine=True):
            job.job()  # never raises: it hands exceptions to its task

    async def _idle(self) -> None:
        post = self._post
        await _traps.wait_shielded(lambda done: self._backend.when_idle(index_of(self.device), lambda: post(done)))


_WORKERS: anyio.lowlevel.RunVar[dict[Any, DeviceWorker]] = anyio.lowlevel.RunVar("agrad_device_workers")


def worker_for(dev: "device") -> DeviceWorker:
    """This event loop's worker for ``dev``, created on first use."""
    workers = _WORKERS.get(None)
    if workers is None:
        workers = {}
        _WORKERS.set(workers)
    worker = workers.get(dev)
    if worker is None:
        loop = current_loop()
        worker = workers[dev] = DeviceWorker(dev, loop.spawn, loop.post)
    return worker


def run_inline(job: DeviceJob) -> None:
    """The blocking twin's way to run a device job: here, now."""
    dev = job.device
    with _backends.on(dev, engine=True):
        if job.first:
            _backends.backend(dev.type).join_caller(index_of(dev))
        job.job()


def synchronize(dev: "device") -> None:
    """Block until every kernel queued on ``dev``'s engine stream has finished."""
    _backends.backend(dev.type).synchronize(index_of(dev))
