"""Elementwise ops: arithmetic with broadcasting and PyTorch's type promotion,
elementwise functions and comparisons."""

from __future__ import annotations

from typing import Any

import numpy as np

from agrad import _dtype
from agrad._ops._common import _binary_samples, _is_bool, _pos, _quiet, _r, _unary_samples
from agrad._ops._registry import defop
from agrad._tensor import Tensor

# The public names of this family (star-imported by ``agrad/__init__.py``).
__all__ = [
    "add", "sub", "mul", "div", "pow", "neg", "exp", "log", "tanh", "sigmoid", "relu", "where",
    "eq", "ne", "lt", "le", "gt", "ge",
]

# -- elementwise arithmetic ------------------------------------------------------


@defop(ref=lambda torch: torch.add,
       vjp=(lambda g: g, lambda g, alpha: g if alpha == 1 else g * alpha), node="AddBackward0",
       methods=("add", "__add__"), rmethods=("__radd__",), inplace=("add_", "__iadd__"),
       promote=True, samples=_binary_samples())
def add(xp, input, other, *, alpha=1):
    """Elementwise ``input + alpha * other`` with broadcasting and type promotion."""
    return input + other if alpha == 1 else input + alpha * other



def _sub_args(input: Any, other: Any, alpha: Any = 1) -> tuple[tuple, dict]:
    if _is_bool(input) or _is_bool(other):
        raise RuntimeError(
            "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to "
            "invert a mask, use the `~` or `logical_not()` operator instead."
        )
    return (input, other), {"alpha": alpha}


@defop(ref=lambda torch: torch.sub,
       vjp=(lambda g: g, lambda g, alpha: -g if alpha == 1 else g * -alpha), node="SubBackward0",
       methods=("sub", "__sub__"), rmethods=("__rsub__",), inplace=("sub_", "__isub__"),
       promote=True, parse=_sub_args, samples=_binary_samples())
def sub(xp, input, other, *, alpha=1):
    """Elementwise ``input - alpha * other``."""
    return input - other if alpha == 1 else input - alpha * other


@defop(ref=lambda torch: torch.mul,
       vjp=(lambda g, other: g * other, lambda g, input: g * input), node="MulBackward0",
       methods=("mul", "__mul__"), rmethods=("__rmul__",), inplace=("mul_", "__imul__"),
       promote=True, samples=_binary_samples())
def mul(xp, input, other):
    """Elementwise product."""
    return input * other


@defop(ref=lambda torch: torch.div,
       vjp=(lambda g, other: g / other, lambda g, other, out: -g * out / other), node="DivBackward0",
       methods=("div", "__truediv__"), rmethods=("__rtruediv__",), inplace=("div_", "__itruediv__"),
       promote=True, to_float=True, samples=_binary_samples(_pos))
@_quiet
def div(xp, input, other):
    """Elementwise true division (integers divide to the default float dtype)."""
    return input / other


def _pow_grad_base(g: Tensor, input: Tensor, exponent: Tensor) -> Tensor:
    # d/dx x**y = y * x**(y-1), defined as 0 where y == 0 (PyTorch's pow_backward_self).
    return where(exponent == 0, 0.0, g * exponent * input ** (exponent - 1))


def _pow_grad_exponent(g: Tensor, input: Tensor, out: Tensor) -> Tensor:
    # d/dy x**y = x**y * log(x), defined as 0 where x == 0 and y >= 0 (pow_backward_exponent).
    return where(input == 0, 0.0, g * out * log(input))


def _pow_args(input: Any, exponent: Any) -> tuple[tuple, dict]:
    if _is_bool(input) and isinstance(exponent, Tensor) and exponent.dtype is _dtype.bool:
        raise NotImplementedError('"pow" not implemented for \'Bool\'')
    return (input, exponent), {}


@defop(ref=lambda torch: torch.pow,
       vjp=(_pow_grad_base, lambda g, input, out: _pow_grad_exponent(g, input, out)),
       node="PowBackward1", methods=("pow", "__pow__"), rmethods=("__rpow__",),
       inplace=("pow_", "__ipow__"), promote=True, parse=_pow_args,
       samples=lambda rng: [((_pos(rng, 3, 4), _r(rng, 3, 4)), {}), ((_pos(rng, 2, 3), 2.0), {}),
                            ((_pos(rng, 3), 0.5), {}), ((1.7, _r(rng, 2, 2)), {})])
@_quiet
def pow(xp, input, exponent):  # noqa: A001 - mirrors torch.pow
    """Elementwise ``input ** exponent``; either may be a number."""
    return (input ** exponent).astype(input.dtype, copy=False)  # numpy makes bool ** bool int8


