"""Scatter and index-write ops: scatter, scatter_reduce, index_add, index_copy,
index_fill, index_put, index_reduce, masked_scatter, masked_select, take, put,
and the ``*_scatter`` inverses of the view ops (diagonal, select, slice).

Every op here writes values of a source into a copy of ``input`` at positions
given by an index, a mask or a view, so each forward is ``out = input.copy()``
followed by one vectorised numpy write (an assignment, or ``ufunc.at`` where
repeated positions must combine).  The in-place forms (``scatter_``...) are the
out-of-place op run through ``inplace_method`` (``_inplace``), which checks
leaves and views, bumps versions and rebases views as for every in-place op.

Note [Source larger than index]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
``scatter`` and ``scatter_reduce`` read only the leading ``index.shape`` block
of ``src`` (PyTorch: "index.size(d) <= src.size(d)").  PyTorch's backward then
returns a gradient of ``index``'s shape for ``src`` and fails in its shape
check; here the gradient is padded with zeros to ``src``'s shape
(``_to_src_shape``), as ``scatter_add``'s already is.  A deliberate
difference: agrad differentiates what PyTorch computes but cannot.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from agrad import _backends, _dtype
from agrad._errors import broadcast_error
from agrad._ops._common import _r, _zeros_on
from agrad._ops._elementwise import logical_and, where
from agrad._ops._inplace import inplace_method
from agrad._ops._registry import defop, identity
from agrad._ops._shape import (
    _diagonal_parse,
    _diagonal_view,
    _expand_error,
    _first_outside,
    _full_index,
    _index_arg,
    _index_put_grad,
    _scatter_check,
    _scatter_src_grad,
    _select_parse,
    _wrap_dim,
    constant_pad_nd,
    diagonal,
    gather,
    index_select,
    select,
)
from agrad._ops._views import _index_zeroed
from agrad._tensor import Tensor

# The public names of this family (star-imported by ``agrad/__init__.py``).
__all__ = ["scatter", "scatter_reduce", "index_add", "index_copy", "index_fill", "index_put", "index_put_",
           "index_reduce", "masked_scatter", "masked_select", "take", "take_along_dim", "put",
           "diagonal_scatter", "select_scatter", "slice_scatter"]

# -- shared checks and kernels ---------------------------------------------------


def _type_name(a: Any) -> str:
    """PyTorch's ScalarType name of an array's dtype (``Float``, ``Long``...)."""
    return _dtype.SCALAR_TYPE_NAMES[_dtype.from_numpy_dtype(a.dtype).name]


def _src_part(src: Any, shape: tuple[int, ...]) -> Any:
    """The leading ``shape`` block of ``src`` (Note [Source larger than index])."""
    if tuple(src.shape) == tuple(shape):
        return src
    return src[tuple(slice(0, n) for n in shape)]


def _to_src_shape(grad: Tensor, src_shape: tuple[int, ...]) -> Tensor:
    """``grad`` (of the index's shape) padded with zeros to ``src_shape`` (Note [Source larger than index])."""
    if tuple(grad.shape) == tuple(src_shape):
        return grad
    return _index_put_grad(grad, shape=tuple(src_shape), index=tuple(slice(0, n) for n in grad.shape))


def _scatter_into(xp: Any, out: Any, index: Any, values: Any, dim: int, ufunc: str | None = None) -> None:
    """Write ``values`` (``index``'s shape, or a 0-d array) into ``out`` in place at
    ``out[i][index[i][j]]``-style positions along ``dim``; with ``ufunc``
    (``"add"``, ``"maximum"``...) combine them instead, repeated positions included."""
    if not index.size:
        return
    if out.ndim == 0:  # one element: a 1-d view of it, addressed by the flattened index
        target, pos = out.reshape(1), (index.reshape(-1),)
        values = values.reshape(-1) if values.ndim else values
    else:
        target, pos = out, _full_index(xp, index, dim)
    if ufunc is None:
        target[pos] = values
    else:
        getattr(xp, ufunc).at(target, pos, values)


# -- scatter ------------------------------------------------------------------------

# Note [Legacy scatter reduce]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``scatter(..., reduce='add' | 'multiply')`` combines repeated positions, and
# PyTorch has no derivative for it: the result requires grad, its grad_fn is a
# ``torch::autograd::NotImplemented`` node, and a backward through it raises
# "derivative for aten::scatter is not implemented".  agrad records the same
# node (the scatter entries pick it by ``reduce``), whose vjps raise that error.
_NOT_IMPLEMENTED = "torch::autograd::NotImplemented"
_LEGACY_REDUCE = ("add", "multiply")  # numpy's names of the ufuncs too


def _not_implemented(name: str) -> Any:
    raise RuntimeError(f"derivative for aten::{name} is not implemented")


def _check_legacy_reduce(reduce: str | None) -> None:
    if reduce is not None and reduce not in _LEGACY_REDUCE:
        raise RuntimeError("reduce argument must be either add or multiply.")


def _scatter_node(dim: int, reduce: str | None, overload: int = 0) -> str:
    return f"ScatterBackward{overload}" if reduce is None else _NOT_IMPLEMENTED


def _scatter_self_grad(g: Tensor, index: Tensor, dim: int, reduce: str | None) -> Tensor:
    """``g`` with the scattered positions zeroed: they no longer hold ``input``'s values."""
    if reduce is not None:
        return _not_implemented("scatter")
    return _scatter_value(g, dim, index, 0)


def _scatter_src_grad_or_raise(g: Tensor, index: Tensor, dim: int, src_shape: tuple[int, ...],
                                reduce: str | None) -> Tensor:
    """``g`` gathered at ``index``, zero-padded to ``src``'s shape (Note [Source larger than index])."""
    if reduce is not None:
        return _not_implemented("scatter")
    return _scatter_src_grad(g, index, dim, src_shape)


def _scatter_parse(input: Tensor, dim: int, index: Tensor, src: Any, reduce: str | None = None
                   ) -> tuple[tuple, dict]:
    return (input, index, src), {"dim": _wrap_dim(dim, input.ndim), "reduce": reduce}


def _scatter_value_parse(input: Tensor, dim: int, index: Tensor, value: Any, reduce: str | None = None
                         ) -> tuple[tuple, dict]:
    return (input, index), {"dim": _wrap_dim(dim, input.ndim), "value": value, "reduce": reduce}


@defop(ref=lambda torch: torch.scatter,
       vjp=(_scatter_self_grad, None, _scatter_src_grad_or_raise),
       node=("ScatterBackward0", _NOT_IMPLEMENTED), node_for=_scatter_node, parse=_scatter_parse,
       samples=lambda rng: [((_r(rng, 3, 4), 0, np.array([[0, 1, 2, 0], [2, 0, 1, 1]]), _r(rng, 2, 4)), {}),
                            ((_r(rng, 3, 4), -1, np.array([[3, 0], [1, 2]]), _r(rng, 2, 2)), {}),
                            ((_r(rng, 2, 3, 4), 1, np.array([[[2, 0, 1]], [[0, 1, 2]]]), _r(rng, 2, 1, 3)), {}),
                            ((_r(rng), 0, np.array(0), _r(rng)), {}),
                            ((_r(rng, 3, 4), 0, np.zeros((0, 4), dtype=np.int64), _r(rng, 0, 4)), {})])
def _scatter_src(xp, input, index, src, *, dim, reduce=None):
    """``input`` with ``src[i][j]`` written at ``[index[i][j]][j]`` (``dim=0``); backs ``scatter`` with a tensor."""
    _scatter_check(input, index, dim, src)
    _check_legacy_reduce(reduce)
    out = input.copy()
    _scatter_into(xp, out, index, _src_part(src, index.shape), dim, reduce)
    return out


@defop(ref=lambda torch: torch.scatter,
       vjp=(_scatter_self_grad, None), node=("ScatterBackward1", _NOT_IMPLEMENTED),
       node_for=lambda dim, value, reduce: _scatter_node(dim, reduce, 1), parse=_scatter_value_parse,
       samples=lambda rng: [((_r(rng, 3, 4), 1, np.array([[0, 3], [2, 1]]), 1.5), {}),
                            ((_r(rng, 3, 4), 0, np.array([[2, 0, 1, 1]]), -2), {}),
                            ((_r(rng), 0, np.array(0), 0.5), {}),
                            ((_r(rng, 0, 3), 1, np.zeros((0, 2), dtype=np.int64), 1.0), {})])
def _scatter_value(xp, input, index, *, dim, value, reduce=None):
    """``input`` with ``value`` written at ``index`` along ``dim``; backs ``scatter`` with a number."""
    _scatter_check(input, index, dim)
    _check_legacy_reduce(reduce)
    out = input.copy()
    v = xp.asarray(_dtype.convert_scalar(value, _dtype.from_numpy_dtype(out.dtype)), dtype=out.dtype)
    _scatter_into(xp, out, index, v, dim, reduce)
    return out


def scatter(input: Tensor, dim: int, index: Tensor, src: Any = None, value: Any = None, *,
            reduce: str | None = None) -> Tensor:
    """``input`` with ``src`` (a tensor) or ``value`` (a number) written at ``index`` along ``dim``.

    For a 3-d tensor and ``dim=1``: ``out[i][index[i][j][k]][k] = src[i][j][k]``.
    ``reduce='add'`` or ``'multiply'`` combines instead of writing (PyTorch's
    legacy form: not differentiable, Note [Legacy scatter reduce]); see
    ``scatter_reduce`` for the differentiable reductions.

    Args:
        input: the tensor written into (not modified; ``Tensor.scatter_`` is).
        dim: the dimension ``index`` addresses.
        index: int64 or int32 positions, of ``input``'s number of dimensions and
            no larger than it apart from ``dim``.
        src: the values to write, at least ``index``'s size; or a number.
        value: a number to write everywhere ``index`` points.
        reduce: None, ``'add'`` or ``'multiply'``.

    Example::

        >>> agrad.zeros(2, 3).scatter(1, agrad.tensor([[2], [0]]), 1.0)
        tensor([[0., 0., 1.],
                [1., 0., 0.]])
    """
    if src is None and value is None:
        raise TypeError("scatter() received an invalid combination of arguments - got no src and no value")
    if isinstance(src, Tensor):
        if reduce is not None:
            warnings.warn("The reduce argument of torch.scatter with Tensor src is deprecated and will be removed "
                          "in a future PyTorch release. Use torch.scatter_reduce instead for more reduction options.",
                          UserWarning, stacklevel=2)
        return _scatter_src(input, dim, index, src, reduce)
    return _scatter_value(input, dim, index, value if src is None else src, reduce)


# -- scatter_reduce and index_reduce -----------------------------------------------

_REDUCE_UFUNCS = {"sum": "add", "mean": "add", "prod": "multiply", "amax": "maximum", "amin": "minimum"}


def _reduce_identity(dt: np.dtype, reduce: str) -> Any:
    """What a position holds before its first value when ``include_self=False``."""
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    high = reduce == "amin"
    if dt.kind == "f":
        return math.inf if high else -math.inf
    if dt.kind == "b":
        return high
    info = np.iinfo(dt)
    return info.max if high else info.min


def _reduce_into(xp: Any, input: Any, index: Any, src: Any, dim: int, reduce: str, include_self: bool) -> Any:
    """``scatter_reduce``'s kernel: ``input`` with ``src`` (``index``'s shape) reduced in at ``index``."""
    if reduce == "mean" and input.dtype == np.bool_:
        raise NotImplementedError("\"scatter_gather_tensor_cpu_reduce_mean\" not implemented for 'Bool'")
    out = input.copy()
    if not include_self:
        _scatter_into(xp, out, index, xp.asarray(_reduce_identity(out.dtype, reduce), dtype=out.dtype), dim)
    _scatter_into(xp, out, index, src, dim, _REDUCE_UFUNCS[reduce])
    if reduce == "mean":
        count = xp.full(input.shape, 1 if include_self else 0, dtype=out.dtype)
        _scatter_into(xp, count, index, xp.asarray(1, dtype=out.dtype), dim, "add")
        count[count == 0] = 1
        if out.dtype.kind == "f":
            out /= count
        else:  # integers divide rounding down, as PyTorch's kernel does
            out //= count
    return out


def _mean_count(g: Tensor, index: Tensor, src: Tensor, dim: int, include_self: bool) -> Tensor:
    """How many values each position of a ``mean`` averaged (at least 1)."""
    n = _full_on(g, g.shape, 1 if include_self else 0).scatter_add(dim, index, _full_on(g, src.shape, 1))
    return n.masked_fill(n == 0, 1)


def _full_on(like: Tensor, shape: tuple[int, ...], value: Any) -> Tensor:
    """A constant tensor of ``shape`` filled with ``value``, with ``like``'s dtype and device."""
    return Tensor._make(_backends.full(tuple(shape), value, like._data.dtype, like.device))


def _tie_count(input: Tensor, index: Tensor, src: Tensor, out: Tensor, dim: int) -> Tensor:
    """For ``amax``/``amin``: how many values (``input``'s and ``src``'s) equal each result, among
    which its gradient is split evenly.  PyTorch's count, which includes ``input``'s value even when
    ``include_self=False`` (Note [Reductions' gradients as PyTorch's])."""
    dt = out.dtype
    return (input == out).to(dt).scatter_add(dim, index, (src == out.gather(dim, index)).to(dt))


# Note [Reductions' gradients as PyTorch's]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``scatter_reduce`` and ``index_reduce`` take PyTorch's derivative formulas
# (``scatter_reduce_backward`` and ``index_reduce_backward``), written in agrad
# ops so that they differentiate again; ``index_reduce`` is ``scatter_reduce``
# with its index spread over the source (``_spread``), so one set serves both.
# * ``sum``: the gradient passes to ``input`` and is gathered for ``src``.
# * ``mean``: divided by the number of values averaged at each position.
# * ``amax``/``amin``: split evenly among the values equal to the result.
#   PyTorch counts ``input``'s value among them even with
#   ``include_self=False`` (where it then gets nothing), so when that value
#   happens to equal the result ``src``'s share is halved; kept, to match.
# * ``prod``: the product of the others, computed without dividing by a zero:
#   ``input``'s zeros are replaced by 1 before the product, and a lone zero of
#   ``src`` at a position by 1 likewise.  PyTorch raises on double backward
#   through ``src`` when two or more zeros of ``src`` meet at one position
#   (``DelayedError``); agrad differentiates its formula there instead (a
#   deliberate difference: its value is the formula's, not a derivative).
# With ``include_self=False`` the positions written lose ``input``'s gradient.
def _reduce_grad_self(g: Tensor, input: Tensor, index: Tensor, src: Tensor, out: Tensor, dim: int, reduce: str,
                      include_self: bool) -> Tensor:
    """``input``'s gradient through ``scatter_reduce``: Note [Reductions' gradients as PyTorch's]."""
    src = _src_part(src, tuple(index.shape))
    if reduce == "sum":
        grad = g
    elif reduce == "mean":
        grad = g / _mean_count(g, index, src, dim, include_self)
    elif reduce == "prod":
        masked = input.masked_fill(input == 0, 1)
        grad = g * scatter_reduce(masked, dim, index, src, "prod", include_self=include_self) / masked
    else:
        grad = (input == out) * (g / _tie_count(input, index, src, out, dim))
    return grad if include_self else _scatter_value(grad, dim, index, 0)


def _reduce_grad_src(g: Tensor, input: Tensor, index: Tensor, src: Tensor, out: Tensor, dim: int, reduce: str,
                     include_self: bool) -> Tensor:
    """``src``'s gradient through ``scatter_reduce``: Note [Reductions' gradients as PyTorch's]."""
    src_shape = tuple(src.shape)
    src = _src_part(src, tuple(index.shape))
    if reduce == "sum":
        grad = g.gather(dim, index)
    elif reduce == "mean":
        grad = g.gather(dim, index) / _mean_count(g, index, src, dim, include_self).gather(dim, index)
    elif reduce == "prod":
        zero = src == 0
        zeros_here = _zeros_on(g, g.shape).scatter_add(dim, index, zero.to(g.dtype)).gather(dim, index)
        single = logical_and(zero, zeros_here == 1)
        without_zero = scatter_reduce(input, dim, index, src.masked_fill(single, 1), "prod", include_self=include_self)
        grad = where(single, (g * without_zero).gather(dim, index),
                     (g * out).gather(dim, index) / src.masked_fill(zero, 1))
    else:
        share = g / _tie_count(input, index, src, out, dim)
        grad = (src == out.gather(dim, index)) * share.gather(dim, index)
    return _to_src_shape(grad, src_shape)


def _check_reduce(reduce: Any) -> None:
    if reduce not in _REDUCE_UFUNCS:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")


def _scatter_reduce_parse(input: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *,
                          include_self: bool = True) -> tuple[tuple, dict]:
    if not isinstance(src, Tensor):
        raise TypeError(f"scatter_reduce(): argument 'src' (position 4) must be Tensor, not {type(src).__name__}")
    return (input, index, src), {"dim": _wrap_dim(dim, input.ndim), "reduce": reduce,
                                 "include_self": bool(include_self)}


def _each_reduction(rng: np.random.Generator, shape: tuple[int, ...], dim: int, index: np.ndarray,
                    src_shape: tuple[int, ...]) -> list[tuple[tuple, dict]]:
    """One sample per reduction and ``include_self``: ``(input, dim, index, src, reduce)``."""
    return [((_r(rng, *shape), dim, index, _r(rng, *src_shape), reduce), {"include_self": include_self})
            for reduce in ("sum", "prod", "mean", "amax", "amin") for include_self in (True, False)]


def _scatter_reduce_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    index = np.array([[0, 1, 2, 0], [0, 0, 2, 2], [1, 0, 0, 2]])  # repeats along dim 0
    return _each_reduction(rng, (3, 4), 0, index, (3, 4)) + [
        ((_r(rng, 3, 4), -1, np.array([[3, 3], [0, 3]]), _r(rng, 2, 2), "amax"), {}),
        ((_r(rng), 0, np.array(0), _r(rng), "prod"), {}),
        ((_r(rng, 3, 4), 1, np.zeros((3, 0), dtype=np.int64), _r(rng, 3, 0), "mean"), {"include_self": False})]


@defop(ref=lambda torch: torch.scatter_reduce,
       vjp=(_reduce_grad_self, None, _reduce_grad_src), node="ScatterReduceBackward0",
       methods=("scatter_reduce",), inplace=("scatter_reduce_",), parse=_scatter_reduce_parse,
       samples=_scatter_reduce_samples)
def scatter_reduce(xp, input, index, src, *, dim, reduce, include_self=True):
    """``input`` with ``src`` reduced in at ``index`` along ``dim``.

    ``reduce`` is ``'sum'``, ``'prod'``, ``'mean'``, ``'amax'`` or ``'amin'``;
    with ``include_self=False`` the positions ``index`` points to start from
    the reduction's identity instead of ``input``'s values.  Integer means
    round down, as PyTorch's do.
    """
    _scatter_check(input, index, dim, src)
    _check_reduce(reduce)
    return _reduce_into(xp, input, index, _src_part(src, index.shape), dim, reduce, include_self)


def _spread(index: Any, dim: int, shape: tuple[int, ...]) -> Any:
    """An ``index_*`` op's index (a vector along ``dim``) as a scatter's index of
    the source's ``shape``: each slice ``i`` of the source goes to ``index[i]``.
    Takes an array (the forward's) or an agrad Tensor (the vjps')."""
    if not shape:
        return index.reshape(())
    column = index.reshape(tuple(-1 if d == dim else 1 for d in range(len(shape))))
    if isinstance(column, Tensor):
        return column.expand(shape)
    return _backends.array_module(column).broadcast_to(column, shape)


def _index_func_check(name: str, input: Any, index: Any, source: Any, dim: int) -> None:
    """PyTorch's checks of ``index_add``/``index_reduce`` (``index_func_meta_impl``)."""
    if index.ndim > 1:
        raise IndexError(f"{name}_(): Index is supposed to be a vector, but got dim: {index.ndim} with type: "
                         f"{_type_name(index)} and size: {list(index.shape)}")
    if index.dtype not in (np.int64, np.int32):
        raise RuntimeError(f"{name}_(): Expected dtype int32/int64 for index but got: {_type_name(index)}")
    if input.dtype != source.dtype:
        raise RuntimeError(f"{name}_(): self ({_type_name(input)}) and source ({_type_name(source)}) must have the "
                           "same scalar type")
    if not (dim == 0 or dim < source.ndim):
        raise RuntimeError(f"{name}_(): Indexing dim {dim} is out of bounds of the source tensor with dim "
                           f"{source.ndim}")
    along = source.shape[dim] if source.ndim else 1
    if index.size != along:
        raise RuntimeError(f"{name}_(): Number of indices ({index.size}) should be equal to source.size(dim): "
                           f"({along}), for dim: {dim}")
    self_sizes, source_sizes = list(input.shape), list(source.shape)
    if input.ndim and source.ndim:
        del self_sizes[dim], source_sizes[dim]
    if self_sizes != source_sizes:
        raise RuntimeError("source tensor shape must match self tensor shape, excluding the specified dimension. "
                           f"Got self.shape = {list(input.shape)} source.shape = {list(source.shape)}")


def _index_reduce_parse(input: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *,
                        include_self: bool = True) -> tuple[tuple, dict]:
    return (input, index, source), {"dim": _wrap_dim(dim, input.ndim), "reduce": reduce,
                                    "include_self": bool(include_self)}


def _index_reduce_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    out = _each_reduction(rng, (3, 4), 1, np.array([0, 3, 0, 0, 2]), (3, 5))
    return [(args, kw) for args, kw in out if args[4] != "sum"] + [
        ((_r(rng), 0, np.array([0]), _r(rng), "amin"), {}),
        ((_r(rng, 4, 2), 0, np.array([], dtype=np.int64), _r(rng, 0, 2), "prod"), {})]


def _torch_index_reduce(torch: Any) -> Callable[..., Any]:
    """``torch.index_reduce`` without its "in beta" warning (the tests make warnings errors)."""

    def ref(*args: Any, **kwargs: Any) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.index_reduce(*args, **kwargs)
    return ref


def _index_reduce_grad_self(g: Tensor, input: Tensor, index: Tensor, source: Tensor, out: Tensor, dim: int,
                            reduce: str, include_self: bool) -> Tensor:
    return _reduce_grad_self(g, input, _spread(index, dim, tuple(source.shape)), source, out, dim, reduce,
                             include_self)


def _index_reduce_grad_source(g: Tensor, input: Tensor, index: Tensor, source: Tensor, out: Tensor, dim: int,
                              reduce: str, include_self: bool) -> Tensor:
    return _reduce_grad_src(g, input, _spread(index, dim, tuple(source.shape)), source, out, dim, reduce,
                            include_self)


@defop(ref=_torch_index_reduce,
       vjp=(_index_reduce_grad_self, None, _index_reduce_grad_source),
       node="IndexReduceBackward0", methods=("index_reduce",), inplace=("index_reduce_",),
       parse=_index_reduce_parse, samples=_index_reduce_samples)
def index_reduce(xp, input, index, source, *, dim, reduce, include_self=True):
    """``input`` with each slice ``i`` of ``source`` along ``dim`` reduced into slice
    ``index[i]``; ``reduce`` is ``'prod'``, ``'mean'``, ``'amax'`` or ``'amin'``
    (``include_self`` as for ``scatter_reduce``)."""
    _index_func_check("index_reduce", input, index, source, dim)
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got {reduce}.")
    size = input.shape[dim] if input.ndim else 1
    if _first_outside(index, 0, size) is not None:
        raise IndexError("index out of range in self")
    return _reduce_into(xp, input, _spread(index, dim, source.shape), source, dim, reduce, include_self)


# -- index_add, index_copy, index_fill -----------------------------------------------


def _along(dim: int, index: Any) -> tuple[Any, ...]:
    """The positions ``index`` (a vector or a scalar) selects along ``dim``, as a numpy index."""
    return (slice(None),) * dim + (index.reshape(-1),)


def _index_source_grad(g: Tensor, index: Tensor, dim: int, source_shape: tuple[int, ...]) -> Tensor:
    """The slices of ``g`` an ``index_*`` op wrote ``source`` to, in ``source``'s shape."""
    return index_select(g, dim, index).reshape(source_shape)


def _scaled(g: Tensor, alpha: Any) -> Tensor:
    return g if alpha == 1 else g * alpha


def _index_parse(input: Tensor, dim: int, index: Tensor, source: Tensor, **attrs: Any) -> tuple[tuple, dict]:
    return (input, index, source), {"dim": _wrap_dim(dim, input.ndim), **attrs}


@defop(ref=lambda torch: torch.index_add,
       vjp=(identity, None, lambda g, index, dim, alpha, source_shape: _scaled(
           _index_source_grad(g, index, dim, source_shape), alpha)),
       node="IndexAddBackward0", methods=("index_add",), inplace=("index_add_",),
       parse=lambda input, dim, index, source, *, alpha=1: _index_parse(input, dim, index, source, alpha=alpha),
       samples=lambda rng: [((_r(rng, 4, 3), 0, np.array([0, 2, 0]), _r(rng, 3, 3)), {}),
                            ((_r(rng, 4, 3), -1, np.array([2, 2, 1, 0]), _r(rng, 4, 4)), {"alpha": -1.5}),
                            ((_r(rng, 2, 3, 4), 1, np.array(1), _r(rng, 2, 1, 4)), {}),
                            ((_r(rng), 0, np.array([0]), _r(rng)), {"alpha": 2}),
                            ((_r(rng, 4, 3), 0, np.array([], dtype=np.int64), _r(rng, 0, 3)), {})])
def index_add(xp, input, index, source, *, dim, alpha=1):
    """``input`` with ``alpha * source[..., i, ...]`` added to slice ``index[i]`` along ``dim``
    (repeated indices add up)."""
    _index_func_check("index_add", input, index, source, dim)
    size = input.shape[dim] if input.ndim else 1
    if (i := _first_outside(index, 0, size)) is not None:
        raise RuntimeError(f"index {i} is out of bounds for dimension {dim} with size {size}")
    out = input.copy()
    if not index.size:
        return out
    if alpha != 1:  # PyTorch casts alpha to the tensor's dtype (2.5 adds twice to integers)
        source = source * xp.asarray(_dtype.convert_scalar(alpha, _dtype.from_numpy_dtype(out.dtype)),
                                     dtype=out.dtype)
    if out.ndim == 0:
        out += source.reshape(())
    else:
        xp.add.at(out, _along(dim, index), source)
    return out


def _index_copy_check(input: Any, index: Any, source: Any, dim: int) -> None:
    """PyTorch's checks of ``index_copy`` (``index_copy_meta`` and its kernel), in its order."""
    if index.ndim > 1:
        raise IndexError(f"index_copy_(): Index should have dimension 1 or 0 (got {index.ndim})")
    if source.ndim == 0 and index.size != 1:
        raise IndexError(f"index_copy_(): When source is scalar, index should have one element (got {index.size})")
    if source.ndim != input.ndim and source.ndim and input.ndim:
        raise IndexError("index_copy_(): When source and destination are not scalars, their dimensionality must "
                         f"match. Source dimensionality ({source.ndim}), destination dimensionality ({input.ndim})")
    if index.dtype != np.int64:
        raise RuntimeError(f"index_copy_(): Expected a long tensor for index, but got {_type_name(index)}")
    if input.dtype != source.dtype:
        raise RuntimeError("index_copy_(): self and source expected to have the same dtype, but got (self) "
                           f"{_type_name(input)} and (source) {_type_name(source)}")
    self_sliced, source_sliced = list(input.shape), list(source.shape)
    if self_sliced:
        del self_sliced[dim]
    if source_sliced:
        del source_sliced[dim]
    if self_sliced != source_sliced:
        def sizes(s: list[int]) -> str:
            return " ".join(map(str, s))  # c10's printing of a std::vector
        raise RuntimeError(f"index_copy_(): Source/destination tensor must have same slice shapes. Destination slice "
                           f"shape: {sizes(self_sliced)} at dimension {dim} and source slice shape: "
                           f"{sizes(source_sliced)} at dimension 0.")
    if source.ndim and index.size != source.shape[dim]:
        raise IndexError(f"index_copy_(): Number of indices ({index.size}) should be equal to source.size(dim) "
                         f"({source.shape[dim]})")
    size = input.shape[dim] if input.ndim else 1
    if (i := _first_outside(index, 0, size)) is not None:
        raise IndexError(f"index_copy_(): index {i} is out of bounds for dimension {dim} with size {size}")


@defop(ref=lambda torch: torch.index_copy,
       vjp=(lambda g, index, dim: _index_fill(g, dim, index, 0), None,
            lambda g, index, dim, source_shape: _index_source_grad(g, index, dim, source_shape)),
       node="IndexCopyBackward0", methods=("index_copy",), inplace=("index_copy_",), parse=_index_parse,
       samples=lambda rng: [((_r(rng, 4, 3), 0, np.array([3, 0]), _r(rng, 2, 3)), {}),
                            ((_r(rng, 2, 3, 4), -1, np.array([1, 3, 0]), _r(rng, 2, 3, 3)), {}),
                            ((_r(rng, 3), 0, np.array([2]), _r(rng)), {}),
                            ((_r(rng), 0, np.array(0), _r(rng)), {}),
                            ((_r(rng, 4, 3), 1, np.array([], dtype=np.int64), _r(rng, 4, 0)), {})])
def index_copy(xp, input, index, source, *, dim):
    """``input`` with slice ``index[i]`` along ``dim`` replaced by ``source``'s slice ``i``."""
    _index_copy_check(input, index, source, dim)
    out = input.copy()
    if not index.size:
        return out
    if out.ndim == 0:
        out[...] = source.reshape(())
    else:
        out[_along(dim, index)] = source
    return out


def _index_fill_check(input: Any, index: Any, dim: int) -> None:
    if index.dtype != np.int64:
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    if index.ndim > 1:
        raise RuntimeError("Index has to be a vector/scalar")
    size = input.shape[dim] if input.ndim else 1
    if (i := _first_outside(index, -size, size)) is not None:
        raise IndexError(f"index {i} is out of bounds for dimension {dim} with size {size}")


def _fill_along(out: Any, index: Any, dim: int, value: Any) -> Any:
    if index.size:
        if out.ndim == 0:
            out[...] = value
        else:
            out[_along(dim, index)] = value
    return out


@defop(ref=lambda torch: torch.index_fill,
       vjp=(lambda g, index, dim: _index_fill(g, dim, index, 0), None), node="IndexFillBackward0",
       parse=lambda input, dim, index, value: ((input, index), {"dim": _wrap_dim(dim, input.ndim), "value": value}),
       samples=lambda rng: [((_r(rng, 3, 4), 1, np.array([0, 3, 0]), 1.5), {}),
                            ((_r(rng, 3, 4), 0, np.array([-1]), -2), {}),
                            ((_r(rng, 2, 3, 4), -2, np.array(1), 0.0), {}),
                            ((_r(rng), 0, np.array([0]), 3.0), {}),
                            ((_r(rng, 3, 4), 1, np.array([], dtype=np.int64), 1.0), {})])
def _index_fill(xp, input, index, *, dim, value):
    """``input`` with slices ``index`` along ``dim`` set to the number ``value``; backs ``index_fill``."""
    _index_fill_check(input, index, dim)
    v = _dtype.convert_scalar(value, _dtype.from_numpy_dtype(input.dtype))  # Note [Checked scalar conversion]
    return _fill_along(input.copy(), index, dim, v)


def _filled_value_grad(g: Tensor, index: Tensor, dim: int) -> Tensor:
    """The sum of ``g`` over the filled slices (each once, however often ``index`` names it)."""
    return (g - _index_fill(g, dim, index, 0)).sum()


@defop(ref=lambda torch: torch.index_fill,
       vjp=(lambda g, index, dim: _index_fill(g, dim, index, 0), None,
            lambda g, index, dim: _filled_value_grad(g, index, dim)),
       node="IndexFillBackward1",
       parse=lambda input, dim, index, value: ((input, index, value), {"dim": _wrap_dim(dim, input.ndim)}),
       samples=lambda rng: [((_r(rng, 3, 4), 1, np.array([0, 3, 0]), _r(rng)), {}),
                            ((_r(rng, 3, 4), 0, np.array(2), _r(rng)), {}),
                            ((_r(rng), 0, np.array([0]), _r(rng)), {})])
def _index_fill_tensor(xp, input, index, value, *, dim):
    """``input`` with slices ``index`` along ``dim`` set to the 0-d tensor ``value``."""
    _index_fill_check(input, index, dim)
    if value.ndim != 0:
        raise RuntimeError("index_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                           f"{value.ndim} dimension(s).")
    return _fill_along(input.copy(), index, dim, value.astype(input.dtype))


def index_fill(input: Tensor, dim: int, index: Tensor, value: Any) -> Tensor:
    """``input`` with the slices ``index`` along ``dim`` set to ``value`` (a number or a 0-d
    tensor); negative indices count from the end."""
    if isinstance(value, Tensor):
        return _index_fill_tensor(input, dim, index, value)
    return _index_fill(input, dim, index, value)


# -- index_put ------------------------------------------------------------------------


def _index_put_parse(input: Tensor, indices: Any, values: Any, accumulate: bool = False) -> tuple[tuple, dict]:
    """``index_put``'s arguments: ``indices`` a tuple (or list) of index tensors,
    checked here with PyTorch's errors, in its order (Note [Index put checks])."""
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"index_put(): argument 'indices' (position 2) must be tuple of Tensors, not "
                        f"{type(indices).__name__}")
    if not isinstance(values, Tensor):
        raise TypeError(f"index_put(): argument 'values' (position 3) must be Tensor, not {type(values).__name__}")
    items = []
    for k, t in enumerate(indices):
        if not isinstance(t, (Tensor, np.ndarray)) and not _backends.is_array(t):
            raise TypeError(f"expected Tensor as element {k} in argument 1, but got {type(t).__name__}")
        a = _index_arg(t, input.device)
        if a.dtype == np.uint8:  # PyTorch's legacy byte masks
            a = a.astype(np.bool_)
        if a.dtype not in (np.int64, np.int32, np.bool_):
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
        items.append(a)
    with _backends.on(input.device):  # the checks read the index arrays, on the tensor's device
        _check_indices(tuple(input.shape), items, tuple(values.shape))
        if values.dtype is not input.dtype:
            raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                               f"{_dtype.SCALAR_TYPE_NAMES[input.dtype.name]} for the destination and "
                               f"{_dtype.SCALAR_TYPE_NAMES[values.dtype.name]} for the source.")
        shape, d = tuple(input.shape), 0
        for a in items:
            if a.dtype != np.bool_ and (i := _first_outside(a, -shape[d], shape[d])) is not None:
                raise IndexError(f"index {i} is out of bounds for dimension {d} with size {shape[d]}")
            d += a.ndim if a.dtype == np.bool_ else 1
    return (input, values), {"indices": tuple(items), "accumulate": bool(accumulate)}


