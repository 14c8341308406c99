"""Shape, indexing and conversion ops, and the Tensor methods that are spellings of them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from agrad import _backends, _dtype
from agrad._ambient import current_graph_task
from agrad._device import CPU
from agrad._errors import broadcast_error, dim_out_of_range
from agrad._grad_mode import grad_enabled
from agrad._graph._node import Node
from agrad._ops._common import _grids, _on_device, _r, _shape_args, _unary_samples, _zeros_on
from agrad._ops._dispatch import _make_view
from agrad._ops._inplace import inplace_method
from agrad._ops._record import record
from agrad._ops._registry import REGISTRY, OpDef, defop, identity
from agrad._tensor import InferenceCounter, Tensor

# The public names of this family (star-imported by ``agrad/__init__.py``).
__all__ = ["reshape", "transpose", "unsqueeze", "squeeze", "clone", "flatten", "permute", "broadcast_to", "cat",
           "stack", "split", "chunk", "flip", "roll", "tile", "narrow", "index_select", "gather",
           "scatter_add", "masked_fill", "constant_pad_nd", "select", "unbind", "diagonal"]

# -- shape ------------------------------------------------------------------------


def _reshape_error(size: tuple[int, ...], shape: tuple[int, ...]) -> RuntimeError | None:
    """PyTorch's error for reshaping ``size`` to ``shape`` (``infer_size``), or None if the sizes fit."""
    numel = int(np.prod(size, dtype=np.int64))
    for i, s in enumerate(shape):
        if s < -1:
            return RuntimeError(f"invalid shape dimension {s} at index {i} of shape {list(shape)}")
    if shape.count(-1) > 1:
        return RuntimeError("only one dimension can be inferred")
    known = int(np.prod([s for s in shape if s != -1], dtype=np.int64))
    if -1 in shape and known == 0:
        return RuntimeError(f"cannot reshape tensor of {numel} elements into shape {list(shape)} because the "
                            "unspecified dimension size -1 can be any value and is ambiguous")
    if (numel % known if -1 in shape else numel != known):
        return RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return None


def _SHAPE_SAMPLES(rng: np.random.Generator) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    return [((_r(rng, 3, 4), 12), {}), ((_r(rng, 3, 4), (2, -1, 3)), {}), ((_r(rng, 1), ()), {})]


@defop(view=True, ref=lambda torch: lambda x, *shape: x.reshape(*shape),
       vjp=lambda g, input_shape: g.reshape(input_shape), node="ViewBackward0",
       methods=("reshape",), parse=lambda input, *shape: ((input,), {"shape": _shape_args(shape, "reshape", "shape")}),
       samples=_SHAPE_SAMPLES)
def reshape(xp, input, *, shape):
    """The same elements in a new shape (``-1`` infers one dimension); a view when the strides allow."""
    try:
        if min(shape, default=0) < -1:  # numpy reads any negative size as -1
            raise ValueError
        return xp.reshape(input, shape)
    except ValueError:
        raise _reshape_error(input.shape, shape) or RuntimeError(f"reshape: cannot reshape {list(input.shape)} "
                                                                 f"into {list(shape)}") from None


_VIEW_STRIDES = ("view size is not compatible with input tensor's size and stride (at least one dimension spans "
                 "across two contiguous subspaces). Use .reshape(...) instead.")


@defop(view=True, ref=lambda torch: lambda x, *shape: x.view(*shape),
       vjp=lambda g, input_shape: g.reshape(input_shape), node="ViewBackward0",
       methods=("view",), parse=lambda input, *shape: ((input,), {"shape": _shape_args(shape, "view")}),
       samples=_SHAPE_SAMPLES)
def _view(xp, input, *, shape):
    """``input``'s memory in a new shape: never a copy (PyTorch's ``computeStride``), so
    writes through it reach ``input``; raises where the strides do not allow it."""
    try:
        if min(shape, default=0) < -1:  # numpy reads any negative size as -1
            raise ValueError
        if xp is np:
            return np.reshape(input, shape, copy=False)
        out = xp.reshape(input, shape)
    except ValueError:
        raise _reshape_error(input.shape, shape) or RuntimeError(_VIEW_STRIDES) from None
    if out.size and not xp.may_share_memory(out, input):
        raise RuntimeError(_VIEW_STRIDES)
    return out


@defop(view=True, ref=lambda torch: torch.transpose,
       vjp=lambda g, dim0, dim1: g.transpose(dim0, dim1), node="TransposeBackward0", methods=("transpose",),
       samples=lambda rng: [((_r(rng, 3, 4), 0, 1), {}), ((_r(rng, 2, 3, 4), -1, 0), {}), ((_r(rng), 0, -1), {})])
def transpose(xp, input, *, dim0, dim1):
    """Swap dimensions ``dim0`` and ``dim1`` (a 0-d tensor, as PyTorch's, takes 0 and -1)."""
    if input.ndim == 0:
        for d in (dim0, dim1):
            _wrap_dim(d, 0)  # PyTorch's range error for anything else
        return input[...]
    return xp.swapaxes(input, dim0, dim1)


@defop(view=True, ref=lambda torch: lambda x, *size: x.expand(*size),
       vjp=lambda g, input_shape: g.sum_to_size(input_shape), node="ExpandBackward0",
       methods=("expand",), parse=lambda input, *size: ((input,), {"size": _shape_args(size, "expand")}),
       samples=lambda rng: [((_r(rng, 3, 1), (2, 3, 4)), {}), ((_r(rng), (3,)), {}), ((_r(rng, 2, 1), (-1, 3)), {})])
def expand(xp, input, *, size):
    """A broadcast view of ``input`` at ``size`` (``-1`` keeps a dimension)."""
    lead = len(size) - input.ndim
    if lead < 0:
        raise RuntimeError(
            f"expand: the number of sizes provided ({len(size)}) must be greater or equal to the "
            f"number of dimensions in the tensor ({input.ndim})"
        )
    shape = tuple(input.shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(size))
    if input.ndim == 0 and xp is np and min(shape, default=0) >= 0:
        # A 0-d source, as every full reduction's gradient is (SumBackward0):
        # the stride-0 view built directly takes 0.2 µs, np.broadcast_to 2.4.
        out = np.ndarray(shape, input.dtype, input, 0, (0,) * len(shape))
        out.flags.writeable = False
        return out
    try:
        return xp.broadcast_to(input, shape)
    except ValueError:
        raise _expand_error(input.shape, size) from None


def _expand_error(shape: tuple[int, ...], size: tuple[int, ...]) -> RuntimeError:
    """PyTorch's error for expanding ``shape`` to ``size`` (``inferExpandGeometry``)."""
    lead = len(size) - len(shape)
    for i in range(len(size) - 1, -1, -1):
        s = size[i]
        if i < lead:
            if s < 0:
                return RuntimeError(f"The expanded size of the tensor ({s}) isn't allowed in a leading, "
                                    f"non-existing dimension {i}")
        elif s != -1 and shape[i - lead] not in (1, s):
            return RuntimeError(
                f"The expanded size of the tensor ({s}) must match the existing size ({shape[i - lead]}) at "
                f"non-singleton dimension {i}.  Target sizes: {list(size)}.  Tensor sizes: {list(shape)}"
            )
    negative = [s for s in size if s < -1]
    return RuntimeError(f"Trying to create tensor with negative dimension {negative[0] if negative else -1}: "
                        f"{list(size)}")


def _sum_to(xp: Any, x: Any, shape: tuple[int, ...]) -> Any:
    lead = x.ndim - len(shape)
    if lead < 0:
        raise _not_expandable(shape, x.shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape) if s == 1 and x.shape[i + lead] != 1)
    out = xp.sum(x, axis=axes, keepdims=True) if axes else x
    if lead or out.shape != shape:
        if out.shape[lead:] != shape:  # a size neither 1 nor x's: checked only off the common path
            raise _not_expandable(shape, x.shape)
        return out.reshape(shape)
    return out


def _not_expandable(size: tuple[int, ...], shape: tuple[int, ...]) -> RuntimeError:
    return RuntimeError(f"size {{{list(size)}}} is not expandable to size {{{list(shape)}}}.")


