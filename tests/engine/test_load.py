"""The engine under load: many concurrent graph tasks, cancellation at random
points, failures beside healthy backwards, blocking twins from many threads,
and fairness between a huge backward and small ones.

Builds on ``test_concurrency.py``: values are integers in float64, so every
order of accumulation gives the same bits and sums are compared with ``==``;
concurrency is forced with a rendezvous (a hook or an ``async def backward``
every backward must reach before any may finish), never hoped for.  Tests
assert behaviour (results, completion order), never timings.

The awaited tests run twice: with the default scheduling (these small arrays
stay inline) and with every kernel forced into an executor thread
(``offload="always"``), so that kernels finish in threads, in any order,
while other graph tasks run, fail or are cancelled.
"""

from __future__ import annotations

import gc
import random
import threading
import weakref
from typing import Any

import anyio
import anyio.lowlevel
import numpy as np
import pytest

import agrad
from agrad._ambient import current_graph_task
from agrad._engine._pool import current_pool
from agrad.autograd.graph import engine_options
from tests.engine._models import WAIT, assert_exactly_equal, grads, make_rendezvous, pool_is_idle
from tests.helpers import collect_only_new_objects, soak

pytestmark = pytest.mark.anyio

# Sizes of the soaks here (Note [Soak sizes]): the CI size still puts every kind of backward in
# flight at once (separate, retained, grad; shallow and ~600 deep) and fills every kernel slot.
N_CONCURRENT = soak(ci=100, full=400)
N_RETAINED = 20  # of the N_CONCURRENT, backwards through one shared retained graph
N_THREADS = 16
CANCEL_TRIALS = soak(ci=48, full=400)  # per backend and offload mode (Note [Soak sizes])
CANCEL_CHAIN = {"auto": 2_000, "always": 150}  # nodes: a backward of a few milliseconds either way
RECALIBRATIONS = 6  # rounds of 8 more trials with a wider or narrower span, if one outcome is missing
HUGE_CHAIN = 30_000


@pytest.fixture(params=["auto", "always"], ids=["inline", "offloaded"])
def offload(request: pytest.FixtureRequest) -> Any:
    """The engine's offload mode for the backwards a test awaits."""
    with engine_options(offload=request.param):
        yield request.param


def assert_no_kernel_in_flight() -> None:
    """Nothing of any backward runs or waits in the loop's kernel pool."""
    pool = current_pool()
    assert pool.running == 0 and not pool._queue and not pool._waiting


# -- graphs --------------------------------------------------------------------------------------------
def shared_leaves() -> dict[str, agrad.Tensor]:
    return {
        "a": agrad.tensor(np.arange(4.0) - 2, requires_grad=True),
        "b": agrad.tensor(np.arange(4.0) * 2 - 3, requires_grad=True),
        "c": agrad.tensor(np.array([3.0, -1.0, 2.0, 5.0]), requires_grad=True),
    }


def varied_loss(p: dict[str, agrad.Tensor], i: int, rendezvous: Any = None) -> agrad.Tensor:
    """A loss over the shared leaves whose size depends on ``i``: 1 to 5 branches of
    depth 1 to ~60 (a few of depth ~600), with integer gradients.

    ``rendezvous`` (a function of a tensor) is applied in the first branch after
    a direct term into every leaf, so some leaf gradients are staged (they have
    no dependency on the rendezvous) or not, depending on the ready order.
    """
    rs = np.random.default_rng(i)
    width = 1 + i % 5
    depth = 1 + int(rs.integers(0, 60)) + (600 if i % 37 == 0 else 0)
    names = ["a", "b", "c"]
    total = (p["a"] * (i % 7 - 3)).sum() + (p["b"] * (i % 4)).sum() + (p["c"] * (i % 5 - 2)).sum()
    for w in range(width):
        y = p[names[(i + w) % 3]] * float(w + 1)
        if w == 0 and rendezvous is not None:
            y = rendezvous(y)
        for d in range(depth):
            k = (d + w + i) % 4
            if k == 0:
                y = y + p[names[d % 3]]
            elif k == 1:
                y = y * 1.0
            elif k == 2:
                y = y - p[names[(d + 1) % 3]] * 2.0
            else:
                y = -y
        total = total + (y * float(1 + (i + w) % 3)).sum()
    return total


