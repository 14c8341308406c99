"""The pointwise family (``agrad/_ops/_pointwise.py``) against PyTorch, beyond
what the op table checks from each entry's samples: composites and aliases,
dtypes and promotion, operators, errors, special values, node names, ops
recorded without a derivative, in-place forms, and the special-function
kernels far from the samples.

Most cases are a function of the library module (``agrad`` or ``torch``),
run on both: :func:`_same` then asserts the same outcome, either the same
values, dtype and shape, or the same exception type (and message).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
from agrad.autograd import gradcheck, gradgradcheck
from tests.helpers import requires_torch, torch

pytestmark = requires_torch

_rng = np.random.default_rng(11)
X = _rng.uniform(-2, 2, (3, 4))
Y = _rng.uniform(-2, 2, (3, 4))
P = _rng.uniform(0.5, 2.0, (3, 4))
ROW = _rng.uniform(0.5, 2.0, 4)
INTS = np.array([3, -4, 5, 0, -7])
INTS2 = np.array([2, 3, -2, 5, 4])
BOOLS = np.array([True, False, True, False, True])
SPECIAL = np.array([0.0, -0.0, 1.5, -2.5, np.inf, -np.inf, np.nan])


def _outcome(fn: Callable[[Any], Any], lib: Any) -> tuple[str, Any]:
    try:
        return "value", fn(lib)
    except Exception as e:  # noqa: BLE001 - compared with PyTorch's
        return "error", e


def _same(fn: Callable[[Any], Any], *, message: bool = True, rtol: float = 1e-12, atol: float = 1e-300) -> Any:
    """Run ``fn`` on agrad and on torch; assert the same dtype, shape and values,
    or the same exception type (and message).  Returns agrad's result."""
    kind, ours = _outcome(fn, agrad)
    tkind, theirs = _outcome(fn, torch)
    if tkind == "error":
        assert kind == "error", f"PyTorch raises {theirs!r}, agrad returns {ours!r}"
        assert type(ours) is type(theirs), f"{ours!r} is not {theirs!r}"
        if message:
            assert str(ours) == str(theirs)
        return ours
    assert kind == "value", f"agrad raises {ours!r}"
    if isinstance(theirs, torch.Tensor):
        assert ours.dtype.name == str(theirs.dtype).removeprefix("torch."), f"{ours.dtype} != {theirs.dtype}"
        assert ours.shape == tuple(theirs.shape)
        if theirs.dtype in (torch.float32, torch.float16):
            rtol = max(rtol, 2e-6)  # PyTorch computes in float32 (agrad's kernels in float64, then round)
        np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=rtol, atol=atol,
                                   equal_nan=True)
    else:
        assert ours == theirs
    return ours


def _t(lib: Any, a: Any, **kwargs: Any) -> Any:
    return lib.tensor(a, **kwargs)


# -- integer and bool inputs of float functions --------------------------------------------------

UNARY_FLOAT = ["sinh", "cosh", "asin", "acos", "atan", "asinh", "acosh", "atanh", "arcsin", "arccos", "arctan",
               "arcsinh", "arccosh", "arctanh", "exp2", "log10", "erfc", "erfinv", "lgamma", "digamma", "i0",
               "sinc", "logit", "deg2rad", "rad2deg"]
UNARY_OTHER = ["square", "trunc", "fix", "frac", "sgn", "signbit", "nan_to_num", "isnan", "isinf", "isfinite",
               "isposinf", "isneginf", "isreal", "positive", "negative"]


@pytest.mark.parametrize("name", UNARY_FLOAT + UNARY_OTHER)
@pytest.mark.parametrize("values", [INTS, BOOLS, INTS.astype(np.uint8), SPECIAL, SPECIAL.astype(np.float32)],
                         ids=["int64", "bool", "uint8", "float64", "float32"])
def test_unary_dtypes_and_values(name: str, values: np.ndarray) -> None:
    """Integers and bools compute in the default float dtype where PyTorch does,
    stay integers where it does, or are refused as it refuses them."""
    rtol = 1e-6 if values.dtype == np.float32 else 1e-12
    atol = 1e-14 if name in ("lgamma", "digamma") else 1e-300  # absolute near their zeros
    _same(lambda L: getattr(L, name)(_t(L, values)), rtol=rtol, atol=atol)


@pytest.mark.parametrize("name", ["sinh", "erfc", "lgamma", "exp2", "atan2", "ldexp", "copysign", "xlogy"])
def test_integers_follow_the_default_dtype(name: str) -> None:
    def call(L: Any) -> Any:
        fn = getattr(L, name)
        return fn(_t(L, INTS)) if name in ("sinh", "erfc", "lgamma", "exp2") else fn(_t(L, INTS), _t(L, INTS2))

    for lib in (agrad, torch):
        lib.set_default_dtype(lib.float64)
    try:
        assert _same(call).dtype is agrad.float64
    finally:
        for lib in (agrad, torch):
            lib.set_default_dtype(lib.float32)


# -- binary ops: dtypes, promotion, numbers, refusals --------------------------------------------

BINARY = ["atan2", "arctan2", "hypot", "xlogy", "floor_divide", "remainder", "fmod", "true_divide", "divide",
          "multiply", "subtract", "rsub", "copysign", "heaviside", "logaddexp", "logaddexp2", "fmax", "fmin",
          "float_power", "ldexp", "nextafter", "gcd", "lcm", "bitwise_and", "bitwise_or", "bitwise_xor",
          "bitwise_left_shift", "bitwise_right_shift", "clamp_min", "clamp_max", "greater", "greater_equal",
          "less", "less_equal", "not_equal"]

