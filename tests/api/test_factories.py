"""Factories, random draws, dtype helpers, printing and the Tensor methods that
are not ops, each against PyTorch (the oracle) where it is installed.

Deterministic factories are compared value for value; random ones by what a
seed makes certain (reproducibility, shapes, dtypes, supports, node names,
zero gradients) and by statistics of many draws from a fixed seed, so no test
depends on luck.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import agrad
from agrad import _backends
from tests.helpers import requires_torch, torch


def _name(d: Any) -> str:
    return str(d).split(".")[-1]


def _same(ours: agrad.Tensor, theirs: Any, **tol: float) -> None:
    """Same shape, dtype and values (exactly unless tolerances are given)."""
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert _name(ours.dtype) == _name(theirs.dtype)
    expected = theirs.detach().float().numpy() if theirs.dtype == torch.bfloat16 else theirs.detach().numpy()
    got = ours.detach().float().numpy() if ours.dtype is agrad.bfloat16 else ours.detach().numpy()
    if tol:
        np.testing.assert_allclose(got, expected, **tol)
    else:
        np.testing.assert_array_equal(got, expected)


def _raises_like_torch(fn: Callable[[Any], Any]) -> None:
    """``fn(lib)`` raises the same exception type in both, with PyTorch's message
    (``torch`` spelled ``agrad``)."""
    with pytest.raises(Exception) as theirs:
        fn(torch)
    with pytest.raises(type(theirs.value)) as ours:
        fn(agrad)
    assert str(ours.value) == str(theirs.value).replace("torch.", "agrad.").replace("torch::", "agrad::")


@pytest.fixture
def default_print_options() -> Iterator[None]:
    yield
    agrad.set_printoptions(profile="default")
    if torch is not None:
        torch.set_printoptions(profile="default")


# -- deterministic factories ---------------------------------------------------------------


@requires_torch
@pytest.mark.parametrize("call", [
    lambda lib: lib.logspace(0, 2, 3),
    lambda lib: lib.logspace(-1.5, 3.25, 7, dtype=lib.float64),
    lambda lib: lib.logspace(0, 2, 3, base=2),
    lambda lib: lib.logspace(0.1, 2.3, 5, dtype=lib.int32),
    lambda lib: lib.logspace(0, 2, 3, dtype=lib.int64),
    lambda lib: lib.logspace(0, 1, 1),
    lambda lib: lib.logspace(2, 0, 0),
    lambda lib: lib.scalar_tensor(1),
    lambda lib: lib.scalar_tensor(True),
    lambda lib: lib.scalar_tensor(2.5, dtype=lib.float64),
    lambda lib: lib.scalar_tensor(7, dtype=lib.int32),
    lambda lib: lib.scalar_tensor(lib.tensor(2.0)),
    lambda lib: lib.empty_strided((2, 3), (1, 2)).fill_(1.5),
    lambda lib: lib.empty_strided((0, 3), (3, 1), dtype=lib.int64),
], ids=["logspace", "logspace-f64", "logspace-base", "logspace-int-truncated", "logspace-int", "logspace-1",
        "logspace-0", "scalar_tensor-int", "scalar_tensor-bool", "scalar_tensor-f64", "scalar_tensor-int32",
        "scalar_tensor-tensor", "empty_strided", "empty_strided-empty"])
def test_factories_match_torch(call: Callable[[Any], Any]) -> None:
    _same(call(agrad), call(torch), rtol=1e-6, atol=0)


@requires_torch
def test_empty_strided_honours_strides() -> None:
    t = agrad.empty_strided((2, 3), (1, 2), dtype=agrad.float64)
    assert t.stride() == torch.empty_strided((2, 3), (1, 2)).stride() == (1, 2)
    assert not t.is_contiguous() and t.storage_offset() == 0
    assert agrad.empty_strided((2, 3), (0, 0)).stride() == (0, 0)
    assert agrad.empty_strided((4,), (2,), requires_grad=True).requires_grad


@requires_torch
@pytest.mark.parametrize("call", [
    lambda lib: lib.empty_strided((2, 3), (1, -2)),
    lambda lib: lib.empty_strided((2, 3), (1,)),
    lambda lib: lib.logspace(0, 1, -1),
    lambda lib: lib.randperm(-1),
    lambda lib: lib.randperm(3, dtype=lib.bool),
    lambda lib: lib.randperm(300, dtype=lib.int8),
    lambda lib: lib.randint_like(lib.ones(3), 5, 5),
    lambda lib: lib.randint_like(lib.ones(2, dtype=lib.uint8), 300),
    lambda lib: lib.randint_like(lib.ones(2, dtype=lib.int8), -200, 3),
    lambda lib: lib.randint_like(lib.ones(2, dtype=lib.int64), 5, requires_grad=True),
    lambda lib: lib.randperm(3, requires_grad=True),
    lambda lib: lib.range(4, 1),
    lambda lib: lib.range(0, 1, 0),
])
def test_factory_errors_match_torch(call: Callable[[Any], Any]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # range's deprecation
        _raises_like_torch(call)


@requires_torch
@pytest.mark.parametrize(("args", "kwargs"), [
    ((1, 4), {}), ((0, 1, 0.25), {}), ((1, 4), {"dtype": "int64"}), ((0, 10, 3), {"dtype": "int32"}),
    ((5, -1, -2.5), {}), ((0, 1, 0.3), {"dtype": "float64"}),
])
def test_range_is_inclusive_and_deprecated_as_in_torch(args: tuple, kwargs: dict) -> None:
    with pytest.warns(UserWarning, match="torch.range is deprecated"):
        expected = torch.range(*args, **{k: getattr(torch, v) for k, v in kwargs.items()})
    with pytest.warns(UserWarning, match="agrad.range is deprecated") as record:
        got = agrad.range(*args, **{k: getattr(agrad, v) for k, v in kwargs.items()})
    assert record[0].filename == __file__  # the warning points at the caller
    _same(got, expected, rtol=1e-6, atol=1e-7)


@requires_torch
@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
                                  "kaiser_window"])
@pytest.mark.parametrize("n", [0, 1, 2, 5, 8, 33])
@pytest.mark.parametrize("periodic", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_windows_match_torch(name: str, n: int, periodic: bool, dtype: str) -> None:
    expected = getattr(torch, name)(n, periodic, dtype=getattr(torch, dtype))
    got = getattr(agrad, name)(n, periodic, dtype=getattr(agrad, dtype))
    _same(got, expected, rtol=2e-6 if dtype == "float32" else 1e-12, atol=2e-7 if dtype == "float32" else 1e-14)


@requires_torch
def test_window_parameters_and_errors_match_torch() -> None:
    _same(agrad.hamming_window(7, False, 0.5, 0.4), torch.hamming_window(7, False, 0.5, 0.4), rtol=1e-6, atol=1e-7)
    _same(agrad.kaiser_window(9, True, 5.0), torch.kaiser_window(9, True, 5.0), rtol=1e-5, atol=1e-7)
    assert agrad.hann_window(3, requires_grad=True).requires_grad
    _raises_like_torch(lambda lib: lib.hann_window(-1))
    _raises_like_torch(lambda lib: lib.bartlett_window(4, dtype=lib.int64))


# -- asarray --------------------------------------------------------------------------------


def test_asarray_shares_memory_where_it_can() -> None:
    t = agrad.ones(3)
    assert agrad.asarray(t) is t
    assert agrad.asarray(t, copy=True).data_ptr() != t.data_ptr()
    a = np.zeros(3)
    shared = agrad.asarray(a)
    shared[0] = 5.0
    assert a[0] == 5.0 and shared.dtype is agrad.float64
    copied = agrad.asarray(a, copy=True)
    copied[1] = 7.0
    assert a[1] == 0.0
    assert agrad.asarray(a, dtype=agrad.float32).dtype is agrad.float32
    assert agrad.asarray([1.0, 2]).dtype is agrad.float32 and agrad.asarray(3).dtype is agrad.int64
    assert agrad.asarray(np.float64(2.5)).dtype is agrad.float64


@requires_torch
@pytest.mark.parametrize("call", [
    lambda lib: lib.asarray(lib.ones(3), dtype=lib.float64, copy=False),
    lambda lib: lib.asarray(np.ones(3), dtype=lib.float32, copy=False),
    lambda lib: lib.asarray([1, 2], copy=False),
    lambda lib: lib.asarray([1, 2], requires_grad=True),
    lambda lib: lib.asarray("abc"),
])
def test_asarray_errors_match_torch(call: Callable[[Any], Any]) -> None:
    _raises_like_torch(call)


def test_asarray_of_a_tensor_that_requires_grad() -> None:
    x = agrad.ones(3, requires_grad=True)
    with pytest.warns(UserWarning, match="unspecified requires_grad"):
        assert agrad.asarray(x) is x
    assert not agrad.asarray(x, requires_grad=False).requires_grad
    with pytest.warns(UserWarning, match="unspecified requires_grad"):
        assert agrad.asarray(x, dtype=agrad.float64).grad_fn.name() == "ToCopyBackward0"
    assert agrad.asarray(x, copy=True, requires_grad=True).grad_fn.name() == "CloneBackward0"
    t = agrad.ones(2)
    assert agrad.asarray(t, requires_grad=True) is t and t.requires_grad


# -- Tensor.new_* ---------------------------------------------------------------------------


@requires_torch
@pytest.mark.parametrize("call", [
    lambda lib, x: x.new_zeros(2, 3),
    lambda lib, x: x.new_zeros((2,)),
    lambda lib, x: x.new_zeros([]),
    lambda lib, x: x.new_zeros(2, dtype=lib.int32),
    lambda lib, x: x.new_ones(2, requires_grad=True),
    lambda lib, x: x.new_ones((1, 2), dtype=lib.bool),
    lambda lib, x: x.new_full((2,), 3),
    lambda lib, x: x.new_full((2, 1), True),
    lambda lib, x: x.new_empty(2, 3).fill_(0),
    lambda lib, x: x.new_empty((2,), dtype=lib.int8).fill_(1),
    lambda lib, x: x.new_tensor([1, 2]),
    lambda lib, x: x.new_tensor(3, dtype=lib.int8),
    lambda lib, x: x.new_tensor([[0.5, 1.5]], requires_grad=True),
    lambda lib, x: x.int().new_tensor([1.5]),
])
def test_new_factories_take_dtype_and_device_from_self(call: Callable[[Any, Any], Any]) -> None:
    got = call(agrad, agrad.ones(2, 3, dtype=agrad.float64))
    expected = call(torch, torch.ones(2, 3, dtype=torch.float64))
    _same(got, expected)
    assert got.requires_grad == expected.requires_grad and got.is_leaf


@requires_torch
def test_new_tensor_of_a_tensor_warns_and_copies() -> None:
    x = agrad.ones(2)
    src = agrad.tensor([1.0, 2.0], requires_grad=True)
    with pytest.warns(UserWarning, match="sourceTensor.detach"):
        out = x.new_tensor(src)
    assert not out.requires_grad and out.data_ptr() != src.data_ptr()
    assert out.tolist() == [1.0, 2.0]


@requires_torch
@pytest.mark.parametrize("call", [
    lambda lib: lib.ones(2).new_full(2, 3),
    lambda lib: lib.ones(2).new_full((2,), 1e300),
    lambda lib: lib.ones(2, dtype=lib.int8).new_full((2,), 300),
    lambda lib: lib.ones(2).new_zeros(-1),
    lambda lib: lib.ones(2).new_zeros((2,), requires_grad=True, dtype=lib.int64),
])
def test_new_factory_errors_match_torch(call: Callable[[Any], Any]) -> None:
    _raises_like_torch(call)


# -- casts by name, and what a tensor is ----------------------------------------------------


@requires_torch
@pytest.mark.parametrize("call", [
    lambda lib, x: x.byte(), lambda lib, x: x.char(), lambda lib, x: x.short(), lambda lib, x: x.bfloat16(),
    lambda lib, x: x.type(lib.float32), lambda lib, x: x.type(dtype=lib.int8),
    lambda lib, x: x.type(f"{lib.__name__}.IntTensor"), lambda lib, x: x.type(f"{lib.__name__}.BFloat16Tensor"),
    lambda lib, x: x.type_as(lib.ones(1, dtype=lib.int16)), lambda lib, x: x.type_as(lib.ones(1)),
], ids=["byte", "char", "short", "bfloat16", "type-dtype", "type-kw", "type-name", "type-bf16-name", "type_as-int",
        "type_as-float"])
def test_casts_by_name_match_torch(call: Callable[[Any, Any], Any]) -> None:
    values = np.array([[1.5, -2.0, 3.25], [0.0, 100.0, -7.5]])
    _same(call(agrad, agrad.tensor(values)), call(torch, torch.tensor(values)))


@requires_torch
def test_type_names_and_casts() -> None:
    x = agrad.ones(2, 3, dtype=agrad.float64)
    assert x.type() == "agrad.DoubleTensor" == torch.ones(1, dtype=torch.float64).type().replace("torch", "agrad")
    for name in ("float16", "bfloat16", "int8", "uint8", "int64", "bool"):
        ours = agrad.ones(1, dtype=getattr(agrad, name)).type()
        assert ours == torch.ones(1, dtype=getattr(torch, name)).type().replace("torch", "agrad")
    assert x.type(agrad.float64) is x and x.type("agrad.DoubleTensor") is x
    assert x.type("torch.FloatTensor").dtype is agrad.float32  # PyTorch's spelling is read too
    assert agrad.typename(x) == "agrad.DoubleTensor"
    with pytest.raises(ValueError, match="invalid type: 'float'"):
        x.type("float")
    with pytest.raises(ValueError, match="invalid type"):
        x.type("agrad.NoSuchTensor")
    y = agrad.ones(3, requires_grad=True)
    assert y.type(agrad.float64).grad_fn.name() == "ToCopyBackward0"


@requires_torch
@pytest.mark.parametrize("make", [
    lambda lib: lib.ones(2, 3, dtype=lib.float64),
    lambda lib: lib.ones(2, 3).t(),
    lambda lib: lib.ones(4, 3)[1:, 1:],
    lambda lib: lib.ones(4, 3)[1:, 1:][1:],
    lambda lib: lib.ones(4, 6)[:, ::2],
    lambda lib: lib.ones(2, 3)[1],
    lambda lib: lib.ones(3).expand(2, 3),
    lambda lib: lib.ones(0, 3),
    lambda lib: lib.ones(2, 0, 3),
    lambda lib: lib.tensor(1.0),
    lambda lib: lib.ones(2, 1, 3, dtype=lib.int16).permute(2, 0, 1),
    lambda lib: lib.ones(2, 3, 4, 5).permute(0, 2, 3, 1),
    lambda lib: lib.ones(3, 1).expand(3, 4).t(),
    lambda lib: lib.arange(24).reshape(2, 3, 4).transpose(0, 2),
    lambda lib: lib.ones(3, dtype=lib.bfloat16),
    lambda lib: lib.ones(5, dtype=lib.uint8)[2:],
], ids=["f64", "t", "slice", "slice-slice", "step", "row", "expand", "empty", "empty-3d", "0d", "permute",
        "channels-last", "expand-t", "transpose", "bf16", "uint8-slice"])
def test_tensor_facts_match_torch(make: Callable[[Any], Any]) -> None:
    ours, theirs = make(agrad), make(torch)
    assert ours.stride() == theirs.stride()
    assert [ours.stride(d) for d in range(-ours.ndim, ours.ndim)] == [theirs.stride(d) for d in
                                                                        range(-theirs.ndim, theirs.ndim)]
    assert ours.storage_offset() == theirs.storage_offset()
    assert ours.dim_order() == theirs.dim_order()
    for attr in ("itemsize", "nbytes"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr
    for method in ("element_size", "nelement", "ndimension", "is_complex", "is_signed", "get_device",
                   "is_inference"):
        assert getattr(ours, method)() == getattr(theirs, method)(), method
    assert ours.is_same_size(make(agrad)) and not ours.is_same_size(agrad.ones(7, 7, 7))
    assert agrad.numel(ours) == torch.numel(theirs)
    assert agrad.is_floating_point(ours) == torch.is_floating_point(theirs)
    if ours.dtype is not agrad.bfloat16:  # Tensor.is_floating_point: see tests/ops/test_bfloat16.py
        assert ours.is_floating_point() == theirs.is_floating_point()
    assert agrad.is_complex(ours) is False
    assert agrad.is_same_size(ours, make(agrad))


@requires_torch
@pytest.mark.parametrize("call", [
    lambda lib: lib.ones(3, 3).stride(2),
    lambda lib: lib.ones(3, 3).stride(-3),
    lambda lib: lib.ones(2).is_nonzero(),
    lambda lib: lib.is_nonzero(lib.ones(0)),
    lambda lib: lib.is_nonzero(1),
    lambda lib: lib.numel([1]),
    lambda lib: lib.is_floating_point(2.0),
    lambda lib: lib.is_complex(3),
    lambda lib: lib.ones(2).is_same_size(2),
    lambda lib: lib.ones(3).mH,
    lambda lib: lib.ones(3).mT,
    lambda lib: lib.ones(3).H,
    lambda lib: lib.ones(2, 3, 4).H,
])
def test_tensor_fact_errors_match_torch(call: Callable[[Any], Any]) -> None:
    _raises_like_torch(call)


@requires_torch
def test_is_nonzero_matches_torch() -> None:
    for value in ([0.0], [0.5], [[3]], [False], 0.0, -1):
        assert agrad.tensor(value).is_nonzero() == torch.tensor(value).is_nonzero()
        assert agrad.is_nonzero(agrad.tensor(value)) == torch.is_nonzero(torch.tensor(value))


@requires_torch
@pytest.mark.parametrize("attr", ["H", "mH", "mT"])
@pytest.mark.parametrize("shape", [(2, 3), (4, 2, 3), (1, 2, 2, 5)])
def test_conjugate_transposes_match_torch(attr: str, shape: tuple[int, ...]) -> None:
    if attr == "H" and len(shape) != 2:
        return
    values = np.random.default_rng(0).standard_normal(shape)
    x, tx = agrad.tensor(values, requires_grad=True), torch.tensor(values, requires_grad=True)
    out, expected = getattr(x, attr), getattr(tx, attr)
    _same(out, expected)
    assert out.grad_fn.name() == expected.grad_fn.name()
    g = np.random.default_rng(1).standard_normal(tuple(expected.shape))
    out.backward_sync(agrad.tensor(g))
    expected.backward(torch.tensor(g))
    _same(x.grad, tx.grad)


def test_conjugate_transposes_of_a_0d_tensor_warn() -> None:
    x = agrad.tensor(2.0)
    for attr in ("H", "mH"):
        with pytest.warns(UserWarning, match=f"Tensor.{attr} is deprecated on 0-D tensors"):
            assert getattr(x, attr) is x


# -- apply_, map_, fill_diagonal_ ------------------------------------------------------------


@requires_torch
@pytest.mark.parametrize("call", [
    lambda lib: lib.arange(6.0).reshape(2, 3).apply_(lambda v: v * v - 1),
    lambda lib: lib.ones(3, dtype=lib.int64).apply_(lambda v: v * 2.7),
    lambda lib: lib.tensor([True, False]).apply_(lambda v: not v),
    lambda lib: lib.ones(2, 3).map_(lib.arange(3.0), lambda a, b: a + b),
    lambda lib: lib.arange(4.0).map_(lib.tensor([1.0, 0.0, 2.0, 0.5]), max),
    lambda lib: lib.zeros(0).apply_(lambda v: 1 / v),
])
def test_apply_and_map_match_torch(call: Callable[[Any], Any]) -> None:
    _same(call(agrad), call(torch))


def test_apply_writes_in_place_and_bumps_the_version() -> None:
    x = agrad.ones(3)
    before = x._version
    assert x.apply_(lambda v: v + 1) is x
    assert x.tolist() == [2.0, 2.0, 2.0] and x._version == before + 1
    base = agrad.zeros(4)
    base[1:3].apply_(lambda v: 9.0)
    assert base.tolist() == [0.0, 9.0, 9.0, 0.0]


@requires_torch
@pytest.mark.parametrize("call", [
    lambda lib: lib.ones(3, requires_grad=True).apply_(lambda v: v),
    lambda lib: (lib.ones(3, requires_grad=True) * 1).apply_(lambda v: v),
    lambda lib: lib.ones(3).map_(lib.ones(3, dtype=lib.int64), lambda a, b: a),
    lambda lib: lib.ones(3, requires_grad=True).map_(lib.ones(3), lambda a, b: a),
])
def test_apply_and_map_errors_match_torch(call: Callable[[Any], Any]) -> None:
    _raises_like_torch(call)


def test_map_refuses_a_tensor_that_does_not_broadcast() -> None:
    with pytest.raises(RuntimeError, match=r"map_.*\[2\].*\[3\]"):
        agrad.ones(3).map_(agrad.ones(2), lambda a, b: a)


@requires_torch
@pytest.mark.parametrize(("shape", "value", "wrap"), [
    ((3, 3), 2.0, False), ((7, 3), 2.0, True), ((7, 3), 2.0, False), ((3, 7), 5.0, True), ((3, 3, 3), -1.0, False),
    ((4, 4), 0.0, False), ((9, 2), 1.0, True), ((8, 3), 4.0, True), ((1, 1), 3.0, True), ((0, 0), 1.0, False),
])
def test_fill_diagonal_matches_torch(shape: tuple[int, ...], value: float, wrap: bool) -> None:
    values = np.random.default_rng(0).standard_normal(shape)
    x, tx = agrad.tensor(values, requires_grad=True), torch.tensor(values, requires_grad=True)
    out, expected = (x * 1).fill_diagonal_(value, wrap=wrap), (tx * 1).fill_diagonal_(value, wrap=wrap)
    _same(out, expected)
    if values.size and (not wrap or shape[0] <= shape[-1] + 1):
        assert out.grad_fn.name().rsplit("::", 1)[-1] == expected.grad_fn.name().rsplit("::", 1)[-1]
    (out * out).sum().backward_sync()
    (expected * expected).sum().backward()
    _same(x.grad, tx.grad)


@requires_torch
def test_fill_diagonal_of_a_transposed_and_an_integer_tensor() -> None:
    _same(agrad.zeros(3, 2).t().fill_diagonal_(1), torch.zeros(3, 2).t().fill_diagonal_(1))
    _same(agrad.zeros(3, 3, dtype=agrad.int32).fill_diagonal_(7),
          torch.zeros(3, 3, dtype=torch.int32).fill_diagonal_(7))


@requires_torch
@pytest.mark.parametrize("call", [
    lambda lib: lib.ones(3).fill_diagonal_(2),
    lambda lib: lib.ones(2, 3, 3).fill_diagonal_(2),
    lambda lib: lib.zeros(3, 3, dtype=lib.int8).fill_diagonal_(300),
    lambda lib: lib.ones(3, 3, requires_grad=True).fill_diagonal_(0),
])
def test_fill_diagonal_errors_match_torch(call: Callable[[Any], Any]) -> None:
    _raises_like_torch(call)


# -- dtype helpers ---------------------------------------------------------------------------

_DTYPES = ["float16", "float32", "float64", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool"]


@requires_torch
@pytest.mark.parametrize("name", ["float16", "float32", "float64", "bfloat16"])
def test_finfo_matches_torch(name: str) -> None:
    ours, theirs = agrad.finfo(getattr(agrad, name)), torch.finfo(getattr(torch, name))
    for attr in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr
        assert type(getattr(ours, attr)) is type(getattr(theirs, attr)), attr
    assert repr(ours) == repr(theirs) and str(ours) == str(theirs)
    assert ours == agrad.finfo(getattr(agrad, name))


@requires_torch
@pytest.mark.parametrize("name", ["int8", "int16", "int32", "int64", "uint8"])
def test_iinfo_matches_torch(name: str) -> None:
    ours, theirs = agrad.iinfo(getattr(agrad, name)), torch.iinfo(getattr(torch, name))
    for attr in ("bits", "max", "min", "dtype"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr
    assert repr(ours) == repr(theirs)


@requires_torch
def test_finfo_defaults_and_python_types_match_torch() -> None:
    assert repr(agrad.finfo()) == repr(torch.finfo())
    assert agrad.finfo(float).dtype == torch.finfo(float).dtype == "float64"
    assert agrad.iinfo(int).dtype == torch.iinfo(int).dtype
    agrad.set_default_dtype(agrad.float64)
    try:
        assert agrad.finfo().dtype == "float64"
    finally:
        agrad.set_default_dtype(agrad.float32)


@requires_torch
@pytest.mark.parametrize("call", [
    lambda lib: lib.finfo(lib.int32),
    lambda lib: lib.iinfo(lib.float32),
    lambda lib: lib.iinfo(lib.bool),
    lambda lib: lib.finfo("float32"),
])
def test_dtype_info_errors_match_torch(call: Callable[[Any], Any]) -> None:
    _raises_like_torch(call)


@requires_torch
@pytest.mark.parametrize("a", _DTYPES)
@pytest.mark.parametrize("b", _DTYPES)
def test_promote_types_and_can_cast_match_torch(a: str, b: str) -> None:
    ours = agrad.promote_types(getattr(agrad, a), getattr(agrad, b))
    assert ours.name == _name(torch.promote_types(getattr(torch, a), getattr(torch, b)))
    assert agrad.can_cast(getattr(agrad, a), getattr(agrad, b)) == torch.can_cast(getattr(torch, a),
                                                                                   getattr(torch, b))


@requires_torch
@pytest.mark.parametrize("pair", [
    lambda lib: (lib.ones(2, dtype=lib.int32), 2.5),
    lambda lib: (2, 2.5),
    lambda lib: (2, lib.ones(2, dtype=lib.int8)),
    lambda lib: (lib.ones(2), lib.ones(2)),
    lambda lib: (lib.tensor(1.0, dtype=lib.float64), lib.ones(2)),
    lambda lib: (True, False),
    lambda lib: (2, 3),
    lambda lib: (lib.ones(2, dtype=lib.uint8), lib.tensor(1, dtype=lib.int8)),
    lambda lib: (lib.ones(2, dtype=lib.bfloat16), lib.ones(2, dtype=lib.float16)),
    lambda lib: (lib.ones(2, dtype=lib.bfloat16), 3),
    lambda lib: (lib.ones(2, dtype=lib.bool), 1.5),
])
def test_result_type_matches_torch(pair: Callable[[Any], tuple[Any, Any]]) -> None:
    assert agrad.result_type(*pair(agrad)).name == _name(torch.result_type(*pair(torch)))


def test_result_type_refuses_other_objects() -> None:
    with pytest.raises(TypeError, match=r"result_type\(\) received an invalid combination of arguments - got \(str"):
        agrad.result_type("a", 3)


@requires_torch
def test_dtype_attributes_match_torch() -> None:
    for name in _DTYPES:
        ours, theirs = getattr(agrad, name), getattr(torch, name)
        for attr in ("is_floating_point", "is_complex", "is_signed", "itemsize"):
            assert getattr(ours, attr) == getattr(theirs, attr), (name, attr)
    assert agrad.short is agrad.int16


@requires_torch
def test_typename_and_is_storage_match_torch() -> None:
    for obj in (3, int, 2.5, np.zeros(1), "s", pytest):
        assert agrad.typename(obj) == torch.typename(obj)
    assert agrad.typename(agrad.ones(2)) == torch.typename(torch.ones(2)).replace("torch", "agrad")
    assert agrad.is_storage(agrad.ones(2)) is torch.is_storage(torch.ones(2)) is False


# -- printing --------------------------------------------------------------------------------

_PRINTED = [
    np.array(1.5), np.array(3), np.array([1.0, 2.0]), np.array([1e-5, 1.0]), np.array([0.0, -0.0, np.nan, np.inf]),
    np.array([1, -20, 300]), np.array([True, False]), np.random.default_rng(0).standard_normal((3, 4)),
    np.random.default_rng(1).standard_normal((2, 3, 4)) * 1e5, np.arange(2000.0).reshape(40, 50), np.arange(1500),
    np.random.default_rng(2).standard_normal((5, 300)), np.zeros((0, 3)), np.zeros(0), np.array([123456789.0, 1.0]),
    np.arange(30).reshape(2, 3, 5), np.random.default_rng(3).standard_normal((7, 8, 9)),
]
_OPTIONS = [
    {}, {"precision": 2}, {"threshold": 5}, {"edgeitems": 1, "threshold": 10}, {"linewidth": 40},
    {"sci_mode": True}, {"sci_mode": False}, {"profile": "short"}, {"profile": "full"},
    {"edgeitems": 0, "threshold": 3}, {"precision": 8, "linewidth": 120},
]


@requires_torch
@pytest.mark.usefixtures("default_print_options")
@pytest.mark.parametrize("options", _OPTIONS, ids=[str(o) for o in _OPTIONS])
@pytest.mark.parametrize("dtype", [None, "float32", "float64", "float16", "bfloat16", "int32", "uint8"])
def test_repr_follows_print_options_as_torch(options: dict, dtype: str | None) -> None:
    agrad.set_printoptions(**options)
    torch.set_printoptions(**options)
    for values in _PRINTED:
        theirs = torch.tensor(values)
        ours = agrad.tensor(values)
        if dtype is not None:
            if values.dtype.kind == "f" and not np.all(np.isfinite(values)) and dtype in ("int32", "uint8"):
                continue
            if dtype == "float16" and np.abs(values).max(initial=0) > 65504:
                continue  # casting to float16 overflows (silently in PyTorch; agrad's cast warns)
            theirs = theirs.to(getattr(torch, dtype))
            ours = ours.to(getattr(agrad, dtype))
        assert repr(ours) == repr(theirs).replace("torch.", "agrad."), values


@requires_torch
@pytest.mark.usefixtures("default_print_options")
def test_repr_suffixes_wrap_as_torch() -> None:
    values = np.random.default_rng(0).standard_normal((2, 9))
    for options in ({}, {"linewidth": 60}, {"precision": 6}):
        agrad.set_printoptions(**options)
        torch.set_printoptions(**options)
        ours = agrad.tensor(values, dtype=agrad.float64, requires_grad=True) * 2
        theirs = torch.tensor(values, dtype=torch.float64, requires_grad=True) * 2
        assert repr(ours) == repr(theirs).replace("torch.", "agrad.")
        leaf, torch_leaf = ours.detach().requires_grad_(), theirs.detach().requires_grad_()
        assert repr(leaf) == repr(torch_leaf).replace("torch.", "agrad.")


@requires_torch
@pytest.mark.usefixtures("default_print_options")
def test_set_printoptions_resets_sci_mode_and_ignores_unknown_profiles() -> None:
    for lib in (agrad, torch):
        lib.set_printoptions(sci_mode=True, precision=3)
        lib.set_printoptions(precision=2)  # sci_mode left out: back to automatic
        lib.set_printoptions(profile="no such profile")
    assert repr(agrad.tensor([1.2345, 2.0])) == repr(torch.tensor([1.2345, 2.0])) == "tensor([1.23, 2.00])"


def test_repr_of_a_tensor_on_another_device_copies_only_its_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.devices.fake_backend import FakeBackend

    _backends.register_backend(FakeBackend())
    try:
        host = agrad.arange(5000.0).reshape(50, 100)
        on_fake = host.to("fake:0")
        copied: list[tuple[int, ...]] = []
        real = _backends.transfer

        def watch(array: Any, dst: Any) -> Any:
            copied.append(tuple(array.shape))
            return real(array, dst)

        monkeypatch.setattr("agrad._repr.transfer", watch)
        text = repr(on_fake)
        assert copied == [(6, 6)]
        assert text == repr(host)[:-1] + ", device='fake:0')"
    finally:
        _backends.unregister_backend("fake")


# -- the default device ------------------------------------------------------------------------


def test_default_device_places_factories() -> None:
    from tests.devices.fake_backend import FakeBackend

    _backends.register_backend(FakeBackend())
    try:
        agrad.set_default_device("fake:1")
        assert str(agrad.get_default_device()) == "fake:1"
        for t in (agrad.zeros(2), agrad.tensor([1.0]), agrad.rand(3), agrad.arange(3), agrad.normal(0.0, 1.0, (2,)),
                  agrad.scalar_tensor(1), agrad.asarray([1, 2])):
            assert str(t.device) == "fake:1"
        cpu = agrad.ones(2, device="cpu")
        assert cpu.device.type == "cpu"  # an explicit device wins
        assert agrad.zeros_like(cpu).device.type == "cpu" and cpu.new_zeros(2).device.type == "cpu"
        assert agrad.from_numpy(np.zeros(2)).device.type == "cpu"
        assert "device='cpu'" not in repr(cpu)  # printing does not follow the default device, as in PyTorch
    finally:
        agrad.set_default_device(None)
        _backends.unregister_backend("fake")
    assert agrad.get_default_device() == agrad.device("cpu")
    assert agrad.zeros(1).device.type == "cpu"


def test_set_default_device_refuses_an_unavailable_device() -> None:
    with pytest.raises(RuntimeError, match="Expected one of"):
        agrad.set_default_device("nosuchdevice")
    assert agrad.get_default_device().type == "cpu"
    agrad.set_default_device("cpu")
    assert agrad.get_default_device().type == "cpu"


# -- seeds and generators ----------------------------------------------------------------------


def test_seeds_match_torch_semantics() -> None:
    state = agrad.get_rng_state()
    try:
        assert agrad.manual_seed(-1).initial_seed() == 2**64 - 1  # as torch.manual_seed(-1)
        assert agrad.manual_seed(3).initial_seed() == agrad.initial_seed() == agrad.random.initial_seed() == 3
        a = agrad.rand(4)
        agrad.manual_seed(3)
        assert agrad.rand(4).tolist() == a.tolist()
        s = agrad.seed()
        assert agrad.initial_seed() == s and 0 <= s < 2**64
        b = agrad.rand(4)
        agrad.manual_seed(s)
        assert agrad.rand(4).tolist() == b.tolist()
        for bad in (2**64, -(2**63) - 1):
            with pytest.raises(ValueError, match="Overflow"):
                agrad.manual_seed(bad)
        g = agrad.Generator()
        assert g.device == agrad.device("cpu") and g.initial_seed() != agrad.Generator().initial_seed()
        assert g.manual_seed(9) is g and g.initial_seed() == 9
    finally:
        agrad.set_rng_state(state)


# -- random factories ----------------------------------------------------------------------------


def _seeded(fn: Callable[[agrad.Generator], Any]) -> tuple[Any, Any]:
    return fn(agrad.Generator().manual_seed(0)), fn(agrad.Generator().manual_seed(0))


def test_randperm() -> None:
    a, b = _seeded(lambda g: agrad.randperm(50, generator=g))
    assert a.tolist() == b.tolist() and sorted(a.tolist()) == list(range(50)) and a.dtype is agrad.int64
    assert agrad.randperm(0).shape == (0,)
    f = agrad.randperm(4, dtype=agrad.float32, requires_grad=True)
    assert f.dtype is agrad.float32 and f.requires_grad and sorted(f.tolist()) == [0.0, 1.0, 2.0, 3.0]


@requires_torch
@pytest.mark.parametrize("args", [(5,), (3, 5), ()])
def test_randint_like(args: tuple) -> None:
    x = agrad.ones(100, 3)
    if not args:
        out = agrad.randint_like(x, high=5)
        low, high = 0, 5
    else:
        out = agrad.randint_like(x, *args)
        low, high = (0, args[0]) if len(args) == 1 else args
        assert torch.randint_like(torch.ones(100, 3), *args).dtype == torch.float32
    assert out.shape == (100, 3) and out.dtype is agrad.float32
    values = out.numpy()
    assert values.min() >= low and values.max() < high and np.all(values == np.floor(values))
    assert agrad.randint_like(x, 2, 4, dtype=agrad.int32).dtype is agrad.int32
    assert agrad.randint_like(x, low=2, high=4).min().item() >= 2
    a, b = _seeded(lambda g: agrad.randint_like(x, 100, generator=g))
    assert a.tolist() == b.tolist()


def test_normal_factory_overload() -> None:
    a, b = _seeded(lambda g: agrad.normal(2.0, 3.0, (2000,), generator=g))
    assert a.tolist() == b.tolist() and a.dtype is agrad.float32 and a.shape == (2000,)
    assert abs(a.mean().item() - 2.0) < 0.3 and abs(a.std().item() - 3.0) < 0.3
    assert agrad.normal(0, 1, (2,), dtype=agrad.float64).dtype is agrad.float64
    leaf = agrad.normal(0.0, 1.0, (3,), requires_grad=True)
    assert leaf.is_leaf and leaf.requires_grad
    assert agrad.normal(1.5, 0.0, size=(2, 2)).tolist() == [[1.5, 1.5], [1.5, 1.5]]


@requires_torch
@pytest.mark.parametrize("call", [
    lambda lib: lib.normal(0.0, 1.0),
    lambda lib: lib.normal(0.0, -1.0, (2,)),
    lambda lib: lib.normal(lib.ones(3), -1.0),
    lambda lib: lib.normal(lib.ones(3), -lib.ones(3)),
    lambda lib: lib.normal(0.0, -lib.ones(3)),
    lambda lib: lib.normal(lib.ones(3), lib.ones(2)),
    lambda lib: lib.normal(lib.ones(3, dtype=lib.int64), 1.0),
    lambda lib: lib.bernoulli(lib.tensor([0, 1])),
    lambda lib: lib.bernoulli(lib.tensor([0.0, 1.5])),
    lambda lib: lib.poisson(lib.tensor([-1.0])),
    lambda lib: lib.poisson(lib.tensor([float("nan")])),
    lambda lib: lib.poisson(lib.tensor([1])),
])
def test_random_op_errors_match_torch(call: Callable[[Any], Any]) -> None:
    with pytest.raises(Exception) as theirs:
        call(torch)
    with pytest.raises(type(theirs.value)) as ours:
        call(agrad)
    if not isinstance(theirs.value, TypeError):  # PyTorch lists its overloads at length
        assert str(ours.value) == str(theirs.value)


@requires_torch
@pytest.mark.parametrize(("call", "shape"), [
    (lambda lib, x: lib.normal(x, x), (3, 4)),
    (lambda lib, x: lib.normal(x, 2.0), (3, 4)),
    (lambda lib, x: lib.normal(-1.0, x), (3, 4)),
    (lambda lib, x: lib.normal(x, x[0]), (3, 4)),
    (lambda lib, x: lib.normal(x[:, :1], x), (3, 4)),
    (lambda lib, x: lib.normal(mean=x, std=0.5), (2,)),
    (lambda lib, x: lib.bernoulli(x.sigmoid()), (3, 4)),
    (lambda lib, x: x.sigmoid().bernoulli(), (5,)),
    (lambda lib, x: lib.poisson(x.exp()), (3, 4)),
    (lambda lib, x: lib.normal(x, 1.0), ()),
    (lambda lib, x: lib.poisson(x.exp()), (0, 2)),
], ids=["normal-TT", "normal-Tf", "normal-fT", "normal-broadcast-std", "normal-broadcast-mean", "normal-kw",
        "bernoulli", "bernoulli-method", "poisson", "normal-0d", "poisson-empty"])
def test_random_ops_record_torch_nodes_with_zero_gradients(call: Callable[[Any, Any], Any],
                                                           shape: tuple[int, ...]) -> None:
    """The draws are recorded as PyTorch records them and give their inputs zero gradients."""
    values = np.random.default_rng(0).uniform(0.5, 1.5, shape)
    x, tx = agrad.tensor(values, requires_grad=True), torch.tensor(values, requires_grad=True)
    out, expected = call(agrad, x), call(torch, tx)
    assert out.shape == tuple(expected.shape) and out.dtype.name == _name(expected.dtype)
    assert out.grad_fn.name() == expected.grad_fn.name()
    out.sum().backward_sync()
    expected.sum().backward()
    _same(x.grad, tx.grad)


@requires_torch
@pytest.mark.parametrize("fn", [
    lambda lib, x: lib.normal(x, 0.0) * x,
    lambda lib, x: lib.normal(2.0, x * 0.0) * x.sin(),
    lambda lib, x: lib.normal(x.exp(), x * 0) * x,
    lambda lib, x: lib.bernoulli((x * 0).sigmoid().round()) * x * x,
    lambda lib, x: lib.poisson(x * 0.0) + x * x,
    lambda lib, x: (x * x).uniform_(0.5, 0.5) * x,
], ids=["normal-Tf", "normal-fT", "normal-TT", "bernoulli", "poisson", "uniform_"])
def test_double_backward_through_certain_draws_matches_torch(fn: Callable[[Any, Any], Any]) -> None:
    """Where the draw is certain (``std=0``, ``p=1``...) both libraries compute the
    same values, so first and second derivatives through the zero-gradient
    nodes can be compared."""
    values = np.random.default_rng(0).uniform(0.5, 1.5, (2, 3))
    x, tx = agrad.tensor(values, requires_grad=True), torch.tensor(values, requires_grad=True)
    out, expected = fn(agrad, x), fn(torch, tx)
    _same(out, expected, rtol=1e-6, atol=1e-7)
    (g,) = agrad.autograd.grad_sync(out.sum(), [x], create_graph=True)
    (tg,) = torch.autograd.grad(expected.sum(), [tx], create_graph=True)
    _same(g, tg, rtol=1e-6, atol=1e-7)
    (gg,) = agrad.autograd.grad_sync(g.sum(), [x], allow_unused=True, materialize_grads=True)
    (tgg,) = torch.autograd.grad(tg.sum(), [tx], allow_unused=True, materialize_grads=True)
    _same(gg, tgg, rtol=1e-6, atol=1e-7)


def test_random_ops_draw_reproducibly_with_the_right_statistics() -> None:
    mean = agrad.full((4000,), 3.0, dtype=agrad.float64)
    a, b = _seeded(lambda g: agrad.normal(mean, 2.0, generator=g))
    assert a.tolist() == b.tolist() and a.dtype is agrad.float64
    assert abs(a.mean().item() - 3.0) < 0.15 and abs(a.std().item() - 2.0) < 0.15
    s = _seeded(lambda g: agrad.normal(0.0, agrad.full((4000,), 0.5), generator=g))[0]
    assert s.dtype is agrad.float32 and abs(s.std().item() - 0.5) < 0.05
    p = agrad.tensor([0.0, 1.0, 0.25] * 2000)
    draws = _seeded(lambda g: agrad.bernoulli(p, generator=g))[0].numpy().reshape(-1, 3)
    assert set(np.unique(draws)) <= {0.0, 1.0} and draws[:, 0].max() == 0 and draws[:, 1].min() == 1
    assert abs(draws[:, 2].mean() - 0.25) < 0.05
    q = _seeded(lambda g: agrad.bernoulli(agrad.zeros(4000, dtype=agrad.float64), 0.75, generator=g))[0]
    assert q.dtype is agrad.float64 and abs(q.mean().item() - 0.75) < 0.05 and not q.requires_grad
    rates = agrad.tensor([0.0, 4.0] * 2000)
    k = _seeded(lambda g: agrad.poisson(rates, g))[0].numpy().reshape(-1, 2)
    assert k[:, 0].max() == 0 and abs(k[:, 1].mean() - 4.0) < 0.2 and np.all(k == np.floor(k))


# -- multinomial ---------------------------------------------------------------------------------


def test_multinomial_with_and_without_replacement() -> None:
    weights = agrad.tensor([[0.0, 1.0, 3.0, 0.0], [5.0, 0.0, 0.0, 5.0]])
    a, b = _seeded(lambda g: agrad.multinomial(weights, 4000, True, generator=g))
    assert a.tolist() == b.tolist() and a.dtype is agrad.int64 and a.shape == (2, 4000)
    counts = [np.bincount(row, minlength=4) / 4000 for row in a.numpy()]
    np.testing.assert_allclose(counts[0], [0.0, 0.25, 0.75, 0.0], atol=0.03)
    np.testing.assert_allclose(counts[1], [0.5, 0.0, 0.0, 0.5], atol=0.03)
    picks = _seeded(lambda g: agrad.multinomial(agrad.ones(3, 10), 10, generator=g))[0].numpy()
    assert all(sorted(row) == list(range(10)) for row in picks)
    firsts = _seeded(lambda g: agrad.multinomial(agrad.tensor([[1.0, 0.0, 9.0]] * 3000), 2, generator=g))[0].numpy()
    assert set(firsts[:, 1]) <= {0, 2} and abs((firsts[:, 0] == 2).mean() - 0.9) < 0.03
    assert agrad.multinomial(agrad.tensor([0.0, 0.0, 1.0]), 1).tolist() == [2]
    assert agrad.ones(5).multinomial(2).shape == (2,)
    assert agrad.multinomial(agrad.ones(0, 3), 1).shape == (0, 1)
    assert agrad.multinomial(agrad.ones(3, dtype=agrad.float16), 2).dtype is agrad.int64


@requires_torch
@pytest.mark.parametrize("call", [
    lambda lib: lib.multinomial(lib.tensor([0.0, 1.0]), 3),
    lambda lib: lib.multinomial(lib.tensor([-1.0, 1.0]), 1),
    lambda lib: lib.multinomial(lib.tensor([float("inf"), 1.0]), 1),
    lambda lib: lib.multinomial(lib.tensor([0.0, 0.0]), 1),
    lambda lib: lib.multinomial(lib.tensor([[0.0, 0.0], [1.0, 1.0]]), 1),
    lambda lib: lib.multinomial(lib.ones(2, 2, 2), 1),
    lambda lib: lib.multinomial(lib.ones(2), 0),
    lambda lib: lib.multinomial(lib.tensor([1, 2]), 1),
    lambda lib: lib.multinomial(lib.tensor(1.0), 1),
])
def test_multinomial_errors_match_torch(call: Callable[[Any], Any]) -> None:
    _raises_like_torch(call)


# -- in-place random fills -------------------------------------------------------------------------

_FILLS: list[tuple[str, tuple[Any, ...], Callable[[np.ndarray], bool]]] = [
    ("normal_", (), lambda v: abs(v.mean()) < 0.1 and abs(v.std() - 1) < 0.1),
    ("normal_", (5.0, 0.5), lambda v: abs(v.mean() - 5) < 0.05 and abs(v.std() - 0.5) < 0.05),
    ("uniform_", (), lambda v: v.min() >= 0 and v.max() < 1 and abs(v.mean() - 0.5) < 0.05),
    ("uniform_", (-2.0, 3.0), lambda v: v.min() >= -2 and v.max() <= 3 and abs(v.mean() - 0.5) < 0.15),
    ("bernoulli_", (), lambda v: set(np.unique(v)) <= {0, 1} and abs(v.mean() - 0.5) < 0.05),
    ("bernoulli_", (0.2,), lambda v: set(np.unique(v)) <= {0, 1} and abs(v.mean() - 0.2) < 0.05),
    ("exponential_", (2.0,), lambda v: v.min() >= 0 and abs(v.mean() - 0.5) < 0.05),
    ("random_", (), lambda v: v.min() >= 0 and v.max() <= 2**24 and np.all(v == np.floor(v))),
    ("random_", (7,), lambda v: set(np.unique(v)) == set(range(7))),
    ("random_", (-3, 2), lambda v: set(np.unique(v)) == set(range(-3, 2))),
    ("random_", (10, None), lambda v: v.min() >= 10 and v.max() <= 2**24),
    ("geometric_", (0.25,), lambda v: v.min() >= 1 and np.all(v == np.floor(v)) and abs(v.mean() - 4) < 0.3),
    ("cauchy_", (1.0, 2.0), lambda v: abs(np.median(v) - 1) < 0.2),
    ("log_normal_", (0.0, 0.25), lambda v: v.min() > 0 and abs(np.log(v).std() - 0.25) < 0.03),
]


@pytest.mark.parametrize(("method", "args", "holds"), _FILLS, ids=[f"{m}{a}" for m, a, _ in _FILLS])
def test_random_fills_draw_from_their_distribution(method: str, args: tuple, holds: Callable[[np.ndarray], bool]
                                                   ) -> None:
    x = agrad.zeros(4000)
    before = x._version
    out = getattr(x, method)(*args, generator=agrad.Generator().manual_seed(0))
    assert out is x and x._version == before + 1 and x.dtype is agrad.float32
    assert holds(x.numpy().astype(np.float64))
    y = getattr(agrad.zeros(4000), method)(*args, generator=agrad.Generator().manual_seed(0))
    assert y.tolist() == x.tolist()


@requires_torch
@pytest.mark.parametrize(("method", "args"), [
    ("normal_", ()), ("uniform_", (0.5, 2.0)), ("bernoulli_", (0.3,)), ("exponential_", ()), ("random_", ()),
    ("random_", (4,)), ("random_", (1, 4)), ("geometric_", (0.5,)), ("cauchy_", ()), ("log_normal_", ()),
])
def test_random_fills_record_torch_nodes_and_refuse_leaves(method: str, args: tuple) -> None:
    x, tx = agrad.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
    out, expected = getattr(x * 1, method)(*args), getattr(tx * 1, method)(*args)
    assert out.grad_fn.name() == expected.grad_fn.name()
    (out * 2).sum().backward_sync()
    (expected * 2).sum().backward()
    _same(x.grad, tx.grad)
    _raises_like_torch(lambda lib: getattr(lib.ones(3, requires_grad=True), method)(*args))
    with agrad.no_grad():
        assert getattr(agrad.ones(3, requires_grad=True), method)(*args).requires_grad


@requires_torch
def test_bernoulli_fill_with_a_tensor_of_probabilities() -> None:
    x, tx = agrad.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
    out = (x * 1).bernoulli_(agrad.tensor([0.0, 1.0, 1.0]))
    expected = (tx * 1).bernoulli_(torch.tensor([0.0, 1.0, 1.0]))
    _same(out, expected)
    assert out.grad_fn.name() == expected.grad_fn.name() == "BernoulliBackward1"
    assert agrad.zeros(2, 3).bernoulli_(agrad.ones(3)).tolist() == [[1.0] * 3] * 2
    with pytest.raises(RuntimeError, match=r"bernoulli_.*\[2\].*\[3\]"):
        agrad.ones(3).bernoulli_(agrad.ones(2))
    with pytest.raises(RuntimeError, match="bernoulli_ expects all elements of p to be in"):
        agrad.ones(3).bernoulli_(agrad.tensor([0.0, 1.0, 2.0]))


@requires_torch
@pytest.mark.parametrize("dtype", ["int8", "uint8", "int64", "bool", "float16", "float64", "bfloat16"])
def test_random_fills_of_other_dtypes(dtype: str) -> None:
    t = agrad.zeros(2000, dtype=getattr(agrad, dtype))
    values = t.random_(generator=agrad.Generator().manual_seed(0)).numpy().astype(np.float64)
    top = {"int8": 127, "uint8": 255, "int64": 2**63 - 1, "bool": 1, "float16": 2**11, "float64": 2**53,
           "bfloat16": 2**8}[dtype]
    assert values.min() >= 0 and values.max() <= top
    if dtype != "bool":
        assert t.random_(3, 5).numpy().astype(np.float64).min() >= 3
    assert set(agrad.zeros(500, dtype=getattr(agrad, dtype)).bernoulli_(0.5).numpy().astype(int).tolist()) <= {0, 1}
    if dtype != "bool":
        assert agrad.ones(50, dtype=getattr(agrad, dtype)).geometric_(0.5).numpy().astype(np.float64).min() >= 1


@requires_torch
@pytest.mark.parametrize("call", [
    lambda lib: lib.ones(3).uniform_(0.6, 0.5),
    lambda lib: lib.ones(3).normal_(0.5, -1),
    lambda lib: lib.ones(3).exponential_(0),
    lambda lib: lib.ones(3).exponential_(-1),
    lambda lib: lib.ones(3).geometric_(1),
    lambda lib: lib.ones(3).geometric_(0),
    lambda lib: lib.ones(3).cauchy_(0, 0),
    lambda lib: lib.ones(3).log_normal_(0.5, 0),
    lambda lib: lib.ones(3).random_(4, 4),
    lambda lib: lib.ones(3).random_(2**70),
    lambda lib: lib.zeros(3, dtype=lib.uint8).random_(-1, 5),
    lambda lib: lib.zeros(3, dtype=lib.uint8).random_(0, 500),
    lambda lib: lib.zeros(3, dtype=lib.int8).random_(-200, 5),
    lambda lib: lib.zeros(3, dtype=lib.bool).random_(3, 5),
    lambda lib: lib.ones(3).bernoulli_(1.5),
    lambda lib: lib.zeros(3, dtype=lib.int64).uniform_(),
    lambda lib: lib.zeros(3, dtype=lib.int64).normal_(),
    lambda lib: lib.zeros(3, dtype=lib.bool).normal_(),
    lambda lib: lib.zeros(3, dtype=lib.int64).exponential_(),
    lambda lib: lib.zeros(3, dtype=lib.int64).cauchy_(),
    lambda lib: lib.zeros(3, dtype=lib.int64).log_normal_(),
])
def test_random_fill_errors_match_torch(call: Callable[[Any], Any]) -> None:
    _raises_like_torch(call)


def test_random_fill_of_a_view_writes_through_to_its_base() -> None:
    base = agrad.zeros(4, 5)
    base[1:3, ::2].uniform_(1.0, 1.0)
    assert base.sum().item() == 6.0 and base[1, 1].item() == 0.0
    x = agrad.ones(4, requires_grad=True)
    y = x * 1
    y[1:3].normal_(7.0, 0.0)
    assert y.tolist() == [1.0, 7.0, 7.0, 1.0] and y.grad_fn.name().endswith("CopySlices")
    y.sum().backward_sync()
    assert x.grad.tolist() == [1.0, 0.0, 0.0, 1.0]


def test_random_draws_on_another_device_equal_the_hosts() -> None:
    from tests.devices.fake_backend import FakeBackend

    _backends.register_backend(FakeBackend())
    try:
        for fn in (lambda t, g: t.normal_(generator=g), lambda t, g: agrad.normal(t, 1.0, generator=g),
                   lambda t, g: agrad.poisson(t + 1, g), lambda t, g: agrad.bernoulli(t * 0.5, generator=g)):
            on_host = fn(agrad.ones(5), agrad.Generator().manual_seed(1))
            on_fake = fn(agrad.ones(5, device="fake:0"), agrad.Generator().manual_seed(1))
            assert str(on_fake.device) == "fake:0" and on_fake.cpu().tolist() == on_host.tolist()
    finally:
        _backends.unregister_backend("fake")


def test_names_are_exported() -> None:
    names = ["normal", "bernoulli", "poisson", "multinomial", "randperm", "randint_like", "seed", "initial_seed",
             "finfo", "iinfo", "set_printoptions", "asarray", "range", "logspace", "empty_strided", "scalar_tensor",
             "promote_types", "result_type", "can_cast", "typename", "is_storage", "bfloat16", "short"]
    assert all(n in agrad.__all__ and hasattr(agrad, n) for n in names)
    assert {"seed", "initial_seed"} <= set(agrad.random.__all__)
