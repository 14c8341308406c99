"""Scatter and index-write ops against PyTorch beyond the op table's samples.

The op table (tests/ops/test_op_table.py) checks every entry's samples:
gradcheck, gradgradcheck, and values and gradients against torch.  Here:

* the public functions that dispatch between entries (``scatter`` with a
  tensor or a number, ``index_fill``, ``index_put``) and the composite
  ``take_along_dim``, through their function and Tensor-method spellings;
* the in-place forms: values, versions, node names, gradients through them,
  PyTorch's errors on leaves, and writes through views;
* integer and float32 inputs, non-contiguous inputs, node names;
* PyTorch's legacy ``scatter(reduce=...)``, whose backward raises;
* deliberate differences (a source larger than the index; ``index_fill``'s
  value gradient with negative indices), checked by finite differences;
* misuse: the exception type and message torch raises, with the tensor an
  in-place call failed on left unchanged.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
from agrad.autograd import gradcheck, gradgradcheck
from tests.helpers import requires_torch, torch

pytestmark = requires_torch

RNG = np.random.default_rng(0)


def _lib_tensor(L: Any, a: Any, dtype: str | None = None, requires_grad: bool = False) -> Any:
    """``a`` as a tensor of library ``L``: float arrays in ``dtype`` (float64 by default)."""
    if isinstance(a, np.ndarray) and a.dtype.kind == "f":
        return L.tensor(a, dtype=getattr(L, dtype or "float64"), requires_grad=requires_grad)
    return L.tensor(a)


def _inputs(L: Any, arrays: tuple[Any, ...], dtype: str | None) -> list[Any]:
    return [_lib_tensor(L, a, dtype, requires_grad=dtype != "no_grad" and isinstance(a, np.ndarray)
                        and a.dtype.kind == "f") if isinstance(a, np.ndarray) else a for a in arrays]


def _assert_same(ours: Any, theirs: Any, rtol: float = 1e-12, atol: float = 1e-12) -> None:
    assert ours.shape == tuple(theirs.shape), f"shape {ours.shape} != {tuple(theirs.shape)}"
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch."), f"dtype {ours.dtype} != {theirs.dtype}"
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=rtol, atol=atol)


def _check(fn: Callable[..., Any], *arrays: Any, node: str | None = None, dtype: str = "float64") -> None:
    """``fn(L, *tensors)`` on both libraries: value, dtype, node name and (float inputs) gradients."""
    ours, theirs = _inputs(agrad, arrays, dtype), _inputs(torch, arrays, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the beta and deprecation warnings (checked below for scatter)
        out_t = fn(torch, *theirs)
        out_a = fn(agrad, *ours)
    tol = 1e-12 if dtype == "float64" else 1e-5
    _assert_same(out_a, out_t, rtol=tol, atol=tol)
    if node is not None:
        assert out_t.grad_fn.name() == node
        assert out_a.grad_fn.name() == node
    leaves = [(a, t) for a, t in zip(ours, theirs) if getattr(t, "requires_grad", False)]
    if not leaves or not out_t.requires_grad:
        assert not out_a.requires_grad
        return
    w = RNG.standard_normal(out_a.shape)
    (out_a * _lib_tensor(agrad, w, dtype)).sum().backward_sync()
    (out_t * _lib_tensor(torch, w, dtype)).sum().backward()
    for a, t in leaves:
        if t.grad is None:  # an input the result does not depend on
            assert a.grad is None
        else:
            _assert_same(a.grad, t.grad, rtol=tol, atol=tol)


def _x(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape)


def _i(*values: Any) -> np.ndarray:
    return np.array(values if len(values) != 1 else values[0], dtype=np.int64)


# -- the public functions and methods ------------------------------------------------

IDX = np.array([[0, 1, 2, 0], [2, 0, 1, 1]])  # no position twice along dim 0
REPEATS = np.array([[0, 1, 2, 0], [0, 0, 2, 2], [1, 0, 0, 2]])

CASES: dict[str, tuple[Callable[..., Any], tuple[Any, ...], str | None]] = {
    "scatter-src": (lambda L, x, i, s: L.scatter(x, 0, i, s), (_x(3, 4), IDX, _x(2, 4)), "ScatterBackward0"),
    "scatter-src-kw": (lambda L, x, i, s: L.scatter(x, dim=0, index=i, src=s), (_x(3, 4), IDX, _x(2, 4)),
                       "ScatterBackward0"),
    "scatter-value": (lambda L, x, i: L.scatter(x, 0, i, 2.5), (_x(3, 4), IDX), "ScatterBackward1"),
    "scatter-value-kw": (lambda L, x, i: x.scatter(0, i, value=-1), (_x(3, 4), IDX), "ScatterBackward1"),
    "scatter-method": (lambda L, x, i, s: x.scatter(1, i, s), (_x(3, 4), _i([[3, 0]]), _x(1, 2)), "ScatterBackward0"),
    "scatter_-src": (lambda L, x, i, s: (x * 1).scatter_(0, i, s), (_x(3, 4), IDX, _x(2, 4)), "ScatterBackward0"),
    "scatter_-value": (lambda L, x, i: (x * 1).scatter_(-1, i, 0.5), (_x(2, 4), IDX), "ScatterBackward1"),
    "scatter_reduce-method": (lambda L, x, i, s: x.scatter_reduce(0, i, s, "amin", include_self=False),
                              (_x(3, 4), REPEATS, _x(3, 4)), "ScatterReduceBackward0"),
    "scatter_reduce_": (lambda L, x, i, s: (x * 1).scatter_reduce_(0, i, s, reduce="mean"),
                        (_x(3, 4), REPEATS, _x(3, 4)), "ScatterReduceBackward0"),
    "scatter_add_": (lambda L, x, i, s: (x * 1).scatter_add_(0, i, s), (_x(3, 4), REPEATS, _x(3, 4)),
                     "ScatterAddBackward0"),
    "index_add-method": (lambda L, x, i, s: x.index_add(1, i, s, alpha=3), (_x(2, 4), _i([1, 1, 0]), _x(2, 3)),
                         "IndexAddBackward0"),
    "index_add_": (lambda L, x, i, s: (x * 1).index_add_(0, i, s), (_x(4, 2), _i([3, 3]), _x(2, 2)),
                   "IndexAddBackward0"),
    "index_copy-method": (lambda L, x, i, s: x.index_copy(1, i, s), (_x(2, 4), _i([3, 0]), _x(2, 2)),
                          "IndexCopyBackward0"),
    "index_copy_": (lambda L, x, i, s: (x * 1).index_copy_(0, i, s), (_x(4, 2), _i([2]), _x(1, 2)),
                    "IndexCopyBackward0"),
    "index_fill-number": (lambda L, x, i: L.index_fill(x, 1, i, -3.0), (_x(2, 4), _i([0, 2])), "IndexFillBackward0"),
    "index_fill-tensor": (lambda L, x, i, v: L.index_fill(x, 0, i, v), (_x(3, 2), _i([2, 0, 2]), _x()),
                          "IndexFillBackward1"),
    "index_fill-method": (lambda L, x, i: x.index_fill(0, i, 7), (_x(3, 2), _i(1)), "IndexFillBackward0"),
    "index_fill_-number": (lambda L, x, i: (x * 1).index_fill_(1, i, 0.25), (_x(2, 4), _i([3])),
                           "IndexFillBackward0"),
    "index_fill_-tensor": (lambda L, x, i, v: (x * 1).index_fill_(1, i, v), (_x(2, 4), _i([3, 1]), _x()),
                           "IndexFillBackward1"),
    "index_put": (lambda L, x, i, v: L.index_put(x, (i,), v), (_x(4, 3), _i([0, 2]), _x(3)), "IndexPutBackward0"),
    "index_put-accumulate": (lambda L, x, i, j, v: L.index_put(x, (i, j), v, accumulate=True),
                             (_x(4, 3), _i([1, 1, 0]), _i([2, 2, 0]), _x(3)), "IndexPutBackward0"),
    "index_put-mask": (lambda L, x, m, v: L.index_put(x, (m,), v, True),
                       (_x(3, 4), _x(3, 4) > 0, _x()), "IndexPutBackward0"),
    "index_put-list": (lambda L, x, i, v: x.index_put([i], v), (_x(4, 3), _i([3, 1]), _x(2, 3)),
                       "IndexPutBackward0"),
    "index_put_": (lambda L, x, i, v: (x * 1).index_put_((i,), v, accumulate=True), (_x(4), _i([1, 1]), _x(2)),
                   "IndexPutBackward0"),
    "torch.index_put_": (lambda L, x, i, v: L.index_put_(x * 1, (i,), v), (_x(4), _i([0, 3]), _x(2)),
                         "IndexPutBackward0"),
    "index_reduce_": (lambda L, x, i, s: (x * 1).index_reduce_(0, i, s, "prod", include_self=False),
                      (_x(3, 2), _i([0, 2, 0]), _x(3, 2)), "IndexReduceBackward0"),
    "masked_scatter-method": (lambda L, x, m, s: x.masked_scatter(m, s), (_x(3, 4), _x(4) > 0, _x(12)),
                              "MaskedScatterBackward0"),
    "masked_scatter_": (lambda L, x, m, s: (x * 1).masked_scatter_(m, s), (_x(3, 4), _x(3, 1) > 0, _x(13)),
                        "MaskedScatterBackward0"),
    "masked_select-method": (lambda L, x, m: x.masked_select(m), (_x(3, 4), _x(3, 1) > 0), "MaskedSelectBackward0"),
    "masked_select-broadcast-input": (lambda L, x, m: L.masked_select(x, m), (_x(4), _x(2, 4) > 0),
                                      "MaskedSelectBackward0"),
    "take-method": (lambda L, x, i: x.take(i), (_x(2, 3), _i([[5, -6], [0, 0]])), "TakeBackward0"),
    "put-method": (lambda L, x, i, s: x.put(i, s, accumulate=True), (_x(2, 3), _i([5, 5, -1]), _x(3)),
                   "PutBackward0"),
    "put_": (lambda L, x, i, s: (x * 1).put_(i, s), (_x(2, 3), _i([[4, 0]]), _x(2)), "PutBackward0"),
    "take_along_dim": (lambda L, x, i: L.take_along_dim(x, i, 1), (_x(3, 4), _i([[0, 3], [1, 1], [2, 0]])),
                       "GatherBackward0"),
    "take_along_dim-broadcast": (lambda L, x, i: L.take_along_dim(x, i, dim=-1), (_x(3, 4), _i([[0, 3, 3]])),
                                 "GatherBackward0"),
    "take_along_dim-broadcast-input": (lambda L, x, i: x.take_along_dim(i, 0), (_x(1, 4), _i([[0], [0]])),
                                       "GatherBackward0"),
    "take_along_dim-flat": (lambda L, x, i: L.take_along_dim(x, i), (_x(3, 4), _i([[11, 0], [5, 5]])),
                            "GatherBackward0"),
    "diagonal_scatter-method": (lambda L, x, s: x.diagonal_scatter(s, -1), (_x(3, 4), _x(2)),
                                "DiagonalScatterBackward0"),
    "select_scatter-method": (lambda L, x, s: x.select_scatter(s, 1, -2), (_x(3, 4), _x(3)),
                              "SelectScatterBackward0"),
    "slice_scatter-method": (lambda L, x, s: x.slice_scatter(s, 1, 1, None, 2), (_x(3, 4), _x(3, 2)),
                             "SliceScatterBackward0"),
    "slice_scatter-defaults": (lambda L, x, s: L.slice_scatter(x, s), (_x(3, 4), _x(3, 4)),
                               "SliceScatterBackward0"),
    "select_scatter-float32-src": (lambda L, x, s: L.select_scatter(x, s.float(), 0, 0), (_x(3, 4), _x(4)),
                                   "SelectScatterBackward0"),
}


@pytest.mark.parametrize(("fn", "arrays", "node"), [pytest.param(*c, id=k) for k, c in CASES.items()])
def test_matches_torch(fn: Callable[..., Any], arrays: tuple[Any, ...], node: str | None) -> None:
    _check(fn, *arrays, node=node)


@pytest.mark.parametrize(("fn", "arrays", "node"), [pytest.param(*c, id=k) for k, c in CASES.items()])
def test_matches_torch_float32(fn: Callable[..., Any], arrays: tuple[Any, ...], node: str | None) -> None:
    _check(fn, *arrays, node=node, dtype="float32")


def _noncontiguous(L: Any, x: Any) -> Any:
    return (x * 1).t()[:, ::2]


@pytest.mark.parametrize("name, fn", [
    ("scatter", lambda L, x, s: L.scatter(_noncontiguous(L, x), 0, L.tensor([[1, 0], [0, 1]]), s.t())),
    ("scatter_reduce", lambda L, x, s: L.scatter_reduce(_noncontiguous(L, x), 1, L.tensor([[0, 0], [1, 0]]), s,
                                                        "prod")),
    ("index_add", lambda L, x, s: L.index_add(_noncontiguous(L, x), 0, L.tensor([1, 1]), s)),
    ("index_put", lambda L, x, s: L.index_put(_noncontiguous(L, x), (L.tensor([0, 1]),), s, accumulate=True)),
    ("masked_scatter", lambda L, x, s: L.masked_scatter(_noncontiguous(L, x), L.tensor([True, False]), s.t())),
    ("masked_select", lambda L, x, s: L.masked_select(_noncontiguous(L, x), L.tensor([True, False]))),
    ("take", lambda L, x, s: L.take(_noncontiguous(L, x), L.tensor([0, 3, 1]))),
    ("put", lambda L, x, s: L.put(_noncontiguous(L, x), L.tensor([0, 3, 1, 2]), s.t().reshape(-1))),
    ("diagonal_scatter", lambda L, x, s: L.diagonal_scatter(_noncontiguous(L, x), s[0])),
    ("slice_scatter", lambda L, x, s: L.slice_scatter(_noncontiguous(L, x), s[:1], 0, 1)),
    ("take_along_dim", lambda L, x, s: L.take_along_dim(_noncontiguous(L, x), L.tensor([[1], [0]]), 1)),
])
def test_noncontiguous_inputs(name: str, fn: Callable[..., Any]) -> None:
    _check(fn, _x(3, 2), _x(2, 2))


# -- integer inputs -----------------------------------------------------------------

A = np.array([[1, -2, 3, 4], [5, 6, -7, 8], [9, 10, 11, -12]])
B = np.array([[4, -4, 7, 0], [2, 3, -1, 5], [-8, 6, 6, 1]])


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", ["int64", "int32", "int16", "uint8", "float32"])
def test_scatter_reduce_values_and_dtypes(reduce: str, include_self: bool, dtype: str) -> None:
    a = np.abs(A) if dtype == "uint8" else A
    b = np.abs(B) if dtype == "uint8" else B
    _check(lambda L, x, i, s: L.scatter_reduce(x.to(getattr(L, dtype)), 0, i, s.to(getattr(L, dtype)), reduce,
                                               include_self=include_self), a, REPEATS, b)


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce_integers(reduce: str, include_self: bool) -> None:
    _check(lambda L, x, i, s: L.index_reduce(x, 1, i, s, reduce, include_self=include_self), A, _i([3, 3, 0]),
           B[:, :3])


INT_CASES = {
    "scatter-src": lambda L, x, i, s: L.scatter(x, 0, i[:2], s),
    "scatter-value-float": lambda L, x, i, s: L.scatter(x, 0, i[:2], 2.7),
    "scatter-value-bool": lambda L, x, i, s: L.scatter(x > 0, 1, i[:2], False),
    "scatter-legacy-add": lambda L, x, i, s: L.scatter(x, 0, i, 5, reduce="add"),
    "scatter-legacy-multiply": lambda L, x, i, s: L.scatter(x, 0, i, s, reduce="multiply"),
    "index_add-alpha": lambda L, x, i, s: L.index_add(x, 0, i[0, :3], s, alpha=2.5),
    "index_copy": lambda L, x, i, s: L.index_copy(x, 1, i[2, [0, 3]], s[:, :2]),
    "index_fill": lambda L, x, i, s: L.index_fill(x, 1, i[0, :2], -2.9),
    "index_fill-tensor": lambda L, x, i, s: L.index_fill(x, 1, i[0, :2], L.tensor(3.5)),
    "index_put": lambda L, x, i, s: L.index_put(x, (i[0],), s[0], accumulate=True),
    "masked_scatter": lambda L, x, i, s: L.masked_scatter(x, i > 0, s),
    "masked_select": lambda L, x, i, s: L.masked_select(x, i > 0),
    "take": lambda L, x, i, s: L.take(x, i),
    "put": lambda L, x, i, s: L.put(x, i, s, accumulate=True),
    "take_along_dim": lambda L, x, i, s: L.take_along_dim(x, i, 0),
    "diagonal_scatter": lambda L, x, i, s: L.diagonal_scatter(x, s[0, :3].double()),
    "select_scatter": lambda L, x, i, s: L.select_scatter(x, s[0] > 0, 0, 1),
    "slice_scatter": lambda L, x, i, s: L.slice_scatter(x, s[:, 1:3], 1, 1, 3),
}


@pytest.mark.parametrize("fn", [pytest.param(f, id=k) for k, f in INT_CASES.items()])
def test_integer_inputs(fn: Callable[..., Any]) -> None:
    _check(fn, A, REPEATS, B)


# -- in-place forms: the in-place machinery ----------------------------------------

INPLACE: dict[str, Callable[[Any, Any], Any]] = {
    "scatter_": lambda L, t: t.scatter_(0, L.tensor([[1, 0]]), L.ones(1, 2, dtype=L.float64)),
    "scatter_-value": lambda L, t: t.scatter_(0, L.tensor([[1, 0]]), 2.0),
    "scatter_reduce_": lambda L, t: t.scatter_reduce_(0, L.tensor([[1, 0]]), L.ones(1, 2, dtype=L.float64), "sum"),
    "index_add_": lambda L, t: t.index_add_(0, L.tensor([1]), L.ones(1, 2, dtype=L.float64)),
    "index_copy_": lambda L, t: t.index_copy_(0, L.tensor([1]), L.ones(1, 2, dtype=L.float64)),
    "index_fill_": lambda L, t: t.index_fill_(0, L.tensor([1]), 3.0),
    "index_put_": lambda L, t: t.index_put_((L.tensor([1]),), L.ones(2, dtype=L.float64)),
    "index_reduce_": lambda L, t: t.index_reduce_(0, L.tensor([1]), L.ones(1, 2, dtype=L.float64), "amax"),
    "masked_scatter_": lambda L, t: t.masked_scatter_(L.tensor([True, False]), L.ones(2, dtype=L.float64)),
    "put_": lambda L, t: t.put_(L.tensor([3]), L.ones(1, dtype=L.float64)),
}


@pytest.mark.parametrize("act", [pytest.param(a, id=k) for k, a in INPLACE.items()])
def test_inplace_on_leaf_that_requires_grad_raises(act: Callable[[Any, Any], Any]) -> None:
    for L in (torch, agrad):
        t = L.zeros(2, 2, dtype=L.float64, requires_grad=True)
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
            act(L, t)
        with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
            act(L, t.view(2, 2))


@pytest.mark.parametrize("act", [pytest.param(a, id=k) for k, a in INPLACE.items()])
def test_inplace_values_versions_and_views(act: Callable[[Any, Any], Any]) -> None:
    results = []
    for L in (torch, agrad):
        t = L.arange(6, dtype=L.float64).reshape(3, 2)
        assert act(L, t[1:]) is not None  # through a view: the base changes
        results.append((t.tolist(), t._version))
        u = L.zeros(2, 2, dtype=L.float64)
        with L.no_grad():
            out = act(L, u)
        assert out is u
        results.append((u.tolist(), u._version))
    assert results[:2] == results[2:]


@pytest.mark.parametrize("act", [pytest.param(a, id=k) for k, a in INPLACE.items()])
def test_inplace_through_a_view_rebases_gradients(act: Callable[[Any, Any], Any]) -> None:
    x = _x(3, 2)
    grads = []
    for L in (torch, agrad):
        a = L.tensor(x, requires_grad=True)
        b = a * 2
        act(L, b[1:])
        (b ** 2).sum().backward() if L is torch else (b ** 2).sum().backward_sync()
        grads.append(a.grad.numpy())
        assert b.grad_fn.name().endswith("CopySlices")
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12)


def test_saved_input_modified_in_place_raises() -> None:
    for L in (torch, agrad):
        x = L.tensor(_x(3, 2), requires_grad=True)
        y = x * 1
        z = L.scatter_reduce(y, 0, L.tensor([[0, 1]]), L.ones(1, 2, dtype=L.float64), "prod")
        y.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            z.sum().backward() if L is torch else z.sum().backward_sync()


# -- PyTorch's legacy scatter(reduce=...) ------------------------------------------


@pytest.mark.parametrize("value", [False, True])
@pytest.mark.parametrize("reduce", ["add", "multiply"])
def test_legacy_scatter_reduce_values_and_not_implemented_backward(reduce: str, value: bool) -> None:
    x, src = _x(3, 4), _x(3, 4)
    outs = []
    for L in (torch, agrad):
        a = L.tensor(x, requires_grad=True)
        s = L.tensor(src, requires_grad=True)
        if value:
            out = L.scatter(a, 0, L.tensor(REPEATS), 1.5, reduce=reduce)
        elif L is torch:
            with warnings.catch_warnings():  # PyTorch warns once per process
                warnings.simplefilter("ignore")
                out = L.scatter(a, 0, L.tensor(REPEATS), s, reduce=reduce)
        else:
            with pytest.warns(UserWarning, match="The reduce argument of torch.scatter with Tensor src is deprecated"):
                out = L.scatter(a, 0, L.tensor(REPEATS), s, reduce=reduce)
        assert out.requires_grad and out.grad_fn.name() == "torch::autograd::NotImplemented"
        with pytest.raises(RuntimeError, match="derivative for aten::scatter is not implemented"):
            out.sum().backward() if L is torch else out.sum().backward_sync()
        outs.append(out.detach().numpy())
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-12)


# -- deliberate differences, checked by finite differences -------------------------


def test_source_larger_than_index_gets_a_zero_padded_gradient() -> None:
    x = agrad.tensor(_x(3, 4), requires_grad=True)
    src = agrad.tensor(_x(3, 5), requires_grad=True)
    index = agrad.tensor(np.array([[0, 2], [1, 0]]))
    for reduce in ("sum", "prod", "mean", "amax", "amin"):
        out = agrad.scatter_reduce(x, 1, index, src, reduce)
        expected = torch.scatter_reduce(torch.tensor(x.detach().numpy()), 1, torch.tensor(index.numpy()),
                                        torch.tensor(src.detach().numpy()), reduce)
        np.testing.assert_allclose(out.detach().numpy(), expected.numpy(), rtol=1e-12)
        assert gradcheck(lambda a, s, r=reduce: agrad.scatter_reduce(a, 1, index, s, r), [x, src])
        assert gradgradcheck(lambda a, s, r=reduce: agrad.scatter_reduce(a, 1, index, s, r), [x, src])
    assert gradcheck(lambda a, s: agrad.scatter(a, 1, index, s), [x, src])
    agrad.scatter(x, 1, index, src).sum().backward_sync()
    assert src.grad.shape == (3, 5) and not src.grad.numpy()[2:].any() and not src.grad.numpy()[:, 2:].any()


def test_index_fill_value_gradient_with_negative_indices() -> None:
    # PyTorch's IndexFillBackward1 index_selects the raw (negative) indices and raises.
    x = agrad.tensor(_x(3, 2), requires_grad=True)
    v = agrad.tensor(0.5, dtype=agrad.float64, requires_grad=True)
    index = agrad.tensor(np.array([-1, 2, 0]))
    assert gradcheck(lambda a, b: agrad.index_fill(a, 0, index, b), [x, v])
    assert gradgradcheck(lambda a, b: agrad.index_fill(a, 0, index, b), [x, v])
    out = agrad.index_fill(x, 0, index, v)
    out.backward_sync(agrad.ones(3, 2, dtype=agrad.float64))
    assert v.grad.item() == 4.0


def test_take_along_dim_gradcheck() -> None:
    x = agrad.tensor(_x(3, 4), requires_grad=True)
    for indices, dim in ((np.array([[0, 3, 3]]), 1), (np.array([[2], [0]]), 0), (np.array([11, 0, 0]), None)):
        i = agrad.tensor(indices)
        assert gradcheck(lambda a, d=dim, i=i: agrad.take_along_dim(a, i, d), [x])
        assert gradgradcheck(lambda a, d=dim, i=i: agrad.take_along_dim(a, i, d), [x])


def test_scatter_reduce_prod_with_zeros_matches_torch() -> None:
    x = np.array([[0.0, 2.0, 3.0], [1.5, 0.0, -1.0]])
    src = np.array([[2.0, 0.0, 0.5], [0.0, 4.0, 0.0], [3.0, 1.0, 2.0]])
    index = np.array([[0, 1, 1], [0, 1, 0], [1, 0, 1]])
    for include_self in (True, False):
        _check(lambda L, a, i, s, inc=include_self: L.scatter_reduce(a, 0, i, s, "prod", include_self=inc),
               x, index, src)


def test_scatter_reduce_amax_ties_share_the_gradient_as_torch() -> None:
    x = np.array([[1.0, 5.0], [2.0, 2.0]])
    src = np.array([[1.0, 5.0], [3.0, 1.0], [1.0, 2.0]])
    index = np.array([[0, 0], [1, 1], [0, 1]])
    for include_self in (True, False):
        for reduce in ("amax", "amin"):
            _check(lambda L, a, i, s, r=reduce, inc=include_self: L.scatter_reduce(a, 0, i, s, r, include_self=inc),
                   x, index, src)


def test_index_put_gradient_flows_through_create_graph() -> None:
    x = agrad.tensor(_x(4, 3), requires_grad=True)
    v = agrad.tensor(_x(3), requires_grad=True)
    idx = (agrad.tensor(np.array([1, 1, 3])), agrad.tensor(np.array([0, 0, 2])))
    for accumulate in (False, True):
        if accumulate:
            fn = lambda a, b: agrad.index_put(a, idx, b, accumulate=True) ** 2  # noqa: E731
        else:
            fn = lambda a, b: agrad.index_put(a, (idx[0][1:], idx[1][1:]), b[1:]) ** 2  # noqa: E731
        assert gradcheck(fn, [x, v])
        assert gradgradcheck(fn, [x, v])


# -- misuse: PyTorch's errors ------------------------------------------------------


def _F(L: Any) -> Any:
    return L.ones(3, 4)


def _ix(L: Any, *values: Any) -> Any:
    return L.tensor(values[0] if len(values) == 1 else list(values))


ERRORS: list[tuple[str, Callable[[Any], Any]]] = [
    ("scatter-dim", lambda L: L.scatter(_F(L), 2, _ix(L, [[0]]), _F(L))),
    ("scatter-float-index", lambda L: L.scatter(_F(L), 0, _ix(L, [[0.0]]), _F(L))),
    ("scatter-int16-index", lambda L: L.scatter(_F(L), 0, _ix(L, [[0]]).to(L.int16), _F(L))),
    ("scatter-dtype", lambda L: L.scatter(_F(L), 0, _ix(L, [[0]]), _F(L).double())),
    ("scatter-index-ndim", lambda L: L.scatter(_F(L), 0, _ix(L, [0]), _F(L))),
    ("scatter-src-ndim", lambda L: L.scatter(_F(L), 0, _ix(L, [[0]]), L.ones(4, 4, 4))),
    ("scatter-src-0d", lambda L: L.scatter(_F(L), 0, _ix(L, [[0]]), L.tensor(1.0))),
    ("scatter-src-1d", lambda L: L.scatter(_F(L), 0, _ix(L, [[0]]), L.ones(4))),
    ("scatter-index-large", lambda L: L.scatter(_F(L), 0, L.zeros(2, 5, dtype=L.int64), L.ones(4, 4))),
    ("scatter-index-large-value", lambda L: L.scatter(_F(L), 1, L.zeros(4, 1, dtype=L.int64), 1.0)),
    ("scatter-oob", lambda L: L.scatter(_F(L), 0, _ix(L, [[3]]), _F(L))),
    ("scatter-negative", lambda L: L.scatter(_F(L), 1, _ix(L, [[-1]]), 0.0)),
    ("scatter-reduce-name", lambda L: L.scatter(_F(L), 1, _ix(L, [[0]]), 0.0, reduce="sum")),
    ("scatter_reduce-name", lambda L: L.scatter_reduce(_F(L), 1, _ix(L, [[0]]), _F(L), "add")),
    ("scatter_reduce-dtype", lambda L: L.scatter_reduce(_F(L), 1, _ix(L, [[0]]), _F(L).double(), "sum")),
    ("scatter_reduce-number", lambda L: L.scatter_reduce(_F(L), 1, _ix(L, [[0]]), 1.0, "sum")),
    ("scatter_reduce-bool-mean", lambda L: L.scatter_reduce(_F(L) > 0, 1, _ix(L, [[0]]), _F(L) > 0, "mean")),
    ("index_add-dtype", lambda L: L.index_add(_F(L), 0, _ix(L, 0, 1), L.ones(2, 4, dtype=L.float64))),
    ("index_add-count", lambda L: L.index_add(_F(L), 0, _ix(L, 0, 1), L.ones(3, 4))),
    ("index_add-shape", lambda L: L.index_add(_F(L), 0, _ix(L, 0, 1), L.ones(2, 3))),
    ("index_add-dim-of-source", lambda L: L.index_add(_F(L), 1, _ix(L, 0), L.ones(3))),
    ("index_add-0d-source", lambda L: L.index_add(L.ones(3), 0, _ix(L, 0), L.tensor(1.0))),
    ("index_add-oob", lambda L: L.index_add(_F(L), 0, _ix(L, 0, 5), L.ones(2, 4))),
    ("index_add-negative", lambda L: L.index_add(_F(L), 0, _ix(L, -1, 1), L.ones(2, 4))),
    ("index_add-matrix-index", lambda L: L.index_add(_F(L), 0, _ix(L, [[0, 1]]), L.ones(2, 4))),
    ("index_add-float-index", lambda L: L.index_add(_F(L), 0, _ix(L, 0.0, 1.0), L.ones(2, 4))),
    ("index_copy-dtype", lambda L: L.index_copy(_F(L), 0, _ix(L, 0, 2), L.ones(2, 4, dtype=L.float64))),
    ("index_copy-count", lambda L: L.index_copy(_F(L), 0, _ix(L, 0, 2), L.ones(3, 4))),
    ("index_copy-slices", lambda L: L.index_copy(_F(L), 0, _ix(L, 0, 2), L.ones(2, 3))),
    ("index_copy-slices-3d", lambda L: L.index_copy(L.ones(3, 4, 5), 1, _ix(L, 0, 1), L.ones(3, 2, 4))),
    ("index_copy-ndim", lambda L: L.index_copy(_F(L), 0, _ix(L, 0, 1), L.ones(2, 4, 5))),
    ("index_copy-scalar-source", lambda L: L.index_copy(L.ones(3), 0, _ix(L, 0, 1), L.tensor(1.0))),
    ("index_copy-oob", lambda L: L.index_copy(_F(L), 0, _ix(L, 0, 5), L.ones(2, 4))),
    ("index_copy-negative", lambda L: L.index_copy(_F(L), 0, _ix(L, -1, 0), L.ones(2, 4))),
    ("index_copy-matrix-index", lambda L: L.index_copy(_F(L), 0, _ix(L, [[0, 1]]), L.ones(2, 4))),
    ("index_copy-int32-index", lambda L: L.index_copy(_F(L), 0, _ix(L, 0, 1).int(), L.ones(2, 4))),
    ("index_fill-oob", lambda L: L.index_fill(_F(L), 1, _ix(L, 4), 2.0)),
    ("index_fill-negative-oob", lambda L: L.index_fill(_F(L), 1, _ix(L, -5), 2.0)),
    ("index_fill-int32-index", lambda L: L.index_fill(_F(L), 1, _ix(L, 1).int(), 2.0)),
    ("index_fill-matrix-index", lambda L: L.index_fill(_F(L), 1, _ix(L, [[1]]), 2.0)),
    ("index_fill-1d-value", lambda L: L.index_fill(_F(L), 1, _ix(L, 1), L.tensor([2.0]))),
    ("index_fill-dim", lambda L: L.index_fill(_F(L), 2, _ix(L, 1), 2.0)),
    ("index_fill-overflow", lambda L: L.index_fill(_F(L).long(), 1, _ix(L, 1), 1e30)),
    ("index_put-dtype", lambda L: L.index_put(_F(L), (_ix(L, 0, 1),), L.ones(4, dtype=L.float64))),
    ("index_put-values", lambda L: L.index_put(_F(L), (_ix(L, 0, 1),), L.ones(3, 4))),
    ("index_put-mask-values", lambda L: L.index_put(_F(L), (_F(L) > 0,), L.ones(5))),
    ("index_put-number", lambda L: L.index_put(_F(L), (_ix(L, 0, 1),), 1.0)),
    ("index_put-tensor-indices", lambda L: L.index_put(_F(L), _ix(L, 0, 1), L.ones(4))),
    ("index_put-none", lambda L: L.index_put(_F(L), (None, _ix(L, 0)), L.ones(1))),
    ("index_put-too-many", lambda L: L.index_put(_F(L), (_ix(L, 0),) * 3, L.ones(1))),
    ("index_put-oob", lambda L: L.index_put(_F(L), (_ix(L, 0), _ix(L, 4)), L.tensor(1.0))),
    ("index_put-values-before-range", lambda L: L.index_put(_F(L), (_ix(L, 0, 5),), L.ones(3, 4))),
    ("index_put-dtype-before-range", lambda L: L.index_put(_F(L), (_ix(L, 0, 5),), L.ones(4, dtype=L.float64))),
    ("index_put-negative-oob", lambda L: L.index_put(_F(L), (_ix(L, -4),), L.ones(4))),
    ("index_put-float-index", lambda L: L.index_put(_F(L), (_ix(L, 0.0),), L.ones(4))),
    ("index_put-int16-index", lambda L: L.index_put(_F(L), (_ix(L, 0).to(L.int16),), L.ones(4))),
    ("index_put-mask-shape", lambda L: L.index_put(_F(L), (_ix(L, True, False),), L.ones(4))),
    ("index_put-broadcast", lambda L: L.index_put(_F(L), (_ix(L, 0, 1), _ix(L, 0, 1, 2)), L.ones(1))),
    ("index_put-0d-mask", lambda L: L.index_put(L.tensor(1.0), (L.tensor(True),), L.tensor(2.0))),
    ("index_reduce-sum", lambda L: L.index_reduce(_F(L), 0, _ix(L, 0), L.ones(1, 4), "sum")),
    ("index_reduce-dtype", lambda L: L.index_reduce(_F(L), 0, _ix(L, 0), L.ones(1, 4).double(), "prod")),
    ("index_reduce-oob", lambda L: L.index_reduce(_F(L), 0, _ix(L, 3), L.ones(1, 4), "prod")),
    ("index_reduce-negative", lambda L: L.index_reduce(_F(L), 0, _ix(L, -1), L.ones(1, 4), "amax")),
    ("index_reduce-count", lambda L: L.index_reduce(_F(L), 0, _ix(L, 0, 1), L.ones(1, 4), "mean")),
    ("masked_scatter-mask", lambda L: L.masked_scatter(_F(L), _ix(L, 1, 0, 1, 0), L.ones(12))),
    ("masked_scatter-dtype", lambda L: L.masked_scatter(_F(L), _F(L) > 0, L.ones(12, dtype=L.float64))),
    ("masked_scatter-short", lambda L: L.masked_scatter(_F(L), _F(L) > 0, L.ones(11))),
    ("masked_scatter-broadcast", lambda L: L.masked_scatter(_F(L), _ix(L, True, False), L.ones(12))),
    ("masked_select-mask", lambda L: L.masked_select(_F(L), _ix(L, 1, 0, 1, 0))),
    ("masked_select-broadcast", lambda L: L.masked_select(_F(L), _ix(L, True, False))),
    ("take-oob", lambda L: L.take(_F(L), _ix(L, 12))),
    ("take-negative-oob", lambda L: L.take(_F(L), _ix(L, -13))),
    ("take-int32", lambda L: L.take(_F(L), _ix(L, 1).int())),
    ("take-empty", lambda L: L.take(L.ones(0), _ix(L, 0))),
    ("put-oob", lambda L: L.put(_F(L), _ix(L, 12), L.ones(1))),
    ("put-count", lambda L: L.put(_F(L), _ix(L, 1), L.ones(2))),
    ("put-dtype", lambda L: L.put(_F(L), _ix(L, 1), L.ones(1, dtype=L.float64))),
    ("put-float-index", lambda L: L.put(_F(L), _ix(L, 1.0), L.ones(1))),
    ("put-empty", lambda L: L.put(L.ones(0), _ix(L, 0), L.ones(1))),
    ("take_along_dim-ndim", lambda L: L.take_along_dim(_F(L), _ix(L, 0, 1), 0)),
    ("take_along_dim-dtype", lambda L: L.take_along_dim(_F(L), _ix(L, [[0, 1]]).int(), 0)),
    ("take_along_dim-broadcast", lambda L: L.take_along_dim(_F(L), _ix(L, [[0, 1]]), 0)),
    ("take_along_dim-dim", lambda L: L.take_along_dim(_F(L), _ix(L, [[0, 1]]), 2)),
    ("take_along_dim-0d", lambda L: L.take_along_dim(L.tensor(1.0), L.tensor(0), 0)),
    ("take_along_dim-flat-view", lambda L: L.take_along_dim(_F(L).t(), _ix(L, 0, 1))),
    ("diagonal_scatter-size", lambda L: L.diagonal_scatter(_F(L), L.ones(4))),
    ("diagonal_scatter-dims", lambda L: L.diagonal_scatter(_F(L), L.ones(3), 0, 1, -1)),
    ("select_scatter-index", lambda L: L.select_scatter(_F(L), L.ones(3), 1, 4)),
    ("select_scatter-size", lambda L: L.select_scatter(_F(L), L.ones(1, 4), 0, 1)),
    ("select_scatter-0d", lambda L: L.select_scatter(L.tensor(1.0), L.tensor(2.0), 0, 0)),
    ("slice_scatter-size", lambda L: L.slice_scatter(_F(L), L.ones(3, 3), 1, 0, 2)),
    ("slice_scatter-step", lambda L: L.slice_scatter(_F(L), L.ones(3, 1), 1, 0, 4, 0)),
    ("slice_scatter-0d", lambda L: L.slice_scatter(L.tensor(1.0), L.tensor(2.0))),
]


def _raised(fn: Callable[[Any], Any], L: Any) -> BaseException:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fn(L)
        except Exception as e:  # noqa: BLE001 - the exception is what is compared
            return e
    raise AssertionError(f"{L.__name__} raised nothing")


@pytest.mark.parametrize("fn", [pytest.param(f, id=k) for k, f in ERRORS])
def test_errors_match_torch(fn: Callable[[Any], Any]) -> None:
    expected, got = _raised(fn, torch), _raised(fn, agrad)
    assert type(got) is type(expected), f"agrad raised {type(got).__name__}: {got}; torch {expected!r}"
    assert str(expected).split("\n")[0] in str(got)


FAILED_INPLACE: list[tuple[str, Callable[[Any, Any], Any]]] = [
    ("scatter_", lambda L, t: t.scatter_(1, L.tensor([[0, 5]]), L.ones(1, 2))),
    ("scatter_reduce_", lambda L, t: t.scatter_reduce_(1, L.tensor([[0, 5]]), L.ones(1, 2), "sum")),
    ("index_add_", lambda L, t: t.index_add_(1, L.tensor([0, 5]), L.ones(2, 2))),
    ("index_copy_", lambda L, t: t.index_copy_(1, L.tensor([0, 5]), L.ones(2, 2))),
    ("index_fill_", lambda L, t: t.index_fill_(1, L.tensor([0, 5]), 1.0)),
    ("index_put_", lambda L, t: t.index_put_((L.tensor([0, 5]),), L.ones(3))),
    ("index_reduce_", lambda L, t: t.index_reduce_(1, L.tensor([0, 5]), L.ones(2, 2), "amin")),
    ("masked_scatter_", lambda L, t: t.masked_scatter_(L.ones(2, 3, dtype=L.bool), L.ones(5))),
    ("masked_scatter_-mask-ndim", lambda L, t: t.masked_scatter_(L.ones(1, 2, 3, dtype=L.bool), L.ones(6))),
    ("masked_scatter_-mask-shape", lambda L, t: t.masked_scatter_(L.ones(2, dtype=L.bool), L.ones(6))),
    ("put_", lambda L, t: t.put_(L.tensor([0, 6]), L.ones(2))),
]


@pytest.mark.parametrize("act", [pytest.param(a, id=k) for k, a in FAILED_INPLACE])
def test_failed_inplace_leaves_tensor_unchanged(act: Callable[[Any, Any], Any]) -> None:
    expected = _raised(lambda L: act(L, L.ones(2, 3)), torch)
    t = agrad.ones(2, 3)
    got = _raised(lambda L: act(L, t), agrad)
    assert type(got) is type(expected)
    assert str(expected).split("\n")[0] in str(got)
    assert t.tolist() == [[1.0] * 3] * 2 and t._version == 0


def test_inplace_write_of_a_source_that_requires_grad_into_a_plain_tensor() -> None:
    grads = []
    for L in (torch, agrad):
        s = L.tensor([1.0, 2.0], dtype=L.float64, requires_grad=True)
        a = L.zeros(3, dtype=L.float64)
        a.index_put_((L.tensor([0, 2]),), s, accumulate=True)
        b = L.zeros(2, 3, dtype=L.float64)
        b.scatter_(1, L.tensor([[2, 0]]), s.reshape(1, 2))
        assert a.grad_fn.name() == "IndexPutBackward0" and b.grad_fn.name() == "ScatterBackward0"
        loss = (a * L.tensor([1.0, 2.0, 3.0], dtype=L.float64)).sum() + (b ** 2).sum()
        loss.backward() if L is torch else loss.backward_sync()
        grads.append(s.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12)
