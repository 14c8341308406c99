"""Kernel offload: which kernels leave the loop, that they overlap with each other
and with the loop's own work, that kernel slots go first come first served, the
per-loop pool's lifecycle, and the scheduling options.

Where a test needs a kernel to *be* somewhere (in a thread, running at the same
time as another), it uses a custom Function with ``offload=True`` whose backward
waits on a ``threading`` primitive: the property is then forced, not hoped for,
and a broken engine fails with a timeout error instead of a flaky timing.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any

import anyio
import numpy as np
import pytest
import uvloop

import agrad
from agrad._engine import _graph_task
from agrad._engine._graph_task import GraphTask
from agrad._engine._options import EngineOptions
from agrad._engine._pool import InFlight, KernelPool, current_pool
from agrad._ops._registry import REGISTRY
from agrad.autograd.graph import engine_options
from tests.engine._models import WAIT, pool_is_idle

pytestmark = pytest.mark.anyio

@pytest.fixture
def interop_threads() -> Iterator[Any]:
    """Set ``agrad.set_num_interop_threads`` for one test, then restore it."""
    before = agrad.get_num_interop_threads()
    yield agrad.set_num_interop_threads
    agrad.set_num_interop_threads(before)


def probe_class(offload: bool | None, backward: Any) -> type[agrad.autograd.Function]:
    """A custom Function pinned by ``offload`` with the given backward."""
    return type("Probe", (agrad.autograd.Function,), {
        "offload": offload,
        "forward": staticmethod(lambda ctx, x: x * 1.0),
        "backward": staticmethod(backward),
    })


async def set_in_a_thread(event: threading.Event) -> None:
    """Wait for a ``threading.Event`` that a kernel sets, without blocking the loop."""
    assert await anyio.to_thread.run_sync(event.wait, WAIT)


# -- where kernels run --------------------------------------------------------------------------------
@pytest.mark.parametrize("mode,pin,large,in_thread", [
    ("auto", None, False, False),
    ("auto", None, True, True),
    ("auto", True, False, True),
    ("auto", False, True, False),
    ("always", None, False, True),
    ("always", False, False, False),
    ("never", True, True, False),
    ("never", None, True, False),
])
async def test_kernel_runs_where_the_policy_says(mode: str, pin: bool | None, large: bool, in_thread: bool) -> None:
    threads: list[int] = []
    probe = probe_class(pin, lambda ctx, g: (threads.append(threading.get_ident()), g)[1])
    x = agrad.ones(64, requires_grad=True)
    loss = probe.apply(x).sum()
    # "large": the Probe node's work (its output plus nothing saved: 64) reaches the threshold.
    with engine_options(offload=mode, offload_threshold=64 if large else 65):
        await loss.backward()
    assert (threads[0] != threading.get_ident()) is in_thread
    assert x.grad.tolist() == [1.0] * 64


@pytest.mark.filterwarnings("ignore::agrad.BlockingCallWarning")  # a blocking twin on the loop, on purpose
async def test_blocking_twin_runs_every_kernel_inline() -> None:
    threads: list[int] = []
    probe = probe_class(True, lambda ctx, g: (threads.append(threading.get_ident()), g)[1])
    x = agrad.ones(3, requires_grad=True)
    with engine_options(offload="always"):
        probe.apply(x).sum().backward_sync()
    assert threads == [threading.get_ident()]


def test_an_async_backward_cannot_be_pinned_to_a_thread() -> None:
    with pytest.raises(TypeError, match="async def backward runs on the event loop"):
        class Bad(agrad.autograd.Function):
            offload = True

            @staticmethod
            def forward(ctx, x):
                return x

            @staticmethod
            async def backward(ctx, g):
                return g


async def test_built_in_nodes_estimate_their_work() -> None:
    # Elementwise: gradient plus saved tensors; matrix products: FLOPs plus an eighth of the
    # elements they touch (Note [Offload threshold], _product_work).
    x = agrad.ones(1000, requires_grad=True)
    assert (x * 2.0).grad_fn._work == 1000 + 1  # the gradient, the saved constant
    assert x.exp().grad_fn._work == 2000  # the gradient, the saved output
    assert (x + 1.0).grad_fn._work == 1000  # nothing saved
    w = agrad.ones(512, 512, requires_grad=True)
    assert (w @ w).grad_fn._work == 512 * 512 * 512 // 48 + 3 * 512 * 512 // 8
    v = agrad.ones(1, 1024, requires_grad=True)
    m = agrad.ones(1024, 1024)
    assert (v @ m).grad_fn._work == 1024 * 1024 // 48 + (1024 * 1024 + 2 * 1024) // 8  # a thin product
    with engine_options() as options:
        assert (w @ w).grad_fn._work >= options.offload_threshold > x.exp().grad_fn._work


# -- kernels overlap ---------------------------------------------------------------------------------------
async def test_independent_branches_run_their_kernels_at_the_same_time(interop_threads: Any) -> None:
    interop_threads(2)
    barrier = threading.Barrier(2, timeout=WAIT)  # each kernel waits for the other: both must be running

    def meet(ctx: Any, g: agrad.Tensor) -> agrad.Tensor:
        barrier.wait()
        return g * 2.0

    branch = probe_class(True, meet)
    x = agrad.ones(4, requires_grad=True)
    loss = branch.apply(x * 1.0).sum() + branch.apply(x * 3.0).sum()
    await loss.backward()
    assert x.grad.tolist() == [8.0] * 4


async def test_loop_runs_other_nodes_and_tasks_while_a_kernel_runs() -> None:
    # The kernel in a thread waits for two things only the loop can do meanwhile:
    # run an inline node of the same backward (its hook sets node_ran), and run an
    # unrelated task (which sets task_ran).
    node_ran, task_ran = threading.Event(), threading.Event()
    seen: list[bool] = []

    def slow(ctx: Any, g: agrad.Tensor) -> agrad.Tensor:
        seen.append(node_ran.wait(WAIT) and task_ran.wait(WAIT))
        return g

    x = agrad.ones(3, requires_grad=True)
    other = x * 5.0  # created first: lower sequence number, popped after the slow node
    other.register_hook(lambda g: node_ran.set())
    loss = probe_class(True, slow).apply(x * 1.0).sum() + other.sum()

    async def unrelated() -> None:
        await anyio.sleep(0.01)
        task_ran.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(unrelated)
        await loss.backward()
    assert seen == [True]
    assert x.grad.tolist() == [6.0] * 3


async def test_a_small_backward_gets_a_slot_before_a_huge_one_finishes(interop_threads: Any) -> None:
    # One worker, so two kernel slots (Note [Kernel slots]).  The huge backward has
    # 16 branches of offloaded kernels and is in line for slots when the small one
    # asks; slots are handed out in order, so the small one finishes after a few of
    # the huge one's kernels, not after all of them.  The huge one's kernels hold
    # their slots until the small one is in line: forced, so a slow loop (a loaded
    # machine) cannot let the huge one finish first.
    interop_threads(1)
    started, small_in_line = threading.Event(), threading.Event()

    def hold(ctx: Any, g: agrad.Tensor) -> agrad.Tensor:
        started.set()
        small_in_line.wait(WAIT)
        return g

    slow = probe_class(True, hold)
    x = agrad.ones(2, requires_grad=True)
    huge = sum((slow.apply(x * float(i)).sum() for i in range(16)), agrad.tensor(0.0))
    y = agrad.ones(2, requires_grad=True)
    small = slow.apply(y * 1.0).sum()
    order: list[str] = []

    async def run_huge() -> None:
        await huge.backward()
        order.append("huge")

    async def note_small_in_line(ahead: list[InFlight]) -> None:
        pool = current_pool()
        with anyio.fail_after(WAIT):
            while all(job in ahead for job in pool._waiting):  # noqa: ASYNC110  (a line the loop's tasks join)
                await anyio.sleep(0.001)
        small_in_line.set()

    async def run_small() -> None:
        await set_in_a_thread(started)
        async with anyio.create_task_group() as tg:
            tg.start_soon(note_small_in_line, list(current_pool()._waiting))
            await small.backward()
        order.append("small")

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_huge)
        tg.start_soon(run_small)
    assert order == ["small", "huge"]
    assert x.grad.tolist() == [120.0, 120.0] and y.grad.tolist() == [1.0, 1.0]
    await pool_is_idle()


# -- failures and cancellation with kernels in threads -------------------------------------------------
async def test_a_failing_thread_kernel_is_named_and_waits_for_its_siblings() -> None:
    sibling_done = threading.Event()

    def fail(ctx: Any, g: agrad.Tensor) -> agrad.Tensor:
        raise ValueError("kernel failed in a thread")

    def sibling(ctx: Any, g: agrad.Tensor) -> agrad.Tensor:
        time.sleep(0.05)
        sibling_done.set()
        return g

    class Fails(agrad.autograd.Function):
        offload = True
        forward = staticmethod(lambda ctx, x: x * 1.0)
        backward = staticmethod(fail)

    x = agrad.ones(3, requires_grad=True)
    x.grad = agrad.full((3,), 7.0)
    failing = Fails.apply(x * 2.0).sum()
    # Recorded later, so popped first: the sibling is in its thread when the failure lands.
    loss = failing + probe_class(True, sibling).apply(x * 1.0).sum()
    with pytest.raises(ValueError, match="kernel failed in a thread") as info:
        await loss.backward()
    assert any("FailsBackward" in note for note in info.value.__notes__)
    assert sibling_done.is_set()  # Note [Kernels of a stopped task]
    assert x.grad.tolist() == [7.0] * 3
    await pool_is_idle()


async def test_cancelled_while_a_kernel_runs_waits_for_it_and_changes_nothing() -> None:
    in_kernel, cancelled, kernel_done = threading.Event(), threading.Event(), threading.Event()

    def slow(ctx: Any, g: agrad.Tensor) -> agrad.Tensor:
        in_kernel.set()
        cancelled.wait(WAIT)  # the kernel outlasts the cancellation, however slow the loop is to send it
        time.sleep(0.05)  # and most likely the loop's handling of it too (the test would still pass if not)
        kernel_done.set()
        return g * 2.0

    x = agrad.ones(3, requires_grad=True)
    loss = probe_class(True, slow).apply(x * 1.0).sum() + (x * 3.0).sum()
    refs = [weakref.ref(loss.grad_fn)]
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            async def cancel_when_in_kernel() -> None:
                await set_in_a_thread(in_kernel)
                scope.cancel()
                cancelled.set()

            tg.start_soon(cancel_when_in_kernel)
            await loss.backward(retain_graph=True)
    assert scope.cancelled_caught
    assert kernel_done.is_set()  # the backward returned only after its kernel did
    assert x.grad is None
    await pool_is_idle()
    # The retained graph runs again, all of it.
    await loss.backward()
    assert x.grad.tolist() == [5.0] * 3
    del loss
    gc.collect()
    assert [r for r in refs if r() is not None] == []


# -- lifecycle ------------------------------------------------------------------------------------------------
async def test_one_pool_per_loop_created_on_first_use() -> None:
    pool = current_pool()
    assert current_pool() is pool
    x = agrad.ones(3, requires_grad=True)
    with engine_options(offload="always"):
        await (x * 2.0).sum().backward()
    assert current_pool() is pool
    await pool_is_idle()


def _agrad_threads() -> set[threading.Thread]:
    return set(threading.enumerate())


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_no_thread_outlives_its_loop(loop: str) -> None:
    before = _agrad_threads()
    pools = []

    async def main() -> None:
        x = agrad.randn(64, 64, requires_grad=True)
        loss = (x @ x).tanh().sum() + x.exp().sum()
        with engine_options(offload="always"):
            await loss.backward()
        pools.append(current_pool())
        assert threading.active_count() > len(before)  # kernels did use threads

    for _ in range(2):
        (uvloop.run if loop == "uvloop" else asyncio.run)(main())
        assert _agrad_threads() == before  # the loop's executor was shut down with it
    assert pools[0] is not pools[1]  # a pool per loop


async def test_an_offloaded_graph_is_garbage_once_dropped() -> None:
    x = agrad.randn(16, requires_grad=True)
    y = x
    refs = []
    for _ in range(20):
        y = (y * 1.5).sin()
        refs.append(weakref.ref(y.grad_fn))
    loss = y.sum()
    with engine_options(offload="always"):
        await loss.backward()
    del y, loss
    gc.collect()
    assert [r for r in refs if r() is not None] == []
    assert x.grad is not None


# -- results do not depend on where kernels ran ---------------------------------------------------------
@pytest.mark.parametrize("create_graph", [False, True])
async def test_offloaded_and_inline_backwards_agree(create_graph: bool, rng: np.random.Generator) -> None:
    w_data, h_data = rng.standard_normal((5, 4)), rng.standard_normal((3, 4))
    results: dict[str, list[np.ndarray]] = {}
    for mode in ("never", "always"):
        w, h = agrad.tensor(w_data, requires_grad=True), agrad.tensor(h_data)
        loss = ((h @ w.mT).tanh() * (h @ w.mT).sigmoid()).sum() + w.pow(2).sum()
        with engine_options(offload=mode):
            (g,) = await agrad.autograd.grad(loss, w, create_graph=create_graph)
            results[mode] = [g.detach().numpy().copy()]
            if create_graph:
                (gg,) = await agrad.autograd.grad(g.sum(), w)
                results[mode].append(gg.numpy().copy())
    assert len(results["never"]) == len(results["always"]) == 1 + create_graph
    for a, b in zip(results["never"], results["always"]):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


# -- options ---------------------------------------------------------------------------------------------------
async def test_engine_options_nest_and_are_per_task() -> None:
    from agrad._engine._options import current_options
    default = current_options()
    seen: dict[str, Any] = {}

    async def beside() -> None:
        await anyio.sleep(0.01)
        seen["beside"] = current_options()

    async with anyio.create_task_group() as tg:
        tg.start_soon(beside)  # started outside the block: keeps the defaults
        with engine_options(time_slice=0.001, offload="never") as outer:
            assert outer.time_slice == 0.001 and outer.offload == "never"
            with engine_options(offload_threshold=5) as inner:
                assert (inner.time_slice, inner.offload, inner.offload_threshold) == (0.001, "never", 5)
            assert current_options() == outer
            await anyio.sleep(0.02)
    assert current_options() == default
    assert seen["beside"] == default


@pytest.mark.parametrize("kwargs,match", [
    ({"time_slice": 0}, "time_slice must be a positive"),
    ({"time_slice": -1.0}, "time_slice must be a positive"),
    ({"offload": "sometimes"}, "offload must be one of"),
    ({"offload_threshold": -1}, "offload_threshold must be a non-negative int"),
    ({"offload_threshold": 1.5}, "offload_threshold must be a non-negative int"),
])
def test_engine_options_reject_bad_values(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match), engine_options(**kwargs):
        pass


@pytest.mark.parametrize("bad", [0, -2, 1.5, True])
def test_set_num_interop_threads_rejects_bad_values(bad: Any, interop_threads: Any) -> None:
    with pytest.raises(RuntimeError, match="Expected positive number of threads"):
        interop_threads(bad)


def test_interop_threads_default_to_usable_cpus(interop_threads: Any) -> None:
    assert agrad.get_num_interop_threads() >= 1
    interop_threads(3)
    assert agrad.get_num_interop_threads() == 3


# -- chains of kernels in one job (Note [Offloaded chains]) --------------------------------------------------
def count_jobs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the jobs kernel pools start."""
    started = [0]
    offload = KernelPool.offload

    def counting(self: KernelPool, task: Any, job: Any, helpers: int = 0) -> bool:
        ok = offload(self, task, job, helpers)
        started[0] += ok
        return ok

    monkeypatch.setattr(KernelPool, "offload", counting)
    return started


