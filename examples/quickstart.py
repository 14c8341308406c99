"""agrad quickstart: train a small MLP with an awaited backward, then with the blocking twin.

Needs only agrad's own dependencies (numpy, anyio, uvloop); runs in a few seconds::

    python examples/quickstart.py

1. ``await loss.backward()`` inside ``asyncio.run``: the backward runs as part
   of the awaiting task and hands the event loop back every time slice, so a
   ticker task beside it keeps ticking while gradients are computed.
2. ``loss.backward_sync()`` in plain synchronous code: same engine, same
   gradients, no event loop needed.
3. ``agrad.autograd.grad``: a gradient returned to the caller, leaving every
   ``.grad`` untouched.

Every line that touches agrad is the PyTorch line with ``torch`` renamed and
``await`` added where the backward runs.
"""

from __future__ import annotations

import asyncio
import time

import numpy as np

import agrad
import agrad.nn.functional as F

N_CLASSES, N_FEATURES, HIDDEN, BATCH = 3, 16, 512, 1024
LR = 0.2


def make_data(rng: np.random.Generator) -> tuple[agrad.Tensor, agrad.Tensor]:
    """Three Gaussian blobs in 16 dimensions: inputs (float32) and class labels (int64)."""
    centers = rng.standard_normal((N_CLASSES, N_FEATURES)) * 1.5
    labels = rng.integers(0, N_CLASSES, BATCH)
    points = centers[labels] + rng.standard_normal((BATCH, N_FEATURES))
    return agrad.tensor(points.astype(np.float32)), agrad.tensor(labels)


class MLP:
    """``in -> hidden -> hidden -> classes`` with ReLU; weights laid out as in ``torch.nn.Linear``."""

    def __init__(self, sizes: tuple[int, ...], rng: np.random.Generator) -> None:
        self.layers = []
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
            bound = 1.0 / np.sqrt(fan_in)
            weight = agrad.tensor(rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32), requires_grad=True)
            bias = agrad.zeros(fan_out, requires_grad=True)
            self.layers.append((weight, bias))

    def __call__(self, x: agrad.Tensor) -> agrad.Tensor:
        for i, (weight, bias) in enumerate(self.layers):
            x = F.linear(x, weight, bias)
            if i < len(self.layers) - 1:
                x = F.relu(x)
        return x

    def parameters(self) -> list[agrad.Tensor]:
        return [p for layer in self.layers for p in layer]


def sgd_step(params: list[agrad.Tensor], lr: float) -> None:
    """Plain SGD, as ``torch.optim.SGD.step()`` followed by ``zero_grad()`` would do it."""
    with agrad.no_grad():
        for p in params:
            p -= lr * p.grad
            p.grad = None


async def train_awaited(model: MLP, x: agrad.Tensor, y: agrad.Tensor, steps: int) -> list[float]:
    """Train with ``await loss.backward()`` while a ticker task runs on the same loop."""
    ticks = 0
    in_backward = False

    async def ticker() -> None:
        # Stands in for the rest of an async server.  The training loop below
        # awaits nothing but the backward, so every tick counted here happened
        # because the backward handed the loop back (once per time slice).
        nonlocal ticks
        while True:
            await asyncio.sleep(0)
            if in_backward:
                ticks += 1

    ticker_task = asyncio.create_task(ticker())
    losses = []
    for step in range(steps):
        loss = F.cross_entropy(model(x), y)
        ticks, in_backward = 0, True
        started = time.perf_counter()
        await loss.backward()
        elapsed, in_backward = time.perf_counter() - started, False
        sgd_step(model.parameters(), LR)
        losses.append(loss.item())
        print(f"  step {step}: loss {loss.item():.4f}  (backward {elapsed * 1e3:5.1f} ms, "
              f"ticker ran {ticks} times during it)")
    ticker_task.cancel()
    return losses


def train_blocking(model: MLP, x: agrad.Tensor, y: agrad.Tensor, steps: int) -> list[float]:
    """The same loop in plain synchronous code, with the blocking twin."""
    losses = []
    for step in range(steps):
        loss = F.cross_entropy(model(x), y)
        loss.backward_sync()
        sgd_step(model.parameters(), LR)
        losses.append(loss.item())
        print(f"  step {step}: loss {loss.item():.4f}")
    return losses


async def input_gradient(model: MLP, x: agrad.Tensor, y: agrad.Tensor) -> agrad.Tensor:
    """d(loss)/d(inputs) via ``agrad.autograd.grad``: returned, not accumulated into any ``.grad``."""
    x = x.detach().requires_grad_()
    loss = F.cross_entropy(model(x), y)
    (grad_x,) = await agrad.autograd.grad(loss, [x])
    return grad_x


def main() -> None:
    rng = np.random.default_rng(0)
    x, y = make_data(rng)
    model = MLP((N_FEATURES, HIDDEN, HIDDEN, N_CLASSES), rng)

    print("1. await loss.backward() inside asyncio.run, with a ticker task beside it")
    awaited = asyncio.run(train_awaited(model, x, y, steps=6))

    print("2. loss.backward_sync() in plain synchronous code")
    blocking = train_blocking(model, x, y, steps=6)

    print("3. agrad.autograd.grad: a gradient without touching .grad")
    grad_x = asyncio.run(input_gradient(model, x, y))
    untouched = all(p.grad is None for p in model.parameters())
    print(f"  d(loss)/d(x): shape {tuple(grad_x.shape)}, norm {float(np.linalg.norm(grad_x.numpy())):.4f}; "
          f"every parameter's .grad is still None: {untouched}")

    losses = awaited + blocking
    if not (losses[-1] < losses[0] and untouched):
        raise SystemExit("quickstart: the loss did not decrease, or .grad was touched")
    print(f"loss went from {losses[0]:.4f} to {losses[-1]:.4f}")


if __name__ == "__main__":
    main()