def _sum_to_size_args(input: Tensor, *size: Any) -> tuple[tuple[Tensor], dict[str, Any]]:
    """The entry's input and attributes: ``size``, and PyTorch's name of the node
    (``sum_to``: a full ``sum``, else a ``sum`` over dims and a ``view`` when
    leading dimensions go)."""
    shape = _shape_args(size, "sum_to_size")
    node = "SumBackward0" if not shape else "ViewBackward0" if len(shape) < input.ndim else "SumBackward1"
    return (input,), {"size": shape, "node": node}


@defop(ref=lambda torch: lambda x, *size: x.sum_to_size(*size),
       vjp=lambda g, input_shape: g.expand(input_shape),
       node=("SumBackward0", "SumBackward1", "ViewBackward0"), node_for=lambda size, node: node,
       methods=("sum_to_size",), parse=_sum_to_size_args,
       samples=lambda rng: [((_r(rng, 2, 3, 4), (3, 1)), {}), ((_r(rng, 3), ()), {})])
def sum_to_size(xp, input, *, size, node="SumBackward1"):
    """Sum ``input`` down to ``size``, undoing a broadcast to ``input``'s shape
    (``node``: PyTorch's name of the node, from ``_sum_to_size_args``)."""
    return _sum_to(xp, input, size)


def _unsqueeze_shape(shape: tuple[int, ...], dim: int) -> tuple[int, ...]:
    dim = _wrap_dim(dim, len(shape) + 1)
    return shape[:dim] + (1,) + shape[dim:]


@defop(view=True, ref=lambda torch: torch.unsqueeze,
       vjp=lambda g, input_shape: g.reshape(input_shape), node="UnsqueezeBackward0", methods=("unsqueeze",),
       samples=lambda rng: [((_r(rng, 3, 4), 1), {}), ((_r(rng, 3), -1), {}), ((_r(rng), 0), {})])
def unsqueeze(xp, input, *, dim):
    """Insert a dimension of size one at ``dim``."""
    return xp.reshape(input, _unsqueeze_shape(input.shape, dim))


@defop(view=True, ref=lambda torch: lambda x, dim=None: x.squeeze() if dim is None else x.squeeze(dim),
       vjp=lambda g, input_shape: g.reshape(input_shape), methods=("squeeze",),
       node=("SqueezeBackward0", "SqueezeBackward1", "SqueezeBackward2"),  # PyTorch's overloads: all, a dim, dims
       node_for=lambda dim: "SqueezeBackward0" if dim is None else
       "SqueezeBackward1" if isinstance(dim, (int, np.integer)) else "SqueezeBackward2",
       samples=lambda rng: [((_r(rng, 3, 1, 4),), {}), ((_r(rng, 3, 1),), {"dim": -1}), ((_r(rng, 3, 2),), {"dim": 1})])
def squeeze(xp, input, *, dim=None):
    """Remove dimensions of size one (only ``dim`` if given; a no-op if it is not 1)."""
    if dim is None:
        return xp.reshape(input, tuple(s for s in input.shape if s != 1))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    wrapped = [_wrap_dim(d, input.ndim) for d in dims]
    drop = {d for d in wrapped if input.ndim and input.shape[d] == 1}
    return xp.reshape(input, tuple(s for i, s in enumerate(input.shape) if i not in drop))


@defop(ref=lambda torch: torch.clone,
       vjp=identity, node="CloneBackward0", methods=("clone",), samples=_unary_samples())
def clone(xp, input):
    """A copy of ``input`` with its own memory and, as PyTorch's ``preserve_format``, its layout."""
    return input.copy(order="K")


@defop(ref=lambda torch: lambda x, dtype: x.to(dtype), check={"eps": 1e-3, "atol": 1e-4, "rtol": 1e-3},
       vjp=identity, node="ToCopyBackward0", samples=lambda rng: [((_r(rng, 3),), {"dtype": _dtype.float32})])
def _to_dtype(xp, input, *, dtype):
    """Cast to ``dtype``; the engine casts the gradient back (see GraphTask._complete).
    Values out of the target's range become inf silently, as in PyTorch."""
    with np.errstate(over="ignore", invalid="ignore"):
        return input.astype(dtype.np)


def _fill_node(value: Any, kind: str) -> str:
    """PyTorch's node of a fill: ``torch.fill`` records FillBackward0 (a number)
    or 1 (a tensor), ``Tensor.fill_`` FillBackward2 or 3, ``Tensor.zero_`` ZeroBackward0."""
    if kind == "zero_":
        return "ZeroBackward0"
    return f"FillBackward{(2 if kind == 'fill_' else 0) + isinstance(value, Tensor)}"


@defop(vjp=lambda g: g * 0, node=("FillBackward0", "FillBackward1", "FillBackward2", "FillBackward3", "ZeroBackward0"),
       node_for=_fill_node, opmath=False)
def _filled(xp, input, *, value, kind="fill"):
    """``input``'s shape and dtype filled with ``value`` (backs ``fill``, ``fill_``
    and ``zero_``; ``kind`` names the one for the node's name only)."""
    if not isinstance(value, Tensor):  # Note [Checked scalar conversion]
        value = _dtype.convert_scalar(value, _dtype.from_numpy_dtype(input.dtype))
    return xp.full_like(input, value)


# -- indexing ---------------------------------------------------------------------


def _index_arg(index: Any, dev: Any = CPU) -> Any:
    """Normalise an index of a tensor on ``dev``: tensors become arrays; lists of
    ints become integer arrays.  Host index arrays are moved to ``dev``, once
    here, so the backward's scatter (``_index_put_grad``) finds them there."""
    if isinstance(index, tuple):
        return tuple(_index_arg(i, dev) for i in index)
    if isinstance(index, Tensor):
        index = index._data
    elif isinstance(index, list):
        index = np.asarray(index)
    if dev is not CPU and type(index) is np.ndarray:
        return _backends.transfer(index, dev)
    return index


def _is_basic(index: Any) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return all(i is None or i is Ellipsis or isinstance(i, slice)
               or (isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_))) for i in items)


@defop(view=True, ref=lambda torch: lambda x, index: x[index],
       vjp=lambda g, input_shape, index: _index_put_grad(g, shape=input_shape, index=index),
       node=("IndexBackward0", "EmbeddingBackward0"), node_for=lambda index, node: node, saved_as={"index": "indices"},
       parse=lambda input, index, node="IndexBackward0": ((input,), {"index": _index_arg(index, input.device),
                                                                      "node": node}),
       samples=lambda rng: [((_r(rng, 4, 5), 1), {}), ((_r(rng, 4, 5), (slice(None), slice(1, None, 2))), {}),
                            ((_r(rng, 4, 5), (None, Ellipsis, 0)), {}),
                            ((_r(rng, 4, 5), np.array([0, 2, 0])), {}),
                            ((_r(rng, 4, 5), (np.array([0, 1, 1]), np.array([2, 2, 2]))), {}),
                            ((_r(rng, 4, 5), np.array([True, False, True, True])), {})])
def _index(xp, input, *, index, node="IndexBackward0"):
    """``input[index]`` with basic and advanced (integer, boolean) indexing; ``node``
    names the node as PyTorch's op of the call (``F.embedding``: EmbeddingBackward0)."""
    out = input[index]
    if not isinstance(out, xp.ndarray):  # an element: index with ``...`` for a 0-d view instead
        out = input[(*(index if isinstance(index, tuple) else (index,)), Ellipsis)]
    return out


@defop(vjp=lambda g, index: g[index], node="IndexPutBackward0")
def _index_put_grad(xp, grad, *, shape, index):
    """Scatter ``grad`` into zeros of ``shape`` at ``index``, summing repeated indices."""
    out = xp.zeros(shape, dtype=grad.dtype)
    if _is_basic(index):
        out[index] = grad
    else:
        xp.add.at(out, index, grad)
    return out


def _slice_grad(g: Tensor, input_shape: tuple[int, ...], dim: int, start: int, end: int, step: int) -> Tensor:
    return _index_put_grad(g, shape=input_shape, index=(slice(None),) * dim + (slice(start, end, step),))


@defop(view=True, ref=lambda torch: lambda x, dim, start, end, step: torch.ops.aten.slice(x, dim, start, end, step),
       vjp=_slice_grad, node="SliceBackward0",
       samples=lambda rng: [((_r(rng, 4, 5),), {"dim": 0, "start": 1, "end": 3, "step": 1}),
                            ((_r(rng, 4, 5),), {"dim": 1, "start": 0, "end": 5, "step": 2}),
                            ((_r(rng, 4, 5),), {"dim": 0, "start": 4, "end": 4, "step": 1})])