async def test_a_straight_chain_runs_as_one_job_and_hooks_or_grad_split_it(monkeypatch: pytest.MonkeyPatch) -> None:
    def chain(hook_at: int | None = None) -> tuple[agrad.Tensor, agrad.Tensor]:
        x = agrad.tensor([1.0, 2.0], dtype=agrad.float64, requires_grad=True)
        y = x * 1.0
        for i in range(10):  # ten nodes, each with one edge to a node nothing else feeds
            y = y * 2.0 if i % 2 else (y + 1.0).sin()
            if i == hook_at:
                y.register_hook(lambda g: g * 3.0)
        return x, y.sum()

    with engine_options(offload="always"):
        started = count_jobs(monkeypatch)
        x, loss = chain()
        await loss.backward()
        # SumBackward heads the job; the AccumulateGrad at the end is pinned to the loop.
        assert started[0] == 1
        expected = x.grad.numpy().copy()

        started[0] = 0
        x, loss = chain(hook_at=4)
        await loss.backward()
        assert started[0] == 2  # the hooked node starts a new job, after its hook ran on the loop
        np.testing.assert_allclose(x.grad.numpy(), 3.0 * expected, rtol=1e-15)

        started[0] = 0
        x, loss = chain()
        (g,) = await agrad.autograd.grad(loss, x)
        assert started[0] == 17  # inputs= / grad(): one job per node (all but the AccumulateGrad)
        np.testing.assert_allclose(g.numpy(), expected, rtol=1e-15)