OPERANDS: dict[str, Callable[[Any], tuple[Any, Any]]] = {
    "int-int": lambda L: (_t(L, INTS), _t(L, INTS2)),
    "int-float": lambda L: (_t(L, INTS), _t(L, X[0, :1] * 1.7 + INTS2)),
    "f32-f64": lambda L: (_t(L, X[0], dtype=L.float32), _t(L, Y[0], dtype=L.float64)),
    "f64-0d_f32": lambda L: (_t(L, X[0], dtype=L.float64), _t(L, 1.75, dtype=L.float32)),
    "bool-bool": lambda L: (_t(L, BOOLS), _t(L, ~BOOLS)),
    "uint8-int8": lambda L: (_t(L, [200, 3, 17], dtype=L.uint8), _t(L, [-3, 2, 5], dtype=L.int8)),
    "int-2.5": lambda L: (_t(L, INTS), 2.5),
    "f32-2": lambda L: (_t(L, X[1], dtype=L.float32), 2),
    "2-f32": lambda L: (2, _t(L, P[1], dtype=L.float32)),
    "int-True": lambda L: (_t(L, INTS), True),
    "broadcast": lambda L: (_t(L, X), _t(L, ROW)),
    "0d-nd": lambda L: (_t(L, 1.25), _t(L, Y)),
    "empty": lambda L: (_t(L, np.zeros((0, 4))), _t(L, ROW)),
}


@pytest.mark.parametrize("operands", list(OPERANDS))
@pytest.mark.parametrize("name", BINARY)
def test_binary_dtypes_and_values(name: str, operands: str) -> None:
    """Every binary op on every mix of dtypes, numbers and shapes: PyTorch's dtype
    and values, or its exception (a number where it wants a tensor is its
    ``TypeError``; a dtype its kernel lacks, its ``NotImplementedError``)."""
    make = OPERANDS[operands]

    def call(L: Any) -> Any:
        a, b = make(L)
        return getattr(L, name)(a, b)

    # PyTorch's TypeErrors list its overloads; agrad's name the argument.
    _, theirs = _outcome(call, torch)
    _same(call, message=not isinstance(theirs, TypeError), rtol=1e-6)


@pytest.mark.parametrize(("call", "error"), [
    (lambda L: L.atan2(L.ones(3), L.ones(2)), RuntimeError),
    (lambda L: L.hypot(L.ones(2, 3), L.ones(3, 2)), RuntimeError),
    (lambda L: L.addcmul(L.ones(3), L.ones(2, 1), L.ones(2, 4)), RuntimeError),
    (lambda L: L.ones(3).eq_(L.ones(2, 3)), RuntimeError),
    (lambda L: L.lerp(L.ones(3), L.ones(4), 0.5), RuntimeError),
])
def test_shape_mismatch(call: Callable[[Any], Any], error: type) -> None:
    assert isinstance(_same(call), error)


@pytest.mark.parametrize("call", [
    lambda L: L.hypot(_t(L, INTS), _t(L, INTS)),
    lambda L: L.frac(_t(L, INTS)),
    lambda L: L.trunc(_t(L, BOOLS)),
    lambda L: L.logaddexp(_t(L, INTS), _t(L, INTS)),
    lambda L: L.nextafter(_t(L, INTS), _t(L, INTS)),
    lambda L: L.gcd(_t(L, X[0]), _t(L, X[0])),
    lambda L: L.bitwise_and(_t(L, X[0]), 1),
    lambda L: L.bitwise_left_shift(_t(L, BOOLS), _t(L, BOOLS)),
    lambda L: L.lerp(_t(L, INTS), _t(L, INTS), 0.5),
    lambda L: L.lerp(_t(L, X[0]), _t(L, X[0]), _t(L, X[0], dtype=L.float32)),
    lambda L: L.lerp(_t(L, X[0], dtype=L.float32), _t(L, X[0]), 0.5),
    lambda L: L.lerp(_t(L, X[0]), _t(L, INTS[:4]), 0.5),
    lambda L: L.addcmul(_t(L, BOOLS), _t(L, BOOLS), _t(L, BOOLS)),
    lambda L: L.addcmul(_t(L, X[0]), 2, _t(L, X[0])),
    lambda L: L.addcdiv(_t(L, X[0]), _t(L, INTS[:4]), _t(L, INTS2[:4])),
    lambda L: L.heaviside(_t(L, X[0]), _t(L, X[0], dtype=L.float32)),
    lambda L: L.heaviside(_t(L, X[0]), 0.5),
    lambda L: L.polygamma(-1, _t(L, X[0])),
    lambda L: L.polygamma(1.0, _t(L, X[0])),
    lambda L: L.divide(_t(L, X[0]), 2.0, rounding_mode="round"),
    lambda L: L.divide(_t(L, BOOLS), _t(L, BOOLS), rounding_mode="floor"),
    lambda L: L.divide(_t(L, BOOLS), _t(L, BOOLS), rounding_mode="trunc"),
    lambda L: L.floor_divide(_t(L, INTS), _t(L, INTS)),
    lambda L: L.floor_divide(_t(L, BOOLS), _t(L, BOOLS)),
    lambda L: L.remainder(_t(L, INTS), 0),
    lambda L: L.fmod(_t(L, INTS), _t(L, [1, 2, 0, 4, 5])),
    lambda L: L.divide(_t(L, INTS), _t(L, [1, 2, 0, 4, 5]), rounding_mode="trunc"),
    lambda L: L.rsub(_t(L, BOOLS), _t(L, BOOLS)),
    lambda L: L.rsub(_t(L, INTS), 1, alpha=1.5),
    lambda L: L.clamp_min(_t(L, [1, 2], dtype=L.int8), 1000),
    lambda L: L.clamp_max(_t(L, [1, 2], dtype=L.int8), -1000),
    lambda L: L.positive(_t(L, BOOLS)),
    lambda L: L.negative(_t(L, BOOLS)),
    lambda L: L.ones(3).float_power_(2),
    lambda L: _t(L, INTS).floor_divide_(2.5),
    lambda L: _t(L, INTS).sinh_(),
    lambda L: _t(L, BOOLS).__iand__(_t(L, INTS)),
    lambda L: _t(L, X[0]) << 1,
    lambda L: 1.5 & _t(L, INTS),
])
def test_refusals(call: Callable[[Any], Any]) -> None:
    """PyTorch's exception type and message for the obvious misuses."""
    _, theirs = _outcome(call, torch)
    assert isinstance(theirs, Exception)
    _same(call, message=not isinstance(theirs, TypeError))


