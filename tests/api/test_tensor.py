"""The Tensor API outside the op table: factories, conversions, ``repr``, and
autograd state (``requires_grad``, leaves, ``grad_fn``, ``detach``, ``.grad``,
in-place ops and the version counter).  PyTorch is the reference throughout;
where it is installed, results are compared with it directly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
from tests.helpers import requires_torch, torch

LEAF_INPLACE = "a leaf Variable that requires grad is being used in an in-place operation."


def _name(dtype: Any) -> str:
    """``agrad.float32`` / ``torch.float32`` -> ``"float32"``."""
    return str(dtype).split(".")[-1]


# -- factories -----------------------------------------------------------------

INFERENCE = {
    "floats": ([1.0, 2.5], "float32"),
    "float_scalar": (2.5, "float32"),
    "ints_and_floats": ([1, 2.5], "float32"),
    "ints": ([1, 2], "int64"),
    "int_scalar": (3, "int64"),
    "bools": ([True, False], "bool"),
    "bools_and_ints": ([True, 2], "int64"),
    "nested": ([[1.0], [2.0]], "float32"),
    "empty_list": ([], "float32"),
    "np_float64": (np.array([1.0, 2.0]), "float64"),
    "np_float16": (np.array([1.0], dtype=np.float16), "float16"),
    "np_int32": (np.array([1, 2], dtype=np.int32), "int32"),
    "np_uint8": (np.array([1, 2], dtype=np.uint8), "uint8"),
    "np_bool": (np.array([True]), "bool"),
    "np_float64_scalar": (np.float64(1.5), "float64"),
    "np_int32_scalar": (np.int32(4), "int32"),
}


@pytest.mark.parametrize(("data", "dtype"), list(INFERENCE.values()), ids=list(INFERENCE))
def test_tensor_infers_dtype_like_torch(data: Any, dtype: str) -> None:
    assert agrad.tensor(data).dtype.name == dtype
    if torch is not None:
        assert _name(torch.tensor(data).dtype) == dtype


def test_tensor_copies_its_data() -> None:
    a = np.array([1.0, 2.0])
    t = agrad.tensor(a)
    a[0] = 9.0
    assert t.tolist() == [1.0, 2.0]


def test_tensor_with_dtype_and_requires_grad() -> None:
    t = agrad.tensor([1, 2], dtype=agrad.float64, requires_grad=True)
    assert t.dtype is agrad.float64
    assert t.requires_grad and t.is_leaf and t.grad_fn is None


FACTORIES: dict[str, Callable[[Any], Any]] = {
    "zeros": lambda L: L.zeros(2, 3),
    "zeros_tuple": lambda L: L.zeros((2, 3)),
    "zeros_int32": lambda L: L.zeros(2, dtype=L.int32),
    "ones": lambda L: L.ones(3),
    "ones_float64": lambda L: L.ones(2, 2, dtype=L.float64),
    "full_int": lambda L: L.full((2,), 3),
    "full_float": lambda L: L.full((2, 2), 1.5),
    "full_bool": lambda L: L.full((2,), True),
    "full_dtype": lambda L: L.full((2,), 3, dtype=L.float16),
    "arange_end": lambda L: L.arange(5),
    "arange_start_end": lambda L: L.arange(2, 7),
    "arange_step": lambda L: L.arange(0, 1, 0.25),
    "arange_float_end": lambda L: L.arange(3.0),
    "arange_dtype": lambda L: L.arange(4, dtype=L.float64),
    "eye": lambda L: L.eye(3),
    "eye_rect": lambda L: L.eye(2, 3),
    "zeros_like": lambda L: L.zeros_like(L.tensor([1, 2], dtype=L.int32)),
    "ones_like": lambda L: L.ones_like(L.tensor([[1.0, 2.0]])),
    "ones_like_dtype": lambda L: L.ones_like(L.tensor([1.0, 2.0]), dtype=L.int64),
    "full_like": lambda L: L.full_like(L.tensor([1, 2]), 7),
    "full_like_truncates": lambda L: L.full_like(L.tensor([1, 2]), 2.7),
}


@requires_torch
@pytest.mark.parametrize("make", list(FACTORIES.values()), ids=list(FACTORIES))
def test_factory_matches_torch(make: Callable[[Any], Any]) -> None:
    ours, theirs = make(agrad), make(torch)
    assert ours.dtype.name == _name(theirs.dtype)
    assert ours.shape == tuple(theirs.shape)
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


RANDOM = {
    "rand": lambda: agrad.rand(2, 3),
    "randn": lambda: agrad.randn(2, 3),
    "rand_float64": lambda: agrad.rand(4, dtype=agrad.float64),
    "rand_like": lambda: agrad.rand_like(agrad.zeros(2, 3, dtype=agrad.float64)),
    "randn_like": lambda: agrad.randn_like(agrad.zeros(2, 3)),
}


@pytest.mark.parametrize("make", list(RANDOM.values()), ids=list(RANDOM))
def test_random_factories_are_reproducible_under_manual_seed(make: Callable[[], agrad.Tensor]) -> None:
    agrad.manual_seed(123)
    first = make()
    agrad.manual_seed(123)
    second = make()
    third = make()
    assert first.dtype.is_floating_point
    assert np.array_equal(first.numpy(), second.numpy())
    assert not np.array_equal(second.numpy(), third.numpy())


def test_rand_is_in_unit_interval() -> None:
    agrad.manual_seed(0)
    r = agrad.rand(1000).numpy()
    assert r.dtype == np.float32
    assert (r >= 0).all() and (r < 1).all()


def test_random_factories_can_require_grad() -> None:
    t = agrad.randn(3, requires_grad=True)
    assert t.requires_grad and t.is_leaf


def test_like_factories_do_not_inherit_requires_grad() -> None:
    src = agrad.zeros(2, requires_grad=True)
    assert not agrad.zeros_like(src).requires_grad
    assert agrad.ones_like(src, requires_grad=True).requires_grad


def test_from_numpy_shares_memory_both_ways() -> None:
    a = np.zeros(3)
    t = agrad.from_numpy(a)
    assert t.dtype is agrad.float64
    a[0] = 1.0
    assert t.tolist() == [1.0, 0.0, 0.0]
    t.add_(2.0)
    assert a.tolist() == [3.0, 2.0, 2.0]
    assert t.numpy() is a


def test_from_numpy_rejects_unsupported_dtypes() -> None:
    with pytest.raises(TypeError, match="can't convert np.ndarray of type complex64"):
        agrad.from_numpy(np.zeros(2, dtype=np.complex64))


def test_from_numpy_rejects_non_arrays() -> None:
    with pytest.raises(TypeError, match=r"expected np.ndarray \(got list\)"):
        agrad.from_numpy([1.0, 2.0])


# -- conversions and array facts ----------------------------------------------------


def test_numpy_refuses_tensors_that_require_grad() -> None:
    t = agrad.tensor([1.0, 2.0], requires_grad=True)
    message = r"Can't call numpy\(\) on Tensor that requires grad. Use tensor.detach\(\).numpy\(\) instead."
    with pytest.raises(RuntimeError, match=message):
        t.numpy()
    with pytest.raises(RuntimeError, match=message):
        np.asarray(t)
    assert t.detach().numpy().tolist() == [1.0, 2.0]


def test_numpy_shares_memory() -> None:
    t = agrad.tensor([1.0, 2.0])
    t.numpy()[0] = 5.0
    assert t.tolist() == [5.0, 2.0]


def test_asarray_shares_memory_and_converts_dtype() -> None:
    t = agrad.tensor([1.0, 2.0])
    assert np.shares_memory(np.asarray(t), t.numpy())
    converted = np.asarray(t, dtype=np.float64)
    assert converted.dtype == np.float64 and converted.tolist() == [1.0, 2.0]


def test_np_array_copies() -> None:
    """``np.array(t)`` asks for a copy (numpy 2 passes ``copy=True``); PyTorch honours it."""
    t = agrad.tensor([1.0, 2.0])
    a = np.array(t)
    a[0] = 9.0
    assert t.tolist() == [1.0, 2.0]


@pytest.mark.parametrize(("data", "expected"), [([[2.5]], 2.5), (3, 3), (True, True), ([7], 7)])
def test_item(data: Any, expected: Any) -> None:
    value = agrad.tensor(data).item()
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize("n", [0, 2])
def test_item_needs_exactly_one_element(n: int) -> None:
    with pytest.raises(RuntimeError, match=f"a Tensor with {n} elements cannot be converted to Scalar"):
        agrad.zeros(n).item()


@pytest.mark.parametrize(("data", "expected"), [([[1, 2], [3, 4]], [[1, 2], [3, 4]]), (3.5, 3.5),
                                                ([True, False], [True, False]), ([], [])])
def test_tolist(data: Any, expected: Any) -> None:
    assert agrad.tensor(data).tolist() == expected


@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 3), (2, 1, 4)])
def test_shape_ndim_numel(shape: tuple[int, ...]) -> None:
    t = agrad.zeros(shape)
    assert t.shape == shape == t.size()
    assert t.ndim == len(shape) == t.dim()
    assert t.numel() == int(np.prod(shape))
    assert t.dtype is agrad.float32


def test_device() -> None:
    t = agrad.zeros(1)
    assert t.device.type == "cpu" and str(t.device) == "cpu"
    assert not t.is_cuda


# -- repr ------------------------------------------------------------------------

REPRS: dict[str, Callable[[Any], Any]] = {
    "floats": lambda L: L.tensor([0.1, 0.25, 3.125]),
    "floats_mixed_sign": lambda L: L.tensor([1.5, -2.25, 3.125]),
    "integral_floats": lambda L: L.tensor([1.0, 2.0, 3.0]),
    "integral_floats_mixed_sign": lambda L: L.tensor([1.0, 2.0, -3.0]),
    "float_matrix": lambda L: L.tensor([[1.5, 2.0], [3.0, 4.25]]),
    "large_floats": lambda L: L.tensor([1e10, 1.0]),
    "tiny_floats": lambda L: L.tensor([1e-5, 1.0]),
    "nan_inf": lambda L: L.tensor([float("nan"), float("inf"), -float("inf"), 1.0]),
    "nan_with_decimals": lambda L: L.tensor([float("nan"), 1.5]),
    "ints": lambda L: L.tensor([1, -2, 30]),
    "int32": lambda L: L.tensor([1, 2], dtype=L.int32),
    "bools": lambda L: L.tensor([True, False]),
    "zero_d_float": lambda L: L.tensor(2.5),
    "zero_d_int": lambda L: L.tensor(7),
    "zero_d_bool": lambda L: L.tensor(True),
    "empty": lambda L: L.tensor([]),
    "empty_2d": lambda L: L.zeros(0, 3),
    "empty_int64": lambda L: L.tensor([], dtype=L.int64),
    "float64": lambda L: L.tensor([1.5, 2.0], dtype=L.float64),
    "float16": lambda L: L.tensor([1.5, 2.0], dtype=L.float16),
    "requires_grad": lambda L: L.tensor([1.0, 2.0], requires_grad=True),
    "requires_grad_float64": lambda L: L.tensor([1.0, 2.0], dtype=L.float64, requires_grad=True),
    "grad_fn_mul": lambda L: L.tensor([1.0, 2.0], requires_grad=True) * 2,
    "grad_fn_zero_d": lambda L: (L.tensor([1.0, 2.0], requires_grad=True) * 2).sum(),
    "summarized": lambda L: L.arange(2000),
}


@requires_torch
@pytest.mark.parametrize("make", list(REPRS.values()), ids=list(REPRS))
def test_repr_matches_torch(make: Callable[[Any], Any]) -> None:
    assert repr(make(agrad)) == repr(make(torch)).replace("torch.", "agrad.")


# -- autograd state ------------------------------------------------------------------


def test_requires_grad_on_non_leaf() -> None:
    y = agrad.tensor([1.0], requires_grad=True) * 2
    assert y.requires_grad_(True) is y
    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf variables"):
        y.requires_grad_(False)
    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf variables"):
        y.requires_grad = False


@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
def test_requires_grad_refuses_non_float(dtype: str) -> None:
    with pytest.raises(RuntimeError, match="only Tensors of floating point dtype can require gradients"):
        agrad.zeros(2, dtype=getattr(agrad, dtype)).requires_grad_()


def test_requires_grad_toggles_on_leaf() -> None:
    x = agrad.zeros(2)
    assert x.requires_grad_() is x and x.requires_grad
    x.requires_grad = False
    assert not x.requires_grad and x.is_leaf


def test_leaves_and_grad_fn() -> None:
    x = agrad.tensor([1.0, 2.0], requires_grad=True)
    c = agrad.tensor([3.0, 4.0])
    y = x * c
    assert x.is_leaf and c.is_leaf and not y.is_leaf
    assert x.grad_fn is None and c.grad_fn is None
    assert y.grad_fn.name() == "MulBackward0"
    assert y.requires_grad
    assert (c * c).is_leaf and (c * c).grad_fn is None


def test_no_grad_results_are_leaves() -> None:
    x = agrad.tensor([1.0], requires_grad=True)
    with agrad.no_grad():
        y = x * 2
    assert y.is_leaf and not y.requires_grad and y.grad_fn is None


def test_detach_shares_data_and_version_counter() -> None:
    x = agrad.tensor([1.0, 2.0], requires_grad=True)
    d = x.detach()
    assert d.is_leaf and not d.requires_grad and d.grad_fn is None
    d.add_(1.0)
    assert x.detach().tolist() == [2.0, 3.0]
    assert x._version == d._version == 1


def test_detach_of_non_leaf() -> None:
    y = agrad.tensor([1.0, 2.0], requires_grad=True) * 3
    d = y.detach()
    assert d.is_leaf and not d.requires_grad
    assert np.shares_memory(d.numpy(), y.detach().numpy())


def test_detach_in_place() -> None:
    x = agrad.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    assert y.detach_() is y
    assert y.is_leaf and not y.requires_grad and y.grad_fn is None
    assert y.tolist() == [3.0, 6.0]


def test_grad_setter_accepts_matching_tensor_and_none() -> None:
    x = agrad.zeros(2, requires_grad=True)
    g = agrad.ones(2)
    x.grad = g
    assert x.grad is g
    x.grad = None
    assert x.grad is None


@pytest.mark.parametrize(("value", "error", "message"), [
    (lambda: agrad.zeros(3), RuntimeError,
     r"attempting to assign a gradient of size '\[3\]' to a tensor of size '\[2\]'. "
     "Please ensure that the gradient and the tensor are the same size"),
    (lambda: agrad.zeros(2, dtype=agrad.float64), RuntimeError, "attempting to assign a gradient with dtype"),
    (lambda: agrad.zeros(2, dtype=agrad.int64), RuntimeError, "attempting to assign a gradient with dtype"),
    (lambda: [1.0, 2.0], TypeError, "assigned grad expected to be a Tensor or None but got"),
], ids=["wrong_shape", "wrong_float_dtype", "int_dtype", "not_a_tensor"])
def test_grad_setter_errors(value: Callable[[], Any], error: type, message: str) -> None:
    x = agrad.zeros(2, requires_grad=True)
    with pytest.raises(error, match=message):
        x.grad = value()
    assert x.grad is None


def test_reading_grad_of_non_leaf_warns() -> None:
    y = agrad.tensor([1.0], requires_grad=True) * 2
    with pytest.warns(UserWarning, match="The .grad attribute of a Tensor that is not a leaf Tensor is being accessed"):
        assert y.grad is None


def test_reading_grad_of_retained_non_leaf_does_not_warn() -> None:
    x = agrad.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.retain_grad()
    (y * y).sum().backward_sync()
    assert y.grad.tolist() == [4.0, 8.0]  # filterwarnings=error: a warning would fail here


# -- in-place ops --------------------------------------------------------------------

INPLACE: dict[str, Callable[[Any, Any], Any]] = {
    "add_": lambda t, x: t.add_(x),
    "add_scalar": lambda t, x: t.add_(2.0),
    "add_alpha": lambda t, x: t.add_(x, alpha=3),
    "sub_": lambda t, x: t.sub_(x),
    "mul_": lambda t, x: t.mul_(x),
    "div_": lambda t, x: t.div_(x + 3),
    "zero_": lambda t, x: t.zero_(),
    "fill_": lambda t, x: t.fill_(1.5),
    "iadd": lambda t, x: t.__iadd__(x),
    "isub": lambda t, x: t.__isub__(x),
    "imul": lambda t, x: t.__imul__(x),
    "itruediv": lambda t, x: t.__itruediv__(x + 3),
}
INPLACE_PARAMS = [pytest.param(op, id=name) for name, op in INPLACE.items()]


@pytest.mark.parametrize("op", INPLACE_PARAMS)
def test_inplace_bumps_version_and_writes_in_place(op: Callable[[Any, Any], Any]) -> None:
    t = agrad.tensor([0.5, -1.5, 2.0], dtype=agrad.float64)
    data = t.numpy()
    before = t._version
    assert op(t, agrad.tensor([1.0, 2.0, 3.0], dtype=agrad.float64)) is t
    assert t._version == before + 1
    assert t.numpy() is data


def test_augmented_assignment_keeps_identity() -> None:
    t = agrad.tensor([1.0, 2.0])
    alias = t
    t += 1
    assert t is alias and t.tolist() == [2.0, 3.0] and t._version == 1


@pytest.mark.parametrize("op", INPLACE_PARAMS)
def test_inplace_refuses_leaf_requiring_grad(op: Callable[[Any, Any], Any]) -> None:
    x = agrad.tensor([0.5, -1.5, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=LEAF_INPLACE):
        op(x, agrad.tensor([1.0, 2.0, 3.0]))
    assert x.tolist() == [0.5, -1.5, 2.0] and x._version == 0


@pytest.mark.parametrize("op", INPLACE_PARAMS)
def test_inplace_on_leaf_allowed_under_no_grad(op: Callable[[Any, Any], Any]) -> None:
    x = agrad.tensor([0.5, -1.5, 2.0], requires_grad=True)
    with agrad.no_grad():
        op(x, agrad.tensor([1.0, 2.0, 3.0]))
    assert x.is_leaf and x.requires_grad and x._version == 1


@requires_torch
@pytest.mark.parametrize("op", INPLACE_PARAMS)
def test_inplace_on_non_leaf_gives_torch_gradients(op: Callable[[Any, Any], Any]) -> None:
    def run(lib: Any) -> tuple[Any, Any]:
        x = lib.tensor([0.5, -1.5, 2.0], dtype=lib.float64, requires_grad=True)
        y = x * x
        y = op(y, x)
        return x, (y * lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64)).sum()

    x, loss = run(agrad)
    tx, tloss = run(torch)
    assert loss.item() == pytest.approx(tloss.item(), rel=1e-12)
    loss.backward_sync()
    tloss.backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)


def test_chained_inplace_ops_on_non_leaf() -> None:
    x = agrad.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1
    y.mul_(x).add_(1).div_(2)
    assert y._version == 3 and y.grad_fn.name() == "DivBackward0"
    y.sum().backward_sync()
    assert x.grad.tolist() == [1.0, 2.0]  # d/dx (x*x + 1) / 2 = x


def test_inplace_type_and_shape_errors() -> None:
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        agrad.tensor([1, 2]).add_(1.5)
    with pytest.raises(RuntimeError, match=r"output with shape \[2\] doesn't match the broadcast shape \[3, 2\]"):
        agrad.zeros(2).add_(agrad.zeros(3, 2))


def test_modifying_a_saved_tensor_fails_backward() -> None:
    x = agrad.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    z = y * y
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward_sync()


@requires_torch
@pytest.mark.parametrize("name", ["rand_like", "randn_like"])
def test_random_like_rejects_integer_dtypes_like_torch(name: str) -> None:
    with pytest.raises(NotImplementedError) as theirs:
        getattr(torch, name)(torch.ones(2, dtype=torch.int64))
    with pytest.raises(NotImplementedError) as ours:
        getattr(agrad, name)(agrad.ones(2, dtype=agrad.int64))
    assert str(ours.value) == str(theirs.value)
