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
runs on the loop's thread.  A kernel's thread only computes, appends its
result to its graph task's inbox (a ``deque``, safe from any thread) and asks
the loop to call :meth:`KernelPool._done`, which frees the slot and wakes the
graph task.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import sys
import threading
import weakref
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio.lowlevel

from agrad._engine._options import get_num_interop_threads
from agrad._engine._row_blocks import RowBlocks

if TYPE_CHECKING:
    from agrad._engine._graph_task import GraphTask

__all__ = ["KernelPool", "current_pool", "live_loop", "loop_post"]


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
    handed to the first task in line (``task._slot_granted``), which is woken,
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
        self._waiting: deque[GraphTask] = deque()
        # The one structure shared with the workers' threads, under _lock:
        # kernels queued, and how many workers are active.
        self._queue: deque[tuple[Callable[[], None], GraphTask, RowBlocks | None]] = deque()
        self._lock = threading.Lock()
        self._workers = 0
        self._busy = 0  # workers running a kernel (the others are about to look at the queue)
        self._helpers = 0  # threads reserved for jobs' row blocks (loop's thread only)
        self._start_worker = start_worker  # run a function in a borrowed thread
        self._post = post  # call a function on the loop's thread, from any thread

    def offload(self, task: "GraphTask", job: Callable[[], None], helpers: int = 0) -> bool:
        """Queue ``job`` (a kernel of ``task``) if a slot is free for it now, with up
        to ``helpers`` more slots, those idle now, reserved for its products' row
        blocks (Note [Products in row blocks]); they are freed with its own.

        Returns False if every slot is taken: ``task`` is then in line, and is
        woken when a slot is handed to it.
        """
        if task._slot_granted:
            task._slot_granted = False
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
        task._outstanding += 1
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
                task._outstanding -= 1
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

    def _done(self, task: "GraphTask", slots: int) -> None:
        task._outstanding -= 1
        self._helpers -= slots - 1
        self._release(slots)
        task._wake()

    def _release(self, slots: int = 1) -> None:
        self.running -= slots
        limit = 2 * get_num_interop_threads()
        waiting = self._waiting
        while waiting and self.running < limit:
            nxt = max(waiting, key=_depth)  # the first in line of the deepest
            waiting.remove(nxt)
            nxt._in_line = False
            nxt._slot_granted = True
            self.running += 1
            nxt._wake()

    def idle_workers(self) -> int:
        """How many more kernels would start running at once now: each offload of
        up to this many in a row is accepted (Note [Products in row blocks])."""
        return 0 if self._waiting else max(0, get_num_interop_threads() - self.running)

    def forget(self, task: "GraphTask") -> None:
        """``task`` stops: take it out of line and give back a slot it was handed."""
        if task._in_line:
            task._in_line = False
            self._waiting.remove(task)
        if task._slot_granted:
            task._slot_granted = False
            self._release()


def _depth(task: "GraphTask") -> int:
    return task.reentrant_depth


_POOL: anyio.lowlevel.RunVar[KernelPool] = anyio.lowlevel.RunVar("agrad_kernel_pool")


def current_pool() -> KernelPool:
    """This event loop's pool, created on first use."""
    pool = _POOL.get(None)
    if pool is None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            pool = _trio_pool()
        else:
            pool = _asyncio_pool(loop)
        _POOL.set(pool)
    return pool


# Note [Holding a loop weakly]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# anyio's RunVar keeps its value for an asyncio loop in a WeakKeyDictionary
# keyed by the loop, so a value that refers to its loop keeps the loop alive
# for good: every loop that ever offloaded a kernel leaked, with its pool (the
# reliability suite's leak check, and 20 of 20 ``asyncio.run`` loops alive
# after a collection).  So what the pool and the device workers keep of their
# loop (the functions that start a worker, post to the loop or spawn a task)
# holds it through a weak reference.  They are called only while the loop is
# alive: on its thread, or by a kernel the loop's backward waits for.
def _asyncio_pool(loop: asyncio.AbstractEventLoop) -> KernelPool:
    ref = weakref.ref(loop)  # Note [Holding a loop weakly]

    def start_worker(worker: Callable[[], None]) -> None:
        # The loop's default executor: closed with the loop (module docstring).
        # Started in an empty context: the asyncio future run_in_executor
        # returns keeps the context it was created in until the loop hears
        # that the worker ended, and the caller's context names its graph task
        # (current_graph_task), which would stay reachable after the backward.
        contextvars.Context().run(live_loop(ref).run_in_executor, None, worker)

    return KernelPool(start_worker, _asyncio_post(loop))


def _trio_pool() -> KernelPool:
    trio = sys.modules["trio"]

    def start_worker(worker: Callable[[], None]) -> None:
        trio.lowlevel.start_thread_soon(worker, _ignore, name="agrad kernel worker")

    return KernelPool(start_worker, _trio_post())


def loop_post() -> Callable[[Callable[[], None]], None]:
    """A function that calls a function on this event loop's thread, from any thread."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return _trio_post()
    return _asyncio_post(loop)


def _asyncio_post(loop: asyncio.AbstractEventLoop) -> Callable[[Callable[[], None]], None]:
    ref = weakref.ref(loop)  # Note [Holding a loop weakly]

    def post(fn: Callable[[], None]) -> None:
        # As for trio below: only a loop closed around a running backward refuses.
        with contextlib.suppress(RuntimeError):
            live_loop(ref).call_soon_threadsafe(fn)

    return post


def live_loop(ref: weakref.ref[asyncio.AbstractEventLoop]) -> asyncio.AbstractEventLoop:
    """The loop behind ``ref``; a loop already collected is a closed one."""
    loop = ref()
    if loop is None:
        raise RuntimeError("Event loop is closed")
    return loop


def _trio_post() -> Callable[[Callable[[], None]], None]:
    trio = sys.modules["trio"]
    token = trio.lowlevel.current_trio_token()

    def post(fn: Callable[[], None]) -> None:
        # Kernels outlive no backward (Note [Kernels of a stopped task]), so the
        # run is still there; if it was torn down regardless, nobody is left to tell.
        with contextlib.suppress(trio.RunFinishedError):
            token.run_sync_soon(fn)

    return post


def _ignore(_: Any) -> None:
    pass