# -- operators ------------------------------------------------------------------------------------

OPERATORS = {
    "floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b, "and": lambda a, b: a & b,
    "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b, "lshift": lambda a, b: a << b,
    "rshift": lambda a, b: a >> b,
}
OPERATOR_OPERANDS: dict[str, Callable[[Any], tuple[Any, Any]]] = {
    "int-int": lambda L: (_t(L, INTS), _t(L, INTS2)),
    "bool-bool": lambda L: (_t(L, BOOLS), _t(L, ~BOOLS)),
    "bool-int": lambda L: (_t(L, BOOLS), 1),
    "int-scalar": lambda L: (_t(L, INTS), 3),
    "scalar-int": lambda L: (7, _t(L, INTS2)),
    "float-float": lambda L: (_t(L, X[0]), _t(L, P[0])),
    "float-scalar": lambda L: (_t(L, X[0]), -1.5),
    "scalar-float": lambda L: (2.5, _t(L, P[0])),
    "int8-shifts": lambda L: (_t(L, [100, -3, -100, 7, 1], dtype=L.int8), _t(L, [1, 9, -1, 8, 7], dtype=L.int8)),
    "uint8-shifts": lambda L: (_t(L, [200, 3, 255, 1, 7], dtype=L.uint8), _t(L, [1, 7, 8, 255, 0], dtype=L.uint8)),
    "int-wide": lambda L: (_t(L, INTS), 70),
}


@pytest.mark.parametrize("operands", list(OPERATOR_OPERANDS))
@pytest.mark.parametrize("op", list(OPERATORS))
def test_operators(op: str, operands: str) -> None:
    """``//``, ``%``, ``&``, ``|``, ``^``, ``<<`` and ``>>``, reflected too: logical for
    bools, Python's rounding and sign for ``//`` and ``%``, shifts out of range defined."""
    make = OPERATOR_OPERANDS[operands]
    _same(lambda L: OPERATORS[op](*make(L)))


@pytest.mark.parametrize("operands", ["int-int", "bool-bool", "int-scalar", "float-float", "float-scalar"])
@pytest.mark.parametrize("op", list(OPERATORS))
def test_in_place_operators(op: str, operands: str) -> None:
    """``//=``, ``%=``, ``&=``... write into the left operand (PyTorch's casting rules)."""
    make = OPERATOR_OPERANDS[operands]

    def call(L: Any) -> Any:
        a, b = make(L)
        before = a
        a = getattr(a, f"__i{op}__")(b)
        assert a is before
        return a

    _same(call)


# -- composites and aliases: values and gradients against PyTorch, gradcheck ---------------------------


class Case:
    """``fn(L, *tensors)`` on tensors made from ``inputs`` (float arrays are differentiated)."""

    def __init__(self, fn: Callable[..., Any], *inputs: Any) -> None:
        self.fn = fn
        self.inputs = inputs


COMPOSITES: dict[str, Case] = {
    "square": Case(lambda L, x: L.square(x), X),
    "square-method": Case(lambda L, x: x.square(), X[0]),
    "float_power-tensor-tensor": Case(lambda L, x, y: L.float_power(x, y), P, Y),
    "float_power-tensor-scalar": Case(lambda L, x: L.float_power(x, 3), X),
    "float_power-scalar-tensor": Case(lambda L, y: L.float_power(2.5, y), Y),
    "float_power-method": Case(lambda L, x, y: x.float_power(y), P[0], ROW),
    "divide": Case(lambda L, x, y: L.divide(x, y), X, P),
    "divide-floor": Case(lambda L, x, y: L.divide(x, y, rounding_mode="floor"), X + 0.1, ROW),
    "divide-trunc-method": Case(lambda L, x, y: x.divide(y, rounding_mode="trunc"), X + 0.1, ROW),
    "true_divide": Case(lambda L, x, y: L.true_divide(x, y), X, P),
    "multiply": Case(lambda L, x, y: L.multiply(x, y), X, ROW),
    "subtract-alpha": Case(lambda L, x, y: L.subtract(x, y, alpha=2), X, ROW),
    "negative": Case(lambda L, x: L.negative(x), X),
    "positive": Case(lambda L, x: L.positive(x) * 2, X),
    "lerp-scalar": Case(lambda L, x, y: L.lerp(x, y, 0.3), X, Y),
    "lerp-large-weight": Case(lambda L, x, y: L.lerp(x, y, 0.8), X, ROW),
    "lerp-tensor": Case(lambda L, x, y, w: L.lerp(x, y, w), X, ROW, P / 2),
    "lerp-0d-weight": Case(lambda L, x, y, w: x.lerp(y, w), X, Y, np.asarray(0.7)),
    "arcsin": Case(lambda L, x: L.arcsin(x), X / 3),
    "arctan2-method": Case(lambda L, x, y: x.arctan2(y), X, P),
    "fix": Case(lambda L, x: L.fix(x + 0.1) * x, X),
    "polygamma-method": Case(lambda L, x: x.polygamma(2), P),
    "xlogy-zeros": Case(lambda L, x, y: L.xlogy(x * 0, y), X, P),
    "sinc-at-zero": Case(lambda L, x: L.sinc(x * 0), X[0]),
    "clamp_min-tie-free": Case(lambda L, x, y: L.clamp_min(x, y), X, Y),
    "fmax-ties": Case(lambda L, x: L.fmax(x, x.detach()), X),
    "fmin-ties": Case(lambda L, x: L.fmin(x.detach(), x), X),
    "nextafter-equal": Case(lambda L, x, y: L.nextafter(x, L.where(y > 1, x.detach(), y)), X, P),
    "copysign-signed-zeros": Case(lambda L, x: L.copysign(x, L.tensor([-0.0, 0.0, -1.0, 2.0], dtype=x.dtype)), X[0]),
    "hypot-noncontiguous": Case(lambda L, x, y: L.hypot(x.t(), y.t()), X, Y),
    "atan2-noncontiguous": Case(lambda L, x, y: L.atan2(x[:, ::2], y[:, 1::2]), X, P),
    "lgamma-noncontiguous": Case(lambda L, x: L.lgamma(x.t()), P),
    "remainder-noncontiguous": Case(lambda L, x, y: L.remainder(x.t(), y), X, P[:, 0]),
}
NO_GRADCHECK = {
    # finite differences straddle the kinks the ties and zeros sit on
    "fmax-ties", "fmin-ties", "copysign-signed-zeros", "nextafter-equal", "xlogy-zeros", "remainder-noncontiguous",
}


