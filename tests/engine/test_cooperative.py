"""``agrad.cooperative``: synchronous agrad code run from a coroutine, in time slices.

What Note [Cooperative calls] (``agrad/_engine/_cooperative.py``) promises,
checked on asyncio, uvloop and trio: the same results and gradients as the
plain call; pauses between ops (a plain forward on the loop has none); big
kernels in the kernel pool's threads; blocking backwards inside ``fn``
awaited on the loop's CPU worker and committed in the caller's task;
exceptions and cancellations that reach ``fn`` and then its caller, leaving
``.grad`` as it was and the loop usable; the caller's context; many calls on
one loop and calls on several loops at once.

Time is :class:`FakeClock` from ``test_cpu_worker.py``, patched into the
three modules that read it (the cooperative call reads it once per op, a
graph task once per node, the worker twice per turn), so a slice of
:data:`SLICE_TICKS` ticks runs at most that many ops whatever the machine's
load; tests count ops between a ticker's wake-ups, never wall-clock time.
Values are small integers in float64 where gradients are compared with ``==``.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import inspect
import os
import sys
import threading
import types
import warnings
from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel
import numpy as np
import pytest

import agrad
from agrad import _ambient
from agrad._engine import _cooperative, _cpu_worker, _graph_task
from agrad._engine._options import current_options
from agrad._engine._pool import current_pool
from agrad._ops._registry import REGISTRY
from agrad.autograd.graph import engine_options
from agrad.utils.checkpoint import checkpoint
from tests.engine import test_cpu_worker
from tests.engine._models import assert_close, leaves, mlp_arrays, mlp_loss, params
from tests.engine.test_cpu_worker import (
    MAX_PER_PASS,
    SLICE,
    SLICE_TICKS,
    WORKER_NAME,
    Cancellable,
    FakeClock,
    Tick,
    assert_grad,
    chain,
    on_call,
    runs,
)
from tests.helpers import WAIT_S, requires_torch, torch

pytest.importorskip("greenlet")
pytestmark = pytest.mark.anyio

WAIT = WAIT_S  # a thread rendezvous, or a call that takes well under 0.1 s, is hung after this long
LR = 0.5
AGRAD_DIR = os.path.dirname(agrad.__file__) + os.sep


cancellable = test_cpu_worker.cancellable  # its fixture: anyio's CancelScope, and asyncio's Task.cancel


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    for module in (_cooperative, _graph_task, _cpu_worker):
        monkeypatch.setattr(module, "clock", fake)
    return fake


def worker_is_idle() -> bool:
    worker = _cpu_worker._WORKER.get(None)
    return worker is None or (not worker._running and not worker._line)


def counted_ops(log: list[int], n: int) -> Callable[[agrad.Tensor], agrad.Tensor]:
    """``fn(x)``: ``n`` ops ``x + 1``, each logged once it ran."""

    def fn(x: agrad.Tensor) -> agrad.Tensor:
        for i in range(n):
            x = x + 1.0
            log.append(i)
        return x

    return fn


class Ticker:
    """A task that takes a turn at every loop pass and records how many ops
    (entries of ``log``) ran between two of its turns."""

    def __init__(self, log: list[Any]) -> None:
        self.log = log
        self.between: list[int] = []
        self._done = anyio.Event()
        self._started = anyio.Event()

    async def run(self) -> None:
        seen = len(self.log)
        self._started.set()
        while not self._done.is_set():
            await anyio.lowlevel.checkpoint()
            self.between.append(len(self.log) - seen)
            seen = len(self.log)

    async def started(self) -> None:
        await self._started.wait()

    def stop(self) -> None:
        self._done.set()


# -- 1. the same results as the plain call ------------------------------------------------------


def backward_step(w: agrad.Tensor, x: agrad.Tensor) -> float:
    loss = ((w * x).tanh() * w).sum()
    loss.backward_sync()
    return loss.item()


def grad_step(w: agrad.Tensor, x: agrad.Tensor) -> tuple[agrad.Tensor, ...]:
    loss = ((w @ x).exp() / 3.0).sum()
    return agrad.autograd.grad_sync(loss, [w, x])


def training_step(p: dict[str, agrad.Tensor], steps: int = 2) -> list[float]:
    """``steps`` steps of SGD on the MLP of ``_models.py``: forward, loss,
    ``backward_sync()``, an update under ``no_grad``."""
    losses = []
    for _ in range(steps):
        loss = mlp_loss(agrad, p)
        loss.backward_sync()
        with agrad.no_grad():
            for k in params(p):
                p[k] -= LR * p[k].grad
                p[k].grad = None
        losses.append(loss.item())
    return losses


@pytest.mark.filterwarnings("ignore::agrad.BlockingCallWarning")  # a blocking twin on the loop, on purpose
@pytest.mark.parametrize("offload", ["auto", "always"])
async def test_backward_sync_gives_the_plain_calls_result_and_gradient(offload: str) -> None:
    rng = np.random.default_rng(1)
    data = rng.standard_normal((2, 3, 4))
    plain_w, coop_w = (agrad.tensor(data[0], dtype=agrad.float64, requires_grad=True) for _ in range(2))
    x = agrad.tensor(data[1], dtype=agrad.float64)
    expected = backward_step(plain_w, x)
    with engine_options(offload=offload):  # type: ignore[arg-type]
        got = await agrad.cooperative(backward_step, coop_w, x)
    assert got == pytest.approx(expected, rel=1e-12)
    assert_close(coop_w.grad, plain_w.grad.numpy(), rtol=1e-12)


@pytest.mark.filterwarnings("ignore::agrad.BlockingCallWarning")  # a blocking twin on the loop, on purpose
@pytest.mark.parametrize("offload", ["auto", "always"])
async def test_grad_sync_gives_the_plain_calls_gradients(offload: str) -> None:
    rng = np.random.default_rng(2)
    w = agrad.tensor(rng.standard_normal((3, 4)) / 4, dtype=agrad.float64, requires_grad=True)
    x = agrad.tensor(rng.standard_normal((4, 2)) / 4, dtype=agrad.float64, requires_grad=True)
    expected = grad_step(w, x)
    with engine_options(offload=offload):  # type: ignore[arg-type]
        got = await agrad.cooperative(grad_step, w, x)
    assert len(got) == 2
    for g, e in zip(got, expected):
        assert_close(g, e.numpy(), rtol=1e-12)
    assert w.grad is None and x.grad is None  # grad() accumulates nothing


@pytest.mark.filterwarnings("ignore::agrad.BlockingCallWarning")  # a blocking twin on the loop, on purpose
@pytest.mark.parametrize("offload", ["auto", "always"])
async def test_a_training_step_gives_the_plain_calls_parameters(offload: str) -> None:
    arrays = mlp_arrays(np.random.default_rng(3))
    plain, coop = leaves(agrad, arrays), leaves(agrad, arrays)
    expected = training_step(plain)
    with engine_options(offload=offload):  # type: ignore[arg-type]
        got = await agrad.cooperative(training_step, coop)
    assert got == pytest.approx(expected, rel=1e-12)
    for k in params(coop):
        assert_close(coop[k], plain[k].detach().numpy(), rtol=1e-12)
        assert coop[k].grad is None and coop[k].is_leaf


@requires_torch
async def test_a_training_step_matches_torch() -> None:
    arrays = mlp_arrays(np.random.default_rng(4), sizes=(4, 8, 8, 3))
    ours = leaves(agrad, arrays)
    got = await agrad.cooperative(training_step, ours, 3)
    theirs = leaves(torch, arrays)
    expected = []
    for _ in range(3):
        loss = mlp_loss(torch, theirs)
        loss.backward()
        with torch.no_grad():
            for k in params(theirs):
                theirs[k] -= LR * theirs[k].grad
                theirs[k].grad = None
        expected.append(loss.item())
    assert got == pytest.approx(expected, rel=1e-10)
    for k in params(ours):
        assert_close(ours[k], theirs[k])


async def test_arguments_and_return_value_pass_through() -> None:
    def fn(a: agrad.Tensor, /, b: float, *, scale: float) -> tuple[str, agrad.Tensor]:
        return "ok", (a + b) * scale

    tag, out = await agrad.cooperative(fn, agrad.tensor([1.0, 2.0]), 1.0, scale=3.0)
    assert tag == "ok" and out.tolist() == [6.0, 9.0]


# -- 2. pauses between ops ----------------------------------------------------------------------


async def cancel_after_ops(log: list[int], scope: anyio.CancelScope) -> None:
    """Cancel ``scope`` once the call has run a slice's worth of counted ops."""
    while len(log) < SLICE_TICKS:  # noqa: ASYNC110  (counts ops of the call, not a time)
        await anyio.lowlevel.checkpoint()
    scope.cancel()


