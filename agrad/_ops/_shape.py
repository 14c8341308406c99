"""Shape, indexing and conversion ops, and the Tensor methods that are spellings of them."""

from __future__ import annotations

from typing import Any

import numpy as np

from agrad import _dtype
from agrad._ops._common import _r, _shape_args, _unary_samples
from agrad._ops._registry import defop
from agrad._tensor import Tensor

# The public names of this family (star-imported by ``agrad/__init__.py``).
__all__ = ["reshape", "transpose", "unsqueeze", "squeeze", "clone"]

# -- shape ------------------------------------------------------------------------


@defop(ref=lambda torch: lambda x, *shape: x.reshape(*shape),
       vjp=lambda g, input_shape: g.reshape(input_shape), node="ViewBackward0",
       methods=("reshape", "view"), parse=lambda input, *shape: ((input,), {"shape": _shape_args(shape)}),
       samples=lambda rng: [((_r(rng, 3, 4), 12), {}), ((_r(rng, 3, 4), (2, -1, 3)), {}), ((_r(rng, 1), ()), {})])
def reshape(xp, input, *, shape):
    """The same elements in a new shape (``-1`` infers one dimension)."""
    return xp.reshape(input, shape)


@defop(ref=lambda torch: torch.transpose,
       vjp=lambda g, dim0, dim1: g.transpose(dim0, dim1), node="TransposeBackward0", methods=("transpose",),
       samples=lambda rng: [((_r(rng, 3, 4), 0, 1), {}), ((_r(rng, 2, 3, 4), -1, 0), {})])
def transpose(xp, input, *, dim0, dim1):
    """Swap dimensions ``dim0`` and ``dim1``."""
    return xp.swapaxes(input, dim0, dim1)


@defop(ref=lambda torch: lambda x, *size: x.expand(*size),
       vjp=lambda g, input_shape: g.sum_to_size(input_shape), node="ExpandBackward0",
       methods=("expand",), parse=lambda input, *size: ((input,), {"size": _shape_args(size)}),
       samples=lambda rng: [((_r(rng, 3, 1), (2, 3, 4)), {}), ((_r(rng), (3,)), {}), ((_r(rng, 2, 1), (-1, 3)), {})])
def expand(xp, input, *, size):
    """A broadcast view of ``input`` at ``size`` (``-1`` keeps a dimension)."""
    lead = len(size) - input.ndim
    if lead < 0:
        raise RuntimeError(
            f"expand: the number of sizes provided ({len(size)}) must be greater or equal to the "
            f"number of dimensions in the tensor ({input.ndim})"
        )
    shape = tuple(input.shape[i - lead] if s == -1 else s for i, s in enumerate(size))
    return xp.broadcast_to(input, shape)


def _sum_to(xp: Any, x: Any, shape: tuple[int, ...]) -> Any:
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape) if s == 1 and x.shape[i + lead] != 1)
    out = xp.sum(x, axis=axes, keepdims=True) if axes else x
    return out.reshape(shape) if lead or out.shape != shape else out


@defop(ref=lambda torch: lambda x, *size: x.sum_to_size(*size),
       vjp=lambda g, input_shape: g.expand(input_shape), node="SumToSizeBackward0",
       methods=("sum_to_size",), parse=lambda input, *size: ((input,), {"size": _shape_args(size)}),
       samples=lambda rng: [((_r(rng, 2, 3, 4), (3, 1)), {}), ((_r(rng, 3), ()), {})])
def sum_to_size(xp, input, *, size):
    """Sum ``input`` down to ``size``, undoing a broadcast to ``input``'s shape."""
    return _sum_to(xp, input, size)


def _unsqueeze_shape(shape: tuple[int, ...], dim: int) -> tuple[int, ...]:
    dim = dim % (len(shape) + 1)
    return shape[:dim] + (1,) + shape[dim:]


@defop(ref=lambda torch: torch.unsqueeze,
       vjp=lambda g, input_shape: g.reshape(input_shape), node="UnsqueezeBackward0", methods=("unsqueeze",),
       samples=lambda rng: [((_r(rng, 3, 4), 1), {}), ((_r(rng, 3), -1), {}), ((_r(rng), 0), {})])
def unsqueeze(xp, input, *, dim):
    """Insert a dimension of size one at ``dim``."""
    return xp.reshape(input, _unsqueeze_shape(input.shape, dim))


@defop(ref=lambda torch: lambda x, dim=None: x.squeeze() if dim is None else x.squeeze(dim),
       vjp=lambda g, input_shape: g.reshape(input_shape), node="SqueezeBackward1", methods=("squeeze",),
       samples=lambda rng: [((_r(rng, 3, 1, 4),), {}), ((_r(rng, 3, 1),), {"dim": -1}), ((_r(rng, 3, 2),), {"dim": 1})])