def _inputs(lib: Any, case: Case, dtype: Any) -> list[Any]:
    return [lib.tensor(a, dtype=dtype, requires_grad=True) for a in case.inputs]


@pytest.mark.parametrize("name", list(COMPOSITES))
def test_composites_match_torch(name: str) -> None:
    """Values, dtypes, node names and gradients of composites and aliases equal PyTorch's."""
    case = COMPOSITES[name]
    ours, theirs = _inputs(agrad, case, agrad.float64), _inputs(torch, case, torch.float64)
    out, expected = case.fn(agrad, *ours), case.fn(torch, *theirs)
    assert out.dtype.name == str(expected.dtype).removeprefix("torch.")
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-10, atol=1e-12)
    assert out.grad_fn.name() == expected.grad_fn.name()
    g = np.random.default_rng(2).standard_normal(out.shape)
    out.backward_sync(agrad.tensor(g))
    expected.backward(torch.from_numpy(g))
    for mine, ref in zip(ours, theirs, strict=True):
        if ref.grad is None:
            assert mine.grad is None
        else:
            np.testing.assert_allclose(mine.grad.numpy(), ref.grad.numpy(force=True), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", [n for n in COMPOSITES if n not in NO_GRADCHECK])
def test_composites_gradcheck(name: str) -> None:
    case = COMPOSITES[name]
    fn = lambda *ts: case.fn(agrad, *ts)  # noqa: E731
    assert gradcheck(fn, _inputs(agrad, case, agrad.float64))
    assert gradgradcheck(fn, _inputs(agrad, case, agrad.float64))


def test_aliases_are_the_same_functions() -> None:
    pairs = [("arcsin", "asin"), ("arccos", "acos"), ("arctan", "atan"), ("arcsinh", "asinh"),
             ("arccosh", "acosh"), ("arctanh", "atanh"), ("arctan2", "atan2"), ("fix", "trunc"),
             ("multiply", "mul"), ("subtract", "sub"), ("negative", "neg"), ("divide", "div"),
             ("greater", "gt"), ("greater_equal", "ge"), ("less", "lt"), ("less_equal", "le"),
             ("not_equal", "ne")]
    for alias, name in pairs:
        assert getattr(agrad, alias) is getattr(agrad, name)


def test_float_power_casts_through_a_recorded_copy() -> None:
    x = agrad.tensor(P[0], dtype=agrad.float32, requires_grad=True)
    out = agrad.float_power(x, 2)
    assert out.dtype is agrad.float64 and out.grad_fn.name() == "PowBackward0"
    assert out.grad_fn.next_functions[0][0].name() == "ToCopyBackward0"
    out.sum().backward_sync()
    assert x.grad.dtype is agrad.float32
    np.testing.assert_allclose(x.grad.numpy(), 2 * P[0], rtol=1e-6)
    t = agrad.tensor(P[0], dtype=agrad.float64)
    assert t.float_power_(2) is t
    np.testing.assert_allclose(t.numpy(), P[0] ** 2)


def test_positive_returns_its_input() -> None:
    x = agrad.tensor(X, requires_grad=True)
    assert agrad.positive(x) is x and x.positive() is x


# -- node names ---------------------------------------------------------------------------------------

NODES: dict[str, Callable[[Any, Any, Any], Any]] = {
    "sinh": lambda L, x, y: L.sinh(x), "cosh": lambda L, x, y: L.cosh(x), "asin": lambda L, x, y: L.asin(x / 4),
    "acos": lambda L, x, y: L.acos(x / 4), "atan": lambda L, x, y: L.atan(x), "asinh": lambda L, x, y: L.asinh(x),
    "acosh": lambda L, x, y: L.acosh(y + 1), "atanh": lambda L, x, y: L.atanh(x / 4),
    "atan2": lambda L, x, y: L.atan2(x, y), "hypot": lambda L, x, y: L.hypot(x, y),
    "exp2": lambda L, x, y: L.exp2(x), "log10": lambda L, x, y: L.log10(y), "erfc": lambda L, x, y: L.erfc(x),
    "erfinv": lambda L, x, y: L.erfinv(x / 4), "lgamma": lambda L, x, y: L.lgamma(y),
    "digamma": lambda L, x, y: L.digamma(y), "polygamma": lambda L, x, y: L.polygamma(3, y),
    "i0": lambda L, x, y: L.i0(x), "sinc": lambda L, x, y: L.sinc(x), "logit": lambda L, x, y: L.logit(y / 3),
    "logit-eps": lambda L, x, y: L.logit(y, eps=0.1), "xlogy": lambda L, x, y: L.xlogy(x, y),
    "xlogy-scalar-self": lambda L, x, y: L.xlogy(2.0, y), "xlogy-scalar-other": lambda L, x, y: L.xlogy(x, 2.0),
    "square": lambda L, x, y: L.square(x), "trunc": lambda L, x, y: L.trunc(x), "frac": lambda L, x, y: L.frac(x),
    "sgn": lambda L, x, y: L.sgn(x), "deg2rad": lambda L, x, y: L.deg2rad(x),
    "rad2deg": lambda L, x, y: L.rad2deg(x), "nan_to_num": lambda L, x, y: L.nan_to_num(x),
    "divide-floor": lambda L, x, y: L.divide(x, y, rounding_mode="floor"),
    "floor_divide": lambda L, x, y: L.floor_divide(x, y), "floordiv": lambda L, x, y: x // 2,
    "remainder": lambda L, x, y: L.remainder(x, y), "remainder-scalar": lambda L, x, y: x % 2,
    "remainder-scalar-self": lambda L, x, y: 2 % y, "fmod": lambda L, x, y: L.fmod(x, y),
    "fmod-scalar": lambda L, x, y: L.fmod(x, 1.5), "rsub": lambda L, x, y: L.rsub(x, y),
    "rsub-scalar": lambda L, x, y: L.rsub(x, 2), "lerp": lambda L, x, y: L.lerp(x, y, 0.3),
    "lerp-tensor": lambda L, x, y: L.lerp(x, y, y), "addcmul": lambda L, x, y: L.addcmul(x, x, y, value=2),
    "addcdiv": lambda L, x, y: L.addcdiv(x, x, y), "clamp_min": lambda L, x, y: L.clamp_min(x, 0.2),
    "clamp_min-tensor": lambda L, x, y: L.clamp_min(x, y), "clamp_max": lambda L, x, y: L.clamp_max(x, 0.2),
    "clamp_max-tensor": lambda L, x, y: x.clamp_max(y), "copysign": lambda L, x, y: L.copysign(x, y),
    "copysign-scalar": lambda L, x, y: L.copysign(x, -1), "heaviside": lambda L, x, y: L.heaviside(x, y),
    "logaddexp": lambda L, x, y: L.logaddexp(x, y), "logaddexp2": lambda L, x, y: L.logaddexp2(x, y),
    "fmax": lambda L, x, y: L.fmax(x, y), "fmin": lambda L, x, y: L.fmin(x, y),
    "ldexp": lambda L, x, y: L.ldexp(x, y), "nextafter": lambda L, x, y: L.nextafter(x, y),
    "eq_": lambda L, x, y: (x * 1).eq_(y), "gt_-scalar": lambda L, x, y: (x * 1).gt_(0.5),
    "greater_equal_": lambda L, x, y: (x * 1).greater_equal_(y), "not_equal_": lambda L, x, y: (x * 1).not_equal_(1),
    "nan_to_num_": lambda L, x, y: (x * 1).nan_to_num_(), "negative_": lambda L, x, y: (x * 1).negative_(),
}


@pytest.mark.parametrize("name", list(NODES))
def test_node_names(name: str) -> None:
    """The recorded node is PyTorch's (overloads included), with what requires grad."""

    def make(L: Any) -> Any:
        x = L.tensor(X[0], dtype=L.float64, requires_grad=True)
        y = L.tensor(P[0], dtype=L.float64, requires_grad=True)
        return NODES[name](L, x, y)

    out, expected = make(agrad), make(torch)
    assert out.requires_grad == expected.requires_grad
    assert out.grad_fn.name() == expected.grad_fn.name()


def test_predicates_and_integer_ops_record_nothing() -> None:
    x = agrad.tensor(SPECIAL, requires_grad=True)
    for fn in (agrad.isnan, agrad.isinf, agrad.isfinite, agrad.isposinf, agrad.isneginf, agrad.isreal,
               agrad.signbit, lambda t: agrad.greater(t, 0.0)):
        out = fn(x)
        assert out.dtype is agrad.bool and not out.requires_grad and out.grad_fn is None


# -- ops recorded without a derivative -------------------------------------------------------------------

NOT_DIFFERENTIABLE = {
    "floor_divide": lambda L, x, y: L.floor_divide(x, y),
    "floordiv-reflected": lambda L, x, y: 2.5 // y,
    "floor_divide_": lambda L, x, y: (x * 1).floor_divide_(y),
    "heaviside": lambda L, x, y: L.heaviside(x, y),
    "remainder-scalar-self": lambda L, x, y: L.remainder(2.5, y),
}


@pytest.mark.parametrize("name", list(NOT_DIFFERENTIABLE))
def test_recorded_but_not_differentiable(name: str) -> None:
    """Note [Recorded but not differentiable]: the result requires grad, and a
    backward through it raises PyTorch's error."""

    def make(L: Any) -> Any:
        x = L.tensor(X[0], dtype=L.float64, requires_grad=True)
        y = L.tensor(P[0], dtype=L.float64, requires_grad=True)
        return NOT_DIFFERENTIABLE[name](L, x, y)

    out, expected = make(agrad), make(torch)
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-12)
    assert out.requires_grad and expected.requires_grad
    assert out.grad_fn.name() == expected.grad_fn.name() == "torch::autograd::NotImplemented"
    with pytest.raises(RuntimeError) as theirs:
        expected.sum().backward()
    with pytest.raises(RuntimeError, match="is not implemented") as ours:
        out.sum().backward_sync()
    # (PyTorch names the in-place op, ``aten::floor_divide_``; agrad's in-place
    # forms record their out-of-place op, whose name its message gives.)
    assert str(ours.value) == str(theirs.value).replace("floor_divide_ ", "floor_divide ")


