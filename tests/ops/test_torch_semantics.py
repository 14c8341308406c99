"""Op values where agrad used to differ from PyTorch (issue 14, items 5, 11, 15,
16, 17), each compared with torch directly: Python numbers converted straight
to the requested dtype (and range-checked as PyTorch does), pow's gradient at
zero, var/std with zero degrees of freedom, max/min gradients with NaN, and
prod's first and second derivatives at zeros."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
from agrad.autograd import gradcheck, gradgradcheck
from tests.helpers import requires_torch, torch

pytestmark = requires_torch

nan, inf = math.nan, math.inf


def _outcome(lib: Any, fn: Callable[[Any], Any]) -> Any:
    """``fn(lib)`` as plain Python values, or the exception's type and message."""
    try:
        out = fn(lib)
    except Exception as exc:  # noqa: BLE001 - the exception is the outcome compared
        return type(exc).__name__, str(exc)
    return out.tolist() if hasattr(out, "tolist") else out


def _same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN, in nested lists."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def _assert_like_torch(fn: Callable[[Any], Any]) -> None:
    ours, theirs = _outcome(agrad, fn), _outcome(torch, fn)
    assert _same(ours, theirs), (ours, theirs)


def _close(ours: Any, theirs: Any) -> None:
    """Values (tensors of either library) equal to within rounding, with NaN and
    infinities (and their signs) in the same places."""
    a = ours.detach().numpy() if isinstance(ours, agrad.Tensor) else np.asarray(ours)
    b = theirs.detach().numpy() if isinstance(theirs, torch.Tensor) else np.asarray(theirs)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-12, equal_nan=True)


# -- 5. Python numbers go straight to the requested dtype ------------------------------

VALUES = [0.1, 1e300, -2.5e-310, 1 / 3]


def _set(index: Any, value: Any, dtype: str = "float64") -> Callable[[Any], Any]:
    def fn(lib: Any) -> Any:
        t = lib.zeros(4, dtype=getattr(lib, dtype))
        t[index(lib) if callable(index) else index] = value
        return t
    return fn


@pytest.mark.parametrize("fn", [
    lambda L: L.tensor(VALUES, dtype=L.float64),
    lambda L: L.tensor([VALUES, VALUES], dtype=L.float64),
    lambda L: L.tensor(0.1, dtype=L.float64),
    lambda L: L.as_tensor(VALUES, dtype=L.float64),
    lambda L: L.tensor([2**53 + 1, 3], dtype=L.float64),
    lambda L: L.tensor([16777217], dtype=L.float32),
    lambda L: L.tensor([1e300, 0.1]),                       # float32 by default: inf, silently
    lambda L: L.tensor([1.7, -2.5], dtype=L.int64),
    lambda L: L.tensor([-1, 255], dtype=L.uint8),
    lambda L: L.tensor([0.0, 0.5], dtype=L.bool),
    lambda L: L.zeros(4, dtype=L.float64).copy_(L.tensor(VALUES, dtype=L.float64)),
    _set(0, 0.1), _set(slice(1, 3), 1e300), _set(lambda L: L.tensor([0, 2]), 0.1),
    _set(lambda L: L.tensor([True, False, False, True]), 1 / 3),
    _set(0, -1, "uint8"), _set(1, 1.7, "int64"), _set(2, 2, "bool"), _set(0, inf, "float32"),
    lambda L: L.full((2,), 0.1, dtype=L.float64),
    lambda L: L.full((2,), 1e300, dtype=L.float64),
    lambda L: L.full_like(L.zeros(2, dtype=L.float64), 1 / 3),
    lambda L: L.zeros(2, dtype=L.float64).fill_(0.1),
    lambda L: L.zeros(2, dtype=L.uint8).fill_(-1),
    lambda L: L.arange(0, 0.5, 0.1, dtype=L.float64),
    lambda L: L.zeros(2, dtype=L.float64).masked_fill(L.tensor([True, False]), 0.1),
    lambda L: L.where(L.tensor([True, False]), L.zeros(2, dtype=L.float64), 0.1),
    lambda L: L.where(L.tensor([True, False]), 1e300, L.zeros(2, dtype=L.float64)),
    lambda L: L.tensor([0.0, 1.0], dtype=L.float64).clamp(0.1, 1 / 3),
    lambda L: L.zeros(2, dtype=L.float64) + 0.1,
    lambda L: 0.1 - L.zeros(2, dtype=L.float64),
    lambda L: L.ones(2, dtype=L.float64) / 3.0,
    lambda L: L.ones(2, dtype=L.float64) * 1e300,
    lambda L: L.maximum(L.zeros(2, dtype=L.float64), L.tensor(0.1, dtype=L.float64)),
    lambda L: L.tensor([0.1, 0.2], dtype=L.float64).mean(),
    lambda L: L.zeros(2) + 1e300,                           # arithmetic is unchecked: inf
])
def test_python_numbers_convert_straight_to_the_dtype(fn: Callable[[Any], Any]) -> None:
    _assert_like_torch(fn)


