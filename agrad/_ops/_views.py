"""In-place writes through views: ``copy_``, ``__setitem__`` and CopySlices.

Note [CopySlices]
~~~~~~~~~~~~~~~~~
An in-place op on a view writes into its base's memory, so the base's history
changes too (PyTorch's "rebase": the seed notes on autograd mechanics).  After
the write, the base gets a new ``grad_fn``, ``agrad::autograd::CopySlices``,
with two edges: the base's old history, which receives the gradient outside
the view's region, and the in-place op's result, which receives the region's
gradient (and passes it on through the op to the view's old history and the
op's other inputs).  The view's own ``grad_fn`` is then re-derived from the
base (Note [View grad_fn regeneration]).  Unlike PyTorch's CopySlices this one
is an ordinary table op whose rules are written in agrad ops, so higher-order
gradients flow through it too.

The op's input on the view's side is a *fresh* replay of the view on the
base's old history (``view_source``; the rebase is ``rebase_view``, both in
``_inplace``), not the view's own ``grad_fn``: PyTorch's
CopySlices routes the region's gradient straight into the base's history, so
the view's old node never runs, and hooks registered on the view before the
write, which live on that node, do not fire (Note [Hooks when grad_fn changes]).
A custom Function that marks a view input dirty is rebased the same way, its
node in the in-place op's place (``_wrap_outputs``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agrad import _dtype
from agrad._ops._common import _r
from agrad._ops._dispatch import _as_constant
from agrad._ops._memory import writable_alias, write_through
from agrad._ops._registry import defop, identity
from agrad._ops._shape import _index, _index_arg, _is_basic
from agrad._tensor import Tensor

__all__: list[str] = []


@defop(vjp=lambda g, view: _zero_region(g, view=view), node="ZeroRegionBackward0")
def _zero_region(xp, grad, *, view):
    """``grad`` with the region ``view[0]`` selects set to zero (linear and self-adjoint)."""
    out = grad.copy()
    _region(view, out)[...] = 0
    return out


def _region(view: Any, out: Any) -> Any:
    """The region of ``out`` (a fresh array) that ``view`` selects, writable even
    where the view is an expanded one (Note [Writing into expanded tensors])."""
    region = view[0](out)
    return region if type(region) is not np.ndarray or region.flags.writeable else writable_alias(region)


@defop(vjp=(lambda g, view: _zero_region(g, view=view), lambda g, view: view[1](g)),
       node="agrad::autograd::CopySlices", release=True)
def _copy_slices(xp, base, value, *, view):
    """``base`` with the region selected by ``view`` replaced by ``value``."""
    out = base.copy()
    region = _region(view, out)
    write_through(region, xp.broadcast_to(value, region.shape))
    return out


@defop(vjp=(lambda g: g * 0, identity), node="CopyBackwards", inplace=("copy_",),
       samples=lambda rng: [((_r(rng, 3, 4), _r(rng, 4)), {}), ((_r(rng, 2, 3), _r(rng, 2, 3)), {})],
       ref=lambda torch: lambda input, src: input.clone().copy_(src))
def _copied(xp, input, src):
    """``src`` broadcast to ``input``'s shape and cast to its dtype (backs ``copy_``)."""
    return xp.broadcast_to(src, input.shape).astype(input.dtype)


def _torch_index_put(input: Any, value: Any, index: Any) -> Any:
    out = input.clone()
    out[index] = value
    return out


def _INDEX_SAMPLES(rng: np.random.Generator) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    return [
        ((_r(rng, 4, 3), _r(rng, 2, 3)), {"index": np.array([0, 2])}),
        ((_r(rng, 4, 3), _r(rng, 2)), {"index": (np.array([1, 3]), np.array([0, 2]))}),
        ((_r(rng, 4), 2.5), {"index": np.array([True, False, True, False])}),
    ]


@defop(vjp=(lambda g, index: _index_zeroed(g, index=index), lambda g, index: g[index]),
       node="IndexPutBackward0", inplace=("_index_put_",), samples=_INDEX_SAMPLES,
       ref=lambda torch: _torch_index_put, release=True)
def _index_put(xp, input, value, *, index):
    """``input`` with ``input[index] = value`` (advanced indexing; backs ``__setitem__``)."""
    out = input.copy()
    out[index] = value
    return out


@defop(vjp=lambda g, index: _index_zeroed(g, index=index), node="IndexZeroedBackward0",
       samples=lambda rng: [(args[:1], kw) for args, kw in _INDEX_SAMPLES(rng)],
       ref=lambda torch: lambda grad, index: _torch_index_put(grad, 0.0, index))
def _index_zeroed(xp, grad, *, index):
    """``grad`` with ``grad[index] = 0``."""
    out = grad.copy()
    out[index] = 0
    return out


def _setitem(self: Tensor, index: Any, value: Any) -> None:
    """``t[index] = value`` in place: a write through a view for basic indexing
    (CopySlices when recording), an index_put for advanced indexing."""
    index = _index_arg(index, self.device)
    if not isinstance(value, Tensor):  # a number goes straight to self's dtype (0.1 stays exact in float64)
        if not isinstance(value, np.ndarray):
            value = _dtype.convert_scalar(value, self.dtype)  # Note [Checked scalar conversion]
        value = _as_constant(value, self.dtype)
    if _is_basic(index):
        _index(self, index).copy_(value)
    else:
        self._index_put_(value, index=index)
