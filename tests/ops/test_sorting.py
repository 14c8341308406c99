"""Sorting, selection, cumulative and nan-reduction ops against PyTorch.

The op table (tests/ops/test_op_table.py) checks each entry of
``agrad._ops._sorting`` on its samples; here the public functions, most of
them composites of an index entry and a values entry (Note [Values at
indices]), are checked end to end.  Each case is a call ``fn(lib, *inputs)``
run on both libraries: every output (values, indices, counts...) equal to
PyTorch's in value, dtype and shape, in float64 and float32; the input
gradients through the differentiable outputs equal to PyTorch's; the
outputs' node names equal; and, where finite differences apply (no ties, no
NaN), ``gradcheck`` and ``gradgradcheck``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
from agrad.autograd import gradcheck, gradgradcheck
from tests.helpers import non_contiguous, requires_torch, torch

_rng = np.random.default_rng(11)
X = _rng.uniform(-2, 2, (3, 5, 4))
M = _rng.uniform(-2, 2, (4, 6))
V = _rng.uniform(-2, 2, 7)
S = np.array(1.25)
E = np.zeros((0, 3))
TIES = np.array([[1.0, 2.0, 1.0, 2.0, 1.0, 3.0, 1.0], [0.0, 0.0, 3.0, -1.0, 3.0, 0.0, 3.0]])
NANS = np.array([[1.0, np.nan, 2.0, np.nan, 0.0], [np.nan] * 5, [3.0, 2.0, np.nan, 1.0, 0.0]])
INTS = np.array([[3, 1, 2, 1], [0, 5, 5, 2], [4, 4, 1, 0]])
BOOLS = np.array([[True, False, True], [False, False, True]])
ZEROS = M.copy()
ZEROS[0, 2] = ZEROS[1, 1] = ZEROS[1, 4] = ZEROS[2, 0] = ZEROS[3, 5] = 0.0  # one zero, two, at either end
ZEROS[3, 1] = 0.0
SPREAD = np.array([[-1000.0, 0.0, 5.0, -3.0], [2.0, -40.0, 700.0, 699.0]])
Q = np.array([0.0, 0.25, 0.6, 1.0])
NAN_X = X.copy()
NAN_X[0, 1, 2] = NAN_X[2, 3, 0] = NAN_X[1, 1, 1] = NAN_X[1, 2, 1] = np.nan
EDGES = np.array([1.0, 3.0, 5.0, 7.0])


class Case:
    """A call ``fn(lib, *tensors)`` of ``agrad`` or ``torch`` on tensors made from ``inputs``.

    ``fd``: finite differences apply (no ties or NaN near the inputs), so
    gradcheck and gradgradcheck run.  ``node``: the outputs' nodes are named as
    PyTorch's (not for ``quantile``, whose last node is whichever op the
    composite ends with).
    """

    def __init__(self, fn: Callable[..., Any], *inputs: np.ndarray, fd: bool = True, node: bool = True) -> None:
        self.fn = fn
        self.inputs = inputs
        self.fd = fd
        self.node = node


CASES: dict[str, Case] = {
    # sort, msort, topk
    "sort": Case(lambda L, x: L.sort(x), X),
    "sort-dim0-descending": Case(lambda L, x: L.sort(x, 0, True), X),
    "sort-stable": Case(lambda L, x: L.sort(x, dim=1, stable=True), X),
    "sort-stable-descending": Case(lambda L, x: L.sort(x, descending=True, stable=True), TIES, fd=False),
    "sort-ties": Case(lambda L, x: L.sort(x, dim=-1), TIES, fd=False),
    "sort-ties-descending": Case(lambda L, x: L.sort(x, dim=1, descending=True), TIES, fd=False),
    "sort-nan": Case(lambda L, x: L.sort(x), NANS, fd=False),
    "sort-nan-descending": Case(lambda L, x: L.sort(x, descending=True), NANS, fd=False),
    "sort-0d": Case(lambda L, x: L.sort(x), S),
    "sort-empty": Case(lambda L, x: L.sort(x, 0), E),
    "sort-int": Case(lambda L, x: L.sort(x, 0), INTS),
    "sort-bool": Case(lambda L, x: L.sort(x, descending=True), BOOLS),
    "sort-method": Case(lambda L, x: x.sort(1), M),
    "sort-noncontiguous": Case(lambda L, x: L.sort(x[:, ::2], 0), M),
    "msort": Case(lambda L, x: L.msort(x), X),
    "msort-method": Case(lambda L, x: x.msort(), TIES, fd=False),
    "topk": Case(lambda L, x: L.topk(x, 2), X),
    "topk-smallest-dim1": Case(lambda L, x: L.topk(x, 3, dim=1, largest=False), X),
    "topk-k0": Case(lambda L, x: L.topk(x, 0), M),
    "topk-0d": Case(lambda L, x: L.topk(x, 1), S),
    "topk-int": Case(lambda L, x: L.topk(x, 2), np.array([[3, 1, 2, 7], [0, 5, 6, 2]])),
    "topk-nan": Case(lambda L, x: L.topk(x[[0, 2]], 3), NANS, fd=False),
    "topk-method": Case(lambda L, x: x.topk(4, 0), M),
    # kthvalue, median, nanmedian, mode
    "kthvalue": Case(lambda L, x: L.kthvalue(x, 3), X),
    "kthvalue-keepdim": Case(lambda L, x: L.kthvalue(x, 2, 1, True), X),
    "kthvalue-0d": Case(lambda L, x: L.kthvalue(x, 1), S),
    "kthvalue-nan": Case(lambda L, x: L.kthvalue(x[[0, 2]], 2), NANS, fd=False),
    "kthvalue-method": Case(lambda L, x: x.kthvalue(4, dim=0), M),
    "median": Case(lambda L, x: L.median(x), X),
    "median-even": Case(lambda L, x: L.median(x), M),
    "median-ties": Case(lambda L, x: L.median(x), TIES, fd=False),
    "median-nan": Case(lambda L, x: L.median(x), NANS, fd=False),
    "median-int": Case(lambda L, x: L.median(x), INTS),
    "median-0d": Case(lambda L, x: L.median(x), S),
    "median-empty": Case(lambda L, x: L.median(x), E),
    "median-dim": Case(lambda L, x: L.median(x, 1), X),
    "median-dim-keepdim": Case(lambda L, x: L.median(x, -1, keepdim=True), X),
    "median-dim-ties": Case(lambda L, x: L.median(x, 1), TIES, fd=False),
    "median-dim-ties-0": Case(lambda L, x: L.median(x, 0), TIES, fd=False),
    "median-dim-nan": Case(lambda L, x: L.median(x, 1), NANS, fd=False),
    "median-dim-int": Case(lambda L, x: L.median(x, 1), INTS),
    "median-dim-0d": Case(lambda L, x: L.median(x, 0), S),
    "median-method": Case(lambda L, x: x.median(dim=0), M),
    "nanmedian": Case(lambda L, x: L.nanmedian(x), M),
    "nanmedian-nan": Case(lambda L, x: L.nanmedian(x), NAN_X, fd=False),
    "nanmedian-all-nan": Case(lambda L, x: L.nanmedian(x[1]), NANS, fd=False),
    "nanmedian-dim-nan": Case(lambda L, x: L.nanmedian(x[[0, 2]], 1), NANS, fd=False),
    "nanmedian-dim-nan-keepdim": Case(lambda L, x: L.nanmedian(x, 2, True), NAN_X, fd=False),
    "nanmedian-method": Case(lambda L, x: x.nanmedian(1), M),
    "mode": Case(lambda L, x: L.mode(x), TIES, fd=False),
    "mode-dim0-keepdim": Case(lambda L, x: L.mode(x, 0, True), INTS),
    "mode-distinct": Case(lambda L, x: L.mode(x, 1), X),
    "mode-bool": Case(lambda L, x: L.mode(x), BOOLS),
    "mode-0d": Case(lambda L, x: L.mode(x), S),
    "mode-method": Case(lambda L, x: x.mode(), TIES, fd=False),
    # quantile, nanquantile (composites: their last node is not PyTorch's)
    "quantile": Case(lambda L, x: L.quantile(x, 0.3), X, node=False),
    "quantile-dim": Case(lambda L, x: L.quantile(x, 0.75, dim=1), X, node=False),
    "quantile-dim-keepdim": Case(lambda L, x: L.quantile(x, 0.4, dim=-1, keepdim=True), X, node=False),
    "quantile-q-tensor": Case(lambda L, x: L.quantile(x, L.tensor(Q, dtype=x.dtype), dim=0), M, node=False),
    "quantile-q-tensor-keepdim": Case(lambda L, x: L.quantile(x, L.tensor(Q, dtype=x.dtype), keepdim=True), M,
                                      node=False),
    "quantile-q-0d": Case(lambda L, x: L.quantile(x, L.tensor(0.5, dtype=x.dtype), dim=1), M, node=False),
    "quantile-q-grad": Case(lambda L, x, q: L.quantile(x, q, dim=1), M, np.array([0.1, 0.45, 0.9]), node=False),
    "quantile-lower": Case(lambda L, x: L.quantile(x, 0.3, 1, interpolation="lower"), X, node=False),
    "quantile-higher": Case(lambda L, x: L.quantile(x, 0.3, 1, interpolation="higher"), X, node=False),
    "quantile-midpoint": Case(lambda L, x: L.quantile(x, 0.3, 1, interpolation="midpoint"), X, node=False),
    "quantile-nearest": Case(lambda L, x: L.quantile(x, L.tensor([0.125, 0.375, 0.625, 0.5], dtype=x.dtype),
                                                     interpolation="nearest"), np.arange(5.0), node=False),
    "quantile-ties": Case(lambda L, x: L.quantile(x, 0.5, 1), TIES, fd=False, node=False),
    "quantile-nan": Case(lambda L, x: L.quantile(x, 0.5, 1), NANS, fd=False, node=False),
    "quantile-0d": Case(lambda L, x: L.quantile(x, L.tensor([0.2, 0.5], dtype=x.dtype), dim=0, keepdim=True), S,
                        node=False),
    "quantile-method": Case(lambda L, x: x.quantile(0.9), V, node=False),
    "nanquantile": Case(lambda L, x: L.nanquantile(x, 0.3, dim=2), NAN_X, fd=False, node=False),
    "nanquantile-all-nan": Case(lambda L, x: L.nanquantile(x, L.tensor(Q, dtype=x.dtype), 1), NANS, fd=False,
                                node=False),
    "nanquantile-no-nan": Case(lambda L, x: L.nanquantile(x, 0.6, 0, interpolation="midpoint"), M, node=False),
    "nanquantile-method": Case(lambda L, x: x.nanquantile(0.2), NAN_X, fd=False, node=False),
    # aminmax
    "aminmax": Case(lambda L, x: L.aminmax(x), X),
    "aminmax-dim": Case(lambda L, x: L.aminmax(x, dim=1), X),
    "aminmax-keepdim": Case(lambda L, x: L.aminmax(x, dim=-1, keepdim=True), X),
    "aminmax-all-keepdim": Case(lambda L, x: L.aminmax(x, keepdim=True), M),
    "aminmax-ties": Case(lambda L, x: L.aminmax(x, dim=1), TIES, fd=False),
    "aminmax-int": Case(lambda L, x: L.aminmax(x), INTS),
    "aminmax-bool": Case(lambda L, x: L.aminmax(x, dim=0), BOOLS),
    "aminmax-0d": Case(lambda L, x: L.aminmax(x, dim=0), S),
    "aminmax-empty-dim": Case(lambda L, x: L.aminmax(x, dim=1), E),
    "aminmax-method": Case(lambda L, x: x.aminmax(dim=0), M),
    # cumulative
    "cumprod": Case(lambda L, x: L.cumprod(x, 1), M),
    "cumprod-dim0": Case(lambda L, x: L.cumprod(x, dim=0), X),
    "cumprod-zeros": Case(lambda L, x: L.cumprod(x, 1), ZEROS),
    "cumprod-zeros-dim0": Case(lambda L, x: L.cumprod(x, 0), ZEROS),
    "cumprod-zeros-noncontiguous": Case(lambda L, x: L.cumprod(x[:, 1::2], -1), ZEROS),
    "cumprod-all-zeros": Case(lambda L, x: L.cumprod(x * 0, 0), V),
    "cumprod-dtype": Case(lambda L, x: L.cumprod(x, 1, dtype=L.float64), M),
    "cumprod-int": Case(lambda L, x: L.cumprod(x, 1), INTS),
    "cumprod-bool": Case(lambda L, x: L.cumprod(x, 0), BOOLS),
    "cumprod-0d": Case(lambda L, x: L.cumprod(x, 0), S),
    "cumprod-empty": Case(lambda L, x: L.cumprod(x, 1), E),
    "cumprod-method": Case(lambda L, x: x.cumprod(-1), ZEROS),
    "cummax": Case(lambda L, x: L.cummax(x, 1), X),
    "cummin": Case(lambda L, x: L.cummin(x, -1), X),
    "cummax-ties": Case(lambda L, x: L.cummax(x, 1), TIES, fd=False),
    "cummin-ties": Case(lambda L, x: L.cummin(x, 1), TIES, fd=False),
    "cummax-nan": Case(lambda L, x: L.cummax(x, 1), NANS, fd=False),
    "cummin-nan": Case(lambda L, x: L.cummin(x, 1), NANS, fd=False),
    "cummax-int": Case(lambda L, x: L.cummax(x, 0), INTS),
    "cummin-bool": Case(lambda L, x: L.cummin(x, 1), BOOLS),
    "cummax-0d": Case(lambda L, x: L.cummax(x, 0), S),
    "cummax-empty": Case(lambda L, x: L.cummax(x, 0), E),
    "cummax-method": Case(lambda L, x: x.cummax(0), M),
    "cummin-method": Case(lambda L, x: x.cummin(0), M),
    "logcumsumexp": Case(lambda L, x: L.logcumsumexp(x, 1), X),
    "logcumsumexp-spread": Case(lambda L, x: L.logcumsumexp(x, 1), SPREAD),
    "logcumsumexp-spread-dim0": Case(lambda L, x: L.logcumsumexp(x, 0), SPREAD),
    "logcumsumexp-0d": Case(lambda L, x: L.logcumsumexp(x, 0), S),
    "logcumsumexp-method": Case(lambda L, x: x.logcumsumexp(-2), X),
    # nansum, nanmean
    "nansum": Case(lambda L, x: L.nansum(x), NAN_X, fd=False),
    "nansum-dim": Case(lambda L, x: L.nansum(x, 1), NAN_X, fd=False),
    "nansum-dims-keepdim": Case(lambda L, x: L.nansum(x, (0, 2), True), NAN_X, fd=False),
    "nansum-no-nan": Case(lambda L, x: L.nansum(x, dim=-1), X),
    "nansum-dtype": Case(lambda L, x: L.nansum(x, dtype=L.float64), M),
    "nansum-int": Case(lambda L, x: L.nansum(x, 0), INTS),
    "nansum-bool": Case(lambda L, x: L.nansum(x), BOOLS),
    "nansum-empty": Case(lambda L, x: L.nansum(x), E),
    "nansum-method": Case(lambda L, x: x.nansum(dim=[0, 1]), NAN_X, fd=False),
    "nanmean": Case(lambda L, x: L.nanmean(x), NAN_X, fd=False),
    "nanmean-dim": Case(lambda L, x: L.nanmean(x, 2), NAN_X, fd=False),
    "nanmean-dims-keepdim": Case(lambda L, x: L.nanmean(x, (0, 1), keepdim=True), NAN_X, fd=False),
    "nanmean-all-nan": Case(lambda L, x: L.nanmean(x, 1), NANS, fd=False),
    "nanmean-no-nan": Case(lambda L, x: L.nanmean(x, 0), M),
    "nanmean-dtype": Case(lambda L, x: L.nanmean(x, 1, dtype=L.float64), M),
    "nanmean-method": Case(lambda L, x: x.nanmean(-1, True), NAN_X, fd=False),
    # unique, unique_consecutive
    "unique": Case(lambda L, x: L.unique(x), INTS),
    "unique-all": Case(lambda L, x: L.unique(x, return_inverse=True, return_counts=True), INTS),
    "unique-unsorted": Case(lambda L, x: L.unique(x, sorted=False, return_inverse=True), INTS),
    "unique-dim0": Case(lambda L, x: L.unique(x, dim=0, return_inverse=True, return_counts=True),
                        np.array([[1, 2], [0, 1], [1, 2], [0, 0]])),
    "unique-dim1": Case(lambda L, x: L.unique(x, return_counts=True, dim=1), np.array([[1, 0, 1], [2, 1, 2]])),
    "unique-nan": Case(lambda L, x: L.unique(x.detach(), return_inverse=True, return_counts=True),
                       np.array([np.nan, 1.0, np.nan, 0.5, 1.0]), fd=False),
    "unique-0d": Case(lambda L, x: L.unique(x, return_inverse=True, return_counts=True), np.array(3)),
    "unique-bool": Case(lambda L, x: L.unique(x, return_counts=True), BOOLS),
    "unique-method": Case(lambda L, x: x.unique(return_inverse=True), INTS),
    "unique_consecutive": Case(lambda L, x: L.unique_consecutive(x, return_inverse=True, return_counts=True),
                               np.array([1, 1, 2, 2, 3, 1, 1])),
    "unique_consecutive-2d": Case(lambda L, x: L.unique_consecutive(x, return_counts=True), INTS),
    "unique_consecutive-dim": Case(lambda L, x: L.unique_consecutive(x, return_inverse=True, dim=0),
                                   np.array([[1, 2], [1, 2], [0, 1], [1, 2]])),
    "unique_consecutive-method": Case(lambda L, x: x.unique_consecutive(), np.array([3, 3, 1, 3])),
    # searching and counting
    "searchsorted": Case(lambda L, s, x: L.searchsorted(s, x.detach()), EDGES, np.array([0.0, 3.0, 6.0, 9.0]),
                         fd=False),
    "searchsorted-right": Case(lambda L, s, x: L.searchsorted(s, x, right=True), EDGES.astype(int),
                               np.array([[1, 3], [5, 8]])),
    "searchsorted-side": Case(lambda L, s, x: L.searchsorted(s, x, side="right", out_int32=True),
                              EDGES.astype(int), np.array([[1, 3], [5, 8]])),
    "searchsorted-scalar": Case(lambda L, s: L.searchsorted(s.detach(), 3.0), EDGES, fd=False),
    "searchsorted-sorter": Case(lambda L, s, x, i: L.searchsorted(s, x, sorter=i),
                                np.array([5, 1, 3]), np.array([2, 4, 6]), np.array([1, 2, 0])),
    "searchsorted-rows": Case(lambda L, s, x: L.searchsorted(s, x), np.array([[1, 3, 5, 7], [2, 4, 6, 8]]),
                              np.array([[3, 6, 9], [1, 2, 8]])),
    "bucketize": Case(lambda L, x, b: L.bucketize(x, b), np.array([[0, 3, 6], [9, 7, 1]]), EDGES.astype(int)),
    "bucketize-right": Case(lambda L, x, b: L.bucketize(x, b, right=True, out_int32=True), np.array([3, 7, 8]),
                            EDGES.astype(int)),
    "bucketize-scalar": Case(lambda L, b: L.bucketize(4, b), EDGES.astype(int)),
    "histc": Case(lambda L, x: L.histc(x.detach(), bins=6), X, fd=False),
    "histc-range": Case(lambda L, x: L.histc(x.detach(), 5, -1, 1.5), X, fd=False),
    "histc-method": Case(lambda L, x: x.detach().histc(3), M, fd=False),
    "bincount": Case(lambda L, x: L.bincount(x), np.array([0, 3, 3, 1, 0, 7])),
    "bincount-weights": Case(lambda L, x, w: L.bincount(x, w.detach(), 10), np.array([0, 3, 3, 1, 0, 7]), V[:6],
                             fd=False),
    "bincount-method": Case(lambda L, x: x.bincount(minlength=2), np.array([1, 1, 0])),
    "nonzero": Case(lambda L, x: L.nonzero(x), INTS - 1),
    "nonzero-as_tuple": Case(lambda L, x: L.nonzero(x, as_tuple=True), INTS - 1),
    "nonzero-0d-as_tuple": Case(lambda L, x: L.nonzero(x, as_tuple=True), np.array(2)),
    "nonzero-0d-zero": Case(lambda L, x: L.nonzero(x, as_tuple=True), np.array(0)),
    "nonzero-method": Case(lambda L, x: x.nonzero(), BOOLS),
    "argwhere": Case(lambda L, x: L.argwhere(x), INTS - 1),
    "argwhere-method": Case(lambda L, x: x.argwhere(), np.array(3)),
    "count_nonzero": Case(lambda L, x: L.count_nonzero(x), INTS - 1),
    "count_nonzero-dims": Case(lambda L, x: L.count_nonzero(x, (0, 1)), INTS - 1),
    "count_nonzero-method": Case(lambda L, x: x.count_nonzero(dim=-1), BOOLS),
}
PARAMS = [pytest.param(case, id=name) for name, case in CASES.items()]
# Finite differences check the cases with a float input (the others are integer-valued).
FD_PARAMS = [pytest.param(case, id=name) for name, case in CASES.items()
             if case.fd and any(a.dtype.kind == "f" for a in case.inputs)]


def _agrad_inputs(case: Case, dtype: Any) -> list[agrad.Tensor]:
    return [agrad.tensor(a, dtype=dtype, requires_grad=True) if a.dtype.kind == "f" else agrad.tensor(a)
            for a in case.inputs]


def _torch_inputs(case: Case, dtype: Any) -> list[Any]:
    return [torch.tensor(a, dtype=dtype, requires_grad=True) if a.dtype.kind == "f" else torch.tensor(a)
            for a in case.inputs]


def _outputs(result: Any) -> tuple[Any, ...]:
    return tuple(result) if isinstance(result, tuple) else (result,)


def _compare(ours: Any, theirs: Any, rtol: float, atol: float) -> None:
    ours, theirs = _outputs(ours), _outputs(theirs)
    assert len(ours) == len(theirs)
    for a, t in zip(ours, theirs):
        assert a.dtype.name == str(t.dtype).removeprefix("torch."), f"dtype {a.dtype} != {t.dtype}"
        assert a.shape == tuple(t.shape), f"shape {a.shape} != {tuple(t.shape)}"
        np.testing.assert_allclose(a.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=atol)


@requires_torch
@pytest.mark.parametrize("case", PARAMS)
def test_matches_torch_float64(case: Case) -> None:
    """Every output, the node names and the input gradients equal PyTorch's."""
    _check_against_torch(case, _agrad_inputs(case, agrad.float64))