@pytest.mark.parametrize("fn", [
    lambda L: L.full((2,), 1e300),
    lambda L: L.full((2,), 70000.0, dtype=L.float16),
    lambda L: L.full_like(L.zeros(2, dtype=L.int8), 300),
    lambda L: L.zeros(2).fill_(1e300),
    lambda L: L.zeros(2, dtype=L.uint8).fill_(-0.5),
    lambda L: L.zeros(2, dtype=L.int64).masked_fill(L.tensor([True, False]), nan),
    lambda L: L.zeros(2).masked_fill(L.tensor([True, False]), -1e300),
    _set(0, 1e300, "float32"), _set(lambda L: L.tensor([0]), 1e300, "float32"), _set(0, 300, "int8"),
    _set(0, inf, "int64"),
    lambda L: L.where(L.tensor([True, False]), L.zeros(2), 1e300),
    lambda L: L.zeros(2).clamp(max=1e300),
    lambda L: L.zeros(2, dtype=L.int8).clamp(min=-300),
    lambda L: L.tensor([300], dtype=L.int8),
    lambda L: L.tensor([nan], dtype=L.int64),
    lambda L: L.tensor([[1e30]], dtype=L.int64),
])
def test_numbers_out_of_range_raise_like_torch(fn: Callable[[Any], Any]) -> None:
    ours = _outcome(agrad, fn)
    assert ours[0] == "RuntimeError" and "without overflow" in ours[1], ours
    _assert_like_torch(fn)


@pytest.mark.parametrize("data", [
    lambda L: [L.tensor(0.1, dtype=L.float64)], lambda L: [L.tensor(0.1, dtype=L.float64), 1 / 3],
    lambda L: [[L.tensor(1e300, dtype=L.float64)], [0.5]], lambda L: [np.float64(0.1), 0.2],
    lambda L: [np.float32(0.1), 1], lambda L: [L.tensor(1), 2.5], lambda L: [np.int32(3), 4],
    lambda L: [[1, 2], [3.5, 4]], lambda L: [np.int8(1), np.uint8(2)],
    lambda L: [], lambda L: [True, 2],
])
def test_tensor_infers_the_dtype_of_its_elements_like_torch(data: Callable[[Any], Any]) -> None:
    # A float64 element keeps the list float64: its values never pass through float32.
    _assert_like_torch(lambda L: (lambda t: (str(t.dtype).split(".")[1], t.tolist()))(L.tensor(data(L))))


def test_float64_leaf_keeps_python_floats_exactly_through_backward() -> None:
    x = agrad.tensor([0.1, 1e300], dtype=agrad.float64, requires_grad=True)
    (x * 0.1).sum().backward_sync()
    assert x.tolist() == [0.1, 1e300]
    assert x.grad.tolist() == torch.full((2,), 0.1, dtype=torch.float64).tolist()


# -- 11. pow's gradients at zero ------------------------------------------------------

BASES = [0.0, -0.0, 1.0, -1.0, 2.0, 0.5, -2.5]
EXPONENTS = [0.0, 1.0, 2.0, 3.0, -1.0, -2.0, 0.5, -0.5, 1.5]


def _pow_grads(lib: Any, base: Any, exponent: Any, create_graph: bool = False) -> list[Any]:
    """Gradients of ``base ** exponent`` (incoming gradient 1) w.r.t. whichever operands are tensors."""
    inputs = [t for t in (base, exponent) if isinstance(t, (agrad.Tensor, torch.Tensor))]
    out = base ** exponent
    ones = lib.ones_like(out)
    if lib is agrad:
        return list(agrad.autograd.grad_sync(out, inputs, ones, create_graph=create_graph))
    return list(torch.autograd.grad(out, inputs, ones, create_graph=create_graph))


def _grid(lib: Any) -> tuple[Any, Any]:
    b, e = np.meshgrid(BASES, EXPONENTS, indexing="ij")
    return (lib.tensor(b, dtype=lib.float64, requires_grad=True),
            lib.tensor(e, dtype=lib.float64, requires_grad=True))


