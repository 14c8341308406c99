"""PyTorch's other spellings (``agrad._ops._aliases``) against torch: the
torch-level in-place functions, torch-level forms of Tensor functions, the
complex helpers on real tensors, operators and the global flags."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import agrad
from agrad.autograd import gradcheck, gradgradcheck
from tests.helpers import requires_torch, torch

pytestmark = requires_torch

_rng = np.random.default_rng(11)
UNIT = _rng.uniform(0.1, 0.9, (3, 4))  # inside every unary domain below but acosh's
ABOVE_ONE = _rng.uniform(1.5, 2.5, (3, 4))
OTHER = _rng.uniform(0.5, 1.5, (3, 4))
MAT = _rng.standard_normal((3, 5))
VEC = _rng.standard_normal(5)
INTS = np.array([[4, 6, 9], [12, 15, 0]])
INTS2 = np.array([[6, 4, 3], [8, 10, 7]])


def _lib(lib: Any, name: str) -> Any:
    return getattr(lib, name)


# name -> (input, extra args built per library, differentiable)
def _cases() -> Iterator[tuple[str, np.ndarray, Any, bool]]:
    unary = ["abs_", "acos_", "arccos_", "arcsin_", "arcsinh_", "arctan_", "arctanh_", "asin_", "asinh_", "atan_",
             "atanh_", "ceil_", "cos_", "cosh_", "deg2rad_", "erf_", "erfc_", "exp2_", "exp_", "expm1_", "fix_",
             "floor_", "frac_", "i0_", "log10_", "log1p_", "log2_", "log_", "logit_", "nan_to_num_", "neg_",
             "negative_", "rad2deg_", "reciprocal_", "relu_", "round_", "rsqrt_", "sigmoid_", "sin_", "sinc_",
             "sinh_", "sqrt_", "square_", "tan_", "tanh_", "trunc_", "zero_"]
    for n in unary:
        yield n, UNIT, lambda lib: (), True
    for n in ("acosh_", "arccosh_"):
        yield n, ABOVE_ONE, lambda lib: (), True
    yield "addmv_", UNIT[:, 0].copy(), lambda lib: (lib.tensor(MAT), lib.tensor(VEC)), True
    yield "clamp_", UNIT, lambda lib: (0.3, 0.6), True
    yield "clip_", UNIT, lambda lib: (0.3, 0.6), True
    yield "clamp_max_", UNIT, lambda lib: (0.5,), True
    yield "clamp_min_", UNIT, lambda lib: (0.5,), True
    yield "xlogy_", UNIT, lambda lib: (lib.tensor(OTHER),), True
    # Non-negative exponents: torch's gradient for a negative integer one is 0 (2 ** -1 in integers).
    yield "ldexp_", UNIT, lambda lib: (lib.tensor(np.array([1, 2, 3, 0])),), True
    yield "fill_", UNIT, lambda lib: (2.5,), True
    yield "gcd_", INTS, lambda lib: (lib.tensor(INTS2),), False
    yield "lcm_", INTS, lambda lib: (lib.tensor(INTS2),), False


CASES = list(_cases())


@pytest.mark.parametrize(("name", "x", "args", "grad"), CASES, ids=[c[0] for c in CASES])
def test_inplace_function(name: str, x: np.ndarray, args: Any, grad: bool) -> None:
    assert name in agrad.__all__
    t, a = torch.tensor(x), agrad.tensor(x)
    v = a._version
    out_t, out_a = _lib(torch, name)(t, *args(torch)), _lib(agrad, name)(a, *args(agrad))
    assert out_a is a and out_t is t
    assert a._version == v + 1
    assert a.dtype.name == str(t.dtype).removeprefix("torch.")
    np.testing.assert_allclose(a.numpy(), t.numpy(), rtol=1e-6, atol=1e-12)
    if not grad:
        return
    lt = torch.tensor(x, requires_grad=True)
    la = agrad.tensor(x, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        _lib(agrad, name)(la, *args(agrad))
    yt, ya = lt * 1, la * 1
    _lib(agrad, name)(ya, *args(agrad)).sum().backward_sync()
    try:
        _lib(torch, name)(yt, *args(torch)).sum().backward()
    except NotImplementedError:  # torch has no derivative for some in-place forms (asinh_): agrad's is asinh's
        return
    assert ya.grad_fn.name() == yt.grad_fn.name()
    np.testing.assert_allclose(la.grad.numpy(), lt.grad.numpy(), rtol=1e-6, atol=1e-12)


def test_fill_node_names() -> None:
    for name, args in (("zero_", ()), ("fill_", (2.0,))):
        yt, ya = torch.ones(2, requires_grad=True) * 1, agrad.ones(2, requires_grad=True) * 1
        assert getattr(agrad, name)(ya, *args).grad_fn.name() == getattr(torch, name)(yt, *args).grad_fn.name()


def test_detach_inplace_function() -> None:
    a = agrad.tensor(UNIT, requires_grad=True)
    y = a * 2
    assert agrad.detach_(y) is y
    assert y.grad_fn is None and not y.requires_grad


def test_inplace_function_refuses_non_tensor() -> None:
    with pytest.raises(TypeError, match=r"exp_\(\): argument 'input' \(position 1\) must be Tensor, not list"):
        agrad.exp_([1.0])
    with pytest.raises(TypeError):
        torch.exp_([1.0])


# -- torch-level forms ---------------------------------------------------------------


def test_detach_fill_and_facts() -> None:
    x = UNIT
    a = agrad.tensor(x, requires_grad=True)
    d = agrad.detach(a)
    assert not d.requires_grad and d._version_counter is a._version_counter and d.data_ptr() == a.data_ptr()
    f, ft = agrad.fill(a, 2.5), torch.fill(torch.tensor(x, requires_grad=True), 2.5)
    assert f.grad_fn.name() == ft.grad_fn.name() == "FillBackward0"
    np.testing.assert_array_equal(f.detach().numpy(), ft.detach().numpy())
    assert agrad.fill(agrad.tensor(INTS), 3).dtype is agrad.int64
    f.sum().backward_sync()
    np.testing.assert_array_equal(a.grad.numpy(), np.zeros_like(x))
    assert agrad.get_device(a) == torch.get_device(torch.tensor(x)) == -1
    assert agrad.is_inference(a) is torch.is_inference(torch.tensor(x)) is False
    with agrad.inference_mode():
        assert agrad.is_inference(agrad.ones(2))
    for dt in ("float32", "int64", "uint8", "bool"):
        assert agrad.is_signed(agrad.zeros(2, dtype=getattr(agrad, dt))) is torch.is_signed(
            torch.zeros(2, dtype=getattr(torch, dt)))


SPLITS = [
    ("split_with_sizes", ([2, 3],), {}),
    ("split_with_sizes", ([1, 1, 2],), {"dim": 1}),
    ("unsafe_split", (2,), {}),
    ("unsafe_chunk", (3,), {"dim": 1}),
    ("unsafe_split_with_sizes", ([4, 1],), {}),
]


@pytest.mark.parametrize(("name", "args", "kwargs"), SPLITS)
def test_splits(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    x = _rng.standard_normal((5, 4))
    g = _rng.standard_normal((5, 4))
    for use_method in (False, True):
        lt, la = torch.tensor(x, requires_grad=True), agrad.tensor(x, requires_grad=True)
        pt = getattr(lt, name)(*args, **kwargs) if use_method else getattr(torch, name)(lt, *args, **kwargs)
        pa = getattr(la, name)(*args, **kwargs) if use_method else getattr(agrad, name)(la, *args, **kwargs)
        assert isinstance(pa, tuple) and len(pa) == len(pt)
        for p, q in zip(pa, pt):
            np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
            assert (p._base is None) == (q._base is None)
        dim = kwargs.get("dim", 0)
        gs = np.split(g, np.cumsum([q.shape[dim] for q in pt])[:-1], axis=dim)
        sum(((q * torch.tensor(s)).sum() for q, s in zip(pt, gs)), torch.zeros(())).backward()
        sum(((p * agrad.tensor(s)).sum() for p, s in zip(pa, gs)), agrad.zeros((), dtype=agrad.float64)).backward_sync()
        np.testing.assert_allclose(la.grad.numpy(), lt.grad.numpy())


def test_unsafe_split_pieces_are_not_views() -> None:
    """Note [Unsafe splits]: the pieces share memory, but in-place writes are not refused."""
    a = agrad.tensor(_rng.standard_normal(6), requires_grad=True)
    y = a * 1
    pieces = agrad.unsafe_split(y, 2)
    assert all(p._base is None for p in pieces)
    assert pieces[1].data_ptr() == y.data_ptr() + 2 * 8
    pieces[0].mul_(2)  # a split() piece would refuse: output of a function returning several views
    with pytest.raises(RuntimeError, match="multiple views"):
        agrad.split(a * 1, 2)[0].mul_(2)


def test_split_with_sizes_errors() -> None:
    x = agrad.ones(5)
    for lib, t in ((torch, torch.ones(5)), (agrad, x)):
        with pytest.raises(TypeError, match="must be int, not list"):
            lib.unsafe_split(t, [2, 3])
    with pytest.raises(RuntimeError, match="split_with_sizes expects split_sizes to sum exactly to 5"):
        agrad.split_with_sizes(x, [2, 2])
    with pytest.raises(TypeError):
        agrad.split_with_sizes(x, 2)
    with pytest.raises(TypeError):
        torch.split_with_sizes(torch.ones(5), 2)


def test_gradcheck_of_splits() -> None:
    x = agrad.tensor(_rng.standard_normal((5, 3)), requires_grad=True)

    def f(t: agrad.Tensor) -> tuple[agrad.Tensor, ...]:
        return agrad.unsafe_split_with_sizes(t, [2, 3])

    assert gradcheck(f, (x,)) and gradgradcheck(f, (x,))


# -- complex helpers on real tensors -----------------------------------------------------


@pytest.mark.parametrize("name", ["conj", "conj_physical", "resolve_conj", "resolve_neg", "real"])
def test_identity_helpers(name: str) -> None:
    for x in (UNIT, INTS):
        a, t = agrad.tensor(x), torch.tensor(x)
        assert getattr(agrad, name)(a) is a and getattr(torch, name)(t) is t
        method = getattr(a, name)
        assert (method if name == "real" else method()) is a
    la = agrad.tensor(UNIT, requires_grad=True)
    y = la * 1
    assert getattr(agrad, name)(y) is y


def test_flags_and_imag() -> None:
    a, t = agrad.tensor(UNIT), torch.tensor(UNIT)
    assert agrad.is_conj(a) is torch.is_conj(t) is False
    assert agrad.is_neg(a) is torch.is_neg(t) is False
    assert a.is_conj() is a.is_neg() is False
    for imag in (lambda x, lib: lib.imag(x), lambda x, lib: x.imag):
        with pytest.raises(RuntimeError, match="imag is not implemented for tensors with non-complex dtypes."):
            imag(t, torch)
        with pytest.raises(RuntimeError, match="imag is not implemented for tensors with non-complex dtypes."):
            imag(a, agrad)


def test_conj_physical_inplace() -> None:
    a = agrad.tensor(UNIT)
    assert agrad.conj_physical_(a) is a and a.conj_physical_() is a
    leaf = agrad.tensor(UNIT, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        agrad.conj_physical_(leaf)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        torch.conj_physical_(torch.tensor(UNIT, requires_grad=True))


@pytest.mark.parametrize("x", [
    np.array([-1.5, 0.0, -0.0, 2.0, np.nan, np.inf, -np.inf]),
    np.array([-3, 0, 4]),
    np.array([True, False]),
    np.float32(-2.0) * np.ones((2, 2), np.float32),
    np.zeros((0, 3)),
])
def test_angle(x: np.ndarray) -> None:
    a, t = agrad.tensor(x), torch.tensor(x)
    for out_a, out_t in ((agrad.angle(a), torch.angle(t)), (a.angle(), t.angle())):
        assert out_a.dtype.name == str(out_t.dtype).removeprefix("torch.")
        np.testing.assert_allclose(out_a.numpy(), out_t.numpy(), rtol=1e-6)


def test_angle_gradient_is_zero() -> None:
    x = np.array([-1.5, 0.5, 2.0])
    la, lt = agrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out_a, out_t = agrad.angle(la), torch.angle(lt)
    assert out_a.grad_fn.name() == out_t.grad_fn.name() == "AngleBackward0"
    out_a.sum().backward_sync()
    out_t.sum().backward()
    np.testing.assert_array_equal(la.grad.numpy(), lt.grad.numpy())


# -- operators ---------------------------------------------------------------------------


def test_pos() -> None:
    for x in (UNIT, INTS):
        a = agrad.tensor(x)
        assert +a is a
    y = agrad.tensor(UNIT, requires_grad=True) * 1
    assert +y is y
    for lib in (torch, agrad):
        with pytest.raises(RuntimeError, match="The `\\+` operator, on a bool tensor is not supported."):
            +lib.tensor([True])


def test_contains() -> None:
    x = np.arange(6.0).reshape(2, 3)
    a, t = agrad.tensor(x), torch.tensor(x)
    for element in (2.0, 7, True, 0):
        assert (element in a) is (element in t)
    assert (agrad.tensor(1.0) in a) is (torch.tensor(1.0) in t) is True
    assert (agrad.tensor([3.0, 4.0, 5.0]) in a) is (torch.tensor([3.0, 4.0, 5.0]) in t) is True
    for bad in ("a", [1]):
        with pytest.raises(RuntimeError, match="Tensor.__contains__ only supports Tensor or scalar"):
            _ = bad in t
        with pytest.raises(RuntimeError, match="Tensor.__contains__ only supports Tensor or scalar"):
            _ = bad in a


def test_reversed() -> None:
    x = np.arange(6.0).reshape(2, 3)
    a, t = agrad.tensor(x), torch.tensor(x)
    np.testing.assert_array_equal(reversed(a).numpy(), reversed(t).numpy())
    s = agrad.tensor(3.0)
    assert reversed(s) is s
    la = agrad.tensor(x, requires_grad=True)
    r = reversed(la)
    assert r.grad_fn.name() == reversed(torch.tensor(x, requires_grad=True)).grad_fn.name()
    (r * agrad.tensor(x)).sum().backward_sync()
    np.testing.assert_array_equal(la.grad.numpy(), x[::-1])


def test_complex() -> None:
    assert complex(agrad.tensor([2.5])) == complex(torch.tensor([2.5])) == 2.5 + 0j
    assert complex(agrad.tensor(3)) == 3 + 0j
    for lib in (torch, agrad):
        with pytest.raises(ValueError, match="only one element tensors can be converted to Python scalars"):
            complex(lib.ones(2))


# -- global flags ------------------------------------------------------------------------


@pytest.fixture
def restore_flags() -> Iterator[None]:
    yield
    agrad.use_deterministic_algorithms(False)
    agrad.set_float32_matmul_precision("highest")
    agrad.set_warn_always(False)
    agrad.set_anomaly_enabled(False)


def test_deterministic_flags(restore_flags: None) -> None:
    assert agrad.are_deterministic_algorithms_enabled() is False
    assert agrad.get_deterministic_debug_mode() == 0
    agrad.use_deterministic_algorithms(True, warn_only=True)
    assert agrad.are_deterministic_algorithms_enabled() and agrad.is_deterministic_algorithms_warn_only_enabled()
    assert agrad.get_deterministic_debug_mode() == 1
    agrad.use_deterministic_algorithms(False)
    assert agrad.get_deterministic_debug_mode() == 0 and not agrad.is_deterministic_algorithms_warn_only_enabled()
    for mode, level, enabled, warn_only in [("warn", 1, True, True), ("error", 2, True, False),
                                            ("default", 0, False, False), (2, 2, True, False), (0, 0, False, False)]:
        agrad.set_deterministic_debug_mode(mode)
        assert agrad.get_deterministic_debug_mode() == level
        assert agrad.are_deterministic_algorithms_enabled() is enabled
        assert agrad.is_deterministic_algorithms_warn_only_enabled() is warn_only
    with pytest.raises(RuntimeError, match="expected one of `default`, `warn`, `error`, but got bad"):
        agrad.set_deterministic_debug_mode("bad")
    with pytest.raises(RuntimeError, match="expected 0, 1, or 2, but got 3"):
        agrad.set_deterministic_debug_mode(3)
    with pytest.raises(TypeError, match="debug_mode must be str or int"):
        agrad.set_deterministic_debug_mode(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        agrad.use_deterministic_algorithms("x")  # type: ignore[arg-type]


def test_matmul_precision(restore_flags: None) -> None:
    assert agrad.get_float32_matmul_precision() == torch.get_float32_matmul_precision() == "highest"
    for p in ("high", "medium", "highest"):
        agrad.set_float32_matmul_precision(p)
        assert agrad.get_float32_matmul_precision() == p
    agrad.set_float32_matmul_precision("medium")
    with pytest.warns(UserWarning, match="low is not one of 'highest', 'high', or 'medium'"):
        agrad.set_float32_matmul_precision("low")
    assert agrad.get_float32_matmul_precision() == "medium"
    with pytest.raises(RuntimeError, match="set_float32_matmul_precision expects a str, but got int"):
        agrad.set_float32_matmul_precision(1)  # type: ignore[arg-type]


def test_warn_always_and_flush_denormal(restore_flags: None) -> None:
    assert agrad.is_warn_always_enabled() is False
    agrad.set_warn_always(True)
    assert agrad.is_warn_always_enabled() is True
    assert agrad.set_flush_denormal(True) is False  # numpy cannot set the FPU's mode
    assert agrad.set_flush_denormal(False) is False


def test_set_anomaly_enabled(restore_flags: None) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # like set_detect_anomaly, it does not warn
        assert agrad.set_anomaly_enabled(True) is None
    assert agrad.is_anomaly_enabled() and agrad.is_anomaly_check_nan_enabled()
    agrad.set_anomaly_enabled(True, False)
    assert not agrad.is_anomaly_check_nan_enabled()
    agrad.set_anomaly_enabled(False)
    assert not agrad.is_anomaly_enabled() and agrad.is_anomaly_check_nan_enabled()
