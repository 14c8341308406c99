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
base's old history (``view_source``), not the view's own ``grad_fn``: PyTorch's
CopySlices routes the region's gradient straight into the base's history, so
the view's old node never runs, and hooks registered on the view before the
write, which live on that node, do not fire (Note [Hooks when grad_fn changes]).
A custom Function that marks a view input dirty is rebased the same way, its
node in the in-place op's place (``_wrap_outputs``).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from agrad import _dtype
from agrad._backends import on
from agrad._ops._common import _r
from agrad._ops._memory import writable_alias, write_through
from agrad._ops._registry import REGISTRY, _as_constant, defop, identity, record
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


def rebase_view(view: Tensor, value: Tensor) -> None:
    """After ``value`` was written in place into ``view``: give the base a
    CopySlices ``grad_fn`` and re-derive the view's.  See Note [CopySlices]."""
    base = view._base
    assert base is not None
    history = Tensor._make(base._data, base._grad_fn, base._output_nr)
    history._requires_grad = base._requires_grad
    history._accumulator = base._accumulator
    rebased = record(REGISTRY["copy_slices"], (history, value), {"view": view._view_fn}, Tensor._make(base._data))
    base._set_grad_fn(rebased._grad_fn, 0)  # Note [Hooks when grad_fn changes]
    view._view_version = -1  # stale: the next use replays the view on the new base
    view._refresh_view()


def check_view_write(view: Tensor) -> None:
    """Refuse a recorded in-place write into ``view`` (an op's or a custom
    Function's) where PyTorch does: a view of a leaf that requires grad, or an
    output of an op that returns several views (Note [Multi-output views])."""
    base = view._base
    if base is not None and base._grad_fn is None and base._requires_grad and view._creation != "no_grad":
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    if view._multi_output is not None:
        raise RuntimeError(
            f"{view._multi_output} is a view and is being modified inplace. This view is the output of a function "
            "that returns multiple views. Such functions do not allow the output views to be modified inplace. "
            "You should replace the inplace operation by an out-of-place one."
        )


# Note [Where a view was made]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch's CreationMeta, for the cases agrad refuses here: a view made while
# grad mode was off (``_creation == "no_grad"``) recorded no link to its base's
# history, and a view returned by a custom Function (``"custom_function"``, set
# by ``_wrap_outputs``) has that Function's node as its grad_fn, which a
# CopySlices rebase would silently bypass.  Views of them inherit the mark
# (``_make_view``; a view made in no_grad mode is "no_grad" whatever its
# source).  An in-place write into such a view is refused when it would be
# recorded (grad mode on and the result requires grad); inside no_grad, or
# when nothing requires grad, it is allowed.  The check runs once the op's
# out-of-place result is known, before anything is written.
def check_recorded_view_write(view: Tensor) -> None:
    """Refuse a recorded in-place write into a view made in no_grad mode or by a
    custom Function; see Note [Where a view was made]."""
    creation = view._creation
    if creation == "no_grad":
        raise RuntimeError(
            "A view was created in no_grad mode and is being modified inplace with grad mode enabled. Given that "
            "this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by moving both "
            "the view and the inplace either both inside the no_grad block (if you don't want the inplace to be "
            "tracked) or both outside (if you want the inplace to be tracked)."
        )
    if creation == "custom_function":
        op = re.sub(r"Backward\d*$", "", view._grad_fn.name()) if view._grad_fn is not None else "a custom Function"
        raise RuntimeError(
            f"Output {view._output_nr} of {op} is a view and is being modified inplace. This view was created "
            "inside a custom Function (or because an input was returned as-is) and the autograd logic to handle "
            "view+inplace would override the custom backward associated with the custom Function, leading to "
            "incorrect gradients. This behavior is forbidden. You can fix this by cloning the output of the "
            "custom Function."
        )


def view_source(view: Tensor) -> Tensor:
    """The input of an in-place op on ``view``: a copy of its values (the op may
    save them; the write overwrites them) on a fresh replay of the view on its
    base's history.  See Note [CopySlices]."""
    with on(view.device):
        data = view._data.copy()
    return Tensor._make(data, *view._view_history())


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


_INDEX_SAMPLES = lambda rng: [  # noqa: E731
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


Tensor.__setitem__ = _setitem  # type: ignore[method-assign]
