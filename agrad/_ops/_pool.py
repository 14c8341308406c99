"""Pooling (max, average, adaptive), unfold/fold, interpolation and pixel shuffles.

The table entries, each with the adjoint it is differentiated by:

* ``max_pool`` (N-d values) → ``max_pool_backward`` (scatter to the argmax)
  → a gather at ``max_pool_indices``; likewise ``adaptive_max_pool``;
* ``avg_pool`` ↔ ``avg_pool_backward``; ``resample`` ↔ ``resample_backward``
  (interpolation and adaptive average pooling: Note [Separable resampling]);
* ``im2col`` ↔ ``col2im`` (``F.unfold``/``F.fold``); ``pixel_shuffle`` ↔
  ``pixel_unshuffle``; ``channel_shuffle``; ``max_unpool`` → a gather.

Windows are strided views of the padded input (``_conv._windows``) and every
kernel loops at most over the window's offsets, each step touching all
output positions at once (Note [Pooling by window offsets]).  The functions
PyTorch exposes as ``torch.*`` are defined here; ``agrad.nn.functional``
(``agrad/nn/_convolution.py``) wraps the rest.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from agrad._ops._common import _on_device, _r, _zeros_on
from agrad._ops._conv import _col2im as _col2im_kernel
from agrad._ops._conv import _int_list, _padded, _windows
from agrad._ops._registry import defop
from agrad._ops._shape import gather
from agrad._tensor import Tensor

# The public names of this family (star-imported by ``agrad/__init__.py``).
__all__ = ["max_pool1d", "max_pool2d", "max_pool3d", "max_pool1d_with_indices", "avg_pool1d", "adaptive_avg_pool1d",
           "adaptive_max_pool1d", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle"]

# Tensor methods of this family that are not one entry's ``methods=``
# (composites, aliases with another signature); bound by ``_methods.bind``.
# PyTorch's Tensor has none of these (its ``unfold`` is another op).
METHODS: dict[str, Any] = {}

Ints = tuple[int, ...]
_WORDS = {1: "one", 2: "two", 3: "three"}

# -- window geometry ----------------------------------------------------------------------


def _pool_out(n: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """PyTorch's ``pooling_output_shape``: the number of windows, the last one kept
    in ceil mode only if it starts inside the input or its left padding."""
    out = (n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out


def _geometry(size: Sequence[int], kernel: Ints, stride: Ints, padding: Ints, dilation: Ints, ceil_mode: bool
              ) -> tuple[Ints, Ints]:
    """The output size and the far-side padding its windows need (ceil mode may
    ask for more than ``padding``, never less than 0)."""
    out = tuple(_pool_out(size[i], kernel[i], stride[i], padding[i], dilation[i], ceil_mode) for i in range(len(size)))
    hi = tuple(max(0, (out[i] - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1 - size[i] - padding[i])
               for i in range(len(size)))
    return out, hi


def _lowest(dtype: Any) -> Any:
    """What a max pool pads with: below every value of ``dtype``."""
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def _strides_of(shape: Sequence[int]) -> Ints:
    """Row-major element strides of ``shape``."""
    return tuple(math.prod(shape[i + 1:]) for i in range(len(shape)))


def _axis_grid(xp: Any, n: int, i: int, nd: int) -> Any:
    """``arange(n)`` shaped to broadcast along the ``i``-th of ``nd`` trailing dimensions."""
    return xp.arange(n).reshape((n,) + (1,) * (nd - 1 - i))


# Note [Pooling by window offsets]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A pooling window of K = prod(kernel) elements is visited one offset at a
# time: ``_windows(...)[..., k]`` is, for offset k, the element at that
# offset of every window at once, a strided view.  A max is K - 1 in-place
# ``maximum``s, a sum K - 1 additions, a backward K strided additions into
# the padded input's gradient (for one offset, distinct windows never share
# an element, so ``view += ...`` is exact).  No array of K copies of the
# input is made, and nothing loops over output positions.
#
# Indices follow PyTorch's CPU kernel, which starts each window at its first
# element inside the input with value -inf and moves on ``value > best or
# isnan(value)``: the first maximum, the last NaN, and for a window of -inf
# (or of the integer minimum) its first element inside the input.  Rather
# than K steps of that update (five passes each), the maximum M is taken
# first, then the first offset equal to M (two passes per offset, offsets in
# reverse); only windows whose maximum is NaN or the lowest value (rare) are
# fixed afterwards.  The backward needs no index at all: each offset equal to
# M takes what gradient its window has left (four passes per offset), the
# first one all of it; the rare windows above take the indexed path.
class _MaxWindows:
    """The windows of a max pool's input, padded with the dtype's lowest value."""

    def __init__(self, xp: Any, x: Any, kernel: Ints, stride: Ints, padding: Ints, dilation: Ints,
                 ceil_mode: bool) -> None:
        nd = len(kernel)
        self.size = x.shape[x.ndim - nd:]
        self.out, self.hi = _geometry(self.size, kernel, stride, padding, dilation, ceil_mode)
        self.lowest = _lowest(x.dtype)
        self.view = _windows(xp, _padded(xp, x, padding, self.hi, self.lowest), kernel, stride, dilation, self.out)
        self.lead = (slice(None),) * (x.ndim - nd)
        self.offsets = list(itertools.product(*(range(k) for k in kernel)))
        self.floating = x.dtype.kind == "f"
        self.padded = any(padding) or any(self.hi)
        self.geometry = (kernel, stride, padding, dilation)

    def at(self, k: tuple[int, ...]) -> Any:
        """Every window's element at offset ``k``."""
        return self.view[self.lead + k]

    def max(self, xp: Any) -> Any:
        best = self.at(self.offsets[0]).copy()
        for k in self.offsets[1:]:
            xp.maximum(best, self.at(k), out=best)  # propagates NaN, as PyTorch's max does
        return best

    def special(self, xp: Any, best: Any) -> tuple[Any, Any]:
        """Windows whose maximum is NaN, and (when padded) those whose maximum is the
        lowest value: where the first equal offset is not PyTorch's choice."""
        # a NaN makes the sum NaN: one reduction screens for it (an overflowing
        # sum only costs the full look)
        nan = xp.isnan(best) if self.floating and not bool(xp.isfinite(best.sum())) else None
        low = best == self.lowest if self.padded else None
        return (nan if nan is not None and bool(nan.any()) else None,
                low if low is not None and bool(low.any()) else None)

    def first_inside(self, xp: Any, shape: Ints) -> Any:
        """Per window, the offset of its first element inside the input."""
        kernel, stride, padding, dilation = self.geometry
        nd = len(kernel)
        first: Any = 0
        for i, st in enumerate(_strides_of(kernel)):
            o = _axis_grid(xp, self.out[i], i, nd)
            first = first + xp.maximum(0, -((o * stride[i] - padding[i]) // dilation[i])) * st
        return xp.broadcast_to(first, shape)

    def argmax(self, xp: Any, best: Any) -> Any:
        """PyTorch's choice in every window, as an offset (Note [Pooling by window offsets])."""
        idx = xp.zeros(best.shape, dtype=np.int64)
        for j in reversed(range(len(self.offsets))):  # arithmetic: a masked copy is 5x slower on random masks
            idx += (j - idx) * (self.at(self.offsets[j]) == best)
        nan, low = self.special(xp, best)
        if nan is not None:
            for j, k in enumerate(self.offsets):
                xp.copyto(idx, j, where=xp.isnan(self.at(k)))
        if low is not None:
            xp.copyto(idx, self.first_inside(xp, best.shape), where=low)
        return idx


def _max_pool_argmax(xp: Any, x: Any, kernel: Ints, stride: Ints, padding: Ints, dilation: Ints, ceil_mode: bool,
                     want_index: bool) -> tuple[Any, Any]:
    """The max of every window of ``x``'s trailing dimensions and (if
    ``want_index``) the offset of PyTorch's chosen element within its window
    (Note [Pooling by window offsets])."""
    win = _MaxWindows(xp, x, kernel, stride, padding, dilation, ceil_mode)
    best = win.max(xp)
    return best, (win.argmax(xp, best) if want_index else None)


def _window_positions(xp: Any, local: Any, kernel: Ints, stride: Ints, padding: Ints, dilation: Ints,
                      size: Sequence[int]) -> Any:
    """Offsets within windows (``local``, shaped ``(*lead, *out)``) as flat indices into
    the input's trailing ``len(kernel)`` dimensions, PyTorch's ``indices``."""
    nd = len(kernel)
    out = local.shape[local.ndim - nd:]
    flat: Any = 0
    for i, (kst, sst) in enumerate(zip(_strides_of(kernel), _strides_of(size))):
        k = (local // kst) % kernel[i]
        flat = flat + (_axis_grid(xp, out[i], i, nd) * stride[i] - padding[i] + k * dilation[i]) * sst
    return xp.asarray(flat, dtype=np.int64)


def _grad_windows(xp: Any, grad: Any, win: _MaxWindows) -> tuple[Any, Any]:
    """A zero gradient of the padded input, and its windows as ``win``'s."""
    kernel, stride, padding, dilation = win.geometry
    nd = len(kernel)
    out = grad.shape[grad.ndim - nd:]
    full = tuple(max(win.size[i] + padding[i] + win.hi[i], (out[i] - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1)
                 for i in range(nd))
    dpad = xp.zeros(grad.shape[:grad.ndim - nd] + full, dtype=grad.dtype)
    return dpad, _windows(xp, dpad, kernel, stride, dilation, out)


def _max_pool_grad(xp: Any, grad: Any, x: Any, kernel: Ints, stride: Ints, padding: Ints, dilation: Ints,
                   ceil_mode: bool, maxima: Any = None) -> Any:
    """``grad`` summed into zeros of ``x``'s shape at each window's chosen element
    (Note [Pooling by window offsets]); ``maxima``, the pool's output if known,
    saves taking the maxima again."""
    win = _MaxWindows(xp, x, kernel, stride, padding, dilation, ceil_mode)
    best = win.max(xp) if maxima is None else maxima
    dpad, dwin = _grad_windows(xp, grad, win)
    zero = xp.zeros((), dtype=grad.dtype)
    nan, low = win.special(xp, best)
    if nan is None and low is None and bool(xp.isfinite(grad.sum())):
        # The first offset equal to the maximum is PyTorch's choice.  Products
        # with the masks are several times faster than selects (``where``,
        # ``copyto``), and exact for a finite gradient (0 * inf would be NaN).
        # Windows that share no element (stride >= the dilated kernel) write
        # their shares in place; overlapping ones add them.
        disjoint = all(s >= d * (k - 1) + 1 for k, s, d in zip(kernel, stride, dilation))
        last = len(win.offsets) - 1
        if disjoint:  # each window's first hit takes all its gradient: boolean masks, a quarter of the traffic
            taken = None
            for j, k in enumerate(win.offsets):
                hit = win.at(k) == best
                if taken is None:
                    taken = hit
                else:
                    xp.greater(hit, taken, out=hit)  # a hit, not taken before (hit and not taken)
                    if j < last:
                        xp.logical_or(taken, hit, out=taken)
                xp.multiply(grad, hit, out=dwin[win.lead + k])
        else:
            left = grad.copy()
            for j, k in enumerate(win.offsets):
                share = left * (win.at(k) == best)
                dwin[win.lead + k] += share
                if j < last:
                    left -= share
    else:
        idx = win.argmax(xp, best)
        for j, k in enumerate(win.offsets):
            view = dwin[win.lead + k]
            view += xp.where(idx == j, grad, zero)
    return xp.ascontiguousarray(dpad[win.lead + tuple(slice(p, p + n) for p, n in zip(padding, win.size))])


def _gather_at(t: Tensor, indices: Tensor, nd: int) -> Tensor:
    """The elements of ``t`` at flat ``indices`` into its trailing ``nd`` dimensions,
    shaped as ``indices``: PyTorch's ``max_pool_double_backward`` (a gather and a view)."""
    src = t.flatten(start_dim=t.ndim - nd) if nd > 1 else t
    idx = indices.flatten(start_dim=indices.ndim - nd) if nd > 1 else indices
    return gather(src, src.ndim - 1, idx).reshape(tuple(indices.shape))


# -- max pooling -------------------------------------------------------------------------------


def _max_pool_ref(torch: Any) -> Any:
    def ref(input: Any, kernel_size: Ints, stride: Ints, padding: Ints, dilation: Ints, ceil_mode: bool) -> Any:
        fn = getattr(torch.nn.functional, f"max_pool{len(kernel_size)}d")
        return fn(input, kernel_size, stride, padding, dilation, ceil_mode)
    return ref


def _max_pool_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    def kw(k: Ints, s: Ints, p: Ints, d: Ints, ceil: bool = False) -> dict[str, Any]:
        return {"kernel_size": k, "stride": s, "padding": p, "dilation": d, "ceil_mode": ceil}

    return [
        ((_r(rng, 2, 2, 4, 4),), kw((2, 2), (2, 2), (0, 0), (1, 1))),
        ((_r(rng, 1, 2, 5, 6),), kw((3, 2), (2, 1), (1, 1), (1, 1), True)),
        ((_r(rng, 2, 5, 5),), kw((2, 2), (2, 2), (1, 0), (2, 1), True)),  # unbatched, dilated
        ((_r(rng, 1, 1, 3, 4, 4),), kw((2, 2, 2), (1, 2, 2), (1, 0, 1), (1, 1, 1))),
        ((_r(rng, 0, 2, 4, 4),), kw((2, 2), (2, 2), (0, 0), (1, 1))),
    ]


def _pooled_shape(shape: Sequence[int], kw: dict[str, Any]) -> Ints:
    """The output shape of a pool sample (for its backward's samples)."""
    k = kw["kernel_size"]
    out, _ = _geometry(shape[len(shape) - len(k):], k, kw["stride"], kw["padding"], kw.get("dilation", (1,) * len(k)),
                       kw["ceil_mode"])
    return tuple(shape[:len(shape) - len(k)]) + out


def _max_pool_node(kernel_size: Ints, **_: Any) -> str:
    return f"MaxPool{len(kernel_size)}DWithIndicesBackward0"


@defop(ref=_max_pool_ref,
       vjp=lambda g, input, out, kernel_size, stride, padding, dilation, ceil_mode: _max_pool_backward(
           g, input, kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation, ceil_mode=ceil_mode,
           maxima=out._data),
       node=tuple(f"MaxPool{n}DWithIndicesBackward0" for n in (1, 2, 3)), node_for=_max_pool_node,
       samples=_max_pool_samples)
def _max_pool(xp, input, *, kernel_size, stride, padding, dilation, ceil_mode=False):
    """The max of each window over the trailing ``len(kernel_size)`` dimensions;
    the arguments checked and complete (``max_pool2d`` … check them)."""
    return _max_pool_argmax(xp, input, kernel_size, stride, padding, dilation, ceil_mode, False)[0]


@defop(ref=lambda torch: _indices_ref(torch), vjp=None, samples=lambda rng: _max_pool_samples(rng)[:4])
def _max_pool_indices(xp, input, *, kernel_size, stride, padding, dilation, ceil_mode=False):
    """PyTorch's ``indices`` of a max pool: for each window, the flat index of its
    maximum in the input's trailing dimensions (int64)."""
    _, local = _max_pool_argmax(xp, input, kernel_size, stride, padding, dilation, ceil_mode, True)
    nd = len(kernel_size)
    return _window_positions(xp, local, kernel_size, stride, padding, dilation, input.shape[input.ndim - nd:])


def _backward_ref(torch: Any, forward: Any) -> Any:
    """PyTorch's backward of ``forward`` as a function of the output's gradient
    and the forward's input (or its size), differentiable (create_graph): the
    oracle of a backward entry."""
    def ref(grad: Any, *args: Any, input_size: Any = None, **kw: Any) -> Any:
        if input_size is not None:
            x = torch.zeros(input_size, dtype=grad.dtype, requires_grad=True)
            (g,) = torch.autograd.grad(forward(x, *args, **kw), x, grad, create_graph=True)
            return g
        (x, *rest) = args
        (g,) = torch.autograd.grad(forward(x, *rest, **kw), x, grad, create_graph=True)
        return g
    return ref


def _indices_ref(torch: Any) -> Any:
    def ref(input: Any, kernel_size: Ints, stride: Ints, padding: Ints, dilation: Ints, ceil_mode: bool) -> Any:
        fn = getattr(torch.nn.functional, f"max_pool{len(kernel_size)}d_with_indices")
        return fn(input, kernel_size, stride, padding, dilation, ceil_mode)[1]
    return ref


@defop(ref=lambda torch: _backward_ref(torch, _max_pool_ref(torch)),
       vjp=(lambda gg, input, kernel_size, stride, padding, dilation, ceil_mode: _gather_at(
           gg, _max_pool_indices(input, kernel_size=kernel_size, stride=stride, padding=padding, dilation=dilation,
                                 ceil_mode=ceil_mode), len(kernel_size)),
            lambda gg, input_shape: _zeros_on(gg, input_shape)),
       node=tuple(f"MaxPool{n}DWithIndicesBackwardBackward0" for n in (1, 2, 3)),
       node_for=lambda kernel_size, **_: f"MaxPool{len(kernel_size)}DWithIndicesBackwardBackward0",
       samples=lambda rng: [((_r(rng, *_pooled_shape(x.shape, kw)), x), kw) for (x,), kw in _max_pool_samples(rng)[:3]])
def _max_pool_backward(xp, grad, input, *, kernel_size, stride, padding, dilation, ceil_mode=False, maxima=None):
    """The gradient of a max pool's input: ``grad`` scattered to each window's
    maximum (summed where windows overlap).  ``maxima`` (an array: the pool's
    output, which its node keeps) spares taking the maxima again."""
    return _max_pool_grad(xp, grad, input, kernel_size, stride, padding, dilation, ceil_mode, maxima)


# -- adaptive windows ---------------------------------------------------------------------------


def _adaptive_bounds(n: int, o: int) -> tuple[np.ndarray, np.ndarray]:
    """PyTorch's adaptive windows of ``n`` elements into ``o``: ``[floor(i*n/o), ceil((i+1)*n/o))``."""
    i = np.arange(o)
    return i * n // o, -(-(i + 1) * n // o)


def _adaptive_taps(like: Any, size: Sequence[int], out: Sequence[int]) -> list[Any]:
    """Per dimension, the input index of each window's ``l``-th element, (out, L),
    clamped to the window's last element where a window is shorter than L (on
    the device of ``like``)."""
    taps = []
    for n, o in zip(size, out):
        start, end = _adaptive_bounds(n, o)
        length = int((end - start).max()) if o else 1
        taps.append(_on_device(like, np.minimum(start[:, None] + np.arange(length), end[:, None] - 1)))
    return taps


def _adaptive_max_argmax(xp: Any, x: Any, out: Ints) -> tuple[Any, Any]:
    """The max of each adaptive window and its flat index in the input's trailing
    dimensions, PyTorch's (the first maximum, the last NaN), taken as
    ``_MaxWindows`` takes them, a window's l-th elements at once."""
    nd = len(out)
    size = x.shape[x.ndim - nd:]
    taps = _adaptive_taps(x, size, out)
    values, flats = [], []
    for ls in itertools.product(*(range(t.shape[1]) for t in taps)):
        pos = [t[:, li].reshape((t.shape[0],) + (1,) * (nd - 1 - i)) for i, (t, li) in enumerate(zip(taps, ls))]
        values.append(x[(Ellipsis, *pos)])
        flats.append(sum(p * st for p, st in zip(pos, _strides_of(size))))
    best = values[0].copy()
    for v in values[1:]:
        xp.maximum(best, v, out=best)
    idx = xp.zeros(best.shape, dtype=np.int64)
    for v, flat in zip(reversed(values), reversed(flats)):
        idx += (flat - idx) * (v == best)
    if x.dtype.kind == "f" and bool(xp.isnan(best).any()):
        for v, flat in zip(values, flats):
            xp.copyto(idx, xp.broadcast_to(flat, best.shape), where=xp.isnan(v))
    return best, idx


def _scatter_flat(xp: Any, grad: Any, indices: Any, size: Sequence[int], accumulate: bool) -> Any:
    """A zero array of ``grad``'s leading shape and spatial ``size`` with ``grad``
    put at the flat spatial ``indices`` (summed where they repeat, if ``accumulate``)."""
    nd = len(size)
    lead = grad.shape[:grad.ndim - nd]
    planes, plane = math.prod(lead), math.prod(size)
    out = xp.zeros(planes * plane, dtype=grad.dtype)
    per = math.prod(indices.shape[len(lead):])
    where = (indices.reshape(planes, per) + xp.arange(planes).reshape(-1, 1) * plane).reshape(-1)
    if accumulate:
        xp.add.at(out, where, grad.reshape(-1))
    else:
        out[where] = grad.reshape(-1)
    return out.reshape(lead + tuple(size))


def _adaptive_max_ref(torch: Any) -> Any:
    def ref(input: Any, output_size: Ints) -> Any:
        return getattr(torch.nn.functional, f"adaptive_max_pool{len(output_size)}d")(input, output_size)
    return ref


def _adaptive_max_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    return [((_r(rng, 2, 2, 5, 7),), {"output_size": (2, 3)}), ((_r(rng, 2, 4, 3),), {"output_size": (3, 5)}),
            ((_r(rng, 1, 1, 3, 4, 5),), {"output_size": (2, 2, 3)}), ((_r(rng, 0, 2, 4, 4),), {"output_size": (2, 2)})]


@defop(ref=_adaptive_max_ref,
       vjp=lambda g, input, output_size: _adaptive_max_pool_backward(g, input, output_size=output_size),
       node=tuple(f"AdaptiveMaxPool{n}DBackward0" for n in (1, 2, 3)),
       node_for=lambda output_size: f"AdaptiveMaxPool{len(output_size)}DBackward0", samples=_adaptive_max_samples)
def _adaptive_max_pool(xp, input, *, output_size):
    """The max of each of the ``output_size`` adaptive windows of the trailing dimensions."""
    return _adaptive_max_argmax(xp, input, output_size)[0]


@defop(ref=lambda torch: lambda input, output_size: getattr(
           torch.nn.functional, f"adaptive_max_pool{len(output_size)}d")(input, output_size, True)[1],
       vjp=None, samples=lambda rng: _adaptive_max_samples(rng)[:2])
def _adaptive_max_pool_indices(xp, input, *, output_size):
    """The flat index (int64) of each adaptive window's maximum, PyTorch's ``indices``."""
    return _adaptive_max_argmax(xp, input, output_size)[1]


@defop(ref=lambda torch: _backward_ref(torch, _adaptive_max_ref(torch)),
       vjp=(lambda gg, input, output_size: _gather_at(gg, _adaptive_max_pool_indices(input, output_size=output_size),
                                                      len(output_size)),
            lambda gg, input_shape: _zeros_on(gg, input_shape)),
       node=tuple(f"AdaptiveMaxPool{n}DBackwardBackward0" for n in (1, 2, 3)),
       node_for=lambda output_size: f"AdaptiveMaxPool{len(output_size)}DBackwardBackward0",
       samples=lambda rng: [((_r(rng, 2, 2, 2, 3), _r(rng, 2, 2, 5, 7)), {"output_size": (2, 3)}),
                            ((_r(rng, 2, 3, 5), _r(rng, 2, 4, 3)), {"output_size": (3, 5)})])
def _adaptive_max_pool_backward(xp, grad, input, *, output_size):
    """The gradient of an adaptive max pool's input: ``grad`` summed into each
    window's maximum (adaptive windows may overlap)."""
    _, idx = _adaptive_max_argmax(xp, input, output_size)
    return _scatter_flat(xp, grad, idx, input.shape[input.ndim - len(output_size):], True)


# -- max unpooling ----------------------------------------------------------------------------


@defop(ref=lambda torch: lambda input, indices, output_size: getattr(
           torch.nn.functional, f"max_unpool{len(output_size)}d")(
           input, indices, tuple(o - i + 1 for o, i in zip(output_size, input.shape[-len(output_size):])), 1,
           output_size=output_size),
       vjp=(lambda g, indices, output_size: _gather_at(g, indices, len(output_size)), None),
       node=tuple(f"MaxUnpool{n}DBackward0" for n in (1, 2, 3)),
       node_for=lambda output_size: f"MaxUnpool{len(output_size)}DBackward0",
       samples=lambda rng: [((_r(rng, 2, 2, 2, 2), np.array([[[[0, 3], [9, 14]]] * 2] * 2)), {"output_size": (4, 4)}),
                            ((_r(rng, 2, 2, 2), np.array([[[1, 2], [4, 7]]] * 2)), {"output_size": (3, 3)})])
def _max_unpool(xp, input, indices, *, output_size):
    """``input`` placed at the flat ``indices`` of a zero array of spatial ``output_size``."""
    return _scatter_flat(xp, input, indices, output_size, False)


# -- average pooling ---------------------------------------------------------------------------


def _avg_divisor(like: Any, size: Sequence[int], out: Ints, kernel: Ints, stride: Ints, padding: Ints,
                 count_include_pad: bool, divisor_override: Any) -> Any:
    """Each window's divisor, PyTorch's: ``divisor_override``, or the window's size
    clipped to the padded input (``count_include_pad``) or to the input (an
    array on the device of ``like``)."""
    if divisor_override:
        return divisor_override
    div: Any = 1
    for i in range(len(kernel)):
        start = np.arange(out[i]) * stride[i] - padding[i]
        if count_include_pad:
            n = np.minimum(start + kernel[i], size[i] + padding[i]) - start
        else:
            n = np.minimum(start + kernel[i], size[i]) - np.maximum(start, 0)
        div = div * n.reshape((out[i],) + (1,) * (len(kernel) - 1 - i))
    return _on_device(like, np.asarray(div))


def _avg_pool_kernel(xp: Any, x: Any, kernel: Ints, stride: Ints, padding: Ints, ceil_mode: bool,
                     count_include_pad: bool, divisor_override: Any) -> Any:
    nd = len(kernel)
    ones = (1,) * nd
    size = x.shape[x.ndim - nd:]
    out, hi = _geometry(size, kernel, stride, padding, ones, ceil_mode)
    win = _windows(xp, _padded(xp, x, padding, hi), kernel, stride, ones, out)
    lead = (slice(None),) * (x.ndim - nd)
    offsets = list(itertools.product(*(range(k) for k in kernel)))
    acc = win[lead + offsets[0]].astype(np.int64 if x.dtype.kind in "biu" else x.dtype)
    for k in offsets[1:]:
        acc += win[lead + k]
    div = _avg_divisor(x, size, out, kernel, stride, padding, count_include_pad, divisor_override)
    if x.dtype.kind in "biu":  # PyTorch divides integers in C++: truncating
        return (xp.sign(acc) * (xp.abs(acc) // div)).astype(x.dtype)
    acc /= xp.asarray(div, dtype=x.dtype) if not isinstance(div, int) else x.dtype.type(div)
    return acc


def _avg_pool_ref(torch: Any) -> Any:
    def ref(input: Any, kernel_size: Ints, stride: Ints, padding: Ints, ceil_mode: bool = False,
            count_include_pad: bool = True, divisor_override: Any = None) -> Any:
        nd = len(kernel_size)
        if nd == 1:
            return torch.nn.functional.avg_pool1d(input, kernel_size, stride, padding, ceil_mode, count_include_pad)
        return getattr(torch.nn.functional, f"avg_pool{nd}d")(input, kernel_size, stride, padding, ceil_mode,
                                                              count_include_pad, divisor_override)
    return ref


def _avg_pool_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    def kw(k: Ints, s: Ints, p: Ints, ceil: bool = False, incl: bool = True, div: Any = None) -> dict[str, Any]:
        return {"kernel_size": k, "stride": s, "padding": p, "ceil_mode": ceil, "count_include_pad": incl,
                "divisor_override": div}

    return [
        ((_r(rng, 2, 2, 4, 4),), kw((2, 2), (2, 2), (0, 0))),
        ((_r(rng, 1, 2, 5, 6),), kw((3, 2), (2, 1), (1, 1), True, False)),
        ((_r(rng, 2, 5, 5),), kw((3, 3), (2, 2), (1, 1), True, True)),  # unbatched; ceil windows past the padding
        ((_r(rng, 1, 2, 4, 5),), kw((2, 3), (1, 2), (1, 0), False, True, 5)),
        ((_r(rng, 1, 1, 3, 4, 4),), kw((2, 2, 2), (1, 2, 2), (1, 0, 1), True, False)),
        ((_r(rng, 0, 2, 4, 4),), kw((2, 2), (2, 2), (0, 0))),
    ]


def _avg_pool_node(kernel_size: Ints, **_: Any) -> str:
    return f"AvgPool{len(kernel_size)}DBackward0"


@defop(ref=_avg_pool_ref,
       vjp=lambda g, input_shape, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override:
       _avg_pool_backward(g, input_size=tuple(input_shape), kernel_size=kernel_size, stride=stride, padding=padding,
                          ceil_mode=ceil_mode, count_include_pad=count_include_pad,
                          divisor_override=divisor_override),
       node=tuple(f"AvgPool{n}DBackward0" for n in (1, 2, 3)), node_for=_avg_pool_node, samples=_avg_pool_samples)
def _avg_pool(xp, input, *, kernel_size, stride, padding, ceil_mode=False, count_include_pad=True,
              divisor_override=None):
    """The mean of each window over the trailing ``len(kernel_size)`` dimensions,
    with PyTorch's divisors (``_avg_divisor``); integers divide truncating."""
    return _avg_pool_kernel(xp, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


@defop(ref=lambda torch: _backward_ref(torch, _avg_pool_ref(torch)),
       vjp=lambda gg, input_size, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override:
       _avg_pool(gg, kernel_size=kernel_size, stride=stride, padding=padding, ceil_mode=ceil_mode,
                 count_include_pad=count_include_pad, divisor_override=divisor_override),
       node=tuple(f"AvgPool{n}DBackwardBackward0" for n in (1, 2, 3)),
       node_for=lambda kernel_size, **_: f"AvgPool{len(kernel_size)}DBackwardBackward0",
       samples=lambda rng: [((_r(rng, *_pooled_shape(x.shape, kw)),), {"input_size": x.shape, **kw})
                            for (x,), kw in _avg_pool_samples(rng)[:4]])
def _avg_pool_backward(xp, grad, *, input_size, kernel_size, stride, padding, ceil_mode=False,
                       count_include_pad=True, divisor_override=None):
    """The gradient of an average pool's input of ``input_size``: each window's
    ``grad / divisor`` added to its elements (the pool's adjoint)."""
    nd = len(kernel_size)
    ones = (1,) * nd
    size = tuple(input_size[len(input_size) - nd:])
    out = tuple(grad.shape[grad.ndim - nd:])
    div = _avg_divisor(grad, size, out, kernel_size, stride, padding, count_include_pad, divisor_override)
    share = grad / (xp.asarray(div, dtype=grad.dtype) if not isinstance(div, int) else grad.dtype.type(div))
    _, hi = _geometry(size, kernel_size, stride, padding, ones, ceil_mode)
    full = tuple(size[i] + padding[i] + hi[i] for i in range(nd))
    cols = xp.broadcast_to(share.reshape(share.shape[:share.ndim - nd] + ones + out),
                           share.shape[:share.ndim - nd] + tuple(kernel_size) + out)
    dpad = _col2im_kernel(xp, cols, full, kernel_size, stride, ones)
    lead = (slice(None),) * (dpad.ndim - nd)
    return xp.ascontiguousarray(dpad[lead + tuple(slice(p, p + n) for p, n in zip(padding, size))])


# -- separable resampling: interpolation and adaptive average pooling ------------------------


# Note [Separable resampling]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Interpolation (nearest, linear, bicubic) and adaptive average pooling (the
# 'area' mode) are linear maps that act on each spatial dimension apart: along
# a dimension of n inputs and o outputs, output i is a weighted sum of a few
# inputs (1 for nearest, 2 linear, 4 cubic, about n/o for area).  Each
# dimension's map is kept as taps, ``idx`` and ``w`` of shape (o, T) (a sparse
# matrix with T entries a row; rows with fewer pad with weight 0), built once
# per geometry (``_taps``, cached) with PyTorch's index and weight formulas,
# and applied as one gather (``take``) and a weighted sum over T.  The
# backward is the same with the transposed taps (each input's outputs and
# weights, T' a row), a gather too: no scatter, no dense matrix (a 224->448
# bilinear as dense products would cost 50x the work).  The backward of the
# backward is the forward again.  Weights are computed in float64 and cast to
# the tensor's dtype; nearest indices in float32, as PyTorch computes them
# (their floor is exact only so).
@functools.lru_cache(maxsize=256)
def _dense_map(mode: str, n: int, o: int, align_corners: bool, scale: float | None) -> np.ndarray:
    """Along one dimension, the (o, n) matrix of the map (Note [Separable resampling])."""
    a = np.zeros((o, n))
    rows = np.arange(o)
    if mode == "area":
        start, end = _adaptive_bounds(n, o)
        cols = np.arange(n)
        inside = (cols >= start[:, None]) & (cols < end[:, None])
        return inside / (end - start)[:, None]
    if mode in ("nearest", "nearest-exact"):
        if mode == "nearest" and o == n:
            src = rows
        elif mode == "nearest" and o == 2 * n:
            src = rows >> 1
        else:
            f = np.float32(1.0 / scale) if scale is not None and scale > 0 else np.float32(n) / np.float32(o)
            pos = rows.astype(np.float32) + (np.float32(0.5) if mode == "nearest-exact" else np.float32(0))
            src = np.minimum(np.floor(pos * f).astype(np.int64), n - 1)
        a[rows, src] = 1.0
        return a
    if align_corners:
        ratio = (n - 1) / (o - 1) if o > 1 else 0.0
    else:
        ratio = 1.0 / scale if scale is not None and scale > 0 else n / o
    if mode == "linear":
        if o == n:
            a[rows, rows] = 1.0
            return a
        real = ratio * rows if align_corners else np.maximum(ratio * (rows + 0.5) - 0.5, 0.0)
        i0 = np.minimum(np.floor(real).astype(np.int64), n - 1)
        lam = np.clip(real - i0, 0.0, 1.0)
        i1 = i0 + (i0 < n - 1)
        np.add.at(a, (rows, i0), 1.0 - lam)
        np.add.at(a, (rows, i1), lam)
        return a
    # bicubic: PyTorch's cubic convolution (A = -0.75) on indices clamped to the edges
    real = ratio * rows if align_corners else ratio * (rows + 0.5) - 0.5
    i0 = np.floor(real).astype(np.int64)
    t = real - i0
    A = -0.75

    def cc1(x: np.ndarray) -> np.ndarray:
        return ((A + 2) * x - (A + 3)) * x * x + 1

    def cc2(x: np.ndarray) -> np.ndarray:
        return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A

    for k, w in enumerate((cc2(t + 1.0), cc1(t), cc1(1.0 - t), cc2(2.0 - t))):
        np.add.at(a, (rows, np.clip(i0 - 1 + k, 0, n - 1)), w)
    return a


def _ell(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A matrix's rows as taps ``(idx, w)``, (rows, T): the columns of each row's
    nonzeros, padded with weight 0 (Note [Separable resampling])."""
    nonzero = a != 0
    t = max(int(nonzero.sum(axis=1).max()) if a.size else 1, 1)
    idx = np.argsort(~nonzero, axis=1, kind="stable")[:, :t]
    return idx, np.take_along_axis(a, idx, axis=1)


@functools.lru_cache(maxsize=256)
def _taps(mode: str, n: int, o: int, align_corners: bool, scale: float | None, transposed: bool
          ) -> tuple[np.ndarray, np.ndarray]:
    a = _dense_map(mode, n, o, align_corners, scale)
    return _ell(a.T if transposed else a)


def _apply_taps(xp: Any, x: Any, axis: int, idx: np.ndarray, w: np.ndarray) -> Any:
    """Along ``axis``, output i = sum_t w[i, t] * x[idx[i, t]]."""
    rows, t = idx.shape
    picked = xp.take(x, _on_device(x, idx.reshape(-1)), axis=axis)
    if t == 1 and bool((w == 1).all()):
        return picked  # nearest: a gather
    picked = picked.reshape(x.shape[:axis] + (rows, t) + x.shape[axis + 1:])
    weights = _on_device(x, w.astype(x.dtype)).reshape((rows, t) + (1,) * (x.ndim - axis - 1))
    return (picked * weights).sum(axis=axis + 1)


def _resample_kernel(xp: Any, x: Any, mode: str, size: Ints, out: Ints, align_corners: bool,
                     scales: tuple[float | None, ...] | None, transposed: bool) -> Any:
    """Apply the separable map dimension by dimension (its transpose when ``transposed``:
    then ``x`` has the output's spatial size and the result the input's)."""
    nd = len(size)
    for i in range(nd):
        scale = None if scales is None else scales[i]
        idx, w = _taps(mode, size[i], out[i], align_corners, scale, transposed)
        x = _apply_taps(xp, x, x.ndim - nd + i, idx, w)
    return x


_LINEAR_NAMES = {1: "Linear", 2: "Bilinear", 3: "Trilinear"}


def _resample_node(mode: str, size: Ints, **_: Any) -> str:
    nd = len(size)
    if mode == "area":
        return f"AdaptiveAvgPool{nd}DBackward0"
    name = {"nearest": "Nearest", "nearest-exact": "NearestExact", "bicubic": "Bicubic"}.get(mode) or _LINEAR_NAMES[nd]
    return f"Upsample{name}{nd}DBackward0"


_RESAMPLE_NODES = tuple(
    [f"AdaptiveAvgPool{n}DBackward0" for n in (1, 2, 3)]
    + [f"Upsample{m}{n}DBackward0" for m in ("Nearest", "NearestExact") for n in (1, 2, 3)]
    + [f"Upsample{_LINEAR_NAMES[n]}{n}DBackward0" for n in (1, 2, 3)] + ["UpsampleBicubic2DBackward0"])


def _resample_ref(torch: Any) -> Any:
    def ref(input: Any, mode: str, size: Ints, align_corners: bool = False, scales: Any = None) -> Any:
        nd = len(size)
        if mode == "area":
            return getattr(torch.nn.functional, f"adaptive_avg_pool{nd}d")(input, size)
        torch_mode = {"linear": {1: "linear", 2: "bilinear", 3: "trilinear"}[nd]}.get(mode, mode)
        corners = align_corners if torch_mode in ("linear", "bilinear", "trilinear", "bicubic") else None
        if scales is not None:
            return torch.nn.functional.interpolate(input, scale_factor=scales, mode=torch_mode, align_corners=corners)
        return torch.nn.functional.interpolate(input, size=size, mode=torch_mode, align_corners=corners)
    return ref


def _resample_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    def kw(mode: str, size: Ints, corners: bool = False, scales: Any = None) -> dict[str, Any]:
        return {"mode": mode, "size": size, "align_corners": corners, "scales": scales}

    return [
        ((_r(rng, 2, 2, 5, 7),), kw("area", (2, 3))),
        ((_r(rng, 2, 3, 4),), kw("area", (3, 6))),  # unbatched; overlapping windows
        ((_r(rng, 1, 1, 3, 4, 5),), kw("area", (2, 2, 3))),
        ((_r(rng, 1, 2, 3, 4),), kw("nearest", (6, 8), scales=(2.0, 2.0))),
        ((_r(rng, 1, 2, 5),), kw("nearest", (3,))),
        ((_r(rng, 1, 2, 3, 4),), kw("nearest-exact", (5, 7))),
        ((_r(rng, 1, 2, 5),), kw("linear", (8,))),
        ((_r(rng, 1, 2, 3, 4),), kw("linear", (5, 7), True)),
        ((_r(rng, 1, 2, 3, 4),), kw("linear", (4, 6), scales=(1.5, 1.5))),
        ((_r(rng, 1, 1, 2, 3, 2),), kw("linear", (3, 4, 4))),
        ((_r(rng, 1, 2, 3, 4),), kw("bicubic", (5, 6))),
        ((_r(rng, 1, 1, 4, 3),), kw("bicubic", (3, 5), True)),
        ((_r(rng, 0, 2, 3, 4),), kw("linear", (6, 8))),
    ]


@defop(ref=_resample_ref,
       vjp=lambda g, input_shape, mode, size, align_corners, scales: _resample_backward(
           g, input_size=tuple(input_shape), mode=mode, size=size, align_corners=align_corners, scales=scales),
       node=_RESAMPLE_NODES, node_for=_resample_node, samples=_resample_samples)
def _resample(xp, input, *, mode, size, align_corners=False, scales=None):
    """Resample the trailing ``len(size)`` dimensions to ``size``: interpolation
    (``mode`` 'nearest', 'nearest-exact', 'linear' in any dimension, 'bicubic')
    or adaptive average pooling ('area'); ``scales`` are the scale factors the
    user gave, which PyTorch's index formulas use (Note [Separable resampling])."""
    nd = len(size)
    return _resample_kernel(xp, input, mode, tuple(input.shape[input.ndim - nd:]), tuple(size), align_corners,
                            scales, False)


def _resample_backward_node(mode: str, size: Ints, **_: Any) -> str:
    return _resample_node(mode, size)[:-len("Backward0")] + "BackwardBackward0"


@defop(ref=lambda torch: _backward_ref(torch, _resample_ref(torch)),
       vjp=lambda gg, mode, size, align_corners, scales: _resample(gg, mode=mode, size=size,
                                                                    align_corners=align_corners, scales=scales),
       node=tuple(n[:-len("Backward0")] + "BackwardBackward0" for n in _RESAMPLE_NODES),
       node_for=_resample_backward_node,
       samples=lambda rng: [((_r(rng, 2, 2, 2, 3),), {"input_size": (2, 2, 5, 7), "mode": "area", "size": (2, 3)}),
                            ((_r(rng, 1, 2, 5, 7),), {"input_size": (1, 2, 3, 4), "mode": "linear", "size": (5, 7),
                                                      "align_corners": True}),
                            ((_r(rng, 1, 2, 6, 8),), {"input_size": (1, 2, 3, 4), "mode": "nearest",
                                                      "size": (6, 8)}),
                            ((_r(rng, 1, 2, 5, 6),), {"input_size": (1, 2, 3, 4), "mode": "bicubic",
                                                      "size": (5, 6)})])
def _resample_backward(xp, grad, *, input_size, mode, size, align_corners=False, scales=None):
    """The gradient of ``resample``'s input of ``input_size``: the transposed map."""
    nd = len(size)
    return _resample_kernel(xp, grad, mode, tuple(input_size[len(input_size) - nd:]), tuple(size), align_corners,
                            scales, True)


# -- im2col / col2im (unfold / fold) -----------------------------------------------------------


def _unfold_out(size: Sequence[int], kernel: Ints, dilation: Ints, padding: Ints, stride: Ints) -> Ints:
    return tuple((size[i] + 2 * padding[i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1
                 for i in range(len(kernel)))


@defop(ref=lambda torch: torch.nn.functional.unfold,
       vjp=lambda g, input_shape, kernel_size, dilation, padding, stride: _col2im(
           g, output_size=tuple(input_shape[-2:]), kernel_size=kernel_size, dilation=dilation, padding=padding,
           stride=stride),
       node="Im2ColBackward0",
       samples=lambda rng: [((_r(rng, 2, 2, 4, 5),), {"kernel_size": (2, 3), "dilation": (1, 1), "padding": (0, 1),
                                                      "stride": (1, 2)}),
                            ((_r(rng, 2, 5, 4),), {"kernel_size": (2, 2), "dilation": (2, 1), "padding": (1, 0),
                                                   "stride": (2, 1)}),
                            ((_r(rng, 0, 2, 3, 3),), {"kernel_size": (2, 2), "dilation": (1, 1), "padding": (0, 0),
                                                      "stride": (1, 1)})])
def _im2col(xp, input, *, kernel_size, dilation=(1, 1), padding=(0, 0), stride=(1, 1)):
    """The sliding blocks of ``input`` (N, C, H, W) or (C, H, W) as columns:
    (N, C * kH * kW, L), ``F.unfold``."""
    out = _unfold_out(input.shape[-2:], kernel_size, dilation, padding, stride)
    view = _windows(xp, _padded(xp, input, padding, padding), tuple(kernel_size), stride, dilation, out)
    c = input.shape[-3]
    return xp.ascontiguousarray(view).reshape(input.shape[:-3] + (c * math.prod(kernel_size), math.prod(out)))


@defop(ref=lambda torch: torch.nn.functional.fold,
       vjp=lambda g, kernel_size, dilation, padding, stride: _im2col(
           g, kernel_size=kernel_size, dilation=dilation, padding=padding, stride=stride),
       node="Col2ImBackward0",
       samples=lambda rng: [((_r(rng, 2, 12, 9),), {"output_size": (4, 5), "kernel_size": (2, 3),
                                                    "dilation": (1, 1), "padding": (0, 1), "stride": (1, 2)}),
                            ((_r(rng, 8, 9),), {"output_size": (5, 4), "kernel_size": (2, 2), "dilation": (2, 1),
                                                "padding": (1, 0), "stride": (2, 1)})])
def _col2im(xp, input, *, output_size, kernel_size, dilation=(1, 1), padding=(0, 0), stride=(1, 1)):
    """Sum columns (N, C * kH * kW, L) into (N, C, *output_size), overlapping
    blocks added: ``F.fold``, the adjoint of ``F.unfold``."""
    kernel = tuple(kernel_size)
    k = math.prod(kernel)
    out = _unfold_out(output_size, kernel, dilation, padding, stride)
    lead = input.shape[:-2]
    cols = input.reshape(lead + (input.shape[-2] // k,) + kernel + out)
    full = tuple(max(output_size[i] + 2 * padding[i], (out[i] - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1)
                 for i in range(2))
    y = _col2im_kernel(xp, cols, full, kernel, stride, dilation)
    body = (slice(None),) * (y.ndim - 2)
    return xp.ascontiguousarray(y[body + tuple(slice(p, p + n) for p, n in zip(padding, output_size))])


# -- shuffles -------------------------------------------------------------------------------


def _check_shuffle_dims(input: Tensor, op: str) -> None:
    if input.ndim < 3:
        raise RuntimeError(f"{op} expects input to have at least 3 dimensions, but got input with {input.ndim} "
                           "dimension(s)")


def _pixel_shuffle_args(input: Tensor, upscale_factor: int) -> tuple[tuple[Tensor], dict[str, Any]]:
    _check_shuffle_dims(input, "pixel_shuffle")
    r = operator.index(upscale_factor)
    if r <= 0:
        raise RuntimeError(f"pixel_shuffle expects a positive upscale_factor, but got {r}")
    c = input.shape[-3]
    if c % (r * r):
        raise RuntimeError("pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of "
                           f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    return (input,), {"upscale_factor": r}


def _pixel_unshuffle_args(input: Tensor, downscale_factor: int) -> tuple[tuple[Tensor], dict[str, Any]]:
    _check_shuffle_dims(input, "pixel_unshuffle")
    r = operator.index(downscale_factor)
    if r <= 0:
        raise RuntimeError(f"pixel_unshuffle expects a positive downscale_factor, but got {r}")
    for dim, name in ((-2, "height"), (-1, "width")):
        if input.shape[dim] % r:
            raise RuntimeError(f"pixel_unshuffle expects {name} to be divisible by downscale_factor, but "
                               f"input.size({dim})={input.shape[dim]} is not divisible by {r}")
    return (input,), {"downscale_factor": r}


@defop(ref=lambda torch: torch.pixel_shuffle,
       vjp=lambda g, upscale_factor: pixel_unshuffle(g, upscale_factor), node="PixelShuffleBackward0",
       parse=_pixel_shuffle_args,
       samples=lambda rng: [((_r(rng, 2, 8, 2, 3), 2), {}), ((_r(rng, 9, 2, 2), 3), {}),
                            ((_r(rng, 2, 1, 4, 2, 2), 2), {})])
def pixel_shuffle(xp, input, *, upscale_factor):
    """Rearrange (*, C * r * r, H, W) into (*, C, H * r, W * r): each group of
    r * r channels becomes an r x r block of pixels.

    Example::

        >>> import agrad
        >>> agrad.pixel_shuffle(agrad.arange(4.0).reshape(1, 4, 1, 1), 2).tolist()
        [[[[0.0, 1.0], [2.0, 3.0]]]]
    """
    r = upscale_factor
    *lead, c, h, w = input.shape
    x = input.reshape(tuple(lead) + (c // (r * r), r, r, h, w))
    n = len(lead)
    x = x.transpose(tuple(range(n)) + (n, n + 3, n + 1, n + 4, n + 2))
    return xp.ascontiguousarray(x).reshape(tuple(lead) + (c // (r * r), h * r, w * r))


@defop(ref=lambda torch: torch.pixel_unshuffle,
       vjp=lambda g, downscale_factor: pixel_shuffle(g, downscale_factor), node="PixelUnshuffleBackward0",
       parse=_pixel_unshuffle_args,
       samples=lambda rng: [((_r(rng, 2, 2, 4, 6), 2), {}), ((_r(rng, 1, 3, 3), 3), {})])
def pixel_unshuffle(xp, input, *, downscale_factor):
    """Rearrange (*, C, H * r, W * r) into (*, C * r * r, H, W), the inverse of
    :func:`pixel_shuffle`."""
    r = downscale_factor
    *lead, c, h, w = input.shape
    x = input.reshape(tuple(lead) + (c, h // r, r, w // r, r))
    n = len(lead)
    x = x.transpose(tuple(range(n)) + (n, n + 2, n + 4, n + 1, n + 3))
    return xp.ascontiguousarray(x).reshape(tuple(lead) + (c * r * r, h // r, w // r))


def _channel_shuffle_args(input: Tensor, groups: int) -> tuple[tuple[Tensor], dict[str, Any]]:
    if input.ndim <= 2:
        raise RuntimeError(f"channel_shuffle expects input with > 2 dims, but got input with sizes "
                           f"{list(input.shape)}")
    g = operator.index(groups)
    if g <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{g}")
    if input.shape[1] % g:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {input.shape[1]} channels and "
                           f"{g} groups.")
    return (input,), {"groups": g}


@defop(ref=lambda torch: torch.channel_shuffle,
       vjp=lambda g, input_shape, groups: channel_shuffle(g, input_shape[1] // groups), node="ChannelShuffleBackward0",
       parse=_channel_shuffle_args,
       samples=lambda rng: [((_r(rng, 2, 6, 2, 2), 2), {}), ((_r(rng, 1, 6, 3), 3), {})])
def channel_shuffle(xp, input, *, groups):
    """Interleave the channels of ``groups`` groups: (N, g * k, *) seen as
    (N, g, k, *), transposed to (N, k, g, *)."""
    n, c = input.shape[:2]
    rest = input.shape[2:]
    x = input.reshape((n, groups, c // groups) + rest).swapaxes(1, 2)
    return xp.ascontiguousarray(x).reshape(input.shape)


# -- PyTorch's pooling functions ------------------------------------------------------------


def _pool_param(value: Any, nd: int, op: str, name: str, phrase: str) -> Ints:
    """An int or a tuple of one or ``nd`` ints, with PyTorch's message otherwise."""
    items = list(value) if isinstance(value, (tuple, list)) else [value]
    if len(items) not in (1, nd) or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                                            for v in items):
        raise RuntimeError(f"{op}: {name} {phrase} {_WORDS[nd]} ints")
    return tuple(int(v) for v in items) * (nd if len(items) == 1 else 1)


_AXES = {1: ("W",), 2: ("H", "W"), 3: ("T", "H", "W")}


def _check_pool(input: Tensor, nd: int, op: str, kernel: Ints, stride: Ints, padding: Ints, dilation: Ints,
                ceil_mode: bool, with_dilation: bool) -> None:
    """PyTorch's ``pooling_output_shape`` and ``pool2d_shape_check``/``pool3d_shape_check``."""
    if input.ndim not in (nd + 1, nd + 2):
        if not with_dilation and nd == 2:  # avg_pool2d's own wording
            raise RuntimeError(f"Expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but "
                               f"got:{list(input.shape)}")
        raise RuntimeError(f"non-empty {nd + 1}D or {nd + 2}D (batch mode) tensor expected for input")
    size = input.shape[input.ndim - nd:]
    out = []
    for i in range(nd):
        k, s, p, d = kernel[i], stride[i], padding[i], dilation[i]
        if s == 0:
            raise RuntimeError("stride should not be zero")
        if p < 0:
            raise RuntimeError(f"pad must be non-negative, but got pad: {p}")
        if p > ((k - 1) * d + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={p}, "
                               f"kernel_size={k} and dilation={d}")
        out.append(_pool_out(size[i], k, s, p, d, ceil_mode))
    axes = _AXES[nd]
    if any(k <= 0 for k in kernel):
        raise RuntimeError("kernel size should be greater than zero, but got "
                           + " ".join(f"k{a}: {k}" for a, k in zip(axes, kernel)))
    if any(s <= 0 for s in stride):
        raise RuntimeError("stride should be greater than zero, but got "
                           + " ".join(f"d{a}: {s}" for a, s in zip(axes, stride)))
    if with_dilation and any(d <= 0 for d in dilation):
        raise RuntimeError("dilation should be greater than zero, but got "
                           + " ".join(f"dilation{a}: {d}" for a, d in zip(axes, dilation)))
    if any(n == 0 for n in input.shape[input.ndim - nd - 1:]):
        raise RuntimeError(f"Expected {nd + 1}D or {nd + 2}D (batch mode) tensor with optional 0 dim batch size for "
                           f"input, but got:{list(input.shape)}")
    if any(o < 1 for o in out):
        c = input.shape[input.ndim - nd - 1]
        raise RuntimeError(f"Given input size: ({'x'.join(map(str, (c, *size)))}). Calculated output size: "
                           f"({'x'.join(map(str, (c, *out)))}). Output size is too small")


def _max_pool_attrs(nd: int, op: str, input: Tensor, kernel_size: Any, stride: Any, padding: Any, dilation: Any,
                    ceil_mode: bool) -> dict[str, Any]:
    """A max pool's arguments checked and completed (``stride`` defaults to the kernel)."""
    kernel = _pool_param(kernel_size, nd, op, "kernel_size", "must either be a single int, or a tuple of")
    st = kernel if stride is None or (isinstance(stride, (tuple, list)) and not stride) else _pool_param(
        stride, nd, op, "stride", "must either be omitted, a single int, or a tuple of")
    pad = _pool_param(padding, nd, op, "padding", "must either be a single int, or a tuple of")
    dil = _pool_param(dilation, nd, op, "dilation", "must be either a single int, or a tuple of")
    _check_pool(input, nd, op, kernel, st, pad, dil, bool(ceil_mode), True)
    if input.dtype.name == "bool":
        raise NotImplementedError(f"\"{op}\" not implemented for 'Bool'")
    return {"kernel_size": kernel, "stride": st, "padding": pad, "dilation": dil, "ceil_mode": bool(ceil_mode)}


def _max_pool_nd(nd: int, op: str, input: Tensor, kernel_size: Any, stride: Any, padding: Any, dilation: Any,
                 ceil_mode: bool, return_indices: bool) -> Any:
    attrs = _max_pool_attrs(nd, op, input, kernel_size, stride, padding, dilation, ceil_mode)
    out = _max_pool(input, **attrs)
    return (out, _max_pool_indices(input, **attrs)) if return_indices else out


def _max_pool1d_impl(input: Tensor, kernel_size: Any, stride: Any, padding: Any, dilation: Any, ceil_mode: bool,
                     return_indices: bool) -> Any:
    """A 1-D max pool as PyTorch runs it: a 2-D one over a unit height (so its node
    is ``SqueezeBackward1``), with ``max_pool1d``'s own checks."""
    if input.ndim not in (2, 3):
        raise RuntimeError("max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for "
                           f"input, but got:{list(input.shape)}")
    for name, v in (("kernel_size", kernel_size), ("stride", stride), ("padding", padding), ("dilation", dilation)):
        if isinstance(v, (tuple, list)) and len(v) not in ((0, 1) if name == "stride" else (1,)):
            raise RuntimeError(f"max_pool1d() {name} must be an int, list of ints or tuple of ints of size 1 but got "
                               f"size {len(v)}")
    k = _int_list(kernel_size, 1, "kernel_size", "max_pool1d")[0]
    p = _int_list(padding, 1, "padding", "max_pool1d")[0]
    if p > k // 2:
        raise RuntimeError(f"max_pool1d() padding should be at most half of kernel size, but got padding={p} and "
                           f"kernel_size={k}")
    s = k if stride is None or (isinstance(stride, (tuple, list)) and not stride) else \
        _int_list(stride, 1, "stride", "max_pool1d")[0]
    d = _int_list(dilation, 1, "dilation", "max_pool1d")[0]
    if not return_indices and not input.dtype.is_floating_point:  # PyTorch's max_pool1d_impl: floats only
        raise NotImplementedError(f"\"max_pool1d_impl\" not implemented for '{_legacy(input.dtype)}'")
    res = _max_pool_nd(2, "max_pool2d", input.unsqueeze(-2), (1, k), (1, s), (0, p), (1, d), ceil_mode,
                       return_indices)
    if return_indices:
        return res[0].squeeze(-2), res[1].squeeze(-2)
    return res.squeeze(-2)


def max_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """1-D max pooling of ``input`` (N, C, L) or (C, L).  See :func:`max_pool2d`."""
    return _max_pool1d_impl(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool1d_with_indices(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
                            dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False
                            ) -> tuple[Tensor, Tensor]:
    """:func:`max_pool1d` returning ``(values, indices)``."""
    return _max_pool1d_impl(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """2-D max pooling of ``input`` (N, C, H, W) or (C, H, W).

    Args:
        kernel_size: the window (an int or a pair).
        stride: the step between windows (default: the kernel size).
        padding: implicit -inf padding on both sides, at most half the window.
        dilation: the spacing of a window's elements.
        ceil_mode: round the output size up (a last, partial window).
        return_indices: also return each maximum's flat index in its input plane.

    Returns:
        Tensor, or ``(values, indices)``: the maxima; their gradient goes to
        the first maximum of each window.

    Example::

        >>> import agrad
        >>> agrad.max_pool2d(agrad.arange(16.0).reshape(1, 1, 4, 4), 2).tolist()
        [[[[5.0, 7.0], [13.0, 15.0]]]]
    """
    return _max_pool_nd(2, "max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool3d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
               ceil_mode: bool = False, return_indices: bool = False) -> Any:
    """3-D max pooling of ``input`` (N, C, D, H, W) or (C, D, H, W).  See :func:`max_pool2d`."""
    return _max_pool_nd(3, "max_pool3d", input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def _avg_pool_nd(nd: int, op: str, input: Tensor, kernel_size: Any, stride: Any, padding: Any, ceil_mode: bool,
                 count_include_pad: bool, divisor_override: Any) -> Tensor:
    kernel = _pool_param(kernel_size, nd, op, "kernel_size", "must either be a single int, or a tuple of")
    st = kernel if stride is None or (isinstance(stride, (tuple, list)) and not stride) else _pool_param(
        stride, nd, op, "stride", "must either be omitted, a single int, or a tuple of")
    pad = _pool_param(padding, nd, op, "padding", "must either be a single int, or a tuple of")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    _check_pool(input, nd, op, kernel, st, pad, (1,) * nd, bool(ceil_mode), False)
    return _avg_pool(input, kernel_size=kernel, stride=st, padding=pad, ceil_mode=bool(ceil_mode),
                     count_include_pad=bool(count_include_pad), divisor_override=divisor_override)


def avg_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    """1-D average pooling of ``input`` (N, C, L) or (C, L), as PyTorch runs it: a
    2-D pool over a unit height (node ``SqueezeBackward1``).  See
    ``agrad.nn.functional.avg_pool2d``."""
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2 to 3 dimensions, but got {input.ndim}-dimensional tensor for argument #1 "
                           "'self' (while checking arguments for avg_pool1d)")
    k = _pool_param(kernel_size, 1, "avg_pool1d", "kernel_size", "must either be a single int, or a tuple of")[0]
    s = k if stride is None or (isinstance(stride, (tuple, list)) and not stride) else _pool_param(
        stride, 1, "avg_pool1d", "stride", "must either be omitted, a single int, or a tuple of")[0]
    p = _pool_param(padding, 1, "avg_pool1d", "padding", "must either be a single int, or a tuple of")[0]
    out = _avg_pool_nd(2, "avg_pool2d", input.unsqueeze(-2), (1, k), (1, s), (0, p), ceil_mode, count_include_pad,
                       None)
    return out.squeeze(-2)


def _adaptive_size(input: Tensor, output_size: Any, nd: int, op: str) -> Ints:
    """``output_size`` as ``nd`` ints (None keeps the input's size), with PyTorch's checks."""
    items = list(output_size) if isinstance(output_size, (tuple, list)) else [output_size] * nd
    if len(items) != nd:
        if nd == 1:
            raise RuntimeError(f"{op}() argument 'output_size' should contain one int (got {len(items)})")
        raise RuntimeError(f"{op}: output_size must be {nd}")
    size = input.shape[input.ndim - nd:]
    out = tuple(int(size[i]) if v is None else operator.index(v) for i, v in enumerate(items))
    if any(o < 0 for o in out):
        shape = list(input.shape[:input.ndim - nd]) + list(out)
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(out)}: {shape}")
    return out


def _check_adaptive(input: Tensor, nd: int, op: str, colon: bool) -> None:
    """PyTorch's checks of an adaptive pool's input (its max and avg messages differ by a colon)."""
    if input.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"{op}(): Expected {nd + 1}D or {nd + 2}D tensor, but got{':' if colon else ''} "
                           f"{list(input.shape)}")
    for i in range(input.ndim - nd - 1, input.ndim):
        if input.shape[i] == 0:
            raise RuntimeError(f"{op}(): Expected input to have non-zero size for non-batch dimensions, but input "
                               f"has sizes {list(input.shape)} with dimension {i} being empty")
    if input.dtype.name not in ("float32", "float64", "float16", "bfloat16"):
        raise NotImplementedError(f"\"{op}\" not implemented for '{_legacy(input.dtype)}'")


def _legacy(dt: Any) -> str:
    return {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
            "bool": "Bool"}.get(dt.name, dt.name)


def _adaptive_avg_nd(nd: int, op: str, input: Tensor, output_size: Any) -> Tensor:
    _check_adaptive(input, nd, op, colon=False)
    out = _adaptive_size(input, output_size, nd, op)
    if all(o == 1 for o in out):  # PyTorch's shortcut: a mean (node MeanBackward1)
        return input.mean(dim=tuple(range(-nd, 0)), keepdim=True)
    return _resample(input, mode="area", size=out, align_corners=False, scales=None)


def _adaptive_max_nd(nd: int, op: str, input: Tensor, output_size: Any, return_indices: bool) -> Any:
    _check_adaptive(input, nd, op, colon=True)
    out = _adaptive_size(input, output_size, nd, op)
    values = _adaptive_max_pool(input, output_size=out)
    return (values, _adaptive_max_pool_indices(input, output_size=out)) if return_indices else values


def _check_1d(input: Tensor, op: str) -> None:
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2 to 3 dimensions, but got {input.ndim}-dimensional tensor for argument #1 "
                           f"'self' (while checking arguments for {op})")


def _one_size(output_size: Any, op: str) -> int:
    if isinstance(output_size, (tuple, list)):
        if len(output_size) != 1:
            raise RuntimeError(f"{op}() argument 'output_size' should contain one int (got {len(output_size)})")
        output_size = output_size[0]
    return operator.index(output_size)


def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:
    """Average ``input`` (N, C, L) or (C, L) over ``output_size`` adaptive windows
    (window i spans ``[floor(i*L/o), ceil((i+1)*L/o))``), as a 2-D pool over a unit
    height (PyTorch's node ``SqueezeBackward1``)."""
    _check_1d(input, "adaptive_avg_pool1d")
    o = _one_size(output_size, "adaptive_avg_pool1d")
    return _adaptive_avg_nd(2, "adaptive_avg_pool2d", input.unsqueeze(-2), (1, o)).squeeze(-2)


def adaptive_max_pool1d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """The max of ``input`` (N, C, L) or (C, L) over ``output_size`` adaptive
    windows.  ``torch.adaptive_max_pool1d`` returns ``(values, indices)``; so does
    this with ``return_indices``, and ``agrad.nn.functional``'s calls it so."""
    _check_1d(input, "adaptive_max_pool1d")
    o = _one_size(output_size, "adaptive_max_pool1d")
    res = _adaptive_max_nd(2, "adaptive_max_pool2d", input.unsqueeze(-2), (1, o), True)
    return res[0].squeeze(-2), res[1].squeeze(-2)
