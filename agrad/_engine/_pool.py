"""KernelPool: the per-event-loop part of the engine, which runs node kernels in threads.

One pool per event loop, created by the first backward on that loop that
offloads a kernel (an ``anyio`` RunVar holds it, so it lives and dies with its
loop).  It owns no threads: its workers borrow them, on asyncio and uvloop
from the loop's default executor (which the loop shuts down when it closes;
``asyncio.run`` joins its threads), under trio from trio's thread cache (the
threads behind ``trio.to_thread``).  A worker runs queued kernels back to back
and gives its thread back as soon as the queue is empty, so between backwards
the pool holds no thread at all.

Bookkeeping is single-threaded: apart from the queue (below), everything here
runs on the loop's thread.  A kernel's thread only computes, delivers its
result to its graph task's inbox (a ``deque``, safe from any thread) and asks
the loop to call :meth:`KernelPool._done`, which frees the slot and wakes the
graph task.  The threads and the loop are the event loop adapter's
(``_loops``).
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Callable
from functools import partial

import anyio.lowlevel

from agrad._engine._loops import current_loop
from agrad._engine._options import get_num_interop_threads
from agrad._engine._row_blocks import RowBlocks

__all__ = ["InFlight", "KernelPool", "current_pool"]


class InFlight:
    """A job's kernels away from its driver (in threads, or queued on a device
    worker), and its place in line for a kernel slot (Note [Kernel slots]).

    A job (a graph task, a cooperative call) waits while ``outstanding`` is not
    zero; whoever runs one of its kernels calls :meth:`started` when it takes
    it and :meth:`finished`, on the loop's thread, when it is done, which
    wakes the job through ``wake`` (set by the job's driver).  The kernel pool
    alone changes the slot fields, through its own methods.
    """

    __slots__ = ("depth", "outstanding", "wake", "_granted", "_in_line")

    def __init__(self, depth: int) -> None:
        self.depth = depth  # the job's reentrant depth: deeper jobs get slots first
        self.outstanding = 0  # kernels started whose end the loop has not yet heard of
        self.wake: Callable[[], None] = _nothing
        self._granted = False  # a slot was handed to it while it waited
        self._in_line = False

    def started(self) -> None:
        """One more of the job's kernels is away."""
        self.outstanding += 1

    def finished(self) -> None:
        """One of the job's kernels is done (on the loop's thread): wake the job."""
        self.outstanding -= 1
        self.wake()


def _nothing() -> None:
    pass


class KernelPool:
    """Runs node kernels in threads for one event loop.

    Note [Kernel slots]
    ~~~~~~~~~~~~~~~~~~~
    At most ``n = get_num_interop_threads()`` workers run kernels, and at most
    ``2 * n`` kernels are in flight (running or queued): each worker finds its
    next kernel waiting when it finishes one, so it never idles while the loop,
    which competes with the workers for the CPUs, gets round to routing the
    result and queueing more.  A slot is taken when a kernel is queued and
    freed when the loop hears that it finished.  A graph task that asks while
    no slot is free joins ``_waiting`` (once) and waits; each freed slot is
    handed to the first task in line (``InFlight._granted``), which is woken,
    so slots go first come first served and a huge backward cannot take every
    slot from a small one that asked earlier.  Deeper reentrant tasks go
    first, as in PyTorch's ready queues: the task that started one waits for
    it to finish (Note [Reentrant backward]).  A task that stops (error or
    cancellation) while in line, or before using a handed slot, gives it back
    (:meth:`forget`).
    """

    __slots__ = ("running", "_waiting", "_queue", "_lock", "_workers", "_busy", "_helpers", "_start_worker", "_post")

    def __init__(self, start_worker: Callable[[Callable[[], None]], None],
                 post: Callable[[Callable[[], None]], None]) -> None:
        self.running = 0  # kernels in flight: queued or running
        self._waiting: deque[InFlight] = deque()
        # The one structure shared with the workers' threads, under _lock:
        # kernels queued, and how many workers are active.
        self._queue: deque[tuple[Callable[[], None], InFlight, RowBlocks | None]] = deque()
        self._lock = threading.Lock()
        self._workers = 0
        self._busy = 0  # workers running a kernel (the others are about to look at the queue)
        self._helpers = 0  # threads reserved for jobs' row blocks (loop's thread only)
        self._start_worker = start_worker  # run a function in a borrowed thread
        self._post = post  # call a function on the loop's thread, from any thread

    def offload(self, task: InFlight, job: Callable[[], None], helpers: int = 0) -> bool:
        """Queue ``job`` (a kernel of the job ``task`` counts) if a slot is free for it now, with up
        to ``helpers`` more slots, those idle now, reserved for its products' row
        blocks (Note [Products in row blocks]); they are freed with its own.

        Returns False if every slot is taken: ``task`` is then in line, and is
        woken when a slot is handed to it.
        """
        if task._granted:
            task._granted = False
        elif self.running < 2 * get_num_interop_threads() and not self._waiting:
            self.running += 1
        else:
            if not task._in_line:
                task._in_line = True
                self._waiting.append(task)
            return False
        blocks = None  # Note [Products in row blocks]: the idle slots but the job's own, as helpers
        if helpers and not self._waiting and (helpers := min(helpers, get_num_interop_threads() - self.running)) > 0:
            self.running += helpers
            self._helpers += helpers
            blocks = RowBlocks(helpers)
        task.started()
        with self._lock:
            self._queue.append((job, task, blocks))
            # Note [Starting workers]
            # ~~~~~~~~~~~~~~~~~~~~~~~
            # A new worker only if the idle ones (finished with a kernel, about to
            # look at the queue) cannot take every queued kernel.  Starting one
            # whenever fewer than n ran borrowed a second executor thread for a
            # kernel the idle worker then took: an extra thread wake-up and an
            # extra completion for the loop per kernel.  Measured (1 ms ticker
            # during a ~1 s matmul-heavy backward, 2 cores, A/B in one session):
            # p99 lateness 7.0-7.6 ms before, 3.8-3.9 ms after, and the backward
            # 1.6-1.9 s before, 1.1-1.2 s after.
            # Helpers count as workers here: a job's helpers and a second worker
            # beside it would run more threads than there are cores.
            start = (self._workers - self._busy < len(self._queue)
                     and self._workers + self._helpers < get_num_interop_threads())
            if start:
                self._workers += 1
        if start:
            try:
                self._start_worker(self._work)
            except BaseException:  # no thread to be had (the loop is shutting down)
                with self._lock:
                    self._workers -= 1
                    self._queue.remove((job, task, blocks))
                task.outstanding -= 1  # never started: nobody is woken
                helpers = blocks.helpers if blocks is not None else 0
                self._helpers -= helpers
                self._release(1 + helpers)
                raise
        if blocks is not None:
            for _ in range(blocks.helpers):
                with contextlib.suppress(RuntimeError):  # none to be had: the job runs its blocks itself
                    self._start_worker(blocks.help)
        return True

    def _work(self) -> None:
        """A worker, in a borrowed thread: run queued kernels until none is left."""
        queue, lock, post = self._queue, self._lock, self._post
        while True:
            with lock:
                if not queue:
                    self._workers -= 1
                    return
                job, task, blocks = queue.popleft()
                self._busy += 1
            # Never raises: the job hands exceptions to its task.
            if blocks is None:
                job()
                slots = 1
            else:
                blocks.run(job)
                slots = 1 + blocks.helpers
            # Let go of the job (its nodes and gradients) before the loop hears
            # that it ended: once a stopped task's backward returns, its graph must
            # be garbage (Note [Kernels of a stopped task]), not held by this
            # thread's frame until its next turn.
            del job
            with lock:
                self._busy -= 1
            post(partial(self._done, task, slots))

    def _done(self, task: InFlight, slots: int) -> None:
        self._helpers -= slots - 1
        self._release(slots)
        task.finished()

    def _release(self, slots: int = 1) -> None:
        self.running -= slots
        limit = 2 * get_num_interop_threads()
        waiting = self._waiting
        while waiting and self.running < limit:
            nxt = max(waiting, key=_depth)  # the first in line of the deepest
            waiting.remove(nxt)
            nxt._in_line = False
            nxt._granted = True
            self.running += 1
            nxt.wake()

    def idle_workers(self) -> int:
        """How many more kernels would start running at once now: each offload of
        up to this many in a row is accepted (Note [Products in row blocks])."""
        return 0 if self._waiting else max(0, get_num_interop_threads() - self.running)

    def forget(self, task: InFlight) -> None:
        """``task`` stops: take it out of line and give back a slot it was handed."""
        if task._in_line:
            task._in_line = False
            self._waiting.remove(task)
        if task._granted:
            task._granted = False
            self._release()


def _depth(task: InFlight) -> int:
    return task.depth


_POOL: anyio.lowlevel.RunVar[KernelPool] = anyio.lowlevel.RunVar("agrad_kernel_pool")


def current_pool() -> KernelPool:
    """This event loop's pool, created on first use."""
    pool = _POOL.get(None)
    if pool is None:
        loop = current_loop()
        pool = KernelPool(loop.start_thread, loop.post)
        _POOL.set(pool)
    return pool