async def _ops_beside_a_ticker(cooperatively: bool) -> tuple[list[int], Ticker, agrad.Tensor]:
    """Run ``8 * SLICE_TICKS`` counted ops (cooperatively or not) beside a ticker."""
    log: list[int] = []
    ticker = Ticker(log)
    ops = counted_ops(log, 8 * SLICE_TICKS)
    x = agrad.zeros(3, dtype=agrad.float64)
    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker.run)
        await ticker.started()
        with engine_options(time_slice=SLICE, offload="never"):
            y = await agrad.cooperative(ops, x) if cooperatively else ops(x)
        await anyio.lowlevel.checkpoint()
        ticker.stop()
    return log, ticker, y


async def test_a_long_forward_pauses_between_ops() -> None:
    # A ticker on the same loop sees at most one slice of ops run between two
    # of its turns, and the ops spread over many passes.
    n = 8 * SLICE_TICKS
    log, ticker, y = await _ops_beside_a_ticker(cooperatively=True)
    assert y.tolist() == [float(n)] * 3
    assert len(log) == n
    assert max(ticker.between) <= MAX_PER_PASS, ticker.between
    assert sum(1 for k in ticker.between if k) >= n // MAX_PER_PASS


async def test_a_plain_forward_on_the_loop_does_not_pause() -> None:
    # The sanity check of the test above: the same code called directly runs
    # every op before the ticker's next turn.
    _, ticker, _ = await _ops_beside_a_ticker(cooperatively=False)
    assert max(ticker.between) == 8 * SLICE_TICKS