@requires_torch
@pytest.mark.parametrize("case", [p for p in PARAMS
                                  if any(a.dtype.kind == "f" and not non_contiguous(a).flags.c_contiguous
                                         for a in p.values[0].inputs)])
def test_matches_torch_on_non_contiguous_inputs(case: Case) -> None:
    """The same, every float input a leaf over non-contiguous memory."""
    _check_against_torch(case, [agrad.from_numpy(non_contiguous(a.astype(np.float64))).requires_grad_()
                                if a.dtype.kind == "f" else t
                                for a, t in zip(case.inputs, _agrad_inputs(case, agrad.float64))])


def _check_against_torch(case: Case, ours: list[agrad.Tensor]) -> None:
    theirs = _torch_inputs(case, torch.float64)
    out, expected = _outputs(case.fn(agrad, *ours)), _outputs(case.fn(torch, *theirs))
    _compare(out, expected, rtol=1e-10, atol=1e-12)
    for a, t in zip(out, expected):
        assert a.requires_grad == t.requires_grad
        if case.node:
            assert (a.grad_fn and a.grad_fn.name()) == (t.grad_fn and t.grad_fn.name())
    differentiable = [(a, t) for a, t in zip(out, expected) if t.requires_grad]
    if not differentiable:
        return
    rng = np.random.default_rng(5)
    weights = [rng.standard_normal(t.shape) for _, t in differentiable]
    sum(((a * agrad.tensor(w)).sum() for (a, _), w in zip(differentiable, weights)), agrad.tensor(0.0)).backward_sync()
    sum((t * torch.tensor(w)).sum() for (_, t), w in zip(differentiable, weights)).backward()
    for a, t in zip(ours, theirs):
        if t.requires_grad:
            assert a.grad is not None
            np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)


