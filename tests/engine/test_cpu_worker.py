"""The CPU worker: one task per event loop runs the nodes of every awaited backward.

What Note [One worker per loop], Note [Time slices] and Note [The caller
commits] promise, checked on asyncio, uvloop and trio: one time slice per loop
pass however many backwards are in flight, fairness between graph tasks,
reentrant tasks first, cancellation that reaches its caller within a slice, a
worker that ends with its line, commits in the caller's own task, each
caller's context in its nodes, and awaited backwards beside blocking ones.

Time is a fake clock (:class:`FakeClock`) patched into both modules that read
it: every read advances it by one tick, and the engine reads it once per node
(``GraphTask._execute``) and twice per graph task's turn (``CpuWorker._run``),
so a slice of :data:`SLICE_TICKS` ticks runs at most that many nodes whatever
the machine's load.  Nodes are counted by :class:`Tick`, an identity Function
whose backward appends its tag to a log; each test asserts on that log, never
on a wall-clock time.  Every value is an integer in float64, so gradients are
compared with ``==``.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import agrad
from agrad._engine import _cpu_worker, _graph_task
from agrad._engine._options import current_options
from agrad.autograd.graph import engine_options

pytestmark = pytest.mark.anyio

TICK = 1e-5  # seconds per clock read
SLICE_TICKS = 100  # clock reads, so nodes, per time slice
SLICE = SLICE_TICKS * TICK
# A pass may run one node more than the slice's reads (rounding of ``now +
# time_slice`` on the fake clock), never more.
MAX_PER_PASS = SLICE_TICKS + 1
WORKER_NAME = "agrad cpu worker"

Action = Callable[[], None]


class FakeClock:
    """A clock that advances :data:`TICK` seconds at every read, shared by the
    graph tasks and their worker: elapsed time is a count of engine steps."""

    def __init__(self) -> None:
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return 1.0 + self.reads * TICK


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(_graph_task, "clock", fake)
    monkeypatch.setattr(_cpu_worker, "clock", fake)
    return fake


class Tick(agrad.autograd.Function):
    """The identity; its backward appends ``tag`` to ``log`` (one entry per node
    run), then calls ``action`` if one was given."""

    @staticmethod
    def forward(ctx: Any, x: agrad.Tensor, log: list[str], tag: str, action: Action | None) -> agrad.Tensor:
        ctx.log, ctx.tag, ctx.action = log, tag, action
        return x.clone()

    @staticmethod
    def backward(ctx: Any, g: agrad.Tensor) -> Any:
        ctx.log.append(ctx.tag)
        if ctx.action is not None:
            ctx.action()
        return g, None, None, None


class AsyncTick(Tick):
    """:class:`Tick` with an ``async def backward``: it runs in the awaiting caller's turn."""

    @staticmethod
    async def backward(ctx: Any, g: agrad.Tensor) -> Any:  # type: ignore[override]
        await anyio.lowlevel.checkpoint()
        return Tick.backward(ctx, g)


def chain(log: list[str], tag: str, length: int, action: Action | None = None,
          node: type[Tick] = Tick) -> tuple[agrad.Tensor, agrad.Tensor]:
    """A leaf (ones) and ``(tick(...tick(leaf)) * 2).sum()``: ``length`` logged
    nodes between them, and a gradient of 2 for each element of the leaf."""
    x = agrad.ones(3, dtype=agrad.float64, requires_grad=True)
    y = x
    for _ in range(length):
        y = node.apply(y, log, tag, action)
    return x, (y * 2.0).sum()


def on_call(n: int, fn: Action) -> Action:
    """An action that calls ``fn`` at its ``n``-th call (its node's ``n``-th run)."""
    calls = itertools.count(1)

    def action() -> None:
        if next(calls) == n:
            fn()

    return action


def runs(log: list[str]) -> list[tuple[str, int]]:
    """``log`` as (tag, length) runs of consecutive equal tags."""
    return [(tag, len(list(group))) for tag, group in itertools.groupby(log)]


def assert_grad(x: agrad.Tensor, value: float) -> None:
    assert x.grad is not None
    assert (x.grad.numpy() == value).all(), x.grad


def worker() -> _cpu_worker.CpuWorker:
    return _cpu_worker._WORKER.get()


