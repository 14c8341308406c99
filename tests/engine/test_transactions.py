"""``.grad`` is transactional under every way a backward can end (issue 14, items 1-4).

A backward either commits all of its gradients or none (Note [Atomic
commit]); a caller that sees it fail (exception, cancellation, timeout,
KeyboardInterrupt) sees every ``.grad`` as it was, unless the exception says
it came after the commit (Note [After the commit]).  The cancellation tests
cancel at every loop pass a backward lives through, so the instant the old
engine reported after its commit is among them on every run.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import numpy as np
import pytest

import agrad
from agrad._engine._staged_grads import _PROVISIONAL, COMMITTED_NOTE
from agrad.autograd.graph import engine_options
from tests.helpers import requires_torch, torch

SCHEDULES = [pytest.param({}, id="inline"), pytest.param({"offload": "always"}, id="offloaded")]


def _graph(width: int) -> tuple[agrad.Tensor, agrad.Tensor, agrad.Tensor, np.ndarray, np.ndarray]:
    """Two leaves with old gradients, a loss over ``width`` branches, and the
    gradients the backward adds."""
    x = agrad.tensor([1.0, 2.0], requires_grad=True)
    w = agrad.tensor([3.0, 4.0], requires_grad=True)
    x.grad = agrad.tensor([10.0, 20.0])
    loss = sum(((x * w) * (i + 1)).sum() for i in range(width))
    k = width * (width + 1) / 2
    return x, w, loss, np.array([3.0, 4.0]) * k, np.array([1.0, 2.0]) * k


def _check(x: agrad.Tensor, w: agrad.Tensor, dx: np.ndarray, dw: np.ndarray, raised: bool) -> None:
    """All or nothing: untouched if the call raised, whole if it returned."""
    if raised:
        assert x.grad.tolist() == [10.0, 20.0] and w.grad is None
    else:
        np.testing.assert_allclose(x.grad.numpy(), [10.0, 20.0] + dx)
        np.testing.assert_allclose(w.grad.numpy(), dw)
    assert not _PROVISIONAL


class _Trial:
    """One trial: the graph of ``_graph(4)`` and an awaited backward of it that
    records whether it returned."""

    def __init__(self) -> None:
        self.x, self.w, self.loss, self.dx, self.dw = _graph(4)
        self.returned = False

    async def backward(self) -> None:
        await self.loss.backward()
        self.returned = True

    def check(self) -> bool:
        """Check all or nothing; whether the backward was cancelled."""
        _check(self.x, self.w, self.dx, self.dw, raised=not self.returned)
        return not self.returned


async def _for_each_pass(trial: Callable[[int], Awaitable[bool]]) -> int:
    """Run ``trial(k)`` for k = 0, 1, ... until a trial's backward finished
    before it could be cancelled; return how many were cancelled."""
    cancelled = 0
    for k in range(10_000):
        if not await trial(k):
            return cancelled
        cancelled += 1
    raise AssertionError("the backward never finished")


async def _passes(k: int) -> None:
    for _ in range(k):
        await anyio.lowlevel.checkpoint()


# -- item 1: a cancellation is never reported after the commit ----------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("mechanism", ["scope.cancel", "fail_after", "move_on_after", "sibling fails"])
async def test_anyio_cancellation_at_every_pass_is_all_or_nothing(anyio_backend: Any, schedule: dict,
                                                                   mechanism: str) -> None:
    async def trial(k: int) -> bool:
        t = _Trial()

        async def stop(scope: anyio.CancelScope) -> None:
            await _passes(k)
            if mechanism == "sibling fails":
                raise LookupError
            scope.cancel()

        with engine_options(time_slice=1e-6, **schedule):
            try:
                if mechanism == "fail_after":
                    with anyio.fail_after(k * 1e-4):
                        await t.backward()
                elif mechanism == "move_on_after":
                    with anyio.move_on_after(k * 1e-4):
                        await t.backward()
                else:
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(stop, tg.cancel_scope)
                        await t.backward()
                        await anyio.sleep_forever()
            except* (TimeoutError, LookupError):
                pass
        return t.check()

    assert await _for_each_pass(trial) >= 1


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("mechanism", ["Task.cancel", "asyncio.timeout", "wait_for", "TaskGroup"])
def test_asyncio_cancellation_at_every_pass_is_all_or_nothing(loop: str, schedule: dict, mechanism: str) -> None:
    """The issue's reproduction (``Task.cancel()`` after one loop pass) and its
    relatives, on asyncio's own mechanisms."""

    async def trial(k: int) -> bool:
        t = _Trial()

        async def fail() -> None:
            for _ in range(k):
                await asyncio.sleep(0)
            raise LookupError

        with engine_options(time_slice=1e-6, **schedule):
            try:
                if mechanism == "Task.cancel":
                    task = asyncio.create_task(t.backward())
                    for _ in range(k):
                        await asyncio.sleep(0)
                    task.cancel()
                    await task
                elif mechanism == "asyncio.timeout":
                    async with asyncio.timeout(k * 1e-4):
                        await t.backward()
                elif mechanism == "wait_for":
                    await asyncio.wait_for(t.backward(), k * 1e-4)
                else:
                    async with asyncio.TaskGroup() as tg:
                        tg.create_task(fail())
                        tg.create_task(t.backward())
            except* (asyncio.CancelledError, TimeoutError, LookupError):
                pass
        return t.check()

    async def main() -> None:
        assert await _for_each_pass(trial) >= 1

    if loop == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(main())
    else:
        asyncio.run(main())