async def test_cooperative_calls_and_backwards_share_one_slice() -> None:
    # A cooperative forward and an awaited backward in flight together: the
    # ticker still waits at most one slice of ops and nodes (one budget per loop).
    log: list[Any] = []
    n = 6 * SLICE_TICKS
    x, loss = chain(log, "node", n)
    ticker = Ticker(log)

    async def forward() -> None:
        y = await agrad.cooperative(counted_ops(log, n), agrad.zeros(2, dtype=agrad.float64))
        assert y.tolist() == [float(n)] * 2

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker.run)
        await ticker.started()
        with engine_options(time_slice=SLICE, offload="never"):
            async with anyio.create_task_group() as work:
                work.start_soon(forward)
                work.start_soon(loss.backward)
        ticker.stop()
    assert len(log) == 2 * n
    assert max(ticker.between) <= MAX_PER_PASS, ticker.between
    ops_and_nodes = runs(["node" if entry == "node" else "op" for entry in log])
    assert len(ops_and_nodes) > 2  # they took turns
    assert_grad(x, 2.0)


# -- 3. big kernels in the kernel pool ----------------------------------------------------------


@pytest.fixture
def exp_threads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The threads ``exp``'s forward kernel runs on, one entry per call."""
    op = REGISTRY["exp"]
    forward = op.forward
    threads: list[int] = []

    def recorded(xp: Any, *arrays: Any, **attrs: Any) -> Any:
        threads.append(threading.get_ident())
        return forward(xp, *arrays, **attrs)

    monkeypatch.setitem(vars(op), "forward", recorded)
    return threads


def exps(small: agrad.Tensor, big: agrad.Tensor) -> tuple[agrad.Tensor, agrad.Tensor]:
    """``exp`` of a small and of a big tensor, each twice (first small, then big)."""
    return small.exp().exp(), big.exp().exp()


@pytest.mark.parametrize("offload", ["always", "never", "auto"])
async def test_big_kernels_run_in_the_kernel_pool(offload: str, exp_threads: list[int]) -> None:
    # ``offload_threshold`` 1000 elements: with "auto" the 10-element kernels
    # run on the loop's thread and the 2000-element ones in a kernel thread.
    small = agrad.full((10,), 0.5, dtype=agrad.float64)
    big = agrad.full((2000,), 0.25, dtype=agrad.float64)
    expected = exps(small, big)
    exp_threads.clear()
    loop_thread = threading.get_ident()
    with engine_options(offload=offload, offload_threshold=1000):  # type: ignore[arg-type]
        got = await agrad.cooperative(exps, small, big)
    on_loop = [t == loop_thread for t in exp_threads]
    assert on_loop == {"always": [False] * 4, "never": [True] * 4, "auto": [True, True, False, False]}[offload]
    for g, e in zip(got, expected):
        assert (g.numpy() == e.numpy()).all()


async def test_no_kernel_threads_with_multithreading_disabled(exp_threads: list[int]) -> None:
    with agrad.autograd.set_multithreading_enabled(False), engine_options(offload="always"):
        await agrad.cooperative(exps, agrad.ones(2), agrad.ones(3))
    assert exp_threads == [threading.get_ident()] * 4


async def test_an_offloaded_kernels_error_is_pytorchs() -> None:
    with engine_options(offload="always"), pytest.raises(RuntimeError, match=r"^mat1 and mat2 shapes cannot be"):
        await agrad.cooperative(lambda: agrad.ones(2, 3) @ agrad.ones(4, 5))
    assert worker_is_idle()


@pytest.mark.parametrize("bias_rows", [1, 64], ids=["bias-row", "bias-matrix"])
async def test_a_lone_product_runs_in_row_blocks_on_idle_threads(
        product_blocks: list[tuple[str, int, int]], bias_rows: int) -> None:
    # Note [Products in row blocks]: (64, 512) @ (512, 512) is above the busy
    # threshold and below the offload threshold: one block on the loop's thread and
    # one per idle kernel thread, one per core; addmm's 2-D input is split with its rows.
    rng = np.random.default_rng(0)
    a, w = rng.standard_normal((64, 512)), rng.standard_normal((512, 512))
    bias = rng.standard_normal((bias_rows, 512))
    loop_thread = threading.get_ident()

    def products() -> tuple[agrad.Tensor, agrad.Tensor]:
        return agrad.tensor(a) @ agrad.tensor(w), agrad.addmm(agrad.tensor(bias), agrad.tensor(a), agrad.tensor(w))

    got_mm, got_addmm = await agrad.cooperative(products)
    np.testing.assert_allclose(got_mm.numpy(), a @ w, rtol=1e-12, atol=1e-12)  # blocks sum in BLAS's order
    np.testing.assert_allclose(got_addmm.numpy(), bias + a @ w, rtol=1e-12, atol=1e-12)
    parts = agrad.get_num_interop_threads()  # the loop's thread and the idle kernel threads: one per core
    for name in ("matmul", "addmm"):
        blocks = [(rows, thread) for n, rows, thread in product_blocks if n == name]
        assert len(blocks) == parts and sum(rows for rows, _ in blocks) == 64
        assert [thread == loop_thread for _, thread in blocks].count(True) == 1

    product_blocks.clear()
    with engine_options(offload="never"):
        await agrad.cooperative(products)
    assert product_blocks == [("matmul", 64, loop_thread), ("addmm", 64, loop_thread)]


# -- 4. blocking backwards inside: awaited on the worker, committed by the caller ---------------