# Note [Index put checks]
# ~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch checks an ``index_put`` in this order: the index dtypes, their
# number, each mask's shape, that the indices broadcast together, that the
# values broadcast to the indexing result, the values' dtype, and last (in the
# kernel) each index's range.  The indices always address leading dimensions
# one after another, so the indexing result is their broadcast shape followed
# by the dimensions they leave (a mask of k dimensions counts as k indices,
# its true positions as their length).
def _check_indices(shape: tuple[int, ...], items: list[Any], values_shape: tuple[int, ...]) -> None:
    """The shape checks of Note [Index put checks]: too many indices, a mask of the wrong
    shape, indices that do not broadcast, values that do not fit the indexing result."""
    used = sum(max(a.ndim, 1) if a.dtype == np.bool_ else 1 for a in items)
    if used > len(shape):
        raise IndexError(f"too many indices for tensor of dimension {len(shape)} (got {used})")
    d = 0
    lengths = []
    for a in items:
        if a.dtype == np.bool_:
            for j, n in enumerate(a.shape):
                if n != shape[d + j]:
                    raise IndexError(f"The shape of the mask {list(a.shape)} at index {j} does not match the shape "
                                     f"of the indexed tensor {list(shape)} at index {d + j}")
            lengths.append((int(a.sum()),))
            d += a.ndim
        else:
            lengths.append(tuple(a.shape))
            d += 1
    try:
        result = tuple(np.broadcast_shapes(*lengths)) + shape[d:]
    except ValueError:
        raise IndexError("shape mismatch: indexing tensors could not be broadcast together with shapes "
                         + ", ".join(str(list(s)) for s in lengths)) from None
    if len(values_shape) > len(result) or any(v not in (1, r) for v, r in zip(values_shape[::-1], result[::-1])):
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(values_shape)} cannot be broadcast to "
                           f"indexing result of shape {list(result)}")