@pytest.mark.parametrize("mechanism", ["move_on_after", "fail_after", "cancel_scope.cancel", "sibling fails"])
def test_trio_cancellation_at_every_pass_is_all_or_nothing(mechanism: str) -> None:
    trio = pytest.importorskip("trio")

    async def trial(k: int) -> bool:
        t = _Trial()

        with engine_options(time_slice=1e-6):
            try:
                if mechanism == "move_on_after":
                    with trio.move_on_after(k * 1e-4):
                        await t.backward()
                elif mechanism == "fail_after":
                    with trio.fail_after(k * 1e-4):
                        await t.backward()
                else:
                    async with trio.open_nursery() as nursery:
                        async def stop() -> None:
                            for _ in range(k):
                                await trio.lowlevel.checkpoint()
                            if mechanism == "sibling fails":
                                raise LookupError
                            nursery.cancel_scope.cancel()

                        nursery.start_soon(stop)
                        await t.backward()
                        await trio.sleep_forever()
            except* (trio.TooSlowError, LookupError):
                pass
        return t.check()

    async def main() -> None:
        assert await _for_each_pass(trial) >= 1

    trio.run(main)


# -- item 2: the commit is atomic ------------------------------------------------------------------------------


def _read_only(values: list[float]) -> agrad.Tensor:
    a = np.array(values, dtype=np.float32)
    a.flags.writeable = False
    return agrad.from_numpy(a)


@pytest.mark.parametrize("failing_first", [False, True])
def test_an_expanded_grad_fails_the_commit_before_any_leaf_changes(failing_first: bool) -> None:
    """PyTorch refuses to accumulate in place into a ``.grad`` whose elements
    share memory; agrad raises the same error before touching any leaf."""
    x = agrad.tensor([1.0, 2.0], requires_grad=True)
    w = agrad.tensor([3.0, 4.0], requires_grad=True)
    x.grad = agrad.ones(2)
    w.grad = agrad.ones(1).expand(2)
    old_w = w.grad
    loss = (w * x).sum() if failing_first else (x * w).sum()
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        loss.backward_sync()
    assert x.grad.tolist() == [1.0, 1.0] and x.grad._version == 0
    assert w.grad is old_w and w.grad.tolist() == [1.0, 1.0]


