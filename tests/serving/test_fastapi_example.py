"""The FastAPI example (examples/serving/fastapi_app.py) and the serving guide's claims about shared weights.

The app is driven in-process through httpx's ASGI transport (no sockets), on
asyncio, uvloop and trio.  The claims of docs/serving.md ("Shared weights and
concurrent requests") are checked on the engine directly: concurrent
gradients with respect to inputs need no lock, and an optimizer step while
another request's backward is in flight through the same weights makes that
backward fail, which is why the example's ``/learn`` holds a lock.
"""

from __future__ import annotations

from typing import Any

import anyio
import numpy as np
import pytest

import agrad
from agrad import nn

pytestmark = pytest.mark.anyio

_ROWS = 4


def _saliency_reference(model: nn.Sequential, x: np.ndarray) -> np.ndarray:
    """d(top logit of each row)/dx of ``Linear, Tanh, Linear`` in float64 numpy."""
    (w1, b1), (w2, b2) = [(m.weight.numpy().astype(np.float64), m.bias.numpy().astype(np.float64))
                          for m in (model[0], model[2])]
    h = np.tanh(x @ w1.T + b1)
    top = (h @ w2.T + b2).argmax(axis=1)
    return ((1 - h * h) * w2[top]) @ w1


@pytest.fixture
def client_factory() -> Any:
    pytest.importorskip("fastapi")
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("greenlet")  # agrad.cooperative
    from examples.serving.fastapi_app import create_app

    def make() -> tuple[Any, Any]:
        app = create_app()
        transport = httpx.ASGITransport(app=app)
        return app, httpx.AsyncClient(transport=transport, base_url="http://test")

    return make


@pytest.mark.parametrize("route", ["/saliency", "/saliency/threaded", "/saliency/cooperative"])
async def test_concurrent_saliency_requests_get_their_own_gradients(client_factory: Any, route: str) -> None:
    """Eight requests at once on the shared frozen model, each answered with its own gradient."""
    from examples.serving.fastapi_app import IN_FEATURES, frozen_model

    _, client = client_factory()
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((_ROWS, IN_FEATURES)).astype(np.float32) for _ in range(8)]
    answers: dict[int, Any] = {}

    async def ask(i: int) -> None:
        answers[i] = await client.post(route, json={"x": inputs[i].tolist()})

    async with client, anyio.create_task_group() as tg:
        for i in range(len(inputs)):
            tg.start_soon(ask, i)
    reference_model = frozen_model()
    for i, x in enumerate(inputs):
        assert answers[i].status_code == 200, answers[i].text
        np.testing.assert_allclose(answers[i].json()["saliency"], _saliency_reference(reference_model, x),
                                   rtol=1e-4, atol=1e-6)


async def test_concurrent_learn_requests_step_one_at_a_time(client_factory: Any) -> None:
    _, client = client_factory()
    rng = np.random.default_rng(1)
    steps: list[int] = []

    async def learn() -> None:
        x = rng.standard_normal((_ROWS, 8))
        r = await client.post("/learn", json={"x": x.tolist(), "y": x.sum(axis=1).tolist()})
        assert r.status_code == 200, r.text
        steps.append(r.json()["step"])

    async with client:
        before = (await client.post("/predict", json={"x": [[1.0] * 8]})).json()["y"]
        async with anyio.create_task_group() as tg:
            for _ in range(8):
                tg.start_soon(learn)
        after = (await client.post("/predict", json={"x": [[1.0] * 8]})).json()["y"]
    assert sorted(steps) == list(range(1, 9))
    assert after != before


async def test_bad_bodies_are_answered_422(client_factory: Any) -> None:
    _, client = client_factory()
    async with client:
        assert (await client.post("/saliency", json={"x": [[1.0, 2.0]]})).status_code == 422
        assert (await client.post("/learn", json={"x": [[0.0] * 8], "y": [1.0, 2.0]})).status_code == 422
        assert (await client.get("/health")).json() == "ok"


# -- the guide's claims, on the engine -------------------------------------------------------------


class _Gate(agrad.autograd.Function):
    """Identity whose backward tells ``reached`` and then waits for ``go``: a backward
    paused, deterministically, before it reaches the layer below it."""

    @staticmethod
    def forward(ctx: Any, x: agrad.Tensor, reached: anyio.Event, go: anyio.Event) -> agrad.Tensor:
        ctx.events = reached, go
        return x.clone()

    @staticmethod
    async def backward(ctx: Any, g: agrad.Tensor) -> tuple[agrad.Tensor, None, None]:
        reached, go = ctx.events
        reached.set()
        await go.wait()
        return g, None, None