async def test_backward_sync_inside_runs_on_the_worker_in_slices_and_commits_inline() -> None:
    # Note [Backwards inside a cooperative call]: fn's own greenlet runs the
    # backward in the worker's turns and commits it before fn goes on.
    log: list[str] = []
    node_tasks: set[str] = set()
    x, loss = chain(log, "node", 5 * SLICE_TICKS, lambda: node_tasks.add(anyio.get_current_task().name))
    hooked: list[tuple[str, str, list[float]]] = []
    in_fn: contextvars.ContextVar[str] = contextvars.ContextVar("in_fn", default="caller")
    x.register_post_accumulate_grad_hook(lambda t: hooked.append((anyio.get_current_task().name, in_fn.get(),
                                                                  t.grad.tolist())))

    def fn() -> list[float]:
        in_fn.set("fn")
        loss.backward_sync()
        return x.grad.tolist()  # committed when backward_sync returns

    ticker = Ticker(log)
    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker.run)
        await ticker.started()
        with engine_options(time_slice=SLICE, offload="never"):
            assert await agrad.cooperative(fn) == [2.0, 2.0, 2.0]
        ticker.stop()
    assert node_tasks == {WORKER_NAME}
    assert hooked == [(WORKER_NAME, "fn", [2.0, 2.0, 2.0])]  # once, in fn's context
    assert max(ticker.between) <= MAX_PER_PASS  # awaited in slices, not run through on the loop
    assert_grad(x, 2.0)


@pytest.mark.filterwarnings("ignore::agrad.BlockingCallWarning")  # a blocking twin on the loop, on purpose
async def test_a_reentrant_checkpoint_inside() -> None:
    def fn(w: agrad.Tensor) -> agrad.Tensor:
        y = checkpoint(lambda t: (t * 3.0).tanh() * t, w, use_reentrant=True)
        y.sum().backward_sync()
        return y

    plain_w, coop_w = (agrad.tensor([0.5, -1.0, 2.0], dtype=agrad.float64, requires_grad=True) for _ in range(2))
    expected = fn(plain_w)
    got = await agrad.cooperative(fn, coop_w)
    assert (got.detach().numpy() == expected.detach().numpy()).all()
    assert_close(coop_w.grad, plain_w.grad.numpy(), rtol=1e-12)


# -- 5. exceptions ------------------------------------------------------------------------------


@pytest.mark.parametrize("offload", ["never", "always"])
async def test_an_ops_error_reaches_the_caller_unchanged(offload: str) -> None:
    def fn() -> agrad.Tensor:
        return agrad.ones(2, 3) @ agrad.ones(4, 5)

    with pytest.raises(RuntimeError) as plain:
        fn()
    with engine_options(offload=offload), pytest.raises(RuntimeError) as coop:  # type: ignore[arg-type]
        await agrad.cooperative(fn)
    assert str(coop.value) == str(plain.value)
    assert type(coop.value) is type(plain.value)
    assert worker_is_idle()


@requires_torch
async def test_an_ops_error_is_pytorchs() -> None:
    with pytest.raises(RuntimeError) as expected:
        torch.ones(2, 3) @ torch.ones(4, 5)
    with pytest.raises(RuntimeError) as got:
        await agrad.cooperative(lambda: agrad.ones(2, 3) @ agrad.ones(4, 5))
    assert str(got.value) == str(expected.value)


class Boom(Exception):
    pass


async def test_an_exception_of_fn_reaches_the_caller_as_it_is() -> None:
    boom = Boom("from fn")

    def fn(x: agrad.Tensor) -> None:
        for _ in range(3 * SLICE_TICKS):  # after a few pauses
            x = x * 1.0
        raise boom

    with engine_options(time_slice=SLICE), pytest.raises(Boom) as caught:
        await agrad.cooperative(fn, agrad.ones(2))
    assert caught.value is boom
    assert worker_is_idle()


async def test_stop_iteration_from_fn_reaches_the_caller() -> None:
    # StopIteration is how the worker hears that a job's steps returned; fn's
    # own must not be mistaken for that (it was returned as None).
    def fn() -> None:
        agrad.ones(2).exp()
        next(iter(()))

    with pytest.raises((StopIteration, RuntimeError)):
        await agrad.cooperative(fn)


async def test_a_failing_backward_inside_leaves_grad_unchanged() -> None:
    log: list[str] = []

    def fail() -> None:
        raise Boom("in a node")

    x, loss = chain(log, "node", 3 * SLICE_TICKS, on_call(2 * SLICE_TICKS, fail))
    before = agrad.full((3,), 7.0, dtype=agrad.float64)
    x.grad = before
    seen: list[type[BaseException]] = []

    def fn() -> str:
        try:
            loss.backward_sync()
        except Boom:
            seen.append(Boom)
            raise
        return "unreachable"

    with engine_options(time_slice=SLICE), pytest.raises(Boom, match="in a node"):
        await agrad.cooperative(fn)
    assert seen == [Boom]
    assert x.grad is before and (before.numpy() == 7.0).all()
    assert len(log) == 2 * SLICE_TICKS  # it stopped at the failing node
    # fn may also catch it and go on: the loop and the worker are fine.
    x2, loss2 = chain(log, "after", 10)
    await agrad.cooperative(loss2.backward_sync)
    assert_grad(x2, 2.0)
    assert worker_is_idle()


# -- 6. cancellation ----------------------------------------------------------------------------