async def test_a_failure_inside_a_chain_names_its_node() -> None:
    class Fails(agrad.autograd.Function):
        offload = True

        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            raise ArithmeticError("failed in the middle of a chain")

    x = agrad.ones(3, requires_grad=True)
    loss = ((Fails.apply(x.exp() * 2.0) + 1.0) * 3.0).sum()
    with engine_options(offload="always"), pytest.raises(ArithmeticError) as info:
        await loss.backward()
    assert any("FailsBackward" in note for note in info.value.__notes__)
    assert x.grad is None
    await pool_is_idle()


def test_a_closed_loop_that_offloaded_is_garbage() -> None:
    """Note [Holding a loop weakly]: the loop's kernel pool lives in an anyio
    RunVar keyed weakly by the loop; it must not keep the loop alive."""
    loops: list[weakref.ref] = []

    async def main() -> None:
        loops.append(weakref.ref(asyncio.get_running_loop()))
        x = agrad.tensor([1.0, 2.0], requires_grad=True)
        with engine_options(offload="always"):
            await (x * 2).sum().backward()
        assert x.grad.tolist() == [2.0, 2.0]

    for _ in range(3):
        asyncio.run(main())
    gc.collect()
    assert [r() for r in loops] == [None] * 3


# -- Note [Offloading when busy] ---------------------------------------------------------------------------
async def test_mid_size_kernels_go_to_threads_only_while_the_worker_is_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    offloaded: list[str] = []
    job = _graph_task.kernel_job

    def recording_job(task: GraphTask, node: Any, *args: Any) -> Any:
        offloaded.append(node.name())
        return job(task, node, *args)

    monkeypatch.setattr(_graph_task, "kernel_job", recording_job)
    xs = [agrad.ones(200_000, requires_grad=True) for _ in range(3)]
    options = EngineOptions()
    assert options.busy_offload_threshold < xs[0].exp().grad_fn._work < options.offload_threshold

    await xs[0].exp().sum().backward()  # alone: the loop has nothing else to do
    assert offloaded == []
    async with anyio.create_task_group() as tg:  # three in line: the worker is busy
        for x in xs:
            tg.start_soon(x.exp().sum().backward)
    assert "ExpBackward0" in offloaded
    for x in xs:
        np.testing.assert_allclose(x.grad.numpy(), np.e * (1 + (x is xs[0])))

    offloaded.clear()
    with engine_options(busy_offload_threshold=1 << 30):  # a threshold above the node: inline
        async with anyio.create_task_group() as tg:
            for x in xs:
                tg.start_soon(x.exp().sum().backward)
    assert offloaded == []


