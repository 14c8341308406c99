"""Elementwise ops: arithmetic with broadcasting and PyTorch's type promotion,
elementwise functions and comparisons."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from agrad import _dtype
from agrad._graph._node import _is_constant
from agrad._ops._common import (
    _binary_samples,
    _is_bool,
    _pos,
    _quiet,
    _quiet_nan,
    _r,
    _unary_samples,
    _zeros_on,
)
from agrad._ops._registry import defop, identity
from agrad._tensor import Tensor

# The public names of this family (star-imported by ``agrad/__init__.py``).
__all__ = [
    "add", "sub", "mul", "pow", "neg", "exp", "log", "tanh", "sigmoid", "relu", "where",
    "eq", "ne", "lt", "le", "gt", "ge",
    "abs", "sign", "sqrt", "rsqrt", "expm1", "log1p", "log2", "sin", "cos", "tan", "reciprocal", "erf",
    "floor", "ceil", "round", "minimum", "maximum", "clamp", "clip",
    "logical_and", "logical_or", "logical_xor", "logical_not", "bitwise_not",
]

# -- elementwise arithmetic ------------------------------------------------------


@defop(ref=lambda torch: torch.add,
       vjp=(identity, lambda g, alpha: g if alpha == 1 else g * alpha), node="AddBackward0",
       methods=("add", "__add__"), rmethods=("__radd__",), inplace=("add_", "__iadd__"),
       promote=True, samples=_binary_samples())
def add(xp, input, other, *, alpha=1):
    """Elementwise ``input + alpha * other`` with broadcasting and type promotion."""
    if type(alpha) is int and alpha == 1:  # the common call: no check, no multiply
        return input + other
    _check_alpha(input.dtype, alpha)
    return (input + alpha * other).astype(input.dtype, copy=False)  # bool + 2 * bool stays bool


def _check_alpha(dtype: np.dtype, alpha: Any) -> None:
    """PyTorch's ``alpha_check``: ``alpha`` must fit the result's dtype (``dtype``,
    the promoted one the forward computes in): no float alpha for integral or
    bool results, a bool alpha only for bool results."""
    if isinstance(alpha, (bool, np.bool_)):
        if dtype.kind != "b":
            raise RuntimeError("Boolean alpha only supported for Boolean results.")
    elif isinstance(alpha, (float, np.floating)) and dtype.kind in "biu":
        raise RuntimeError("For integral input tensors, argument alpha must not be a floating point number.")
    elif isinstance(alpha, complex) and dtype.kind != "c":
        raise RuntimeError("For non-complex input tensors, argument alpha must not be a complex number.")



def _sub_args(input: Any, other: Any, alpha: Any = 1) -> tuple[tuple, dict]:
    if _is_bool(input) and _is_bool(other):
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. "
                           "Use the `^` or `logical_xor()` operator instead.")
    if _is_bool(input) or _is_bool(other):
        raise RuntimeError(
            "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to "
            "invert a mask, use the `~` or `logical_not()` operator instead."
        )
    return (input, other), {"alpha": alpha}


@defop(ref=lambda torch: torch.sub,
       vjp=(identity, lambda g, alpha: -g if alpha == 1 else g * -alpha), node="SubBackward0",
       methods=("sub", "__sub__"), inplace=("sub_", "__isub__"),  # ``1 - x`` is rsub's (RsubBackward1)
       promote=True, parse=_sub_args, samples=_binary_samples())
def sub(xp, input, other, *, alpha=1):
    """Elementwise ``input - alpha * other``."""
    if type(alpha) is int and alpha == 1:
        return input - other
    _check_alpha(input.dtype, alpha)
    return (input - alpha * other).astype(input.dtype, copy=False)


@defop(ref=lambda torch: torch.mul,
       vjp=(lambda g, other: g * other, lambda g, input: g * input), node="MulBackward0",
       methods=("mul", "__mul__"), rmethods=("__rmul__",), inplace=("mul_", "__imul__"),
       promote=True, samples=_binary_samples())
def mul(xp, input, other):
    """Elementwise product."""
    return input * other


@defop(ref=lambda torch: torch.div,
       vjp=(lambda g, other: g / other, lambda g, other, out: -g * out / other), node="DivBackward0",
       methods=("__truediv__",), rmethods=("__rtruediv__",), inplace=("__itruediv__",),
       promote=True, to_float=True, samples=_binary_samples(_pos))
@_quiet
def div(xp, input, other):
    """Elementwise true division (integers divide to the default float dtype)."""
    return input / other


# Note [Pow backward at zero]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch's pow_backward_self and pow_backward_exponent: d/dx x**y is
# ``y * x**(y-1)`` except where y == 0 (0, so 0**0 has gradient 0, not NaN);
# d/dy x**y is ``x**y * log(x)`` except where x == 0 and y >= 0 (0: 0**y is
# flat there).  At x == 0 and y < 0, x**y is inf and d/dy is inf * log(0) =
# -inf, as in PyTorch.  The branch ``where`` discards is computed on safe
# values (exponent 1, base 1) so that it raises no numpy warning (0 * inf);
# the selected values are PyTorch's.  The safe values are the mask added
# (``exponent + flat``: 1 where the exponent is 0), not a second ``where``, so
# that a create_graph backward saves only the masks PyTorch's formulas save
# for saved-tensor hooks to see.  A Python-number exponent takes PyTorch's
# ``pow_backward(Scalar)`` branch, which saves no mask at all.  A deliberate
# difference follows: second derivatives at those flat points are 0 here,
# where PyTorch's are NaN (its discarded branch is 0 * inf there); elsewhere
# they are PyTorch's (tests/ops/test_torch_semantics.py).
def _pow_grad_base(g: Tensor, input: Tensor, exponent: Tensor) -> Tensor:
    if _is_constant(exponent):  # Note [Scalar constants]
        e = exponent.item()
        return _zeros_on(g, g.shape) if e == 0 else g * (e * input ** (e - 1))
    flat = exponent == 0
    return where(flat, 0.0, g * (exponent * input ** (exponent + flat.to(exponent.dtype) - 1)))


def _pow_grad_exponent(g: Tensor, input: Tensor, exponent: Tensor, out: Tensor) -> Tensor:
    flat = logical_and(input == 0, exponent >= 0)
    base = input if input.dtype is out.dtype else input.to(out.dtype)
    return g * where(flat, 0.0, out * log(base + flat.to(base.dtype)))


def _pow_args(input: Any, exponent: Any) -> tuple[tuple, dict]:
    if _is_bool(input) and isinstance(exponent, Tensor) and exponent.dtype is _dtype.bool:
        raise NotImplementedError('"pow" not implemented for \'Bool\'')
    # PyTorch's overload, which names the node: Tensor ** Scalar records
    # PowBackward0, Tensor ** Tensor PowBackward1, Scalar ** Tensor PowBackward2.
    overload = 0 if not isinstance(exponent, Tensor) else 2 if not isinstance(input, Tensor) else 1
    return (input, exponent), {"overload": overload}


@defop(ref=lambda torch: torch.pow,
       vjp=(_pow_grad_base, _pow_grad_exponent),
       node=("PowBackward0", "PowBackward1", "PowBackward2"), node_for=lambda overload: f"PowBackward{overload}",
       methods=("pow", "__pow__"), rmethods=("__rpow__",),
       inplace=("pow_", "__ipow__"), promote=True, parse=_pow_args,
       samples=lambda rng: [((_pos(rng, 3, 4), _r(rng, 3, 4)), {}), ((_pos(rng, 2, 3), 2.0), {}),
                            ((_pos(rng, 3), 0.5), {}), ((1.7, _r(rng, 2, 2)), {})])
@_quiet
def pow(xp, input, exponent, *, overload=1):  # noqa: A001 - mirrors torch.pow
    """Elementwise ``input ** exponent``; either may be a number (``overload`` names
    PyTorch's overload, for the node's name only)."""
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
@_quiet_nan  # Note [Positive NaN]
def log(xp, input):
    """Elementwise natural logarithm."""
    return xp.log(input)


# Note [Fused backward kernels]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Written in agrad ops, tanh's vjp ``g * (1 - out * out)`` is three ops: three
# dispatches and three temporaries, where PyTorch calls one kernel,
# ``tanh_backward``.  The activations' vjps call such fused ops, which are
# ops like any other (so ``create_graph`` differentiates them: their own vjps
# call them again) and whose numpy forward reuses one temporary.  PyTorch's
# names and node names are kept (``TanhBackwardBackward0``...), and their
# samples are checked against ``torch.ops.aten``.
def _backward_samples(out):
    """Samples ``(grad, output)`` with ``output`` drawn from the forward's range."""
    return lambda rng: [((_r(rng, 3, 4), out(_r(rng, 3, 4))), {}), ((_r(rng), np.asarray(out(_r(rng)))), {})]