def squeeze(xp, input, *, dim=None):
    """Remove dimensions of size one (only ``dim`` if given; a no-op if it is not 1)."""
    if dim is None:
        return xp.reshape(input, tuple(s for s in input.shape if s != 1))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    drop = {d % max(input.ndim, 1) for d in dims if input.ndim and input.shape[d] == 1}
    return xp.reshape(input, tuple(s for i, s in enumerate(input.shape) if i not in drop))


@defop(ref=lambda torch: torch.clone,
       vjp=lambda g: g, node="CloneBackward0", methods=("clone",), samples=_unary_samples())
def clone(xp, input):
    """A copy of ``input`` with its own memory and, as PyTorch's ``preserve_format``, its layout."""
    return input.copy(order="K")


@defop(ref=lambda torch: lambda x, dtype: x.to(dtype), check={"eps": 1e-3, "atol": 1e-4, "rtol": 1e-3},
       vjp=lambda g: g, node="ToCopyBackward0", samples=lambda rng: [((_r(rng, 3),), {"dtype": _dtype.float32})])
def _to_dtype(xp, input, *, dtype):
    """Cast to ``dtype``; the engine casts the gradient back (see GraphTask.route)."""
    return input.astype(dtype.np)


@defop(vjp=lambda g: g * 0, node="FillBackward0", inplace=("fill_",))
def _filled(xp, input, *, value):
    """``input``'s shape and dtype filled with ``value`` (backs ``fill_``)."""
    return xp.full_like(input, value)


# -- indexing ---------------------------------------------------------------------


def _index_arg(index: Any) -> Any:
    """Normalise an index: tensors become arrays; lists of ints become integer arrays."""
    if isinstance(index, tuple):
        return tuple(_index_arg(i) for i in index)
    if isinstance(index, Tensor):
        return index._data
    if isinstance(index, list):
        return np.asarray(index)
    return index


def _is_basic(index: Any) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return all(i is None or i is Ellipsis or isinstance(i, (int, slice, np.integer)) for i in items)


@defop(ref=lambda torch: lambda x, index: x[index],
       vjp=lambda g, input_shape, index: _index_put_grad(g, shape=input_shape, index=index),
       node="IndexBackward0", methods=("__getitem__",),
       parse=lambda input, index: ((input,), {"index": _index_arg(index)}),
       samples=lambda rng: [((_r(rng, 4, 5), 1), {}), ((_r(rng, 4, 5), (slice(None), slice(1, None, 2))), {}),
                            ((_r(rng, 4, 5), (None, Ellipsis, 0)), {}),
                            ((_r(rng, 4, 5), np.array([0, 2, 0])), {}),
                            ((_r(rng, 4, 5), (np.array([0, 1, 1]), np.array([2, 2, 2]))), {}),
                            ((_r(rng, 4, 5), np.array([True, False, True, True])), {})])
def _index(xp, input, *, index):
    """``input[index]`` with basic and advanced (integer, boolean) indexing."""
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


# -- methods that are spellings of the entries above ------------------------------

def _to(self: Tensor, *args: Any, dtype: Any = None, device: Any = None, copy: bool = False) -> Tensor:
    """Return a tensor with the given dtype (and device); ``self`` when nothing changes."""
    from agrad._device import device as _device
    for a in args:
        if isinstance(a, (_dtype.dtype, type, np.dtype)):
            dtype = a
        elif isinstance(a, Tensor):
            dtype = a.dtype
        else:
            device = a
    if device is not None:
        _device(device)  # validates; cpu is the only device today
    target = self.dtype if dtype is None else _dtype.to_dtype(dtype)
    if target is self.dtype and not copy:
        return self
    return _to_dtype(self, dtype=target)


def _zero_(self: Tensor) -> Tensor:
    return self.fill_(0)


Tensor.to = _to  # type: ignore[attr-defined]
Tensor.zero_ = _zero_  # type: ignore[attr-defined]
for _name, _d in (("float", _dtype.float32), ("double", _dtype.float64), ("half", _dtype.float16),
                  ("long", _dtype.int64), ("int", _dtype.int32), ("bool", _dtype.bool)):
    setattr(Tensor, _name, lambda self, _d=_d: _to(self, _d))
Tensor.contiguous = lambda self: self  # type: ignore[attr-defined]
Tensor.mT = property(lambda self: transpose(self, -2, -1))  # type: ignore[attr-defined]
Tensor.T = property(lambda self: transpose(self, 0, 1) if self.ndim == 2 else self)  # type: ignore[attr-defined]
