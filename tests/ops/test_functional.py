"""``agrad.nn.functional`` against ``torch.nn.functional``: values and gradients,
plus a float64 ``gradcheck`` of each composite.

Each case is a name, a function of the library's ``functional`` module and
tensor factory, and its inputs (float arrays are differentiated, integer
arrays are class targets).  The same case runs on both libraries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
from agrad.autograd import gradcheck
from tests.helpers import requires_torch, torch

_rng = np.random.default_rng(7)
LOGITS = _rng.standard_normal((4, 5))
LOGITS_1D = _rng.standard_normal(5)
TARGET = np.array([1, 0, 4, 2])
TARGET_IGNORED = np.array([1, -100, 4, 3])
TARGET_CUSTOM_IGNORE = np.array([1, 2, 4, 2])  # class 2 ignored via ignore_index=2
PROBS = np.exp(_rng.standard_normal((4, 5)))
PROBS /= PROBS.sum(axis=1, keepdims=True)
CLASS_WEIGHT = _rng.uniform(0.5, 2.0, 5)
X = _rng.standard_normal((3, 4))
Y = _rng.standard_normal((3, 4))
W = _rng.standard_normal((2, 4))
B = _rng.standard_normal(2)
V = _rng.standard_normal(4)


# Class weights are constants: PyTorch's nll_loss is not differentiable w.r.t. them.
CONSTANTS = (CLASS_WEIGHT,)


class Case:
    """A call ``fn(F, *inputs)`` of a ``functional`` module on tensors made from ``inputs``."""

    def __init__(self, fn: Callable[..., Any], *inputs: np.ndarray) -> None:
        self.fn = fn
        self.inputs = inputs


CASES: dict[str, Case] = {}
for _red in ("none", "sum", "mean"):
    CASES[f"cross_entropy-{_red}"] = Case(lambda F, x, t, r=_red: F.cross_entropy(x, t, reduction=r), LOGITS, TARGET)
    CASES[f"cross_entropy-ignore_index-{_red}"] = Case(
        lambda F, x, t, r=_red: F.cross_entropy(x, t, reduction=r), LOGITS, TARGET_IGNORED)
    CASES[f"cross_entropy-weight-{_red}"] = Case(
        lambda F, x, t, w, r=_red: F.cross_entropy(x, t, weight=w, reduction=r), LOGITS, TARGET, CLASS_WEIGHT)
    CASES[f"cross_entropy-label_smoothing-{_red}"] = Case(
        lambda F, x, t, r=_red: F.cross_entropy(x, t, reduction=r, label_smoothing=0.2), LOGITS, TARGET_IGNORED)
    CASES[f"cross_entropy-probs-{_red}"] = Case(
        lambda F, x, p, r=_red: F.cross_entropy(x, p, reduction=r), LOGITS, PROBS)
    CASES[f"nll_loss-{_red}"] = Case(lambda F, x, t, r=_red: F.nll_loss(x, t, reduction=r), LOGITS, TARGET)
    CASES[f"nll_loss-weight-ignore_index-{_red}"] = Case(
        lambda F, x, t, w, r=_red: F.nll_loss(x, t, weight=w, ignore_index=2, reduction=r),
        LOGITS, TARGET_CUSTOM_IGNORE, CLASS_WEIGHT)
    CASES[f"mse_loss-{_red}"] = Case(lambda F, x, y, r=_red: F.mse_loss(x, y, reduction=r), X, Y)
CASES.update({
    "cross_entropy-custom_ignore_index": Case(lambda F, x, t: F.cross_entropy(x, t, ignore_index=2),
                                              LOGITS, TARGET_CUSTOM_IGNORE),
    "cross_entropy-weight-ignore_index": Case(lambda F, x, t, w: F.cross_entropy(x, t, weight=w),
                                              LOGITS, TARGET_IGNORED, CLASS_WEIGHT),
    "cross_entropy-weight-label_smoothing": Case(
        lambda F, x, t, w: F.cross_entropy(x, t, weight=w, label_smoothing=0.1), LOGITS, TARGET, CLASS_WEIGHT),
    "cross_entropy-probs-label_smoothing": Case(lambda F, x, p: F.cross_entropy(x, p, label_smoothing=0.3),
                                                LOGITS, PROBS),
    "cross_entropy-probs-weight": Case(lambda F, x, p, w: F.cross_entropy(x, p, weight=w), LOGITS, PROBS, CLASS_WEIGHT),
    "cross_entropy-unbatched": Case(lambda F, x, t: F.cross_entropy(x, t), LOGITS_1D, np.array(3)),
    "nll_loss-unbatched": Case(lambda F, x, t: F.nll_loss(x, t), LOGITS_1D, np.array(3)),
    "linear-2d-bias": Case(lambda F, x, w, b: F.linear(x, w, b), X, W, B),
    "linear-2d-no_bias": Case(lambda F, x, w: F.linear(x, w), X, W),
    "linear-1d-bias": Case(lambda F, x, w, b: F.linear(x, w, b), V, W, B),
    "linear-1d-no_bias": Case(lambda F, x, w: F.linear(x, w), V, W),
    "softmax-dim1": Case(lambda F, x: F.softmax(x, dim=1), X),
    "softmax-dim0": Case(lambda F, x: F.softmax(x, dim=0), X),
    "softmax-1d": Case(lambda F, x: F.softmax(x, dim=-1), V),
    "log_softmax-dim1": Case(lambda F, x: F.log_softmax(x, dim=1), X),
    "log_softmax-dim0": Case(lambda F, x: F.log_softmax(x, dim=0), X),
    "log_softmax-1d": Case(lambda F, x: F.log_softmax(x, dim=-1), V),
    "relu": Case(lambda F, x: F.relu(x), X),
})
PARAMS = [pytest.param(case, id=name) for name, case in CASES.items()]


def _differentiated(a: np.ndarray) -> bool:
    # Class-probability targets are differentiated too, as PyTorch does.
    return a.dtype.kind == "f" and not any(a is c for c in CONSTANTS)


def _agrad_inputs(case: Case, dtype: Any) -> list[agrad.Tensor]:
    return [agrad.tensor(a, dtype=dtype if a.dtype.kind == "f" else None, requires_grad=_differentiated(a))
            for a in case.inputs]


def _torch_inputs(case: Case) -> list[Any]:
    return [torch.tensor(a, dtype=torch.float64 if a.dtype.kind == "f" else None, requires_grad=_differentiated(a))
            for a in case.inputs]


@requires_torch
@pytest.mark.parametrize("case", PARAMS)
def test_matches_torch(case: Case) -> None:
    """Values and gradients w.r.t. every float input equal PyTorch's (float64)."""
    ours, theirs = _agrad_inputs(case, agrad.float64), _torch_inputs(case)
    out = case.fn(agrad.nn.functional, *ours)
    expected = case.fn(torch.nn.functional, *theirs)
    assert out.shape == tuple(expected.shape)
    assert out.dtype is agrad.float64
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-10, atol=1e-12)

    grad_output = np.random.default_rng(3).standard_normal(out.shape)
    out.backward_sync(agrad.tensor(grad_output))
    expected.backward(torch.from_numpy(grad_output))
    for mine, ref in zip(ours, theirs, strict=True):
        if ref.requires_grad:
            np.testing.assert_allclose(mine.grad.numpy(), ref.grad.numpy(), rtol=1e-10, atol=1e-12)


