"""CUDA through CuPy: skipped where CuPy or a GPU is missing (CI has neither).

What the fake device checks in CI (routing, transfers, workers), checked again
on the real backend: gradients on CUDA equal the CPU's and PyTorch's on the
same GPU, the awaited backward never blocks the loop on a synchronize, and
the loop keeps running other tasks while a large CUDA backward is in flight.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import numpy as np
import pytest

import agrad
import agrad.nn.functional as F
from agrad._backends._cupy import CupyBackend
from tests.devices.conftest import Api
from tests.helpers import torch

pytestmark = [pytest.mark.skipif(not agrad.cuda.is_available(), reason="needs CuPy and a CUDA GPU"),
              pytest.mark.anyio]

SIZES = (32, 64, 64, 5)


async def _mlp_grads(dev: str, api: Api, seed: int = 0, batch: int = 16) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    ps = {}
    for i, (a, b) in enumerate(zip(SIZES[:-1], SIZES[1:])):
        ps[f"w{i}"] = agrad.tensor(rng.standard_normal((a, b)) / np.sqrt(a), dtype=agrad.float64, device=dev,
                                   requires_grad=True)
        ps[f"b{i}"] = agrad.tensor(rng.standard_normal(b), dtype=agrad.float64, device=dev, requires_grad=True)
    x = agrad.tensor(rng.standard_normal((batch, SIZES[0])), dtype=agrad.float64, device=dev)
    y = agrad.tensor(rng.integers(0, SIZES[-1], batch), device=dev)
    h = x
    for i in range(len(SIZES) - 1):
        h = h @ ps[f"w{i}"] + ps[f"b{i}"]
        h = h.tanh() if i < len(SIZES) - 2 else h
    await api.tensor_backward(F.cross_entropy(h, y))
    return {k: p.grad.cpu().numpy() for k, p in ps.items()}


async def test_mlp_gradients_on_cuda_equal_the_cpus(api: Api) -> None:
    cpu = await _mlp_grads("cpu", api)
    cuda = await _mlp_grads("cuda:0", api)
    for k in cpu:
        np.testing.assert_allclose(cuda[k], cpu[k], rtol=1e-10, atol=1e-12)


@pytest.mark.skipif(torch is None or not torch.cuda.is_available(), reason="needs PyTorch with CUDA")
def test_gradients_equal_pytorchs_on_the_same_gpu() -> None:
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((64, 128)), rng.standard_normal((128, 32))
    a_x = agrad.tensor(x, device="cuda", requires_grad=True)
    a_w = agrad.tensor(w, device="cuda", requires_grad=True)
    (a_x @ a_w).tanh().pow(2).mean().backward_sync()
    t_x = torch.tensor(x, device="cuda", requires_grad=True)
    t_w = torch.tensor(w, device="cuda", requires_grad=True)
    (t_x @ t_w).tanh().pow(2).mean().backward()
    np.testing.assert_allclose(a_x.grad.cpu().numpy(), t_x.grad.cpu().numpy(), rtol=1e-10)
    np.testing.assert_allclose(a_w.grad.cpu().numpy(), t_w.grad.cpu().numpy(), rtol=1e-10)


async def test_an_awaited_cuda_backward_never_blocks_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_blocking_sync(self: Any, index: int) -> None:
        raise AssertionError("the awaited backward called a blocking synchronize")

    monkeypatch.setattr(CupyBackend, "synchronize", no_blocking_sync)
    x = agrad.randn(2048, 2048, device="cuda", requires_grad=True)
    s = agrad.tensor(0.5, requires_grad=True)  # its gradient is copied to the host inside the backward
    loss = x
    for _ in range(8):
        loss = (loss @ x).tanh() * s
    loss = loss.sum().cpu()
    ticks = 0
    done = anyio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await loss.backward()
        done.set()
    assert ticks > 1 and x.grad.device == "cuda:0" and s.grad.is_cpu


def test_mixed_cuda_and_cpu_raise_pytorchs_error() -> None:
    with pytest.raises(RuntimeError, match="found at least two devices, cuda:0 and cpu!"):
        agrad.ones(2, device="cuda") + agrad.ones(2)
    s = agrad.tensor(2.0, requires_grad=True)
    x = agrad.ones(3, device="cuda", requires_grad=True)
    (x * s).sum().backward_sync()
    assert s.grad.is_cpu and s.grad.item() == 3.0 and x.grad.device == "cuda:0"


def test_every_op_and_functional_case_on_cuda() -> None:
    """The fake-device sweep (test_ops_on_device.py) on the real backend, as one
    test: every op-table sample and nn.functional case, values and gradients
    equal to the CPU's."""
    from tests.devices import test_ops_on_device as sweep

    failures = []
    for op, args, kwargs in (p.values for p in sweep.SAMPLES):
        try:
            sweep._compare(lambda *ts, op=op, kwargs=kwargs: op.public(*ts, **kwargs),
                           lambda dev, args=args: sweep._sample_inputs(args, dev), "cuda:0", op.vjps is not None)
        except Exception as exc:  # collected: one report for the whole table
            failures.append(f"{op.name}{args!r:.60}: {type(exc).__name__}: {exc}"[:300])
    for name, case in {**sweep.CASES, **sweep.ACTIVATIONS}.items():
        try:
            sweep._compare(lambda *ts, case=case: case.fn(F, *ts),
                           lambda dev, case=case: sweep._case_inputs(case, dev), "cuda:0")
        except Exception as exc:
            failures.append(f"{name}: {type(exc).__name__}: {exc}"[:300])
    assert not failures, "\n".join(failures)