def test_not_differentiable_ops_record_nothing_without_grad() -> None:
    x = agrad.tensor(X[0], requires_grad=True)
    with agrad.no_grad():
        assert agrad.floor_divide(x, 2).grad_fn is None
    assert agrad.floor_divide(agrad.tensor(X[0]), 2).grad_fn is None
    assert agrad.heaviside(agrad.tensor(X[0]), agrad.tensor(P[0])).grad_fn is None


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
def test_floor_divide_and_heaviside_values(dtype: str) -> None:
    """(These entries have no table samples: gradcheck cannot run on them.)"""
    a = (X * 5).astype(dtype) if dtype != "int64" else (X * 5).astype(np.int64)
    b = (P * 3).astype(dtype) if dtype != "int64" else np.array([2, -3, 5, 7])
    rtol = 1e-6 if dtype == "float32" else 1e-12
    _same(lambda L: L.floor_divide(_t(L, a), _t(L, b)), rtol=rtol)
    _same(lambda L: L.floor_divide(_t(L, a), 2), rtol=rtol)
    _same(lambda L: L.floor_divide(-3, _t(L, b)), rtol=rtol)
    _same(lambda L: L.heaviside(_t(L, a), _t(L, b)), rtol=rtol)
    _same(lambda L: L.heaviside(_t(L, np.array([-1, 0, 2, 0], dtype=dtype)), _t(L, b[0])), rtol=rtol)
    _same(lambda L: L.heaviside(_t(L, np.zeros((0, 4), dtype=dtype)), _t(L, b[0])), rtol=rtol)


