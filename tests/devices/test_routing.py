"""The engine on a second device type: NodeTasks routed by their InputBuffer's device
to one worker task per device and event loop, CPU work kept in the awaiting
task, completion awaited through callbacks from another thread, and the usual
guarantees (errors, cancellation, concurrency) across devices."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import anyio.lowlevel
import numpy as np
import pytest

import agrad
from agrad._engine import _device_workers
from agrad._engine._pool import InFlight
from tests.devices.conftest import Api
from tests.devices.fake_backend import FakeBackend, in_engine_context

pytestmark = pytest.mark.anyio


class Where(agrad.autograd.Function):
    """The identity, whose backward records where it ran."""

    log: list[tuple[str, str, bool, int]] = []

    @staticmethod
    def forward(ctx: Any, x: agrad.Tensor, tag: str) -> agrad.Tensor:
        ctx.tag = tag
        return x * 1

    @staticmethod
    def backward(ctx: Any, g: agrad.Tensor) -> tuple[agrad.Tensor, None]:
        try:
            task = anyio.get_current_task().name
        except Exception:  # no event loop in this thread (blocking twin in a thread)
            task = "<no loop>"
        Where.log.append((ctx.tag, task, in_engine_context(), threading.get_ident()))
        return g, None


@pytest.fixture(autouse=True)
def _clear_log() -> None:
    Where.log.clear()


def model(x: agrad.Tensor) -> agrad.Tensor:
    """cpu -> fake:0 -> fake:1 -> cpu, with a Where node on each leg."""
    h = Where.apply(x * 2, "cpu-in")
    a = Where.apply(h.to("fake:0").tanh(), "fake:0")
    b = Where.apply(a.to("fake:1") * a.to("fake:1"), "fake:1")
    return Where.apply(b.cpu().sum(), "cpu-out")


def expected_grad(x: np.ndarray) -> np.ndarray:
    t = np.tanh(2 * x)
    return 2 * t * (1 - t * t) * 2


@pytest.mark.filterwarnings("ignore::agrad.BlockingCallWarning")  # a blocking twin on the loop, on purpose
async def test_each_node_runs_on_its_devices_worker(fake: FakeBackend, api: Api) -> None:
    x = agrad.tensor([0.1, -0.4, 0.7], dtype=agrad.float64, requires_grad=True)
    await api.tensor_backward(model(x))
    np.testing.assert_allclose(x.grad.numpy(), expected_grad(x.detach().numpy()), rtol=1e-12)
    where = {tag: (task, engine) for tag, task, engine, _ in Where.log}
    me = anyio.get_current_task().name
    if api.blocking:  # inline, in the caller, device jobs inside their engine context
        assert where == {"cpu-out": (me, False), "fake:1": (me, True), "fake:0": (me, True), "cpu-in": (me, False)}
        assert fake.calls["synchronize"] == 2 and fake.calls["when_idle"] == 0
    else:
        # CPU nodes on the loop's CPU worker (Note [One worker per loop])
        assert where["cpu-out"] == where["cpu-in"] == ("agrad cpu worker", False)
        assert where["fake:0"] == ("agrad fake:0 worker", True)
        assert where["fake:1"] == ("agrad fake:1 worker", True)
        # One wait per device at the end, plus one before each job whose gradient leaves its
        # device: the two fake:1 -> fake:0 copies' backwards and the fake:0 -> cpu one.
        assert fake.calls["when_idle"] == 2 + 3 and fake.calls["synchronize"] == 0
    assert fake.calls["join_caller"] == 2  # once per device per graph task
    assert len({ident for *_, ident in Where.log}) == 1  # all on the loop's thread


async def test_one_worker_per_device_serves_every_graph_task(fake: FakeBackend) -> None:
    leaf = agrad.tensor([0.3, 0.2, -0.1], dtype=agrad.float64, requires_grad=True)
    losses = [model(leaf * (i + 1)) for i in range(8)]
    async with anyio.create_task_group() as tg:
        for loss in losses:
            tg.start_soon(loss.backward)
    x = leaf.detach().numpy()
    expected = sum(expected_grad(x * (i + 1)) * (i + 1) for i in range(8))
    np.testing.assert_allclose(leaf.grad.numpy(), expected, rtol=1e-12)
    tasks = {tag: {task for t, task, *_ in Where.log if t == tag} for tag in ("fake:0", "fake:1")}
    assert tasks == {"fake:0": {"agrad fake:0 worker"}, "fake:1": {"agrad fake:1 worker"}}
    workers = _device_workers._WORKERS.get()
    assert sorted(str(d) for d in workers) == ["fake:0", "fake:1"]
    assert not any(w._running or w._queue.pop() for w in workers.values())  # ended with their queues


async def test_the_device_queue_runs_deeper_tasks_then_later_nodes_first(fake: FakeBackend) -> None:
    dev = agrad.device("fake:0")
    worker = _device_workers.worker_for(dev)
    ran: list[str] = []

    class Stub:  # what the worker reads of a GraphTask and a DeviceJob
        stopped = False

        def __init__(self) -> None:
            self.in_flight = InFlight(0)
            self.deliver = [].append

    class Job:
        def __init__(self, name: str, depth: int, seq: int) -> None:
            self.node = type("N", (), {"sequence_nr": seq, "name": lambda self: name})()
            self.depth, self.first, self.leaves, self.device = depth, False, False, dev
            self.job = lambda: ran.append(name)

    task = Stub()
    for name, depth, seq in [("old", 0, 1), ("new", 0, 5), ("nested", 1, 0), ("new-too", 0, 5)]:
        worker.submit(task, Job(name, depth, seq))  # type: ignore[arg-type]
    assert task.in_flight.outstanding == 4
    while task.in_flight.outstanding:
        await anyio.lowlevel.checkpoint()
    assert ran == ["nested", "new", "new-too", "old"]


async def test_device_nodes_match_the_cpu(fake: FakeBackend, api: Api) -> None:
    rng = np.random.default_rng(0)
    params = {"w1": rng.standard_normal((5, 8)), "b1": rng.standard_normal(8), "w2": rng.standard_normal((8, 3))}
    x = rng.standard_normal((4, 5))
    target = agrad.tensor([0, 2, 1, 2])
    grads = {}
    for dev in ("cpu", "fake:1"):
        p = {k: agrad.tensor(v, device=dev, requires_grad=True) for k, v in params.items()}
        h = (agrad.tensor(x, device=dev) @ p["w1"] + p["b1"]).relu()
        loss = agrad.nn.functional.cross_entropy(h @ p["w2"], target.to(dev))
        await api.tensor_backward(loss)
        assert all(t.grad.device == t.device for t in p.values())
        grads[dev] = {k: t.grad.cpu().numpy() for k, t in p.items()}
    for k in params:
        np.testing.assert_allclose(grads["fake:1"][k], grads["cpu"][k], rtol=1e-12)


@pytest.mark.filterwarnings("ignore::agrad.BlockingCallWarning")  # a blocking twin on the loop, on purpose
async def test_grad_and_retain_graph_on_a_device(fake: FakeBackend, api: Api) -> None:
    x = agrad.tensor([1.0, 2.0], dtype=agrad.float64, device="fake:0", requires_grad=True)
    y = (x ** 2).sum()
    (g,) = await api.grad(y, x, retain_graph=True)
    assert g.device == "fake:0" and g.tolist() == [2.0, 4.0]
    (g2,) = await api.grad(y, x)
    assert g2.tolist() == [2.0, 4.0]
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        await api.grad(y, x)


@pytest.mark.filterwarnings("ignore::agrad.BlockingCallWarning")  # a blocking twin on the loop, on purpose
async def test_an_error_in_a_device_node_names_it_and_changes_no_grad(fake: FakeBackend, api: Api) -> None:
    class Boom(agrad.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: agrad.Tensor) -> agrad.Tensor:
            return x * 1

        @staticmethod
        def backward(ctx: Any, g: agrad.Tensor) -> agrad.Tensor:
            raise ValueError("boom")

    x = agrad.ones(3, device="fake:0", requires_grad=True)
    x.grad = agrad.full((3,), 7.0, device="fake:0")
    loss = (Boom.apply(x * 2) + x).sum()
    with pytest.raises(ValueError, match="boom") as info:
        await api.tensor_backward(loss)
    assert any("BoomBackward" in note for note in info.value.__notes__)
    assert x.grad.tolist() == [7.0, 7.0, 7.0]
    (x * 3).sum().backward_sync()  # the device is still usable
    assert x.grad.tolist() == [10.0, 10.0, 10.0]


async def test_cancelled_while_device_jobs_are_queued_changes_no_grad(fake: FakeBackend) -> None:
    x = agrad.ones(4, dtype=agrad.float64, device="fake:0", requires_grad=True)
    scope = anyio.CancelScope()

    class CancelHere(agrad.autograd.Function):
        @staticmethod
        def forward(ctx: Any, t: agrad.Tensor) -> agrad.Tensor:
            return t * 1

        @staticmethod
        def backward(ctx: Any, g: agrad.Tensor) -> agrad.Tensor:
            scope.cancel()  # from the device worker, while the backward awaits it
            return g

    h = x
    for i in range(50):
        h = h * 1.0 + (CancelHere.apply(h) if i == 25 else 0.0)
    with scope:
        await h.sum().backward()
    assert scope.cancelled_caught and x.grad is None


async def test_blocking_twin_from_a_thread_while_the_loop_runs(fake: FakeBackend) -> None:
    x = agrad.tensor([0.5, -0.5], dtype=agrad.float64, requires_grad=True)
    loss = model(x)
    await anyio.to_thread.run_sync(loss.backward_sync)
    np.testing.assert_allclose(x.grad.numpy(), expected_grad(x.detach().numpy()), rtol=1e-12)
    assert {task for _, task, *_ in Where.log} == {"<no loop>"}


async def test_async_backwards_run_in_the_awaiting_task_on_any_device(fake: FakeBackend) -> None:
    class Slow(agrad.autograd.Function):
        ran_in: list[str] = []

        @staticmethod
        def forward(ctx: Any, x: agrad.Tensor) -> agrad.Tensor:
            return x * 2

        @staticmethod
        async def backward(ctx: Any, g: agrad.Tensor) -> agrad.Tensor:
            await anyio.lowlevel.checkpoint()
            Slow.ran_in.append(anyio.get_current_task().name)
            return g * 2

    x = agrad.tensor([1.0, 3.0], device="fake:0", requires_grad=True)
    await (Slow.apply(x.exp()) * 1).sum().backward()
    assert Slow.ran_in == [anyio.get_current_task().name]
    np.testing.assert_allclose(x.grad.cpu().numpy(), 2 * np.exp([1.0, 3.0]), rtol=1e-6)


@pytest.mark.filterwarnings("ignore::agrad.BlockingCallWarning")  # a blocking twin on the loop, on purpose
async def test_inputs_restricted_backward_on_a_device(fake: FakeBackend, api: Api) -> None:
    a = agrad.tensor([1.0, 2.0], device="fake:0", requires_grad=True)
    b = agrad.tensor([3.0, 4.0], device="fake:1", requires_grad=True)
    loss = (a * 2).to("fake:1") * b
    await api.backward(loss.sum(), inputs=[a])
    assert a.grad.device == "fake:0" and a.grad.tolist() == [6.0, 8.0] and b.grad is None


async def test_a_cpu_backward_starts_no_device_worker(fake: FakeBackend) -> None:
    x = agrad.tensor([1.0, 2.0], requires_grad=True)
    await (x * x).sum().backward()
    assert _device_workers._WORKERS.get(None) is None
    assert not fake.calls and x.grad.tolist() == [2.0, 4.0]


async def test_sums_run_on_the_device_of_the_gradients_they_sum(fake: FakeBackend, api: Api) -> None:
    # fake:1 is not the current device, and the fake backend refuses a kernel on
    # arrays of another device than the current one, as CuPy does without peer
    # access: the input buffer of h (on fake:1) sums a gradient computed there
    # with one sent from fake:0's job, and the commit sums into an existing .grad.
    a = agrad.tensor([0.5, 1.0, 2.0], dtype=agrad.float64, device="fake:1", requires_grad=True)
    a.grad = agrad.ones(3, dtype=agrad.float64, device="fake:1")
    h = a * 1
    y = (h.to("fake:0") * 2).to("fake:1") + h.exp()
    await api.tensor_backward(y.sum())
    np.testing.assert_allclose(a.grad.cpu().numpy(), 1 + 2 + np.exp([0.5, 1.0, 2.0]), rtol=1e-12)


def test_a_closed_loop_with_device_workers_is_garbage(fake: FakeBackend) -> None:
    """Note [Holding a loop weakly]: a loop's device workers live in an anyio
    RunVar keyed weakly by the loop; they must not keep the loop alive."""
    import asyncio
    import gc
    import weakref

    loops: list[weakref.ref] = []

    async def main() -> None:
        loops.append(weakref.ref(asyncio.get_running_loop()))
        x = agrad.tensor([1.0, 2.0], requires_grad=True, device="fake:0")
        await (x * 2).sum().backward()
        assert x.grad.cpu().tolist() == [2.0, 2.0]

    for _ in range(3):
        asyncio.run(main())
    gc.collect()
    assert [r() for r in loops] == [None] * 3