# -- Note [Products in row blocks] -------------------------------------------------------------------------
def linear_layer(rng: np.random.Generator, rows: int) -> tuple[agrad.Tensor, ...]:
    """x (rows, 512), W (512, 512), b (512,), all requiring grad: ``F.linear``'s
    AddmmBackward0 is a mid-size node (above the busy threshold, below the offload
    threshold) when ``rows`` is 64."""
    return tuple(agrad.tensor(rng.standard_normal(shape), requires_grad=True)
                 for shape in ((rows, 512), (512, 512), (512,)))


def expected_grads(x: agrad.Tensor, w: agrad.Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """d sum(x @ w.T + b) / d (x, w, b), in numpy."""
    ones = np.ones((x.shape[0], w.shape[0]))
    return ones @ w.detach().numpy(), ones.T @ x.detach().numpy(), ones.sum(axis=0)


async def test_a_lone_backward_runs_its_products_in_row_blocks(
        product_blocks: list[tuple[str, int, int]], interop_threads: Any, rng: np.random.Generator,
        monkeypatch: pytest.MonkeyPatch) -> None:
    interop_threads(2)
    mm = REGISTRY["mm"]
    meet = threading.Barrier(2, timeout=WAIT)  # a block waits for the other: both run at once, on two threads

    def meeting(xp: Any, input: Any, mat2: Any, _forward: Any = mm.forward) -> Any:
        if input.shape[0] in (32, 256):
            meet.wait()
        return _forward(xp, input, mat2)

    monkeypatch.setitem(vars(mm), "forward", meeting)
    x, w, b = linear_layer(rng, 64)
    loss = agrad.nn.functional.linear(x, w, b).sum()
    options = EngineOptions()
    assert options.busy_offload_threshold <= loss.grad_fn.next_functions[0][0]._work < options.offload_threshold
    product_blocks.clear()
    with engine_options(offload_threshold=options.busy_offload_threshold):  # the node goes to a thread
        await loss.backward()
    # Each of the node's two products (g @ W for x, x.T @ g for W) in two row blocks,
    # one on the kernel thread that runs the node, one on a helper; none on the loop.
    blocks = [(rows, thread) for name, rows, thread in product_blocks if name == "mm"]
    assert sorted(rows for rows, _ in blocks) == [32, 32, 256, 256]
    assert threading.get_ident() not in {thread for _, thread in blocks}
    assert len({thread for _, thread in blocks}) == 2
    for got, want in zip((x.grad, w.grad, b.grad), expected_grads(x, w)):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)
    await pool_is_idle()  # the helpers' reserved slots were given back

    product_blocks.clear()  # by default the mid-size node stays on the loop, whole
    await agrad.nn.functional.linear(x, w, b).sum().backward()
    assert [(rows, thread) for name, rows, thread in product_blocks if name == "mm"] == [
        (64, threading.get_ident()), (512, threading.get_ident())]