@requires_torch
@pytest.mark.parametrize("case", PARAMS)
def test_matches_torch_float32(case: Case) -> None:
    """The same calls in float32 keep PyTorch's dtypes and values."""
    out = case.fn(agrad, *_agrad_inputs(case, agrad.float32))
    expected = case.fn(torch, *_torch_inputs(case, torch.float32))
    _compare(out, expected, rtol=1e-5, atol=1e-6)


def _differentiable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``'s floating outputs (the values, not the indices)."""
    return lambda *ts: tuple(o for o in _outputs(fn(*ts)) if o.dtype.is_floating_point)


@pytest.mark.parametrize("case", FD_PARAMS)
@pytest.mark.parametrize("check", [gradcheck, gradgradcheck], ids=["grad", "gradgrad"])
def test_gradcheck(case: Case, check: Callable[..., bool]) -> None:
    """First and second derivatives match finite differences (float64)."""
    inputs = _agrad_inputs(case, agrad.float64)
    fn = _differentiable(lambda *ts: case.fn(agrad, *ts))
    if not any(t.requires_grad for t in inputs) or not any(o.requires_grad for o in fn(*inputs)):
        pytest.skip("not differentiable")
    assert check(fn, inputs)


# -- return types -----------------------------------------------------------------------


@pytest.mark.parametrize(("call", "name", "fields"), [
    (lambda x: agrad.sort(x), "sort", ("values", "indices")),
    (lambda x: agrad.topk(x, 2), "topk", ("values", "indices")),
    (lambda x: agrad.kthvalue(x, 1), "kthvalue", ("values", "indices")),
    (lambda x: agrad.median(x, 0), "median", ("values", "indices")),
    (lambda x: agrad.nanmedian(x, 0), "nanmedian", ("values", "indices")),
    (lambda x: agrad.mode(x, 0), "mode", ("values", "indices")),
    (lambda x: agrad.cummax(x, 0), "cummax", ("values", "indices")),
    (lambda x: agrad.cummin(x, 0), "cummin", ("values", "indices")),
    (lambda x: agrad.aminmax(x), "aminmax", ("min", "max")),
])
def test_return_types(call: Callable[..., Any], name: str, fields: tuple[str, str]) -> None:
    """Results are tuples with PyTorch's field names, type name and repr."""
    result = call(agrad.tensor([3.0, 1.0, 2.0]))
    assert isinstance(result, tuple) and len(result) == 2
    assert type(result).__name__ == name
    assert getattr(result, fields[0]) is result[0] and getattr(result, fields[1]) is result[1]
    first, second = result
    assert first is result[0] and second is result[1]
    assert repr(result).startswith(f"agrad.return_types.{name}(\n{fields[0]}=tensor(")
    assert f"\n{fields[1]}=tensor(" in repr(result)


