"""The CPU worker: one task per event loop that runs the nodes of every awaited backward.

Note [One worker per loop]
~~~~~~~~~~~~~~~~~~~~~~~~~~
PyTorch's engine has one worker thread per device, shared by every graph
task, plus the calling thread, which works its own graph task.  An earlier
agrad let each awaiting coroutine drive its own graph task in the same way.
In a server that makes the loop's lag grow with the number of backwards in
flight: each takes its own time slice per loop pass, so other requests (a
health check, the next request's parsing) wait N slices.  So here the CPU is a
device like the others: one worker task per event loop (asyncio, uvloop or
trio) runs the nodes of every graph task awaited on that loop, and the
awaiting coroutine only waits for its task's turn to come back to it.

The worker keeps a line of runnable graph tasks, a heap ordered by reentrant
depth (deeper first: the task that started a nested backward waits for it,
Note [Reentrant backward]) and then by when the task joined the line.  Each
graph task keeps its own ready queue of nodes (ordered by sequence number),
so the whole is PyTorch's ready queue in two levels: fair between graph tasks,
PyTorch's order within one.  The worker runs the first task in line until it
parks (its kernels run in threads: Note [Offloaded kernels]), needs its caller
(an ``async def backward``, or the commit: Note [The caller commits]), ends,
or spends the time slice; a task that spent the slice goes to the back of the
line, so a huge backward cannot starve a small one.  The slice is one
``Budget`` for the whole worker (Note [Time slices]): once it is spent the
worker gives the loop a turn, however many tasks are in line.

The worker is started when a task joins an empty line and ends when the line
is empty (tasks waiting for kernels are not in line; a finished kernel puts its
task back), so a loop holds no agrad task between backwards.  It runs in an
empty context; each graph task runs in a copy of its caller's context (its
grad mode, anomaly mode, saved-tensor hooks and engine options), as a kernel
in a thread does.
"""

from __future__ import annotations

import contextvars
import heapq
import itertools
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any, NamedTuple, Protocol, cast

import anyio.lowlevel

from agrad._engine import _device_workers, _traps
from agrad._engine._graph_task import GraphTask
from agrad._engine._loops import current_loop
from agrad._engine._options import EngineOptions
from agrad._engine._pool import InFlight, KernelPool, current_pool
from agrad._engine._requests import SLICE_SPENT, DeviceIdle, DeviceJob, RunKernel, WaitKernels
from agrad._engine._slices import Budget, clock

__all__ = ["DONE", "CpuWorker", "Job", "Steps", "Turns", "cpu_worker", "serve"]
_heappush, _heappop = heapq.heappush, heapq.heappop

# Where a graph task is, as its worker and its caller see it.
_RUNNABLE, _PARKED, _CALLER, _DONE = range(4)


class _Done:
    """What :meth:`Turns.turn` answers once the job's steps returned."""


DONE = _Done()


class Steps(Protocol):
    """A job's steps, as a generator's: ``send`` resumes it and returns its next
    request, raising StopIteration (with its result) when it ends."""

    def send(self, value: Any, /) -> Any: ...

    def throw(self, exc: BaseException, /) -> Any: ...


class Job(Protocol):
    """What the worker and the kernel pool keep of a job (a GraphTask, or a
    cooperative call): its depth in line and its kernels away (Note [Kernel slots])."""

    reentrant_depth: int
    in_flight: InFlight


class _StepsIn(NamedTuple):
    send: Callable[[Any], Any]
    throw: Callable[[BaseException], Any]