def test_pow_gradients_on_a_grid_match_torch() -> None:
    for ours, theirs in zip(_pow_grads(agrad, *_grid(agrad)), _pow_grads(torch, *_grid(torch)), strict=True):
        _close(ours, theirs)


def test_pow_exponent_gradient_at_zero_base_negative_exponent_is_minus_inf() -> None:
    b = agrad.tensor(0.0, requires_grad=True)
    e = agrad.tensor(-1.0, requires_grad=True)
    gb, ge = _pow_grads(agrad, b, e)
    assert ge.item() == -inf and gb.item() == -inf


@pytest.mark.parametrize("base", [0.0, 1.0, 2.0, 0.5, -2.0])
def test_pow_with_python_scalar_base_matches_torch(base: float) -> None:
    e = np.array(EXPONENTS)
    (ours,) = _pow_grads(agrad, base, agrad.tensor(e, requires_grad=True))
    (theirs,) = _pow_grads(torch, base, torch.tensor(e, requires_grad=True))
    _close(ours, theirs)


@pytest.mark.parametrize("exponent", [0.0, 1.0, 2.0, -1.0, 0.5, -0.5])
def test_pow_with_python_scalar_exponent_matches_torch(exponent: float) -> None:
    # -0.0 left out: PyTorch computes x ** -0.5 as rsqrt(x), which is -inf at -0.0
    b = np.array([v for v in BASES if math.copysign(1.0, v) > 0 or v != 0])
    (ours,) = _pow_grads(agrad, agrad.tensor(b, requires_grad=True), exponent)
    (theirs,) = _pow_grads(torch, torch.tensor(b, requires_grad=True), exponent)
    _close(ours, theirs)


def _pow_second_derivatives(lib: Any) -> list[Any]:
    base, exponent = _grid(lib)
    grad = agrad.autograd.grad_sync if lib is agrad else torch.autograd.grad
    out = base ** exponent
    firsts = grad(out, [base, exponent], lib.ones_like(out), create_graph=True)
    return [h for g in firsts for h in grad(g, [base, exponent], lib.ones_like(g))]


def test_pow_second_derivatives_match_torch_except_nan_at_flat_points() -> None:
    # Note [Pow backward at zero]: where the first derivative is defined as 0
    # (base 0 with exponent >= 0), agrad's second derivatives are not PyTorch's
    # NaN: at 0 ** 0 all four are 0.  Elsewhere (a base of -0.0 aside, whose
    # signed infinities differ) they agree.
    b, e = np.meshgrid(BASES, EXPONENTS, indexing="ij")
    skip = (b == 0) & ((e >= 0) | np.signbit(b))
    with warnings.catch_warnings():
        # The engine's gradient sum warns on inf + -inf (numpy's RuntimeWarning; PyTorch is silent).
        warnings.simplefilter("ignore", RuntimeWarning)
        ours_all = _pow_second_derivatives(agrad)
    for ours, theirs in zip(ours_all, _pow_second_derivatives(torch), strict=True):
        a, t = ours.numpy(), theirs.numpy()
        assert a[(b == 0) & ~np.signbit(b) & (e == 0)].tolist() == [0.0]
        np.testing.assert_allclose(a[~skip], t[~skip], rtol=1e-6, equal_nan=True)


def test_pow_is_twice_differentiable_away_from_zero() -> None:
    rng = np.random.default_rng(0)
    b = agrad.tensor(rng.uniform(0.5, 2.0, (3, 2)), requires_grad=True)
    e = agrad.tensor(rng.uniform(-2.0, 2.0, (3, 2)), requires_grad=True)
    assert gradgradcheck(lambda x, y: x ** y, [b, e])


# -- 15. var / std with zero degrees of freedom ----------------------------------------

DOF_CASES = [
    ([[1.5, 2.0]], {"dim": 0}),                 # a batch of one: dof 0
    ([[1.5, 2.0], [0.5, 0.5]], {"dim": 1, "correction": 2}),
    ([[1.5, 2.0]], {"dim": 1, "correction": 3}),  # dof < 0 along a dim
    ([[1.5, 2.0]], {"correction": 2}),          # full reduction, dof 0
    ([[1.5, 1.5]], {"correction": 2}),          # ... at the mean: NaN
    ([[1.5, 2.0]], {"correction": 2.5}),
    ([[1.5, 2.0]], {"dim": 1, "correction": 2.5}),
    ([3.0], {}),
]