def test_one_return_type_per_op() -> None:
    assert type(agrad.sort(agrad.tensor([1.0]))) is type(agrad.sort(agrad.tensor([2.0, 1.0]), 0))
    assert type(agrad.sort(agrad.tensor([1.0]))) is not type(agrad.topk(agrad.tensor([1.0]), 1))


# -- semantics beyond the oracle cases ------------------------------------------------------


@requires_torch
def test_topk_unsorted_selects_the_same_elements() -> None:
    """With ``sorted=False`` any order is allowed: the same set of values as PyTorch's."""
    x = _rng.uniform(-2, 2, (4, 200))
    ours = agrad.topk(agrad.tensor(x), 3, sorted=False)
    theirs = torch.topk(torch.tensor(x), 3, sorted=False)
    np.testing.assert_array_equal(np.sort(ours.values.numpy()), np.sort(theirs.values.numpy()))
    np.testing.assert_array_equal(np.take_along_axis(x, ours.indices.numpy(), 1), ours.values.numpy())


def test_sort_node_saves_indices_and_sizes() -> None:
    """SortBackward0 exposes PyTorch's saved values."""
    x = agrad.tensor(M, requires_grad=True)
    values, indices = agrad.sort(x, 0)
    fn = values.grad_fn
    assert fn.name() == "SortBackward0"
    assert fn._saved_dim == 0
    assert fn._saved_self_sym_sizes == M.shape
    np.testing.assert_array_equal(fn._saved_indices.numpy(), indices.numpy())
    assert agrad.sort(x, stable=False).values.grad_fn.name() == "SortBackward1"