def sequential_expected(indices: list[int], retained_index: int, retained_runs: int) -> dict[str, Any]:
    """What the backwards of ``varied_loss(i)`` for ``indices`` plus ``retained_runs``
    backwards of one retained ``varied_loss(retained_index)`` give, run one after the other."""
    p = shared_leaves()
    for i in indices:
        varied_loss(p, i).backward_sync()
    shared = varied_loss(p, retained_index)
    for _ in range(retained_runs):
        shared.backward_sync(retain_graph=True)
    return grads(p)


# -- 1. many concurrent backwards of different sizes into shared leaves --------------------------------
@pytest.mark.filterwarnings("ignore::agrad.BlockingCallWarning")  # a blocking twin on the loop, on purpose
@pytest.mark.soak
async def test_many_concurrent_backwards_of_varied_sizes_sum_exactly(offload: str) -> None:
    p = shared_leaves()
    rendezvous, state = make_rendezvous(N_CONCURRENT)
    n_separate = N_CONCURRENT - N_RETAINED
    losses = [varied_loss(p, i, rendezvous) for i in range(n_separate)]
    retained_index = 1001
    shared = varied_loss(p, retained_index, rendezvous)
    done: list[int] = []

    async def separate(i: int) -> None:
        await losses[i].backward()
        done.append(i)

    async def retained(j: int) -> None:
        await shared.backward(retain_graph=True)
        done.append(n_separate + j)

    async with anyio.create_task_group() as tg:
        for i in range(n_separate):
            tg.start_soon(separate, i)
        for j in range(N_RETAINED):
            tg.start_soon(retained, j)
    assert state["arrived"] == N_CONCURRENT  # all were in flight at once
    assert sorted(done) == list(range(N_CONCURRENT))
    assert_exactly_equal(grads(p), sequential_expected(list(range(n_separate)), retained_index, N_RETAINED))


@pytest.mark.soak
async def test_concurrent_backwards_and_grads_without_rendezvous_sum_exactly(offload: str) -> None:
    # The same mix interleaved only by time slices: backwards, grads (which must not
    # touch .grad) and retained-graph backwards, started in a shuffled order.
    p = shared_leaves()
    n_separate = 3 * N_CONCURRENT // 5
    losses = [varied_loss(p, i) for i in range(n_separate)]
    grad_losses = [varied_loss(p, 500 + i) for i in range(30)]
    retained_index = 777
    shared = varied_loss(p, retained_index)
    grad_results: dict[int, tuple] = {}
    jobs: list[Any] = []

    for i in range(n_separate):
        jobs.append(lambda i=i: losses[i].backward())
    for _ in range(N_RETAINED):
        jobs.append(lambda: shared.backward(retain_graph=True))
    for j in range(30):
        async def g(j: int = j) -> None:
            grad_results[j] = await agrad.autograd.grad(grad_losses[j], [p["a"], p["b"], p["c"]])
        jobs.append(g)
    random.Random(7).shuffle(jobs)

    async with anyio.create_task_group() as tg:
        for job in jobs:
            tg.start_soon(job)
    assert_exactly_equal(grads(p), sequential_expected(list(range(n_separate)), retained_index, N_RETAINED))
    for j in range(30):
        expected = sequential_expected([500 + j], 0, 0)
        assert_exactly_equal(dict(zip("abc", (t.numpy() for t in grad_results[j]))), expected)


