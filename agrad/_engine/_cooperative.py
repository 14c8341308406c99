"""``agrad.cooperative``: run synchronous agrad code from a coroutine, in time slices.

Note [Cooperative calls]
~~~~~~~~~~~~~~~~~~~~~~~~
A server's handler wants to run ordinary PyTorch-style code (a forward, a
loss, ``backward_sync()``, an optimizer step) without blocking its event loop
for the whole of it, and without rewriting it as async code.
``await agrad.cooperative(fn, *args)`` runs ``fn`` in a greenlet (the technique
SQLAlchemy's asyncio layer uses to run sync code under asyncio) as a job of
the loop's CPU worker (Note [One worker per loop]): it spends the same time
budget as every backward on the loop, so other coroutines wait about one slice
however many calls and backwards are in flight.  Inside ``fn``:

* every agrad op on the CPU is a place where the call may pause: when the
  worker's slice is spent, the greenlet switches back to the worker, which
  gives the loop a turn and resumes it later (``_Cooperative.forward``);
* an op whose kernel is big (by ``Note [Offload threshold]``'s measure, with the
  caller's ``engine_options``) runs in the loop's kernel pool while the loop
  goes on;
* a blocking twin (``backward_sync``, ``grad_sync``, ``autograd.backward_sync``)
  runs its graph task in the greenlet, in the same slices, its big kernels in
  the pool, and commits before ``fn`` goes on (Note [Backwards inside a
  cooperative call]).

Cancelling the caller raises the cancellation inside ``fn`` where it is paused
(the op call that ended the slice, or the wait for a kernel), after
any kernel of it in a thread has finished; ``fn`` may clean up and the
exception then reaches the caller.  ``fn`` runs in a copy of the caller's
context.  Code in ``fn`` that is not agrad ops (plain numpy, Python loops)
runs without pauses.  The greenlet runs on the loop's thread, so this works on
asyncio, uvloop and trio alike.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar, cast

import numpy as np

from agrad._ambient import runs_kernels
from agrad._engine import _device_workers, _traps
from agrad._engine._admission import admitted, mark_inside
from agrad._engine._cpu_worker import DONE, CpuWorker, cpu_worker, serve
from agrad._engine._graph_task import GraphTask
from agrad._engine._offload import goes_to_thread, offload_thresholds
from agrad._engine._options import current_options, get_num_interop_threads
from agrad._engine._pool import InFlight
from agrad._engine._requests import DRAIN, FINISH, SLICE_SPENT, WAIT, DeviceIdle, DeviceJob, RunKernel, WaitKernels
from agrad._engine._row_blocks import forward_work, row_blocks, splittable
from agrad._engine._slices import clock

__all__ = ["cooperative"]

T = TypeVar("T")


async def cooperative(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """Run ``fn(*args, **kwargs)`` without blocking the event loop (agrad only).

    ``fn`` is ordinary synchronous agrad code: a forward, a loss, a blocking
    backward (``loss.backward_sync()``, ``agrad.autograd.grad_sync``), an
    optimizer step.  It runs on the event loop's thread in time slices shared
    with every backward on the loop, pausing between agrad ops; big kernels run
    in the engine's kernel threads, and its blocking backwards run in the same
    slices and commit before ``fn`` goes on (see Note [Cooperative calls] in
    ``agrad/_engine/_cooperative.py``).  Returns what ``fn`` returns and raises
    what it raises.  Cancelling the awaiting task raises the cancellation
    inside ``fn`` at its next pause; if ``fn`` has no pause left and returns,
    the caller is still cancelled and ``fn``'s result is dropped, as with
    ``asyncio.to_thread`` (what ``fn`` did, a committed backward included,
    stays done).  Needs the ``greenlet`` package (``pip install
    'agrad[serving]'``).

    Example::

        >>> import asyncio
        >>> w = agrad.tensor([1.0, -2.0], requires_grad=True)
        >>> def step(x):
        ...     loss = (w * x).sum()
        ...     loss.backward_sync()       # awaited, on the loop's CPU worker
        ...     return loss.item()
        >>> asyncio.run(agrad.cooperative(step, agrad.tensor([3.0, 4.0])))
        -5.0
        >>> w.grad
        tensor([3., 4.])
    """
    await _traps.checkpoint()
    options = current_options()
    thresholds = offload_thresholds(options)
    async with admitted():  # Note [Admission]
        worker = cpu_worker()
        context = contextvars.copy_context()
        context.run(mark_inside)  # its backwards are part of it
        job = _Cooperative(fn, args, kwargs, context, worker, thresholds)
        turns = worker.submit_steps(job, job, context, options.time_slice)
        await serve(turns, DONE)
        return cast(T, turns.result())  # what fn returned


def _greenlet() -> Any:
    try:
        import greenlet
    except ImportError:
        raise ImportError("agrad.cooperative needs the greenlet package: pip install 'agrad[serving]'") from None
    return greenlet


class _Cooperative:
    """One cooperative call: a job of the CPU worker whose steps are a greenlet's switches."""

    __slots__ = ("reentrant_depth", "in_flight", "_glet", "_budget", "_thresholds", "_getcurrent", "_pool")

    def __init__(self, fn: Callable[..., Any], args: Sequence[Any], kwargs: dict[str, Any],
                 context: contextvars.Context, worker: CpuWorker, thresholds: tuple[int, int] | None) -> None:
        greenlet = _greenlet()
        self.reentrant_depth = 0
        self.in_flight = InFlight(0)  # kernels in threads (Note [Kernel slots]); woken by the worker
        self._budget = worker.budget
        self._pool = worker.pool  # this loop's kernel pool
        self._thresholds = thresholds
        self._getcurrent = greenlet.getcurrent
        self._glet = greenlet.greenlet(lambda _first_send: fn(*args, **kwargs))
        self._glet.gr_context = context

    # -- the worker's side: the job's steps ------------------------------------------
    def send(self, value: Any) -> Any:
        return self._switch(self._glet.switch, value)

    def throw(self, exc: BaseException) -> Any:
        return self._switch(self._glet.throw, exc)

    def _switch(self, switch: Callable[[Any], Any], arg: Any) -> Any:
        glet = self._glet
        glet.parent = self._getcurrent()  # whoever resumes it gets its next request
        with runs_kernels(self, self):
            try:
                request = switch(arg)
            except StopIteration as exc:  # fn's own: not the end of the steps
                raise RuntimeError("agrad.cooperative: fn raised StopIteration") from exc
        if glet.dead:
            raise StopIteration(request)
        return request

    # -- inside the greenlet -----------------------------------------------------------
    def _ask(self, request: Any) -> Any:
        """Hand ``request`` to the worker (or, through it, the caller); return the answer."""
        return self._glet.parent.switch(request)

    def forward(self, op: Any, arrays: list[Any], attrs: dict[str, Any]) -> Any:
        """An op's CPU kernel, run for ``fn``: after a pause if the slice is spent,
        in a kernel thread if it is big, in row blocks on idle kernel threads if
        it is a big enough product (Notes [Cooperative calls], [Products in row
        blocks])."""
        budget = self._budget
        if clock() >= budget.deadline:
            self._ask(SLICE_SPENT)
        thresholds = self._thresholds
        if thresholds is None or (work := forward_work(op, arrays)) < thresholds[1]:
            return op.forward(np, *arrays, **attrs)
        big = work >= thresholds[0]
        if not budget.busy and (rows := splittable(op, arrays)):
            idle = self._pool().idle_workers()  # a block on the loop's thread takes one of the cores too
            parts = min(rows, idle if big else min(idle + 1, get_num_interop_threads()))
            if parts > 1:
                return self._in_row_blocks(op, arrays, attrs, parts, inline=not big)
        if goes_to_thread(work, None, thresholds, budget.busy):
            return self._run([lambda: op.forward(np, *arrays, **attrs)], None)[0]
        return op.forward(np, *arrays, **attrs)

    def _in_row_blocks(self, op: Any, arrays: list[Any], attrs: dict[str, Any], parts: int, inline: bool) -> Any:
        """``op`` in ``parts`` row blocks, on idle kernel threads and, if ``inline``, this
        thread (Note [Products in row blocks])."""
        kernels = row_blocks(op, arrays, attrs, parts)
        here = kernels.pop(0) if inline else None
        try:
            blocks = self._run(kernels, here)
        except Exception:  # a block's error names its own rows: raise the whole product's
            return op.forward(np, *arrays, **attrs)
        if self._thresholds is not None and sum(b.size for b in blocks) >= self._thresholds[0]:
            # A big output's copy is a big kernel too: joining a batch-8192 layer's
            # blocks (32 MB) held the loop for about 10 ms.
            return self._run([lambda: np.concatenate(blocks, axis=0)], None)[0]
        return np.concatenate(blocks, axis=0)

    def _run(self, kernels: list[Callable[[], Any]], here: Callable[[], Any] | None) -> list[Any]:
        """Run ``kernels`` in kernel threads, and ``here`` on this thread meanwhile;
        their results in order, ``here``'s first."""
        outcome: list[tuple[bool, Any] | None] = [None] * len(kernels)

        def job(n: int, kernel: Callable[[], Any]) -> Callable[[], None]:
            def run() -> None:
                try:
                    outcome[n] = (True, kernel())
                except BaseException as exc:  # raised in the greenlet, below
                    outcome[n] = (False, exc)
            return run

        try:
            for n, kernel in enumerate(kernels):
                request = RunKernel(job(n, kernel))
                while not self._ask(request):  # in line for a kernel slot until one is handed over
                    self._ask(WAIT)
            first = here() if here is not None else None
            while self.in_flight.outstanding:
                self._ask(WAIT)
        except BaseException:  # cancelled: the kernels cannot be called back (Note [Kernels of a stopped task])
            while self.in_flight.outstanding:
                self._ask(DRAIN)
            raise
        results = [first] if here is not None else []
        for ok, result in cast(list[tuple[bool, Any]], outcome):  # every kernel ran: no None left
            if not ok:
                raise result
            results.append(result)
        return results

    # Note [Backwards inside a cooperative call]
    # ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    # A blocking twin called by ``fn`` runs its graph task right here, in the
    # greenlet, as the blocking driver would on a thread, except that its
    # requests are answered the cooperative way: a spent slice pauses the call
    # (the worker's one budget, Note [Time slices]), a big kernel goes to the
    # loop's kernel pool (this task's own slots, so it waits for its own
    # kernels: the pool wakes it through the call), an ``async def backward`` is
    # awaited by the caller (``wait_for``).  Its nodes run on the CPU worker's
    # turns, as the call's other ops do, and it commits inline, like
    # ``backward_sync()`` anywhere: ``fn`` goes on after it, so a cancellation
    # can only reach ``fn`` at a later pause, never report a committed backward
    # as cancelled (Note [After the commit]).  Handing it to the caller as an
    # awaited backward instead, as agrad first did, cost two more worker starts,
    # a turn of the caller and several loop passes: 0.2 ms of a batch-1 saliency
    # request's 1 ms.  A task nested deep enough to spill (Note [Reentrant
    # depth]) still goes to the caller, which runs it in a fresh task.
    def run_backward(self, task: GraphTask) -> None:
        """Run ``task`` (a blocking backward of ``fn``) in this greenlet (Note
        [Backwards inside a cooperative call])."""
        pool = self._pool()
        task.in_flight.wake = self.in_flight.wake  # its kernels and slots wake the call
        steps = task.run(current_options(), self._budget)
        value: Any = None
        exc: BaseException | None = None
        while True:
            try:
                request = steps.send(value) if exc is None else steps.throw(exc)
            except StopIteration:
                return
            value = exc = None
            try:
                if request is SLICE_SPENT:
                    self._ask(SLICE_SPENT)
                elif isinstance(request, RunKernel):
                    value = pool.offload(task.in_flight, request.job, request.helpers)
                elif isinstance(request, WaitKernels):
                    if request.shielded:  # aborting: its place in line for a slot goes to others now
                        pool.forget(task.in_flight)
                    self._ask(request)
                elif isinstance(request, DeviceJob):
                    _device_workers.run_inline(request)
                elif isinstance(request, DeviceIdle):
                    _device_workers.synchronize(request.device)
                elif request is not FINISH:  # the coroutine of an async def backward
                    value = self.wait_for(cast(Awaitable[Any], request))
            except BaseException as error:  # cancelled while paused, ...: the task aborts
                exc = error

    def wait_for(self, aw: Awaitable[T]) -> T:
        """Have the caller await ``aw`` (in ``fn``'s context) and return its result."""
        try:
            return cast(T, self._ask(aw))  # the caller sends back what aw returned
        finally:
            close = getattr(aw, "close", None)
            if close is not None:
                close()