@pytest.mark.filterwarnings("ignore::agrad.BlockingCallWarning")  # a blocking twin on the loop, on purpose
async def test_products_stay_whole_when_busy_for_one_row_or_blocking(
        product_blocks: list[tuple[str, int, int]], interop_threads: Any, rng: np.random.Generator) -> None:
    interop_threads(2)
    layers = [linear_layer(rng, 64) for _ in range(3)]
    product_blocks.clear()
    async with anyio.create_task_group() as tg:  # three in line: the worker is busy
        for x, w, b in layers:
            tg.start_soon(agrad.nn.functional.linear(x, w, b).sum().backward)
    assert sorted(rows for name, rows, _ in product_blocks if name == "mm") == [64] * 3 + [512] * 3

    product_blocks.clear()
    x, w, b = linear_layer(rng, 64)
    agrad.nn.functional.linear(x, w, b).sum().backward_sync()  # the blocking twin: inline, whole
    assert [(rows, thread) for name, rows, thread in product_blocks if name == "mm"] == [
        (64, threading.get_ident()), (512, threading.get_ident())]
    for got, want in zip((x.grad, w.grad, b.grad), expected_grads(x, w)):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)

    product_blocks.clear()
    x = agrad.tensor(rng.standard_normal((1, 4096)), requires_grad=True)  # a gradient of one row
    w = agrad.tensor(rng.standard_normal((4096, 4096)), requires_grad=True)
    b = agrad.zeros(4096, dtype=agrad.float64, requires_grad=True)
    await agrad.nn.functional.linear(x, w, b).sum().backward()
    assert sorted(rows for name, rows, _ in product_blocks if name == "mm") == [1, 4096]
    await pool_is_idle()