class Turns:
    """One awaited graph task, passed between the worker and its caller.

    The worker :meth:`advance`\\ s the task's steps while it is runnable; the
    caller waits for its :meth:`turn`, when the task needs something only the
    caller can do (await an ``async def backward``, commit), and :meth:`stop`\\ s
    the task if the caller is cancelled or the awaited backward raised.  Both
    run on the loop's thread, so the task's steps never run twice at once.
    """

    __slots__ = ("task", "time_slice", "_worker", "_steps", "_context", "_state", "_ticket", "_value",
                 "_request", "_failure", "_result", "_waiter")

    def __init__(self, worker: CpuWorker, task: Job, steps: Steps, context: contextvars.Context,
                 time_slice: float) -> None:
        self.task = task
        self.time_slice = time_slice
        self._worker = worker
        self._context = context
        self._steps: Steps | None = steps
        self._state = _RUNNABLE
        self._ticket = 0  # the line position it holds (stale heap entries hold another)
        self._value: Any = None  # what the task is resumed with
        self._request: Any = None  # what the caller must do
        self._failure: BaseException | None = None
        self._result: Any = None  # what the steps returned
        self._waiter = _traps.TurnWaiter()
        task.in_flight.wake = self.wake

    # -- the worker's side ----------------------------------------------------------
    def wake(self) -> None:
        """A kernel of the task finished, or a kernel slot was handed to it (on the loop's thread)."""
        if self._state is _PARKED:
            self._state = _RUNNABLE
            self._worker.push(self)

    def advance(self, exc: BaseException | None = None) -> None:
        """Run the task's steps (throwing ``exc`` in first, if given) until it
        parks, needs its caller, spends the slice or ends."""
        steps, task = self._steps, self.task
        assert steps is not None
        value, self._value = self._value, None
        while True:
            try:
                request = steps.send(value) if exc is None else steps.throw(exc)
            except StopIteration as stop:
                self._result = stop.value
                self._end(None)
                return
            except BaseException as failure:  # the task aborted: its outcome
                self._end(failure)
                return
            value = exc = None
            if request is SLICE_SPENT:
                self._worker.push(self)
                return
            try:
                if isinstance(request, RunKernel):
                    value = self._worker.pool().offload(task.in_flight, request.job, request.helpers)
                    continue
                if isinstance(request, WaitKernels):
                    if request.shielded:  # aborting: its place in line for a slot goes to others now
                        self._worker.forget(task)
                    self._state = _PARKED
                    return
                if isinstance(request, DeviceJob):  # only graph tasks have device jobs
                    _device_workers.worker_for(request.device).submit(cast(GraphTask, task), request)
                    continue
                if isinstance(request, DeviceIdle):
                    _device_workers.worker_for(request.device).wake_when_idle(cast(GraphTask, task))
                    continue
            except BaseException as error:  # no thread to be had, ...: the task aborts
                exc = error
                continue
            self._request = request  # FINISH, or the coroutine of an async def backward
            self._state = _CALLER
            self._waiter.wake()
            return

    def _end(self, failure: BaseException | None) -> None:
        self._state = _DONE
        self._failure = failure
        self._steps = None
        self._worker.forget(self.task)
        self.task.in_flight.wake = _nothing
        self._waiter.wake()

    # -- the caller's side ----------------------------------------------------------
    async def turn(self) -> Any:
        """Wait until the task needs its caller; return what for (:data:`FINISH`, an
        awaitable, or :data:`DONE` once its steps returned).  Raises the task's
        failure if it failed."""
        while self._state is not _CALLER:
            if self._state is _DONE:
                self._raise_failure()
                return DONE
            await self._waiter.wait(False)
        request, self._request = self._request, None
        return request

    def _raise_failure(self) -> None:
        if self._failure is not None:
            failure, self._failure = self._failure, None  # no cycle through its traceback
            raise failure

    def result(self) -> Any:
        """What the task's steps returned, once :meth:`turn` answered :data:`DONE`."""
        result, self._result = self._result, None
        return result

    @property
    def context(self) -> contextvars.Context:
        """The context the task runs in: a copy of its caller's."""
        return self._context

    def resume(self, value: Any) -> None:
        """Hand the task back to the worker with ``value`` (a coroutine's result)."""
        self._value = value
        self._worker.push(self)

    def finish(self) -> None:
        """Commit, in the caller's turn (Note [The caller commits]); raises what the
        commit or a post-accumulate-grad hook or final callback raised."""
        self.advance()
        self._raise_failure()

    async def stop(self, exc: BaseException) -> None:
        """The caller failed or was cancelled while the task was not done: abort it
        now and wait, shielded, for its kernels in threads (Note [Kernels of a
        stopped task]).  A job whose cleanup asks for its caller again gets
        ``exc`` there too, as a cancelled trio scope stays cancelled."""
        if self._state is not _DONE:
            self._throw(exc)
        while self._state is not _DONE:
            if self._state is _CALLER:
                self._throw(exc)
            else:
                await self._waiter.wait(True)
        self._failure = None

    def _throw(self, exc: BaseException) -> None:
        self._state = _PARKED  # whatever line position it held is stale now
        self._request = None  # closed by the job, where it handed it over
        self.advance(exc)