@pytest.mark.parametrize("name", ["var", "std"])
@pytest.mark.parametrize(("data", "kw"), DOF_CASES)
def test_var_std_with_no_degrees_of_freedom_match_torch(name: str, data: list, kw: dict) -> None:
    x = agrad.tensor(data, dtype=agrad.float64, requires_grad=True)
    t = torch.tensor(data, dtype=torch.float64, requires_grad=True)
    with pytest.warns(UserWarning, match=rf"{name}\(\): degrees of freedom is <= 0"):
        out = getattr(x, name)(**kw)
    with pytest.warns(UserWarning, match=rf"{name}\(\): degrees of freedom is <= 0"):
        expected = getattr(t, name)(**kw)
    _close(out, expected)
    g = np.arange(1.0, out.numel() + 1).reshape(out.shape)
    out.backward_sync(agrad.tensor(g))
    expected.backward(torch.tensor(g))
    _close(x.grad, t.grad)


@pytest.mark.parametrize("name", ["var", "std"])
def test_var_std_of_an_empty_tensor_warn_and_give_nan_like_torch(name: str) -> None:
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        out = getattr(agrad.zeros(0, requires_grad=True), name)()
    assert math.isnan(out.item())


def test_var_std_with_degrees_of_freedom_do_not_warn() -> None:
    x = agrad.tensor([[1.5, 2.0]], requires_grad=True)
    x.var(dim=1).sum().backward_sync()  # filterwarnings = error turns a warning into a failure
    x.std(correction=0, dim=0).sum().backward_sync()


# -- 16. max / min gradients with NaN ---------------------------------------------------

NAN_INPUT = [[1.0, nan, 3.0], [3.0, 2.0, nan]]


@pytest.mark.parametrize("fn", [
    lambda x: x.max(), lambda x: x.min(),
    lambda x: x.max(dim=0)[0], lambda x: x.min(dim=1)[0], lambda x: x.max(dim=1, keepdim=True)[0],
    lambda x: x.amax(), lambda x: x.amin(dim=0), lambda x: x.amax(dim=1),
])
@pytest.mark.parametrize("data", [NAN_INPUT, [nan, 1.0, nan], [3.0, 1.0, 3.0]])
def test_max_min_gradients_with_nan_match_torch(fn: Callable[[Any], Any], data: list) -> None:
    x = agrad.tensor(data, requires_grad=True)
    t = torch.tensor(data, requires_grad=True)
    try:
        expected = fn(t)
    except IndexError:
        pytest.skip("no such dimension in this input")
    out = fn(x)
    _close(out, expected)
    g = np.arange(1.0, out.numel() + 1, dtype=np.float32).reshape(out.shape)
    out.backward_sync(agrad.tensor(g))
    expected.backward(torch.tensor(g))
    _close(x.grad, t.grad)


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_maximum_minimum_gradients_with_nan_match_torch(name: str) -> None:
    a, b = [1.0, nan, 3.0, nan, 2.0], [nan, 2.0, 3.0, nan, 1.0]
    xs = [agrad.tensor(v, requires_grad=True) for v in (a, b)]
    ts = [torch.tensor(v, requires_grad=True) for v in (a, b)]
    getattr(agrad, name)(*xs).sum().backward_sync()
    getattr(torch, name)(*ts).sum().backward()
    for x, t in zip(xs, ts, strict=True):
        _close(x.grad, t.grad)


# -- 17. prod's first and second derivatives at zeros -----------------------------------

def _with_zeros(count: int) -> np.ndarray:
    x = np.array([[1.5, -2.0, 0.5, 3.0], [0.7, 1.25, -1.5, 2.0], [-0.5, 2.5, 1.75, -1.0]])
    for i, j in [(1, 1), (1, 3), (1, 0), (0, 1)][:count]:
        x[i, j] = 0.0
    return x


PROD_KWS = [{}, {"dim": 1}, {"dim": 0}, {"dim": -1, "keepdim": True}, {"dim": 0, "keepdim": True}]


def _prod_derivatives(lib: Any, data: np.ndarray, kw: dict) -> tuple[Any, Any]:
    """The first derivative of ``sum(v * prod(x))`` and the second, along ``w``."""
    grad = agrad.autograd.grad_sync if lib is agrad else torch.autograd.grad
    x = lib.tensor(data, requires_grad=True)
    out = x.prod(**kw)
    v = lib.tensor(np.linspace(0.5, 1.5, out.numel()).reshape(tuple(out.shape)))
    (g,) = grad((out * v).sum(), [x], create_graph=True)
    w = lib.tensor(np.linspace(-1.0, 2.0, data.size).reshape(data.shape))
    (gg,) = grad((g * w).sum(), [x])
    return g, gg


