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

from collections.abc import Callable
from typing import Any

from agrad import _dtype
from agrad._ops import (
    _conv,
    _decompositions,
    _elementwise,
    _pointwise,
    _pool,
    _reductions,
    _scatter,
    _shape,
    _sorting,
    _structure,
    _views,
)
from agrad._ops._inplace import inplace_method
from agrad._tensor import Tensor

__all__ = ["METHODS", "bind"]


def _to_dtype(dt: _dtype.dtype) -> Callable[[Tensor], Tensor]:
    """``t.float()``, ``t.long()``…: this tensor cast to ``dt``."""
    return lambda self: _shape._to(self, dt)


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
    "float": _to_dtype(_dtype.float32),
    "double": _to_dtype(_dtype.float64),
    "half": _to_dtype(_dtype.float16),
    "long": _to_dtype(_dtype.int64),
    "int": _to_dtype(_dtype.int32),
    "bool": _to_dtype(_dtype.bool),
    "contiguous": _shape._contiguous,
    "is_contiguous": _shape._is_contiguous,
    # shapes
    "mT": property(lambda self: _shape.transpose(self, -2, -1)),
    "T": property(lambda self: _shape.transpose(self, 0, 1) if self.ndim == 2 else self),
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
    "__setitem__": _views._setitem,
    # reductions
    "max": _reductions.max,
    "min": _reductions.min,
    "norm": _reductions.norm,
    "allclose": _reductions.allclose,
    "softmax": _reductions.softmax,
}


# The families' own tables of hand-written methods (each module's ``METHODS``).
FAMILIES = (_pointwise, _sorting, _scatter, _structure, _conv, _pool, _decompositions)


def bind() -> None:
    """Bind :data:`METHODS` and each family's ``METHODS`` onto :class:`Tensor`
    (``agrad._ops`` does, once); a name bound twice is a bug."""
    tables = [METHODS, *(family.METHODS for family in FAMILIES)]
    for table in tables:
        for name, fn in table.items():
            setattr(Tensor, name, fn)
    names = [name for table in tables for name in table]
    if len(names) != len(set(names)):
        raise RuntimeError(f"Tensor methods bound twice: {sorted({n for n in names if names.count(n) > 1})}")
