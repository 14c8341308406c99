"""Reentrant backward: a backward started inside a node's backward.

A custom Function whose backward differentiates something itself (as
reentrant checkpointing does) starts a *nested* graph task, one reentrant
level deeper (Note [Reentrant backward]).  Awaited, it is a nested await inside
an ``async def backward``; blocking, ``backward_sync``/``grad_sync`` inside a
plain ``backward`` drive it inline.  Past ``max_recursion_depth`` levels on one
stack it spills to a fresh task or thread (Note [Reentrant depth]), so nesting
1,000 deep runs into no RecursionError and no deadlock.  Errors and
cancellation at any depth unwind every level and leave every ``.grad`` as it
was, including the gradients nested levels had committed (Note [Commits of
reentrant backwards]).

Values are integers in float64, so results are compared with ``==``.
"""

from __future__ import annotations

import gc
import random
import threading
import weakref
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import agrad
from agrad._ambient import current_graph_task
from agrad.autograd.graph import engine_options
from tests.engine.conftest import Api
from tests.helpers import collect_only_new_objects, soak

pytestmark = pytest.mark.anyio

CANCEL_DEPTH_TRIALS = soak(ci=40, full=600)  # per backend (Note [Soak sizes])


class Probe:
    """What the nested levels saw: reentrant depths, and the threads and tasks they ran on."""

    def __init__(self) -> None:
        self.depths: list[int] = []
        self.threads: set[int] = set()
        self.tasks: set[int] = set()

    def record(self, in_task: bool) -> None:
        task = current_graph_task.get()
        assert task is not None
        self.depths.append(task.reentrant_depth)
        self.threads.add(threading.get_ident())
        if in_task:
            self.tasks.add(anyio.get_current_task().id)


def nest_function(blocking: bool) -> type[agrad.autograd.Function]:
    """``Nest.apply(x, depth, w, probe, fail_at)`` is ``x`` (the identity); the
    backward of level ``depth > 0`` differentiates ``(Nest.apply(x', depth - 1) *
    w).sum()`` with a nested ``backward`` (into a fresh leaf ``x'`` and into the
    shared leaf ``w``, which gains 1 per level) and passes ``x'.grad`` (1) on.
    Level ``fail_at`` raises after its nested backward has committed.
    ``blocking``: a plain backward calling ``backward_sync``; otherwise an
    ``async def backward`` awaiting ``agrad.autograd.backward``.
    """

    def nested_loss(ctx: Any) -> tuple[agrad.Tensor, agrad.Tensor]:
        inner = agrad.ones((), dtype=agrad.float64, requires_grad=True)
        y = Nest.apply(inner, ctx.depth - 1, ctx.w, ctx.probe, ctx.fail_at)
        return inner, (y * ctx.w).sum()

    def after(ctx: Any, g: agrad.Tensor, inner: agrad.Tensor) -> agrad.Tensor:
        if ctx.depth == ctx.fail_at:
            raise RuntimeError(f"failure at level {ctx.depth}")
        return g * inner.grad

    class Nest(agrad.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: agrad.Tensor, depth: int, w: agrad.Tensor, probe: Probe,
                    fail_at: int | None) -> agrad.Tensor:
            ctx.depth, ctx.w, ctx.probe, ctx.fail_at = depth, w, probe, fail_at
            return x.clone()

        if blocking:
            @staticmethod
            def backward(ctx: Any, g: agrad.Tensor) -> Any:
                ctx.probe.record(in_task=False)
                if ctx.depth == 0:
                    return g, None, None, None, None
                with agrad.enable_grad():
                    inner, loss = nested_loss(ctx)
                agrad.autograd.backward_sync(loss)
                return after(ctx, g, inner), None, None, None, None
        else:
            @staticmethod
            async def backward(ctx: Any, g: agrad.Tensor) -> Any:
                ctx.probe.record(in_task=True)
                await anyio.lowlevel.checkpoint()  # a place to be cancelled at every level
                if ctx.depth == 0:
                    return g, None, None, None, None
                with agrad.enable_grad():
                    inner, loss = nested_loss(ctx)
                await agrad.autograd.backward(loss)
                return after(ctx, g, inner), None, None, None, None

    return Nest


