"""A Starlette app serving per-request gradients of one shared MLP, with four interchangeable backends.

Routes (bodies are raw little-endian float32 bytes, ``application/octet-stream``):

* ``POST /saliency`` — x (batch, 784) -> d(top logit of each row)/dx (batch, 784);
* ``POST /tta`` — x (batch, 784) -> logits (batch, 10) after one private SGD
  step on the batch's prediction entropy (the shared weights never change);
* ``GET /health`` — ``ok`` at once: how long it takes shows how free the loop is.

The batch size is ``len(body) // (784 * 4)``; a body that is empty or not a
whole number of rows is answered 400.  Backends (``--backend``):

* ``agrad`` — awaited on the event loop (``model.saliency_agrad``);
* ``agrad-thread`` — agrad's blocking twin in ``anyio.to_thread.run_sync``;
* ``torch`` — PyTorch inline in the handler: blocks the loop for the whole
  computation (what a user gets by default);
* ``torch-thread`` — PyTorch in ``anyio.to_thread.run_sync``: the usual workaround.

Run::

    python -m examples.serving.app --backend agrad --port 8000

No BLAS or OpenMP environment variable is set: the libraries' defaults are
what is served and measured.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Awaitable, Callable

import anyio.to_thread
import numpy as np
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

if __package__ in (None, ""):  # run as a script: make `examples.serving` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from examples.serving import model

__all__ = ["BACKENDS", "create_app", "main"]

Compute = Callable[[np.ndarray], Awaitable[np.ndarray]]


def _in_thread(fn: Callable[[np.ndarray], np.ndarray]) -> Compute:
    async def run(x: np.ndarray) -> np.ndarray:
        return await anyio.to_thread.run_sync(fn, x)

    return run


def _inline(fn: Callable[[np.ndarray], np.ndarray]) -> Compute:
    async def run(x: np.ndarray) -> np.ndarray:
        return fn(x)  # blocks the loop for the whole computation: the baseline being measured

    return run


BACKENDS: dict[str, Callable[[], tuple[Compute, Compute]]] = {
    "agrad": lambda: (model.saliency_agrad, model.tta_agrad),
    "agrad-thread": lambda: (_in_thread(model.saliency_agrad_sync), _in_thread(model.tta_agrad_sync)),
    "torch": lambda: (_inline(model.saliency_torch), _inline(model.tta_torch)),
    "torch-thread": lambda: (_in_thread(model.saliency_torch), _in_thread(model.tta_torch)),
}
"""Backend name -> (saliency, tta), each an async function of x (batch, 784) float32."""

_ROW_BYTES = model.IN_FEATURES * 4


async def _answer(compute: Compute, request: Request) -> Response:
    body = await request.body()
    if not body or len(body) % _ROW_BYTES:
        return PlainTextResponse(f"body must be a positive whole number of rows of {_ROW_BYTES} bytes "
                                 f"(float32 x {model.IN_FEATURES}); got {len(body)} bytes", status_code=400)
    x = np.frombuffer(body, dtype="<f4").reshape(-1, model.IN_FEATURES).copy()
    out = await compute(x)
    return Response(np.ascontiguousarray(out, dtype="<f4").tobytes(), media_type="application/octet-stream")


async def _health(request: Request) -> Response:
    return PlainTextResponse("ok")


def create_app(backend: str) -> Starlette:
    """The app for ``backend`` (one of ``BACKENDS``); the model's weights are built here, once per process."""
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    saliency, tta = BACKENDS[backend]()
    model.weights()
    if backend.startswith("agrad"):
        model.mlp()  # agrad's module, its weights loaded from a checkpoint
    return Starlette(routes=[
        Route("/saliency", functools.partial(_answer, saliency), methods=["POST"]),
        Route("/tta", functools.partial(_answer, tta), methods=["POST"]),
        Route("/health", _health, methods=["GET"]),
    ])


def main(argv: list[str] | None = None) -> None:
    """Serve ``create_app(--backend)`` with uvicorn on 127.0.0.1 (uvloop, httptools, one worker)."""
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=list(BACKENDS), default="agrad")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    uvicorn.run(create_app(args.backend), host="127.0.0.1", port=args.port, loop="uvloop", http="httptools",
                workers=1, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