def _slice(xp, input, *, dim, start, end, step):
    """``input[start:end:step]`` along ``dim`` (a view; the bounds already clamped)."""
    return _slice_view(input, dim, start, end, step)


def _slice_view(input: Any, dim: int, start: int, end: int, step: int) -> Any:
    return input[(slice(None),) * dim + (slice(start, end, step),)]


@defop(view=True, ref=lambda torch: torch.ops.aten.alias, vjp=identity, node="AliasBackward0",
       samples=_unary_samples())
def _alias(xp, input):
    """A view of all of ``input`` (``x[...]``, ``x[:, :]``)."""
    return input[...]


# Note [Basic indexing as PyTorch's chain]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch applies a basic index item by item, left to right: an integer is a
# ``select`` (SelectBackward0), a slice that is not the whole dimension a
# ``slice`` (SliceBackward0), ``None`` an ``unsqueeze``; whole-dimension
# slices and ``...`` record nothing, and an index that records nothing is an
# ``alias`` -- except a lone slice, always a SliceBackward0.  ``x[0, 1:3]``
# is thus SliceBackward0 -> SelectBackward0, and users see these names in
# ``grad_fn`` and in graph pictures.  agrad builds the same chain of view ops;
# an advanced index (tensors, lists, bools) is one ``_index`` (IndexBackward0).
# The saved bounds are Python's ``slice.indices`` (clamped, non-negative),
# where PyTorch keeps the raw ones.
def _getitem(self: Tensor, index: Any) -> Tensor:
    """``self[index]``: a chain of views for a basic index (Note [Basic
    indexing as PyTorch's chain]), one ``_index`` for an advanced one."""
    if not _is_basic(index):
        return _index(self, index)
    if index is Ellipsis:
        return _alias(self)
    items = index if isinstance(index, tuple) else (index,)
    shape = self._data.shape
    used = sum(1 for i in items if i is not None and i is not Ellipsis)
    if used > len(shape):
        raise IndexError(f"too many indices for tensor of dimension {len(shape)}")
    if sum(1 for i in items if i is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    t, dim, source_dim = self, 0, 0  # dim: in t; source_dim: in self, for errors
    for i in items:
        if i is None:
            t = unsqueeze(t, dim)
            dim += 1
        elif i is Ellipsis:
            skipped = len(shape) - used
            dim, source_dim = dim + skipped, source_dim + skipped
        elif isinstance(i, slice):
            if i.step is not None and i.step <= 0:
                raise ValueError("step must be greater than zero")
            size = t._data.shape[dim]
            start, end, step = i.indices(size)
            if not (start == 0 and end == size and step == 1) or not isinstance(index, tuple):
                t = _slice(t, dim=dim, start=start, end=max(start, end), step=step)
            dim, source_dim = dim + 1, source_dim + 1
        else:
            size = t._data.shape[dim]
            if not -size <= i < size:
                raise IndexError(f"index {i} is out of bounds for dimension {source_dim} with size {size}")
            t = select(t, dim, i)
            source_dim += 1
    return _alias(self) if t is self else t


# -- methods that are spellings of the entries above ------------------------------

@defop(vjp=lambda g, source, device: _to_device(g, device=source, source=device), node="ToCopyBackward0")
def _to_device(xp, input, *, device, source):
    """A copy of ``input`` on ``device`` (from ``source``, its device); the
    backward moves the gradient back (PyTorch's ``_to_copy``)."""
    return _backends.transfer(input, device)


def _to(self: Tensor, *args: Any, dtype: Any = None, device: Any = None, copy: bool = False,
        non_blocking: bool = False) -> Tensor:
    """This tensor with the given dtype and/or device; ``self`` when nothing changes.

    ``t.to(other)`` takes ``other``'s dtype and device, as in PyTorch.  Both
    the cast and the move are recorded: gradients flow back to ``self``'s
    dtype and device.
    """
    for a in args:
        if a is None:  # to(device, None) / to(None, dtype): that one unchanged, as PyTorch
            continue
        if isinstance(a, (_dtype.dtype, type, np.dtype)):
            dtype = a
        elif isinstance(a, Tensor):
            dtype, device = a.dtype, a.device
        else:
            device = a
    dst = None if device is None else _backends.canonical(device)
    target = self.dtype if dtype is None else _dtype.to_dtype(dtype)
    t = self
    if target is not self.dtype or (copy and (dst is None or dst is self.device)):
        t = _to_dtype(t, dtype=target)
    if dst is not None and dst is not t.device:
        t = _to_device(t, device=dst, source=t.device)
    return t


def _cpu(self: Tensor) -> Tensor:
    """This tensor in host memory (``self`` if it is there already)."""
    return _to(self, CPU)


def _cuda(self: Tensor, device: Any = None, non_blocking: bool = False) -> Tensor:
    """This tensor on a CUDA device (the current one by default)."""
    if isinstance(device, int):
        device = f"cuda:{device}"
    return _to(self, "cuda" if device is None else device)


# The in-place fills, bound by ``_methods`` (zero_) and ``_scatter.METHODS`` (fill_).
# Both are ``fill_`` to ``inplace_method``, which lets it write into
# overlapping memory (an expanded tensor), as PyTorch lets fill_ and zero_.
_fill_kind_ = inplace_method(lambda input, value, kind: _filled(input, value=value, kind=kind), "fill_")


def _fill_(self: Tensor, value: Any) -> Tensor:
    return _fill_kind_(self, value, "fill_")


def _zero_(self: Tensor) -> Tensor:
    return _fill_kind_(self, 0, "zero_")


@defop(vjp=identity, node="CloneBackward0", ref=lambda torch: lambda x: x.contiguous(), samples=_unary_samples())
def _contiguous_copy(xp, input):
    """A C-contiguous copy of ``input`` (backs ``contiguous``)."""
    return input.copy(order="C")


def _contiguous(self: Tensor, memory_format: Any = None) -> Tensor:
    """This tensor if its memory is C-contiguous, else a contiguous copy (which ``view`` accepts)."""
    return self if self._data.flags.c_contiguous else _contiguous_copy(self)


def _is_contiguous(self: Tensor, memory_format: Any = None) -> bool:
    return bool(self._data.flags.c_contiguous)


# -- dimension helpers ------------------------------------------------------------


def _wrap_dim(dim: int, ndim: int) -> int:
    """``dim`` in ``[0, ndim)``, with PyTorch's error (0-d tensors accept -1 and 0)."""
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise dim_out_of_range(dim, ndim)
    return dim % n


def _dims_arg(dims: tuple[Any, ...]) -> tuple[int, ...]:
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        return tuple(int(d) for d in dims[0])
    return tuple(int(d) for d in dims)


def _slice_along(t: Tensor, dim: int, start: int, stop: int) -> Tensor:
    """``t[..., start:stop, ...]`` along ``dim`` (a differentiable basic index)."""
    return t[(slice(None),) * dim + (slice(start, stop),)]


# -- permutations, flips, rolls ------------------------------------------------


def _inverse_perm(dims: tuple[int, ...]) -> tuple[int, ...]:
    inv = [0] * len(dims)
    for i, d in enumerate(dims):
        inv[d] = i
    return tuple(inv)


def _check_perm(dims: tuple[int, ...], ndim: int) -> tuple[int, ...]:
    if not dims and ndim:
        raise TypeError('permute() missing 1 required positional arguments: "dims"')
    if len(dims) != ndim:
        raise RuntimeError(
            f"permute(sparse_coo): number of dimensions in the tensor input does not match the length of the "
            f"desired ordering of dimensions i.e. input.dim() = {ndim} is not equal to len(dims) = {len(dims)}"
        )
    wrapped = tuple(_wrap_dim(d, ndim) for d in dims)
    if len(set(wrapped)) != len(wrapped):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return wrapped


@defop(ref=lambda torch: lambda x, *dims: x.permute(*dims),
       vjp=lambda g, dims: g.permute(_inverse_perm(dims)), node="PermuteBackward0", methods=("permute",), view=True,
       parse=lambda input, *dims: ((input,), {"dims": _check_perm(_dims_arg(dims), input.ndim)}),
       samples=lambda rng: [((_r(rng, 2, 3, 4), 2, 0, 1), {}), ((_r(rng, 2, 3), (-1, 0)), {}),
                            ((_r(rng), ()), {}), ((_r(rng, 0, 3), 1, 0), {})])
def permute(xp, input, *, dims):
    """Reorder the dimensions: output dimension ``i`` is input dimension ``dims[i]``."""
    return xp.transpose(input, dims)


@defop(ref=lambda torch: torch.flip,
       vjp=lambda g, dims: g.flip(dims), node="FlipBackward0", methods=("flip",),
       parse=lambda input, *dims: ((input,), {"dims": tuple(_wrap_dim(d, input.ndim) for d in _dims_arg(dims))}),
       samples=lambda rng: [((_r(rng, 3, 4), (0,)), {}), ((_r(rng, 2, 3, 4), (-1, 0)), {}),
                            ((_r(rng), ()), {}), ((_r(rng, 0, 2), (1,)), {})])
def flip(xp, input, *, dims):
    """Reverse the order of elements along ``dims``."""
    if input.ndim == 0:
        return input.copy()
    return xp.flip(input, axis=dims).copy() if dims else input.copy()


def _roll_parse(input: Tensor, shifts: Any, dims: Any = None) -> tuple[tuple, dict]:
    shifts_t = (int(shifts),) if isinstance(shifts, (int, np.integer)) else tuple(int(s) for s in shifts)
    if dims is None:
        if len(shifts_t) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts_t)}, dims:0")
        return (input,), {"shifts": shifts_t, "dims": None}
    dims_t = (int(dims),) if isinstance(dims, (int, np.integer)) else tuple(int(d) for d in dims)
    if len(shifts_t) != len(dims_t):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts_t)}, dims:{len(dims_t)}")
    return (input,), {"shifts": shifts_t, "dims": tuple(_wrap_dim(d, input.ndim) for d in dims_t)}