def test_kthvalue_and_cummax_nodes_save_what_torch_saves() -> None:
    x = agrad.tensor(M, requires_grad=True)
    kth = agrad.kthvalue(x, 2, 1, keepdim=True).values.grad_fn
    assert (kth._saved_dim, kth._saved_keepdim, kth._saved_self_sym_sizes) == (1, True, M.shape)
    cm = agrad.cummax(x, 1)
    assert cm.values.grad_fn._saved_self is x
    np.testing.assert_array_equal(cm.values.grad_fn._saved_indices.numpy(), cm.indices.numpy())


def test_gradient_flows_to_the_selected_indices() -> None:
    """Each value's gradient lands at its index, repeated indices summing (cummax)."""
    x = agrad.tensor([2.0, 1.0, 3.0, 0.0], requires_grad=True)
    agrad.cummax(x, 0).values.sum().backward_sync()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 0.0, 2.0, 0.0])
    y = agrad.tensor([2.0, 1.0, 3.0, 0.0], requires_grad=True)
    agrad.topk(y, 2).values.backward_sync(agrad.tensor([10.0, 1.0]))
    np.testing.assert_array_equal(y.grad.numpy(), [1.0, 0.0, 10.0, 0.0])


def test_cumprod_gradient_at_zeros_differentiates_twice() -> None:
    """create_graph through cumprod with zeros: the gradient's own gradient is exact."""
    x = agrad.tensor([2.0, 0.0, 3.0, 0.0, 5.0], dtype=agrad.float64, requires_grad=True)
    (g,) = agrad.autograd.grad_sync(agrad.cumprod(x, 0).sum(), x, create_graph=True)
    # d/dx_k sum_j prod_{i<=j, i != k} x_i: the terms before the second zero (other than x_k)
    np.testing.assert_allclose(g.detach().numpy(), [1.0, 2.0 + 2.0 * 3.0, 0.0, 0.0, 0.0])
    (gg,) = agrad.autograd.grad_sync(g[1], x)
    if torch is not None:
        t = torch.tensor([2.0, 0.0, 3.0, 0.0, 5.0], dtype=torch.float64, requires_grad=True)
        (tg,) = torch.autograd.grad(torch.cumprod(t, 0).sum(), t, create_graph=True)
        (tgg,) = torch.autograd.grad(tg[1], t)
        np.testing.assert_allclose(gg.numpy(), tgg.numpy(), rtol=1e-12)
    # g[1] = x0 + x0 x2 + x0 x2 x3 + x0 x2 x3 x4
    np.testing.assert_allclose(gg.numpy(), [1.0 + 3.0, 0.0, 2.0, 2.0 * 3.0 + 2.0 * 3.0 * 5.0, 0.0])