@defop(ref=lambda torch: torch.index_put,
       vjp=(lambda g, indices, accumulate: g if accumulate else _index_zeroed(g, index=indices),
            lambda g, indices: g[indices]),
       node="IndexPutBackward0", parse=_index_put_parse, release=True,
       samples=lambda rng: [((_r(rng, 4, 3), (np.array([0, 2]),), _r(rng, 2, 3)), {}),
                            ((_r(rng, 4, 3), (np.array([1, 3]), np.array([0, 2])), _r(rng, 2)), {}),
                            ((_r(rng, 4, 3), (np.array([True, False, True, False]),), _r(rng, 3)), {}),
                            ((_r(rng, 4, 3), (np.array([1, 1, 3]), np.array([2, 2, -1])), _r(rng, 3)),
                             {"accumulate": True}),
                            ((_r(rng, 4, 3), (np.array([[0], [3]]), np.array([1, 0, 1])), _r(rng)),
                             {"accumulate": True}),
                            ((_r(rng, 4, 3), (np.array([], dtype=np.int64),), _r(rng, 0, 3)), {})])
def _index_put_impl(xp, input, values, *, indices, accumulate=False):
    """``input`` with ``input[indices] = values`` (``+=``, repeats adding up, if ``accumulate``); backs
    ``index_put`` (PyTorch's ``_index_put_impl_``), whose parser checked the arguments."""
    out = input.copy()
    if accumulate:
        xp.add.at(out, indices, values)
    else:
        out[indices] = values
    return out


