"""agrad in a FastAPI app: the three ways to run a backward in a handler, and online learning.

A small MLP 8-64-3 (``frozen``) is shared read-only by every request; a
linear model 8-1 (``online``) is trained by the requests themselves.  Routes
(JSON bodies; ``x`` is a list of rows of 8 numbers):

* ``POST /saliency`` — ``async def``: the forward runs inline on the loop,
  the backward is awaited (``await agrad.autograd.grad(...)``) and runs in
  time slices, so other requests are served meanwhile;
* ``POST /saliency/threaded`` — ``def``: FastAPI runs it in its threadpool,
  so the blocking twin (``agrad.autograd.grad_sync``) blocks only that thread;
* ``POST /saliency/cooperative`` — ``async def`` awaiting
  ``agrad.cooperative(saliency_sync, x)``: the forward runs in time slices too;
* ``POST /learn`` — one SGD step of ``online`` on the request's examples
  (``{"x": rows, "y": targets}``), under an ``anyio.Lock``: a step changes the
  weights in place, which would break the backward of another request in
  flight through them;
* ``POST /predict`` — ``online``'s prediction, under ``no_grad`` (no lock: it
  records no graph and has no await, so no step lands in the middle of it);
* ``GET /health`` — ``ok`` at once.

The three saliency routes answer the same gradient (of each row's top logit
with respect to the row).  Run::

    pip install -e ".[serving]"
    uvicorn examples.serving.fastapi_app:app --port 8000

See "FastAPI and Starlette: a handler's backward" in docs/serving.md.
"""

from __future__ import annotations

import anyio
import numpy as np
from fastapi import FastAPI, HTTPException
from pydantic import BaseModel

import agrad
import agrad.nn.functional as F
from agrad import nn

__all__ = ["IN_FEATURES", "Rows", "Examples", "frozen_model", "saliency_sync", "create_app", "app"]

IN_FEATURES = 8


class Rows(BaseModel):
    """A batch of inputs: ``x`` is a list of rows of ``IN_FEATURES`` numbers."""

    x: list[list[float]]


class Examples(Rows):
    """Training examples: rows ``x`` and one target ``y`` per row."""

    y: list[float]


def frozen_model(seed: int = 0) -> nn.Sequential:
    """The shared model, 8-64-3 with tanh: its weights never require grad, so no backward writes them."""
    agrad.manual_seed(seed)
    model = nn.Sequential(nn.Linear(IN_FEATURES, 64), nn.Tanh(), nn.Linear(64, 3))
    return model.requires_grad_(False).eval()


def _rows(batch: Rows) -> agrad.Tensor:
    x = np.asarray(batch.x, dtype=np.float32)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] != IN_FEATURES:
        raise HTTPException(422, f"x must be a non-empty list of rows of {IN_FEATURES} numbers")
    return agrad.from_numpy(x)


def _top_logits(model: nn.Module, x: agrad.Tensor) -> agrad.Tensor:
    """The sum over rows of each row's largest logit: its gradient w.r.t. ``x`` is each row's saliency."""
    return model(x).max(dim=1).values.sum()


def saliency_sync(model: nn.Module, x: agrad.Tensor) -> list[list[float]]:
    """Saliency with the blocking twin: for a thread, or for ``agrad.cooperative``."""
    x.requires_grad_()
    (gx,) = agrad.autograd.grad_sync(_top_logits(model, x), x)
    assert gx is not None  # x is used: allow_unused=False would have raised
    return gx.tolist()


def create_app(seed: int = 0) -> FastAPI:
    """The app with its own models, optimizer and lock (make it inside the event loop that serves it:
    the lock belongs to one loop)."""
    app = FastAPI(title="agrad saliency and online learning")
    frozen = frozen_model(seed)
    online = nn.Linear(IN_FEATURES, 1)
    optimizer = agrad.optim.SGD(online.parameters(), lr=0.05)
    learning = anyio.Lock()  # held from forward to step by each /learn request
    steps = 0

    @app.post("/saliency")
    async def saliency(batch: Rows) -> dict[str, list[list[float]]]:
        x = _rows(batch).requires_grad_()
        top = _top_logits(frozen, x)  # inline on the loop: keep forwards small here
        (gx,) = await agrad.autograd.grad(top, x)  # time slices: other requests run meanwhile
        assert gx is not None
        return {"saliency": gx.tolist()}

    @app.post("/saliency/threaded")
    def saliency_threaded(batch: Rows) -> dict[str, list[list[float]]]:
        # A `def` route runs in FastAPI's threadpool: the blocking twin holds only that thread.
        return {"saliency": saliency_sync(frozen, _rows(batch))}

    @app.post("/saliency/cooperative")
    async def saliency_cooperative(batch: Rows) -> dict[str, list[list[float]]]:
        # The same synchronous code as the threaded route, in time slices on the loop.
        return {"saliency": await agrad.cooperative(saliency_sync, frozen, _rows(batch))}

    @app.post("/learn")
    async def learn(batch: Examples) -> dict[str, float | int]:
        nonlocal steps
        x = _rows(batch)
        y = agrad.tensor(batch.y).reshape(-1, 1)
        if y.shape[0] != x.shape[0]:
            raise HTTPException(422, "y must have one target per row of x")
        async with learning:  # no step while another request's backward through `online` is in flight
            loss = F.mse_loss(online(x), y)
            optimizer.zero_grad()
            await loss.backward()
            optimizer.step()
            steps += 1
            return {"loss": loss.item(), "step": steps}

    @app.post("/predict")
    async def predict(batch: Rows) -> dict[str, list[float]]:
        with agrad.no_grad():
            return {"y": online(_rows(batch)).reshape(-1).tolist()}

    @app.get("/health")
    async def health() -> str:
        return "ok"

    return app


app = create_app()