@pytest.mark.parametrize("zeros", [0, 1, 2, 3])
@pytest.mark.parametrize("kw", PROD_KWS)
def test_prod_first_and_second_derivatives_match_torch(zeros: int, kw: dict) -> None:
    data = _with_zeros(zeros)
    for ours, theirs in zip(_prod_derivatives(agrad, data, kw), _prod_derivatives(torch, data, kw), strict=True):
        _close(ours, theirs)


@pytest.mark.parametrize("zeros", [1, 2])
@pytest.mark.parametrize("kw", PROD_KWS)
def test_prod_with_zeros_passes_gradgradcheck(zeros: int, kw: dict) -> None:
    x = agrad.tensor(_with_zeros(zeros), requires_grad=True)
    assert gradcheck(lambda t: t.prod(**kw), [x])
    assert gradgradcheck(lambda t: t.prod(**kw), [x])


@pytest.mark.parametrize("fn", [
    lambda L, x: L.relu(x), lambda L, x: x.abs(), lambda L, x: x.sign(), lambda L, x: x.clamp(0.5, 2.5),
    lambda L, x: L.nn.functional.relu(x),
])
def test_nan_gradients_of_relu_abs_sign_match_torch(fn: Callable[[Any, Any], Any]) -> None:
    data = [1.0, nan, -1.0, 0.0, 3.0]
    x = agrad.tensor(data, requires_grad=True)
    t = torch.tensor(data, requires_grad=True)
    out, expected = fn(agrad, x), fn(torch, t)
    _close(out, expected)
    out.backward_sync(agrad.ones_like(out))
    expected.backward(torch.ones_like(expected))
    _close(x.grad, t.grad)


@pytest.mark.parametrize("ord", [inf, -inf])
@pytest.mark.parametrize("kw", [{}, {"dim": 1}, {"dim": 0, "keepdim": True}])
def test_inf_norm_gradient_with_nan_matches_torch(ord: float, kw: dict) -> None:
    data = [[1.0, -3.0, 3.0], [2.0, nan, -1.0]]
    x = agrad.tensor(data, requires_grad=True)
    t = torch.tensor(data, requires_grad=True)
    out, expected = agrad.linalg.vector_norm(x, ord, **kw), torch.linalg.vector_norm(t, ord, **kw)
    _close(out, expected)
    assert type(out.grad_fn).__name__ == expected.grad_fn.name()
    out.backward_sync(agrad.ones_like(out))
    expected.backward(torch.ones_like(expected))
    _close(x.grad, t.grad)


@pytest.mark.parametrize("ord", [inf, -inf])
@pytest.mark.parametrize("shape_dim", [((0,), None), ((0, 3), 0), ((0, 3), 1)])
def test_inf_norm_of_empty_input_matches_torch(ord: float, shape_dim: tuple) -> None:
    shape, dim = shape_dim
    ours = _outcome(agrad, lambda L: L.linalg.vector_norm(L.zeros(shape), ord, dim=dim))
    theirs = _outcome(torch, lambda L: L.linalg.vector_norm(L.zeros(shape), ord, dim=dim))
    assert ours[0] == theirs[0] if isinstance(theirs, tuple) else ours == theirs


def test_full_prod_with_two_zeros_beside_nan_has_zero_gradient_like_torch() -> None:
    data = [[2.0, 0.0, nan], [inf, 0.0, 1.5]]
    x = agrad.tensor(data, requires_grad=True)
    t = torch.tensor(data, requires_grad=True)
    x.prod().backward_sync()
    t.prod().backward()
    _close(x.grad, t.grad)


@pytest.mark.parametrize("kw", PROD_KWS)
@pytest.mark.parametrize("data", [
    [[-inf, -0.0, nan], [inf, nan, 0.0], [inf, 1.0, 2.0]],
    [[inf, 0.0, 2.0], [0.5, 0.0, 0.0], [3.0, -inf, 1.0]],
    [[nan, 2.0, 0.0], [1.0, inf, 4.0], [0.0, 0.0, -2.0]],
])
def test_prod_gradient_beside_inf_and_nan_matches_torch(kw: dict, data: list) -> None:
    # Note [Prod backward at zeros]: where the formula is not finite, PyTorch's exclusive products.
    x = agrad.tensor(data, dtype=agrad.float64, requires_grad=True)
    t = torch.tensor(data, dtype=torch.float64, requires_grad=True)
    out, expected = x.prod(**kw), t.prod(**kw)
    g = np.linspace(0.5, 1.5, out.numel()).reshape(out.shape)
    out.backward_sync(agrad.tensor(g))
    expected.backward(torch.tensor(g))
    _close(x.grad, t.grad)