# -- 2. cancellation at many random points -------------------------------------------------------------
def build_cancel_graph(x: agrad.Tensor, w: agrad.Tensor, n: int, hook_at: int | None, hook: Any
                       ) -> tuple[agrad.Tensor, agrad.Tensor, list[weakref.ref]]:
    """A chain of ``n`` nodes from ``x`` (plus a side branch into ``w``), with a
    retained intermediate near the root; ``hook`` is registered on the tensor that
    the backward reaches after about ``hook_at`` nodes.  Returns (retained, loss,
    weak references to tensors and nodes of the graph)."""
    refs: list[weakref.ref] = []
    y = x
    for i in range(n):
        y = y * 1.0 if i % 2 else y + 0.0
        if i % 97 == 0:
            y = y + w * 0.0
        if hook_at is not None and i == n - 1 - hook_at:
            y.register_hook(hook)
        if i % max(1, n // 8) == 0:
            refs.append(weakref.ref(y))
            refs.append(weakref.ref(y.grad_fn))
    near_root = y * 2.0
    near_root.retain_grad()
    loss = (near_root * x).sum() + (w * 3.0).sum()
    refs += [weakref.ref(near_root), weakref.ref(loss), weakref.ref(loss.grad_fn),
             weakref.ref(near_root.grad_fn)]
    return near_root, loss, refs


async def cancel_trial(rs: random.Random, outcomes: dict[str, int], chain: int, span: float) -> None:
    """One backward of a ``chain``-node graph, cancelled by a deadline or a sibling
    task after a random delay up to ``span`` seconds, or by a hook at a random node."""
    x = agrad.tensor([1.0, 2.0, 3.0], dtype=agrad.float64, requires_grad=True)
    w = agrad.tensor([5.0, -4.0, 7.0], dtype=agrad.float64, requires_grad=True)
    prior = rs.random() < 0.5
    if prior:
        x.grad = agrad.tensor([10.0, 20.0, 30.0], dtype=agrad.float64)
    grad_mode = rs.random() < 0.75
    how = rs.choice(["deadline", "hook", "sibling"])
    scope = anyio.CancelScope()

    def cancel_hook(g: agrad.Tensor) -> None:
        scope.cancel()

    hook_at = rs.randrange(0, chain + 5) if how == "hook" else None
    near_root, loss, refs = build_cancel_graph(x, w, chain, hook_at, cancel_hook)
    near_root_ref = weakref.ref(near_root)
    retained_grads: list[Any] = []
    returned = False

    async def sibling(delay: float) -> None:
        await anyio.sleep(delay)
        scope.cancel()

    with agrad.set_grad_enabled(grad_mode):
        async with anyio.create_task_group() as tg:
            if how == "sibling":
                tg.start_soon(sibling, rs.uniform(0, span))
            elif how == "deadline":
                scope.deadline = anyio.current_time() + rs.uniform(0, span)
            with scope:
                await loss.backward()
                returned = True
            # Whatever happened, nothing of the backward is left running.
            assert_no_kernel_in_flight()
            retained_grads.append(near_root.grad)
            tg.cancel_scope.cancel()  # the sibling, if it is still sleeping
        # Back in the cancelled task: its ambient state is as before.
        assert current_graph_task.get() is None
        assert agrad.is_grad_enabled() is grad_mode
    assert agrad.is_grad_enabled() is True

    base = [10.0, 20.0, 30.0] if prior else None
    if returned:
        # Completed before the cancellation took effect: exactly the full result.
        outcomes["completed"] += 1
        expected_x = [b + 4 * v for b, v in zip(base or [0.0] * 3, [1.0, 2.0, 3.0])]
        assert x.grad.tolist() == expected_x
        assert w.grad.tolist() == [3.0, 3.0, 3.0]
        assert retained_grads[0].tolist() == [1.0, 2.0, 3.0]
    else:
        outcomes["cancelled"] += 1
        assert scope.cancelled_caught
        # Never partial: nothing committed anywhere.
        assert (x.grad is None) if base is None else (x.grad.tolist() == base)
        assert w.grad is None
        assert retained_grads[0] is None

    # No graph is kept alive by the engine once the test drops its references.
    del near_root, loss, retained_grads, cancel_hook
    gc.collect()
    alive = [r() for r in refs + [near_root_ref] if r() is not None]
    assert alive == [], f"{len(alive)} graph objects kept alive after a {how} trial: {alive[:3]}"

    # A following backward works and adds exactly once.
    before = x.grad.tolist() if x.grad is not None else [0.0, 0.0, 0.0]
    await (x * 3.0).sum().backward()
    assert x.grad.tolist() == [b + 3.0 for b in before]


@pytest.mark.soak
async def test_cancellation_at_random_points_never_leaves_partial_state(anyio_backend: Any, offload: str) -> None:
    seed = {"asyncio": 11, "uvloop": 22, "trio": 33}[
        "uvloop" if anyio_backend[1].get("use_uvloop") else anyio_backend[0]] + (0 if offload == "auto" else 100)
    rs = random.Random(seed)
    chain = CANCEL_CHAIN[offload]
    # Random delays span twice the backward's own duration here, so that
    # both outcomes occur on a fast machine and a slow one alike.
    durations = []
    for _ in range(3):
        x = agrad.tensor([1.0, 2.0, 3.0], dtype=agrad.float64, requires_grad=True)
        _, reference, _ = build_cancel_graph(x, x * 1.0, chain, None, None)
        started = anyio.current_time()
        await reference.backward()
        durations.append(anyio.current_time() - started)
    span = 2 * max(durations)
    outcomes = {"completed": 0, "cancelled": 0}
    with collect_only_new_objects():  # Note [Collecting per trial]
        for _ in range(CANCEL_TRIALS):
            await cancel_trial(rs, outcomes, chain, span)
        # The random points must cover both sides of the race.  Three backwards of a
        # few milliseconds calibrate the span badly when a loaded machine stalls one
        # of them or the trials: widen it while no trial completed, narrow it while
        # none was cancelled, and try again (a bounded number of times).
        for _ in range(RECALIBRATIONS):
            if outcomes["cancelled"] and outcomes["completed"]:
                break
            span *= 4.0 if not outcomes["completed"] else 0.25
            for _ in range(8):
                await cancel_trial(rs, outcomes, chain, span)
    assert outcomes["cancelled"] > 0 and outcomes["completed"] > 0, (outcomes, span)
    await pool_is_idle()  # and no worker is left running


async def test_cancelled_retained_grad_while_others_in_flight_frees_its_task(offload: str) -> None:
    # A cancelled grad() among concurrent backwards on the same retained graph:
    # the others complete exactly, the cancelled GraphTask is freed.  It cancels
    # itself from the hook that every task passes (the spy), once it is there.
    p = shared_leaves()
    shared = varied_loss(p, 37)  # a deep one
    tasks_seen: list[weakref.ref] = []
    doomed: list[Any] = []  # the graph task to cancel, and its scope

    def spy(g: agrad.Tensor) -> None:
        t = current_graph_task.get()
        assert t is not None
        tasks_seen.append(weakref.ref(t))
        if doomed and doomed[0] is t:
            doomed[1].cancel()

    shared.grad_fn  # noqa: B018  (the graph exists)
    hooked = shared * 1.0
    hooked.register_hook(spy)

    async def cancelled() -> None:
        with anyio.CancelScope() as scope:
            h = hooked * 1.0
            h.register_hook(lambda g: doomed.extend([current_graph_task.get(), scope]))
            await agrad.autograd.grad(h, [p["a"], p["b"], p["c"]], retain_graph=True)
        assert scope.cancelled_caught
        doomed.clear()

    async with anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(lambda: hooked.backward(retain_graph=True))
        tg.start_soon(cancelled)
    assert len(tasks_seen) == 6
    gc.collect()
    assert [r for r in tasks_seen if r() is not None] == []
    assert_exactly_equal(grads(p), sequential_expected([], 37, 5))
    assert_no_kernel_in_flight()


# -- 3. a failing node among healthy graph tasks -----------------------------------------------------
class BoomError(RuntimeError):
    pass


async def test_failing_node_reaches_its_caller_named_and_others_are_unaffected(offload: str) -> None:
    p = shared_leaves()
    n_healthy = 24
    healthy_arrived = anyio.Event()
    failed = anyio.Event()
    arrived = {"n": 0}

    class Hold(agrad.autograd.Function):
        """Healthy backwards wait here, gradients partly staged, until the failure happened."""

        @staticmethod
        def forward(ctx, h):
            return h * 1.0

        @staticmethod
        async def backward(ctx, g):
            arrived["n"] += 1
            if arrived["n"] == n_healthy:
                healthy_arrived.set()
            await failed.wait()
            return g

    class Boom(agrad.autograd.Function):
        @staticmethod
        def forward(ctx, h):
            return h * 1.0

        @staticmethod
        async def backward(ctx, g):
            await healthy_arrived.wait()  # every healthy backward is in flight
            raise BoomError("boom in backward")

    class SyncBoom(agrad.autograd.Function):
        @staticmethod
        def forward(ctx, h):
            return h * 1.0

        @staticmethod
        def backward(ctx, g):
            raise BoomError("sync boom in backward")

    healthy = [varied_loss(p, i, Hold.apply) for i in range(n_healthy)]
    # The failing ones: partial staging before the failure (direct leaf terms),
    # then the failing node deep in a chain.
    failing_async = varied_loss(p, 3, Boom.apply)
    x = p["a"] * 1.0
    for _ in range(3000):
        x = x + 0.0
    failing_sync = (SyncBoom.apply(x) * p["b"]).sum() + (p["c"] * 4.0).sum()
    caught: dict[str, BaseException] = {}

    async def run_failing(name: str, loss: agrad.Tensor) -> None:
        try:
            await loss.backward()
        except BoomError as exc:
            caught[name] = exc
        if len(caught) == 2:
            failed.set()

    async with anyio.create_task_group() as tg:
        for loss in healthy:
            tg.start_soon(loss.backward)
        tg.start_soon(run_failing, "async", failing_async)
        tg.start_soon(run_failing, "sync", failing_sync)
    assert sorted(caught) == ["async", "sync"]
    assert any("BoomBackward" in note for note in caught["async"].__notes__), caught["async"].__notes__
    assert any("SyncBoomBackward" in note for note in caught["sync"].__notes__), caught["sync"].__notes__
    assert current_graph_task.get() is None and agrad.is_grad_enabled()
    # The healthy ones all completed, exactly; the failing ones committed nothing.
    assert arrived["n"] == n_healthy
    assert_exactly_equal(grads(p), sequential_expected(list(range(n_healthy)), 0, 0))


# -- 4. the blocking twins under load --------------------------------------------------------------
def test_backward_sync_and_grad_sync_from_16_threads_sum_exactly() -> None:
    p = shared_leaves()
    barrier = threading.Barrier(N_THREADS)
    retained_index = 2002
    shared = varied_loss(p, retained_index)
    errors: list[BaseException] = []
    grad_results: dict[int, tuple] = {}
    rounds = 3

    def wait_for_all(g: agrad.Tensor) -> None:
        barrier.wait(timeout=WAIT)  # all 16 threads are mid-backward

    def rendezvous(h: agrad.Tensor) -> agrad.Tensor:
        h = h * 1.0
        h.register_hook(wait_for_all)
        return h

    def work(t: int) -> None:
        try:
            for r in range(rounds):
                varied_loss(p, t * rounds + r, rendezvous).backward_sync()
            shared.backward_sync(retain_graph=True)
            grad_results[t] = agrad.autograd.grad_sync(shared, [p["a"], p["b"], p["c"]], retain_graph=True)
            own = varied_loss(p, 300 + t, rendezvous)
            grad_results[100 + t] = agrad.autograd.grad_sync(own, [p["a"], p["b"], p["c"]])
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=work, args=(t,)) for t in range(N_THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=WAIT)
    assert errors == []
    assert_exactly_equal(grads(p), sequential_expected(list(range(N_THREADS * rounds)), retained_index, N_THREADS))
    one_shared = sequential_expected([], retained_index, 1)
    for t in range(N_THREADS):
        assert_exactly_equal(dict(zip("abc", (g.numpy() for g in grad_results[t]))), one_shared)
        own = sequential_expected([300 + t], 0, 0)
        assert_exactly_equal(dict(zip("abc", (g.numpy() for g in grad_results[100 + t]))), own)


