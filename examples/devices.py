"""Devices: train a small MLP on the GPU if there is one (CuPy), on the CPU otherwise.

    pip install -e '.[cuda]'      # CuPy, for a CUDA GPU; without it this runs on the CPU
    python examples/devices.py

The model lives on ``device``; the labels are moved there with ``.to()``; the
loss comes back to the host with ``.item()``.  ``await loss.backward()`` runs
the CUDA nodes on the device's worker task, with the kernels on a CUDA stream
whose completion the event loop awaits, so a ticker beside it keeps ticking.
Every line that touches agrad is the PyTorch line with ``torch`` renamed and
``await`` added where the backward runs.
"""

from __future__ import annotations

import asyncio

import numpy as np

import agrad
import agrad.nn.functional as F


async def ticker(ticks: list[int]) -> None:
    while True:
        await asyncio.sleep(0.001)
        ticks[0] += 1


async def main() -> None:
    device = agrad.device("cuda" if agrad.cuda.is_available() else "cpu")
    rng = np.random.default_rng(0)
    centers = rng.standard_normal((3, 16)) * 1.5
    labels = rng.integers(0, 3, 1024)
    x = agrad.tensor((centers[labels] + rng.standard_normal((1024, 16))).astype(np.float32), device=device)
    y = agrad.tensor(labels).to(device)
    w1 = (agrad.randn(16, 256, device=device) * 0.25).requires_grad_()
    b1 = agrad.zeros(256, device=device, requires_grad=True)
    w2 = (agrad.randn(256, 3, device=device) * 0.06).requires_grad_()
    ticks = [0]
    tick_task = asyncio.create_task(ticker(ticks))
    for step in range(101):
        loss = F.cross_entropy((x @ w1 + b1).relu() @ w2, y)
        await loss.backward()
        with agrad.no_grad():
            for p in (w1, b1, w2):
                p.sub_(p.grad * 0.2)
                p.grad = None
        if step % 25 == 0:
            print(f"step {step:3d}  loss {loss.item():.4f}  on {loss.device}")
    tick_task.cancel()
    print(f"ticker ticked {ticks[0]} times while training on {device}")


if __name__ == "__main__":
    asyncio.run(main())