async def assert_still_usable() -> None:
    """A later cooperative call and a later awaited backward on this loop work."""
    log: list[str] = []
    x, loss = chain(log, "later", 2 * SLICE_TICKS)
    await loss.backward(retain_graph=True)
    assert_grad(x, 2.0)
    await agrad.cooperative(loss.backward_sync)
    assert_grad(x, 4.0)
    assert (await agrad.cooperative(lambda: agrad.ones(2) * 3.0)).tolist() == [3.0, 3.0]
    assert worker_is_idle()
    assert _ambient.running == 0  # no greenlet left switched in


class Recorder:
    """What ``fn`` saw of its end: the exception raised inside it, and its ``finally``."""

    def __init__(self) -> None:
        self.raised: list[type[BaseException]] = []
        self.finished = False

    def run(self, body: Callable[[], Any]) -> Any:
        try:
            return body()
        except BaseException as exc:
            self.raised.append(type(exc))
            raise
        finally:
            self.finished = True


async def test_cancelling_the_caller_raises_in_fn_where_it_is_paused(cancellable: Cancellable) -> None:
    log: list[int] = []
    at_cancel: list[int] = []
    recorder = Recorder()
    limit = 100 * SLICE_TICKS  # never reached: the call is cancelled long before

    def fn() -> None:
        recorder.run(lambda: counted_ops(log, limit)(agrad.zeros(2)))

    async def canceller() -> None:
        while len(log) < 2 * SLICE_TICKS:  # noqa: ASYNC110  (counts ops of the call, not a time)
            await anyio.lowlevel.checkpoint()
        at_cancel.append(len(log))
        cancellable.cancel()

    async def call() -> None:
        await agrad.cooperative(fn)

    with engine_options(time_slice=SLICE, offload="never"):
        async with anyio.create_task_group() as tg:
            tg.start_soon(canceller)
            assert await cancellable.run(call)
    assert recorder.raised == [anyio.get_cancelled_exc_class()] and recorder.finished
    # The worker may resume fn for the rest of its pass before the caller hears
    # of the cancellation: within one slice, as for a backward.
    assert len(log) - at_cancel[0] <= MAX_PER_PASS
    await assert_still_usable()


async def test_a_timeout_raises_in_fn_and_then_in_the_caller() -> None:
    # anyio.fail_after on a real clock: fn runs ops until it is cancelled at a pause.
    recorder = Recorder()
    ops = 0

    def fn() -> None:
        def body() -> None:
            nonlocal ops
            x = agrad.zeros(2)
            while ops < 10**7:  # a bound, for a broken cancellation to fail rather than hang
                x = x + 1.0
                ops += 1

        recorder.run(body)

    with pytest.raises(TimeoutError), anyio.fail_after(0.05):
        await agrad.cooperative(fn)
    assert recorder.raised == [anyio.get_cancelled_exc_class()] and recorder.finished
    assert 0 < ops < 10**7
    await assert_still_usable()


async def test_cancelling_a_backward_inside_fn_leaves_grad_unchanged(cancellable: Cancellable) -> None:
    log: list[str] = []
    x, loss = chain(log, "node", 4 * SLICE_TICKS, on_call(2 * SLICE_TICKS, cancellable.cancel))
    before = agrad.full((3,), 7.0, dtype=agrad.float64)
    x.grad = before
    hooked: list[agrad.Tensor] = []
    x.register_post_accumulate_grad_hook(hooked.append)
    recorder = Recorder()

    async def call() -> None:
        await agrad.cooperative(recorder.run, loss.backward_sync)

    with engine_options(time_slice=SLICE, offload="never"):
        assert await cancellable.run(call)
    assert recorder.raised == [anyio.get_cancelled_exc_class()] and recorder.finished
    assert x.grad is before and (before.numpy() == 7.0).all() and hooked == []
    assert len(log) <= 2 * SLICE_TICKS + MAX_PER_PASS  # it stopped within a slice
    await assert_still_usable()


BACKENDS = [pytest.param(("asyncio", {}), id="asyncio"),
            pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop"),
            pytest.param(("trio", {}), id="trio")]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_backward_in_fns_cleanup_after_cancellation_does_not_hang(backend: tuple[str, dict[str, Any]]) -> None:
    # fn's ``finally`` runs a blocking backward after its caller was cancelled.
    # It may run or raise the cancellation again; it must not wait forever for
    # a caller that is no longer serving it.  Run in a thread of its own, so
    # that a hang fails the test after WAIT seconds instead of stopping the run.
    w = agrad.ones(3, dtype=agrad.float64, requires_grad=True)
    log: list[int] = []
    outcome: dict[str, Any] = {}

    def fn() -> None:
        try:
            counted_ops(log, 100 * SLICE_TICKS)(agrad.zeros(2))
        finally:
            try:
                (w * 2.0).sum().backward_sync()
                outcome["cleanup"] = "ran"
            except BaseException as exc:
                outcome["cleanup"] = type(exc)
                raise

    async def main() -> None:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(cancel_after_ops, log, scope)
                with engine_options(time_slice=SLICE, offload="never"):
                    await agrad.cooperative(fn)
        outcome["caught"] = scope.cancelled_caught
        outcome["cancelled"] = anyio.get_cancelled_exc_class()

    def run() -> None:
        try:
            anyio.run(main, backend=backend[0], backend_options=backend[1])
        except BaseException as exc:  # reported below, in the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)  # daemon: a hung loop must not block the exit
    thread.start()
    thread.join(WAIT)
    assert not thread.is_alive(), "the cooperative call never returned"
    assert "error" not in outcome, outcome
    assert outcome["caught"]
    if outcome["cleanup"] == "ran":
        assert_grad(w, 2.0)
    else:
        assert outcome["cleanup"] is outcome["cancelled"] and w.grad is None