@defop(ref=lambda torch: torch.roll,
       vjp=lambda g, shifts, dims: g.roll(tuple(-s for s in shifts), dims), node="RollBackward0",
       methods=("roll",), parse=_roll_parse,
       samples=lambda rng: [((_r(rng, 3, 4), 1), {}), ((_r(rng, 3, 4), (1, -2), (0, 1)), {}),
                            ((_r(rng, 2, 3), 5, -1), {}), ((_r(rng, 0, 3), 1, 1), {})])
def roll(xp, input, *, shifts, dims):
    """Rotate elements along ``dims`` by ``shifts`` (over the flattened tensor when ``dims`` is None)."""
    if dims is None:
        return xp.roll(input.reshape(-1), shifts[0]).reshape(input.shape)
    return xp.roll(input, shifts, axis=dims)


# -- flatten / broadcast ------------------------------------------------------------


def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge dimensions ``start_dim..end_dim`` into one (a 0-d tensor becomes 1-d)."""
    shape = input.shape
    if len(shape) == 0:
        _wrap_dim(start_dim, 0), _wrap_dim(end_dim, 0)
        return input.reshape(1)
    s, e = _wrap_dim(start_dim, len(shape)), _wrap_dim(end_dim, len(shape))
    if s > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:
        return input
    merged = 1
    for n in shape[s:e + 1]:
        merged *= n
    return input.reshape(shape[:s] + (merged,) + shape[e + 1:])


def broadcast_to(input: Tensor, size: Any) -> Tensor:
    """``input`` broadcast to ``size`` (``expand``)."""
    return input.expand(tuple(size))


def _expand_as(self: Tensor, other: Tensor) -> Tensor:
    return self.expand(other.shape)


# -- cat / stack ------------------------------------------------------------------


def _cat_dim(arrays: tuple[Any, ...], dim: int) -> tuple[int, list[Any]]:
    """Validate a ``cat`` (PyTorch's errors) and return the wrapped dim and the arrays
    that take part (legacy 1-d empty tensors are skipped, as PyTorch does)."""
    if not arrays:
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    for i, a in enumerate(arrays):
        if a.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {i}) cannot be concatenated")
    used = [(i, a) for i, a in enumerate(arrays) if not (a.ndim == 1 and a.shape[0] == 0)]
    if not used:
        return _wrap_dim(dim, 1), [a for a in arrays]
    i0, ref = used[0]
    d = _wrap_dim(dim, ref.ndim)
    for i, a in used[1:]:
        if a.ndim != ref.ndim:
            raise RuntimeError(f"Tensors must have same number of dimensions: got {ref.ndim} and {a.ndim}")
        for k in range(ref.ndim):
            if k != d and a.shape[k] != ref.shape[k]:
                raise RuntimeError(
                    f"Sizes of tensors must match except in dimension {d}. Expected size {ref.shape[k]} "
                    f"but got size {a.shape[k]} for tensor number {i} in the list."
                )
    return d, [a for _, a in used]


def _cat_grad(g: Tensor, shapes: tuple[tuple[int, ...], ...], dim: int) -> list[Tensor]:
    out = []
    d = None
    start = 0
    for s in shapes:
        if len(s) == 1 and s[0] == 0 and g.ndim != 1:
            out.append(g.reshape(-1)[0:0])  # a skipped legacy empty tensor
            continue
        if d is None:
            d = _wrap_dim(dim, g.ndim)
        out.append(_slice_along(g, d, start, start + s[d]))
        start += s[d]
    return out


@defop(ref=lambda torch: lambda *ts, dim=0: torch.cat(ts, dim=dim),
       vjp=lambda g, tensors_shape, dim: _cat_grad(g, tensors_shape, dim), node="CatBackward0", promote=True,
       parse=lambda *tensors, dim=0: (tensors, {"dim": dim}),
       samples=lambda rng: [((_r(rng, 2, 3), _r(rng, 4, 3)), {}), ((_r(rng, 2, 3), _r(rng, 2, 1)), {"dim": -1}),
                            ((_r(rng, 2, 3), np.arange(6).reshape(2, 3)), {"dim": 1}),
                            ((_r(rng, 0, 3), _r(rng, 2, 3), _r(rng, 1, 3)), {}), ((_r(rng, 3),), {})])
def _cat(xp, *tensors, dim=0):
    """Concatenate ``tensors`` along ``dim`` (backs ``cat``)."""
    d, used = _cat_dim(tensors, dim)
    return xp.concatenate(used, axis=d)


def cat(tensors: Any, dim: int = 0) -> Tensor:
    """Concatenate a sequence of tensors along ``dim``, with PyTorch's type promotion."""
    if isinstance(tensors, Tensor):
        raise TypeError("cat(): argument 'tensors' must be tuple of Tensors, not Tensor")
    if not len(tensors):
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    return _cat(*tensors, dim=dim)


def _stack_check(arrays: tuple[Any, ...], dim: int) -> int:
    if not arrays:
        raise RuntimeError("stack expects a non-empty TensorList")
    for i, a in enumerate(arrays[1:], 1):
        if a.shape != arrays[0].shape:
            raise RuntimeError(
                f"stack expects each tensor to be equal size, but got {list(arrays[0].shape)} at entry 0 "
                f"and {list(a.shape)} at entry {i}"
            )
    return _wrap_dim(dim, arrays[0].ndim + 1)


def _stack_grad(g: Tensor, n: int, dim: int) -> list[Tensor]:
    d = _wrap_dim(dim, g.ndim)
    return [g[(slice(None),) * d + (i,)] for i in range(n)]


@defop(ref=lambda torch: lambda *ts, dim=0: torch.stack(ts, dim=dim),
       vjp=lambda g, tensors_shape, dim: _stack_grad(g, len(tensors_shape), dim), node="StackBackward0",
       promote=True, parse=lambda *tensors, dim=0: (tensors, {"dim": dim}),
       samples=lambda rng: [((_r(rng, 2, 3), _r(rng, 2, 3)), {}), ((_r(rng, 2, 3), _r(rng, 2, 3)), {"dim": -1}),
                            ((_r(rng), _r(rng), _r(rng)), {}), ((_r(rng, 0, 2), _r(rng, 0, 2)), {"dim": 1}),
                            ((_r(rng, 3), np.arange(3)), {"dim": 1})])
def _stack(xp, *tensors, dim=0):
    """Stack equal-shaped ``tensors`` along a new dimension ``dim`` (backs ``stack``)."""
    return xp.stack(tensors, axis=_stack_check(tensors, dim))


def stack(tensors: Any, dim: int = 0) -> Tensor:
    """Stack a sequence of equal-shaped tensors along a new dimension ``dim``."""
    if isinstance(tensors, Tensor):
        raise TypeError("stack(): argument 'tensors' must be tuple of Tensors, not Tensor")
    if not len(tensors):
        raise RuntimeError("stack expects a non-empty TensorList")
    return _stack(*tensors, dim=dim)


# -- slicing: narrow, split, chunk ------------------------------------------------


def narrow(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    """``length`` elements of ``input`` along ``dim`` from ``start`` (negative counts from the end)."""
    if input.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    d = _wrap_dim(dim, input.ndim)
    size = input.shape[d]
    if isinstance(start, Tensor):
        start = int(start.item())
    if not -size <= start <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], but got {start})")
    start = start % size if start < 0 else start
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    if start > size - length:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return _slice_along(input, d, start, start + length)