# -- in-place comparisons ------------------------------------------------------------------------------

COMPARISONS = ["eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less", "less_equal", "not_equal"]


@pytest.mark.parametrize("other", ["tensor", "scalar", "int-tensor", "broadcast"])
@pytest.mark.parametrize("op", COMPARISONS)
def test_in_place_comparisons(op: str, other: str) -> None:
    """``t.lt_(other)`` writes the comparison in ``t``'s dtype and records a node
    with zero gradients (Note [In-place comparisons])."""
    values = {"tensor": lambda L: L.tensor(np.where(X > 0, X, Y), dtype=L.float64), "scalar": lambda L: 0.25,
              "int-tensor": lambda L: L.tensor(np.rint(X).astype(np.int64)),
              "broadcast": lambda L: L.tensor(X[0], dtype=L.float64)}[other]

    def make(L: Any) -> tuple[Any, Any]:
        x = L.tensor(X, dtype=L.float64, requires_grad=True)
        out = getattr(x * 1, op + "_")(values(L))
        return x, out

    (x, out), (tx, expected) = make(agrad), make(torch)
    np.testing.assert_array_equal(out.detach().numpy(), expected.detach().numpy())
    assert out.dtype is agrad.float64 and out.grad_fn.name() == expected.grad_fn.name()
    out.sum().backward_sync()
    expected.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy(force=True))
    for dt in ("int64", "bool"):
        _same(lambda L, dt=dt: getattr(L.tensor(np.rint(X).astype(dt)), op + "_")(values(L)))


# -- special values and the kernels far from the samples -----------------------------------------------

FAR = {
    "erfc-tail": lambda L: L.erfc(L.tensor(np.concatenate([np.linspace(-6, 27, 67), [40.0, 1e300]]))),
    "erfc-float32": lambda L: L.erfc(L.tensor(np.linspace(-3, 9, 25), dtype=L.float32)),
    "erfinv-edges": lambda L: L.erfinv(L.tensor(np.concatenate([
        1 - np.logspace(-16, -1, 31), -1 + np.logspace(-16, -1, 31), [0.0, -0.0, 1.0, -1.0, 1.5, -2.0, 1e-300]]))),
    "erfinv-float32": lambda L: L.erfinv(L.tensor(np.linspace(-0.999, 0.999, 41), dtype=L.float32)),
    "lgamma-wide": lambda L: L.lgamma(L.tensor(np.concatenate([
        np.logspace(-300, 300, 61), -np.logspace(-3, 3, 31) - 0.37, [0.0, -0.0, -1.0, -5.0, np.inf, -np.inf, 1e-310,
                                                                      1.0, 2.0, 3.0, 10.0, 0.5, -0.5]]))),
    "digamma-wide": lambda L: L.digamma(L.tensor(np.concatenate([
        np.logspace(-10, 20, 61), -np.logspace(-3, 3, 31) - 0.37, [0.0, -0.0, -1.0, -5.0, np.inf, -np.inf, 10.0,
                                                                    1.4616321449683622]]))),
    "trigamma-wide": lambda L: L.polygamma(1, L.tensor(np.concatenate([
        np.logspace(-10, 20, 61), -np.logspace(-3, 3, 31) - 0.37, [0.0, -0.0, np.inf, 0.5, 1.0]]))),
    "polygamma-wide": lambda L: L.cat([L.polygamma(n, L.tensor(np.concatenate([
        np.logspace(-5, 5, 21), -np.logspace(-2, 2.5, 21) - 0.37, [0.0, -0.0, -3.0, np.inf, -np.inf, 1.0]])))
        for n in (2, 3, 6, 30)]),
    "i0-wide": lambda L: L.i0(L.tensor(np.concatenate([np.linspace(-50, 50, 101), [8.0, -8.0, 700.0, 1e4]]))),
    "sinc-special": lambda L: L.sinc(L.tensor([0.0, -0.0, 1.0, 0.5, 1e-20, 3.0, np.inf])),
    "logit-edges": lambda L: L.logit(L.tensor([0.0, 0.01, 0.5, 1.0, 1.5, -0.5])),
    "logit-eps-float32": lambda L: L.logit(L.tensor([0.0, 0.01, 0.5, 1.0, 1.5, -0.5]), eps=0.05),
    "logit-int-eps": lambda L: L.logit(L.tensor([0, 1]), eps=0.25),
    "xlogy-special": lambda L: L.xlogy(L.tensor([0.0, 0.0, 1.0, 0.0, 2.0, np.nan]),
                                       L.tensor([np.nan, 0.0, 0.0, -1.0, np.inf, 1.0])),
    "nan_to_num-defaults": lambda L: L.nan_to_num(L.tensor(SPECIAL)),
    "nan_to_num-float32": lambda L: L.nan_to_num(L.tensor(SPECIAL, dtype=L.float32), posinf=1e300, neginf=-2.0),
    "nan_to_num-int": lambda L: L.nan_to_num(L.tensor(INTS), nan=1.5),
    "copysign-zeros": lambda L: L.copysign(L.tensor([-0.0, 0.0, 2.0, 1.0]), L.tensor([1.0, -0.0, -0.0, np.nan])),
    "signbit": lambda L: L.signbit(L.tensor([-0.0, 0.0, np.nan, -np.nan, -1.0])),
    "frac": lambda L: L.frac(L.tensor([-1.5, 2.25, np.inf, -0.0, np.nan])),
    "fmax-nans": lambda L: L.fmax(L.tensor([np.nan, 1.0, np.nan]), L.tensor([2.0, np.nan, np.nan])),
    "logaddexp-infs": lambda L: L.logaddexp(L.tensor([np.inf, -np.inf, 1.0, 1.0]),
                                            L.tensor([np.inf, -np.inf, -np.inf, 1.0])),
    "logaddexp2-infs": lambda L: L.logaddexp2(L.tensor([np.inf, -np.inf, 1.0]), L.tensor([np.inf, -np.inf, 1.0])),
    "hypot-infs": lambda L: L.hypot(L.tensor([3.0, np.inf, np.nan]), L.tensor([4.0, np.nan, np.inf])),
    "atan2-zeros": lambda L: L.atan2(L.tensor([0.0, -0.0, 0.0]), L.tensor([0.0, -0.0, -0.0])),
    "heaviside-nan": lambda L: L.heaviside(L.tensor([-1.0, 0.0, 2.0, np.nan]), L.tensor([0.5])),
    "nextafter": lambda L: L.nextafter(L.tensor([1.0, 1.0, 0.0], dtype=L.float32),
                                       L.tensor([2.0, 0.0, -1.0], dtype=L.float32)),
    "remainder-float-signs": lambda L: L.remainder(L.tensor([5.5, -5.5, 5.5, -5.5, -2.0]),
                                                   L.tensor([2.0, 2.0, -2.0, -2.0, 2.0])),
    "fmod-float-signs": lambda L: L.fmod(L.tensor([5.5, -5.5, 5.5, -5.5]), L.tensor([2.0, 2.0, -2.0, -2.0])),
    "divide-float-zero": lambda L: L.divide(L.tensor([1.5, -2.5, 0.0]), 0.0, rounding_mode="floor"),
    "divide-int-trunc": lambda L: L.divide(L.tensor([7, -7, 7, -7]), L.tensor([2, 2, -2, -2]), rounding_mode="trunc"),
    "floor_divide-int": lambda L: L.floor_divide(L.tensor([7, -7, 7, -7]), L.tensor([2, 2, -2, -2])),
    "remainder-int": lambda L: L.remainder(L.tensor([7, -7, 7, -7], dtype=L.int8), L.tensor([2, 2, -2, -2])),
    "addcmul-int-value": lambda L: L.addcmul(L.tensor(INTS), L.tensor(INTS), L.tensor(INTS2), value=2.5),
    "gcd-lcm": lambda L: L.cat([L.gcd(L.tensor([-4, 0, 0, 12]), L.tensor([6, 3, 0, -18])),
                                L.lcm(L.tensor([-4, 0, 0, 12]), L.tensor([6, 3, 0, -18]))]),
    "clamp_min-nan": lambda L: L.cat([L.clamp_min(L.tensor([1.0, np.nan]), float("nan")),
                                      L.clamp_min(L.tensor([np.nan, 1.0]), 0.0)]),
    "square-bool": lambda L: L.square(L.tensor(BOOLS)),
}