class CpuWorker:
    """Runs the nodes of every graph task awaited on one event loop (Note [One worker per loop])."""

    __slots__ = ("budget", "_line", "_tickets", "_running", "_spawn", "_pool")

    def __init__(self, spawn: Callable[[Callable[[], Coroutine[Any, Any, None]], str], None]) -> None:
        self.budget = Budget()
        self._line: list[tuple[int, int, Turns]] = []  # (-reentrant depth, ticket, task)
        self._tickets = itertools.count(1).__next__
        self._running = False
        self._spawn = spawn
        self._pool: KernelPool | None = None  # this loop's, looked up at the first offload

    def submit(self, task: GraphTask, options: EngineOptions) -> Turns:
        """Put ``task`` in line, to run in a copy of this context; its caller then
        waits for its turns (:func:`serve`)."""
        context = contextvars.copy_context()
        steps = task.run(options, self.budget)
        # Each step in the task's context: C-level partials, no Python frame per step.
        # (typeshed cannot type a partial of Context.run's ParamSpec: hence the ignores.)
        send: Callable[[Any], Any] = partial(context.run, steps.send)  # type: ignore[call-arg]  # see above
        throw: Callable[[BaseException], Any] = partial(context.run, steps.throw)  # type: ignore[arg-type]  # see above
        return self.submit_steps(task, _StepsIn(send, throw), context, options.time_slice)

    def submit_steps(self, job: Job, steps: Steps, context: contextvars.Context, time_slice: float) -> Turns:
        """Put a job with its own ``steps`` in line (``agrad.cooperative``'s greenlet)."""
        turns = Turns(self, job, steps, context, time_slice)
        self.push(turns)
        return turns

    def push(self, turns: Turns) -> None:
        turns._state = _RUNNABLE
        turns._ticket = ticket = self._tickets()
        _heappush(self._line, (-turns.task.reentrant_depth, ticket, turns))
        if not self._running:
            self._running = True
            self._spawn(self._run, "agrad cpu worker")

    def pool(self) -> KernelPool:
        if self._pool is None:
            self._pool = current_pool()
        return self._pool

    def forget(self, task: Job) -> None:
        """``task`` stops or ends: it gives back its place in line for a kernel slot."""
        if self._pool is not None:
            self._pool.forget(task.in_flight)

    async def _run(self) -> None:
        line, budget = self._line, self.budget
        try:
            while line:
                pass_end = 0.0
                while line:
                    _, ticket, turns = _heappop(line)
                    if turns._state is not _RUNNABLE or turns._ticket != ticket:
                        continue  # a stale place in line
                    now = clock()
                    if not pass_end:
                        pass_end = now + turns.time_slice
                    budget.deadline = min(pass_end, now + turns.time_slice)
                    budget.busy = bool(line)
                    turns.advance()
                    if clock() >= pass_end:
                        break
                if line:
                    await _traps.yield_slice()  # Note [Time slices]: one slice per loop pass
        finally:
            self._running = False


async def serve(turns: Turns, end: Any) -> None:
    """The caller's side of a job: await what it hands over (an ``async def
    backward``, an awaitable of ``agrad.cooperative``'s code) in its context until
    it hands over ``end`` (:data:`FINISH` or :data:`DONE`); if that await fails
    or the caller is cancelled, stop the job and raise."""
    try:
        while (request := await turns.turn()) is not end:
            turns.resume(await _traps.in_context(request, turns.context))
    except BaseException as exc:  # cancellation included: the job aborts
        await turns.stop(exc)
        raise


_WORKER: anyio.lowlevel.RunVar[CpuWorker] = anyio.lowlevel.RunVar("agrad_cpu_worker")


def cpu_worker() -> CpuWorker:
    """This event loop's CPU worker, created on first use."""
    worker = _WORKER.get(None)
    if worker is None:
        worker = CpuWorker(current_loop().spawn)
        _WORKER.set(worker)
    return worker


def _nothing() -> None:
    pass