@defop(ref=lambda torch: torch.neg,
       vjp=lambda g: -g, node="NegBackward0", methods=("neg", "__neg__", "negative"),
       inplace=("neg_",), samples=_unary_samples())
def neg(xp, input):
    """Elementwise negation."""
    return -input


# -- elementwise functions -----------------------------------------------------


@defop(ref=lambda torch: torch.exp,
       vjp=lambda g, out: g * out, node="ExpBackward0", methods=("exp",), inplace=("exp_",),
       to_float=True, samples=_unary_samples())
def exp(xp, input):
    """Elementwise ``e ** input``."""
    return xp.exp(input)


@defop(ref=lambda torch: torch.log,
       vjp=lambda g, input: g / input, node="LogBackward0", methods=("log",), inplace=("log_",),
       to_float=True, samples=_unary_samples(_pos))
@_quiet
def log(xp, input):
    """Elementwise natural logarithm."""
    return xp.log(input)


@defop(ref=lambda torch: torch.tanh,
       vjp=lambda g, out: g * (1 - out * out), node="TanhBackward0", methods=("tanh",),
       inplace=("tanh_",), to_float=True, samples=_unary_samples())
def tanh(xp, input):
    """Elementwise hyperbolic tangent."""
    return xp.tanh(input)


@defop(ref=lambda torch: torch.sigmoid,
       vjp=lambda g, out: g * out * (1 - out), node="SigmoidBackward0", methods=("sigmoid",),
       inplace=("sigmoid_",), to_float=True, samples=_unary_samples())
def sigmoid(xp, input):
    """Elementwise logistic function, computed without overflow for large ``|x|``."""
    e = xp.exp(-xp.abs(input))
    return xp.where(input >= 0, 1 / (1 + e), e / (1 + e)).astype(input.dtype, copy=False)


@defop(ref=lambda torch: torch.relu,
       vjp=lambda g, out: g * (out > 0), node="ReluBackward0", methods=("relu",), inplace=("relu_",),
       samples=_unary_samples())
def relu(xp, input):
    """Elementwise ``max(input, 0)``; its gradient at 0 is 0, as in PyTorch."""
    return xp.maximum(input, 0).astype(input.dtype, copy=False)


@defop(ref=lambda torch: torch.where,
       vjp=(None, lambda g, condition: where(condition, g, 0.0), lambda g, condition: where(condition, 0.0, g)),
       node="WhereBackward0", methods=("where",),
       parse=lambda condition, input, other: _where_args(condition, input, other),
       samples=lambda rng: [((_r(rng, 3, 4) > 0, _r(rng, 3, 4), _r(rng, 4)), {}),
                            ((_r(rng, 3) > 0, _r(rng, 3), 0.0), {})])
def where(xp, condition, input, other):
    """Elements of ``input`` where ``condition`` holds, else of ``other``."""
    return xp.where(condition, input, other)


def _where_args(condition: Any, input: Any, other: Any) -> tuple[tuple, dict]:
    from agrad._ops._registry import _as_constant
    cond = condition if isinstance(condition, Tensor) else _as_constant(np.asarray(condition, dtype=bool), None)
    if cond.dtype is not _dtype.bool:
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor with dtype {cond.dtype}")
    dims, zero_dims, scalars = [], [], []
    for a in (input, other):
        if isinstance(a, Tensor):
            (dims if a.ndim else zero_dims).append(a.dtype)
        else:
            scalars.append(a)
    target = _dtype.result_type(dims, zero_dims, scalars)
    vals = tuple(a if isinstance(a, Tensor) and a.dtype is target else
                 (a.to(target) if isinstance(a, Tensor) else _as_constant(a, target)) for a in (input, other))
    return (cond, *vals), {}


# -- comparisons (not differentiable) -----------------------------------------


def _compare(ufunc_name: str, dunder: str):  # type: ignore[no-untyped-def]
    def forward(xp, input, other):  # type: ignore[no-untyped-def]
        return getattr(xp, ufunc_name)(input, other)

    forward.__name__ = {"equal": "eq", "not_equal": "ne", "less": "lt", "less_equal": "le",
                        "greater": "gt", "greater_equal": "ge"}[ufunc_name]
    forward.__doc__ = f"Elementwise ``{ufunc_name.replace('_', ' ')}`` comparison; a bool tensor."
    return defop(vjp=None, methods=(forward.__name__, dunder), promote=True, samples=_binary_samples(),
                 ref=lambda torch: getattr(torch, forward.__name__))(forward)


eq = _compare("equal", "__eq__")
ne = _compare("not_equal", "__ne__")
lt = _compare("less", "__lt__")
le = _compare("less_equal", "__le__")
gt = _compare("greater", "__gt__")
ge = _compare("greater_equal", "__ge__")