@pytest.mark.parametrize("name", list(FAR))
def test_special_values(name: str) -> None:
    rtol = 1e-6 if "float32" in name else 1e-12
    atol = 1e-14 if name.startswith(("lgamma", "digamma")) else 1e-300  # absolute near their zeros
    _same(FAR[name], rtol=rtol, atol=atol)


@pytest.mark.parametrize(("name", "rtol"), [("lgamma", 1e-13), ("digamma", 1e-13), ("erfc", 1e-14),
                                            ("erfinv", 1e-14), ("i0", 1e-14)])
def test_kernels_on_a_dense_grid(name: str, rtol: float) -> None:
    """The vectorised special-function kernels against PyTorch's, in float64, on
    a dense grid (relative error; absolute near the zeros of lgamma and digamma)."""
    grid = {"erfinv": np.linspace(-0.9999, 0.9999, 20001), "erfc": np.linspace(-6, 26, 20001),
            "i0": np.linspace(-30, 30, 20001)}.get(name, np.linspace(-12.3, 30, 20001))
    ours = getattr(agrad, name)(agrad.tensor(grid)).numpy()
    theirs = getattr(torch, name)(torch.tensor(grid)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=1e-13)


def test_erfinv_inverts_erfc_in_the_tails() -> None:
    """Close to ±1, ``erfinv`` keeps full relative precision (Note [erfinv by Newton's method])."""
    t = np.logspace(-16, -1, 100)
    z = agrad.erfinv(agrad.tensor(1 - t))
    np.testing.assert_allclose(agrad.erfc(z).numpy(), (1 - (1 - t)), rtol=1e-13)


def test_ldexp_gradient_with_negative_integer_exponents() -> None:
    """Note [ldexp's gradient with integer exponents]: the true derivative
    ``2**other`` (PyTorch's is 0 for negative integer exponents)."""
    x = agrad.tensor([1.0, 1.0, 3.0], dtype=agrad.float64, requires_grad=True)
    other = agrad.tensor([-1, 2, -2])
    out = agrad.ldexp(x, other)
    np.testing.assert_array_equal(out.detach().numpy(), [0.5, 4.0, 0.75])
    out.sum().backward_sync()
    np.testing.assert_array_equal(x.grad.numpy(), [0.5, 4.0, 0.25])
    assert gradcheck(lambda t: agrad.ldexp(t, other), [agrad.tensor(X[0, :3], requires_grad=True,
                                                                     dtype=agrad.float64)])


# -- Tensor methods and in-place forms ---------------------------------------------------------------------

ADDED = (UNARY_FLOAT + UNARY_OTHER + BINARY + [
    "polygamma", "lerp", "addcmul", "addcdiv", "divide", "true_divide", "float_power", "i0", "xlogy",
])


@pytest.mark.parametrize("name", sorted(set(ADDED)))
def test_methods_exist_where_torch_has_them(name: str) -> None:
    assert hasattr(agrad, name)
    assert hasattr(agrad.Tensor, name) == hasattr(torch.Tensor, name)
    assert hasattr(agrad.Tensor, name + "_") == hasattr(torch.Tensor, name + "_")