@requires_torch
def test_histc_bins_like_torch_at_edges() -> None:
    """Values at and near bin edges fall in PyTorch's bins, in float32 and float64."""
    x = np.concatenate([np.linspace(-1.0, 1.0, 401), _rng.uniform(-1, 1, 2000)])
    for dtype, tdtype in ((agrad.float32, torch.float32), (agrad.float64, torch.float64)):
        for bins, low, high in ((7, 0, 0), (10, -1.0, 1.0), (13, -0.3, 0.7), (3, 0.1, 0.1)):
            ours = agrad.histc(agrad.tensor(x, dtype=dtype), bins, low, high)
            theirs = torch.histc(torch.tensor(x, dtype=tdtype), bins, low, high)
            np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@requires_torch
def test_searchsorted_rows_match_torch() -> None:
    """Batched sorted sequences with ties, NaN-free floats and both sides."""
    seq = np.sort(_rng.integers(0, 6, (3, 2, 8)).astype(float), axis=-1)
    values = _rng.integers(-1, 7, (3, 2, 5)).astype(float) + _rng.choice([0.0, 0.5], (3, 2, 5))
    for right in (False, True):
        ours = agrad.searchsorted(agrad.tensor(seq), agrad.tensor(values), right=right)
        theirs = torch.searchsorted(torch.tensor(seq), torch.tensor(values), right=right)
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_inplace_cumulative_ops() -> None:
    """``cumprod_`` and ``cumsum_`` write in place and record their nodes."""
    x = agrad.tensor(M, requires_grad=True)
    y = x * 1
    assert y.cumprod_(1) is y
    assert y.grad_fn.name() == "CumprodBackward0"
    np.testing.assert_allclose(y.detach().numpy(), np.cumprod(M, axis=1))
    z = x * 1
    assert z.cumsum_(0) is z
    assert z.grad_fn.name() == "CumsumBackward0"
    (y.sum() + z.sum()).backward_sync()
    if torch is not None:
        t = torch.tensor(M, requires_grad=True)
        (t.clone().cumprod_(1).sum() + t.clone().cumsum_(0).sum()).backward()
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-10)
    i = agrad.tensor(INTS.astype(np.int32))
    i.cumsum_(1)
    assert i.dtype is agrad.int32
    np.testing.assert_array_equal(i.numpy(), np.cumsum(INTS, axis=1))
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        x.cumprod_(0)
    for name in ("cumsum_", "cumprod_"):
        with pytest.raises(RuntimeError, match="input tensor dtype float and output tensor dtype double should match"):
            getattr(agrad.tensor(M, dtype=agrad.float32), name)(0, dtype=agrad.float64)
    i.cumprod_(0, dtype=agrad.int32)
    np.testing.assert_array_equal(i.numpy(), np.cumprod(np.cumsum(INTS, axis=1), axis=0))