@defop(ref=lambda torch: torch.ops.aten.tanh_backward,
       vjp=(lambda g, output: _tanh_backward(g, output), lambda g, grad, output: -2 * g * grad * output),
       node="TanhBackwardBackward0", promote=True, samples=_backward_samples(np.tanh))
def _tanh_backward(xp, grad, output):
    """``grad * (1 - output**2)``: tanh's backward given its output, as one kernel."""
    t = xp.multiply(output, output, out=xp.empty_like(output))  # an array even when 0-d
    xp.subtract(1, t, out=t)
    t *= grad
    return t


@defop(ref=lambda torch: torch.tanh,
       vjp=lambda g, out: _tanh_backward(g, out), node="TanhBackward0", methods=("tanh",),
       inplace=("tanh_",), to_float=True, samples=_unary_samples())
def tanh(xp, input):
    """Elementwise hyperbolic tangent."""
    return xp.tanh(input)


@defop(ref=lambda torch: torch.ops.aten.sigmoid_backward,
       vjp=(lambda g, output: _sigmoid_backward(g, output), lambda g, grad, output: g * grad * (1 - 2 * output)),
       node="SigmoidBackwardBackward0", promote=True,
       samples=_backward_samples(lambda x: 1 / (1 + np.exp(-x))))
def _sigmoid_backward(xp, grad, output):
    """``grad * output * (1 - output)``: sigmoid's backward given its output, as one kernel."""
    t = xp.subtract(1, output, out=xp.empty_like(output))  # an array even when 0-d
    t *= output
    t *= grad
    return t