def running_task_names() -> list[str]:
    """The names of every task alive on this loop, system tasks included."""
    try:
        return [task.get_name() for task in asyncio.all_tasks()]
    except RuntimeError:  # no asyncio loop running: trio
        import trio

    top = trio.lowlevel.current_task()
    while top.parent_nursery is not None:
        top = top.parent_nursery.parent_task
    names, stack = [], [top]
    while stack:
        task = stack.pop()
        names.append(task.name)
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return names


class Cancellable:
    """Runs a coroutine function so that :meth:`cancel` (callable from a node's
    backward, on the worker) cancels it: by ``mechanism``, ``"cancel_scope"``
    (anyio's, on every backend) or ``"task_cancel"`` (asyncio's ``Task.cancel``)."""

    def __init__(self, mechanism: str) -> None:
        self.mechanism = mechanism
        self._cancel: Callable[[], object] | None = None

    def cancel(self) -> None:
        assert self._cancel is not None
        self._cancel()

    async def run(self, body: Callable[[], Awaitable[None]]) -> bool:
        """Run ``body``; True if it was cancelled (and raised the cancellation)."""
        if self.mechanism == "cancel_scope":
            with anyio.CancelScope() as scope:
                self._cancel = scope.cancel
                await body()
            return scope.cancelled_caught

        async def main() -> None:
            await body()

        task = asyncio.get_running_loop().create_task(main())
        self._cancel = task.cancel
        await asyncio.wait([task])
        if not task.cancelled():
            task.result()  # raises what the body raised
        return task.cancelled()


@pytest.fixture(params=["cancel_scope", "task_cancel"])
def cancellable(request: pytest.FixtureRequest, anyio_backend_name: str) -> Cancellable:
    if request.param == "task_cancel" and anyio_backend_name != "asyncio":
        pytest.skip("asyncio's Task.cancel")
    return Cancellable(request.param)


# -- 1. one budget per loop pass ----------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 4, 16])
async def test_other_tasks_wait_one_slice_however_many_backwards(n: int) -> None:
    # A ticker that checkpoints in a loop sees at most one slice of nodes run
    # between two of its turns, whatever the number of backwards in flight (each
    # awaiting caller used to drive its own task with its own slice: n slices).
    log: list[str] = []
    length = 300
    chains = [chain(log, f"b{i}", length) for i in range(n)]
    between: list[int] = []
    done = anyio.Event()

    async def ticker() -> None:
        seen = len(log)
        while not done.is_set():
            await anyio.lowlevel.checkpoint()
            between.append(len(log) - seen)
            seen = len(log)

    async def backward(loss: agrad.Tensor) -> None:
        with engine_options(time_slice=SLICE, offload="never"):
            await loss.backward()

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        async with anyio.create_task_group() as backwards:
            for _, loss in chains:
                backwards.start_soon(backward, loss)
        done.set()

    assert len(log) == n * length
    assert max(between) <= MAX_PER_PASS, between
    assert sum(1 for k in between if k) >= n * length // MAX_PER_PASS  # the work was spread over passes
    for x, _ in chains:
        assert_grad(x, 2.0)


# -- 2. fairness --------------------------------------------------------------------------------


async def test_small_backward_is_not_starved_by_a_huge_one() -> None:
    log: list[str] = []
    huge_length, small_length = 3000, 50
    huge_x, huge = chain(log, "huge", huge_length)
    small_x, small = chain(log, "small", small_length)
    finished: list[str] = []
    huge_run_when_small_finished = -1

    async def backward(tag: str, loss: agrad.Tensor) -> None:
        nonlocal huge_run_when_small_finished
        with engine_options(time_slice=SLICE, offload="never"):
            await loss.backward()
        finished.append(tag)
        if tag == "small":
            huge_run_when_small_finished = log.count("huge")

    async with anyio.create_task_group() as tg:
        tg.start_soon(backward, "huge", huge)
        for _ in range(100):  # until the huge backward has begun running nodes
            if log:
                break
            await anyio.lowlevel.checkpoint()
        assert log, "the huge backward never ran"
        huge_run_when_small_started = len(log)
        tg.start_soon(backward, "small", small)

    assert finished == ["small", "huge"]
    # While the small one ran, the huge one ran at most: a pass while the small
    # one's caller passed the checkpoint before its backward starts, a pass as
    # the task ahead of it in line, and the rest of the pass it ended in.
    assert huge_run_when_small_finished - huge_run_when_small_started <= 3 * MAX_PER_PASS
    assert huge_run_when_small_finished < huge_length // 4
    assert_grad(huge_x, 2.0)
    assert_grad(small_x, 2.0)