def index_put(input: Tensor, indices: Any, values: Tensor, accumulate: bool = False) -> Tensor:
    """``input`` with ``values`` written at ``input[indices]`` (summed in, repeats adding up, when
    ``accumulate``); ``indices`` is a tuple of integer or boolean index tensors."""
    return _index_put_impl(input, indices, values, accumulate)


index_put_ = inplace_method(index_put, "index_put_")

# -- masked_scatter, masked_select ------------------------------------------------------


def _masked_shape(shape: tuple[int, ...], mask_shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape a tensor of ``shape`` and its mask broadcast to, with PyTorch's error (the mask named first)."""
    err = broadcast_error([tuple(mask_shape), tuple(shape)])
    if err is not None:
        raise err
    return tuple(np.broadcast_shapes(tuple(mask_shape), tuple(shape)))


def _masked_scatter_source_grad(g: Tensor, mask: Tensor, source_shape: tuple[int, ...]) -> Tensor:
    """The gradient at the masked positions, in order, then zeros for the unused source elements."""
    taken = masked_select(g, mask)
    unused = math.prod(source_shape) - taken.shape[0]
    return (constant_pad_nd(taken, (0, unused)) if unused else taken).reshape(source_shape)


@defop(ref=lambda torch: torch.masked_scatter,
       vjp=(lambda g, mask: g.masked_fill(mask, 0), None,
            lambda g, mask, source_shape: _masked_scatter_source_grad(g, mask, source_shape)),
       node="MaskedScatterBackward0", methods=("masked_scatter",),
       samples=lambda rng: [((_r(rng, 3, 4), rng.uniform(size=(3, 4)) > 0.5, _r(rng, 3, 4)), {}),
                            ((_r(rng, 3, 4), np.array([True, False, True, True]), _r(rng, 10)), {}),
                            ((_r(rng, 4), np.array([[True, False, False, True], [False] * 4]), _r(rng, 2, 2)), {}),
                            ((_r(rng), np.array(True), _r(rng)), {}),
                            ((_r(rng, 0, 3), np.array([True, False, True]), _r(rng, 2)), {})])
def masked_scatter(xp, input, mask, source):
    """``input`` with the positions where ``mask`` is true filled, in row-major order, by the
    first elements of ``source`` (``input`` and ``mask`` broadcast together)."""
    if mask.dtype != np.bool_:
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with dtype "
                           f"{_type_name(mask)}")
    if input.dtype != source.dtype:
        raise RuntimeError("masked_scatter: expected self and source to have same dtypes but got"
                           f"{_type_name(input)} and {_type_name(source)}")
    shape = _masked_shape(input.shape, mask.shape)
    out = xp.broadcast_to(input, shape).copy()
    where_ = xp.broadcast_to(mask, shape)
    n = int(where_.sum())
    if n > source.size:
        raise RuntimeError("Number of elements of source < number of ones in mask")
    out[where_] = source.reshape(-1)[:n]
    return out


