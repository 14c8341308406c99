"""Every op, forward and backward, on another device: the ``fake`` one.

Each sample call of the op table (``REGISTRY``, as ``tests/ops/test_op_table.py``
runs them) and each case of ``agrad.nn.functional`` (``tests/ops/test_functional.py``)
is computed on the CPU and on a fake device, whose arrays refuse to mix with
host arrays or with the other fake device's (``fake_backend.py``).  The device
run must stay on the device, output and input gradients alike, and give the
CPU's values: so no forward, backward rule or helper makes a host array where
it should make a device one.  Both ``fake:0`` and ``fake:1`` are used: ``fake:0``
is the current device by default, so ``fake:1`` also catches arrays made on the
current device instead of the data's (a missing ``agrad._backends.on``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
import agrad.nn.functional as F
from agrad._ops._registry import OpDef
from agrad.autograd import grad_sync
from tests.devices.fake_backend import FakeBackend
from tests.ops.test_functional import CASES, CONSTANTS, Case
from tests.ops.test_op_table import SAMPLES

# The op table's float64 tolerance (test_matches_torch_float64): both runs are numpy underneath.
TOL = {"rtol": 1e-10, "atol": 1e-12}


@pytest.fixture(params=["fake:0", "fake:1"])
def device(fake: FakeBackend, request: pytest.FixtureRequest) -> str:
    """A fake device to run on (the ``fake`` type registered for the test)."""
    return request.param


def _host(t: agrad.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def _check_same(mine: agrad.Tensor, expected: agrad.Tensor, device: str) -> None:
    """``mine`` is on ``device`` and equals ``expected`` (computed on the CPU)."""
    assert str(mine.device) == device, f"on {mine.device}, expected {device}"
    assert mine.dtype is expected.dtype, f"dtype {mine.dtype} != {expected.dtype}"
    assert mine.shape == expected.shape, f"shape {mine.shape} != {expected.shape}"
    np.testing.assert_allclose(_host(mine), _host(expected), **TOL)


def _compare(fn: Callable[..., agrad.Tensor], make: Callable[[str], list[Any]], device: str,
             differentiable: bool = True) -> None:
    """Run ``fn(*make(dev))`` on the CPU and on ``device`` and compare the outputs
    and (if ``differentiable``) the gradients of the inputs that require grad."""
    cpu_in, dev_in = make("cpu"), make(device)
    expected, out = fn(*cpu_in), fn(*dev_in)
    _check_same(out, expected, device)
    leaves = [i for i, t in enumerate(cpu_in) if isinstance(t, agrad.Tensor) and t.requires_grad]
    if not (differentiable and leaves and expected.requires_grad):
        assert not out.requires_grad
        return
    g = np.random.default_rng(1).standard_normal(expected.shape).astype(expected.numpy(force=True).dtype)
    expected_grads = grad_sync(expected, [cpu_in[i] for i in leaves], agrad.tensor(g), allow_unused=True)
    grads = grad_sync(out, [dev_in[i] for i in leaves], agrad.tensor(g, device=device), allow_unused=True)
    for i, mine, ref in zip(leaves, grads, expected_grads, strict=True):
        assert (mine is None) == (ref is None), f"input {i}: gradient {mine} where the CPU's is {ref}"
        if ref is not None:
            _check_same(mine, ref, device)


# -- the op table ---------------------------------------------------------------


def _sample_inputs(args: tuple, device: str) -> list[Any]:
    """A sample's arguments converted as the op table does, on ``device``: float
    arrays become float64 tensors that require grad, other arrays plain tensors
    (conditions, index tensors), anything else (numbers, shapes, equations,
    index tuples) stays as it is."""
    out: list[Any] = []
    for a in args:
        if isinstance(a, np.ndarray):
            floating = a.dtype.kind == "f"
            out.append(agrad.tensor(a, dtype=agrad.float64 if floating else None, device=device,
                                    requires_grad=floating))
        else:
            out.append(a)
    return out


@pytest.mark.parametrize(("op", "args", "kwargs"), SAMPLES)
def test_op_on_device(device: str, op: OpDef, args: tuple, kwargs: dict) -> None:
    """Each op-table sample gives the CPU's output and input gradients on the device."""
    _compare(lambda *ts: op.public(*ts, **kwargs), lambda dev: _sample_inputs(args, dev), device,
             op.vjps is not None)