def leaves() -> tuple[agrad.Tensor, agrad.Tensor]:
    return (agrad.tensor(1.0, dtype=agrad.float64, requires_grad=True),
            agrad.tensor(1.0, dtype=agrad.float64, requires_grad=True))


async def run_nest(api: Api, blocking_backward: bool, depth: int, *, fail_at: int | None = None,
                   max_depth: int | None = None) -> tuple[agrad.Tensor, agrad.Tensor, Probe]:
    Nest = nest_function(blocking_backward)
    x, w = leaves()
    probe = Probe()
    y = Nest.apply(x, depth, w, probe, fail_at)
    with engine_options(max_recursion_depth=max_depth) if max_depth else engine_options():
        await api.tensor_backward(y * 3.0)
    return x, w, probe


# -- both reentrance paths -------------------------------------------------------------------


@pytest.mark.parametrize("blocking_backward", [True, False], ids=["sync-backward", "async-backward"])
async def test_reentrant_backward_runs_one_level_deeper(api: Api, blocking_backward: bool) -> None:
    x, w, probe = await run_nest(api, blocking_backward, depth=3)
    assert x.grad.item() == 3.0
    assert w.grad.item() == 3.0  # levels 3, 2 and 1 each accumulated 1 into the shared leaf
    assert probe.depths == [0, 1, 2, 3]


async def test_reentrant_grad_inside_async_backward() -> None:
    class Square(agrad.autograd.Function):
        """x**2, whose backward asks the engine for d(x**2)/dx on a fresh graph."""

        @staticmethod
        def forward(ctx: Any, x: agrad.Tensor) -> agrad.Tensor:
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        async def backward(ctx: Any, g: agrad.Tensor) -> agrad.Tensor:
            (x,) = ctx.saved_tensors
            xd = x.detach().requires_grad_()
            with agrad.enable_grad():
                (gx,) = await agrad.autograd.grad(xd * xd, xd, g)
            return gx

    x = agrad.tensor([1.0, 2.0, 3.0], dtype=agrad.float64, requires_grad=True)
    await Square.apply(x).sum().backward()
    assert x.grad.tolist() == [2.0, 4.0, 6.0]


async def test_nested_grad_inside_sync_backward_under_grad() -> None:
    """``grad_sync`` nested in a backward that is itself a ``grad`` call: the
    nested task captures its own inputs, the outer one its own."""

    class Cube(agrad.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: agrad.Tensor) -> agrad.Tensor:
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx: Any, g: agrad.Tensor) -> agrad.Tensor:
            (x,) = ctx.saved_tensors
            xd = x.detach().requires_grad_()
            with agrad.enable_grad():
                (gx,) = agrad.autograd.grad_sync(xd ** 3, xd, g)
            return gx

    x = agrad.tensor([1.0, 2.0], dtype=agrad.float64, requires_grad=True)
    (gx,) = await agrad.autograd.grad(Cube.apply(x).sum(), x)
    assert gx.tolist() == [3.0, 12.0]
    assert x.grad is None


# -- 1,000 levels: spilling past max_recursion_depth ---------------------------------------------


@pytest.mark.parametrize("blocking_backward", [True, False], ids=["sync-backward", "async-backward"])
@pytest.mark.parametrize("max_depth", [None, 7], ids=["default-limit", "limit-7"])
async def test_backwards_nested_1000_deep(api: Api, blocking_backward: bool, max_depth: int | None) -> None:
    x, w, probe = await run_nest(api, blocking_backward, depth=1000, max_depth=max_depth)
    assert x.grad.item() == 3.0
    assert w.grad.item() == 1000.0
    assert probe.depths == list(range(1001))
    # Every `limit` levels a nested backward spills to a fresh stack: a new thread
    # from a plain backward (blocking), a new task of the loop from an async one.
    stacks = probe.threads if blocking_backward else probe.tasks
    assert len(stacks) >= 1000 // (max_depth or 60)