@requires_torch
def test_an_expanded_grad_fails_as_in_pytorch() -> None:
    t = torch.tensor([1.0, 2.0], requires_grad=True)
    t.grad = torch.ones(1).expand(2)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        (t * 3).sum().backward()


def test_a_read_only_grad_is_accumulated_out_of_place() -> None:
    """The issue's reproduction: PyTorch writes through a read-only array; agrad
    cannot, so it sums out of place, and every leaf gets its gradient."""
    x = agrad.tensor([1.0, 2.0], requires_grad=True)
    w = agrad.tensor([3.0, 4.0], requires_grad=True)
    x.grad = agrad.ones(2)
    w.grad = _read_only([1.0, 1.0])
    (x * w).sum().backward_sync()
    assert x.grad.tolist() == [4.0, 5.0]
    assert w.grad.tolist() == [2.0, 3.0]


# -- item 3: KeyboardInterrupt ---------------------------------------------------------------------------------

@pytest.mark.usefixtures("default_sigint")
def test_an_interrupt_during_the_commit_is_raised_after_it_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGINT arrives while the commit changes leaves: the commit finishes, then
    KeyboardInterrupt is raised, with the note that the gradients are committed."""
    leaves = [agrad.tensor([float(i)], requires_grad=True) for i in range(4)]
    for t in leaves:
        t.grad = agrad.zeros(1)
    bump = agrad.Tensor._bump_version

    def bump_and_interrupt(self: agrad.Tensor) -> None:
        bump(self)
        signal.raise_signal(signal.SIGINT)  # between two leaves' updates

    monkeypatch.setattr(agrad.Tensor, "_bump_version", bump_and_interrupt)
    with pytest.raises(KeyboardInterrupt) as info:
        sum(t * 2 for t in leaves).backward_sync()
    monkeypatch.undo()
    assert [t.grad.item() for t in leaves] == [2.0] * 4
    assert COMMITTED_NOTE in info.value.__notes__
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert not _PROVISIONAL


@pytest.mark.usefixtures("default_sigint")
def test_an_interrupt_while_a_nested_backward_runs_in_a_fresh_thread_waits_for_it() -> None:
    """Note [Never abandon a spilled thread]: SIGINT reaches the main thread while
    it waits for a reentrant backward spilled to a fresh thread; that backward
    still finishes (committing provisionally) before the outer one aborts and
    undoes it, and no thread is left to commit afterwards."""
    inside, go, nested_committed = threading.Event(), threading.Event(), threading.Event()
    leaf = agrad.tensor([1.0], requires_grad=True)
    leaf.register_post_accumulate_grad_hook(lambda t: nested_committed.set())  # runs at the nested commit

    class Slow(agrad.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: agrad.Tensor) -> agrad.Tensor:
            return x.clone()

        @staticmethod
        def backward(ctx: Any, g: agrad.Tensor) -> agrad.Tensor:
            inside.set()
            assert go.wait(30)
            return g

    class Outer(agrad.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: agrad.Tensor) -> agrad.Tensor:
            return x.clone()

        @staticmethod
        def backward(ctx: Any, g: agrad.Tensor) -> agrad.Tensor:
            with agrad.enable_grad():
                (Slow.apply(leaf) * 5).sum().backward_sync()  # reentrant: spills to a fresh thread
            return g

    def interrupt() -> None:
        assert inside.wait(30)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        go.set()

    timer = threading.Thread(target=interrupt)
    timer.start()
    x = agrad.tensor([2.0], requires_grad=True)
    with engine_options(max_recursion_depth=1), pytest.raises(KeyboardInterrupt) as info:
        Outer.apply(x).sum().backward_sync()
    # The nested backward finished (and committed) before the interrupt left the
    # outer one, whose abort undid it; a thread left running would commit later.
    assert nested_committed.is_set()
    timer.join()
    assert leaf.grad is None and x.grad is None
    assert not _PROVISIONAL
    assert COMMITTED_NOTE not in getattr(info.value, "__notes__", [])


# -- item 4: hooks and callbacks after the commit ---------------------------------------------------------------


@pytest.mark.anyio
async def test_a_post_accumulate_hook_that_raises_says_the_gradients_are_committed(api: Any) -> None:
    """Note [After the commit]: the hook's exception propagates (as in PyTorch),
    the commit stands, and the exception says so; hooks after it do not run."""
    x = agrad.tensor([1.0, 2.0], requires_grad=True)
    w = agrad.tensor([3.0, 4.0], requires_grad=True)
    seen = []

    def bad(t: agrad.Tensor) -> None:
        raise ValueError("hook failed")

    x.register_post_accumulate_grad_hook(bad)
    w.register_post_accumulate_grad_hook(lambda t: seen.append(t))
    with pytest.raises(ValueError, match="hook failed") as info:
        await api.backward((x * w).sum())
    assert COMMITTED_NOTE in info.value.__notes__
    assert x.grad.tolist() == [3.0, 4.0] and w.grad.tolist() == [1.0, 2.0]
    assert not _PROVISIONAL


@pytest.mark.anyio
async def test_a_final_callback_that_raises_says_the_gradients_are_committed(api: Any) -> None:
    x = agrad.tensor([1.0, 2.0], requires_grad=True)

    def queue(g: agrad.Tensor) -> None:
        agrad.autograd.queue_callback(lambda: 1 / 0)

    y = x * 2
    y.register_hook(queue)
    with pytest.raises(ZeroDivisionError) as info:
        await api.backward(y.sum())
    assert COMMITTED_NOTE in info.value.__notes__
    assert x.grad.tolist() == [2.0, 2.0]


@pytest.mark.anyio
async def test_a_hook_that_raises_after_a_nested_commit_undoes_it_with_its_parent(api: Any) -> None:
    """A reentrant backward's commit is provisional: when its post-accumulate
    hook raises, the outer backward fails and undoes it, so no note is added."""
    leaf = agrad.tensor([1.0], requires_grad=True)
    leaf.register_post_accumulate_grad_hook(lambda t: 1 / 0)

    class Nested(agrad.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: agrad.Tensor) -> agrad.Tensor:
            return x.clone()

        @staticmethod
        def backward(ctx: Any, g: agrad.Tensor) -> agrad.Tensor:
            with agrad.enable_grad():
                (leaf * 5).sum().backward_sync()
            return g

    x = agrad.tensor([2.0], requires_grad=True)
    with pytest.raises(ZeroDivisionError) as info:
        await api.backward(Nested.apply(x).sum())
    assert COMMITTED_NOTE not in getattr(info.value, "__notes__", [])
    assert leaf.grad is None and x.grad is None
    assert not _PROVISIONAL


def test_a_backward_stopped_before_awaiting_an_async_node_leaves_no_coroutine() -> None:
    """An interrupt that reaches the engine between an ``async def backward``
    node's apply and the driver's await (the SIGINT soak hit it) must not leave
    a coroutine that was never awaited (a RuntimeWarning, an error under
    pytest's filterwarnings)."""
    import gc
    import warnings

    from agrad._engine._run import backward_task

    class Async(agrad.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: agrad.Tensor) -> agrad.Tensor:
            return x.clone()

        @staticmethod
        async def backward(ctx: Any, g: agrad.Tensor) -> agrad.Tensor:
            return g

    x = agrad.tensor([1.0], requires_grad=True)
    task = backward_task(Async.apply(x).sum(), None, None, False, None)
    steps = task.run(None)
    request = next(steps)
    while not hasattr(request, "__await__"):  # run up to the async node's request
        request = steps.send(None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(KeyboardInterrupt):
            steps.throw(KeyboardInterrupt())
        del request, steps
        gc.collect()
    assert [str(w.message) for w in caught] == []
    assert x.grad is None
