"""Drivers: run a GraphTask awaited, or blocking.

The GraphTask's generator (:meth:`GraphTask.run`) holds the whole backward,
its commit and its abort.  A driver only answers its requests.  Awaited, the
task joins this loop's CPU worker (``_cpu_worker.py``), which runs its nodes
between those of every other backward on the loop, and the awaiting coroutine
does what only it can: await an ``async def backward`` and commit (Note [The
caller commits]); if it is cancelled meanwhile, it aborts the task.  Blocking,
the calling thread runs every node and kernel inline and runs coroutines to
completion itself.  Whatever goes wrong while a driver waits is thrown into
the generator, which aborts the task.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
import threading
from collections.abc import Awaitable, Callable, Generator
from typing import Any, cast

from agrad._ambient import cooperative_call, current_graph_task
from agrad._engine import _device_workers, _traps
from agrad._engine._cpu_worker import cpu_worker, serve
from agrad._engine._graph_task import GraphTask
from agrad._engine._interrupts import cancel_on_interrupt, deferred_interrupts
from agrad._engine._loops import running_here
from agrad._engine._options import current_options
from agrad._engine._requests import FINISH, DeviceIdle, DeviceJob, Request
from agrad._misuse import warn_blocking

# Note [Reentrant backward]
# ~~~~~~~~~~~~~~~~~~~~~~~~~
# A backward started while a node of another backward runs (a custom
# Function's backward that recomputes and differentiates, as reentrant
# checkpointing does) is *reentrant*: its GraphTask's ``parent`` is the task
# whose node is running (``current_graph_task``), and it is one
# ``reentrant_depth`` deeper.  In PyTorch the worker thread that runs the
# node drives the nested task on its own stack and prefers deeper tasks in
# the ready queues.  Here the parent's node *awaits* the nested backward (or
# calls its blocking twin, which drives it inline): the parent's worker is
# suspended in that node until the nested task is done, so the nested task's
# nodes run first as a matter of course; where tasks compete for kernel
# slots, deeper ones are served first (Note [Kernel slots]).  A reentrant
# backward's errors, cancellation and commits belong to its parent: they
# unwind through the node that started it, and its parent's failure undoes
# its commits (Note [Commits of reentrant backwards]).

# Note [The caller commits]
# ~~~~~~~~~~~~~~~~~~~~~~~~~
# Nodes run on the CPU worker, but the commit runs in the awaiting caller's own
# turn: once every node has run the task yields ``FINISH``, the worker hands
# the task to its caller, and the caller resumes it, which commits and runs the
# post-accumulate-grad hooks and final callbacks with no await after them
# (Note [After the commit]).  Had the worker committed, a cancellation of the
# caller arriving before it woke would be reported for a backward whose
# gradients were already in ``.grad``; now a caller cancelled while it waits
# for its turn aborts the task, uncommitted.


def _advance(steps: Generator[Request, Any, None], value: Any = None,
             exc: BaseException | None = None) -> Request | None:
    """Resume the task's generator; return its next request, or None when it is done."""
    try:
        return steps.send(value) if exc is None else steps.throw(exc)
    except StopIteration:
        return None


# Note [Reentrant depth]
# ~~~~~~~~~~~~~~~~~~~~~~
# A reentrant backward (Note [Reentrant backward]) runs on its parent's stack:
# the async driver awaits it inside the parent's node, the blocking driver
# calls it there.  Each level costs a few Python frames (and every resumption
# of an awaited one walks the whole chain of awaiting coroutines), so deep
# nesting would hit Python's recursion limit.  As PyTorch's engine hands a
# graph task nested ``max_recursion_depth`` deep to a fresh thread of its
# pool, a task whose ``stack_depth`` (graph tasks below it on this stack)
# reaches ``EngineOptions.max_recursion_depth`` *spills*: the async driver runs
# it in a new task of the same event loop (a fresh coroutine stack; the
# parent awaits its outcome, and cancelling the parent cancels it), the
# blocking driver in a new thread (a fresh C and Python stack; the parent's
# thread blocks on it).  Its ``stack_depth`` starts again from 0, so nesting is
# bounded by memory, not by the recursion limit; ``reentrant_depth`` keeps
# counting.  Both wait only on the spilled task itself, which never waits on
# its parent, so spilling cannot deadlock.
def _spills(task: GraphTask) -> bool:
    """Whether ``task`` must run on a fresh stack (Note [Reentrant depth]); if so
    it now counts as the first task on that stack."""
    if task.stack_depth < current_options().max_recursion_depth:
        return False
    task.stack_depth = 0
    return True