async def test_spilled_backward_in_a_worker_keeps_the_callers_ambient_state() -> None:
    """A spilled nested backward sees the grad mode and options of its caller's context."""
    seen: list[tuple[bool, float]] = []

    class Look(agrad.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: agrad.Tensor, depth: int) -> agrad.Tensor:
            ctx.depth = depth
            return x.clone()

        @staticmethod
        async def backward(ctx: Any, g: agrad.Tensor) -> Any:
            from agrad._engine._options import current_options
            seen.append((agrad.is_grad_enabled(), current_options().time_slice))
            if ctx.depth:
                inner = agrad.ones((), dtype=agrad.float64, requires_grad=True)
                with agrad.enable_grad():
                    y = Look.apply(inner, ctx.depth - 1)
                await y.backward()
            return g, None

    x = agrad.ones((), dtype=agrad.float64, requires_grad=True)
    with engine_options(max_recursion_depth=2, time_slice=0.0042):
        await Look.apply(x, 5).backward()
    # Nodes run with grad mode = create_graph (False), whichever stack they are on.
    assert seen == [(False, 0.0042)] * 6


# -- errors at depth ------------------------------------------------------------------------------


@pytest.mark.parametrize("blocking_backward", [True, False], ids=["sync-backward", "async-backward"])
@pytest.mark.parametrize("fail_at", [0, 1, 150, 299])
async def test_failure_at_depth_unwinds_every_level_and_changes_no_grad(
        api: Api, blocking_backward: bool, fail_at: int) -> None:
    """Level ``fail_at`` raises after the levels below it committed into ``w``:
    those commits are undone, and the error names the failing node."""
    Nest = nest_function(blocking_backward)
    x, w = leaves()
    w.grad = agrad.tensor(10.0, dtype=agrad.float64)
    before = w.grad
    y = Nest.apply(x, 300, w, Probe(), 300 - fail_at)
    with engine_options(max_recursion_depth=16):
        with pytest.raises(RuntimeError, match=f"failure at level {300 - fail_at}") as info:
            await api.tensor_backward(y)
    assert "NestBackward" in str(info.value.__notes__)
    assert x.grad is None
    assert w.grad is before and w.grad.item() == 10.0
    # The engine keeps working: the same model, without the failure.
    y = Nest.apply(x, 20, w, Probe(), None)
    await api.tensor_backward(y)
    assert (x.grad.item(), w.grad.item()) == (1.0, 30.0)


async def test_rollback_keeps_what_another_backward_committed_in_between() -> None:
    """An outer backward fails after a nested one committed into ``w`` and an
    unrelated backward accumulated into ``w`` too: only the nested part goes."""
    w = agrad.tensor(2.0, dtype=agrad.float64, requires_grad=True)
    nested_done, other_done = anyio.Event(), anyio.Event()

    class Outer(agrad.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: agrad.Tensor) -> agrad.Tensor:
            return x.clone()

        @staticmethod
        async def backward(ctx: Any, g: agrad.Tensor) -> agrad.Tensor:
            with agrad.enable_grad():
                await (w * 5.0).backward()  # nested: w.grad = 5 (provisional)
            nested_done.set()
            await other_done.wait()
            raise RuntimeError("outer fails")

    async def other() -> None:
        await nested_done.wait()
        await (w * 7.0).backward()  # top level: w.grad = 12
        other_done.set()

    x = agrad.tensor(1.0, dtype=agrad.float64, requires_grad=True)
    async with anyio.create_task_group() as tg:
        tg.start_soon(other)
        with pytest.raises(RuntimeError, match="outer fails"):
            await Outer.apply(x).backward()
    assert w.grad.item() == 7.0


# -- cancellation at depth ----------------------------------------------------------------------------