@pytest.mark.filterwarnings("ignore::agrad.BlockingCallWarning")  # a blocking twin on the loop, on purpose
async def test_backward_sync_inside_the_loop_while_awaited_backwards_are_in_flight(offload: str) -> None:
    p = shared_leaves()
    n_awaited = 30
    rendezvous, state = make_rendezvous(n_awaited + 1)  # +1: released by the main task
    awaited = [varied_loss(p, i, rendezvous) for i in range(n_awaited)]
    blocking = [varied_loss(p, 100 + i) for i in range(10)]
    all_arrived = anyio.Event()
    order: list[str] = []

    async def watch() -> None:
        while state["arrived"] < n_awaited:
            await anyio.lowlevel.checkpoint()
        all_arrived.set()

    async def one(i: int) -> None:
        await awaited[i].backward()
        order.append("awaited")

    async with anyio.create_task_group() as tg:
        for i in range(n_awaited):
            tg.start_soon(one, i)
        tg.start_soon(watch)
        await all_arrived.wait()
        # Every awaited backward is suspended mid-graph; block the loop with sync ones.
        for loss in blocking:
            loss.backward_sync()
        gb = agrad.autograd.grad_sync(varied_loss(p, 200), [p["a"], p["b"], p["c"]])
        order.append("blocking")
        # Release the awaited ones.
        state["arrived"] += 1
        state["all"].set()
    assert order == ["blocking"] + ["awaited"] * n_awaited
    assert_exactly_equal(grads(p), sequential_expected(list(range(n_awaited)) + [100 + i for i in range(10)], 0, 0))
    assert_exactly_equal(dict(zip("abc", (g.numpy() for g in gb))), sequential_expected([200], 0, 0))