# -- nn.functional ----------------------------------------------------------------

_X = np.random.default_rng(5).standard_normal((3, 4))
# Activations beyond test_functional's; the in-place ones (the table ops' ``op_``
# methods) on a non-leaf copy of their input.
ACTIVATIONS = {
    "relu6": Case(lambda F, x: F.relu6(x), _X * 4),
    "relu-inplace": Case(lambda F, x: F.relu(x * 1, inplace=True), _X),
    "hardtanh-inplace": Case(lambda F, x: F.hardtanh(x * 1, -0.5, 0.5, inplace=True), _X + 0.01),
    "leaky_relu-inplace": Case(lambda F, x: F.leaky_relu(x * 1, 0.2, inplace=True), _X),
    "elu-inplace": Case(lambda F, x: F.elu(x * 1, inplace=True), _X),
    "silu": Case(lambda F, x: F.silu(x), _X),
    "gelu-tanh": Case(lambda F, x: F.gelu(x, approximate="tanh"), _X),
}


def _case_inputs(case: Case, device: str) -> list[agrad.Tensor]:
    # As test_functional: float arrays are differentiated unless they are constants
    # (class weights...), integer arrays are class targets or indices.
    return [agrad.tensor(a, dtype=agrad.float64 if a.dtype.kind == "f" else None, device=device,
                         requires_grad=a.dtype.kind == "f" and not any(a is c for c in CONSTANTS))
            for a in case.inputs]


@pytest.mark.parametrize("case", [pytest.param(c, id=name) for name, c in {**CASES, **ACTIVATIONS}.items()])
def test_functional_on_device(device: str, case: Case) -> None:
    """Losses, softmax, linear, layer_norm, embedding and activations give the CPU's
    values and gradients on the device."""
    _compare(lambda *ts: case.fn(F, *ts), lambda dev: _case_inputs(case, dev), device)


def test_functional_moves_host_targets_and_indices(device: str) -> None:
    """Class targets and embedding indices given as lists go where the input is."""
    x = agrad.randn(3, 5, device=device, requires_grad=True)
    w = agrad.randn(6, 2, device=device, requires_grad=True)
    loss = F.cross_entropy(x, [1, -100, 4], label_smoothing=0.1) + F.embedding([[1, 2], [5, 2]], w, 2).sum()
    gx, gw = grad_sync(loss, [x, w])
    assert str(loss.device) == str(gx.device) == str(gw.device) == device


@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
@pytest.mark.parametrize("inplace", [False, True], ids=["out_of_place", "inplace"])
def test_dropout_on_device(device: str, p: float, inplace: bool) -> None:
    """Training-mode dropout runs on the device: each element is dropped or scaled
    by ``1 / (1 - p)``, and so is its gradient."""
    # No zeros in x, so a dropped element is recognisable.
    x = agrad.rand(4, 5, dtype=agrad.float64, device=device, requires_grad=True) + 0.5
    out = F.dropout(x * 1, p, training=True, inplace=inplace, generator=agrad.Generator().manual_seed(0))
    (g,) = grad_sync(out, [x], agrad.ones_like(out))
    assert str(out.device) == str(g.device) == device
    kept = _host(out) != 0
    scale = 0.0 if p == 1.0 else 1 / (1 - p)
    np.testing.assert_allclose(_host(out), np.where(kept, _host(x) * scale, 0.0), **TOL)
    np.testing.assert_allclose(_host(g), np.where(kept, scale, 0.0), **TOL)