@defop(ref=lambda torch: torch.sigmoid,
       vjp=lambda g, out: _sigmoid_backward(g, out), node="SigmoidBackward0", methods=("sigmoid",),
       inplace=("sigmoid_",), to_float=True, samples=_unary_samples())
def sigmoid(xp, input):
    """Elementwise logistic function, computed without overflow for large ``|x|``."""
    e = xp.exp(-xp.abs(input))
    return xp.where(input >= 0, 1 / (1 + e), e / (1 + e)).astype(input.dtype, copy=False)


def _away_from_zero(x: np.ndarray) -> np.ndarray:
    # threshold_backward is piecewise constant in ``self``: keep samples off the step.
    return np.where(np.abs(x) < 0.2, 0.7, x)


@defop(ref=lambda torch: lambda grad, input, threshold=0.0: torch.ops.aten.threshold_backward(grad, input, threshold),
       vjp=(lambda g, input, threshold: _threshold_backward(g, input, threshold=threshold),
            lambda g: g * 0),  # zero almost everywhere, as PyTorch's zeros_like(grad)
       node="ThresholdBackwardBackward0", promote=True, samples=_backward_samples(_away_from_zero))
@_quiet
def _threshold_backward(xp, grad, input, *, threshold=0.0):
    """``grad`` except where ``input <= threshold`` (0 there; a NaN input keeps its
    gradient, as PyTorch's): relu's backward (on its output) as one kernel."""
    keep = xp.logical_not(input <= threshold)
    # ``grad * keep`` is 3-6x faster than a select but differs from it where a
    # masked-out gradient is inf or nan (0 * inf is nan): the product then holds
    # a NaN, which its max finds (a third of the time of a sum, which relu's
    # backward took in a training step).
    out = xp.multiply(grad, keep, out=xp.empty_like(grad))
    if out.size and xp.isnan(out.max()):
        out = xp.where(keep, grad, xp.zeros((), grad.dtype))
    return out


@defop(ref=lambda torch: torch.relu,
       vjp=lambda g, out: _threshold_backward(g, out), node="ReluBackward0", methods=("relu",),
       inplace=("relu_",), samples=_unary_samples())
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
    from agrad._ops._dispatch import _as_constant
    cond = condition if isinstance(condition, Tensor) else _as_constant(np.asarray(condition, dtype=bool), None)
    if cond.dtype is not _dtype.bool:
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor with dtype {cond.dtype}")
    dims: list[_dtype.dtype] = []
    zero_dims: list[_dtype.dtype] = []
    scalars: list[Any] = []
    for a in (input, other):
        if isinstance(a, Tensor):
            (dims if a.ndim else zero_dims).append(a.dtype)
        else:
            scalars.append(a)
    target = _dtype.result_type(dims, zero_dims, scalars)
    vals = tuple(a if isinstance(a, Tensor) and a.dtype is target else a.to(target) if isinstance(a, Tensor)
                 else _as_constant(_dtype.convert_scalar(a, target), target)  # Note [Checked scalar conversion]
                 for a in (input, other))
    return (cond, *vals), {}


# -- comparisons (not differentiable) -----------------------------------------


def _compare(ufunc_name: str, dunder: str):
    def forward(xp, input, other):
        return getattr(xp, ufunc_name)(input, other)

    forward.__name__ = {"equal": "eq", "not_equal": "ne", "less": "lt", "less_equal": "le",
                        "greater": "gt", "greater_equal": "ge"}[ufunc_name]
    forward.__doc__ = f"Elementwise ``{ufunc_name.replace('_', ' ')}`` comparison; a bool tensor."
    public = defop(vjp=None, methods=(forward.__name__, dunder), promote=True, samples=_binary_samples(),
                   ref=lambda torch: getattr(torch, forward.__name__))(forward)
    return _tensor_first(public)