# -- 5. fairness -----------------------------------------------------------------------------------------
async def test_small_backward_finishes_before_a_huge_one_in_flight() -> None:
    x = agrad.tensor([1.0, 2.0], dtype=agrad.float64, requires_grad=True)
    huge_started = anyio.Event()
    y = x
    for i in range(HUGE_CHAIN):
        y = y * 1.0 if i % 2 else y + 0.0
    y = y * 1.0
    y.register_hook(lambda g: huge_started.set())  # runs near the start of the backward
    huge = (y * 2.0).sum()
    order: list[str] = []
    p = shared_leaves()

    async def run_huge() -> None:
        await huge.backward()
        order.append("huge")

    async def run_small(i: int) -> None:
        await huge_started.wait()
        await varied_loss(p, 5 * i + 1).backward()  # at most a few hundred nodes
        (g,) = await agrad.autograd.grad((p["a"] * float(i)).sum(), p["a"])
        assert (g.numpy() == float(i)).all()
        order.append(f"small {i}")

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_huge)
        for i in range(3):
            tg.start_soon(run_small, i)
    assert order[-1] == "huge", order
    assert sorted(order[:-1]) == ["small 0", "small 1", "small 2"]
    assert x.grad.tolist() == [2.0, 2.0]
    assert_exactly_equal(grads(p), sequential_expected([1, 6, 11], 0, 0))