def test_a_product_split_in_row_blocks_fails_as_the_whole_product() -> None:
    from agrad._engine._row_blocks import RowBlocks

    a, b = np.ones((64, 600)), np.ones((512, 600))  # 600 != 512: every block fails
    with pytest.raises(RuntimeError, match=r"^mat1 and mat2 shapes cannot be multiplied \(64x600 and 512x600\)$"):
        RowBlocks(1).forward(REGISTRY["mm"], [a, b], {})
    np.testing.assert_array_equal(RowBlocks(1).forward(REGISTRY["mm"], [a, b.T], {}), a @ b.T)


def test_a_jobs_helpers_count_as_workers(interop_threads: Any) -> None:
    # A job with a helper on 2 cores: a second job queued beside it waits for the
    # job's worker instead of starting another thread (3 threads on 2 cores).
    interop_threads(2)
    started: list[Any] = []
    posted: list[Any] = []
    pool = KernelPool(started.append, posted.append)
    first, second = InFlight(0), InFlight(0)
    assert pool.offload(first, lambda: None, helpers=1)
    assert len(started) == 2 and pool.running == 2  # its worker and its helper
    assert pool.offload(second, lambda: None)  # queued: a slot is free (2n in flight)
    assert len(started) == 2  # no third thread
    started[0]()  # the worker runs both jobs, then the helper's thread is let go
    started[1]()
    for done in posted:
        done()
    assert pool.running == 0 and pool._helpers == 0 and first.outstanding == second.outstanding == 0