def unawaited_agrad_coroutines() -> list[Any]:
    """Coroutines of agrad's own code alive now that were never started."""
    gc.collect()
    return [obj for obj in gc.get_objects()
            if type(obj) is types.CoroutineType and inspect.getcoroutinestate(obj) == inspect.CORO_CREATED
            and obj.cr_code.co_filename.startswith(AGRAD_DIR)]


class AsyncDouble(agrad.autograd.Function):
    """``2 x``, whose backward is a coroutine: a nested backward hands it to the caller."""

    @staticmethod
    def forward(ctx: Any, x: agrad.Tensor) -> agrad.Tensor:
        return x * 2.0

    @staticmethod
    async def backward(ctx: Any, g: agrad.Tensor) -> agrad.Tensor:
        return g * 2.0


async def test_cancelled_as_fn_hands_over_an_async_backward_leaves_no_coroutine() -> None:
    # fn's caller is cancelled in the step where fn's backward hands it an
    # ``async def backward`` to await: that coroutine must be closed, not left
    # "never awaited" (a RuntimeWarning when it is collected, whenever that is),
    # and the backward aborts with .grad untouched.
    w = agrad.ones(3, dtype=agrad.float64, requires_grad=True)
    recorder = Recorder()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with anyio.CancelScope() as scope:
            def fn() -> None:
                loss = AsyncDouble.apply(w).sum()
                scope.cancel()
                loss.backward_sync()

            await agrad.cooperative(recorder.run, fn)
        left = unawaited_agrad_coroutines()
        for coroutine in left:  # no warning later, in another test
            coroutine.close()
    assert scope.cancelled_caught
    assert recorder.raised == [anyio.get_cancelled_exc_class()] and recorder.finished
    assert w.grad is None
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == [] and left == []
    await assert_still_usable()


async def test_a_cancellation_reaches_fn_at_a_pause_not_inside_a_short_backward() -> None:
    # Note [Backwards inside a cooperative call]: a backward that fits in the
    # slice runs and commits as backward_sync() does anywhere; the caller's
    # cancellation is delivered at the next pause (here: after fn returned).
    w = agrad.ones(3, dtype=agrad.float64, requires_grad=True)
    recorder = Recorder()
    with anyio.CancelScope() as scope:
        def fn() -> None:
            loss = (w * 2.0).sum()
            scope.cancel()
            loss.backward_sync()

        await agrad.cooperative(recorder.run, fn)
    assert scope.cancelled_caught
    assert recorder.raised == [] and recorder.finished
    assert w.grad.tolist() == [2.0, 2.0, 2.0]
    await assert_still_usable()


async def test_cancelling_during_an_offloaded_kernel_waits_for_it(
        cancellable: Cancellable, monkeypatch: pytest.MonkeyPatch) -> None:
    # The cancellation reaches fn only once its kernel in a thread has finished
    # (Note [Kernels of a stopped task]): fn's finally runs after the kernel.
    started, release = threading.Event(), threading.Event()
    events: list[str] = []
    op = REGISTRY["exp"]
    forward = op.forward

    def held(xp: Any, *arrays: Any, **attrs: Any) -> Any:
        started.set()
        release.wait(WAIT)
        events.append("kernel done")
        return forward(xp, *arrays, **attrs)

    monkeypatch.setitem(vars(op), "forward", held)

    def fn() -> None:
        try:
            agrad.ones(4).exp()
        finally:
            events.append("finally")

    async def canceller() -> None:
        with anyio.fail_after(WAIT):
            while not started.is_set():  # noqa: ASYNC110  (set by the kernel's thread)
                await anyio.sleep(0.001)
        cancellable.cancel()
        for _ in range(10):  # the caller is cancelled, and fn has not yet been resumed
            await anyio.lowlevel.checkpoint()
        events.append("cancelled")
        release.set()

    async def call() -> None:
        await agrad.cooperative(fn)

    with engine_options(offload="always"):
        async with anyio.create_task_group() as tg:
            tg.start_soon(canceller)
            assert await cancellable.run(call)
    assert events == ["cancelled", "kernel done", "finally"]
    monkeypatch.setitem(vars(op), "forward", forward)
    await assert_still_usable()