async def execute(task: GraphTask) -> None:
    """Run ``task`` on this loop's CPU worker and wait for it; await its ``async
    def backward`` nodes and commit here (in a fresh task if it nests too deep).

    A checkpoint (cancellation and schedule point) before the backward starts,
    and no await after its commit (Note [After the commit]).
    """
    await _traps.checkpoint()
    try:
        if _spills(task):
            await _traps.in_fresh_task(_execute, task)
        else:
            await _execute(task)
    except BaseException as exc:
        task.note_if_committed(exc)
        raise


async def _execute(task: GraphTask) -> None:
    turns = cpu_worker().submit(task, current_options())
    await serve(turns, FINISH)
    turns.finish()  # Note [The caller commits]


def execute_sync(task: GraphTask) -> None:
    """Run ``task`` to completion on this thread, blocking (the blocking twin);
    on a fresh thread if it nests too deep (Note [Reentrant depth]).  Inside
    ``agrad.cooperative`` the call runs it in its time slices instead (Note
    [Backwards inside a cooperative call])."""
    job = cooperative_call()
    if job is None and current_graph_task.get() is None and running_here():
        warn_blocking()  # Note [A blocking call on a loop's thread]
    try:
        if _spills(task):
            if job is not None:  # the caller runs it in a fresh task of the loop
                job.wait_for(_traps.in_fresh_task(_execute, task))
            else:
                _in_fresh_thread(_execute_sync, task)
        elif job is not None:
            job.run_backward(task)  # Note [Backwards inside a cooperative call]
        else:
            _execute_sync(task)
    except BaseException as exc:
        task.note_if_committed(exc)
        raise


def _execute_sync(task: GraphTask) -> None:
    steps = task.run(None)  # no time slices, no offload: never asks to wait for kernels
    with _CoroutineRunner() as run_coroutine:
        request = _advance(steps)
        while request is not None:
            result = None
            try:
                if isinstance(request, DeviceJob):
                    _device_workers.run_inline(request)
                elif isinstance(request, DeviceIdle):
                    _device_workers.synchronize(request.device)
                elif request is not FINISH:  # inline: no other request but an async def backward
                    result = run_coroutine(cast(Awaitable[Any], request))
            except BaseException as exc:
                request = _advance(steps, exc=exc)
            else:
                request = _advance(steps, result)