def _tensor_first(public: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """The torch function of a comparison, which (unlike its operator, whose
    reflected form ``2 < t`` Python turns into ``t > 2``) takes a tensor first:
    ``torch.gt(2, t)`` is a TypeError.  The methods and operators are bound to
    ``public`` itself, so they pay nothing for the check."""
    name = public.__name__

    def checked(input: Any, other: Any, *args: Any, **kwargs: Any) -> Tensor:
        if not isinstance(input, Tensor):
            got = ", ".join("Tensor" if isinstance(a, Tensor) else type(a).__name__ for a in (input, other, *args))
            raise TypeError(f"{name}() received an invalid combination of arguments - got ({got}), "
                            "but expected one of:\n * (Tensor input, Tensor other, *, Tensor out = None)\n"
                            " * (Tensor input, Number other, *, Tensor out = None)\n")
        return public(input, other, *args, **kwargs)

    checked.__name__ = checked.__qualname__ = name
    checked.__doc__ = public.__doc__
    checked.__wrapped__ = public  # type: ignore[attr-defined]
    return checked


eq = _compare("equal", "__eq__")
ne = _compare("not_equal", "__ne__")
lt = _compare("less", "__lt__")
le = _compare("less_equal", "__le__")
gt = _compare("greater", "__gt__")
ge = _compare("greater_equal", "__ge__")


# -- more elementwise functions -------------------------------------------------


def _zeros(g: Tensor) -> Tensor:
    # The gradient of a piecewise-constant function: zeros, independent of g
    # (PyTorch's zeros_like(grad), also where g is inf or nan).
    return _zeros_on(g, g.shape)


def _kinks(rng: np.random.Generator, *shape: int) -> np.ndarray:
    # Values away from 0 (|x| >= 0.25), for gradcheck of ops with a kink at 0.
    x = rng.uniform(0.25, 2.0, size=shape)
    return np.where(rng.random(shape) < 0.5, -x, x)


def _off_integers(rng: np.random.Generator, *shape: int) -> np.ndarray:
    # Values away from the jumps of floor/ceil/round (integers and halves).
    return np.asarray(np.floor(rng.uniform(-3, 3, size=shape)) + rng.uniform(0.1, 0.4, size=shape))


@defop(ref=lambda torch: torch.abs,
       vjp=lambda g, input: g * sign(input), node="AbsBackward0",
       methods=("abs", "__abs__", "absolute"), inplace=("abs_", "absolute_"),
       samples=_unary_samples(_kinks))
def abs(xp, input):  # noqa: A001 - mirrors torch.abs
    """Elementwise absolute value; its gradient at 0 is 0, as in PyTorch."""
    return input.copy() if input.dtype == bool else xp.abs(input)


@defop(ref=lambda torch: torch.sign,
       vjp=_zeros, node="SignBackward0", methods=("sign",), inplace=("sign_",),
       samples=lambda rng: [((_r(rng, 3, 4),), {}), ((_kinks(rng),), {})])
def sign(xp, input):
    """Elementwise sign (-1, 0 or 1, and 0 for NaN, as PyTorch); zero gradient."""
    if input.dtype == bool:
        return input.copy()
    out = xp.sign(input)
    return xp.nan_to_num(out) if input.dtype.kind == "f" else out


@defop(ref=lambda torch: torch.sqrt,
       vjp=lambda g, out: g / (2 * out), node="SqrtBackward0", methods=("sqrt",), inplace=("sqrt_",),
       to_float=True, samples=_unary_samples(_pos))
@_quiet_nan  # Note [Positive NaN]
def sqrt(xp, input):
    """Elementwise square root (nan below 0; its gradient at 0 is inf, as in PyTorch)."""
    return xp.sqrt(input)


@defop(ref=lambda torch: torch.rsqrt,
       vjp=lambda g, out: -0.5 * g * out * out * out, node="RsqrtBackward0", methods=("rsqrt",),
       inplace=("rsqrt_",), to_float=True, samples=_unary_samples(_pos))
@_quiet
def rsqrt(xp, input):
    """Elementwise ``1 / sqrt(input)``."""
    return (1 / xp.sqrt(input)).astype(input.dtype, copy=False)


@defop(ref=lambda torch: torch.expm1,
       vjp=lambda g, out: g * (out + 1), node="Expm1Backward0", methods=("expm1",), inplace=("expm1_",),
       to_float=True, samples=_unary_samples())
@_quiet
def expm1(xp, input):
    """Elementwise ``exp(input) - 1``, accurate near 0."""
    return xp.expm1(input)


@defop(ref=lambda torch: torch.log1p,
       vjp=lambda g, input: g / (input + 1), node="Log1PBackward0", methods=("log1p",), inplace=("log1p_",),
       to_float=True, samples=_unary_samples(_pos))
@_quiet
def log1p(xp, input):
    """Elementwise ``log(1 + input)``, accurate near 0."""
    return xp.log1p(input)


@defop(ref=lambda torch: torch.log2,
       vjp=lambda g, input: g / (input * math.log(2.0)), node="Log2Backward0", methods=("log2",),
       inplace=("log2_",), to_float=True, samples=_unary_samples(_pos))
@_quiet_nan  # Note [Positive NaN]
def log2(xp, input):
    """Elementwise base-2 logarithm."""
    return xp.log2(input)


@defop(ref=lambda torch: torch.sin,
       vjp=lambda g, input: g * cos(input), node="SinBackward0", methods=("sin",), inplace=("sin_",),
       to_float=True, samples=_unary_samples())
@_quiet
def sin(xp, input):
    """Elementwise sine."""
    return xp.sin(input)


@defop(ref=lambda torch: torch.cos,
       vjp=lambda g, input: g * -sin(input), node="CosBackward0", methods=("cos",), inplace=("cos_",),
       to_float=True, samples=_unary_samples())
@_quiet
def cos(xp, input):
    """Elementwise cosine."""
    return xp.cos(input)


@defop(ref=lambda torch: torch.tan,
       vjp=lambda g, out: g * (1 + out * out), node="TanBackward0", methods=("tan",), inplace=("tan_",),
       to_float=True, samples=lambda rng: [((_r(rng, 3, 4, low=-1.2, high=1.2),), {}), ((_r(rng),), {})])
@_quiet
def tan(xp, input):
    """Elementwise tangent."""
    return xp.tan(input)


@defop(ref=lambda torch: torch.reciprocal,
       vjp=lambda g, out: -g * (out * out), node="ReciprocalBackward0", methods=("reciprocal",),
       inplace=("reciprocal_",), to_float=True, samples=_unary_samples(_pos))
@_quiet
def reciprocal(xp, input):
    """Elementwise ``1 / input``."""
    return (1 / input).astype(input.dtype, copy=False)


# Note [Vectorised erf]
# ~~~~~~~~~~~~~~~~~~~~~~
# erf is written with the array module ``xp`` (numpy or CuPy) on the whole
# array, so it runs where the tensor lives with no Python loop over elements
# and no optional dependency (scipy); _pointwise's erfc and erfinv share it.
# W. J. Cody's rational approximations of erf and erfc (CALERF, netlib
# specfun, 1969-1990): relative error below 1e-16 on each of three regions.
_CODY_A = (3.16112374387056560e00, 1.13864154151050156e02, 3.77485237685302021e02, 3.20937758913846947e03,
           1.85777706184603153e-1)
_CODY_B = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03, 2.84423683343917062e03)
_CODY_C = (5.64188496988670089e-1, 8.88314979438837594e00, 6.61191906371416295e01, 2.98635138197400131e02,
           8.81952221241769090e02, 1.71204761263407058e03, 2.05107837782607147e03, 1.23033935479799725e03,
           2.15311535474403846e-8)