async def test_cancelling_calls_waiting_for_kernel_slots(monkeypatch: pytest.MonkeyPatch) -> None:
    # Eight calls, each one offloaded kernel, held until the test lets them go:
    # n kernels run, n more are queued and the other calls wait in line for a
    # slot (Note [Kernel slots]).  Cancelling a call whose kernel runs and
    # n + 1 calls whose kernels have not started (so at least one in line)
    # stops those; the others get their slots and finish, and the pool ends idle.
    threads = agrad.get_num_interop_threads()
    n = 2 * threads + 4
    started: list[float] = []
    release = threading.Event()
    op = REGISTRY["exp"]
    forward = op.forward

    def held(xp: Any, *arrays: Any, **attrs: Any) -> Any:
        started.append(float(arrays[0][0]))
        release.wait(WAIT)
        return forward(xp, *arrays, **attrs)

    monkeypatch.setitem(vars(op), "forward", held)
    scopes: dict[int, anyio.CancelScope] = {}
    results: dict[int, Any] = {}
    finished: set[int] = set()

    def fn(i: int) -> list[float]:
        try:
            return agrad.full((3,), float(i), dtype=agrad.float64).exp().tolist()
        finally:
            finished.add(i)

    async def call(i: int) -> None:
        with anyio.CancelScope() as scope:
            scopes[i] = scope
            results[i] = await agrad.cooperative(fn, i)
        if scope.cancelled_caught:
            results[i] = "cancelled"

    with engine_options(offload="always"):
        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(call, i)
            with anyio.fail_after(WAIT):
                while len(started) < threads or len(scopes) < n:  # noqa: ASYNC110  (the kernels' threads append)
                    await anyio.sleep(0.001)
            for _ in range(10):
                await anyio.lowlevel.checkpoint()
            assert len(started) == threads  # the others are queued or in line
            not_started = [i for i in range(n) if float(i) not in started]
            cancelled = {int(started[0]), *not_started[:threads + 1]}
            for i in cancelled:
                scopes[i].cancel()
            for _ in range(10):
                await anyio.lowlevel.checkpoint()
            release.set()

    assert {i for i, r in results.items() if r == "cancelled"} == cancelled
    for i in set(range(n)) - cancelled:
        assert results[i] == [float(np.exp(float(i)))] * 3
    assert finished == set(range(n))
    assert len(started) < n  # a call cancelled in line never ran its kernel
    pool = current_pool()
    assert pool.running == 0 and not pool._queue and not pool._waiting
    monkeypatch.setitem(vars(op), "forward", forward)
    await assert_still_usable()


async def test_fn_that_swallows_the_cancellation_still_cancels_its_caller() -> None:
    # fn catches the cancellation at a pause and returns: its caller was
    # cancelled all the same, and hears of it (its result is dropped).
    log: list[int] = []
    caught: list[type[BaseException]] = []

    def fn() -> str:
        try:
            counted_ops(log, 100 * SLICE_TICKS)(agrad.zeros(2))
        except BaseException as exc:
            caught.append(type(exc))
            agrad.ones(2) * 2.0  # ops after it still run
            return "swallowed"
        return "unreachable"

    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_after_ops, log, scope)
            with engine_options(time_slice=SLICE, offload="never"):
                await agrad.cooperative(fn)
            pytest.fail("the caller was not cancelled")
    assert scope.cancelled_caught and caught == [anyio.get_cancelled_exc_class()]
    await assert_still_usable()


async def test_a_call_cancelled_before_it_starts_never_runs_fn() -> None:
    ran: list[bool] = []
    with anyio.CancelScope() as scope:
        scope.cancel()
        await agrad.cooperative(ran.append, True)
    assert scope.cancelled_caught and ran == []
    await assert_still_usable()


# -- 7. the caller's context --------------------------------------------------------------------

_who: contextvars.ContextVar[str] = contextvars.ContextVar("test_cooperative_who", default="nobody")


async def test_fn_sees_the_callers_grad_mode_and_engine_options() -> None:
    w = agrad.ones(2, requires_grad=True)

    def fn() -> tuple[bool, float, str, agrad.Tensor]:
        return agrad.is_grad_enabled(), current_options().time_slice, _who.get(), w * 2.0

    token = _who.set("caller")
    try:
        with agrad.no_grad(), engine_options(time_slice=3 * SLICE):
            enabled, time_slice, who, y = await agrad.cooperative(fn)
        assert (enabled, time_slice, who) == (False, 3 * SLICE, "caller")
        assert y.grad_fn is None and not y.requires_grad
        enabled, time_slice, _, y = await agrad.cooperative(fn)
        assert (enabled, time_slice) == (True, current_options().time_slice)
        assert y.grad_fn is not None
    finally:
        _who.reset(token)


async def test_what_fn_changes_in_its_context_does_not_leak_to_the_caller() -> None:
    log: list[str] = []
    seen: set[tuple[bool, str]] = set()
    x, loss = chain(log, "node", 10, lambda: seen.add((agrad.is_grad_enabled(), _who.get())))

    def fn() -> bool:
        agrad.set_grad_enabled(False)  # the function form: set until changed back
        _who.set("fn")
        loss.backward_sync()  # its backward runs in fn's context
        return agrad.is_grad_enabled()

    assert await agrad.cooperative(fn) is False
    assert agrad.is_grad_enabled() and _who.get() == "nobody"
    assert seen == {(False, "fn")}
    assert_grad(x, 2.0)


# -- 8. many calls on one loop ------------------------------------------------------------------