def test_integer_outputs_do_not_require_grad() -> None:
    x = agrad.tensor(M, requires_grad=True)
    for out in (agrad.sort(x).indices, agrad.argwhere(x), agrad.count_nonzero(x), agrad.unique(x),
                agrad.searchsorted(agrad.tensor(EDGES), x), agrad.histc(x, 3), agrad.cummin(x, 0).indices):
        assert not out.requires_grad


def test_aliases_and_methods_are_the_functions() -> None:
    assert agrad.Tensor.sort is agrad.sort
    assert agrad.Tensor.nonzero is agrad.nonzero
    assert agrad.Tensor.cumprod is agrad.cumprod
    assert not hasattr(agrad.Tensor, "searchsorted") and not hasattr(agrad.Tensor, "bucketize")


# -- errors: PyTorch's exception types (and messages) ------------------------------------------

_X2 = np.array([[3.0, 1.0, 2.0], [1.0, 1.0, 0.0]])
_F = lambda L: L.tensor(_X2)  # noqa: E731
_I = lambda L: L.tensor([[3, 1, 2], [1, 1, 0]])  # noqa: E731
_B = lambda L: L.tensor([True, False, True])  # noqa: E731
_E = lambda L: L.zeros(0, 3)  # noqa: E731
_SS = lambda L: L.tensor([1.0, 3.0, 5.0, 7.0])  # noqa: E731

