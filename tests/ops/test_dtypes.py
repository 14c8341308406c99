"""PyTorch's type promotion, and how dtypes meet autograd.

* Every pair of operands drawn from {bool, int32, int64, float16, float32,
  float64} tensors (dimensioned and 0-d) and Python scalars (True, 2, 2.5),
  through the arithmetic operators and comparisons, gives PyTorch's result
  dtype and values (or fails where PyTorch fails).
* Only floating tensors can require gradients.
* Gradients flowing back through a promotion arrive in the leaf's own dtype.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
from tests.helpers import requires_torch, torch

DTYPES = ["bool", "int32", "int64", "float16", "float32", "float64"]
SCALARS = [True, 2, 2.5]

# Operator spellings: a Python scalar on the left goes through the reflected
# method (``2 - t`` -> ``t.__rsub__(2)``), as in PyTorch.
OPS: dict[str, Callable[[Any, Any], Any]] = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
    "pow": operator.pow, "eq": operator.eq, "ne": operator.ne, "lt": operator.lt,
    "le": operator.le, "gt": operator.gt, "ge": operator.ge,
}

# Small positive values, so that every dtype holds them and pow stays finite.
_VALUES = np.array([1, 2, 3])


def _operands() -> list[tuple[str, Any]]:
    """(id, spec): spec is (dtype name, ndim) for a tensor, or a Python scalar."""
    tensors = [(f"{d}{'_0d' if zero_dim else ''}", (d, 0 if zero_dim else 1))
               for d in DTYPES for zero_dim in (False, True)]
    scalars = [(f"scalar_{s!r}", s) for s in SCALARS]
    return tensors + scalars


def _make(spec: Any, lib: Any) -> Any:
    if not isinstance(spec, tuple):
        return spec
    name, ndim = spec
    data = _VALUES.astype(name) if ndim else _VALUES[1].astype(name)
    return lib.tensor(data.tolist(), dtype=getattr(lib, name))


def _call(op: str, left: Any, right: Any, lib: Any) -> Any:
    """The result, or the type of the exception the call raised."""
    try:
        return OPS[op](_make(left, lib), _make(right, lib))
    except Exception as exc:  # noqa: BLE001 - compared with PyTorch's behaviour
        return type(exc)


def _pairs(torch_raises: bool) -> list[Any]:
    """The (op, left, right) cases with at least one tensor operand that
    PyTorch accepts (``torch_raises=False``) or rejects (``True``)."""
    params = []
    operands = _operands()
    for op in OPS:
        for left_id, left in operands:
            for right_id, right in operands:
                if not (isinstance(left, tuple) or isinstance(right, tuple)):
                    continue
                raises = torch is not None and isinstance(_call(op, left, right, torch), type)
                if raises == torch_raises:
                    params.append(pytest.param(op, left, right, id=f"{op}-{left_id}-{right_id}"))
    return params


@requires_torch
@pytest.mark.parametrize(("op", "left", "right"), _pairs(torch_raises=False))
def test_promotion_matches_torch(op: str, left: Any, right: Any) -> None:
    """The result dtype (and value) is PyTorch's."""
    expected = _call(op, left, right, torch)
    result = _call(op, left, right, agrad)
    assert not isinstance(result, type), f"agrad raised {result.__name__}; PyTorch gives {expected!r}"
    assert result.dtype.name == str(expected.dtype).removeprefix("torch.")
    np.testing.assert_allclose(result.numpy().astype(np.float64), expected.numpy().astype(np.float64), rtol=1e-3)


@requires_torch
@pytest.mark.parametrize(("op", "left", "right"), _pairs(torch_raises=True))
def test_rejects_what_torch_rejects(op: str, left: Any, right: Any) -> None:
    """Where PyTorch refuses the dtypes (``-`` on bools, ``pow`` of bools), agrad raises the same error type."""
    expected = _call(op, left, right, torch)
    result = _call(op, left, right, agrad)
    assert result is expected, f"PyTorch raises {expected.__name__}, agrad returned {result!r}"


@pytest.mark.parametrize("dtype", ["bool", "int32", "int64", "uint8"])
@pytest.mark.parametrize("how", ["factory", "method", "attribute"])
def test_non_float_tensor_cannot_require_grad(dtype: str, how: str) -> None:
    d = getattr(agrad, dtype)
    message = ("Only Tensors of floating point and complex dtype" if how == "factory"  # PyTorch's two wordings
               else "only Tensors of floating point dtype") + " can require gradients"
    with pytest.raises(RuntimeError, match=message):
        if how == "factory":
            agrad.zeros(2, dtype=d, requires_grad=True)
        elif how == "method":
            agrad.zeros(2, dtype=d).requires_grad_()
        else:
            agrad.zeros(2, dtype=d).requires_grad = True


def test_non_float_tensor_can_turn_requires_grad_off() -> None:
    t = agrad.tensor([1, 2])
    assert t.requires_grad_(False) is t
    assert not t.requires_grad


# A float32 leaf meets a float64 operand: the forward computes in the promoted
# dtype, and the gradient is cast back to float32 on its way to the leaf.
MIXED = {
    "mul-float64_tensor": lambda x, y: (x * y).sum(),
    "add-float64_0d": lambda x, y: (x + y[0]).sum(),
    "div-float64_tensor": lambda x, y: (y / x).sum(),
    "pow-float64_tensor": lambda x, y: (x ** y).sum(),
    "matmul_after_cast": lambda x, y: (x.double() @ y),
}


@requires_torch
@pytest.mark.parametrize("fn", list(MIXED.values()), ids=list(MIXED))
def test_float32_leaf_gets_float32_grad(fn: Callable[[Any, Any], Any]) -> None:
    x_np = np.array([0.5, 1.25, 2.0], dtype=np.float32)
    y_np = np.array([1.5, -0.75, 0.3], dtype=np.float64)
    x, y = agrad.tensor(x_np, requires_grad=True), agrad.tensor(y_np, requires_grad=True)
    tx, ty = torch.tensor(x_np, requires_grad=True), torch.tensor(y_np, requires_grad=True)
    out, expected = fn(x, y), fn(tx, ty)
    assert out.dtype.name == str(expected.dtype).removeprefix("torch.")
    out.backward_sync()
    expected.backward()
    assert x.grad.dtype is agrad.float32
    assert y.grad.dtype is agrad.float64
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), rtol=1e-6)