_CODY_D = (1.57449261107098347e01, 1.17693950891312499e02, 5.37181101862009858e02, 1.62138957456669019e03,
           3.29079923573345963e03, 4.36261909014324716e03, 3.43936767414372164e03, 1.23033935480374942e03)
_CODY_P = (3.05326634961232344e-1, 3.60344899949804439e-1, 1.25781726111229246e-1, 1.60837851487422766e-2,
           6.58749161529837803e-4, 1.63153871373020978e-2)
_CODY_Q = (2.56852019228982242e00, 1.87295284992346047e00, 5.27905102951428412e-1, 6.05183413124413191e-2,
           2.33520497626869185e-3)
_RSQRT_PI = 0.5641895835477562869480794515607725858440


def _cody_num(coeffs: tuple[float, ...], y: Any) -> Any:
    # Cody's numerators: the last coefficient leads, the first ones follow.
    out = coeffs[-1] * y
    for c in coeffs[:-2]:
        out = (out + c) * y
    return out + coeffs[-2]


def _cody_den(coeffs: tuple[float, ...], y: Any) -> Any:
    # and denominators: monic, the other coefficients in order.
    out = y
    for c in coeffs[:-1]:
        out = (out + c) * y
    return out + coeffs[-1]


def _erf_erfc(xp: Any, x: Any) -> tuple[Any, Any]:
    """``(erf(x), erfc(x))`` of a float64 array (Note [Vectorised erf]), each to full relative precision
    (erfc too, far in its tail, where ``1 - erf`` would be 0)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # 1 / 0 at x == 0, in a discarded branch
        return _erf_erfc_kernel(xp, x)


def _erf_erfc_kernel(xp: Any, x: Any) -> tuple[Any, Any]:
    y = xp.abs(x)
    # |x| <= 0.46875: erf by a rational function of x**2
    ysq = y * y
    erf_small = x * _cody_num(_CODY_A, ysq) / _cody_den(_CODY_B, ysq)
    # 0.46875 < |x| <= 4: erfc(|x|) = exp(-x**2) R(|x|); |x| > 4: exp(-x**2) / |x| (1/sqrt(pi) - z P(z)), z = 1/x**2
    mid = _cody_num(_CODY_C, y) / _cody_den(_CODY_D, y)
    z = 1 / ysq
    tail = (_RSQRT_PI - z * _cody_num(_CODY_P, z) / _cody_den(_CODY_Q, z)) / y
    # exp(-x**2) as exp(-s**2) exp(-(y - s)(y + s)) with s = y rounded down to
    # sixteenths: s**2 is exact, so the large exponent loses no digits.
    s = xp.trunc(y * 16) / 16
    scaled = xp.where(y <= 4, mid, tail) * (xp.exp(-s * s) * xp.exp(-(y - s) * (y + s)))
    erfc_abs = xp.where(y > 27, 0.0, scaled)  # beyond 26.6, erfc underflows (and inf - inf above is nan)
    small = y <= 0.46875
    erf = xp.where(small, erf_small, xp.copysign(1 - erfc_abs, x))
    erfc = xp.where(small, 1 - erf_small, xp.where(x < 0, 2 - erfc_abs, erfc_abs))
    return erf, erfc


@defop(ref=lambda torch: torch.erf,
       vjp=lambda g, input: g * (2 / math.sqrt(math.pi)) * exp(-(input * input)), node="ErfBackward0",
       methods=("erf",), inplace=("erf_",), to_float=True, samples=_unary_samples())
def erf(xp, input):
    """Elementwise error function (Note [Vectorised erf])."""
    return _erf_erfc(xp, input.astype(np.float64, copy=False))[0].astype(input.dtype, copy=False)


def _rounding(fn_name: str, torch_name: str):
    def forward(xp, input):
        return input.copy() if input.dtype.kind in "iub" else getattr(xp, fn_name)(input)

    forward.__name__ = torch_name
    forward.__doc__ = f"Elementwise ``{torch_name}``; zero gradient (integers are returned unchanged)."
    return defop(ref=lambda torch: getattr(torch, torch_name), vjp=_zeros, node=torch_name.capitalize() + "Backward0",
                 methods=(torch_name,), inplace=(torch_name + "_",),
                 samples=_unary_samples(_off_integers))(forward)


floor = _rounding("floor", "floor")
ceil = _rounding("ceil", "ceil")


@defop(ref=lambda torch: torch.round,
       vjp=lambda g: _zeros(g), node=("RoundBackward0", "RoundBackward1"),
       node_for=lambda decimals: "RoundBackward0" if decimals == 0 else "RoundBackward1",
       methods=("round",), inplace=("round_",),
       samples=lambda rng: [((_off_integers(rng, 3, 4),), {}), ((_off_integers(rng),), {}),
                            ((_off_integers(rng, 5) * 0.01,), {"decimals": 1})])
def round(xp, input, *, decimals=0):  # noqa: A001 - mirrors torch.round
    """Elementwise rounding half to even (to ``decimals`` places); zero gradient."""
    if input.dtype.kind in "iub":
        return input.copy()
    return xp.round(input, decimals)


# -- minimum / maximum / clamp --------------------------------------------------


def _tie_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    a = _r(rng, 3, 4)
    b = np.where(rng.random((3, 4)) < 0.5, a + 0.5, a - 0.5)
    return [((a, b), {}), ((_r(rng, 3, 1), _r(rng, 4)), {}), ((_r(rng), _r(rng, 2, 3)), {}),
            ((_r(rng, 0, 3), _r(rng, 3)), {})]


@defop(ref=lambda torch: torch.maximum,
       vjp=(lambda g, input, other: where(input < other, 0.0, where(input == other, g / 2, g)),
            lambda g, input, other: where(input > other, 0.0, where(input == other, g / 2, g))),
       node="MaximumBackward0", methods=("maximum",), promote=True, samples=_tie_samples)
def maximum(xp, input, other):
    """Elementwise maximum (nan propagates); a tie splits the gradient half and half, as in PyTorch."""
    return xp.maximum(input, other)


@defop(ref=lambda torch: torch.minimum,
       vjp=(lambda g, input, other: where(input > other, 0.0, where(input == other, g / 2, g)),
            lambda g, input, other: where(input < other, 0.0, where(input == other, g / 2, g))),
       node="MinimumBackward0", methods=("minimum",), promote=True, samples=_tie_samples)
def minimum(xp, input, other):
    """Elementwise minimum (nan propagates); a tie splits the gradient half and half, as in PyTorch."""
    return xp.minimum(input, other)


def _clamp_scalar_mask(input: Tensor, min: Any, max: Any) -> Tensor:
    if min is None:
        return input <= max
    if max is None:
        return input >= min
    return logical_and(input >= min, input <= max)


def _clamp_scalar_args(input: Any, min: Any = None, max: Any = None) -> tuple[tuple, dict]:
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    for bound in (min, max):
        if bound is not None:  # Note [Checked scalar conversion], in the result's dtype
            _dtype.check_scalar(bound, _dtype.result_type([input.dtype], [], [bound]))
    return (input,), {"min": min, "max": max}


@defop(ref=lambda torch: torch.clamp,
       vjp=lambda g, input, min, max: where(_clamp_scalar_mask(input, min, max), g, 0.0),
       node="ClampBackward1", parse=_clamp_scalar_args,
       samples=lambda rng: [((_r(rng, 3, 4),), {"min": -0.5, "max": 0.5}), ((_r(rng, 3, 4),), {"min": 0.25}),
                            ((_r(rng, 5),), {"max": -0.25}), ((_r(rng),), {"min": -1.0, "max": 1.0})])
def clamp_scalar(xp, input, *, min=None, max=None):  # noqa: A002 - mirrors torch.clamp
    """``clamp`` with number bounds (PyTorch's ``clamp`` overload, ClampBackward1)."""
    out = input
    if min is not None:
        out = xp.maximum(out, min)
    if max is not None:
        out = xp.minimum(out, max)
    if out is input:
        out = input.copy()
    if input.dtype.kind in "iub":
        if any(isinstance(b, float) for b in (min, max)):
            return out.astype(_dtype.get_default_dtype().np, copy=False)
        return out.astype(input.dtype, copy=False)
    return out.astype(input.dtype, copy=False)


def _clamp_grad_input(g: Tensor, input: Tensor, min: Tensor, max: Tensor, has_min: bool, has_max: bool) -> Tensor:
    if has_min and has_max:
        mask = logical_and(input >= min, input <= max)
    else:
        mask = input >= min if has_min else input <= max
    return where(mask, g, 0.0)


def _clamp_grad_min(g: Tensor, input: Tensor, min: Tensor, max: Tensor, has_max: bool) -> Tensor:
    return where(logical_and(input < min, min < max) if has_max else input < min, g, 0.0)


def _clamp_grad_max(g: Tensor, input: Tensor, min: Tensor, max: Tensor, has_min: bool) -> Tensor:
    return where(logical_or(input > max, max < min) if has_min else input > max, g, 0.0)


def _clamp_tensor_args(input: Any, min: Any = None, max: Any = None) -> tuple[tuple, dict]:
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    # A missing bound is a placeholder 0 the forward and backward ignore.
    return (input, 0 if min is None else min, 0 if max is None else max), {
        "has_min": min is not None, "has_max": max is not None}


def _clamp_tensor_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    x = _r(rng, 3, 4)
    lo = np.where(rng.random((3, 4)) < 0.5, x - 0.3, x + 0.3)
    return [((x, lo, lo + 1.0), {}), ((_r(rng, 3, 4), _r(rng, 4, low=-1.0, high=-0.5), _r(rng, 3, 1, low=0.5)), {}),
            ((_r(rng, 2, 3), _r(rng, 3, low=-1.0, high=-0.25)), {}), ((_r(rng, 2, 3), None, _r(rng, 3)), {})]


@defop(ref=lambda torch: torch.clamp,
       vjp=(_clamp_grad_input, _clamp_grad_min, _clamp_grad_max), node="ClampBackward0",
       promote=True, parse=_clamp_tensor_args, samples=_clamp_tensor_samples)
def clamp_tensor(xp, input, min, max, *, has_min=True, has_max=True):  # noqa: A002 - mirrors torch.clamp
    """``clamp`` with tensor bounds (PyTorch's ``clamp.Tensor`` overload, ClampBackward0)."""
    out = input
    if has_min:
        out = xp.maximum(out, min)
    if has_max:
        out = xp.minimum(out, max)
    return input.copy() if out is input else out.astype(input.dtype, copy=False)


def clamp(input: Tensor, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002 - mirrors torch.clamp
    """Elementwise ``min(max(input, min), max)``; ``min``/``max`` are numbers or tensors,
    either may be None.  The gradient passes at the bounds, as in PyTorch."""
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        return clamp_tensor(input, min, max)
    return clamp_scalar(input, min, max)


clip = clamp


# -- activations ----------------------------------------------------------------
# Not in ``__all__`` (PyTorch has them only in ``nn.functional``, spelled in
# ``agrad/nn/_activations.py``).


@defop(ref=lambda torch: torch.nn.functional.leaky_relu,
       vjp=lambda g, input, negative_slope: where(input > 0, g, g * negative_slope), node="LeakyReluBackward0",
       to_float=True, samples=lambda rng: [((_kinks(rng, 3, 4),), {}), ((_kinks(rng, 5),), {"negative_slope": 0.2}),
                                           ((_kinks(rng),), {})])
def leaky_relu(xp, input, *, negative_slope=0.01):
    """``input`` where positive, else ``negative_slope * input``; the gradient at 0 is the slope."""
    return xp.where(input > 0, input, input * negative_slope).astype(input.dtype, copy=False)


@defop(ref=lambda torch: torch.nn.functional.hardtanh,
       vjp=lambda g, input, min_val, max_val: where(logical_and(input > min_val, input < max_val), g, 0.0),
       node="HardtanhBackward0", to_float=True,
       samples=lambda rng: [((_r(rng, 3, 4) + 0.01,), {}),
                            ((_r(rng, 5) * 4 + 0.01,), {"min_val": 0.0, "max_val": 6.0})])
def hardtanh(xp, input, *, min_val=-1.0, max_val=1.0):
    """``input`` clamped to ``[min_val, max_val]``; no gradient at the bounds (only in ``nn.functional``)."""
    return xp.minimum(xp.maximum(input, min_val), max_val).astype(input.dtype, copy=False)


@defop(ref=lambda torch: torch.nn.functional.elu,
       vjp=lambda g, input, alpha: where(input > 0, g, g * alpha * exp(input)), node="EluBackward0",
       to_float=True, samples=lambda rng: [((_kinks(rng, 3, 4),), {}), ((_kinks(rng, 5),), {"alpha": 0.5}),
                                           ((_kinks(rng),), {})])
def elu(xp, input, *, alpha=1.0):
    """``input`` where positive, else ``alpha * (exp(input) - 1)``."""
    neg = alpha * xp.expm1(xp.minimum(input, 0))
    return xp.where(input > 0, input, neg).astype(input.dtype, copy=False)


_GELU_K = math.sqrt(2 / math.pi)


def _gelu_grad(g: Tensor, input: Tensor, approximate: str) -> Tensor:
    if approximate == "tanh":
        x2 = input * input
        t = tanh(_GELU_K * (input + 0.044715 * x2 * input))
        return g * (0.5 * (1 + t) + 0.5 * input * (1 - t * t) * _GELU_K * (1 + 3 * 0.044715 * x2))
    cdf = 0.5 * (1 + erf(input * math.sqrt(0.5)))
    pdf = exp(-0.5 * (input * input)) * (1 / math.sqrt(2 * math.pi))
    return g * (cdf + input * pdf)


def _gelu_args(input: Any, approximate: str = "none") -> tuple[tuple, dict]:
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh, got {approximate}")
    return (input,), {"approximate": approximate}


@defop(ref=lambda torch: torch.nn.functional.gelu,
       vjp=_gelu_grad, node="GeluBackward0", to_float=True, parse=_gelu_args,
       samples=lambda rng: [((_r(rng, 3, 4, low=-3, high=3),), {}), ((_r(rng, 5, low=-3, high=3),),
                                                                     {"approximate": "tanh"}), ((_r(rng),), {})])
def gelu(xp, input, *, approximate="none"):
    """Gaussian error linear unit, exact (``erf``) or with the ``tanh`` approximation."""
    x = input.astype(np.float64)
    if approximate == "tanh":
        out = 0.5 * x * (1 + xp.tanh(_GELU_K * (x + 0.044715 * x * x * x)))
    else:
        out = 0.5 * x * (1 + _erf_erfc(xp, x * math.sqrt(0.5))[0])
    return out.astype(input.dtype, copy=False)


@defop(ref=lambda torch: torch.nn.functional.silu,
       vjp=lambda g, input: _silu_grad(g, input), node="SiluBackward0", to_float=True, samples=_unary_samples())
def silu(xp, input):
    """``input * sigmoid(input)``."""
    e = xp.exp(-xp.abs(input))
    return (input * xp.where(input >= 0, 1 / (1 + e), e / (1 + e))).astype(input.dtype, copy=False)


def _silu_grad(g: Tensor, input: Tensor) -> Tensor:
    s = sigmoid(input)
    return g * s * (1 + input * (1 - s))


@defop(ref=lambda torch: torch.nn.functional.softplus,
       vjp=lambda g, input, beta, threshold: where(input * beta > threshold, g, g * sigmoid(input * beta)),
       node="SoftplusBackward0", to_float=True,
       samples=lambda rng: [((_r(rng, 3, 4),), {}), ((_r(rng, 5),), {"beta": 2.0, "threshold": 10.0}),
                            ((np.array([-30.0, 25.0, 0.3]),), {})])
def softplus(xp, input, *, beta=1.0, threshold=20.0):
    """``log(1 + exp(beta * input)) / beta``, linear where ``beta * input > threshold``."""
    xb = input * beta
    soft = xp.log1p(xp.exp(xp.minimum(xb, threshold))) / beta
    return xp.where(xb > threshold, input, soft).astype(input.dtype, copy=False)


# -- logical ops (not differentiable) -------------------------------------------


def _logical_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    return [((rng.random((3, 4)) < 0.5, rng.random((3, 4)) < 0.5), {}),
            ((np.where(rng.random((3, 4)) < 0.5, 0.0, _r(rng, 3, 4)), rng.random(4) < 0.5), {}),
            ((rng.integers(-1, 2, (2, 3)), np.array(0.0)), {})]


def _logical(ufunc_name: str):
    def forward(xp, input, other):
        return getattr(xp, ufunc_name)(input, other)

    forward.__name__ = ufunc_name
    forward.__doc__ = f"Elementwise ``{ufunc_name.replace('_', ' ')}`` of the truth values; a bool tensor."
    return defop(vjp=None, methods=(ufunc_name,), inplace=(ufunc_name + "_",), samples=_logical_samples,
                 ref=lambda torch: getattr(torch, ufunc_name))(forward)


logical_and: Callable[..., Tensor] = _logical("logical_and")
logical_or = _logical("logical_or")
logical_xor = _logical("logical_xor")


@defop(ref=lambda torch: torch.logical_not, vjp=None, methods=("logical_not",), inplace=("logical_not_",),
       samples=lambda rng: [((rng.random((3, 4)) < 0.5,), {}), ((np.array([0.0, -1.5, 2.0]),), {}),
                            ((rng.integers(-1, 2, (2, 3)),), {})])
def logical_not(xp, input):
    """Elementwise ``not`` of the truth values; a bool tensor."""
    return xp.logical_not(input)


@defop(ref=lambda torch: torch.bitwise_not, vjp=None, methods=("bitwise_not",),
       inplace=("bitwise_not_",),
       samples=lambda rng: [((rng.random((3, 4)) < 0.5,), {}), ((rng.integers(-5, 5, (2, 3)),), {})])
def bitwise_not(xp, input):
    """Elementwise bitwise not: logical not for bool, two's complement for integers."""
    if input.dtype.kind not in "iub":
        raise NotImplementedError(
            f'"bitwise_not_cpu" not implemented for \'{_dtype.SCALAR_TYPE_NAMES[input.dtype.name]}\'')
    return xp.invert(input)


def _invert(self: Tensor) -> Tensor:
    """``~self``: :func:`bitwise_not`, refused for floating tensors by Python's ``TypeError`` as in PyTorch."""
    if self._data.dtype.kind not in "iub":
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type tensors")
    return bitwise_not(self)