async def test_equal_backwards_take_turns_at_slice_boundaries() -> None:
    log: list[str] = []
    length = 1000
    chains = {tag: chain(log, tag, length) for tag in ("a", "b")}

    async def backward(loss: agrad.Tensor) -> None:
        with engine_options(time_slice=SLICE, offload="never"):
            await loss.backward()

    async with anyio.create_task_group() as tg:
        for _, loss in chains.values():
            tg.start_soon(backward, loss)

    turns = runs(log)
    # They alternate, a slice each: a turn ends when its slice is spent (the
    # last two turns may share a pass once one of them ends).
    assert len(turns) >= 2 * (length // SLICE_TICKS) - 1, turns
    assert all(SLICE_TICKS - 5 <= k <= MAX_PER_PASS for _, k in turns[:-2]), turns
    for x, _ in chains.values():
        assert_grad(x, 2.0)


# -- 3. reentrant tasks first -------------------------------------------------------------------


class Nest(agrad.autograd.Function):
    """The identity, whose ``async def backward`` awaits a reentrant backward of a
    fresh chain of ``length`` nodes logged as ``"nested"``."""

    @staticmethod
    def forward(ctx: Any, x: agrad.Tensor, log: list[str], length: int) -> agrad.Tensor:
        ctx.log, ctx.length = log, length
        return x.clone()

    @staticmethod
    async def backward(ctx: Any, g: agrad.Tensor) -> Any:
        with agrad.enable_grad():
            inner, loss = chain(ctx.log, "nested", ctx.length)
        await loss.backward()
        assert (inner.grad.numpy() == 2.0).all()
        return g, None, None


async def test_reentrant_backward_runs_before_depth_zero_tasks() -> None:
    log: list[str] = []
    outer_x = agrad.ones(3, dtype=agrad.float64, requires_grad=True)
    y = outer_x
    for _ in range(50):
        y = Tick.apply(y, log, "outer", None)
    y = Nest.apply(y, log, 3 * SLICE_TICKS)  # longer than a slice: it spans several passes
    for _ in range(50):
        y = Tick.apply(y, log, "outer", None)
    outer = (y * 2.0).sum()
    other_x, other = chain(log, "other", 2000)

    async def backward(loss: agrad.Tensor) -> None:
        with engine_options(time_slice=SLICE, offload="never"):
            await loss.backward()

    async with anyio.create_task_group() as tg:
        tg.start_soon(backward, other)
        tg.start_soon(backward, outer)

    nested = [i for i, tag in enumerate(log) if tag == "nested"]
    assert len(nested) == 3 * SLICE_TICKS
    # One block: from its first node to its last, no depth-0 task ran a node,
    # though one was in line before and after it.
    assert nested == list(range(nested[0], nested[-1] + 1))
    assert "other" in log[:nested[0]] and "other" in log[nested[-1]:]
    assert_grad(outer_x, 2.0)
    assert_grad(other_x, 2.0)


# -- 4. cancellation ----------------------------------------------------------------------------


async def test_cancellation_reaches_the_caller_within_one_slice(cancellable: Cancellable) -> None:
    log: list[str] = []
    cancelled_at: list[int] = []
    arrived_at: list[int] = []

    def cancel() -> None:
        cancelled_at.append(len(log))
        cancellable.cancel()

    victim_x, victim = chain(log, "victim", 2000, on_call(150, cancel))
    before = agrad.full((3,), 7.0, dtype=agrad.float64)
    victim_x.grad = before
    others = [chain(log, "other", 1500) for _ in range(2)]

    async def cancelled_backward() -> None:
        try:
            await victim.backward()
        except anyio.get_cancelled_exc_class():
            arrived_at.append(len(log))
            raise

    async def backward(loss: agrad.Tensor) -> None:
        await loss.backward()

    with engine_options(time_slice=SLICE, offload="never"):
        async with anyio.create_task_group() as tg:
            for _, loss in others:
                tg.start_soon(backward, loss)
            assert await cancellable.run(cancelled_backward)

    (at_cancel,), (at_arrival,) = cancelled_at, arrived_at
    assert at_arrival - at_cancel <= MAX_PER_PASS
    assert "victim" not in log[at_arrival:]  # the victim stopped there
    assert "other" in log[at_arrival:]  # while the others kept the worker busy
    assert victim_x.grad is before and (before.numpy() == 7.0).all()
    for x, _ in others:
        assert_grad(x, 2.0)
    assert not worker()._running and not worker()._line


# -- 5. the worker ends with its line -----------------------------------------------------------


async def test_worker_ends_with_its_line_and_starts_again() -> None:
    log: list[str] = []
    seen: list[tuple[str | None, bool]] = []

    def record() -> None:  # on the node's side: which task runs it, and is the worker listed
        seen.append((anyio.get_current_task().name, worker()._running and WORKER_NAME in running_task_names()))

    for round_ in range(2):
        chains = [chain(log, "b", 3 * SLICE_TICKS, record) for _ in range(3)]
        with engine_options(time_slice=SLICE, offload="never"):
            async with anyio.create_task_group() as tg:
                for _, loss in chains:
                    tg.start_soon(loss.backward)
        assert not worker()._running and not worker()._line
        assert WORKER_NAME not in running_task_names()
        assert set(seen) == {(WORKER_NAME, True)}, round_  # a later backward started it again
        seen.clear()
        for x, _ in chains:
            assert_grad(x, 2.0)


async def test_worker_ends_after_its_last_backward_is_cancelled() -> None:
    # A cancelled task leaves a stale place in line; the worker drops it at its
    # next turn and ends, though no backward follows.
    log: list[str] = []
    with anyio.CancelScope() as scope:
        _, loss = chain(log, "b", 3 * SLICE_TICKS, on_call(SLICE_TICKS + 50, lambda: scope.cancel()))
        with engine_options(time_slice=SLICE, offload="never"):
            await loss.backward()
    assert scope.cancelled_caught
    for _ in range(10):
        if not worker()._running:
            break
        await anyio.lowlevel.checkpoint()
    assert not worker()._running and not worker()._line
    assert WORKER_NAME not in running_task_names()
    assert len(log) < 3 * SLICE_TICKS


# -- 6. the caller commits ----------------------------------------------------------------------


async def test_commit_and_post_accumulate_grad_hooks_run_in_the_caller() -> None:
    log: list[str] = []
    node_tasks: set[int] = set()
    hook_tasks: list[int] = []
    x, loss = chain(log, "b", 10, lambda: node_tasks.add(anyio.get_current_task().id))
    x.register_post_accumulate_grad_hook(lambda t: hook_tasks.append(anyio.get_current_task().id))
    caller = anyio.get_current_task().id
    await loss.backward()
    assert hook_tasks == [caller]
    assert caller not in node_tasks and len(node_tasks) == 1  # the nodes ran on the worker
    assert_grad(x, 2.0)


async def test_cancellation_between_the_last_node_and_the_commit_commits_nothing(
        cancellable: Cancellable) -> None:
    log: list[str] = []
    hooked: list[agrad.Tensor] = []
    # The nodes run leaf-last: the 5th Tick to run is the one next to the leaf,
    # and only the leaf's AccumulateGrad (whose tensor hook logs "leaf") runs after it.
    x, loss = chain(log, "b", 5, on_call(5, cancellable.cancel))
    x.register_hook(lambda g: log.append("leaf"))
    x.register_post_accumulate_grad_hook(hooked.append)
    before = agrad.full((3,), 7.0, dtype=agrad.float64)
    x.grad = before
    with engine_options(time_slice=SLICE, offload="never"):
        assert await cancellable.run(loss.backward)
    assert log == ["b"] * 5 + ["leaf"]  # every node ran before the caller's turn came
    assert hooked == []
    assert x.grad is before and (before.numpy() == 7.0).all()


# -- 7. the caller's context --------------------------------------------------------------------

_who: contextvars.ContextVar[str] = contextvars.ContextVar("test_cpu_worker_who", default="nobody")


@pytest.mark.parametrize("node", [Tick, AsyncTick], ids=["backward", "async-backward"])
async def test_nodes_see_their_callers_context(node: type[Tick]) -> None:
    # Two callers in flight at once, each with its own settings.  As in PyTorch,
    # nodes run with grad mode set to ``create_graph`` whatever the caller's
    # grad mode (torch 2.13: ``with no_grad(): y.backward(create_graph=True)``
    # runs backwards with grad enabled); the rest of the caller's context (engine
    # options, any context variable) is what its nodes see.
    log: list[str] = []
    seen: dict[str, set[tuple[bool, float, str]]] = {"a": set(), "b": set()}
    length = 3 * SLICE_TICKS if node is Tick else 30

    def record(tag: str) -> Action:
        return lambda: seen[tag].add((agrad.is_grad_enabled(), current_options().time_slice, _who.get()))

    async def a() -> None:
        _who.set("a")
        x, loss = chain(log, "a", length, record("a"), node)
        with agrad.no_grad(), engine_options(time_slice=SLICE, offload="never"):
            (g,) = await agrad.autograd.grad(loss, [x], create_graph=True)
            assert not agrad.is_grad_enabled()
        assert (g.numpy() == 2.0).all()

    async def b() -> None:
        _who.set("b")
        x, loss = chain(log, "b", length, record("b"), node)
        with agrad.enable_grad(), engine_options(time_slice=2 * SLICE, offload="never"):
            await loss.backward()
            assert agrad.is_grad_enabled()
        assert_grad(x, 2.0)

    async with anyio.create_task_group() as tg:
        tg.start_soon(a)
        tg.start_soon(b)

    assert len(runs(log)) > 2  # their nodes interleaved
    assert seen == {"a": {(True, SLICE, "a")}, "b": {(False, 2 * SLICE, "b")}}
    assert _who.get() == "nobody"


# -- 8. awaited and blocking backwards together -------------------------------------------------


class Gate(agrad.autograd.Function):
    """The identity, whose ``async def backward`` waits for ``event``: the
    backward stays in flight, some gradients staged, until the event is set."""

    @staticmethod
    def forward(ctx: Any, x: agrad.Tensor, event: anyio.Event) -> agrad.Tensor:
        ctx.event = event
        return x.clone()

    @staticmethod
    async def backward(ctx: Any, g: agrad.Tensor) -> Any:
        await ctx.event.wait()
        return g, None


class NestedBlocking(agrad.autograd.Function):
    """The identity, whose plain backward runs a blocking backward of
    ``(w * 1000).sum()`` (on the worker, inside an awaited backward)."""

    @staticmethod
    def forward(ctx: Any, x: agrad.Tensor, w: agrad.Tensor) -> agrad.Tensor:
        ctx.w = w
        return x.clone()

    @staticmethod
    def backward(ctx: Any, g: agrad.Tensor) -> Any:
        with agrad.enable_grad():
            (ctx.w * 1000.0).sum().backward_sync()
        return g, None


@pytest.mark.filterwarnings("ignore::agrad.BlockingCallWarning")  # a blocking twin on the loop, on purpose
async def test_awaited_and_blocking_backwards_together() -> None:
    # Shared leaf ``w``: the awaited backwards add 1, 2, 3 (and 1000 from a
    # blocking backward nested in one of their nodes); a blocking backward on
    # the loop's thread adds 10 and one in a worker thread 100, both while the
    # awaited backwards are in flight (held open by a gate).
    log: list[str] = []
    w = agrad.zeros(3, dtype=agrad.float64, requires_grad=True)
    gate = anyio.Event()
    threads: set[int] = set()

    def awaited_loss(i: int) -> agrad.Tensor:
        y = Gate.apply(w, gate) if i == 1 else w
        if i == 2:
            y = NestedBlocking.apply(y, w)
        for _ in range(3 * SLICE_TICKS):
            y = Tick.apply(y, log, f"awaited{i}", None)
        return (y * float(i)).sum()

    def blocking(tag: str, scale: float) -> None:
        y = w
        for _ in range(SLICE_TICKS):
            y = Tick.apply(y, log, tag, lambda: threads.add(threading.get_ident()))
        (y * scale).sum().backward_sync()

    losses = [awaited_loss(i) for i in (1, 2, 3)]
    done: list[int] = []

    async def backward(i: int, loss: agrad.Tensor) -> None:
        await loss.backward()
        done.append(i)

    with engine_options(time_slice=SLICE, offload="never"):
        async with anyio.create_task_group() as tg:
            for i, loss in enumerate(losses, 1):
                tg.start_soon(backward, i, loss)
            for _ in range(100):  # until the awaited backwards run nodes
                if log:
                    break
                await anyio.lowlevel.checkpoint()
            blocking("loop", 10.0)
            await anyio.to_thread.run_sync(blocking, "thread", 100.0)
            assert 1 not in done  # still in flight, at its gate
            gate.set()

    assert sorted(done) == [1, 2, 3]
    assert len(threads) == 2 and threading.get_ident() in threads
    assert_grad(w, 1.0 + 2.0 + 3.0 + 1000.0 + 10.0 + 100.0)
    assert not worker()._running and not worker()._line