@requires_torch
@pytest.mark.parametrize("case", PARAMS)
def test_matches_torch_float32(case: Case) -> None:
    """The same calls in float32 keep float32 and PyTorch's values."""
    ours = _agrad_inputs(case, agrad.float32)
    theirs = [t.float() if t.is_floating_point() else t for t in _torch_inputs(case)]
    out = case.fn(agrad.nn.functional, *ours)
    expected = case.fn(torch.nn.functional, *theirs)
    assert out.dtype is agrad.float32
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", PARAMS)
def test_gradcheck(case: Case) -> None:
    """The composites' gradients (from their primitives) match finite differences."""
    assert gradcheck(lambda *ts: case.fn(agrad.nn.functional, *ts), _agrad_inputs(case, agrad.float64))


def test_relu_inplace_returns_input() -> None:
    x = agrad.tensor([-1.0, 0.0, 2.0])
    assert agrad.nn.functional.relu(x, inplace=True) is x
    assert x.tolist() == [0.0, 0.0, 2.0]


@pytest.mark.parametrize(("target", "message"), [
    (np.array([1, 0, 5, 2]), "Target 5 is out of bounds."),
    (np.array([1, 0, -3, 2]), "Target -3 is out of bounds."),
])
def test_cross_entropy_rejects_out_of_range_targets(target: np.ndarray, message: str) -> None:
    with pytest.raises(IndexError, match=message):
        agrad.nn.functional.cross_entropy(agrad.tensor(LOGITS), agrad.tensor(target))


def test_invalid_reduction() -> None:
    with pytest.raises(ValueError, match="bogus is not a valid value for reduction"):
        agrad.nn.functional.mse_loss(agrad.tensor(X), agrad.tensor(Y), reduction="bogus")