@pytest.mark.parametrize("offload", ["auto", "always"])
async def test_many_cooperative_calls_and_backwards_on_one_loop(offload: str) -> None:
    # 16 calls (each a forward spanning several slices and a blocking backward
    # into the shared leaf w) and 4 awaited backwards into w, all in flight:
    # every result right, and w.grad their exact sum.  With "always" every op
    # and node waits in line for one of the pool's few kernel slots.
    n_calls, n_backwards = 16, 4
    w = agrad.zeros(3, dtype=agrad.float64, requires_grad=True)
    log: list[int] = []
    results: dict[int, float] = {}

    def step(i: int) -> float:
        y = w
        for _ in range(2 * SLICE_TICKS):
            y = y + 0.0
            log.append(i)
        loss = (y * float(i) + 1.0).sum()
        loss.backward_sync()
        return loss.item()

    async def call(i: int) -> None:
        results[i] = await agrad.cooperative(step, i)

    backward_log: list[str] = []
    chains = [chain(backward_log, f"b{j}", 2 * SLICE_TICKS) for j in range(n_backwards)]
    plain_losses = [(w * 100.0 * (j + 1)).sum() for j in range(n_backwards)]

    with engine_options(time_slice=SLICE, offload=offload):  # type: ignore[arg-type]
        async with anyio.create_task_group() as tg:
            for i in range(1, n_calls + 1):
                tg.start_soon(call, i)
            for (_, loss), plain in zip(chains, plain_losses):
                tg.start_soon(loss.backward)
                tg.start_soon(plain.backward)

    assert results == {i: 3.0 for i in range(1, n_calls + 1)}
    assert len(runs([str(i) for i in log])) > n_calls  # the calls took turns
    expected = sum(range(1, n_calls + 1)) + 100.0 * sum(range(1, n_backwards + 1))
    assert_grad(w, expected)
    for x, _ in chains:
        assert_grad(x, 2.0)
    assert worker_is_idle()


# -- 9. calls on several event loops at once ----------------------------------------------------


def test_calls_on_two_loops_in_threads_at_once() -> None:
    # Each thread runs asyncio.run of cooperative calls; inside them the two
    # calls meet (both greenlets switched in at once, on two threads), then
    # each computes the gradient of a shared weight by an awaited grad_sync.
    w = agrad.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    both_in: list[int] = []  # how many calls' greenlets run, on any thread, as the two meet
    meet = threading.Barrier(2, action=lambda: both_in.append(_ambient.running), timeout=WAIT)
    results: dict[Any, Any] = {}
    node_tasks: set[tuple[int, str]] = set()

    def record_node() -> None:
        node_tasks.add((threading.get_ident(), anyio.get_current_task().name))

    def saliency(k: int, in_loop: bool) -> tuple[agrad.Tensor, agrad.Tensor]:
        x = agrad.tensor([[float(k), 1.0]], dtype=agrad.float64, requires_grad=True)
        h = x @ w
        if in_loop:
            if k % 10 == 0:  # the first call of each loop waits for the other loop's
                meet.wait()
            h = Tick.apply(h, [], "t", record_node)
        return agrad.autograd.grad_sync((h * h).sum(), [x, w])

    async def main(thread: int) -> None:
        async with anyio.create_task_group() as tg:
            for k in range(4):
                async def call(k: int = k) -> None:
                    results[thread, k] = await agrad.cooperative(saliency, 10 * thread + k, True)

                tg.start_soon(call)

    def thread_main(thread: int) -> None:
        try:
            asyncio.run(main(thread))
        except BaseException as exc:  # reported below, in the test's thread
            results[thread, "error"] = exc

    threads = [threading.Thread(target=thread_main, args=(t,)) for t in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT * 3)
    assert not any(t.is_alive() for t in threads)
    assert all(k != "error" for _, k in results), results
    assert both_in == [2]
    assert {name for _, name in node_tasks} == {WORKER_NAME}
    assert {ident for ident, _ in node_tasks} == {t.ident for t in threads}
    for thread in (1, 2):
        for k in range(4):
            expected = saliency(10 * thread + k, False)
            for g, e in zip(results[thread, k], expected):
                assert (g.numpy() == e.numpy()).all()
    assert w.grad is None


# -- 10. without greenlet -----------------------------------------------------------------------


async def test_without_greenlet_the_error_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "greenlet", None)
    with pytest.raises(ImportError, match=r"greenlet.*pip install 'agrad\[serving\]'"):
        await agrad.cooperative(lambda: agrad.ones(2))
    assert worker_is_idle()


_COMMITS_AFTER_A_SPENT_SLICE = """
import asyncio, sys
import agrad
from agrad.autograd.graph import engine_options

async def main():
    xs = [agrad.zeros(4, requires_grad=True) for _ in range(3)]

    def step(x):  # the root gradient is the caller's: the commit clones it, an op
        x.backward_sync(agrad.ones(4))

    with engine_options(time_slice=1e-9):  # every op finds its slice spent
        await asyncio.gather(*(agrad.cooperative(step, x) for x in xs))
    assert [x.grad.tolist() for x in xs] == [[1.0] * 4] * 3

asyncio.run(main())
"""


def test_concurrent_calls_whose_commits_find_the_slice_spent_do_not_hang() -> None:
    """Note [A commit never pauses]: a commit that paused inside one call held the
    commit lock while the loop ran the next call's commit, which then blocked the
    loop's thread for good.  Run in a fresh process so that a hang fails the test."""
    import subprocess

    try:
        subprocess.run([sys.executable, "-c", _COMMITS_AFTER_A_SPENT_SLICE], check=True, timeout=120,
                       capture_output=True, text=True)
    except subprocess.TimeoutExpired:
        pytest.fail("the event loop hung: a commit paused with the commit lock held")