@pytest.mark.soak
async def test_cancellation_at_random_depths_changes_nothing_and_leaks_nothing(anyio_backend: Any) -> None:
    """Seeded trials (CANCEL_DEPTH_TRIALS): a 120-level async nest (spilling every 8 levels)
    cancelled at a random level, from inside the backward (every even trial) or by a deadline.
    No ``.grad`` changes, no nested task is left running, the graph is garbage,
    and a full backward afterwards gives the right result."""
    Nest = nest_function(blocking=False)
    rs = random.Random(5)
    cancelled = 0
    with collect_only_new_objects():  # Note [Collecting per trial]
        for trial in range(CANCEL_DEPTH_TRIALS):
            x, w = leaves()
            probe = Probe()
            y = Nest.apply(x, 120, w, probe, None)
            node = weakref.ref(y.grad_fn)
            at = rs.randrange(0, 121)
            with anyio.CancelScope() as scope:
                if trial % 2:
                    scope.deadline = anyio.current_time() + rs.uniform(0, 0.01)
                else:
                    original = probe.record

                    def record(in_task: bool, at: int = at, original: Any = original, probe: Probe = probe,
                               scope: anyio.CancelScope = scope) -> None:
                        original(in_task)
                        if len(probe.depths) > at:
                            scope.cancel()

                    probe.record = record  # type: ignore[method-assign]
                with engine_options(max_recursion_depth=8):
                    await y.backward()
            if scope.cancelled_caught:
                cancelled += 1
                assert x.grad is None and w.grad is None
            else:
                assert (x.grad.item(), w.grad.item()) == (1.0, 120.0)
            del y
            # Something in the event loop's or anyio's cancellation machinery keeps
            # the cancellation's traceback (and so the graph's frames) until the
            # loop's next pass; observed on asyncio and trio for any awaited
            # coroutine cancelled inside an async backward, before reentrance too.
            await anyio.lowlevel.checkpoint()
            gc.collect()
            assert node() is None
            assert current_graph_task.get() is None
    assert cancelled >= CANCEL_DEPTH_TRIALS // 2  # every cancellation from inside lands
    x, w, _ = await run_nest(Api(blocking=False), blocking_backward=False, depth=120, max_depth=8)
    assert (x.grad.item(), w.grad.item()) == (3.0, 120.0)


# -- ordering and options -----------------------------------------------------------------------------


def test_kernel_slots_go_to_the_deepest_task_first() -> None:
    """Note [Kernel slots]: a freed slot goes to the first in line of the deepest tasks."""
    from agrad._engine._graph_task import GraphTask
    from agrad._engine._pool import KernelPool

    pool = KernelPool(start_worker=lambda worker: None, post=lambda fn: fn())
    top = GraphTask(False, False)
    owner, a, b = GraphTask(False, False), GraphTask(False, False, top), GraphTask(False, False, top)
    deeper = GraphTask(False, False, a)
    pool.running = 2 * agrad.get_num_interop_threads()  # every slot taken
    for task in (owner, a, deeper, b):
        assert not pool.offload(task.in_flight, lambda: None)
    granted = []
    for _ in range(4):
        pool._release()
        granted += [t for t in (owner, a, deeper, b) if t.in_flight._granted and t not in granted]
    assert granted == [deeper, a, b, owner]


def test_max_recursion_depth_option_is_checked() -> None:
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="max_recursion_depth"):
            with engine_options(max_recursion_depth=bad):  # type: ignore[arg-type]
                pass
    with engine_options(max_recursion_depth=3) as options:
        assert options.max_recursion_depth == 3


@pytest.mark.anyio
async def test_an_async_backward_in_a_spilled_blocking_backward_runs_on_asyncio(anyio_backend: Any) -> None:
    """A blocking nested backward spilled to a fresh thread runs an ``async def
    backward`` on a private asyncio loop there; the context copied from the
    caller (a trio task included) must not make anyio drive that loop as
    trio's ("Task got bad yield")."""

    class Inner(agrad.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: agrad.Tensor) -> agrad.Tensor:
            return x.clone()

        @staticmethod
        async def backward(ctx: Any, g: agrad.Tensor) -> agrad.Tensor:
            await anyio.lowlevel.checkpoint()
            return g * 3

    leaf = agrad.ones((), requires_grad=True)

    class Outer(agrad.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: agrad.Tensor) -> agrad.Tensor:
            return x.clone()

        @staticmethod
        def backward(ctx: Any, g: agrad.Tensor) -> agrad.Tensor:
            with agrad.enable_grad():
                loss = Inner.apply(leaf).sum()
            agrad.autograd.backward_sync(loss)  # spills: max_recursion_depth=1
            return g

    x = agrad.ones(2, requires_grad=True)
    with engine_options(max_recursion_depth=1):
        await Outer.apply(x).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0] and leaf.grad.item() == 3.0