INPLACE = {
    "sinh_": lambda L, x, y: x.sinh_(), "arcsin_": lambda L, x, y: (x / 4).arcsin_(),
    "atan2_": lambda L, x, y: x.atan2_(y), "arctan2_": lambda L, x, y: x.arctan2_(y),
    "hypot_": lambda L, x, y: x.hypot_(y), "erfinv_": lambda L, x, y: (x / 4).erfinv_(),
    "polygamma_": lambda L, x, y: (x * 0 + y).polygamma_(2), "logit_": lambda L, x, y: (y / 3).logit_(0.1),
    "xlogy_": lambda L, x, y: x.xlogy_(y), "square_": lambda L, x, y: x.square_(),
    "fix_": lambda L, x, y: x.fix_(), "frac_": lambda L, x, y: x.frac_(), "sgn_": lambda L, x, y: x.sgn_(),
    "nan_to_num_": lambda L, x, y: x.nan_to_num_(), "divide_": lambda L, x, y: x.divide_(y, rounding_mode="floor"),
    "true_divide_": lambda L, x, y: x.true_divide_(y), "remainder_": lambda L, x, y: x.remainder_(y),
    "fmod_": lambda L, x, y: x.fmod_(1.5), "multiply_": lambda L, x, y: x.multiply_(y),
    "subtract_": lambda L, x, y: x.subtract_(y, alpha=3), "negative_": lambda L, x, y: x.negative_(),
    "lerp_": lambda L, x, y: x.lerp_(y, 0.25), "addcmul_": lambda L, x, y: x.addcmul_(y * 2, y, value=-2),
    "addcdiv_": lambda L, x, y: x.addcdiv_(y * 2, y), "clamp_min_": lambda L, x, y: x.clamp_min_(y),
    "clamp_max_": lambda L, x, y: x.clamp_max_(0.3), "copysign_": lambda L, x, y: x.copysign_(-1),
    "float_power_": lambda L, x, y: x.float_power_(y), "ldexp_": lambda L, x, y: x.ldexp_(y),
    "nextafter_": lambda L, x, y: x.nextafter_(y), "i0_": lambda L, x, y: x.i0_(),
    "deg2rad_": lambda L, x, y: x.deg2rad_(), "exp2_": lambda L, x, y: x.exp2_(),
}


@pytest.mark.parametrize("name", list(INPLACE))
def test_in_place_forms(name: str) -> None:
    """In-place forms write into their tensor, record PyTorch's node and give its gradients."""

    def make(L: Any) -> tuple[Any, Any, Any]:
        x = L.tensor(X[0], dtype=L.float64, requires_grad=True)
        y = L.tensor(P[0], dtype=L.float64, requires_grad=True)
        target = x * 1
        out = INPLACE[name](L, target, y)
        return x, y, out

    (x, y, out), (tx, ty, expected) = make(agrad), make(torch)
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-12)
    assert out.grad_fn.name() == expected.grad_fn.name()
    out.sum().backward_sync()
    expected.sum().backward()
    for mine, ref in ((x, tx), (y, ty)):
        if ref.grad is None:
            assert mine.grad is None
        else:
            np.testing.assert_allclose(mine.grad.numpy(), ref.grad.numpy(force=True), rtol=1e-10, atol=1e-12)


def test_integer_in_place_forms() -> None:
    for call in (lambda L, a: a.gcd_(L.tensor(INTS2)), lambda L, a: a.lcm_(L.tensor(INTS2)),
                 lambda L, a: a.bitwise_xor_(5), lambda L, a: a.bitwise_left_shift_(2),
                 lambda L, a: a.bitwise_right_shift_(L.tensor(INTS2).abs()), lambda L, a: a.floor_divide_(3),
                 lambda L, a: a.remainder_(-3), lambda L, a: a.fmod_(-3), lambda L, a: a.clamp_min_(0),
                 lambda L, a: a.square_()):
        _same(lambda L, call=call: call(L, L.tensor(INTS)))


def test_in_place_forms_on_views() -> None:
    """Writes into views of a tensor in the graph rebase it (CopySlices), as in PyTorch."""

    def make(L: Any) -> tuple[Any, Any, Any]:
        a = L.tensor(X, dtype=L.float64, requires_grad=True)
        y = L.tensor(P[:, 0], dtype=L.float64, requires_grad=True)
        b = a * 1
        b[:, 1].atan2_(y)
        b[0].lt_(0.5)
        b[:, 2:].lerp_(L.ones(3, 2, dtype=L.float64), 0.25)
        return a, y, b

    (a, y, b), (ta, ty, tb) = make(agrad), make(torch)
    np.testing.assert_allclose(b.detach().numpy(), tb.detach().numpy(), rtol=1e-12)
    assert b.grad_fn.name() == tb.grad_fn.name().replace("torch::", "agrad::")  # CopySlices, in agrad's namespace
    g = np.random.default_rng(5).standard_normal(X.shape)
    b.backward_sync(agrad.tensor(g))
    tb.backward(torch.from_numpy(g))
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), rtol=1e-12)


def test_polygamma_far_below_zero() -> None:
    """Note [Hurwitz zeta far below 0]: the regrouped sum, at arguments whose direct
    sum would take millions of steps, agrees with PyTorch's."""
    x = np.array([-1e6 - 0.3, -12345.25, -60.5, -51.1, -49.9, 3.5])
    for n in (2, 3, 5):
        _same(lambda L, n=n: L.polygamma(n, L.tensor(x)), rtol=1e-9)


@pytest.mark.parametrize("name", ["erfinv", "logit", "log10", "acosh", "asin", "acos", "atanh", "lgamma", "digamma"])
def test_nan_sign_bits(name: str) -> None:
    """Out of their domains these ops give nan with PyTorch's sign bit (numpy's
    logarithms set it), which ``copysign`` and ``signbit`` show."""
    values = np.array([0.7, 1.5, -1.5, 1.0, -1.0, 0.0, -0.0, -3.0])
    _same(lambda L: L.signbit(getattr(L, name)(L.tensor(values))))
