"""The hand-written Tensor methods, bound in one place.

Every Tensor method comes from one of two places: an op's ``defop`` entry
(``methods=``, ``rmethods=``, ``inplace=``; ``_registry``) or the table
:data:`METHODS` below, for methods that are not one table op (``clamp``
picks an op by its arguments, ``to`` moves and casts, ``max`` is a
reduction or an elementwise op) or that PyTorch names differently.  The
table is bound when ``agrad._ops`` is imported, after every family module;
no name in it is also an entry's.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from agrad import _backends, _creation, _dtype
from agrad._device import CPU
from agrad._errors import broadcast_error, dim_out_of_range
from agrad._ops import (
    _aliases,
    _conv,
    _decompositions,
    _elementwise,
    _numeric,
    _pointwise,
    _pool,
    _random,
    _reductions,
    _scatter,
    _shape,
    _sorting,
    _structure,
    _views,
)
from agrad._ops._inplace import inplace_method
from agrad._ops._random import _on_host
from agrad._ops._registry import BOUND_METHODS
from agrad._tensor import Tensor

__all__ = ["METHODS", "bind"]


def _to_dtype(dt: _dtype.dtype) -> Callable[[Tensor], Tensor]:
    """``t.float()``, ``t.long()``…: this tensor cast to ``dt``."""
    return lambda self: _shape._to(self, dt)


# -- hand-written methods: what a tensor is, and casts by name ----------------------------

# PyTorch's legacy type names' stems (``Float`` of ``FloatTensor``) -> dtype
_TYPE_NAMES = {_dtype.SCALAR_TYPE_NAMES[d.name]: d for d in _dtype._ALL}


def _type(self: Tensor, dtype: Any = None, non_blocking: bool = False, **kwargs: Any) -> Any:
    """``t.type()``: the legacy type name (``agrad.FloatTensor``; ``torch.`` is
    accepted for ``agrad.`` in what it reads); ``t.type(dtype)`` or
    ``t.type("agrad.cuda.HalfTensor")``: this tensor cast (and moved), or itself
    when it already is of that type."""
    if dtype is None:
        return _dtype.legacy_type_name(self.dtype, self.device.type)
    if not isinstance(dtype, str):
        return _shape._to(self, _dtype.to_dtype(dtype))
    prefix, _, name = dtype.rpartition(".")
    device_type = prefix.partition(".")[2] or "cpu"
    if prefix.partition(".")[0] not in ("agrad", "torch") or not name.endswith("Tensor") \
            or name[:-6] not in _TYPE_NAMES or device_type not in _backends.known_types():
        raise ValueError(f"invalid type: '{dtype}'")
    target = _TYPE_NAMES[name[:-6]]
    if device_type == self.device.type:
        return _shape._to(self, target)
    return _shape._to(self, target, device_type)


def _type_as(self: Tensor, other: Tensor) -> Tensor:
    """This tensor with ``other``'s type: its dtype and device type (PyTorch's ``self.type(other.type())``)."""
    return _type(self, _type(other))


def _stride(self: Tensor, dim: int | None = None) -> Any:
    """The step in elements between neighbours along each dimension (numpy's byte
    strides over the item size), or along ``dim``.  Where numpy and PyTorch lay
    out a view differently the strides differ too (a dimension of size 1 may
    show another step; numpy's ``flip`` is a view with negative strides)."""
    data = self._data
    if data.size:
        strides = tuple(s // data.itemsize for s in data.strides)
    else:  # numpy gives an empty array zero strides; PyTorch the contiguous ones
        steps = [1]
        for n in reversed(data.shape[1:]):
            steps.append(steps[-1] * max(n, 1))
        strides = tuple(reversed(steps))
    if dim is None:
        return strides
    if not -max(data.ndim, 1) <= dim < max(data.ndim, 1) or data.ndim == 0:
        raise dim_out_of_range(dim, data.ndim)
    return strides[dim]


def _lowest_address(data: Any) -> int:
    """The lowest address an array's elements use (its first element's, unless a stride is negative)."""
    ptr = data.__array_interface__["data"][0] if type(data) is np.ndarray else int(data.data.ptr)
    return ptr + sum(s * (n - 1) for s, n in zip(data.strides, data.shape) if s < 0 and n > 0)


def _storage_offset(self: Tensor) -> int:
    """The offset in elements of this view's first element into its base's memory (0 for a non-view)."""
    base = self._base
    if base is None or self._data.size == 0:
        return 0
    first = self._data.__array_interface__["data"][0] if type(self._data) is np.ndarray else int(self._data.data.ptr)
    return (first - _lowest_address(base._data)) // self._data.itemsize


def _dense_in_order(shape: tuple[int, ...], strides: tuple[int, ...], order: Sequence[int]) -> bool:
    """Whether the dimensions, innermost first in ``order``, are laid out densely
    (PyTorch's contiguity: dimensions of size 1 may have any stride)."""
    expected = 1
    for d in order:
        if shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= shape[d]
    return True


def _dim_order(self: Tensor, *, ambiguity_check: bool = False) -> tuple[int, ...]:
    """The dimensions from the outermost in memory to the innermost: PyTorch's
    ``compute_elementwise_output_logical_to_physical_perm``, whose insertion
    sort leaves dimensions of stride 0 (expanded) where they are."""
    shape, strides, nd = tuple(self.shape), _stride(self), self._data.ndim
    if nd <= 1:
        return tuple(range(nd))
    contiguous = self._data.size == 0 or _dense_in_order(shape, strides, range(nd - 1, -1, -1))
    channels_last = nd in (4, 5) and _dense_in_order(shape, strides, (1, 3, 2, 0) if nd == 4 else (1, 4, 3, 2, 0))
    if contiguous and not channels_last:
        return tuple(range(nd))
    if channels_last and not contiguous:
        return (0, *range(2, nd), 1)

    def at_least(a: int, b: int) -> bool:
        return b == 0 or (a != 0 and (a >= b or a % b == 0))

    def should_swap(a: int, b: int) -> int:
        if strides[a] == 0 or strides[b] == 0:
            return 0
        if strides[a] == strides[b]:
            return 0 if at_least(shape[b], shape[a]) else 1
        return -1 if at_least(strides[b], strides[a]) else 1 if at_least(strides[a], strides[b]) else 0

    perm = list(reversed(range(nd)))  # sorted innermost first, reversed at the end
    for i in range(1, nd):
        dim1 = i
        for dim0 in reversed(range(i)):
            comparison = should_swap(perm[dim0], perm[dim1])
            if comparison > 0:
                perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
                dim1 = dim0
            elif comparison < 0:
                break
    if ambiguity_check and any(should_swap(perm[i], perm[i + 1]) != -1 for i in range(nd - 1)):
        raise RuntimeError("The tensor does not have unique dim order.")
    return tuple(reversed(perm))


def _get_device(self: Tensor) -> int:
    """The index of the device holding this tensor; -1 on the CPU."""
    dev = self.device
    return -1 if dev is CPU else (dev.index if dev.index is not None else 0)


def _is_same_size(self: Tensor, other: Tensor) -> bool:
    if not isinstance(other, Tensor):
        raise TypeError(f"is_same_size(): argument 'other' (position 1) must be Tensor, not {type(other).__name__}")
    return tuple(self.shape) == tuple(other.shape)


def _matrix_transpose(kind: str, batches: bool) -> property:
    """``H``/``mH``/``mT``: the (last) two dimensions swapped (agrad's tensors are
    real, so the conjugate is the tensor), with PyTorch's checks."""
    def get(self: Tensor) -> Tensor:
        nd = self._data.ndim
        if nd == 0 and kind != "mT":
            warnings.warn(f"Tensor.{kind} is deprecated on 0-D tensors. Consider using x.conj().", UserWarning,
                          stacklevel=2)
            return self
        if batches and nd >= 2:
            return _shape.transpose(self, -2, -1)
        if not batches and nd == 2:
            return _shape.transpose(self, 0, 1)
        if batches:
            raise RuntimeError(
                f"tensor.{kind} is only supported on matrices or batches of matrices. Got {nd}-D tensor.")
        hint = ". For batches of matrices, consider using tensor.mH" if nd > 2 else "."
        raise RuntimeError(f"tensor.{kind} is only supported on matrices (2-D tensors). Got {nd}-D tensor{hint}")

    return property(get)


def _reversed_dims(self: Tensor) -> Tensor:
    """``T``: the dimensions reversed, a ``permute`` (PermuteBackward0) as PyTorch's
    ``numpy_T``, with its deprecation warnings for other than two dimensions."""
    nd = self._data.ndim
    if nd == 0:
        warnings.warn("Tensor.T is deprecated on 0-D tensors. This function is the identity in these cases.",
                      UserWarning, stacklevel=2)
    elif nd != 2:
        warnings.warn("The use of `x.T` on tensors of dimension other than 2 to reverse their shape is deprecated "
                      "and it will throw an error in a future release. Consider `x.mT` to transpose batches of "
                      "matrices or `x.permute(*agrad.arange(x.ndim - 1, -1, -1))` to reverse the dimensions of a "
                      "tensor.", UserWarning, stacklevel=2)
    return _shape.permute(self, tuple(range(nd - 1, -1, -1)))


def _check_python_kernel(self: Tensor, name: str) -> None:
    """``apply_`` and ``map_`` run Python on every element: CPU tensors outside autograd only."""
    if self.requires_grad:
        raise RuntimeError(f"Can't call {name}() on Variable that requires grad. Use var.detach().{name}() instead.")
    if not self.is_cpu:
        raise TypeError(f"{name} is only implemented on CPU tensors")
    self._check_inplace_allowed()


def _write_elements(self: Tensor, values: np.ndarray) -> Tensor:
    """Store Python results into this tensor's memory, cast as PyTorch converts a number."""
    with np.errstate(invalid="ignore", over="ignore"):
        self._data[...] = values.astype(np.float64 if self.dtype.is_floating_point else self._data.dtype)
    self._bump_version()
    return self


def _apply_(self: Tensor, callable: Callable[[Any], Any]) -> Tensor:
    """Replace every element ``x`` by ``callable(x)`` in place (CPU only, no autograd).

    Slow: a Python call per element, as PyTorch's; use ops where one exists."""
    _check_python_kernel(self, "apply_")
    if self._data.size:
        _write_elements(self, np.frompyfunc(callable, 1, 1)(self._data.astype(object)))
    return self


def _map_(self: Tensor, tensor: Tensor, callable: Callable[[Any, Any], Any]) -> Tensor:
    """Replace every element ``x`` by ``callable(x, y)`` in place, ``y`` the element of
    ``tensor`` (broadcast to this tensor's shape) at its position.  CPU only, no
    autograd, and as slow as :meth:`apply_`."""
    _check_python_kernel(self, "map_")
    if not isinstance(tensor, Tensor) or tensor.dtype is not self.dtype:
        got = _dtype.legacy_type_name(tensor.dtype, "cpu") if isinstance(tensor, Tensor) else type(tensor).__name__
        raise TypeError(f"map_: expected {_dtype.legacy_type_name(self.dtype, 'cpu')} for 'other' (got {got})")
    if broadcast_error([self.shape, tensor.shape]) is not None \
            or np.broadcast_shapes(self.shape, tensor.shape) != tuple(self.shape):
        raise RuntimeError(f"map_: the tensor of shape {list(tensor.shape)} does not broadcast to {list(self.shape)}")
    if self._data.size:
        other = np.broadcast_to(_on_host(tensor._data), self._data.shape)
        _write_elements(self, np.frompyfunc(callable, 2, 1)(self._data.astype(object), other.astype(object)))
    return self


def _fill_diagonal_(self: Tensor, fill_value: Any, wrap: bool = False) -> Tensor:
    """Fill the main diagonal (every index equal) with ``fill_value``, in place.

    A tall matrix with ``wrap=True`` starts the diagonal again every
    ``columns + 1`` rows, as numpy's ``fill_diagonal``.  The diagonal is written
    through a view (``CopySlices``, as PyTorch); the wrapped rows are written
    by an indexed assignment, so a wrapped fill records an index_put.
    """
    nd = self._data.ndim
    if nd < 2:
        raise RuntimeError("dimensions must larger than 1")
    if nd > 2 and len(set(self.shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    _dtype.check_scalar(fill_value.item() if isinstance(fill_value, Tensor) else fill_value, self.dtype)
    diagonal = self
    for _ in range(nd - 1):
        diagonal = _shape.diagonal(diagonal, 0, 0, 1) if diagonal is self else _shape.diagonal(diagonal, 0, -1, 0)
    diagonal.fill_(fill_value)
    rows, cols = self.shape[0], self.shape[-1]
    if wrap and nd == 2 and rows > cols + 1:
        positions = np.arange(cols + 1, rows * cols, cols + 1)
        positions = positions[positions // cols >= cols]  # past the first block, written above
        self[(positions // cols, positions % cols)] = fill_value
    return self


# name -> the function (or property) bound as ``Tensor.<name>``
METHODS: dict[str, Any] = {
    # elementwise
    "clamp": _elementwise.clamp,
    "clip": _elementwise.clamp,
    "clamp_": inplace_method(_elementwise.clamp, "clamp_"),
    "clip_": inplace_method(_elementwise.clamp, "clip_"),
    "__invert__": _elementwise._invert,
    # devices, dtypes and memory
    "to": _shape._to,
    "cpu": _shape._cpu,
    "cuda": _shape._cuda,
    "zero_": _shape._zero_,
    "fill_": _shape._fill_,
    "float": _to_dtype(_dtype.float32),
    "double": _to_dtype(_dtype.float64),
    "half": _to_dtype(_dtype.float16),
    "long": _to_dtype(_dtype.int64),
    "int": _to_dtype(_dtype.int32),
    "bool": _to_dtype(_dtype.bool),
    "byte": _to_dtype(_dtype.uint8),
    "char": _to_dtype(_dtype.int8),
    "short": _to_dtype(_dtype.int16),
    "bfloat16": _to_dtype(_dtype.bfloat16),
    "type": _type,
    "type_as": _type_as,
    "contiguous": _shape._contiguous,
    "is_contiguous": _shape._is_contiguous,
    # shapes
    "mT": _matrix_transpose("mT", batches=True),
    "mH": _matrix_transpose("mH", batches=True),
    "H": _matrix_transpose("H", batches=False),
    "T": property(_reversed_dims),
    "masked_fill": _shape.masked_fill,
    "masked_fill_": inplace_method(_shape._masked_fill_self_first, "masked_fill_"),
    "flatten": _shape.flatten,
    "expand_as": _shape._expand_as,
    "broadcast_to": _shape.broadcast_to,
    "narrow": _shape.narrow,
    "split": _shape.split,
    "chunk": _shape.chunk,
    "tile": _shape._tile_method,
    "unbind": _shape.unbind,
    "view_as": _shape._view_as,
    # writes through views
    "__getitem__": _shape._getitem,
    "__setitem__": _views._setitem,
    # reductions
    "max": _reductions.max,
    "min": _reductions.min,
    "norm": _reductions.norm,
    "allclose": _reductions.allclose,
    "equal": _reductions.equal,
    "softmax": _reductions.softmax,
    # factories with this tensor's dtype and device
    "new_zeros": _creation._new_zeros,
    "new_ones": _creation._new_ones,
    "new_full": _creation._new_full,
    "new_empty": _creation._new_empty,
    "new_tensor": _creation._new_tensor,
    # what a tensor is
    "stride": _stride,
    "storage_offset": _storage_offset,
    "dim_order": _dim_order,
    "itemsize": property(lambda self: self._data.itemsize),
    "nbytes": property(lambda self: self._data.size * self._data.itemsize),
    "nelement": lambda self: int(self._data.size),
    "ndimension": lambda self: self._data.ndim,
    "is_complex": lambda self: False,
    "is_signed": lambda self: self.dtype.is_signed,
    "get_device": _get_device,
    "is_same_size": _is_same_size,
    "is_nonzero": _creation.is_nonzero,
    # Python callables on every element
    "apply_": _apply_,
    "map_": _map_,
    "fill_diagonal_": _fill_diagonal_,
}


# The families' own tables of hand-written methods (each module's ``METHODS``).
FAMILIES = (_pointwise, _sorting, _scatter, _structure, _conv, _pool, _decompositions, _aliases, _numeric,
            _random)


def bind() -> None:
    """Bind :data:`METHODS` and each family's ``METHODS`` onto :class:`Tensor`
    (``agrad._ops`` does, once); a name bound twice is a bug."""
    tables = [METHODS, *(family.METHODS for family in FAMILIES)]
    for table in tables:
        for name, fn in table.items():
            setattr(Tensor, name, fn)
    names = [name for table in tables for name in table]
    twice = {n for n in names if names.count(n) > 1} | (set(names) & set(BOUND_METHODS))
    if twice:
        raise RuntimeError(f"Tensor methods bound twice: {sorted(twice)}")
