"""Sorting, selection and cumulative ops: sort, topk, kthvalue, median, mode,
quantile, aminmax, cumprod, cummax, logcumsumexp, the nan-reductions, and the
integer-valued searches and counts (unique, searchsorted, histc, nonzero...).

Note [Values at indices]
~~~~~~~~~~~~~~~~~~~~~~~~
``sort``, ``topk``, ``kthvalue``, ``median``/``nanmedian`` along a dim,
``mode``, ``cummax`` and ``cummin`` return ``(values, indices)`` where the
values are the input's elements at the indices.  Each is two table entries:
an *index* entry (``vjp=None``: the sort or selection, run once) and a
*values* entry whose inputs are the input and those indices and whose forward
is one ``take_along_axis``.  The values entry records PyTorch's node
(``SortBackward0``, ``TopkBackward0``...), saves the indices (and the input's
shape, or the input where PyTorch does) under PyTorch's names, and its
backward sends each gradient to the position its index names:
``scatter_add`` into zeros, an agrad op, so ``create_graph`` works (the
indices of ``cummax`` repeat, hence ``scatter_add`` rather than a scatter).
The values entries' ``ref`` is therefore ``torch.gather`` on the same
indices; the composites (``sort``...) are checked end to end against PyTorch,
indices and node names included, in tests/ops/test_sorting.py.

Ties pick the index PyTorch's CPU kernels pick where their rule is a stable
one: ``sort`` (stable in both directions, NaN largest), ``median`` along a dim
(the stable order's middle element, or the first NaN), ``mode`` (the last
occurrence of the smallest most frequent value, as PyTorch for slices of fewer
than 16 elements), ``cummax``/``cummin`` (the last position of the running
extreme, NaN winning).  ``topk`` and ``kthvalue`` break ties in PyTorch by
``std::nth_element``/quickselect, an order no vectorised kernel reproduces:
here they take the stable sort's order (the values, and the sum of the
gradient over the tied positions, are PyTorch's).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from agrad import _backends, _dtype
from agrad._grad_mode import grad_enabled
from agrad._ops._common import _axis, _expand_reduced, _quiet, _r, _zeros_on
from agrad._ops._elementwise import abs, ceil, exp, floor, logical_and, round, where
from agrad._ops._inplace import inplace_method
from agrad._ops._reductions import (
    _check_reduced_dim,
    _evenly_distribute,
    _extreme_grad,
    _ReturnType,
    cumsum,
)
from agrad._ops._registry import defop
from agrad._ops._shape import _wrap_dim, scatter_add
from agrad._tensor import Tensor

# The public names of this family (star-imported by ``agrad/__init__.py``).
__all__ = [
    "sort", "argsort", "msort", "topk", "kthvalue", "median", "nanmedian", "mode", "quantile", "nanquantile",
    "aminmax",
    "unique", "unique_consecutive", "searchsorted", "bucketize", "histc", "bincount", "nonzero", "argwhere",
    "count_nonzero", "cumprod", "cummax", "cummin", "logcumsumexp", "nansum", "nanmean",
]

_TYPE_NAMES = _dtype.SCALAR_TYPE_NAMES


# -- result types ------------------------------------------------------------------


def _values_indices(name: str) -> type[_ReturnType]:
    """``torch.return_types.<name>``: a tuple ``(values, indices)`` with named fields."""
    return cast(type[_ReturnType], type(name, (_ReturnType,), {"__slots__": (), "_name": name, "__module__": __name__}))


_SortReturn = _values_indices("sort")
_TopkReturn = _values_indices("topk")
_KthvalueReturn = _values_indices("kthvalue")
_MedianReturn = _values_indices("median")
_NanmedianReturn = _values_indices("nanmedian")
_ModeReturn = _values_indices("mode")
_CummaxReturn = _values_indices("cummax")
_CumminReturn = _values_indices("cummin")


class _AminmaxReturn(tuple):
    """A ``(min, max)`` pair like ``torch.return_types.aminmax``."""

    __slots__ = ()

    def __new__(cls, min: Tensor, max: Tensor) -> _AminmaxReturn:  # noqa: A002 - PyTorch's field names
        return tuple.__new__(cls, (min, max))

    @property
    def min(self) -> Tensor:
        return self[0]

    @property
    def max(self) -> Tensor:
        return self[1]

    def __repr__(self) -> str:
        return f"agrad.return_types.aminmax(\nmin={self[0]!r},\nmax={self[1]!r})"


_AminmaxReturn.__name__ = _AminmaxReturn.__qualname__ = "aminmax"  # type(result).__name__, as PyTorch's


# -- kernels shared by the entries ---------------------------------------------------


def _argsort_array(xp: Any, x: Any, axis: int, descending: bool = False) -> Any:
    """Stable argsort of ``x`` along ``axis`` (int64), NaN largest as in PyTorch;
    descending keeps equal elements in their order (the reversed input sorted
    ascending, reversed back)."""
    if not descending:
        return xp.argsort(x, axis=axis, kind="stable").astype(np.int64, copy=False)
    n = x.shape[axis]
    flipped = xp.argsort(xp.flip(x, axis=axis), axis=axis, kind="stable")
    return (n - 1 - xp.flip(flipped, axis=axis)).astype(np.int64, copy=False)


def _argsort_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    ties = np.array([[1.0, 2.0, 1.0, 2.0, 1.0], [0.0, 0.0, 3.0, -1.0, 3.0]])
    return [((_r(rng, 3, 4),), {}), ((_r(rng, 3, 4), 0), {}), ((_r(rng, 3, 4), -1, True), {}),
            ((ties,), {"stable": True}), ((ties,), {"stable": True, "descending": True}),
            ((np.array([3, 1, 2, 1]),), {"stable": True, "descending": True}), ((_r(rng),), {})]


@defop(ref=lambda torch: torch.argsort, vjp=None, methods=("argsort",), samples=_argsort_samples,
       parse=lambda input, dim=-1, descending=False, *, stable=False: (
           (input,), {"dim": _wrap_dim(dim, input.ndim), "descending": descending, "stable": stable}))
def argsort(xp, input, *, dim=-1, descending=False, stable=False):
    """Indices (int64) that sort ``input`` along ``dim``; ``stable`` keeps the order of equal
    elements (agrad's sort is always stable, so ``stable`` changes nothing)."""
    if input.ndim == 0:
        return xp.zeros((), dtype=np.int64)
    return _argsort_array(xp, input, dim, descending)


def _take_along(xp: Any, input: Any, indices: Any, dim: int, keepdim: bool = True) -> Any:
    """``input``'s elements at ``indices`` along ``dim``; ``keepdim=False``: the indices
    lack the (reduced) dim, and so does the result."""
    if input.ndim == 0:
        return input.copy()
    if keepdim:
        return xp.take_along_axis(input, indices, axis=dim)
    return xp.squeeze(xp.take_along_axis(input, xp.expand_dims(indices, dim), axis=dim), axis=dim)


def _along_last(xp: Any, fn: Callable[[Any], Any], a: Any, axis: int) -> Any:
    """``fn`` applied with ``axis`` moved last, and the result's last axis moved back."""
    return xp.moveaxis(fn(xp.moveaxis(a, axis, -1)), -1, axis)


def _positions(xp: Any, n: int) -> Any:
    return xp.arange(n, dtype=np.int64)


def _not_for_bool(input: Any, kernel: str) -> None:
    if input.dtype == np.bool_:
        raise NotImplementedError(f"\"{kernel}\" not implemented for 'Bool'")


# -- gradients of the values entries (Note [Values at indices]) ------------------------


def _scatter_back(g: Tensor, input_shape: tuple[int, ...], indices: Tensor, dim: int) -> Tensor:
    """``g`` sent to the positions ``indices`` name along ``dim`` (zeros elsewhere)."""
    return scatter_add(_zeros_on(g, input_shape), dim, indices, g)


def _scatter_reduced(g: Tensor, input_shape: tuple[int, ...], indices: Tensor, dim: int, keepdim: bool) -> Tensor:
    """:func:`_scatter_back` for a selection that reduced ``dim`` (kept with ``keepdim``)."""
    if not keepdim and input_shape:
        g, indices = g.unsqueeze(dim), indices.unsqueeze(dim)
    return _scatter_back(g, input_shape, indices, dim)


def _cum_extreme_grad(g: Tensor, input: Tensor, indices: Tensor, dim: int) -> Tensor:
    # PyTorch's cummaxmin_backward, which saves ``self`` (for its shape).
    return _scatter_back(g, input.shape, indices, dim)


def _gather_ref(torch: Any) -> Callable[..., Any]:
    """The oracle of a values entry: ``torch.gather`` at the entry's indices."""
    return lambda x, indices, dim, **_: torch.gather(x, dim, indices)


def _gather_reduced_ref(torch: Any) -> Callable[..., Any]:
    """The oracle of a values entry that reduces ``dim``: ``torch.gather`` at the entry's indices."""

    def ref(x: Any, indices: Any, dim: int, keepdim: bool = False) -> Any:
        if x.ndim == 0 or keepdim:
            return torch.gather(x, dim, indices)
        return torch.gather(x, dim, indices.unsqueeze(dim)).squeeze(dim)

    return ref


def _selection_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    """Input and same-shaped indices along a dim, as ``sort``, ``topk`` (fewer) and
    ``cummax`` (repeated) produce them; 0-d and empty."""
    x = _r(rng, 3, 4, 5)
    wide = _r(rng, 4, 6)
    return [((x, np.argsort(x, axis=2)), {"dim": 2}), ((x, np.argsort(-x, axis=0)[:2]), {"dim": 0}),
            ((wide[:, ::2], np.argsort(wide[:, ::2], axis=1)), {"dim": 1}),
            ((x, rng.integers(0, 4, size=(3, 4, 5))), {"dim": 1}),
            ((_r(rng), np.zeros((), dtype=np.int64)), {"dim": 0}),
            ((_r(rng, 0, 3), np.zeros((0, 3), dtype=np.int64)), {"dim": 1})]


def _reduced_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    """Input and indices of a selection that reduces a dim, with and without keepdim."""
    x = _r(rng, 3, 4, 5)
    idx = rng.integers(0, 4, size=(3, 5))
    return [((x, idx), {"dim": 1}), ((x, idx[:, None, :]), {"dim": 1, "keepdim": True}),
            ((x[:, :, 1:], rng.integers(0, 4, size=(3, 4))), {"dim": 2}),
            ((_r(rng, 6), np.array(2)), {"dim": 0}), ((_r(rng), np.array(0)), {"dim": 0}),
            ((_r(rng, 0, 3), np.zeros(0, dtype=np.int64)), {"dim": 1})]


# -- sort, msort, topk -----------------------------------------------------------------


def _sort_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    x = _r(rng, 4, 3)
    return [*_selection_samples(rng), ((x, np.argsort(x, axis=0)), {"dim": 0, "stable": True})]


@defop(ref=_gather_ref, vjp=(_scatter_back, None), node=("SortBackward0", "SortBackward1"),
       node_for=lambda dim, stable: "SortBackward0" if stable is None else "SortBackward1", samples=_sort_samples)
def _sort_values(xp, input, indices, *, dim, stable=None):
    """The values of ``sort``: ``input`` at ``indices`` along ``dim`` (``stable``
    names PyTorch's overload: ``SortBackward1`` when given)."""
    return _take_along(xp, input, indices, dim)


def sort(input: Tensor, dim: int = -1, descending: bool = False, *, stable: bool | None = None) -> Any:
    """Sort ``input`` along ``dim``: ``(values, indices)`` with ``input.gather(dim, indices) == values``.

    The sort is always stable (PyTorch's CPU sort is too): equal elements keep
    their order, ascending or descending; NaN sorts as the largest value.

    Args:
        input: the tensor to sort.
        dim: the dimension to sort along (the last by default).
        descending: largest first.
        stable: accepted for PyTorch's signature; it names the backward node.

    Returns:
        ``(values, indices)``, a tuple with those fields (``torch.return_types.sort``).

    Example::

        >>> import agrad
        >>> agrad.sort(agrad.tensor([3.0, 1.0, 2.0])).indices
        tensor([1, 2, 0])
    """
    d = _wrap_dim(dim, input.ndim)
    indices = argsort(input, d, descending, stable=True)
    return _SortReturn(_sort_values(input, indices, dim=d, stable=stable), indices)


def msort(input: Tensor) -> Tensor:
    """``input`` sorted along its first dimension (``sort(input, dim=0).values``)."""
    return sort(input, 0).values


@defop(ref=lambda torch: lambda x, k, dim=-1, largest=True, sorted=True: torch.topk(x, k, dim, largest, sorted).indices,
       vjp=None,
       samples=lambda rng: [((_r(rng, 3, 6),), {"k": 2, "dim": 1}), ((_r(rng, 3, 6),), {"k": 3, "dim": 0,
                                                                                        "largest": False}),
                            ((np.array([[2, 7, 1, 9], [5, 0, 3, 4]]),), {"k": 3, "dim": 1}),
                            ((_r(rng, 4, 5),), {"k": 0, "dim": 1}), ((_r(rng),), {"k": 1, "dim": 0}),
                            ((_r(rng, 0, 4),), {"k": 2, "dim": 1}),
                            ((np.array([1.0, np.nan, 3.0, -1.0, 2.0]),), {"k": 2, "dim": 0}),
                            ((np.array([1.0, np.nan, 3.0, -1.0, 2.0]),), {"k": 4, "dim": 0, "largest": False})])
def _topk_indices(xp, input, *, k, dim, largest=True, sorted=True):
    """The indices of ``topk``: the ``k`` largest (smallest) along ``dim``, in order
    (also when not ``sorted``: any order is then allowed); NaN is the largest."""
    if input.dtype == np.bool_:
        raise RuntimeError("topk does not support bool dtypes on CPU")
    if not 0 <= k <= (input.shape[dim] if input.ndim else 1):
        raise RuntimeError("selected index k out of range")
    if input.ndim == 0:
        return xp.zeros((), dtype=np.int64)
    return xp.take(_argsort_array(xp, input, dim, descending=largest), _positions(xp, k), axis=dim)


@defop(ref=_gather_ref, vjp=(_scatter_back, None), node="TopkBackward0", samples=_selection_samples)
def _topk_values(xp, input, indices, *, dim):
    """The values of ``topk``: ``input`` at ``indices`` along ``dim``."""
    return _take_along(xp, input, indices, dim)


def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> Any:  # noqa: A002
    """The ``k`` largest elements of ``input`` along ``dim`` (smallest if not ``largest``).

    Returns ``(values, indices)`` (``torch.return_types.topk``), largest first
    (smallest first); NaN counts as the largest value.  Ties take the first
    positions (PyTorch's order among ties is its ``nth_element``'s).

    Example::

        >>> import agrad
        >>> agrad.topk(agrad.tensor([1.0, 5.0, 3.0]), 2)
        agrad.return_types.topk(
        values=tensor([5., 3.]),
        indices=tensor([1, 2]))
    """
    d = _wrap_dim(dim, input.ndim)
    indices = _topk_indices(input, k=k, dim=d, largest=largest, sorted=sorted)
    return _TopkReturn(_topk_values(input, indices, dim=d), indices)


# -- kthvalue, median, nanmedian, mode ------------------------------------------------------


def _reduced_index(xp: Any, positions: Any, dim: int, keepdim: bool) -> Any:
    return positions if keepdim else xp.squeeze(positions, axis=dim)


def _distinct_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    x = _r(rng, 3, 5, 4)
    return [((x,), {"k": 2, "dim": 1}), ((x,), {"k": 4, "dim": 2, "keepdim": True}), ((x,), {"k": 1, "dim": 0}),
            ((np.array([[4, 1, 3], [0, 2, 8]]),), {"k": 3, "dim": 1}), ((_r(rng),), {"k": 1, "dim": 0}),
            ((_r(rng, 0, 3),), {"k": 2, "dim": 1}),
            ((np.array([[1.0, np.nan, 2.0, 0.5], [3.0, 1.0, -1.0, 2.0]]),), {"k": 3, "dim": 1})]


@defop(ref=lambda torch: lambda x, k, dim=-1, keepdim=False: torch.kthvalue(x, k, dim, keepdim).indices,
       vjp=None, samples=_distinct_samples)
def _kthvalue_indices(xp, input, *, k, dim, keepdim=False):
    """The index of the ``k``-th smallest element along ``dim`` (NaN the largest;
    ties: the stable order's, see Note [Values at indices])."""
    _not_for_bool(input, "kthvalue_cpu")
    if input.ndim:
        _check_reduced_dim("kthvalue", input, dim)
    if not 1 <= k <= (input.shape[dim] if input.ndim else 1):
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {dim}")
    if input.ndim == 0:
        return xp.zeros((), dtype=np.int64)
    kth = xp.take(_argsort_array(xp, input, dim), _positions(xp, 1) + (k - 1), axis=dim)
    return _reduced_index(xp, kth, dim, keepdim)


def _median_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    ties = np.array([[1.0, 2.0, 1.0, 2.0, 1.0, 3.0, 1.0], [0.0, 0.0, 3.0, -1.0, 3.0, 0.0, 3.0]])
    nans = np.array([[1.0, np.nan, 2.0, np.nan, 0.0], [np.nan] * 5, [3.0, 2.0, np.nan, 1.0, 0.0]])
    x = _r(rng, 3, 4, 5)
    return [((x,), {"dim": 1}), ((x,), {"dim": 2, "keepdim": True}), ((ties,), {"dim": 1}), ((ties,), {"dim": 0}),
            ((nans,), {"dim": 1}), ((nans[[0, 2]],), {"dim": 1, "ignore_nan": True}),
            ((x,), {"dim": 0, "ignore_nan": True}), ((np.array([[3, 1, 2, 4], [0, 0, 5, 5]]),), {"dim": 1}),
            ((_r(rng),), {"dim": 0}), ((_r(rng, 0, 3),), {"dim": 1})]


@defop(ref=lambda torch: lambda x, dim, keepdim=False, ignore_nan=False:
       (torch.nanmedian if ignore_nan else torch.median)(x, dim, keepdim).indices,
       vjp=None, samples=_median_samples)
def _median_indices(xp, input, *, dim, keepdim=False, ignore_nan=False):
    """The index of the lower median along ``dim``: the middle of the stable
    order, as PyTorch's ``nth_element`` with ties broken by position.  Without
    ``ignore_nan`` a slice holding NaN gives its first NaN; with it, the median
    of the other elements (a slice of NaNs only: its first NaN)."""
    _not_for_bool(input, "median_out")
    if input.ndim:
        _check_reduced_dim("median", input, dim)  # (PyTorch's word for nanmedian too)
    if input.ndim == 0:
        return xp.zeros((), dtype=np.int64)
    order = _argsort_array(xp, input, dim)  # NaN last
    n = input.shape[dim]
    if input.dtype.kind != "f":
        return _reduced_index(xp, xp.take(order, _positions(xp, 1) + (n - 1) // 2, axis=dim), dim, keepdim)
    nan = xp.isnan(input)
    if ignore_nan:
        valid = n - xp.sum(nan, axis=dim, keepdims=True)
        middle = xp.take_along_axis(order, xp.maximum((valid - 1) // 2, 0), axis=dim)
    else:
        middle = xp.take(order, _positions(xp, 1) + (n - 1) // 2, axis=dim)
        middle = xp.where(xp.any(nan, axis=dim, keepdims=True), xp.argmax(nan, axis=dim, keepdims=True), middle)
    return _reduced_index(xp, middle, dim, keepdim)


def _mode_position(xp: Any, ordered: Any, order: Any) -> Any:
    """Along the last axis of the sorted values ``ordered`` (``order`` their
    positions in the input): the input position of the last element of the
    first longest run of equal values, keeping the axis."""
    n = ordered.shape[-1]
    starts = xp.ones(ordered.shape, dtype=bool)
    starts[..., 1:] = ordered[..., 1:] != ordered[..., :-1]
    ends = xp.ones(ordered.shape, dtype=bool)
    ends[..., :-1] = starts[..., 1:]
    pos = _positions(xp, n)
    run_start = xp.maximum.accumulate(xp.where(starts, pos, 0), axis=-1)
    length = xp.where(ends, pos - run_start + 1, 0)  # a run's length, at its last element
    return xp.take_along_axis(order, xp.argmax(length, axis=-1, keepdims=True), axis=-1)


@defop(ref=lambda torch: lambda x, dim=-1, keepdim=False: torch.mode(x, dim, keepdim).indices, vjp=None,
       samples=lambda rng: [((rng.integers(0, 3, size=(3, 7)).astype(float),), {"dim": 1}),
                            ((rng.integers(0, 3, size=(5, 4)).astype(float),), {"dim": 0, "keepdim": True}),
                            ((np.array([[2.0, 1.0, 2.0, 1.0], [0.0, 0.0, 3.0, -1.0]]),), {"dim": 1}),
                            ((np.array([[True, False, True], [False, False, True]]),), {"dim": 1}),
                            ((np.array([3, 1, 3, 1, 1]),), {"dim": 0}), ((_r(rng, 3, 4),), {"dim": 1}),
                            ((_r(rng),), {"dim": 0}), ((_r(rng, 0, 3),), {"dim": 1})])
def _mode_indices(xp, input, *, dim, keepdim=False):
    """The index of ``mode``: the last occurrence of the smallest most frequent value along ``dim``."""
    if input.ndim:
        _check_reduced_dim("mode", input, dim)
    if input.ndim == 0:
        return xp.zeros((), dtype=np.int64)
    order = _argsort_array(xp, input, dim)
    ordered = xp.take_along_axis(input, order, axis=dim)
    index = xp.moveaxis(_mode_position(xp, xp.moveaxis(ordered, dim, -1), xp.moveaxis(order, dim, -1)), -1, dim)
    return _reduced_index(xp, index, dim, keepdim)


# kthvalue, median and nanmedian along a dim, and mode share one values entry
# (their indices differ); ``node`` is PyTorch's name of the selection's node.
_SELECTION_NODES = ("KthvalueBackward0", "MedianBackward1", "NanmedianBackward1", "ModeBackward0")


@defop(ref=_gather_reduced_ref, vjp=(_scatter_reduced, None), node=_SELECTION_NODES,
       node_for=lambda dim, keepdim, node: node, samples=_reduced_samples)
def _selected_values(xp, input, indices, *, dim, keepdim=False, node="KthvalueBackward0"):
    """The values of a selection that reduces ``dim``: ``input`` at ``indices``."""
    return _take_along(xp, input, indices, dim, keepdim)


def _lower_median(xp: Any, input: Any, ignore_nan: bool) -> Any:
    """The lower median of all elements; NaN if any is (``ignore_nan``: if all are)."""
    _not_for_bool(input, "median_cpu")
    x = input.reshape(-1)
    if x.size == 0:  # PyTorch's CPU kernel: NaN, or the integer type's lowest value
        return xp.asarray(np.nan if x.dtype.kind == "f" else np.iinfo(x.dtype).min, dtype=x.dtype)
    if x.dtype.kind != "f":
        return xp.partition(x, (x.size - 1) // 2)[(x.size - 1) // 2]
    if ignore_nan:  # NaN sorts last: the middle of the valid prefix (its first element when none is valid)
        valid = x.size - xp.count_nonzero(xp.isnan(x))
        return xp.sort(x)[xp.maximum((valid - 1) // 2, 0)]
    k = (x.size - 1) // 2
    return xp.where(xp.any(xp.isnan(x)), xp.asarray(np.nan, dtype=x.dtype), xp.partition(x, k)[k])


def _median_all_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    # (NaN, whose gradient finite differences cannot check, in tests/ops/test_sorting.py)
    return [((_r(rng, 3, 4),), {}), ((_r(rng, 5),), {}), ((_r(rng),), {}), ((_r(rng, 2, 3)[:, ::2],), {})]


@defop(ref=lambda torch: torch.median, vjp=_evenly_distribute, node="MedianBackward0", samples=_median_all_samples)
def _median_all(xp, input):
    """The lower median of all elements (``median(x)``); NaN if any is; the
    gradient splits among the elements equal to it, as PyTorch's."""
    return _lower_median(xp, input, False)


@defop(ref=lambda torch: torch.nanmedian, vjp=_evenly_distribute, node="NanmedianBackward0",
       samples=lambda rng: [*_median_all_samples(rng), ((np.array([1.0, np.nan, 2.0, 0.5, np.nan]),), {})])
def _nanmedian_all(xp, input):
    """The lower median of all elements that are not NaN (``nanmedian(x)``)."""
    return _lower_median(xp, input, True)


def _reduced_selection(input: Tensor, dim: int, keepdim: bool, index: Callable[..., Tensor], node: str,
                       result: type[_ReturnType], **index_attrs: Any) -> Any:
    """``(values, indices)`` of a selection that reduces ``dim`` (Note [Values at indices]);
    ``node`` names the values' node."""
    d = _wrap_dim(dim, input.ndim)
    indices = index(input, dim=d, keepdim=keepdim, **index_attrs)
    return result(_selected_values(input, indices, dim=d, keepdim=keepdim, node=node), indices)


def kthvalue(input: Tensor, k: int, dim: int = -1, keepdim: bool = False) -> Any:
    """The ``k``-th smallest element of ``input`` along ``dim`` and its index:
    ``(values, indices)`` (``torch.return_types.kthvalue``); NaN is the largest.

    Example::

        >>> import agrad
        >>> agrad.kthvalue(agrad.tensor([4.0, 1.0, 3.0]), 2).values
        tensor(3.)
    """
    return _reduced_selection(input, dim, keepdim, _kthvalue_indices, "KthvalueBackward0", _KthvalueReturn, k=k)


def median(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Any:
    """The lower median: of all elements (a tensor) or along ``dim`` (``(values, indices)``).

    NaN propagates: a slice holding NaN has median NaN (at its first NaN).

    Example::

        >>> import agrad
        >>> agrad.median(agrad.tensor([4.0, 1.0, 3.0, 2.0]))
        tensor(2.)
    """
    if dim is None:
        return _median_all(input)
    return _reduced_selection(input, dim, keepdim, _median_indices, "MedianBackward1", _MedianReturn)


def nanmedian(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Any:
    """``median`` ignoring NaN: the lower median of the other elements (NaN if there are none)."""
    if dim is None:
        return _nanmedian_all(input)
    return _reduced_selection(input, dim, keepdim, _median_indices, "NanmedianBackward1", _NanmedianReturn,
                              ignore_nan=True)


def mode(input: Tensor, dim: int = -1, keepdim: bool = False) -> Any:
    """The most frequent value along ``dim`` (the smallest among equally frequent
    ones) and the index of its last occurrence: ``(values, indices)``."""
    return _reduced_selection(input, dim, keepdim, _mode_indices, "ModeBackward0", _ModeReturn)


# -- quantile, nanquantile ----------------------------------------------------------------

_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _lerp(start: Tensor, end: Tensor, weight: Any) -> Tensor:
    """``start + weight * (end - start)`` as PyTorch's ``lerp`` computes it (from
    the nearer end, so that the ends are exact)."""
    if not isinstance(weight, Tensor):
        return start + weight * (end - start) if weight < 0.5 else end - (end - start) * (1 - weight)
    return where(weight < 0.5, start + weight * (end - start), end - (end - start) * (1 - weight))


def _quantile_checks(input: Tensor, q: Any, interpolation: str) -> None:
    """PyTorch's checks of ``quantile``/``nanquantile``, in its order (its messages say ``quantile()``)."""
    if not isinstance(q, Tensor) and not 0 <= q <= 1:
        raise RuntimeError(f"quantile() q must be in the range [0, 1] but got {q}")
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError("quantile() interpolation must be one of linear, lower, higher, midpoint or nearest, "
                           f"but got {interpolation}")
    if input.numel() == 0:
        raise RuntimeError("quantile() input tensor must be non-empty")
    if isinstance(q, Tensor) and q.ndim > 1:
        raise RuntimeError("quantile() q must be a scalar or 1D tensor")
    if input.dtype not in (_dtype.float32, _dtype.float64):
        raise RuntimeError("quantile() input tensor must be either float or double dtype")
    if isinstance(q, Tensor) and q.dtype is not input.dtype:
        raise RuntimeError("quantile() q tensor must be same dtype as the input tensor")


def _quantile(input: Tensor, q: Any, dim: int | None, keepdim: bool, interpolation: str,
              ignore_nan: bool) -> Tensor:
    """PyTorch's ``quantile_compute``: sort the reduced dim last, turn ``q`` into
    ranks, gather the values below and above each rank and interpolate.  The
    gradient flows through the sort and the gathers to the input (and to a
    ``q`` that requires grad, through the weights)."""
    _quantile_checks(input, q, interpolation)
    if dim is None:
        work = input.reshape(-1)
        reduced = (1,) * input.ndim if keepdim else ()
    elif input.ndim == 0:
        _wrap_dim(dim, 0)
        work, reduced = input.reshape(1), ()
    else:
        d = _wrap_dim(dim, input.ndim)
        work = input.unsqueeze(-1).transpose(d, -1)  # the reduced dim last, a 1 in its place
        reduced = work.shape[:-1] if keepdim else work.shape[:d] + work.shape[d + 1:-1]
    ordered = sort(work.reshape(reduced + (work.shape[-1],)), -1).values
    if isinstance(q, Tensor):
        if q.numel() and not bool(logical_and(q >= 0, q <= 1).all()):
            raise RuntimeError("quantile() q values must be in the range [0, 1]")
        qs = q.reshape(-1)
    else:
        with _backends.on(input.device):
            qs = Tensor._make(_backends.array_module(input._data).asarray([q], dtype=input._data.dtype))
    if ignore_nan:  # ranks among the non-NaN values; none: rank 0, a NaN
        ranks = qs * ((ordered == ordered).sum(-1, keepdim=True) - 1)
        ranks = where(ranks < 0, 0.0, ranks)
    else:  # a NaN in the slice: the last rank, a NaN (NaN sorts last)
        last = ordered.shape[-1] - 1
        ranks = where((ordered != ordered).any(-1, keepdim=True), float(last), qs * last)
    if interpolation in ("lower", "higher", "nearest"):
        ranks = {"lower": floor, "higher": ceil, "nearest": round}[interpolation](ranks)
    below = ranks.detach().to(_dtype.int64)
    out = ordered.gather(-1, below)
    if interpolation in ("linear", "midpoint"):
        weights = 0.5 if interpolation == "midpoint" else ranks - below
        out = _lerp(out, ordered.gather(-1, ceil(ranks.detach()).to(_dtype.int64)), weights)
    if not isinstance(q, Tensor) or q.ndim == 0:
        return out.squeeze(-1)
    return out.unsqueeze(0).transpose(0, -1).squeeze(-1)  # the quantiles first


def quantile(input: Tensor, q: Any, dim: int | None = None, keepdim: bool = False, *,
              interpolation: str = "linear") -> Tensor:
    """The ``q``-quantiles of ``input`` (flattened, or along ``dim``).

    ``q`` is a float or a 0-d or 1-D tensor of ``input``'s dtype, in [0, 1]; a
    1-D ``q`` puts the quantiles in a new first dimension.  Between two data
    points ``interpolation`` takes ``linear`` (default), ``lower``, ``higher``,
    ``midpoint`` or ``nearest`` (rounding half to even).  A slice holding NaN
    has quantiles NaN.

    Example::

        >>> import agrad
        >>> agrad.quantile(agrad.tensor([0.0, 1.0, 2.0, 3.0]), 0.5)
        tensor(1.5000)
    """
    return _quantile(input, q, dim, keepdim, interpolation, ignore_nan=False)


def nanquantile(input: Tensor, q: Any, dim: int | None = None, keepdim: bool = False, *,
                interpolation: str = "linear") -> Tensor:
    """``quantile`` ignoring NaN (a slice of NaNs only has quantiles NaN)."""
    return _quantile(input, q, dim, keepdim, interpolation, ignore_nan=True)


# -- aminmax --------------------------------------------------------------------------------


@defop(ref=lambda torch: lambda x, dim=None, keepdim=False, half="min":
       getattr(torch.aminmax(x, dim=dim, keepdim=keepdim), half),
       vjp=_extreme_grad, node="AminmaxBackward0",
       samples=lambda rng: [((_r(rng, 3, 4),), {}), ((_r(rng, 3, 4),), {"half": "max"}),
                            ((_r(rng, 3, 4, 2),), {"dim": 1, "half": "max"}),
                            ((_r(rng, 3, 4),), {"dim": 0, "keepdim": True}),
                            ((_r(rng, 3, 4),), {"keepdim": True, "half": "max"}),
                            ((_r(rng),), {"half": "max"}),
                            ((_r(rng, 0, 3),), {"dim": 1})])
def _aminmax(xp, input, *, dim=None, keepdim=False, half="min"):
    """One ``half`` (``"min"`` or ``"max"``) of ``aminmax``; the gradient splits among ties."""
    if dim is None and input.size == 0:
        raise RuntimeError("aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
                           "identity.")
    if dim is not None and input.shape[dim] == 0:
        raise IndexError(f"aminmax: Expected reduction dim {dim} to have non-zero size.")
    return (xp.amax if half == "max" else xp.amin)(input, axis=dim, keepdims=keepdim)


def aminmax(input: Tensor, *, dim: int | None = None, keepdim: bool = False) -> Any:
    """The smallest and largest elements (over ``dim``, or all): ``(min, max)``
    (``torch.return_types.aminmax``), each with its own ``AminmaxBackward0``
    node (PyTorch records one node with two outputs)."""
    if dim is not None:
        try:
            dim = _wrap_dim(operator.index(dim), input.ndim)
        except TypeError:
            raise TypeError(f"aminmax(): argument 'dim' must be int, not {type(dim).__name__}") from None
        if input.ndim == 0:
            dim = None
    return _AminmaxReturn(_aminmax(input, dim=dim, keepdim=keepdim, half="min"),
                          _aminmax(input, dim=dim, keepdim=keepdim, half="max"))


# -- cumulative ops -------------------------------------------------------------------------


def _cum_parse(input: Tensor, dim: int, *, dtype: Any = None) -> tuple[tuple, dict]:
    return (input,), {"dim": _wrap_dim(dim, input.ndim), "dtype": dtype}


def _reversed_cumsum(t: Tensor, dim: int) -> Tensor:
    return t.flip(dim).cumsum(dim).flip(dim)


# Note [Cumprod backward at zeros]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch's cumprod_backward.  The gradient at x_k is the sum over j >= k of
# g_j times the product of x_i for i <= j, i != k.  Without zeros in the input
# that is ``reversed_cumsum(out * g) / x`` (the fast path, differentiable).
# With zeros, outside create_graph, it is computed in O(n) from the first zero
# z1 of each slice (a constant): before z1 the fast formula holds; at z1 it is
# the product of x_i, i < z1, times the sum over z1 <= j < z2 of g_j times the
# product of x_i, z1 < i <= j; after z1 it is 0.  That value's derivative is
# not the gradient's (the zeros it drops have nonzero derivatives), so under
# create_graph (grad mode on in the backward) the gradient is written with
# agrad ops as PyTorch's O(n^2) formula: for each k the cumprod of x with x_k
# replaced by 1, times g, summed over j >= k; it is differentiable to any
# order (its own backward calls this rule on an n x n cumprod).
def _cumprod_grad(g: Tensor, input: Tensor, out: Tensor, dim: int) -> Tensor:
    if input.numel() <= 1 or input.shape[dim] == 1:
        return g
    if not bool((input == 0).any()):
        return _reversed_cumsum(out * g, dim) / input
    if grad_enabled.get():
        return _cumprod_grad_quadratic(g, input, dim)
    return _cumprod_grad_at_zeros(g, input, out, dim)


def _cumprod_grad_quadratic(g: Tensor, input: Tensor, dim: int) -> Tensor:
    """The differentiable gradient of ``cumprod`` (Note [Cumprod backward at zeros])."""
    x, gx = input.transpose(dim, -1), g.transpose(dim, -1)
    n = x.shape[-1]
    with _backends.on(input.device):
        xp = _backends.array_module(input._data)
        diagonal = Tensor._make(xp.eye(n, dtype=bool))
        upper = Tensor._make(xp.triu(xp.ones((n, n), dtype=bool)))  # (k, j): j >= k
    omitted = cumprod(where(diagonal, 1.0, x.unsqueeze(-2)), -1)  # (k, j): product of x_i, i <= j, i != k
    return where(upper, omitted * gx.unsqueeze(-2), 0.0).sum(dim=-1).transpose(dim, -1)


@_quiet
def _cumprod_grad_at_zeros(g: Tensor, input: Tensor, out: Tensor, dim: int) -> Tensor:
    """The gradient of ``cumprod`` at an input holding zeros, in O(n), as a
    constant (Note [Cumprod backward at zeros])."""
    with _backends.on(input.device):
        xp = _backends.array_module(input._data)
        x, grad = input._data, g._data.astype(out._data.dtype, copy=False)
        seen = xp.cumsum(x == 0, axis=dim)  # zeros up to and including each position
        before = seen == 0
        safe = xp.where(before, x, 1)
        w = xp.where(before, out._data * grad, 0)
        result = xp.where(before, xp.flip(xp.cumsum(xp.flip(w, axis=dim), axis=dim), axis=dim) / safe, 0)
        first = (x == 0) & (seen == 1)
        after_first = (seen == 1) & ~first  # z1 < i < z2
        head = xp.prod(safe, axis=dim, keepdims=True)  # the product of x_i, i < z1
        tail = xp.cumprod(xp.where(after_first, x, 1), axis=dim)  # the product of x_i, z1 < i <= j
        at_first = head * xp.sum(xp.where(seen == 1, tail * grad, 0), axis=dim, keepdims=True)
        return Tensor._make(xp.where(first, at_first, result))


def _cumprod_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    x = _r(rng, 3, 5)
    zeros = x.copy()
    zeros[0, 2] = zeros[1, 1] = zeros[1, 3] = zeros[2, 0] = zeros[2, 4] = 0.0  # one zero; two; at both ends
    return [((x,), {"dim": 1}), ((x,), {"dim": 0}), ((zeros,), {"dim": 1}), ((zeros.T.copy(),), {"dim": 0}),
            ((zeros[:, ::2],), {"dim": -1}), ((x,), {"dim": 1, "dtype": _dtype.float64}),
            ((_r(rng),), {"dim": 0}), ((_r(rng, 1, 3),), {"dim": 0}), ((_r(rng, 0, 3),), {"dim": 0})]


@defop(ref=lambda torch: torch.cumprod, vjp=_cumprod_grad, node="CumprodBackward0", methods=("cumprod",),
       parse=_cum_parse, samples=_cumprod_samples)
@_quiet
def cumprod(xp, input, *, dim, dtype=None):
    """Cumulative product along ``dim`` (in ``dtype`` if given); integers and bools multiply to int64.

    The gradient is exact at zeros of the input, to any order (Note [Cumprod backward at zeros]).
    """
    np_dtype = dtype.np if dtype is not None else np.int64 if input.dtype.kind in "biu" else None
    if input.ndim == 0:
        return input.astype(np_dtype or input.dtype)
    return xp.cumprod(input, axis=dim, dtype=np_dtype)


def _cum_extreme_indices_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    ties = rng.integers(0, 3, size=(3, 6)).astype(float)
    nans = np.array([[1.0, np.nan, 2.0, np.nan, 0.0], [np.nan] * 5, [3.0, 2.0, np.nan, 1.0, 0.0]])
    return [((_r(rng, 3, 4),), {"dim": 1}), ((ties,), {"dim": 1}), ((ties,), {"dim": 0, "largest": False}),
            ((nans,), {"dim": 1}), ((nans,), {"dim": 1, "largest": False}),
            ((np.array([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]]),), {"dim": 1, "largest": False}),
            ((np.array([True, False, True, True]),), {"dim": 0}), ((_r(rng),), {"dim": 0}),
            ((_r(rng, 0, 3),), {"dim": 0})]


@defop(ref=lambda torch: lambda x, dim, largest=True: (torch.cummax if largest else torch.cummin)(x, dim).indices,
       vjp=None, samples=_cum_extreme_indices_samples)
def _cum_extreme_indices(xp, input, *, dim, largest=True):
    """The indices of ``cummax`` (``cummin`` if not ``largest``): at each position,
    the last position so far that holds the running extreme, or a NaN, as
    PyTorch's kernel, which moves the index wherever ``x >= best`` (``<=``) or x is NaN."""
    if input.ndim == 0:
        return xp.zeros((), dtype=np.int64)

    def along_last(x: Any) -> Any:
        best = (xp.maximum if largest else xp.minimum).accumulate(x, axis=-1)  # NaN propagates
        previous = xp.concatenate([x[..., :1], best[..., :-1]], axis=-1)
        moves = x >= previous if largest else x <= previous
        if x.dtype.kind == "f":
            moves |= xp.isnan(x)
        return xp.maximum.accumulate(xp.where(moves, _positions(xp, x.shape[-1]), 0), axis=-1)

    with np.errstate(invalid="ignore"):
        return _along_last(xp, along_last, input, dim)


@defop(ref=_gather_ref, vjp=(_cum_extreme_grad, None), node="CummaxBackward0", samples=_selection_samples)
def _cummax_values(xp, input, indices, *, dim):
    """The values of ``cummax``: ``input`` at ``indices`` along ``dim``."""
    return _take_along(xp, input, indices, dim)


@defop(ref=_gather_ref, vjp=(_cum_extreme_grad, None), node="CumminBackward0", samples=_selection_samples)
def _cummin_values(xp, input, indices, *, dim):
    """The values of ``cummin``: ``input`` at ``indices`` along ``dim``."""
    return _take_along(xp, input, indices, dim)


def cummax(input: Tensor, dim: int) -> Any:
    """The running maximum along ``dim`` and where it was last attained: ``(values, indices)``.

    A NaN is the maximum from its position on (the index then moves to each later NaN).

    Example::

        >>> import agrad
        >>> agrad.cummax(agrad.tensor([1.0, 3.0, 2.0, 3.0]), 0).indices
        tensor([0, 1, 1, 3])
    """
    d = _wrap_dim(dim, input.ndim)
    indices = _cum_extreme_indices(input, dim=d, largest=True)
    return _CummaxReturn(_cummax_values(input, indices, dim=d), indices)


def cummin(input: Tensor, dim: int) -> Any:
    """The running minimum along ``dim`` and where it was last attained: ``(values, indices)``."""
    d = _wrap_dim(dim, input.ndim)
    indices = _cum_extreme_indices(input, dim=d, largest=False)
    return _CumminReturn(_cummin_values(input, indices, dim=d), indices)


def _logcumsumexp_grad(g: Tensor, input: Tensor, out: Tensor, dim: int) -> Tensor:
    """PyTorch's logcumsumexp_backward: the positive and negative parts of ``g``
    in log space, each through a reversed logcumsumexp, so nothing overflows
    but the filler ``lowest - out`` (to ``-inf``, silently, as in PyTorch)."""
    if g.ndim == 0 or g.numel() == 0:
        return g
    lowest = float(np.finfo(g._data.dtype).min)
    log_abs = abs(g).log()
    positive = where(g > 0, log_abs, lowest)
    negative = where(g < 0, log_abs, lowest)

    def reversed_logcumsumexp(t: Tensor) -> Tensor:
        return logcumsumexp(t.flip(dim), dim).flip(dim)

    with np.errstate(over="ignore"):
        return exp(reversed_logcumsumexp(positive - out) + input) - exp(reversed_logcumsumexp(negative - out) + input)


@defop(ref=lambda torch: torch.logcumsumexp, vjp=_logcumsumexp_grad, node="LogcumsumexpBackward0",
       methods=("logcumsumexp",), parse=lambda input, dim: ((input,), {"dim": _wrap_dim(dim, input.ndim)}),
       samples=lambda rng: [((_r(rng, 3, 4),), {"dim": 1}), ((_r(rng, 3, 4) * 300,), {"dim": 0}),
                            ((np.array([[-1000.0, 0.0, 5.0], [2.0, -40.0, 700.0]]),), {"dim": 1}),
                            ((_r(rng, 2, 3, 4)[:, ::2],), {"dim": -1}), ((_r(rng),), {"dim": 0}),
                            ((_r(rng, 0, 3),), {"dim": 0})])
@_quiet
def logcumsumexp(xp, input, *, dim):
    """``log(cumsum(exp(input), dim))``, computed as a running ``logaddexp`` (exact
    over any range of values); floating inputs only."""
    if input.dtype.kind != "f":
        raise NotImplementedError(f"\"logcumsumexp_out_cpu\" not implemented for '{_TYPE_NAMES[input.dtype.name]}'")
    if input.ndim == 0:
        return input.copy()
    return xp.logaddexp.accumulate(input, axis=dim)


# -- nansum, nanmean ---------------------------------------------------------------------------


def _reduce_dims(dim: Any, ndim: int) -> Any:
    """``dim`` of a reduction, wrapped: None (everything) for None, ``[]`` or a 0-d
    input; an int; or a tuple of ints."""
    if dim is None or (isinstance(dim, (tuple, list)) and not dim):
        return None
    dims = [_wrap_dim(d, ndim) for d in ((dim,) if isinstance(dim, int) else dim)]
    if ndim == 0:
        return None
    return dims[0] if isinstance(dim, int) else tuple(dims)


def _nansum_parse(input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> tuple[tuple, dict]:
    return (input,), {"dim": _reduce_dims(dim, input.ndim), "keepdim": keepdim, "dtype": dtype}


def _nan_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    x = _r(rng, 3, 4, 5)
    x[0, 1, 2] = x[2, 3, 0] = x[1, 1, 1] = np.nan
    return [((x,), {}), ((x,), {"dim": 1}), ((x,), {"dim": (0, 2), "keepdim": True}), ((x,), {"dim": -1}),
            ((x,), {"dim": [], "keepdim": True}), ((np.array([[np.nan, np.nan], [1.0, np.nan]]),), {"dim": 1}),
            ((_r(rng, 3, 4),), {"dtype": _dtype.float64}), ((_r(rng),), {}), ((_r(rng, 0, 3),), {"dim": 0})]


def _nansum_grad(g: Tensor, input: Tensor, dim: Any, keepdim: bool) -> Tensor:
    # PyTorch's nansum_backward: the gradient times the mask of non-NaN elements
    # (a product, so an infinite gradient gives NaN there, silently).
    with np.errstate(invalid="ignore"):
        return _expand_reduced(g, input.shape, dim, keepdim) * (input == input)


@defop(ref=lambda torch: torch.nansum, vjp=_nansum_grad, node="NansumBackward0", methods=("nansum",),
       parse=_nansum_parse, samples=_nan_samples)
def nansum(xp, input, *, dim=None, keepdim=False, dtype=None):
    """Sum over ``dim`` (all dimensions by default) treating NaN as zero; integers
    and bools sum to int64 (or to ``dtype``)."""
    np_dtype = dtype.np if dtype is not None else np.int64 if input.dtype.kind in "biu" else None
    return xp.nansum(input, axis=_axis(dim), keepdims=keepdim, dtype=np_dtype)


def nanmean(input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """Mean over ``dim`` (all dimensions by default) of the elements that are not NaN
    (NaN where there are none); floating inputs only.

    Example::

        >>> import agrad
        >>> agrad.nanmean(agrad.tensor([1.0, float("nan"), 3.0]))
        tensor(2.)
    """
    if not input.dtype.is_floating_point:
        raise RuntimeError("nanmean(): expected input to have floating point or complex dtype but got "
                           f"{_TYPE_NAMES[input.dtype.name]}")
    dims = _reduce_dims(dim, input.ndim)
    return nansum(input, dims, keepdim, dtype=dtype) / (input == input).sum(dim=dims, keepdim=keepdim)


# -- unique, unique_consecutive -------------------------------------------------------------------


def _unique_parts(xp: Any, input: Any, dim: int | None, consecutive: bool) -> tuple[Any, Any, Any]:
    """``(values, inverse, counts)`` of ``unique`` (of ``unique_consecutive``): the
    distinct elements (slices along ``dim``) in sorted order (in order of
    appearance of their runs), where each element went, and how many there were.
    Elements are compared with ``!=``, so NaNs are all distinct, as in PyTorch."""
    rest = () if dim is None else input.shape[:dim] + input.shape[dim + 1:]
    if dim is None:
        rows = input.reshape(-1, 1)
    else:
        if input.shape[dim] and 0 in rest:
            raise RuntimeError("There are 0 sized dimensions, and they aren't selected, so unique cannot be applied")
        rows = xp.moveaxis(input, dim, 0).reshape(input.shape[dim], math.prod(rest))
    n = rows.shape[0]
    if consecutive:
        order = _positions(xp, n)
    elif rows.shape[1] == 1:
        order = xp.argsort(rows[:, 0], kind="stable")
    else:  # slices in lexicographic order: the first column is the primary key
        order = xp.lexsort(rows.T[::-1]) if rows.shape[1] else _positions(xp, n)
    ordered = rows[order]
    starts = xp.ones(n, dtype=bool)
    starts[1:] = xp.any(ordered[1:] != ordered[:-1], axis=1)
    first = xp.flatnonzero(starts)
    inverse = xp.empty(n, dtype=np.int64)
    inverse[order] = xp.cumsum(starts) - 1
    counts = xp.diff(xp.concatenate([first, xp.asarray([n])])).astype(np.int64)
    if dim is None:
        return ordered[first, 0], inverse.reshape(input.shape), counts
    return xp.moveaxis(ordered[first].reshape((first.size,) + rest), 0, dim), inverse, counts


_UNIQUE_PARTS = ("values", "inverse", "counts")


def _unique_ref(torch: Any) -> Callable[..., Any]:
    def ref(x: Any, dim: int | None = None, consecutive: bool = False, part: str = "values") -> Any:
        fn = torch.unique_consecutive if consecutive else torch.unique
        return fn(x, return_inverse=True, return_counts=True, dim=dim)[_UNIQUE_PARTS.index(part)]

    return ref


def _unique_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    ints = rng.integers(0, 4, size=(3, 5))
    rows = np.array([[1, 2], [0, 1], [1, 2], [0, 0], [0, 1]])
    runs = np.array([1.0, 1.0, 2.0, 2.0, 3.0, 1.0, 1.0])
    calls: list[tuple[np.ndarray, dict[str, Any]]] = [
        (ints, {}), (rows, {"dim": 0}), (rows, {"dim": 1}), (runs, {"consecutive": True}),
        (rows, {"dim": 0, "consecutive": True}), (np.array([np.nan, 1.0, np.nan, 0.5]), {}), (_r(rng), {}),
        (np.array([True, False, True]), {}), (_r(rng, 0, 3), {"dim": 0})]
    return [((x,), {**attrs, "part": part}) for part in _UNIQUE_PARTS for x, attrs in calls]


@defop(ref=_unique_ref, vjp=None, samples=_unique_samples)
def _unique(xp, input, *, dim=None, consecutive=False, part="values"):
    """One ``part`` (``"values"``, ``"inverse"`` or ``"counts"``) of ``unique``
    (``unique_consecutive`` when ``consecutive``); see :func:`_unique_parts`."""
    return _unique_parts(xp, input, dim, consecutive)[_UNIQUE_PARTS.index(part)]


def _unique_outputs(input: Tensor, dim: int | None, consecutive: bool, return_inverse: bool,
                    return_counts: bool) -> Any:
    if dim is not None:
        if input.ndim == 0:
            raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
        dim = _wrap_dim(dim, input.ndim)
    parts = ["values"] + ["inverse"] * return_inverse + ["counts"] * return_counts
    outs = tuple(_unique(input, dim=dim, consecutive=consecutive, part=p) for p in parts)
    return outs[0] if len(outs) == 1 else outs


def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,  # noqa: A002
           dim: int | None = None) -> Any:
    """The distinct elements of ``input`` (slices along ``dim``), sorted, with
    optionally where each element went (``return_inverse``) and how many there
    were (``return_counts``).  The result is sorted whatever ``sorted`` says, as
    PyTorch's CPU kernel does; NaNs are all distinct.  Not differentiable.

    Example::

        >>> import agrad
        >>> agrad.unique(agrad.tensor([3, 1, 3, 2]), return_counts=True)
        (tensor([1, 2, 3]), tensor([1, 1, 2]))
    """
    return _unique_outputs(input, dim, False, return_inverse, return_counts)


def unique_consecutive(input: Tensor, return_inverse: bool = False, return_counts: bool = False,
                       dim: int | None = None) -> Any:
    """``input`` with each run of equal consecutive elements (slices along ``dim``)
    kept once; ``return_inverse`` and ``return_counts`` as for :func:`unique`."""
    return _unique_outputs(input, dim, True, return_inverse, return_counts)


# -- searchsorted, bucketize -------------------------------------------------------------------------


def _searchsorted_rows(xp: Any, boundaries: Any, values: Any, side: str) -> Any:
    """``searchsorted`` of each row of ``values`` in the same row of ``boundaries``
    (their leading dims equal), in one search: every value is replaced by its
    rank among all of them and each row's ranks are offset past the previous
    row's, so the rows' keys, laid end to end, stay sorted."""
    both = xp.concatenate([boundaries.reshape(-1), values.reshape(-1)])
    ranks = xp.unique(both)
    rows, n, m = math.prod(boundaries.shape[:-1]), boundaries.shape[-1], values.shape[-1]
    row = _positions(xp, rows).reshape(rows, 1)
    keys = xp.searchsorted(ranks, boundaries).reshape(rows, n) + row * ranks.size
    queries = xp.searchsorted(ranks, values).reshape(rows, m) + row * ranks.size
    found = xp.searchsorted(keys.reshape(-1), queries.reshape(-1), side=side).reshape(rows, m) - row * n
    return found.reshape(values.shape)


def _searchsorted_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    edges = np.array([1.0, 3.0, 5.0, 7.0])
    rows = np.sort(_r(rng, 2, 3, 5), axis=-1)
    return [((edges, np.array([0.0, 3.0, 6.0, 9.0, 7.0])), {}), ((edges, np.array([[0.0, 3.0], [6.0, 7.0]])),
                                                                  {"right": True}),
            ((rows, _r(rng, 2, 3, 4)), {}), ((rows, rows[..., ::2].copy()), {"right": True}),
            ((np.array([1, 3, 3, 7]), np.array([3, 4, 0])), {"out_int32": True}),
            ((edges, np.array(4.0)), {}), ((edges, np.zeros(0)), {}), ((np.zeros(0), np.array([1.0])), {}),
            ((np.zeros((2, 0)), np.array([[1.0], [2.0]])), {"right": True})]


@defop(ref=lambda torch: torch.searchsorted, vjp=None, samples=_searchsorted_samples)
def _searchsorted(xp, sorted_sequence, input, *, out_int32=False, right=False):
    """The indices at which ``input``'s values would be inserted into the sorted
    last dimension of ``sorted_sequence`` (after equal values if ``right``)."""
    _not_for_bool(sorted_sequence, "searchsorted_out_cpu")
    if sorted_sequence.ndim == 0:
        raise RuntimeError("torch.searchsorted(): boundaries tensor should have positive dimension, but got 0 "
                           "dimension")
    side = "right" if right else "left"
    if sorted_sequence.ndim == 1:
        found = xp.searchsorted(sorted_sequence, input, side=side)
    elif input.ndim != sorted_sequence.ndim or input.shape[:-1] != sorted_sequence.shape[:-1]:
        raise RuntimeError("torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions "
                           "of boundaries tensor and input value tensor must match, but we got boundaries tensor "
                           f"{list(sorted_sequence.shape)} and input value tensor {list(input.shape)}")
    else:
        found = _searchsorted_rows(xp, sorted_sequence, input, side)
    return xp.asarray(found, dtype=np.int32 if out_int32 else np.int64)


def searchsorted(sorted_sequence: Tensor, input: Any, *, out_int32: bool = False, right: bool = False,
                 side: str | None = None, sorter: Tensor | None = None) -> Tensor:
    """Where ``input``'s values go in the sorted innermost dimension of
    ``sorted_sequence``: the index of the first element ``>=`` each value (``>``
    with ``right=True`` or ``side="right"``).  ``sorted_sequence`` is 1-D or has
    ``input``'s leading dimensions; ``sorter`` sorts an unsorted sequence (the
    indices are then positions in the sorted order).  int64, or int32 with ``out_int32``.

    Example::

        >>> import agrad
        >>> agrad.searchsorted(agrad.tensor([1.0, 3.0, 5.0]), agrad.tensor([3.0, 6.0]))
        tensor([1, 3])
    """
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"torch.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if side == "left" and right:
            raise RuntimeError("torch.searchsorted(): side and right can't be set to opposites, got side of left "
                               "while right was True")
        right = side == "right"
    if not isinstance(input, Tensor) and sorted_sequence.ndim > 1:
        raise RuntimeError("torch.searchsorted(): input value can be a scalar only when boundaries tensor dimension "
                           f"is 1, but we got boundaries tensor dim({sorted_sequence.ndim}) and input value's dim(0) "
                           "numel(1)")
    if sorter is not None:
        if sorter.dtype is not _dtype.int64:
            raise RuntimeError("torch.searchsorted(): sorter must be a tensor of long dtype but got dtype "
                               f"{_TYPE_NAMES[sorter.dtype.name]}")
        if sorter.shape != sorted_sequence.shape:
            raise RuntimeError("torch.searchsorted(): boundary and sorter must have the same size, but got boundary "
                               f"tensor {list(sorted_sequence.shape)}and got sorter tensor {list(sorter.shape)}")
        sorted_sequence = sorted_sequence.gather(-1, sorter)
    return _searchsorted(sorted_sequence, input, out_int32=out_int32, right=right)


def bucketize(input: Any, boundaries: Tensor, *, out_int32: bool = False, right: bool = False) -> Tensor:
    """The bucket of each element of ``input`` among the sorted 1-D ``boundaries``:
    ``i`` with ``boundaries[i-1] < x <= boundaries[i]`` (``<= x <`` with ``right=True``),
    that is ``searchsorted(boundaries, input, right=right)``."""
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return _searchsorted(boundaries, input, out_int32=out_int32, right=right)


# -- histc, bincount ------------------------------------------------------------------------------------


@defop(ref=lambda torch: torch.histc, vjp=None, methods=("histc",),
       samples=lambda rng: [((_r(rng, 50),), {"bins": 7}), ((np.array([1.0, 2.0, 1.0, 4.0]),), {"bins": 4}),
                            ((np.array([1.0, 2.0, 1.0, 4.0, -1.0]),), {"bins": 4, "min": 0, "max": 3}),
                            ((np.linspace(0.0, 1.0, 41),), {"bins": 10, "min": 0.0, "max": 1.0}),
                            ((np.array([2.0, 2.0]),), {"bins": 4}), ((_r(rng, 3, 4),), {"bins": 5, "min": 1, "max": 1}),
                            ((np.array([0.5, np.nan, 1.5]),), {"bins": 3, "min": 0, "max": 2}),
                            ((_r(rng, 0, 3),), {"bins": 3})])
def histc(xp, input, *, bins=100, min=0, max=0):  # noqa: A002 - mirrors torch.histc
    """Histogram of ``input``'s elements in ``bins`` equal bins over ``[min, max]``
    (the data's range when ``min == max``); elements outside it (and NaN) are
    left out, an element at ``max`` counts in the last bin.  Not differentiable."""
    if input.dtype.kind != "f":
        raise NotImplementedError(f"\"histogram_cpu\" not implemented for '{_TYPE_NAMES[input.dtype.name]}'")
    if bins <= 0:
        raise RuntimeError(f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    low, high = float(min), float(max)
    if low == high and input.size:
        low, high = float(xp.amin(input)), float(xp.amax(input))
    if low == high:
        low, high = low - 1, high + 1
    if not (math.isfinite(low) and math.isfinite(high)):
        raise RuntimeError(f"torch.histc: range of [{low:g}, {high:g}] is not finite")
    if low > high:
        raise RuntimeError("torch.histc: max must be larger than min")
    # PyTorch's linear-interpolation kernel, in the input's precision: the bin of
    # x is int((x - left) * bins / (right - left)), the last one for x == right.
    left, right = input.dtype.type(low), input.dtype.type(high)
    x = input.reshape(-1)
    with np.errstate(invalid="ignore"):
        x = x[(x >= left) & (x <= right)]
    pos = xp.minimum(((x - left) * bins / (right - left)).astype(np.int64), bins - 1)
    return xp.bincount(pos, minlength=bins).astype(input.dtype)


def _check_bincount(input: Any, minlength: int) -> None:
    if input.dtype.kind not in "iu":
        raise NotImplementedError(f"\"bincount_cpu\" not implemented for '{_TYPE_NAMES[input.dtype.name]}'")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if input.ndim != 1 or (input.size and int(input.min()) < 0):
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")


_COUNTS = np.array([2, 0, 5, 2, 2, 1])


@defop(ref=lambda torch: torch.bincount, vjp=None,
       samples=lambda rng: [((_COUNTS,), {}), ((_COUNTS,), {"minlength": 9}), ((_COUNTS.astype(np.uint8),), {}),
                            ((np.zeros(0, dtype=np.int64),), {"minlength": 3})])
def _bincount(xp, input, *, minlength=0):
    """How many times each value ``0..max(input)`` (at least ``minlength`` of them) occurs, as int64."""
    _check_bincount(input, minlength)
    return xp.bincount(input, minlength=minlength).astype(np.int64)


@defop(ref=lambda torch: lambda x, w, minlength=0: torch.bincount(x, w, minlength), vjp=None,
       samples=lambda rng: [((_COUNTS, _r(rng, 6)), {}), ((_COUNTS, _r(rng, 6)), {"minlength": 8}),
                            ((_COUNTS, np.arange(6, dtype=np.int32)), {})])
def _bincount_weighted(xp, input, weights, *, minlength=0):
    """The sum of ``weights`` at each value ``0..max(input)``: float32 for float32
    weights, float64 for any other (PyTorch's two kernels)."""
    _check_bincount(input, minlength)
    if weights.ndim != 1 or weights.shape[0] != input.shape[0]:
        raise RuntimeError("weights should be 1-d and have the same length as input")
    out = xp.bincount(input, weights=weights.astype(np.float64), minlength=minlength)
    return out.astype(np.float32 if weights.dtype == np.float32 else np.float64)


def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """Count (or sum ``weights`` at) each value of the 1-D non-negative integer
    ``input``; the result has ``max(input) + 1`` entries, at least ``minlength``.
    Not differentiable.

    Example::

        >>> import agrad
        >>> agrad.bincount(agrad.tensor([0, 2, 2, 3]))
        tensor([1, 0, 2, 1])
    """
    if weights is None:
        return _bincount(input, minlength=minlength)
    return _bincount_weighted(input, weights, minlength=minlength)


# -- nonzero, argwhere, count_nonzero -------------------------------------------------------------------------


@defop(ref=lambda torch: torch.argwhere, vjp=None, methods=("argwhere",),
       samples=lambda rng: [((np.array([[3, 0, 2], [0, 0, 1]]),), {}), ((_r(rng, 3, 4) > 0,), {}),
                            ((np.array([[0.0, 1.5], [np.nan, 0.0]]),), {}), ((np.array(2.5),), {}),
                            ((np.array(0),), {}), ((_r(rng, 0, 3),), {})])
def argwhere(xp, input):
    """The indices of the nonzero elements, one row each in row-major order: ``(n, input.ndim)``, int64."""
    return xp.argwhere(input).astype(np.int64, copy=False)


def nonzero(input: Tensor, *, as_tuple: bool = False) -> Any:
    """The indices of the nonzero elements: ``argwhere(input)``, or with ``as_tuple``
    one 1-D tensor per dimension (a 0-d input counts as 1-D).

    Example::

        >>> import agrad
        >>> agrad.nonzero(agrad.tensor([[1, 0], [0, 2]]), as_tuple=True)
        (tensor([0, 1]), tensor([0, 1]))
    """
    if not as_tuple:
        return argwhere(input)
    return argwhere(input.reshape(1) if input.ndim == 0 else input).unbind(1)


@defop(ref=lambda torch: torch.count_nonzero, vjp=None, methods=("count_nonzero",),
       parse=lambda input, dim=None: ((input,), {"dim": _reduce_dims(dim, input.ndim)}),
       samples=lambda rng: [((np.array([[3, 0, 2], [0, 0, 1]]),), {}), ((np.array([[3, 0, 2], [0, 0, 1]]),),
                                                                      {"dim": 1}),
                            ((_r(rng, 3, 4, 2) > 0,), {"dim": (0, 2)}), ((np.array([[0.0, np.nan]]),), {"dim": -1}),
                            ((np.array(2.5),), {"dim": 0}), ((_r(rng, 0, 3),), {"dim": 1})])
def count_nonzero(xp, input, *, dim=None):
    """How many elements are nonzero, over ``dim`` (all dimensions by default), as int64."""
    return xp.asarray(xp.count_nonzero(input, axis=dim), dtype=np.int64)


def _cumulative_(fn: Callable[..., Tensor], name: str) -> Callable[..., Tensor]:
    """``Tensor.cumsum_``/``cumprod_``: ``fn`` in place, where ``dtype`` may only be the tensor's own."""

    def same_dtype(self: Tensor, dim: int, *, dtype: Any = None) -> Tensor:
        if dtype is not None and dtype is not self.dtype:
            words = _dtype.CPP_TYPE_NAMES
            raise RuntimeError(f"Bad in-place call: input tensor dtype {words[self.dtype.name]} and output tensor "
                               f"dtype {words[dtype.name]} should match")
        return fn(self, dim)

    return inplace_method(same_dtype, name)


# Tensor methods of this family that are not one entry's ``methods=``
# (composites, aliases with another signature); bound by ``_methods.bind``.
METHODS: dict[str, Any] = {
    "sort": sort,
    "msort": msort,
    "topk": topk,
    "kthvalue": kthvalue,
    "median": median,
    "nanmedian": nanmedian,
    "mode": mode,
    "quantile": quantile,
    "nanquantile": nanquantile,
    "aminmax": aminmax,
    "cummax": cummax,
    "cummin": cummin,
    "cumsum_": _cumulative_(cumsum, "cumsum_"),
    "cumprod_": _cumulative_(cumprod, "cumprod_"),
    "nanmean": nanmean,
    "unique": unique,
    "unique_consecutive": unique_consecutive,
    "bincount": bincount,
    "nonzero": nonzero,
}
