"""Elementwise ops at the points the op table's samples stay away from.

Gradients exactly at ties and kinks (where finite differences are useless)
against PyTorch's rules, ``clamp``'s overloads and in-place form, the logical
ops and ``~``, the ``nn.functional`` activations, and float16 values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
import agrad.nn.functional as F
from agrad.autograd import gradcheck, gradgradcheck
from tests.helpers import requires_torch, torch

pytestmark = requires_torch

KINKS = np.array([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 6.0, 7.0])


def _grads(lib: Any, fn: Callable[..., Any], *arrays: np.ndarray, dtype: str = "float64") -> tuple[Any, list[Any]]:
    """``fn(*tensors)`` and the gradients of ``sum(out * w)`` w.r.t. each float array."""
    dt = getattr(lib, dtype)
    ts = [lib.tensor(a, dtype=dt, requires_grad=True) if a.dtype.kind == "f" else lib.tensor(a) for a in arrays]
    out = fn(lib, *ts)
    w = lib.tensor(np.linspace(0.5, 1.5, out.numel()).reshape(tuple(out.shape)), dtype=dt)
    leaves = [t for t in ts if t.requires_grad]
    if lib is torch:
        grads = torch.autograd.grad((out * w).sum(), leaves, allow_unused=True)
    else:
        grads = agrad.autograd.grad_sync((out * w).sum(), leaves, allow_unused=True)
    return out, list(grads)


def _np(t: Any) -> np.ndarray:
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _assert_same(fn: Callable[..., Any], *arrays: np.ndarray, dtype: str = "float64", tol: float = 1e-12) -> None:
    ours, og = _grads(agrad, fn, *arrays, dtype=dtype)
    theirs, tg = _grads(torch, fn, *arrays, dtype=dtype)
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.")
    np.testing.assert_allclose(_np(ours), _np(theirs), rtol=tol, atol=tol)
    assert type(ours.grad_fn).__name__ == theirs.grad_fn.name()
    for a, b in zip(og, tg, strict=True):
        np.testing.assert_allclose(_np(a), _np(b), rtol=tol, atol=tol)


# -- gradients at ties and kinks ---------------------------------------------------

KINK_CASES: dict[str, Callable[..., Any]] = {
    "abs": lambda lib, x: lib.abs(x),
    "abs_method": lambda lib, x: abs(x),
    "relu": lambda lib, x: lib.relu(x),
    "sign": lambda lib, x: lib.sign(x),
    "floor": lambda lib, x: lib.floor(x),
    "ceil": lambda lib, x: lib.ceil(x),
    "round": lambda lib, x: lib.round(x),
    "clamp_scalar": lambda lib, x: lib.clamp(x, -1.0, 1.0),
    "clamp_min_only": lambda lib, x: lib.clamp(x, min=0.0),
    "clamp_max_only": lambda lib, x: x.clamp(max=0.5),
    "clip": lambda lib, x: lib.clip(x, -0.5, 2.0),
    "leaky_relu": lambda lib, x: lib.nn.functional.leaky_relu(x, 0.2),
    "elu": lambda lib, x: lib.nn.functional.elu(x, alpha=2.0),
    "gelu": lambda lib, x: lib.nn.functional.gelu(x),
    "gelu_tanh": lambda lib, x: lib.nn.functional.gelu(x, approximate="tanh"),
    "silu": lambda lib, x: lib.nn.functional.silu(x),
    "softplus_threshold": lambda lib, x: lib.nn.functional.softplus(x, beta=2.0, threshold=1.0),
    "hardtanh": lambda lib, x: lib.nn.functional.hardtanh(x),
    "relu6": lambda lib, x: lib.nn.functional.relu6(x),
    "maximum_self_tie": lambda lib, x: lib.maximum(x, x),
    "maximum_abs_tie": lambda lib, x: lib.maximum(x, lib.abs(x)),
    "minimum_self_tie": lambda lib, x: lib.minimum(x, x),
    "minimum_relu_tie": lambda lib, x: x.minimum(lib.relu(x)),
}


@pytest.mark.parametrize("name", list(KINK_CASES))
def test_gradient_at_kinks_matches_torch(name: str) -> None:
    _assert_same(KINK_CASES[name], KINKS)


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_ties_split_the_gradient(op: str) -> None:
    a = np.array([1.0, 2.0, -3.0, 0.0, 5.0])
    b = np.array([1.0, 1.0, -3.0, 0.0, 6.0])
    _assert_same(lambda lib, x, y: getattr(lib, op)(x, y), a, b)
    _, (ga, gb) = _grads(agrad, lambda lib, x, y: getattr(lib, op)(x, y), a, b)
    w = np.linspace(0.5, 1.5, 5)
    tie = a == b
    np.testing.assert_allclose(_np(ga)[tie], w[tie] / 2)
    np.testing.assert_allclose(_np(gb)[tie], w[tie] / 2)


def test_maximum_broadcast_ties_and_nan() -> None:
    a = np.array([[1.0, np.nan], [0.0, 2.0]])
    b = np.array([1.0, 0.5])
    _assert_same(lambda lib, x, y: lib.maximum(x, y), a, b)
    _assert_same(lambda lib, x, y: lib.minimum(x, y), a, b)


def test_sqrt_and_rsqrt_at_zero() -> None:
    x = np.array([0.0, 1.0, 4.0])
    _assert_same(lambda lib, t: lib.sqrt(t), x)
    _assert_same(lambda lib, t: lib.rsqrt(t), x)
    _assert_same(lambda lib, t: lib.reciprocal(t), x)
    _assert_same(lambda lib, t: lib.log2(t), x)
    _, (g,) = _grads(agrad, lambda lib, t: lib.sqrt(t), x)
    assert np.isinf(_np(g)[0])


def test_domain_edges_give_inf_and_nan_quietly() -> None:
    x = np.array([-1.0, 0.0, -2.0])
    for fn in ("sqrt", "rsqrt", "log2", "log1p", "reciprocal"):
        _assert_same(lambda lib, t, fn=fn: getattr(lib, fn)(t), x)


def test_round_half_to_even_and_decimals() -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.125, 1.25])
    _assert_same(lambda lib, t: lib.round(t), x)
    _assert_same(lambda lib, t: lib.round(t, decimals=1), x)
    _assert_same(lambda lib, t: lib.round(t, decimals=2), x)


def test_zero_gradient_ops_give_zeros_for_inf_grad() -> None:
    for fn in ("sign", "floor", "ceil", "round"):
        x = agrad.tensor([0.5, -1.5], requires_grad=True)
        getattr(agrad, fn)(x).backward_sync(agrad.tensor([np.inf, np.nan]))
        np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0])


# -- clamp ------------------------------------------------------------------------

CLAMP_X = np.array([[-2.0, -1.0, 0.0, 0.5], [1.0, 1.5, 3.0, -0.5]])
CLAMP_LO = np.array([-1.0, -1.0, 0.5, 0.5])
CLAMP_HI = np.array([[1.0, 1.0, 0.0, 0.5], [1.0, 2.0, 2.0, -1.0]])  # includes min > max and x == bounds


def test_clamp_tensor_bounds() -> None:
    _assert_same(lambda lib, x, lo, hi: lib.clamp(x, lo, hi), CLAMP_X, CLAMP_LO, CLAMP_HI)
    _assert_same(lambda lib, x, lo, hi: x.clip(lo, hi), CLAMP_X, CLAMP_LO, CLAMP_HI)


def test_clamp_tensor_bounds_with_none() -> None:
    _assert_same(lambda lib, x, lo: lib.clamp(x, lo), CLAMP_X, CLAMP_LO)
    _assert_same(lambda lib, x, lo: lib.clamp(x, min=lo), CLAMP_X, CLAMP_LO)
    _assert_same(lambda lib, x, hi: lib.clamp(x, None, hi), CLAMP_X, CLAMP_HI)
    _assert_same(lambda lib, x, hi: lib.clamp(x, max=hi), CLAMP_X, CLAMP_HI)


def test_clamp_tensor_bounds_gradcheck() -> None:
    rng = np.random.default_rng(3)
    x, lo, hi = rng.uniform(-2, 2, (3, 3, 4))
    # Keep every sample away from x == min, x == max and min == max.
    x = np.where(np.abs(x - lo) < 0.05, x + 0.1, x)
    x = np.where(np.abs(x - hi) < 0.05, x + 0.1, x)
    hi = np.where(np.abs(hi - lo) < 0.05, hi + 0.2, hi)
    x, lo, hi = (agrad.tensor(a, requires_grad=True) for a in (x, lo, hi))
    fn = lambda a, b, c: agrad.clamp(a, b, c)
    assert gradcheck(fn, (x, lo, hi)) and gradgradcheck(fn, (x, lo, hi))


def test_clamp_needs_a_bound() -> None:
    with pytest.raises(RuntimeError, match="At least one of 'min' or 'max'"):
        agrad.clamp(agrad.tensor([1.0]))
    with pytest.raises(RuntimeError, match="At least one of 'min' or 'max'"):
        agrad.tensor([1.0]).clamp(None, None)


def test_clamp_integer_dtypes() -> None:
    xi = np.array([-3, 0, 2, 7])
    for lo, hi in [(0, 5), (0.5, None), (None, 2)]:
        ours = agrad.clamp(agrad.tensor(xi), lo, hi)
        theirs = torch.clamp(torch.tensor(xi), lo, hi)
        assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.")
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.parametrize("method", ["clamp_", "clip_"])
def test_clamp_in_place(method: str) -> None:
    def fn(lib: Any, x: Any) -> Any:
        y = x * 2
        out = getattr(y, method)(-1.0, 1.0)
        assert out is y
        return y * y

    x = np.array([-1.0, -0.5, 0.0, 0.25, 0.5, 2.0])
    _assert_same(fn, x)
    y = agrad.tensor(x) * 1
    v = y._version
    y.clamp_(min=0.0)
    assert y._version > v
    np.testing.assert_array_equal(y.numpy(), np.maximum(x, 0.0))


def test_clamp_in_place_on_leaf_requiring_grad_raises() -> None:
    with pytest.raises(RuntimeError, match="leaf Variable"):
        agrad.tensor([1.0], requires_grad=True).clamp_(0.0, 0.5)


# -- logical ops and ~ ----------------------------------------------------------

LOGICAL_INPUTS = [
    (np.array([True, False, True, False]), np.array([True, True, False, False])),
    (np.array([0.0, -1.5, 2.0, np.nan]), np.array([1, 0, 0, 3])),
    (np.array([[0, 1], [2, 0]]), np.array([True, False])),
]


@pytest.mark.parametrize("op", ["logical_and", "logical_or", "logical_xor"])
@pytest.mark.parametrize("case", range(len(LOGICAL_INPUTS)))
def test_logical_binary(op: str, case: int) -> None:
    a, b = LOGICAL_INPUTS[case]
    ours = getattr(agrad, op)(agrad.tensor(a), agrad.tensor(b))
    theirs = getattr(torch, op)(torch.tensor(a), torch.tensor(b))
    assert ours.dtype is agrad.bool and theirs.dtype is torch.bool
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    np.testing.assert_array_equal(getattr(agrad.tensor(a), op)(agrad.tensor(b)).numpy(), theirs.numpy())


@pytest.mark.parametrize("case", range(len(LOGICAL_INPUTS)))
def test_logical_not(case: int) -> None:
    a = LOGICAL_INPUTS[case][0]
    np.testing.assert_array_equal(agrad.logical_not(agrad.tensor(a)).numpy(),
                                  torch.logical_not(torch.tensor(a)).numpy())
    assert agrad.tensor(a).logical_not().dtype is agrad.bool


def test_logical_ops_are_not_differentiable() -> None:
    x = agrad.tensor([0.0, 1.0], requires_grad=True)
    for out in (agrad.logical_and(x, x), agrad.logical_or(x, 0.0), agrad.logical_not(x), agrad.logical_xor(x, x)):
        assert not out.requires_grad and out.grad_fn is None


def test_logical_in_place_keeps_dtype() -> None:
    for a, b in LOGICAL_INPUTS[:2]:
        ours, theirs = agrad.tensor(a), torch.tensor(a)
        ours.logical_and_(agrad.tensor(b))
        theirs.logical_and_(torch.tensor(b))
        assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.")
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.parametrize("a", [np.array([True, False]), np.array([-3, 0, 5], dtype=np.int64),
                               np.array([1, 200], dtype=np.uint8), np.array([7, -8], dtype=np.int8)])
def test_invert(a: np.ndarray) -> None:
    ours, theirs = ~agrad.tensor(a), ~torch.tensor(a)
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.")
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    np.testing.assert_array_equal(agrad.bitwise_not(agrad.tensor(a)).numpy(), theirs.numpy())


def test_invert_float_raises() -> None:
    with pytest.raises(TypeError, match="only implemented on integer and Boolean"):
        ~agrad.tensor([1.0])


def test_invert_mask_idiom() -> None:
    x = agrad.tensor([-1.0, 2.0, 0.0])
    np.testing.assert_array_equal((~(x > 0)).numpy(), [True, False, True])


# -- nn.functional activations ----------------------------------------------------

ACTIVATIONS: dict[str, Callable[..., Any]] = {
    "leaky_relu": lambda F, x: F.leaky_relu(x),
    "leaky_relu_slope": lambda F, x: F.leaky_relu(x, negative_slope=0.3),
    "elu": lambda F, x: F.elu(x),
    "elu_alpha": lambda F, x: F.elu(x, 0.7),
    "gelu": lambda F, x: F.gelu(x),
    "gelu_tanh": lambda F, x: F.gelu(x, approximate="tanh"),
    "silu": lambda F, x: F.silu(x),
    "softplus": lambda F, x: F.softplus(x),
    "softplus_beta": lambda F, x: F.softplus(x, beta=3.0, threshold=5.0),
    "hardtanh": lambda F, x: F.hardtanh(x),
    "hardtanh_bounds": lambda F, x: F.hardtanh(x, -2.0, 0.5),
    "relu6": lambda F, x: F.relu6(x),
    "relu": lambda F, x: F.relu(x),
}

ACT_X = np.concatenate([np.linspace(-8.0, 8.0, 23), [-30.0, 30.0, 0.0, 6.0, -1.0, 1.0]])


@pytest.mark.parametrize("name", list(ACTIVATIONS))
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_activation_matches_torch(name: str, dtype: str) -> None:
    fn = ACTIVATIONS[name]
    _assert_same(lambda lib, x: fn(lib.nn.functional, x), ACT_X, dtype=dtype,
                 tol=1e-12 if dtype == "float64" else 1e-6)


@pytest.mark.parametrize("name", ["leaky_relu", "elu", "silu", "hardtanh", "relu6"])
def test_activation_in_place(name: str) -> None:
    def fn(lib: Any, x: Any) -> Any:
        y = x * 1.5
        out = getattr(lib.nn.functional, name)(y, inplace=True)
        assert out is y
        return y * x

    _assert_same(fn, np.array([-3.0, -0.5, 0.25, 2.0, 5.0]))


@pytest.mark.parametrize("name", ["leaky_relu_slope", "elu_alpha", "gelu", "gelu_tanh", "silu", "softplus_beta"])
def test_activation_gradgradcheck(name: str) -> None:
    x = agrad.tensor(np.array([-2.5, -0.7, 0.3, 1.1, 2.2]), dtype=agrad.float64, requires_grad=True)
    fn = lambda t: ACTIVATIONS[name](F, t)
    assert gradcheck(fn, (x,)) and gradgradcheck(fn, (x,))


def test_gelu_rejects_unknown_approximation() -> None:
    with pytest.raises(RuntimeError, match="approximate"):
        F.gelu(agrad.tensor([1.0]), approximate="fast")


def test_functional_exports_activations() -> None:
    for name in ("leaky_relu", "elu", "gelu", "silu", "softplus", "hardtanh", "relu6"):
        assert name in F.__all__ and callable(getattr(F, name))


# -- integer promotion and float16 -----------------------------------------------


@pytest.mark.parametrize("op", ["sqrt", "rsqrt", "expm1", "log1p", "log2", "sin", "cos", "tan", "reciprocal",
                                "erf", "abs", "sign", "floor", "ceil", "round"])
def test_integer_inputs(op: str) -> None:
    a = np.array([1, 4, 9, 0, -2])
    ours = getattr(agrad, op)(agrad.tensor(a))
    theirs = getattr(torch, op)(torch.tensor(a))
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.")
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-6)


FLOAT16_OPS: dict[str, Callable[..., Any]] = {
    "abs": lambda lib, x: lib.abs(x),
    "sqrt": lambda lib, x: lib.sqrt(lib.abs(x)),
    "sin": lambda lib, x: lib.sin(x),
    "expm1": lambda lib, x: lib.expm1(x),
    "floor": lambda lib, x: lib.floor(x),
    "clamp": lambda lib, x: lib.clamp(x, -0.5, 0.75),
    "maximum": lambda lib, x: lib.maximum(x, lib.sin(x)),
    "leaky_relu": lambda lib, x: lib.nn.functional.leaky_relu(x, 0.1),
    "silu": lambda lib, x: lib.nn.functional.silu(x),
    "softplus": lambda lib, x: lib.nn.functional.softplus(x),
}


@pytest.mark.parametrize("name", list(FLOAT16_OPS))
def test_float16_values(name: str) -> None:
    x = np.linspace(-2.0, 2.0, 17)
    fn = FLOAT16_OPS[name]
    ours = fn(agrad, agrad.tensor(x, dtype=agrad.float16))
    theirs = fn(torch, torch.tensor(x, dtype=torch.float16))
    assert ours.dtype is agrad.float16 and theirs.dtype is torch.float16
    np.testing.assert_allclose(ours.numpy().astype(np.float64), theirs.numpy().astype(np.float64),
                               rtol=2e-3, atol=2e-3)


@requires_torch
def test_pow_records_the_node_of_torchs_overload() -> None:
    # Tensor ** Scalar: PowBackward0; Tensor ** Tensor: PowBackward1; Scalar ** Tensor: PowBackward2.
    forms = [lambda lib, x: x.pow(2), lambda lib, x: x ** 2.5, lambda lib, x: x ** x,
             lambda lib, x: x.pow(lib.tensor(2.0)), lambda lib, x: 2 ** x, lambda lib, x: lib.pow(2, x)]
    for form in forms:
        names = [form(lib, lib.tensor([1.0, 2.0], requires_grad=True)).grad_fn.name() for lib in (torch, agrad)]
        assert names[0] == names[1]
