"""Concurrency basics: blocking twins inside a loop and from threads, concurrent awaited
backwards into shared leaves, and cancellation.

Sums are compared with ``==`` on float64 arrays: every value is an integer, so
any order of accumulation gives the same bits, and "sums exactly" means exactly.
Concurrency is forced, not hoped for: the graphs contain a rendezvous (a hook
or an ``async def backward``) that every backward must reach before any of
them may finish, so all of them are in flight at once with gradients staged.
(Load tests live elsewhere.)
"""

from __future__ import annotations

import threading
from typing import Any

import anyio
import anyio.lowlevel
import numpy as np
import pytest

import agrad
from tests.engine._models import assert_exactly_equal, grads, make_rendezvous

pytestmark = pytest.mark.anyio

N_THREADS = 8
N_TASKS = 20
CHAIN = 20_000


def shared_leaves() -> dict[str, agrad.Tensor]:
    w = np.arange(12, dtype=np.float64).reshape(3, 4) - 5
    return {"w": agrad.tensor(w, requires_grad=True), "b": agrad.tensor(np.arange(4.0) - 1, requires_grad=True)}


def integer_loss(p: dict[str, agrad.Tensor], i: int, rendezvous: Any = None) -> agrad.Tensor:
    """A loss whose gradients w.r.t. ``p`` are integers, different for each ``i``.

    ``rendezvous`` (a function of a tensor) is applied to an intermediate, deep
    enough that some leaf gradients are already staged when it is reached.
    """
    x = agrad.tensor((np.arange(6, dtype=np.float64).reshape(2, 3) + i) % 5 - 2)
    h = x @ p["w"] + p["b"]
    if rendezvous is not None:
        h = rendezvous(h)
    return (h * h).sum() * (i % 3 + 1) + (p["w"] * (i - 7)).sum() + (p["b"] * i).sum()


def sequential_sums(indices: Any) -> dict[str, np.ndarray]:
    """The gradients accumulated by the backwards of ``integer_loss(i)``, run one after the other."""
    p = shared_leaves()
    for i in indices:
        integer_loss(p, i).backward_sync()
    return grads(p)


@pytest.mark.filterwarnings("ignore::agrad.BlockingCallWarning")  # a blocking twin on the loop, on purpose
async def test_blocking_twins_inside_a_running_loop() -> None:
    p = shared_leaves()
    integer_loss(p, 1).backward_sync()
    agrad.autograd.backward_sync([integer_loss(p, 2)])
    gw, gb = agrad.autograd.grad_sync(integer_loss(p, 3), [p["w"], p["b"]])
    assert_exactly_equal(grads(p), sequential_sums([1, 2]))
    single = sequential_sums([3])
    assert (gw.numpy() == single["w"]).all() and (gb.numpy() == single["b"]).all()
    # The loop is still alive and serving after the blocking calls.
    await anyio.lowlevel.checkpoint()
    await integer_loss(p, 4).backward()
    assert_exactly_equal(grads(p), sequential_sums([1, 2, 4]))


@pytest.mark.filterwarnings("ignore::agrad.BlockingCallWarning")  # a blocking twin on the loop, on purpose
async def test_blocking_twin_while_sibling_tasks_wait() -> None:
    # A blocking backward stalls the loop but does not break it: a sibling task
    # blocked on an event it sets resumes afterwards.
    p = shared_leaves()
    started, finished = anyio.Event(), anyio.Event()
    order = []

    async def waiter() -> None:
        started.set()
        await finished.wait()
        order.append("waiter resumed")

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await started.wait()
        integer_loss(p, 5).backward_sync()
        order.append("blocking backward done")
        finished.set()
    assert order == ["blocking backward done", "waiter resumed"]
    assert_exactly_equal(grads(p), sequential_sums([5]))


