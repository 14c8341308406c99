"""Models and optimizers on a second device (the fake CPU-backed one, as CUDA would be):
``Module.to`` moves parameters, buffers and gradients in place; a training step
there (layers, loss, backward, gradient clipping, every optimizer's update, a
scheduler) gives what it gives on the CPU; state dicts come back to the host."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest

import agrad
from tests.devices.fake_backend import FakeArray

OPTIMIZERS = ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "Rprop", "ASGD"]


def model() -> agrad.nn.Module:
    agrad.manual_seed(0)
    nn = agrad.nn
    return nn.Sequential(nn.Conv1d(2, 3, 3, padding=1), nn.BatchNorm1d(3), nn.ReLU(), nn.Flatten(),
                         nn.Linear(12, 4))


def train(m: agrad.nn.Module, name: str, device: Any) -> list[np.ndarray]:
    optimizer = getattr(agrad.optim, name)(m.parameters(), lr=0.01)
    scheduler = agrad.optim.lr_scheduler.StepLR(optimizer, 2, 0.5)
    rng = np.random.default_rng(0)
    for _ in range(4):
        x = agrad.from_numpy(rng.standard_normal((5, 2, 4))).float().to(device)
        y = agrad.from_numpy(rng.integers(0, 4, 5)).to(device)
        optimizer.zero_grad()
        agrad.nn.functional.cross_entropy(m(x), y).backward_sync()
        agrad.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
        optimizer.step()
        scheduler.step()
    return [t.cpu().numpy() for t in m.state_dict().values()]


def test_tensor_to_with_a_none_keeps_that_property(fake_device: str) -> None:
    t = agrad.ones(2).to(fake_device, None)
    assert t.device == agrad.device(fake_device) and t.dtype is agrad.float32
    u = t.to(None, agrad.float64)
    assert u.device == agrad.device(fake_device) and u.dtype is agrad.float64


def test_module_to_moves_parameters_buffers_and_grads_in_place(fake_device: str) -> None:
    m = model()
    m(agrad.randn(2, 2, 4)).sum().backward_sync()
    weight = m[0].weight
    assert m.to(fake_device) is m
    assert m[0].weight is weight and weight.device == agrad.device(fake_device)
    assert type(weight._data) is FakeArray and type(weight.grad._data) is FakeArray
    assert m[1].running_mean.device == agrad.device(fake_device)
    assert m[1].num_batches_tracked.dtype is agrad.int64
    m.to(agrad.float64)
    assert weight.dtype is agrad.float64 and weight.device == agrad.device(fake_device)
    assert m[1].num_batches_tracked.dtype is agrad.int64  # only floating tensors change dtype
    m.cpu()
    assert type(weight._data) is np.ndarray


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_training_on_the_device_matches_the_cpu(fake_device: str, name: str) -> None:
    on_cpu = train(model(), name, "cpu")
    on_device = train(model().to(fake_device), name, fake_device)
    for a, b in zip(on_device, on_cpu):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_state_dict_of_a_device_model_saves_and_loads_to_the_host(fake_device: str) -> None:
    m = model().to(fake_device)
    buf = io.BytesIO()
    agrad.save(m.state_dict(), buf)
    buf.seek(0)
    host = model()
    host.load_state_dict(agrad.load(buf))
    for a, b in zip(host.state_dict().values(), m.state_dict().values()):
        np.testing.assert_array_equal(a.numpy(), b.cpu().numpy())