ERRORS: dict[str, Callable[[Any], Any]] = {
    "sort-dim": lambda L: L.sort(_F(L), 2),
    "topk-k-large": lambda L: L.topk(_F(L), 4),
    "topk-k-negative": lambda L: L.topk(_F(L), -1),
    "topk-bool": lambda L: L.topk(_B(L), 1),
    "topk-empty": lambda L: L.topk(_E(L), 1, dim=0),
    "topk-dim": lambda L: L.topk(_F(L), 1, dim=3),
    "kthvalue-k0": lambda L: L.kthvalue(_F(L), 0),
    "kthvalue-k-large": lambda L: L.kthvalue(_F(L), 4),
    "kthvalue-bool": lambda L: L.kthvalue(_B(L), 1),
    "kthvalue-empty": lambda L: L.kthvalue(_E(L), 1, 0),
    "median-bool": lambda L: L.median(_B(L)),
    "median-dim-bool": lambda L: L.median(_B(L), 0),
    "median-empty-dim": lambda L: L.median(_E(L), 0),
    "nanmedian-empty-dim": lambda L: L.nanmedian(_E(L), 0),
    "median-dim": lambda L: L.median(_F(L), 2),
    "mode-empty": lambda L: L.mode(_E(L), 0),
    "mode-dim": lambda L: L.mode(_F(L), -3),
    "quantile-int": lambda L: L.quantile(_I(L), 0.5),
    "quantile-q-range": lambda L: L.quantile(_F(L), 1.5),
    "quantile-q-tensor-range": lambda L: L.quantile(_F(L), L.tensor([0.5, 1.1], dtype=L.float64)),
    "quantile-q-dtype": lambda L: L.quantile(_F(L), L.tensor([0.5], dtype=L.float32)),
    "quantile-q-2d": lambda L: L.quantile(_F(L), L.tensor([[0.5]])),
    "quantile-empty": lambda L: L.quantile(L.zeros(0), 0.5),
    "quantile-interpolation": lambda L: L.quantile(_F(L), 0.5, interpolation="foo"),
    "quantile-dim": lambda L: L.quantile(_F(L), 0.5, dim=2),
    "nanquantile-int": lambda L: L.nanquantile(_I(L), 0.5),
    "aminmax-empty": lambda L: L.aminmax(_E(L)),
    "aminmax-empty-dim": lambda L: L.aminmax(_E(L), dim=0),
    "aminmax-dims": lambda L: L.aminmax(_F(L), dim=(0, 1)),
    "aminmax-dim": lambda L: L.aminmax(_F(L), dim=2),
    "cumprod-dim": lambda L: L.cumprod(_F(L), 2),
    "cumprod-0d-dim": lambda L: L.cumprod(L.tensor(2.0), 1),
    "cummax-dim": lambda L: L.cummax(_F(L), 3),
    "logcumsumexp-int": lambda L: L.logcumsumexp(_I(L), 1),
    "logcumsumexp-bool": lambda L: L.logcumsumexp(_B(L), 0),
    "nansum-dim": lambda L: L.nansum(_F(L), 2),
    "nansum-repeated-dim": lambda L: L.nansum(_F(L), (0, 0)),
    "nanmean-int": lambda L: L.nanmean(_I(L)),
    "unique-dim": lambda L: L.unique(_I(L), dim=2),
    "unique-0d-dim": lambda L: L.unique(L.tensor(3.0), dim=0),
    "unique-zero-sized": lambda L: L.unique(_E(L), dim=1),
    "unique_consecutive-0d-dim": lambda L: L.unique_consecutive(L.tensor(3.0), dim=0),
    "searchsorted-0d-boundaries": lambda L: L.searchsorted(L.tensor(1.0), L.tensor([2.0])),
    "searchsorted-leading-dims": lambda L: L.searchsorted(_I(L), L.tensor([3, 6])),
    "searchsorted-scalar-2d": lambda L: L.searchsorted(_I(L), 3),
    "searchsorted-side": lambda L: L.searchsorted(_SS(L), L.tensor([2.0]), side="middle"),
    "searchsorted-side-right": lambda L: L.searchsorted(_SS(L), L.tensor([2.0]), right=True, side="left"),
    "searchsorted-sorter-size": lambda L: L.searchsorted(_SS(L), L.tensor([2.0]), sorter=L.tensor([0, 1])),
    "searchsorted-sorter-dtype": lambda L: L.searchsorted(_SS(L), L.tensor([2.0]), sorter=L.tensor([0.0, 1, 2, 3])),
    "searchsorted-bool": lambda L: L.searchsorted(_B(L), L.tensor([True])),
    "bucketize-2d": lambda L: L.bucketize(L.tensor([1.0]), _F(L)),
    "histc-int": lambda L: L.histc(_I(L), 4),
    "histc-bins": lambda L: L.histc(_F(L), 0),
    "histc-range": lambda L: L.histc(_F(L), 3, 3, 1),
    "histc-inf": lambda L: L.histc(L.tensor([1.0, float("inf")]), 3),
    "bincount-negative": lambda L: L.bincount(L.tensor([-1, 2])),
    "bincount-2d": lambda L: L.bincount(_I(L)),
    "bincount-float": lambda L: L.bincount(_F(L)[0]),
    "bincount-bool": lambda L: L.bincount(_B(L)),
    "bincount-minlength": lambda L: L.bincount(L.tensor([1, 2]), minlength=-1),
    "bincount-weights": lambda L: L.bincount(L.tensor([1, 2]), L.tensor([1.0, 2.0, 3.0])),
    "count_nonzero-dim": lambda L: L.count_nonzero(_I(L), 3),
    "count_nonzero-repeated-dim": lambda L: L.count_nonzero(_I(L), (0, 0)),
}


@requires_torch
@pytest.mark.parametrize("call", [pytest.param(c, id=n) for n, c in ERRORS.items()])
def test_errors_match_torch(call: Callable[[Any], Any]) -> None:
    """The obvious misuses raise PyTorch's exception type with PyTorch's message."""
    with pytest.raises(Exception) as theirs:
        call(torch)
    with pytest.raises(type(theirs.value)) as ours:
        call(agrad)
    expected = str(theirs.value).split("\n")[0].replace("-nan", "nan")
    if type(theirs.value) is TypeError:  # PyTorch's argument parser lists its overloads
        assert "aminmax()" in str(ours.value)
    else:
        assert str(ours.value) == expected