# -- threads --------------------------------------------------------------------------------------
def test_backward_sync_from_threads_into_shared_leaves_sums_exactly() -> None:
    p = shared_leaves()
    barrier = threading.Barrier(N_THREADS)
    errors: list[BaseException] = []
    rounds = 3

    def wait_for_all(g: agrad.Tensor) -> None:
        barrier.wait(timeout=30)  # every thread is now mid-backward, gradients staged

    def rendezvous(h: agrad.Tensor) -> agrad.Tensor:
        h = h * 1.0
        h.register_hook(wait_for_all)
        return h

    def work(t: int) -> None:
        try:
            for r in range(rounds):
                integer_loss(p, t * rounds + r, rendezvous).backward_sync()
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(N_THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert errors == []
    assert_exactly_equal(grads(p), sequential_sums(range(N_THREADS * rounds)))


def test_grad_sync_from_threads_does_not_touch_shared_grads() -> None:
    p = shared_leaves()
    p["w"].grad = agrad.ones(3, 4, dtype=agrad.float64)
    results: dict[int, Any] = {}
    barrier = threading.Barrier(N_THREADS)

    def work(t: int) -> None:
        barrier.wait(timeout=30)
        results[t] = agrad.autograd.grad_sync(integer_loss(p, t), [p["w"], p["b"]])

    threads = [threading.Thread(target=work, args=(t,)) for t in range(N_THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert sorted(results) == list(range(N_THREADS))
    for t, (gw, gb) in results.items():
        single = sequential_sums([t])
        assert (gw.numpy() == single["w"]).all() and (gb.numpy() == single["b"]).all()
    assert (p["w"].grad.numpy() == 1).all() and p["b"].grad is None


# -- concurrent awaited backwards ----------------------------------------------------------------------
async def test_concurrent_awaited_backwards_sum_exactly() -> None:
    p = shared_leaves()
    rendezvous, state = make_rendezvous(N_TASKS)
    losses = [integer_loss(p, i, rendezvous) for i in range(N_TASKS)]

    async with anyio.create_task_group() as tg:
        for loss in losses:
            tg.start_soon(loss.backward)
    assert state["arrived"] == N_TASKS  # all twenty were in flight at once
    assert_exactly_equal(grads(p), sequential_sums(range(N_TASKS)))


async def test_concurrent_grads_on_one_retained_graph() -> None:
    p = shared_leaves()
    rendezvous, _ = make_rendezvous(N_TASKS)
    loss = integer_loss(p, 3, rendezvous)
    results = []

    async def one() -> None:
        results.append(await agrad.autograd.grad(loss, [p["w"], p["b"]], retain_graph=True))

    async with anyio.create_task_group() as tg:
        for _ in range(N_TASKS):
            tg.start_soon(one)
    single = sequential_sums([3])
    assert len(results) == N_TASKS
    for gw, gb in results:
        assert (gw.numpy() == single["w"]).all() and (gb.numpy() == single["b"]).all()
    assert p["w"].grad is None and p["b"].grad is None


# -- cancellation -------------------------------------------------------------------------------------
def long_chain(x: agrad.Tensor, n: int = CHAIN) -> tuple[agrad.Tensor, agrad.Tensor]:
    """``n`` small nodes in a chain; returns (a retained intermediate near the root, the loss)."""
    y = x
    for i in range(n):
        y = y * 1.0 if i % 2 else y + 0.0
    near_root = y * 2.0
    near_root.retain_grad()
    return near_root, (near_root * x).sum()


@pytest.mark.parametrize("how", ["move_on_after", "cancel() from a hook"])
@pytest.mark.parametrize("prior_grad", [False, True], ids=["grad None", "grad set"])
async def test_cancelled_backward_changes_nothing_and_the_next_one_works(how: str, prior_grad: bool) -> None:
    x = agrad.tensor([1.0, 2.0, 3.0], dtype=agrad.float64, requires_grad=True)
    if prior_grad:
        x.grad = agrad.tensor([10.0, 20.0, 30.0], dtype=agrad.float64)
    near_root, loss = long_chain(x)
    reached: list[str] = []

    with anyio.CancelScope() as scope:
        if how == "move_on_after":
            scope.deadline = anyio.current_time() + 0.002
        else:
            def cancel(g: agrad.Tensor) -> None:
                reached.append("hook")  # runs first thing in the backward, long before the end
                scope.cancel()

            near_root.register_hook(cancel)
        await loss.backward(retain_graph=True)
        reached.append("backward returned")
    assert scope.cancelled_caught
    assert "backward returned" not in reached
    assert reached == ([] if how == "move_on_after" else ["hook"])
    # Nothing was committed: the leaf and the retained intermediate are as before.
    if prior_grad:
        assert x.grad.tolist() == [10.0, 20.0, 30.0]
    else:
        assert x.grad is None
    assert near_root.grad is None

    # The next backward, on the same (retained) graph, works and commits once.
    await loss.backward()
    before = [10.0, 20.0, 30.0] if prior_grad else [0.0, 0.0, 0.0]
    # d/dx sum(2 x * x) = 4x
    assert x.grad.tolist() == [b + 4 * v for b, v in zip(before, [1.0, 2.0, 3.0])]
    assert near_root.grad.tolist() == [1.0, 2.0, 3.0]


async def test_cancelling_one_of_several_concurrent_backwards() -> None:
    # Cancelling one backward leaves its siblings (on shared leaves) untouched.
    p = shared_leaves()
    x = agrad.tensor([1.0, 2.0], dtype=agrad.float64, requires_grad=True)
    _, long_loss = long_chain(x)
    losses = [integer_loss(p, i) for i in range(4)]

    async with anyio.create_task_group() as tg:
        for loss in losses:
            tg.start_soon(loss.backward)

        async def cancelled() -> None:
            with anyio.move_on_after(0.002) as scope:
                await (long_loss + (p["w"] * 1000.0).sum()).backward()
            assert scope.cancelled_caught

        tg.start_soon(cancelled)
    assert x.grad is None
    assert_exactly_equal(grads(p), sequential_sums(range(4)))


async def test_engine_works_after_a_cancelled_grad() -> None:
    x = agrad.tensor([1.0, 2.0], dtype=agrad.float64, requires_grad=True)
    _, loss = long_chain(x)
    with anyio.move_on_after(0.002) as scope:
        await agrad.autograd.grad(loss, x, retain_graph=True)
    assert scope.cancelled_caught
    (g,) = await agrad.autograd.grad(loss, x)
    assert g.tolist() == [4.0, 8.0]
    assert x.grad is None


def test_backward_sync_from_threads_through_one_retained_graph_counts_dependencies_per_task() -> None:
    """Blocking backwards of *one* graph on several threads at once: each counts the
    graph's dependencies itself (Note [Counting dependencies]) and all sum exactly."""
    x = agrad.tensor([1.0, 2.0, 3.0], dtype=agrad.float64, requires_grad=True)
    h = x * 2.0
    branches = [(h * float(k)).tanh() for k in range(1, 6)]  # h feeds five nodes: counted, not marked
    loss = branches[0]
    for b in branches[1:]:
        loss = loss + b
    loss = (loss * h).sum()
    barrier = threading.Barrier(N_THREADS)
    errors: list[BaseException] = []
    rounds = 20

    def work() -> None:
        try:
            barrier.wait(timeout=30)
            for _ in range(rounds):
                loss.backward_sync(retain_graph=True)
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(N_THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert errors == []
    total = x.grad.numpy().copy()
    x.grad = None
    loss.backward_sync(retain_graph=True)
    np.testing.assert_allclose(total, x.grad.numpy() * N_THREADS * rounds, rtol=1e-12)