# Note [Async backward]
# ~~~~~~~~~~~~~~~~~~~~~
# A custom Function may define ``async def backward``.  The async driver simply
# awaits it.  The blocking driver must run the coroutine itself: on a thread
# with no running event loop it uses a private asyncio loop, created on the
# first async node of the backward and closed when the backward ends; on a
# thread whose loop is running (a blocking call made from async code, on
# asyncio, uvloop or trio) it cannot run a second loop there, so it runs the
# coroutine on a fresh loop in a helper thread and blocks for the result.
# Either way the coroutine runs in a copy of the caller's context, so it sees
# the backward's grad mode.
#
# The private loop is a bare event loop, not an ``asyncio.Runner``: on the main
# thread ``Runner.run`` installs a SIGINT handler naming its main task and, on
# the way out, asks ``signal.getsignal`` whether it is still installed, which
# (Python 3.11) builds the handler's repr: the task's, with the coroutine's
# arguments.  For a checkpoint node whose backward got (512, 512) tensors
# that repr cost 0.4 s per call (bench_checkpoint, blocking twin).
class _CoroutineRunner:
    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None

    def __enter__(self) -> "_CoroutineRunner":
        return self

    def __exit__(self, *exc: object) -> None:
        loop = self._loop
        if loop is not None:
            with deferred_interrupts():  # shut down and closed whole (Note [Interrupting a private loop])
                try:
                    loop.run_until_complete(loop.shutdown_asyncgens())
                    loop.run_until_complete(loop.shutdown_default_executor())
                finally:
                    loop.close()

    def __call__(self, aw: Awaitable[Any]) -> Any:
        if running_here():
            return _in_fresh_thread(_run_in_fresh_loop, aw)
        if self._loop is None:
            with deferred_interrupts():  # made and kept, or not made: never left unclosed
                self._loop = asyncio.new_event_loop()
        context = contextvars.copy_context()
        context.run(_forget_async_library)
        with cancel_on_interrupt(self._loop) as interrupt:  # Note [Interrupting a private loop]
            interrupt.task = self._loop.create_task(_as_coroutine(aw), context=context)
            return self._loop.run_until_complete(interrupt.task)


# Note [Never abandon a spilled thread]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A thread that runs a spilled backward (Note [Reentrant depth]) or an
# ``async def backward`` on a fresh loop (Note [Async backward]) belongs to
# the task whose node started it: its provisional commits are journaled on
# that task once it finishes (Note [Commits of reentrant backwards]).  If the
# wait for it is interrupted (a KeyboardInterrupt on the main thread), the
# starting task is about to abort, and it may only undo what the thread did
# after the thread ended; a thread left running would commit into ``.grad``
# after the abort, its provisional entries never cleared.  So the thread is
# started with interrupts held back, together with the flag that says so
# (an interrupt lands before both or after both, and an interrupt delivered
# at the end of that block is already inside the ``try``), and an
# interrupted wait waits again, with interrupts held back, before the
# interrupt goes on: Ctrl-C takes effect when the nested backward ends.  The
# wait is on an event the thread sets when it is done, not on
# ``Thread.join``: on Python 3.11 a join interrupted by KeyboardInterrupt
# marks the thread stopped while it still runs (bpo-45274's fix releases the
# running thread's lock), so a second join, and ``is_alive()``, return at
# once.
def _in_fresh_thread(fn: Callable[[Any], Any], arg: Any) -> Any:
    """``fn(arg)`` on a new thread, in a copy of this context; block for its result
    (Note [Never abandon a spilled thread])."""
    ctx = contextvars.copy_context()
    outcome: list[tuple[bool, Any]] = []  # (raised, result or exception)
    done = threading.Event()

    def run() -> None:
        try:
            outcome.append((False, ctx.run(fn, arg)))
        except BaseException as exc:  # re-raised on the waiting thread, below
            outcome.append((True, exc))
        finally:
            done.set()

    thread = threading.Thread(target=run, name="agrad-engine")
    started = False
    try:
        with deferred_interrupts():
            thread.start()
            started = True
        done.wait()
    except BaseException:
        if started:
            with deferred_interrupts():
                done.wait()
        raise
    thread.join()  # only its exit is left
    ((raised, result),) = outcome
    outcome.clear()  # no cycle through the exception's traceback
    if raised:
        raise result
    return result


def _run_in_fresh_loop(aw: Awaitable[Any]) -> Any:
    _forget_async_library()
    return asyncio.run(_as_coroutine(aw))


def _forget_async_library() -> None:
    """Before running asyncio in this context: a context copied from a trio task
    (through a spilled thread too) says "trio" to sniffio, and anyio would
    then drive the asyncio loop as trio ("Task got bad yield")."""
    sniffio = sys.modules.get("sniffio")
    if sniffio is not None:
        sniffio.current_async_library_cvar.set(None)


async def _as_coroutine(aw: Awaitable[Any]) -> Any:
    return await aw