async def test_a_step_during_another_requests_backward_breaks_it() -> None:
    """Why ``/learn`` holds a lock: a step writes the weights in place, and a backward in
    flight that saved them fails with PyTorch's in-place error (and changes no ``.grad``)."""
    layer = nn.Linear(3, 3)
    optimizer = agrad.optim.SGD(layer.parameters(), lr=0.1)
    await layer(agrad.ones(2, 3)).sum().backward()  # every parameter has a .grad to step with
    grads_before = [p.grad.clone() for p in layer.parameters()]
    reached, go = anyio.Event(), anyio.Event()
    x = agrad.ones(2, 3, requires_grad=True)  # its gradient needs the weight: the backward saved it
    loss = _Gate.apply(layer(x), reached, go).sum()
    failure: list[BaseException] = []

    async def request() -> None:
        try:
            await loss.backward()
        except RuntimeError as exc:
            failure.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(request)
        await reached.wait()
        optimizer.step()  # another request's update, while this backward is in flight
        go.set()
    assert len(failure) == 1 and "modified by an inplace operation" in str(failure[0])
    for p, before in zip(layer.parameters(), grads_before, strict=True):
        np.testing.assert_array_equal(p.grad.numpy(), before.numpy())


async def test_gradients_wrt_inputs_leave_shared_weights_and_their_grads_alone() -> None:
    """No lock for saliency-style requests: ``agrad.autograd.grad`` w.r.t. the input writes
    no ``.grad``, even where the shared weights require grad."""
    layer = nn.Linear(3, 2)
    weight = layer.weight.detach().clone()
    results: dict[int, np.ndarray] = {}

    async def request(i: int) -> None:
        x = agrad.full((1, 3), float(i), requires_grad=True)
        (gx,) = await agrad.autograd.grad(layer(x).sum(), x)
        assert gx is not None
        results[i] = gx.numpy()

    async with anyio.create_task_group() as tg:
        for i in range(16):
            tg.start_soon(request, i)
    expected = weight.sum(dim=0, keepdim=True).numpy()
    assert all(np.array_equal(g, expected) for g in results.values()) and len(results) == 16
    assert layer.weight.grad is None and layer.bias.grad is None
    assert np.array_equal(layer.weight.detach().numpy(), weight.numpy())


def _published_weights_class() -> type:
    """``PublishedWeights`` as docs/serving.md writes it (the page's code block, run as it is)."""
    import re
    from pathlib import Path

    import agrad.nn.functional as F

    page = (Path(__file__).resolve().parents[2] / "docs" / "serving.md").read_text(encoding="utf-8")
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", page, re.S) if "class PublishedWeights" in b]
    namespace: dict[str, Any] = {"agrad": agrad, "anyio": anyio, "F": F}
    exec(compile(block, "docs/serving.md", "exec"), namespace)
    return namespace["PublishedWeights"]


class _Gated(nn.Module):
    """``inner``, then the first call's output through a :class:`_Gate` (a shared list holds its
    events, so ``functional_call``'s private copies see it emptied)."""

    def __init__(self, inner: nn.Module, gates: list[tuple[anyio.Event, anyio.Event]]) -> None:
        super().__init__()
        self.inner = inner
        self.gates = gates

    def forward(self, x: agrad.Tensor) -> agrad.Tensor:
        y = self.inner(x)
        return _Gate.apply(y, *self.gates.pop()) if self.gates else y


async def test_published_weights_let_a_request_in_flight_outlive_a_step() -> None:
    """The guide's updater pattern: a request paused in its backward while another request's
    gradient is applied and new weights are published goes on, undisturbed."""
    reached, go = anyio.Event(), anyio.Event()
    model = _Gated(nn.Linear(8, 1), [(reached, go)])
    optimizer = agrad.optim.SGD(model.parameters(), lr=0.1)
    stepped: list[anyio.Event] = [anyio.Event(), anyio.Event()]
    step = optimizer.step

    def counted_step() -> None:
        step()
        stepped.pop(0).set()

    optimizer.step = counted_step  # type: ignore[method-assign, assignment]  # counts the updater's steps
    weights = _published_weights_class()(model, optimizer)
    first = weights.current
    x, y = agrad.ones(4, 8), agrad.zeros(4, 1)
    losses: list[float] = []

    async def learn(scale: float) -> None:
        losses.append(await weights.learn(x * scale, y))

    with weights.send:  # closed at the end: the updater then ends
        async with anyio.create_task_group() as tg:
            tg.start_soon(weights.updater)
            tg.start_soon(learn, 1.0)
            await reached.wait()  # the first request is in its backward, through the first weights
            second_stepped = stepped[0]
            tg.start_soon(learn, 2.0)
            await second_stepped.wait()  # the second request's gradient was applied and published
            assert weights.current is not first
            last = stepped[0]
            go.set()
            await last.wait()  # the first request finished and its gradient was applied too
            weights.send.close()
    assert len(losses) == 2 and all(np.isfinite(losses))
