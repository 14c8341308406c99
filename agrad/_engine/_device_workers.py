"""Device workers: one asyncio task per device (other than the CPU) and event loop.

See Note [Device workers] in ``_graph_task.py`` for where jobs come from, and
Note [Engine streams] in ``agrad/_backends/_cupy.py`` for how their kernels
are ordered.  A worker is started when a job arrives at an idle device and
ends when its queue is empty, so a loop holds no task for a device it is not
using, and a closing loop has nothing of agrad's to cancel.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from agrad import _backends
from agrad._engine import _traps
from agrad._engine._options import current_options
from agrad._engine._pool import live_loop, loop_post
from agrad._engine._ready_queue import ReadyQueue

if TYPE_CHECKING:
    from agrad._device import device
    from agrad._engine._graph_task import DeviceJob, GraphTask

__all__ = ["DeviceWorker", "worker_for", "run_inline", "spawner", "synchronize"]

_clock = time.perf_counter


class DeviceWorker:
    """Runs the jobs of every graph task on one event loop for one device.

    Its :class:`ReadyQueue` is PyTorch's device ready queue, shared by all
    graph tasks: deeper reentrant tasks first, then higher ``sequence_nr``
    (of the job's first node), then first come first served.
    """

    __slots__ = ("device", "_backend", "_queue", "_running", "_spawn", "_post")

    def __init__(self, dev: "device", spawn: Callable[[Callable[[], Awaitable[None]], str], None],
                 post: Callable[[Callable[[], None]], None]) -> None:
        self.device = dev
        self._backend = _backends.backend(dev.type)
        self._queue = ReadyQueue()  # NodeTasks: (node, (graph task, job))
        self._running = False
        self._spawn = spawn
        self._post = post

    def submit(self, task: "GraphTask", job: "DeviceJob") -> None:
        """Queue ``job`` of ``task``; the task is woken when it has run."""
        task._outstanding += 1
        self._queue.push(job.node, (task, job), job.depth)  # type: ignore[arg-type]
        if not self._running:
            self._running = True
            self._spawn(self._run, f"agrad {self.device} worker")

    def wake_when_idle(self, task: "GraphTask") -> None:
        """Wake ``task`` once every kernel queued so far on this device has finished."""
        task._outstanding += 1

        def done() -> None:
            task._outstanding -= 1
            task._wake()

        post = self._post
        self._backend.when_idle(self.device.index, lambda: post(done))  # type: ignore[arg-type]

    async def _run(self) -> None:
        queue = self._queue
        # The worker serves every graph task, so it runs in an empty context with
        # the default options: a caller's engine_options() do not reach it.
        time_slice = current_options().time_slice
        deadline = _clock() + time_slice
        try:
            while (entry := queue.pop()) is not None:
                task, job = entry[2]
                try:
                    if not task._stopped:  # an aborted task's jobs are dropped
                        await self._execute(task, job)
                finally:
                    task._outstanding -= 1
                    task._wake()
                if _clock() >= deadline:  # Note [Time slices], for all tasks on this device
                    await _traps.yield_slice()
                    deadline = _clock() + time_slice
        finally:
            self._running = False

    async def _execute(self, task: "GraphTask", job: "DeviceJob") -> None:
        dev = self.device
        try:
            if job.first:
                with _backends.on(dev, engine=True):
                    self._backend.join_caller(dev.index)  # type: ignore[arg-type]
            if job.leaves:
                await self._idle()
        except Exception as exc:  # the task raises it
            task._inbox.append(([], (job.node, exc), dev))
            return
        except BaseException:  # the worker is cancelled: the task must not wait for this job's results
            task._inbox.append(([], (job.node, RuntimeError(
                f"the {dev} worker was stopped before running {job.node.name()}")), dev))
            raise
        with _backends.on(dev, engine=True):
            job.job()  # never raises: it hands exceptions to its task

    async def _idle(self) -> None:
        event = anyio.Event()
        post = self._post
        self._backend.when_idle(self.device.index, lambda: post(event.set))  # type: ignore[arg-type]
        with anyio.CancelScope(shield=True):  # a kernel cannot be called back
            await event.wait()


_WORKERS: anyio.lowlevel.RunVar[dict[Any, DeviceWorker]] = anyio.lowlevel.RunVar("agrad_device_workers")


def worker_for(dev: "device") -> DeviceWorker:
    """This event loop's worker for ``dev``, created on first use."""
    workers = _WORKERS.get(None)
    if workers is None:
        workers = {}
        _WORKERS.set(workers)
    worker = workers.get(dev)
    if worker is None:
        worker = workers[dev] = DeviceWorker(dev, spawner(), loop_post())
    return worker


def spawner() -> Callable[[Callable[[], Awaitable[None]], str], None]:
    """A function that starts a worker task on this event loop."""
    # Workers start in an empty context: whatever context they are started
    # from names the graph task that asked (current_graph_task), and a worker
    # serves every task.  Jobs carry their own task's context.
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        trio = sys.modules["trio"]
        return lambda fn, name: trio.lowlevel.spawn_system_task(fn, name=name, context=contextvars.Context())
    running: set[asyncio.Task[None]] = set()  # the loop keeps only weak references to tasks
    ref = weakref.ref(loop)  # Note [Holding a loop weakly]

    def spawn(fn: Callable[[], Awaitable[None]], name: str) -> None:
        t = live_loop(ref).create_task(fn(), name=name, context=contextvars.Context())  # type: ignore[arg-type]
        running.add(t)
        t.add_done_callback(running.discard)

    return spawn


def run_inline(job: "DeviceJob") -> None:
    """The blocking twin's way to run a device job: here, now."""
    dev = job.device
    with _backends.on(dev, engine=True):
        if job.first:
            _backends.backend(dev.type).join_caller(dev.index)
        job.job()


def synchronize(dev: "device") -> None:
    """Block until every kernel queued on ``dev``'s engine stream has finished."""
    _backends.backend(dev.type).synchronize(dev.index)  # type: ignore[arg-type]