_masked_scatter_inplace = inplace_method(masked_scatter, "masked_scatter_")


def _masked_scatter_(self: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """``Tensor.masked_scatter_``: the mask must expand to ``self``'s shape (the
    out-of-place op broadcasts both), with PyTorch's ``expand`` errors."""
    shape, mask_shape = tuple(self.shape), tuple(mask.shape)
    if len(mask_shape) > len(shape):
        kind = f"{self.device.type.upper()}{_dtype.SCALAR_TYPE_NAMES[mask.dtype.name]}Type"
        raise RuntimeError(f"expand({kind}{{{list(mask_shape)}}}, size={list(shape)}): the number of sizes provided "
                           f"({len(shape)}) must be greater or equal to the number of dimensions in the tensor "
                           f"({len(mask_shape)})")
    if any(m not in (1, s) for m, s in zip(mask_shape[::-1], shape[::-1])):
        raise _expand_error(mask_shape, shape)
    return _masked_scatter_inplace(self, mask, source)


@defop(ref=lambda torch: torch.masked_select,
       vjp=(lambda g, input_shape, mask: masked_scatter(
           _zeros_on(g, _masked_shape(input_shape, tuple(mask.shape))), mask, g), None),
       node="MaskedSelectBackward0", methods=("masked_select",),
       samples=lambda rng: [((_r(rng, 3, 4), rng.uniform(size=(3, 4)) > 0.5), {}),
                            ((_r(rng, 3, 4), np.array([False, True, True, False])), {}),
                            ((_r(rng, 4), np.array([[True, False, False, True], [True] * 4])), {}),
                            ((_r(rng), np.array(True)), {}),
                            ((_r(rng, 0, 2), np.array([True, True])), {})])
def masked_select(xp, input, mask):
    """The elements of ``input`` where ``mask`` is true, as a 1-d tensor (the two broadcast together)."""
    if mask.dtype != np.bool_:
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    shape = _masked_shape(input.shape, mask.shape)
    return xp.broadcast_to(input, shape)[xp.broadcast_to(mask, shape)]


# -- take, put, take_along_dim ------------------------------------------------------


def _check_flat_index(name: str, index: Any) -> None:
    """``take``'s and ``put_``'s checks of an index into the flattened tensor."""
    if index.dtype != np.int64:
        raise RuntimeError(f"{name}(): Expected a long tensor for index, but got {_type_name(index)}")


def _check_flat_bounds(index: Any, numel: int) -> None:
    if (i := _first_outside(index, -numel, numel)) is not None:
        raise IndexError(f"out of range: tried to access index {i} on a tensor of {numel} elements.")


@defop(ref=lambda torch: torch.take,
       vjp=(lambda g, input_shape, index: put(_zeros_on(g, input_shape), index, g, accumulate=True), None),
       node="TakeBackward0", methods=("take",),
       samples=lambda rng: [((_r(rng, 3, 4), np.array([0, 11, -1, 5, 5])), {}),
                            ((_r(rng, 3, 4), np.array([[1, 2], [-12, 2]])), {}),
                            ((_r(rng, 3, 4), np.array(7)), {}),
                            ((_r(rng), np.array([0, -1])), {}),
                            ((_r(rng, 2, 3), np.array([], dtype=np.int64)), {})])
def take(xp, input, index):
    """The elements of ``input``, read as a 1-d tensor, at ``index`` (any shape; negative counts from the end)."""
    _check_flat_index("take", index)
    if not input.size and index.size:
        raise IndexError("take(): tried to take from an empty tensor")
    _check_flat_bounds(index, input.size)
    return input.reshape(-1)[index]


@defop(ref=lambda torch: torch.put,
       vjp=(lambda g, index, accumulate, source_shape: g if accumulate
            else put(g, index, _zeros_on(g, source_shape)), None,
            lambda g, index, source_shape: take(g, index).reshape(source_shape)),
       node="PutBackward0", methods=("put",), inplace=("put_",),
       samples=lambda rng: [((_r(rng, 3, 4), np.array([0, 11, -2]), _r(rng, 3)), {}),
                            ((_r(rng, 3, 4), np.array([[1, 1], [-12, 4]]), _r(rng, 4)), {"accumulate": True}),
                            ((_r(rng, 3, 4), np.array(5), _r(rng)), {}),
                            ((_r(rng), np.array([0, 0]), _r(rng, 2)), {"accumulate": True}),
                            ((_r(rng, 2, 3), np.array([], dtype=np.int64), _r(rng, 0)), {})])
def put(xp, input, index, source, *, accumulate=False):
    """``input``, read as a 1-d tensor, with ``source``'s elements written (added, if ``accumulate``)
    at ``index``; ``source`` has one element per index."""
    _check_flat_index("put_", index)
    if input.dtype != source.dtype:
        raise RuntimeError("put_(): self and source expected to have the same dtype, but got self.dtype = "
                           f"{_type_name(input)} and source.dtype = {_type_name(source)}")
    if source.size != index.size:
        raise IndexError("put_(): Expected source and index to have the same number of elements, but got "
                         f"source.numel() = {source.size}, index.numel() = {index.size}")
    if not input.size and index.size:
        raise IndexError("put_(): Tried to put elements into an empty tensor")
    _check_flat_bounds(index, input.size)
    flat = input.reshape(-1).copy()
    if accumulate:
        xp.add.at(flat, index.reshape(-1), source.reshape(-1))
    else:
        flat[index.reshape(-1)] = source.reshape(-1)
    return flat.reshape(input.shape)


def take_along_dim(input: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    """``gather`` along ``dim`` after broadcasting ``input`` and ``indices`` together in every
    other dimension; with no ``dim``, indices into the flattened ``input``.  Its gradient
    is ``gather``'s (PyTorch records GatherBackward0 too)."""
    if dim is None:
        return gather(input.view(-1), 0, indices.view(-1))
    if input.ndim != indices.ndim:
        raise RuntimeError("torch.take_along_dim(): input and indices should have the same number of dimensions, "
                           f"but got {input.ndim} dimensions for input, and {indices.ndim} dimensions for indices")
    if indices.dtype is not _dtype.int64:
        raise RuntimeError("torch.take_along_dim(): dtype of indices should be Long but got "
                           f"{_dtype.SCALAR_TYPE_NAMES[indices.dtype.name]}")
    if input.ndim == 0:
        raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
    d = _wrap_dim(dim, input.ndim)
    self_sizes = list(input.shape)
    self_sizes[d] = indices.shape[d]
    index_sizes = list(indices.shape)
    index_sizes[d] = input.shape[d]
    for a, b in ((self_sizes, indices.shape), (index_sizes, input.shape)):
        err = broadcast_error([tuple(a), tuple(b)])
        if err is not None:
            raise err
    index_shape = tuple(np.broadcast_shapes(tuple(self_sizes), indices.shape))
    input_shape = tuple(np.broadcast_shapes(tuple(index_sizes), input.shape))
    return gather(input.expand(input_shape), d, indices.expand(index_shape))


# -- diagonal_scatter, select_scatter, slice_scatter ------------------------------


def _write_region(region: Any, src: Any) -> None:
    """Copy ``src`` into ``region`` (a view of a fresh output), cast to its dtype, which
    must be ``src``'s shape exactly (PyTorch's ``*_scatter`` check)."""
    if region.shape != src.shape:
        raise RuntimeError(f"expected src to have a size equal to the slice of self. src size = {list(src.shape)}, "
                           f"slice size = {list(region.shape)}")
    region[...] = src


@defop(ref=lambda torch: torch.diagonal_scatter,
       vjp=(lambda g, src_shape, offset, dim1, dim2: diagonal_scatter(
                g, _zeros_on(g, src_shape), offset, dim1, dim2),
            lambda g, offset, dim1, dim2: diagonal(g, offset, dim1, dim2)),
       node="DiagonalScatterBackward0", methods=("diagonal_scatter",),
       parse=lambda input, src, offset=0, dim1=0, dim2=1: (
           (input, src), _diagonal_parse(input, offset, dim1, dim2)[1]),
       samples=lambda rng: [((_r(rng, 3, 4), _r(rng, 3)), {}), ((_r(rng, 3, 4), _r(rng, 3), 1), {}),
                            ((_r(rng, 3, 4), _r(rng, 2), -1), {}),
                            ((_r(rng, 2, 3, 4), _r(rng, 4, 2)), {"dim1": 0, "dim2": 1}),
                            ((_r(rng, 2, 3, 4), _r(rng, 2, 2)), {"offset": 1, "dim1": -1, "dim2": 1}),
                            ((_r(rng, 3, 4), _r(rng, 0), 5), {})])
def diagonal_scatter(xp, input, src, *, offset=0, dim1=0, dim2=1):
    """``input`` with the diagonal ``diagonal(input, offset, dim1, dim2)`` replaced by ``src``."""
    out = input.copy()
    _write_region(_diagonal_view(xp, out, offset, dim1, dim2), src)
    return out


@defop(ref=lambda torch: torch.select_scatter,
       vjp=(lambda g, src_shape, dim, index: select_scatter(g, _zeros_on(g, src_shape), dim, index),
            lambda g, dim, index: select(g, dim, index)),
       node="SelectScatterBackward0", methods=("select_scatter",),
       parse=lambda input, src, dim, index: ((input, src), _select_parse(input, dim, index)[1]),
       samples=lambda rng: [((_r(rng, 3, 4), _r(rng, 4), 0, 1), {}), ((_r(rng, 3, 4), _r(rng, 3), -1, -1), {}),
                            ((_r(rng, 3), _r(rng), 0, 2), {}), ((_r(rng, 2, 3, 4), _r(rng, 2, 4), 1, 0), {}),
                            ((_r(rng, 0, 2), _r(rng, 0), 1, 1), {})])
def select_scatter(xp, input, src, *, dim, index):
    """``input`` with the slice ``select(input, dim, index)`` replaced by ``src``."""
    out = input.copy()
    _write_region(out[(slice(None),) * dim + (index, Ellipsis)], src)
    return out


def _slice_scatter_parse(input: Tensor, src: Tensor, dim: int = 0, start: int | None = None,
                         end: int | None = None, step: int = 1) -> tuple[tuple, dict]:
    if input.ndim == 0:
        raise IndexError("slice() cannot be applied to a 0-dim tensor.")
    d = _wrap_dim(dim, input.ndim)
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    start, end, step = slice(start, end, step).indices(input.shape[d])  # clamped, as PyTorch's slice
    return (input, src), {"dim": d, "start": start, "end": max(end, start), "step": step}


def _sliced(dim: int, start: int, end: int, step: int) -> tuple[slice, ...]:
    return (slice(None),) * dim + (slice(start, end, step),)


@defop(ref=lambda torch: torch.slice_scatter,
       vjp=(lambda g, src_shape, dim, start, end, step: slice_scatter(
                g, _zeros_on(g, src_shape), dim, start, end, step),
            lambda g, dim, start, end, step: g[_sliced(dim, start, end, step)]),
       node="SliceScatterBackward0", methods=("slice_scatter",), parse=_slice_scatter_parse,
       samples=lambda rng: [((_r(rng, 3, 4), _r(rng, 1, 4), 0, 1, 2), {}), ((_r(rng, 3, 4), _r(rng, 3, 4)), {}),
                            ((_r(rng, 3, 4), _r(rng, 3, 2)), {"dim": 1, "start": 1, "step": 2}),
                            ((_r(rng, 3, 4), _r(rng, 3, 2), -1, -3, None, 2), {}),
                            ((_r(rng, 3, 4), _r(rng, 3, 2), 1, -10, 2), {}),
                            ((_r(rng, 3, 4), _r(rng, 3, 0), 1, 3, 1), {})])
def slice_scatter(xp, input, src, *, dim=0, start=0, end=None, step=1):
    """``input`` with the slice ``input[start:end:step]`` along ``dim`` replaced by ``src``."""
    out = input.copy()
    _write_region(out[_sliced(dim, start, end, step)], src)
    return out


# Tensor methods of this family that are not one entry's ``methods=``
# (composites, aliases with another signature); bound by ``_methods.bind``.
METHODS: dict[str, Any] = {
    "scatter": scatter,
    "scatter_": inplace_method(scatter, "scatter_"),
    "index_fill": index_fill,
    "index_fill_": inplace_method(index_fill, "index_fill_"),
    "index_put": index_put,
    "index_put_": index_put_,
    "take_along_dim": take_along_dim,
    "masked_scatter_": _masked_scatter_,
}