def split(tensor: Tensor, split_size_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """Split into pieces of ``split_size`` (the last may be smaller) or of the given section sizes: views
    of ``tensor``, the outputs of one SplitBackward0 (SplitWithSizesBackward0); Note [Multi-output views]."""
    d = _wrap_dim(dim, tensor.ndim)
    if tensor.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    size = tensor.shape[d]
    if isinstance(split_size_or_sections, (int, np.integer)):
        step = int(split_size_or_sections)
        if step < 0 or (step == 0 and size != 0):
            raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension size of {size}")
        bounds = [(s, min(s + step, size)) for s in range(0, size, step)] if size else [(0, 0)]
        return _pieces(tensor, d, bounds, SplitBackward0, split_size=step)
    sections = [int(s) for s in split_size_or_sections]
    if sum(sections) != size or any(s < 0 for s in sections):
        raise RuntimeError(
            f"split_with_sizes expects split_sizes to sum exactly to {size} (input tensor's size at dimension "
            f"{d}), but got split_sizes={sections}"
        )
    return _split_with_sizes(tensor, d, sections)


def _split_with_sizes(tensor: Tensor, dim: int, sections: Sequence[int]) -> tuple[Tensor, ...]:
    """``tensor`` split along ``dim`` (wrapped) into pieces of the ``sections`` sizes, which sum to its size."""
    ends = np.cumsum(sections, dtype=np.int64).tolist()
    bounds = [(end - s, end) for s, end in zip(sections, ends)]
    return _pieces(tensor, dim, bounds, SplitWithSizesBackward0, split_sizes=tuple(sections))


def _pieces(tensor: Tensor, dim: int, bounds: Sequence[tuple[int, int]], node: type[_ViewsNode],
            **attrs: Any) -> tuple[Tensor, ...]:
    """The slices ``start:end`` of ``tensor`` along ``dim`` for each of ``bounds``, as the outputs of one
    ``node`` (Note [Multi-output views])."""
    slices = [{"dim": dim, "start": start, "end": end, "step": 1} for start, end in bounds]
    return _views_of(tensor, _SLICE, slices, node, dim=dim, self_sym_sizes=tuple(tensor.shape), **attrs)


def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """Split into ``chunks`` pieces of ``ceil(size / chunks)`` (fewer when they run out)."""
    if chunks <= 0:
        raise RuntimeError("chunk expects `chunks` to be greater than 0, got: " + str(chunks))
    if input.ndim == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    d = _wrap_dim(dim, input.ndim)
    size = input.shape[d]
    step = -(-size // chunks)
    if step == 0:  # PyTorch splits an empty dimension with sizes
        return _split_with_sizes(input, d, [0] * chunks)
    return split(input, step, d)


# -- repeat / tile ------------------------------------------------------------------


def _repeat_grad(g: Tensor, input_shape: tuple[int, ...], repeats: tuple[int, ...]) -> Tensor:
    lead = len(repeats) - len(input_shape)
    shape = (1,) * lead + tuple(input_shape)
    interleaved: list[int] = []
    for r, s in zip(repeats, shape):
        interleaved += [r, s]
    if not interleaved:
        return g
    g = g.reshape(tuple(interleaved))
    return g.sum(tuple(range(0, len(interleaved), 2))).reshape(input_shape)


def _repeat_parse(input: Tensor, *sizes: Any) -> tuple[tuple, dict]:
    reps = _dims_arg(sizes)
    if len(reps) < input.ndim:
        raise RuntimeError(
            "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor"
        )
    if any(r < 0 for r in reps):
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(reps)}: {list(reps)}")
    return (input,), {"repeats": reps}


@defop(ref=lambda torch: lambda x, *sizes: x.repeat(*sizes),
       vjp=lambda g, input_shape, repeats: _repeat_grad(g, input_shape, repeats), node="RepeatBackward0",
       methods=("repeat",), parse=_repeat_parse,
       samples=lambda rng: [((_r(rng, 2, 3), 2, 1), {}), ((_r(rng, 2, 3), (2, 1, 3)), {}),
                            ((_r(rng), (3,)), {}), ((_r(rng, 0, 2), 2, 2), {}), ((_r(rng, 2), (0,)), {})])
def repeat(xp, input, *, repeats):
    """Tile ``input`` ``repeats[i]`` times along each dimension (leading new dimensions allowed)."""
    lead = len(repeats) - input.ndim
    return xp.tile(input.reshape((1,) * lead + input.shape), repeats)


def tile(input: Tensor, dims: Any) -> Tensor:
    """``repeat`` with ``dims`` padded with leading ones to ``input.ndim``."""
    dims = _dims_arg((dims,))
    if len(dims) < input.ndim:
        dims = (1,) * (input.ndim - len(dims)) + dims
    return repeat(input, dims)


def _tile_method(self: Tensor, *dims: Any) -> Tensor:
    return tile(self, _dims_arg(dims))


# -- index_select / gather / scatter_add --------------------------------------------


def _check_index(index: Any, name: str) -> None:
    if index.dtype.kind not in "iu":
        dtypes = "int32 or int64" if name == "index_select" else "int32/int64"  # PyTorch's two wordings
        raise RuntimeError(f"{name}(): Expected dtype {dtypes} for index")


def _index_select_parse(input: Tensor, dim: int, index: Tensor) -> tuple[tuple, dict]:
    return (input, index), {"dim": _wrap_dim(dim, input.ndim)}


@defop(ref=lambda torch: torch.index_select,
       vjp=(lambda g, input_shape, index, dim: _index_put_grad(
                g, shape=input_shape, index=(slice(None),) * dim + (index._data.reshape(-1),)) if input_shape
            else g.reshape(()),
            None),
       node="IndexSelectBackward0", methods=("index_select",), parse=_index_select_parse,
       samples=lambda rng: [((_r(rng, 4, 3), 0, np.array([0, 2, 0, 3])), {}),
                            ((_r(rng, 4, 3), -1, np.array([2, 2])), {}),
                            ((_r(rng, 4, 3), 1, np.array([], dtype=np.int64)), {}),
                            ((_r(rng, 4, 3), 0, np.array(1)), {})])
def _index_select(xp, input, index, *, dim):
    """The entries of ``input`` at ``index`` along ``dim`` (backs ``index_select``)."""
    _check_index(index, "index_select")
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    size = input.shape[dim] if input.ndim else 1
    if index.size and ((index < 0) | (index >= size)).any():
        raise IndexError("index out of range in self")
    if input.ndim == 0:
        return input[...].copy()
    return xp.take(input, index.reshape(-1), axis=dim)


index_select = _index_select


def _gather_check(input: Any, index: Any, dim: int, name: str) -> None:
    _check_index(index, name)
    if index.ndim != input.ndim and index.size and input.ndim:
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    for k in range(index.ndim):
        if k != dim and index.size and input.ndim and index.shape[k] > input.shape[k]:
            raise RuntimeError(
                f"Size does not match at dimension {k} expected index {list(index.shape)} to be no larger than "
                f"self {list(input.shape)} apart from dimension {dim}"
            )
    # On a device the value check reads the result on the host, which waits for
    # the device; inside a backward it is skipped there: the indices were saved
    # by a forward that checked them (PyTorch's CUDA kernels assert on the device).
    if index.size and input.ndim and (type(index) is np.ndarray or current_graph_task.get() is None):
        bad = (index < 0) | (index >= input.shape[dim])
        if bad.any():
            i = int(index[bad].reshape(-1)[0])
            raise RuntimeError(f"index {i} is out of bounds for dimension {dim} with size {input.shape[dim]}")


def _first_outside(index: Any, low: int, high: int) -> int | None:
    """The first entry of ``index`` outside ``[low, high)``, or None.

    On a device the check reads the result on the host, which waits for the
    device; inside a backward it is skipped there: the indices were checked by
    the forward that saved them (as ``_gather_check`` does)."""
    if not index.size or (type(index) is not np.ndarray and current_graph_task.get() is not None):
        return None
    bad = (index < low) | (index >= high)
    if not bad.any():
        return None
    return int(index[bad].reshape(-1)[0])


def _nonempty(shape: tuple[int, ...]) -> tuple[int, ...]:
    """PyTorch's ``ensure_nonempty`` sizes: a 0-d tensor counts as one element in one dimension."""
    return shape or (1,)


def _scatter_check(input: Any, index: Any, dim: int, src: Any = None) -> None:
    """PyTorch's checks of a scatter's arguments (``scatter_gather_dtype_check``,
    ``scatter_shape_check`` and the kernel's bounds check), in its order."""
    if index.size and index.dtype not in (np.int64, np.int32):
        raise RuntimeError("scatter(): Expected dtype int32/int64 for index")
    if src is not None and src.dtype != input.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    if not index.size:
        return
    nd = max(input.ndim, 1)
    if max(index.ndim, 1) != nd:
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    isz, ssz = _nonempty(index.shape), _nonempty(input.shape)
    wrong = any(isz[d] > ssz[d] for d in range(nd) if d != dim)
    if src is not None:
        for d in range(nd if not wrong else 0):
            if src.ndim and d >= src.ndim:  # PyTorch reads src.size(d) before it checks src's dimensions
                raise dim_out_of_range(d, src.ndim)
            if isz[d] > (src.shape[d] if src.ndim else 1):
                wrong = True
                break
        if max(src.ndim, 1) != nd:
            raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
    if wrong:
        against_src = f" and to be no larger size than src {list(src.shape)}" if src is not None else ""
        raise RuntimeError(f"Expected index {list(index.shape)} to be no larger than self {list(input.shape)} "
                           f"apart from dimension {dim}{against_src}")
    size = input.shape[dim] if input.ndim else 1
    if (i := _first_outside(index, 0, size)) is not None:
        raise RuntimeError(f"index {i} is out of bounds for dimension {dim} with size {size}")


def _full_index(xp: Any, index: Any, dim: int) -> tuple[Any, ...]:
    """Index arrays addressing ``a[i][j][index[i][j][k]]``-style positions (dim replaced by ``index``)."""
    grids = _grids(xp, index.shape)
    grids[dim] = index
    return tuple(grids)


@defop(ref=lambda torch: torch.gather,
       vjp=(lambda g, input_shape, index, dim: scatter_add(_zeros_on(g, input_shape), dim, index, g), None),
       node="GatherBackward0", methods=("gather",),
       parse=lambda input, dim, index: ((input, index), {"dim": _wrap_dim(dim, input.ndim)}),
       samples=lambda rng: [((_r(rng, 3, 4), 1, np.array([[0, 0, 3], [1, 2, 1], [3, 3, 3]])), {}),
                            ((_r(rng, 3, 4), 0, np.array([[0, 1, 2, 0], [2, 2, 2, 2]])), {}),
                            ((_r(rng, 3, 4), -1, np.array([[1], [0]])), {}),
                            ((_r(rng), 0, np.array(0)), {}),
                            ((_r(rng, 3, 4), 1, np.zeros((3, 0), dtype=np.int64)), {})])
def _gather(xp, input, index, *, dim):
    """``out[i][j] = input[i][index[i][j]]`` for ``dim=1`` (backs ``gather``)."""
    _gather_check(input, index, dim, "gather")
    if input.ndim == 0:
        return input.reshape(index.shape).copy()
    return input[_full_index(xp, index, dim)]


gather = _gather


def _scatter_src_grad(g: Tensor, index: Tensor, dim: int, src_shape: tuple[int, ...]) -> Tensor:
    grad = g.gather(dim, index)
    if tuple(src_shape) == tuple(index.shape):
        return grad
    return _index_put_grad(grad, shape=src_shape, index=tuple(slice(0, n) for n in index.shape))


@defop(ref=lambda torch: torch.scatter_add,
       vjp=(identity, None, lambda g, index, dim, src_shape: _scatter_src_grad(g, index, dim, src_shape)),
       node="ScatterAddBackward0", methods=("scatter_add",), inplace=("scatter_add_",),
       parse=lambda input, dim, index, src: ((input, index, src), {"dim": _wrap_dim(dim, input.ndim)}),
       samples=lambda rng: [((_r(rng, 3, 4), 1, np.array([[0, 0, 3], [1, 2, 1], [3, 3, 3]]), _r(rng, 3, 3)), {}),
                            ((_r(rng, 3, 4), 0, np.array([[0, 1, 2, 0], [2, 2, 2, 2]]), _r(rng, 2, 4)), {}),
                            ((_r(rng, 3, 4), -1, np.array([[1], [1]]), _r(rng, 2, 1)), {}),
                            ((_r(rng), 0, np.array(0), _r(rng)), {})])
def _scatter_add(xp, input, index, src, *, dim):
    """``input`` with ``src`` added at ``index`` along ``dim``, summing repeats (backs ``scatter_add``)."""
    _scatter_check(input, index, dim, src)
    out = input.copy()
    if index.size == 0:
        return out
    if input.ndim == 0:
        out += src.reshape(()) if src.ndim else src
        return out
    part = src[tuple(slice(0, n) for n in index.shape)]
    xp.add.at(out, _full_index(xp, index, dim), part.astype(out.dtype, copy=False))
    return out


scatter_add: Callable[..., Tensor] = _scatter_add

# -- masked_fill ------------------------------------------------------------------


def _check_mask(mask: Any) -> None:
    if mask.dtype != np.bool_:
        dt = _dtype.CPP_TYPE_NAMES[mask.dtype.name]
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype {dt}")


@defop(ref=lambda torch: torch.masked_fill,
       vjp=(lambda g, mask: g.masked_fill(mask, 0), None), node="MaskedFillBackward0",
       samples=lambda rng: [((_r(rng, 3, 4), rng.uniform(size=(3, 4)) > 0.5, 1.5), {}),
                            ((_r(rng, 3, 4), np.array([True, False, False, True]), -2.0), {}),
                            ((_r(rng), np.array(True), 0.0), {})])
def _masked_fill(xp, input, mask, *, value):
    """``input`` with ``value`` where ``mask`` is true (backs ``masked_fill`` with a number)."""
    _check_mask(mask)
    value = _dtype.convert_scalar(value, _dtype.from_numpy_dtype(input.dtype))  # Note [Checked scalar conversion]
    return xp.where(mask, xp.asarray(value, dtype=input.dtype), input)


def _value_grad(g: Tensor, mask: Tensor) -> Tensor:
    return (g - g.masked_fill(mask, 0)).sum()


@defop(ref=lambda torch: torch.masked_fill,
       vjp=(lambda g, mask: g.masked_fill(mask, 0), None, lambda g, mask: _value_grad(g, mask)),
       node="MaskedFillBackward1",
       samples=lambda rng: [((_r(rng, 3, 4), rng.uniform(size=(3, 4)) > 0.5, _r(rng)), {}),
                            ((_r(rng, 3, 4), np.array([True, False, False, True]), _r(rng)), {})])
def _masked_fill_tensor(xp, input, mask, value):
    """``input`` with the 0-d tensor ``value`` where ``mask`` is true."""
    _check_mask(mask)
    if value.ndim != 0:
        raise RuntimeError(
            "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
            f"{value.ndim} dimension(s)."
        )
    return xp.where(mask, value.astype(input.dtype), input)


def _masked_fill_self_first(input: Tensor, mask: Tensor, value: Any) -> Tensor:
    if isinstance(value, Tensor):
        return _masked_fill_tensor(input, mask, value)
    return _masked_fill(input, mask, value=value)


def masked_fill(input: Tensor, mask: Tensor, value: Any) -> Tensor:
    """``input`` with ``value`` (a number or a 0-d tensor) where ``mask`` is true."""
    try:
        return _masked_fill_self_first(input, mask, value)
    except RuntimeError as exc:
        # PyTorch's masked_fill broadcasts the mask against input, naming the mask
        # first (masked_fill_ checks it against self, named first).
        err = broadcast_error([tuple(mask.shape), input.shape]) if str(exc).startswith("The size of") else None
        if err is None:
            raise
        raise err from None

# -- padding ----------------------------------------------------------------------


def _check_pad(pad: Any, ndim: int) -> tuple[int, ...]:
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2:
        raise RuntimeError("Length of pad must be even but instead it equals " + str(len(pad)))
    if len(pad) // 2 > ndim:
        raise RuntimeError(
            f"Length of pad should be no more than twice the number of dimensions of the input. "
            f"Pad length is {len(pad)}while the input has {ndim}dimensions."  # sic, PyTorch's spacing
        )
    return pad


@defop(ref=lambda torch: torch.constant_pad_nd,
       vjp=lambda g, pad: constant_pad_nd(g, tuple(-p for p in pad)), node="ConstantPadNdBackward0",
       parse=lambda input, pad, value=0: ((input,), {"pad": _check_pad(pad, input.ndim), "value": value}),
       samples=lambda rng: [((_r(rng, 3, 4), (1, 2)), {}), ((_r(rng, 2, 3, 4), (0, 1, 2, 0), 1.5), {}),
                            ((_r(rng, 3, 4), (-1, 2, 1, -2)), {}), ((_r(rng, 0, 2), (1, 1, 1, 0)), {}),
                            ((_r(rng), ()), {})])
def constant_pad_nd(xp, input, *, pad, value=0):
    """Pad (or, with negative amounts, crop) the last ``len(pad) // 2`` dimensions with ``value``."""
    nd = len(pad) // 2
    widths = [(0, 0)] * input.ndim
    crop = [slice(None)] * input.ndim
    for i in range(nd):
        d = input.ndim - 1 - i
        lo, hi = pad[2 * i], pad[2 * i + 1]
        n = input.shape[d]
        if n + lo + hi < 0:
            raise RuntimeError(
                f"The input size {n}, plus negative padding {lo} and {hi} resulted in a negative output size, "
                "which is invalid. Check dimension " + str(d) + " of your input."
            )
        crop[d] = slice(max(-lo, 0), n - max(-hi, 0))
        widths[d] = (max(lo, 0), max(hi, 0))
    cropped = input[tuple(crop)]
    if not nd:
        return cropped.copy()
    return xp.pad(cropped, widths, mode="constant", constant_values=xp.asarray(value).astype(input.dtype))


# Note [Non-constant padding]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``F.pad``'s modes reflect, replicate and circular (and the convolutions'
# ``padding_mode``) are a gather: output position ``i`` (counted from ``-left``) of a padded dimension
# of size ``n`` reads input position ``i`` reflected at the edges (reflect),
# clamped to ``[0, n)`` (replicate) or taken modulo ``n`` (circular; negative
# padding crops first and the rest wraps around what is left).  So each
# padded dimension is one ``index_select`` with a precomputed index, and the
# gradient (an index-add of the output gradient into the sources) comes from
# that op: edge pixels read several times receive the sum.
def _sources(mode: str, n: int, left: int, right: int) -> np.ndarray:
    """The input positions that the output of a dimension of size ``n`` padded by ``(left, right)`` reads
    (Note [Non-constant padding]).  Circular padding crops first (negative padding) and wraps around
    what is left, as PyTorch does."""
    i = np.arange(-left, n + right)
    if mode == "reflect":
        return (n - 1) - np.abs((n - 1) - np.abs(i))
    if mode == "replicate":
        return np.clip(i, 0, n - 1)
    start, stop = max(-left, 0), n - max(-right, 0)
    return start + np.mod(i - start, max(stop - start, 1))


_AXIS_NAMES = ("W", "H", "D")


def _check_gather_pad(input: Tensor, pad: Sequence[int], mode: str) -> None:
    """PyTorch's checks (and messages) for a reflect, replicate or circular ``pad`` of ``input``."""
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    k = len(pad) // 2
    if not 1 <= k <= 3 or input.ndim not in (k + 1, k + 2):
        raise NotImplementedError(
            f"Padding size {len(pad)} is not supported for {input.ndim}D input tensor.\n"
            "Supported combinations for non-constant padding:\n"
            "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
            "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
    shape = list(input.shape)
    if mode != "circular" and 0 in shape[input.ndim - k - 1:]:
        raise RuntimeError(f"Expected {k + 1}D or {k + 2}D (batch mode) tensor with possibly 0 batch size and other "
                           f"non-zero dimensions for input, but got: {shape}")
    for axis in range(k):
        dim, (left, right) = input.ndim - 1 - axis, pad[2 * axis: 2 * axis + 2]
        n = shape[dim]
        if mode == "reflect" and (left >= n or right >= n):
            raise RuntimeError(f"Argument #{4 + 2 * axis}: Padding size should be less than the corresponding input "
                               f"dimension, but got: padding ({left}, {right}) at dimension {dim} of input {shape}")
        if mode == "circular" and (left > n or right > n):
            raise RuntimeError("Padding value causes wrapping around more than once.")
        if n + left + right < 0:
            if mode == "circular":
                raise RuntimeError("Negative padding value is resulting in an empty dimension")
            name = _AXIS_NAMES[axis]
            raise RuntimeError(f"input ({name}: {n}) is too small. Calculated output {name}: {n + left + right}")


def _gather_pad(input: Tensor, pad: Sequence[int], mode: str) -> Tensor:
    """``F.pad(input, pad, mode)`` for ``mode`` reflect, replicate or circular
    (Note [Non-constant padding])."""
    _check_gather_pad(input, pad, mode)
    out = input
    for axis in range(len(pad) // 2):
        left, right = pad[2 * axis: 2 * axis + 2]
        if left == right == 0:
            continue
        dim = input.ndim - 1 - axis
        index = _sources(mode, input.shape[dim], left, right).astype(np.int64)
        out = out.index_select(dim, Tensor._make(_on_device(input._data, index)))
    return out


def _pad(input: Tensor, pad: Any, mode: str = "constant", value: Any = None) -> Tensor:
    """``torch.nn.functional.pad``: ``mode`` constant (with ``value``, default 0), or reflect,
    replicate or circular (Note [Non-constant padding])."""
    if mode != "constant":
        if mode not in ("reflect", "replicate", "circular"):
            raise NotImplementedError(f"Unrecognised padding mode {mode}")
        if value is not None:
            raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
        return _gather_pad(input, pad, mode)
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > input.ndim:
        raise RuntimeError(
            "Padding length should be less than or equal to two times the input dimension but got padding length "
            f"{len(pad)} and input of dimension {input.ndim}"
        )
    return constant_pad_nd(input, pad, 0 if value is None else value)


# -- select, unbind, diagonal, view_as --------------------------------------------


def _select_parse(input: Tensor, dim: int, index: int) -> tuple[tuple, dict]:
    if input.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    d = _wrap_dim(dim, input.ndim)
    size = input.shape[d]
    index = int(index)
    if not -size <= index < size:
        raise IndexError(
            f"select(): index {index} out of range for tensor of size {list(input.shape)} at dimension {dim}"
        )
    return (input,), {"dim": d, "index": index % size}


@defop(view=True, ref=lambda torch: torch.select,
       vjp=lambda g, input_shape, dim, index: _index_put_grad(
           g, shape=input_shape, index=(slice(None),) * dim + (index,)),
       node="SelectBackward0", methods=("select",), parse=_select_parse,
       samples=lambda rng: [((_r(rng, 3, 4), 0, 1), {}), ((_r(rng, 3, 4), -1, -1), {}), ((_r(rng, 3), 0, 2), {}),
                            ((_r(rng, 2, 3, 4), 1, 0), {})])
def select(xp, input, *, dim, index):
    """The slice of ``input`` at ``index`` along ``dim``, which is removed (a view)."""
    return input[(slice(None),) * dim + (index, Ellipsis)]


# Note [Multi-output views]
# ~~~~~~~~~~~~~~~~~~~~~~~~~
# ``unbind``, ``split`` and ``chunk`` return several views of one input, and,
# as PyTorch, record one node for all of them (``_views_of``): output ``i``'s
# ``grad_fn`` is that node (UnbindBackward0, SplitBackward0,
# SplitWithSizesBackward0) with ``output_nr`` ``i``, and its backward joins the
# outputs' gradients (``stack``, ``cat``; zeros for an output that got none)
# into the input's, once: a node per output would scatter each gradient into
# zeros of the whole input, ``O(T^2)`` for a loop over ``T`` steps.  The join
# is written in agrad ops, so a ``create_graph`` backward differentiates it.
# Each output is an ordinary view of the input otherwise (``_make_view``: base,
# version counter, creation mark), whose replay on the base is its own
# ``select`` or ``slice``, so a view regenerated after an in-place write into
# its base gets that op's node, SelectBackward0 or SliceBackward0 (a
# deliberate difference: PyTorch refuses to regenerate a multi-output view).
#
# The views share one base; writing into one in place would have to rebase
# the history of all of them, which PyTorch refuses ("... is the output of a
# function that returns multiple views").  Outputs so recorded carry
# ``_multi_output`` ("Output <i> of <Op>"), which views of them inherit
# (``_become_view``), and the in-place path (``_inplace``) and a custom
# Function's ``mark_dirty`` raise on it while recording
# (``_inplace.check_view_write``).  Views made otherwise hold None.
class _ViewsNode(Node):
    """The one backward node of a multi-output view op (Note [Multi-output views]).  Its
    ``_saved_<name>`` attributes are PyTorch's; they stay after a backward, and the node can
    run again, as it saves no tensor."""

    __slots__ = ("_attrs",)

    def __init__(self, attrs: dict[str, Any]) -> None:
        super().__init__()
        self._attrs = attrs

    @property
    def _saved_dim(self) -> int:
        return self._attrs["dim"]

    def _join(self, grads: list[Tensor], dim: int) -> Tensor:
        """The input's gradient from one gradient per output."""
        raise NotImplementedError

    def apply(self, grads: list[Any], task: Any) -> Sequence[Any]:
        like = next((g for g in grads if g is not None), None)
        if like is None:
            return [None]
        parts = [_zeros_on(like, meta[0]) if g is None else g for g, meta in zip(grads, self._input_meta)]
        return [self._join(parts, self._attrs["dim"])]


class UnbindBackward0(_ViewsNode):
    """``unbind``'s node: the stack of the slices' gradients."""

    __slots__ = ()

    def _join(self, grads: list[Tensor], dim: int) -> Tensor:
        return stack(grads, dim)


class _PiecesNode(_ViewsNode):
    """A split's node: the concatenation of the pieces' gradients."""

    __slots__ = ()

    @property
    def _saved_self_sym_sizes(self) -> tuple[int, ...]:
        return self._attrs["self_sym_sizes"]

    def _join(self, grads: list[Tensor], dim: int) -> Tensor:
        return cat(grads, dim)


class SplitBackward0(_PiecesNode):
    """``split`` into pieces of one size (``chunk`` too)."""

    __slots__ = ()

    @property
    def _saved_split_size(self) -> int:
        return self._attrs["split_size"]


class SplitWithSizesBackward0(_PiecesNode):
    """``split`` into pieces of the given sizes."""

    __slots__ = ()

    @property
    def _saved_split_sizes(self) -> tuple[int, ...]:
        return self._attrs["split_sizes"]


_SELECT = REGISTRY["select"]
_SLICE = REGISTRY["slice"]


def _views_of(input: Tensor, piece: OpDef, calls: Sequence[dict[str, Any]], node: type[_ViewsNode],
              **attrs: Any) -> tuple[Tensor, ...]:
    """``piece(input, **call)`` for each of ``calls``, views of ``input`` that are, when
    recorded, the outputs of one new ``node`` with ``attrs`` (Note [Multi-output views])."""
    data = input._data
    xp = _backends.array_module(data)
    counter = input._version_counter
    if type(counter) is InferenceCounter:  # views of an inference tensor are untracked ones (``apply``)
        return tuple(Tensor._make(piece.forward(xp, data, **c), version_counter=counter) for c in calls)
    outs = []
    for c in calls:
        out = Tensor._make(piece.forward(xp, data, **c))
        _make_view(piece, c, input, out, xp)
        outs.append(out)
    if outs and grad_enabled.get() and input.requires_grad:
        def connect(n: Node) -> None:
            for i, o in enumerate(outs):
                o._set_grad_fn(n, i)

        recorded = node(attrs)
        record(None, (input,), {}, None, node=recorded, edges=(input._gradient_edge(),), outputs=outs,
               connect=connect)
        op = recorded.name().removesuffix("Backward0")
        for i, o in enumerate(outs):
            o._mark_multi_output(f"Output {i} of {op}")
    return tuple(outs)


def unbind(input: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    """All slices of ``input`` along ``dim``: views, the outputs of one UnbindBackward0
    (Note [Multi-output views])."""
    if input.ndim == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    d = _wrap_dim(dim, input.ndim)
    return _views_of(input, _SELECT, [{"dim": d, "index": i} for i in range(input.shape[d])], UnbindBackward0,
                     dim=d)


def _diagonal_parse(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> tuple[tuple, dict]:
    d1, d2 = _wrap_dim(dim1, input.ndim), _wrap_dim(dim2, input.ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return (input,), {"offset": int(offset), "dim1": d1, "dim2": d2}


def _diagonal_view(xp: Any, input: Any, offset: int, dim1: int, dim2: int) -> Any:
    out = xp.diagonal(input, offset, dim1, dim2)
    if not _backends.writeable(out) and _backends.writeable(input):
        out.flags.writeable = True  # numpy's diagonal is read-only (CuPy's is not); PyTorch's writes through
    return out


@defop(view=True, ref=lambda torch: torch.diagonal,
       vjp=lambda g, input_shape, offset, dim1, dim2: _diagonal_backward(
           g, input_sizes=input_shape, offset=offset, dim1=dim1, dim2=dim2),
       node="DiagonalBackward0", methods=("diagonal",), parse=_diagonal_parse,
       samples=lambda rng: [((_r(rng, 3, 4),), {}), ((_r(rng, 3, 4), 1), {}), ((_r(rng, 3, 4), -2), {}),
                            ((_r(rng, 2, 3, 4), 1, 2, 0), {}), ((_r(rng, 3, 4), 5), {}),
                            ((_r(rng, 2, 3, 3),), {"dim1": -1, "dim2": -2})])
def diagonal(xp, input, *, offset=0, dim1=0, dim2=1):
    """The diagonal at ``offset`` of the planes given by ``dim1`` and ``dim2``, as the last dimension (a view)."""
    return _diagonal_view(xp, input, offset, dim1, dim2)


@defop(vjp=lambda g, offset, dim1, dim2: diagonal(g, offset, dim1, dim2), node="DiagonalBackwardBackward0",
       ref=lambda torch: torch.ops.aten.diagonal_backward,
       samples=lambda rng: [((_r(rng, 3), (3, 4)), {"offset": 0, "dim1": 0, "dim2": 1}),
                            ((_r(rng, 4, 2), (3, 4, 5)), {"offset": 1, "dim1": 2, "dim2": 0})],
       parse=lambda g, input_sizes, offset, dim1, dim2: (
           (g,), {"input_sizes": tuple(input_sizes), "offset": offset, "dim1": dim1, "dim2": dim2}))
def _diagonal_backward(xp, grad, *, input_sizes, offset, dim1, dim2):
    """Zeros of ``input_sizes`` with ``grad`` on the diagonal (``diagonal``'s backward)."""
    out = xp.zeros(input_sizes, dtype=grad.dtype)
    _diagonal_view(xp, out, offset, dim1, dim2)[...] = grad
    return out


def _view_as(self: Tensor, other: Tensor) -> Tensor:
    """This tensor viewed with ``other``'s shape (``self.view(other.size())``)."""
    return self.view(other.shape)
