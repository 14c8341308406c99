"""Convolutions (N-d, transposed) as im2col views plus BLAS products.

Two table entries carry every convolution and all its derivatives:

* ``convolution`` (``torch.convolution``; node ``ConvolutionBackward0``), the
  forward of a plain or a transposed convolution with an optional bias;
* ``_convolution_backward_weight``, the gradient of a plain convolution's
  weight given its input and the output's gradient (node
  ``ConvolutionBackwardBackward0``).

They close under differentiation (Note [Convolution gradients]), so any
order of derivative runs on these two kernels.  ``conv1d`` … ``conv3d`` and
``conv_transpose1d`` … ``conv_transpose3d`` are thin functions over
``convolution``, as in PyTorch (where ``torch.conv2d`` records a
``ConvolutionBackward0`` too); ``agrad.nn.functional`` re-exports them.

The kernels (``_conv_forward``, ``_conv_transpose_forward``,
``_conv_weight_grad``) are functions of the array module ``xp`` and shared
with the pooling family (``_pool``), which uses the same windows
(``_windows``) and the same scatter-add (``_col2im``).
"""

from __future__ import annotations

import itertools
import math
import operator
import warnings
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from agrad import _dtype
from agrad._ambient import current_graph_task
from agrad._grad_mode import grad_enabled
from agrad._ops._common import _r
from agrad._ops._registry import REGISTRY, apply, defop
from agrad._ops._shape import constant_pad_nd
from agrad._tensor import Tensor

# The public names of this family (star-imported by ``agrad/__init__.py``).
__all__ = ["convolution", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"]

# Tensor methods of this family that are not one entry's ``methods=``
# (composites, aliases with another signature); bound by ``_methods.bind``.
# PyTorch's Tensor has no convolution method.
METHODS: dict[str, Any] = {}

Ints = tuple[int, ...]

# -- the kernels, on arrays ---------------------------------------------------------


def _padded(xp: Any, x: Any, lo: Sequence[int], hi: Sequence[int], value: Any = 0) -> Any:
    """``x`` with its last ``len(lo)`` dimensions padded by ``lo`` before and ``hi``
    after with ``value`` (a negative amount crops instead); ``x`` itself when
    there is nothing to do.  A filled array and one copy into it: ``xp.pad``
    does the same with several times the Python overhead."""
    nd = len(lo)
    lead = x.ndim - nd
    if any(a < 0 for a in lo) or any(b < 0 for b in hi):
        x = x[(slice(None),) * lead + tuple(slice(max(-a, 0), x.shape[lead + i] - max(-b, 0))
                                            for i, (a, b) in enumerate(zip(lo, hi)))]
        lo, hi = [max(a, 0) for a in lo], [max(b, 0) for b in hi]
    if not any(lo) and not any(hi):
        return x
    shape = x.shape[:lead] + tuple(x.shape[lead + i] + lo[i] + hi[i] for i in range(nd))
    out = xp.zeros(shape, dtype=x.dtype) if value == 0 else xp.full(shape, value, dtype=x.dtype)
    out[(slice(None),) * lead + tuple(slice(a, a + n) for a, n in zip(lo, x.shape[lead:]))] = x
    return out


def _windows(xp: Any, x: Any, kernel: Ints, stride: Ints, dilation: Ints, out: Ints) -> Any:
    """The sliding windows of ``x``'s last ``len(kernel)`` dimensions as one strided
    view (no copy), shaped ``(*lead, *kernel, *out)``: element ``[..., k, o]`` is
    ``x[..., o * stride + k * dilation]``.  The kernel offsets come before the
    output positions so that a copy of the view (im2col) is contiguous along the
    output's rows, which numpy copies fastest (Note [im2col layout])."""
    nd = len(kernel)
    st = x.strides
    strides = st[:-nd] + tuple(st[x.ndim - nd + i] * dilation[i] for i in range(nd)) \
        + tuple(st[x.ndim - nd + i] * stride[i] for i in range(nd))
    return xp.lib.stride_tricks.as_strided(x, x.shape[:-nd] + tuple(kernel) + tuple(out), strides)


def _col2im(xp: Any, cols: Any, size: Ints, kernel: Ints, stride: Ints, dilation: Ints) -> Any:
    """Sum ``cols`` (``(*lead, *kernel, *positions)``) into a zero array of spatial
    ``size``: the adjoint of ``_windows`` followed by a copy.  One strided add per
    kernel offset (a loop over ``prod(kernel)`` offsets, each adding every
    position at once); ``size`` must hold every window."""
    nd = len(kernel)
    lead = cols.shape[:cols.ndim - 2 * nd]
    pos = cols.shape[cols.ndim - nd:]
    out = xp.zeros(lead + tuple(size), dtype=cols.dtype)
    body = (slice(None),) * len(lead)
    for k in itertools.product(*(range(n) for n in kernel)):
        where = tuple(slice(k[i] * dilation[i], k[i] * dilation[i] + (pos[i] - 1) * stride[i] + 1, stride[i])
                      for i in range(nd))
        out[body + where] += cols[body + k]
    return out


def _out_size(size: int, k: int, s: int, lo: int, hi: int, d: int) -> int:
    return (size + lo + hi - d * (k - 1) - 1) // s + 1


# Note [im2col layout]
# ~~~~~~~~~~~~~~~~~~~~
# A convolution of x (N, C, *S) with w (Co, C/G, *K) copies the windows of
# the padded input into ``cols`` (N, G, C/G * prod(K), prod(O)) and runs one
# batched product ``w (G, Co/G, C/G*K) @ cols``: per image and group one GEMM,
# whose result is already the output in (N, Co, *O) order, with no transpose
# after it.  The copy is contiguous along the output's rows: numpy copies the
# (N, C, K, K, O, O) view in 18 ms for a 32x64x56x56 float32 input with a 3x3
# kernel, against 20 ms for the (C, K, K, N, O, O) order a single GEMM over
# the whole batch needs, and the two products take the same time (74 ms, one
# BLAS thread); the single GEMM's output would need a 2 ms transpose more.
# The weight's gradient is the same product the other way round, per image
# (``grad @ cols^T``), summed over the batch.
def _columns(xp: Any, x: Any, kernel: Ints, stride: Ints, dilation: Ints, lo: Sequence[int], hi: Sequence[int],
             out: Ints, groups: int) -> Any:
    """The im2col columns of ``x`` padded by ``lo``/``hi`` for windows at ``out``
    positions: (N, G, C/G * prod(K), prod(O)), contiguous."""
    n, c = x.shape[:2]
    cols = xp.ascontiguousarray(_windows(xp, _padded(xp, x, lo, hi), kernel, stride, dilation, out))
    return cols.reshape(n, groups, c // groups * math.prod(kernel), math.prod(out))


def _conv_forward(xp: Any, x: Any, w: Any, stride: Ints, lo: Sequence[int], hi: Sequence[int], dilation: Ints,
                  groups: int, share: bool = False) -> Any:
    """A plain convolution (cross-correlation) of ``x`` (N, C, *S) with ``w``
    (Co, C/groups, *K), padded by ``lo``/``hi``: im2col plus one product
    (Note [im2col layout]); ``share`` keeps the columns for the weight's
    gradient (Note [Shared columns])."""
    n = x.shape[0]
    co, kernel = w.shape[0], tuple(w.shape[2:])
    nd = len(kernel)
    out = tuple(_out_size(x.shape[2 + i], kernel[i], stride[i], lo[i], hi[i], dilation[i]) for i in range(nd))
    cols = _columns(xp, x, kernel, stride, dilation, lo, hi, out, groups)
    if share:
        _share_columns(x, (kernel, tuple(dilation), tuple(lo), groups, out), cols)
    return xp.matmul(w.reshape(groups, co // groups, cols.shape[2]), cols).reshape((n, co) + out)


def _flip_transpose(xp: Any, w: Any, groups: int) -> Any:
    """A transposed convolution's weight (C, Co/G, *K) as the plain convolution's
    weight (Co, C/G, *K) of the same map at stride 1: in/out swapped per group,
    the kernel flipped."""
    c, cog = w.shape[:2]
    kernel = w.shape[2:]
    wt = w.reshape((groups, c // groups, cog) + kernel).swapaxes(1, 2).reshape((groups * cog, c // groups) + kernel)
    return xp.flip(wt, axis=tuple(range(2, w.ndim)))


# Note [Transposed convolution kernels]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A transposed convolution (the input gradient of a plain one) is
# ``col2im(w^T @ x)``: one product into a (N, G, Co/G*K, L) array of columns,
# then one strided add per kernel offset.  At stride 1 it is also a plain
# convolution of x with the flipped, transposed kernel and padding
# ``d*(k-1) - p`` (negative: a crop), plus the output padding on the far
# side; that path copies K windows of x instead of adding K arrays of
# columns, and writes a column array C/Co times smaller: for the input
# gradient of a 64->64 3x3 convolution on 32x64x56x56 float32 it takes
# 18 + 74 ms against 91 + 57 ms (one BLAS thread).  So stride 1 takes the
# plain convolution; larger strides, whose plain form would multiply zeros
# inserted between the input's elements, take the columns.
def _conv_transpose_forward(xp: Any, x: Any, w: Any, stride: Ints, padding: Ints, output_padding: Ints,
                            dilation: Ints, groups: int, share: bool = False) -> Any:
    """A transposed convolution of ``x`` (N, C, *S) with ``w`` (C, Co/groups, *K)
    (Note [Transposed convolution kernels]); ``share``: Note [Shared columns]."""
    n, c = x.shape[:2]
    cog, kernel = w.shape[1], tuple(w.shape[2:])
    nd = len(kernel)
    if all(s == 1 for s in stride):
        lo = [dilation[i] * (kernel[i] - 1) - padding[i] for i in range(nd)]
        hi = [lo[i] + output_padding[i] for i in range(nd)]
        return _conv_forward(xp, x, _flip_transpose(xp, w, groups), stride, lo, hi, dilation, groups, share)
    size = tuple(x.shape[2:])
    out = tuple((size[i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (kernel[i] - 1) + output_padding[i] + 1
                for i in range(nd))
    cols = xp.matmul(w.reshape(groups, c // groups, cog * math.prod(kernel)).swapaxes(-1, -2),
                     x.reshape(n, groups, c // groups, math.prod(size)))
    full = tuple(max((size[i] - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1, padding[i] + out[i])
                 for i in range(nd))
    y = _col2im(xp, cols.reshape((n, groups * cog) + kernel + size), full, kernel, stride, dilation)
    return xp.ascontiguousarray(y[(slice(None), slice(None)) + tuple(slice(p, p + o) for p, o in zip(padding, out))])


# Note [Shared columns]
# ~~~~~~~~~~~~~~~~~~~~~
# At stride 1 the input's gradient is a convolution of the output's gradient
# g, padded by d*(k-1) - p, with the flipped kernel (Note [Transposed
# convolution kernels]): its im2col columns hold, for every input position
# and kernel offset, the element of g that the weight's gradient pairs with
# the input there (offsets flipped).  So the weight's gradient is also
# ``cols_g (Co*K, L) @ x^T (L, C)`` per image, with no im2col of x at all:
# ConvolutionBackward0 computes its two products from one copy of columns
# (for a 64->64 3x3 step on 32x64x56x56, the 18 ms copy of the input's
# windows is gone).  The node calls the input's vjp before the weight's; the
# input's keeps its columns here under g's array when the weight's vjp is
# sure to follow: in a backward that runs every node in full (no
# ``inputs=``: the task has no ``exec_info``), with grad mode off (no create
# graph) and a weight that requires grad.  The weight's kernel takes them out
# when it is called with the same array and geometry, so they live no longer
# than the node's backward (and never longer than g's array: a
# ``weakref.finalize`` drops the entry).  Anything else (``grad(..,
# inputs=)``, create graph, other strides, the weight's gradient alone)
# copies x's windows.
_SHARED: dict[int, tuple[Any, Any, Any]] = {}


def _share_columns(g: Any, key: tuple[Any, ...], cols: Any) -> None:
    """Keep ``cols`` (the columns of ``g`` padded as ``key`` says) for the weight's
    gradient (Note [Shared columns])."""
    try:
        ref = weakref.ref(g)
    except TypeError:  # an array type without weak references: recompute instead
        return
    ident = id(g)
    if ident not in _SHARED:
        weakref.finalize(g, _SHARED.pop, ident, None)
    _SHARED[ident] = (ref, key, cols)


def _shared_columns(g: Any, key: tuple[Any, ...]) -> Any:
    """The columns kept for ``g`` with geometry ``key``, removed; None if there are none."""
    entry = _SHARED.get(id(g))
    if entry is None or entry[0]() is not g or entry[1] != key:
        return None
    del _SHARED[id(g)]
    return entry[2]


def _conv_weight_grad(xp: Any, x: Any, grad: Any, kernel: Ints, stride: Ints, padding: Ints, dilation: Ints,
                      groups: int) -> Any:
    """The gradient of a plain convolution's weight: for each group,
    ``grad (Co/G, L) @ cols^T (L, C/G*K)`` per image, summed over the batch, or
    from the columns of ``grad`` the input's gradient kept (Note [Shared
    columns]).  The windows are taken at ``grad``'s spatial size, which may be
    smaller than the convolution's output (a transposed convolution's output
    padding)."""
    n, c = x.shape[:2]
    co = grad.shape[1]
    out = tuple(grad.shape[2:])
    nd = len(kernel)
    if all(s == 1 for s in stride):
        lo = tuple(dilation[i] * (kernel[i] - 1) - padding[i] for i in range(nd))
        cols_g = _shared_columns(grad, (tuple(kernel), tuple(dilation), lo, groups, tuple(x.shape[2:])))
        if cols_g is not None:  # (N, G, Co/G*K, L) @ (N, G, L, C/G), offsets flipped
            m = xp.matmul(cols_g, x.reshape(n, groups, c // groups, cols_g.shape[3]).swapaxes(-1, -2)).sum(axis=0)
            m = m.reshape((groups, co // groups) + tuple(kernel) + (c // groups,))
            m = xp.moveaxis(m, -1, 2)[(Ellipsis,) + (slice(None, None, -1),) * nd]
            return xp.ascontiguousarray(m).reshape((co, c // groups) + tuple(kernel))
    cols = _columns(xp, x, kernel, stride, dilation, padding, padding, out, groups)
    gw = xp.matmul(grad.reshape(n, groups, co // groups, cols.shape[3]), cols.swapaxes(-1, -2))
    return gw.sum(axis=0).reshape((co, c // groups) + tuple(kernel))


# -- arguments and PyTorch's errors -------------------------------------------------


def _int_list(value: Any, n: int, name: str, op: str, what: str = "convolution dimensions") -> Ints:
    """An int or a sequence of one or ``n`` ints as ``n`` ints, with PyTorch's errors."""
    items = list(value) if isinstance(value, (tuple, list)) else [value]
    for i, v in enumerate(items):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{op}(): argument '{name}' must be tuple of ints, but found element of type "
                            f"{type(v).__name__} at pos {i}")
    if len(items) == 1:
        items = items * n
    if len(items) != n:
        raise RuntimeError(f"expected {name} to be a single integer value or a list of {n} values to match the "
                           f"{what}, but got {name}={[int(v) for v in items]}")
    return tuple(int(v) for v in items)


def _type_name(dt: Any) -> str:
    """``torch.FloatTensor``: the legacy type name PyTorch's convolution errors print."""
    return "torch." + {"float32": "Float", "float64": "Double", "float16": "Half", "bfloat16": "BFloat16",
                       "int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
                       "bool": "Bool"}.get(dt.name, dt.name) + "Tensor"


def _scalar_name(dt: Any) -> str:
    """``float``, ``long int``: the C++ scalar names of PyTorch's bias error."""
    return {"float32": "float", "float64": "double", "float16": "c10::Half", "int64": "long int", "int32": "int",
            "int16": "short int", "int8": "signed char", "uint8": "unsigned char", "bool": "bool"}.get(dt.name, dt.name)


_DIM_NAMES = {1: ("",), 2: ("height", "width"), 3: ("depth", "height", "width")}


def _check_convolution(input: Tensor, weight: Tensor, bias: Tensor | None, stride: Ints, padding: Ints,
                       dilation: Ints, transposed: bool, output_padding: Ints, groups: int) -> None:
    """PyTorch's ``check_shape_forward`` and dtype checks, with its messages."""
    nd = weight.ndim - 2
    if groups <= 0:
        raise RuntimeError("non-positive groups is not supported")
    if any(p < 0 for p in padding):
        raise RuntimeError("negative padding is not supported")
    if any(p < 0 for p in output_padding):
        raise RuntimeError("negative output_padding is not supported")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    if any(d <= 0 for d in dilation):  # PyTorch's float32 (oneDNN) and other kernels word it apart
        if input.dtype is _dtype.float32:
            raise RuntimeError("non-positive dilation is not supported")
        if transposed:
            names = _DIM_NAMES.get(nd, tuple(str(i) for i in range(nd)))
            raise RuntimeError("dilation should be greater than zero, but got " + ", ".join(
                f"dilation{'_' + k if k else ''}: {v}" for k, v in zip(names, dilation)))
        raise RuntimeError(f"dilation should be greater than zero, but got {list(dilation)}")
    ws, xs = list(weight.shape), list(input.shape)
    if input.ndim != weight.ndim:
        raise RuntimeError(f"Expected {weight.ndim}-dimensional input for {weight.ndim}-dimensional weight {ws}, "
                           f"but got {input.ndim}-dimensional input of size {xs} instead")
    if ws[0] < groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be at least {groups} at dimension 0, but got "
                           f"weight of size {ws} instead")
    if ws[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
                           f"but got weight of size [{ws}] instead")
    if not transposed:
        if xs[1] != ws[1] * groups:
            raise RuntimeError(f"Given groups={groups}, weight of size {ws}, expected input{xs} to have "
                               f"{ws[1] * groups} channels, but got {xs[1]} channels instead")
        expected_bias = ws[0]
        padded = [xs[2 + i] + 2 * padding[i] for i in range(nd)]
        kernel = [(ws[2 + i] - 1) * dilation[i] + 1 for i in range(nd)]
        if any(p < k for p, k in zip(padded, kernel)):
            raise RuntimeError(f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). "
                               f"Kernel size: ({' x '.join(map(str, kernel))}). "
                               "Kernel size can't be greater than actual input size")
    else:
        if xs[1] != ws[0]:
            raise RuntimeError(f"Given transposed=1, weight of size {ws}, expected input{xs} to have {ws[0]} "
                               f"channels, but got {xs[1]} channels instead")
        expected_bias = ws[1] * groups
        if any(op >= s and op >= d for op, s, d in zip(output_padding, stride, dilation)):
            names = _DIM_NAMES.get(nd, tuple(str(i) for i in range(nd)))
            parts = ([f"output_padding{'_' + k if k else ''}: {v}" for k, v in zip(names, output_padding)]
                     + [f"stride{'_' + k if k else ''}: {v}" for k, v in zip(names, stride)]
                     + [f"dilation{'_' + k if k else ''}: {v}" for k, v in zip(names, dilation)])
            raise RuntimeError("output padding must be smaller than either stride or dilation, but got "
                               + " ".join(parts))
        out = [(xs[2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (ws[2 + i] - 1) + output_padding[i] + 1
               for i in range(nd)]
        if any(o <= 0 for o in out):
            raise RuntimeError(f"Given input size per channel: ({' x '.join(map(str, xs[2:]))}). Calculated output "
                               f"size per channel: ({' x '.join(map(str, out))}). Output size is too small")
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != expected_bias):
        prefix = "Given transposed=1, weight" if transposed else "Given weight"
        raise RuntimeError(f"{prefix} of size {ws}, expected bias to be 1-dimensional with {expected_bias} elements, "
                           f"but got bias of size {list(bias.shape)} instead")
    if input.dtype is not weight.dtype:
        if input.dtype is not _dtype.float32:  # PyTorch's other kernels check it later, in other words
            raise RuntimeError(f"expected scalar type {_type_name(input.dtype)[6:-6]} but found "
                               f"{_type_name(weight.dtype)[6:-6]}")
        raise RuntimeError(f"Input type ({_type_name(input.dtype)}) and weight type ({_type_name(weight.dtype)}) "
                           "should be the same or input should be a MKLDNN tensor and weight is a dense tensor")
    if bias is not None and bias.dtype is not input.dtype:
        raise RuntimeError(f"Input type ({_scalar_name(input.dtype)}) and bias type ({_scalar_name(bias.dtype)}) "
                           "should be the same")
    if input.dtype is _dtype.bool:
        raise NotImplementedError(f"\"slow_conv{nd}d_cpu\" not implemented for 'Bool'")


# ``convolution`` without a bias: a 0-d constant in the bias's place (Note
# [Absent bias]).  Read-only, shared by every call.
_NO_BIAS_ARRAY = np.zeros((), np.float32)
_NO_BIAS_ARRAY.flags.writeable = False
_NO_BIAS = Tensor._make(_NO_BIAS_ARRAY)


# Note [Absent bias]
# ~~~~~~~~~~~~~~~~~~
# PyTorch's ConvolutionBackward0 has three edges, the bias's None when there
# is no bias.  An entry's inputs are tensors, so ``convolution`` without a
# bias passes a shared 0-d constant in its place: the forward adds a bias
# only when it is 1-D (a real bias is, by the checks), and the constant never
# requires grad, so the node's third edge is None and the bias's vjp is never
# called, as in PyTorch.
def _convolution_args(input: Tensor, weight: Tensor, bias: Tensor | None, stride: Any, padding: Any,
                      dilation: Any, transposed: bool, output_padding: Any, groups: int
                      ) -> tuple[tuple[Tensor, ...], dict[str, Any]]:
    """``torch.convolution``'s arguments as the entry's inputs and attributes, checked."""
    if weight.ndim < 3:
        raise RuntimeError("weight should have at least three dimensions")
    nd = weight.ndim - 2
    stride = _int_list(stride, nd, "stride", "convolution")
    padding = _int_list(padding, nd, "padding", "convolution")
    dilation = _int_list(dilation, nd, "dilation", "convolution")
    output_padding = _int_list(output_padding, nd, "output_padding", "convolution")
    groups = operator.index(groups)
    transposed = bool(transposed)
    _check_convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    attrs = {"stride": stride, "padding": padding, "dilation": dilation, "transposed": transposed,
             "output_padding": output_padding, "groups": groups}
    return (input, weight, _NO_BIAS if bias is None else bias), attrs


# -- gradients -------------------------------------------------------------------------


# Note [Convolution gradients]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# For y = conv(x, w) (plain), the input's gradient is the transposed
# convolution of g with the same w (its adjoint in x), the weight's is
# ``_convolution_backward_weight(x, g)`` and the bias's the sum of g over all
# but the channels.  For y = conv_transpose(x, w) the roles swap: the input's
# gradient is the plain convolution of g with w, the weight's is
# ``_convolution_backward_weight(g, x)`` (the weight gradient of the plain
# convolution that maps g to x's shape).  The weight gradient W(x, g) is
# bilinear, and <v, W(x, g)> = <conv(x, v), g>: so its gradient in g is
# ``conv(x, v)`` and in x the transposed convolution of g with v.  The two
# entries thus close under differentiation.  Shapes need care where the
# stride does not divide the padded input evenly: several input sizes give
# the same output size, so the adjoint gets the output padding that restores
# x's size; the other way round, a transposed convolution's output padding
# (up to the dilation) may make the plain convolution's output larger than
# its input was, and the result is cropped to it.
def _crop(t: Tensor, shape: Sequence[int]) -> Tensor:
    """``t`` cut down to ``shape`` in its spatial dimensions (from the start)."""
    if tuple(t.shape[2:]) == tuple(shape[2:]):
        return t
    return t[(slice(None), slice(None)) + tuple(slice(0, s) for s in shape[2:])]


def _restoring_padding(shape: Sequence[int], g_shape: Sequence[int], kernel: Sequence[int], stride: Ints,
                       padding: Ints, dilation: Ints) -> Ints:
    """The output padding that makes the transposed convolution of a ``g_shape``
    gradient come out at ``shape``, the plain convolution's input shape."""
    return tuple(shape[2 + i] - ((g_shape[2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (kernel[i] - 1) + 1)
                 for i in range(len(stride)))


def _conv_input_grad(g: Tensor, weight: Tensor, input_shape: Sequence[int], stride: Ints, padding: Ints,
                     dilation: Ints, transposed: bool, groups: int) -> Tensor:
    """The gradient of a convolution's input (Note [Convolution gradients])."""
    if transposed:
        return _crop(_conv(g, weight, stride, padding, dilation, False, (0,) * len(stride), groups), input_shape)
    pad = _restoring_padding(input_shape, g.shape, weight.shape[2:], stride, padding, dilation)
    # Note [Shared columns]: the weight's gradient, next, may reuse this product's columns
    task = current_graph_task.get()
    share = (weight.requires_grad and task is not None and task.exec_info is None and not grad_enabled.get()
             and all(s == 1 for s in stride))
    return _conv(g, weight, stride, padding, dilation, True, pad, groups, share)


def _conv_weight_grad_vjp(g: Tensor, input: Tensor, weight_shape: Sequence[int], stride: Ints, padding: Ints,
                          dilation: Ints, transposed: bool, groups: int) -> Tensor:
    """The gradient of a convolution's weight (Note [Convolution gradients])."""
    kernel = tuple(weight_shape[2:])
    if transposed:
        return _convolution_backward_weight(g, input, kernel_size=kernel, stride=stride, padding=padding,
                                            dilation=dilation, groups=groups)
    return _convolution_backward_weight(input, g, kernel_size=kernel, stride=stride, padding=padding,
                                        dilation=dilation, groups=groups)


def _conv_bias_grad(g: Tensor) -> Tensor:
    return g.sum(dim=(0, *range(2, g.ndim)))


def _conv(x: Tensor, w: Tensor, stride: Ints, padding: Ints, dilation: Ints, transposed: bool,
          output_padding: Ints, groups: int, share: bool = False) -> Tensor:
    """``convolution`` without a bias, from a backward rule: the arguments are known
    good, and the output padding that restores a shape may reach the stride
    (Note [Convolution gradients]), which the public checks refuse.  ``share``:
    Note [Shared columns]."""
    attrs = {"stride": stride, "padding": padding, "dilation": dilation, "transposed": transposed,
             "output_padding": output_padding, "groups": groups, "share_columns": share}
    return apply(REGISTRY["convolution"], (x, w, _NO_BIAS), attrs)


def _conv_work(tensors: Sequence[Tensor], result: Tensor) -> int:
    """The backward's work (Note [Offload threshold]), counted as
    ``_linalg._product_work`` counts a matrix product's: each of the two products
    does ``w.shape[1] * prod(K)`` multiply-adds per element of the plain
    convolution's output (the transposed one's input), plus the im2col copies."""
    x, w = tensors[0], tensors[1]
    k = math.prod(w.shape[2:])
    touched = result._data.size + x._data.size * k + w._data.size
    return max(result._data.size, x._data.size) * w.shape[1] * k // 48 + touched // 8


def _conv_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    def call(x: Any, w: Any, b: Any = None, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
             transposed: bool = False, output_padding: Any = 0, groups: int = 1) -> tuple[tuple, dict]:
        nd = w.ndim - 2
        t = lambda v: [v] * nd if isinstance(v, int) else list(v)  # noqa: E731
        return (x, w, b, t(stride), t(padding), t(dilation), transposed, t(output_padding), groups), {}

    return [
        call(_r(rng, 2, 2, 5, 5), _r(rng, 3, 2, 3, 3), _r(rng, 3), padding=1),
        call(_r(rng, 1, 2, 6, 5), _r(rng, 2, 2, 2, 3), None, stride=(2, 1), dilation=(1, 2)),
        call(_r(rng, 2, 4, 4, 4), _r(rng, 4, 2, 3, 2), _r(rng, 4), stride=2, padding=(1, 0), groups=2),
        call(_r(rng, 2, 2, 7), _r(rng, 3, 2, 3), _r(rng, 3), stride=2, padding=1, dilation=2),
        call(_r(rng, 1, 2, 3, 3, 4), _r(rng, 2, 2, 2, 2, 2), _r(rng, 2), padding=(0, 1, 0)),
        call(_r(rng, 0, 2, 4, 4), _r(rng, 3, 2, 3, 3), _r(rng, 3)),
        # transposed: stride 1 (the plain-convolution path) and strided (columns)
        call(_r(rng, 2, 2, 3, 4), _r(rng, 2, 3, 3, 3), _r(rng, 3), padding=1, transposed=True),
        call(_r(rng, 1, 2, 3, 3), _r(rng, 2, 2, 3, 2), _r(rng, 4), stride=2, padding=(1, 0), transposed=True,
             output_padding=(1, 0), groups=2),
        call(_r(rng, 1, 2, 4), _r(rng, 2, 3, 3), None, stride=1, padding=1, dilation=2, transposed=True,
             output_padding=1),
        call(_r(rng, 1, 2, 2, 2, 3), _r(rng, 2, 1, 2, 2, 2), None, stride=(2, 1, 2), transposed=True),
    ]


@defop(ref=lambda torch: torch.convolution,
       vjp=(_conv_input_grad, _conv_weight_grad_vjp, _conv_bias_grad), node="ConvolutionBackward0",
       parse=_convolution_args, work=_conv_work, saved_as={"input": "input"}, samples=_conv_samples)
def convolution(xp, input, weight, bias, *, stride, padding, dilation, transposed, output_padding, groups,
                share_columns=False):
    """A plain or transposed N-d convolution (``torch.convolution``): ``input``
    (N, C, *S), ``weight`` (Co, C/groups, *K), or (C, Co/groups, *K) when
    ``transposed``, and an optional ``bias`` (Co,); every size argument has one
    entry per spatial dimension.  The functions ``conv1d`` … ``conv_transpose3d``
    take PyTorch's friendlier arguments.  ``share_columns`` (backward rules only)
    keeps a stride-1 transposed convolution's columns: Note [Shared columns]."""
    if transposed:
        out = _conv_transpose_forward(xp, input, weight, stride, padding, output_padding, dilation, groups,
                                      share_columns)
    else:
        out = _conv_forward(xp, input, weight, stride, padding, padding, dilation, groups)
    if bias.ndim:  # Note [Absent bias]
        out += bias.reshape((-1,) + (1,) * (out.ndim - 2))
    return out


def _weight_grad_ref(torch: Any) -> Any:
    def ref(input: Any, grad: Any, kernel_size: Any, stride: Any, padding: Any, dilation: Any, groups: int) -> Any:
        weight = input.new_empty((grad.shape[1], input.shape[1] // groups, *kernel_size))
        return torch.ops.aten.convolution_backward(grad, input, weight, None, stride, padding, dilation, False,
                                                   [0] * len(stride), groups, [False, True, False])[1]
    return ref


def _weight_grad_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    def call(x: Any, g: Any, kernel: Ints, stride: Ints, padding: Ints, dilation: Ints, groups: int = 1
             ) -> tuple[tuple, dict]:
        return (x, g), {"kernel_size": kernel, "stride": stride, "padding": padding, "dilation": dilation,
                        "groups": groups}

    return [
        call(_r(rng, 2, 2, 4, 4), _r(rng, 2, 3, 4, 4), (3, 3), (1, 1), (1, 1), (1, 1)),
        call(_r(rng, 1, 4, 5, 4), _r(rng, 1, 2, 2, 2), (2, 2), (2, 1), (0, 0), (1, 2), 2),
        call(_r(rng, 2, 2, 7), _r(rng, 2, 2, 4), (3,), (2,), (1,), (1,)),
    ]


@defop(ref=_weight_grad_ref,
       vjp=(lambda gg, grad, input_shape, kernel_size, stride, padding, dilation, groups:
            _conv(grad, gg, stride, padding, dilation, True,
                  _restoring_padding(input_shape, grad.shape, kernel_size, stride, padding, dilation), groups),
            lambda gg, input, grad_shape, stride, padding, dilation, groups:
            _crop(_conv(input, gg, stride, padding, dilation, False, (0,) * len(stride), groups), grad_shape)),
       node="ConvolutionBackwardBackward0", saved_as={"input": "input", "grad": "grad_output"},
       samples=_weight_grad_samples)
def _convolution_backward_weight(xp, input, grad, *, kernel_size, stride, padding, dilation, groups):
    """The gradient of a plain convolution's weight (of ``kernel_size``) given its
    ``input`` and the gradient ``grad`` of its output (Note [Convolution gradients])."""
    return _conv_weight_grad(xp, input, grad, tuple(kernel_size), stride, padding, dilation, groups)


# -- PyTorch's functions ---------------------------------------------------------------


def _batched(input: Tensor, nd: int, op: str) -> bool:
    """Whether ``input`` has a batch dimension (else it is one unbatched sample), with
    PyTorch's error for any other number of dimensions."""
    if input.ndim == nd + 2:
        return True
    if input.ndim == nd + 1:
        return False
    raise RuntimeError(f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to {op}, but got input of "
                       f"size: {list(input.shape)}")


def _same_padding(input: Tensor, weight: Tensor, nd: int, stride: Ints, dilation: Ints
                  ) -> tuple[Tensor, Ints]:
    """PyTorch's ``padding='same'``: half the dilated kernel on each side; where the
    total is odd, the input is first padded by one more on the far side (with
    PyTorch's warning), as ``conv_padding_same`` does."""
    if any(s != 1 for s in stride):
        raise RuntimeError("padding='same' is not supported for strided convolutions")
    lo = [dilation[i] * (weight.shape[2 + i] - 1) // 2 for i in range(nd)]
    extra = [dilation[i] * (weight.shape[2 + i] - 1) - 2 * lo[i] for i in range(nd)]
    if any(extra):
        warnings.warn("Using padding='same' with even kernel lengths and odd dilation may require a zero-padded "
                      "copy of the input be created", UserWarning, stacklevel=4)
        pad: list[int] = []
        for e in reversed(extra):  # constant_pad_nd lists the last dimension first
            pad += [0, e]
        input = constant_pad_nd(input, pad=tuple(pad), value=0)
    return input, tuple(lo)


def _conv_nd(nd: int, op: str, input: Tensor, weight: Tensor, bias: Tensor | None, stride: Any, padding: Any,
             dilation: Any, groups: int) -> Tensor:
    batched = _batched(input, nd, op)
    x = input if batched else input.unsqueeze(0)
    stride = _int_list(stride, nd, "stride", op)
    dilation = _int_list(dilation, nd, "dilation", op)
    if isinstance(padding, str):
        if padding == "valid":
            padding = 0
        elif padding == "same":
            x, padding = _same_padding(x, weight, nd, stride, dilation)
        else:
            raise RuntimeError(f"Invalid padding string: '{padding}'")
    out = convolution(x, weight, bias, stride, _int_list(padding, nd, "padding", op), dilation, False, (0,) * nd,
                      groups)
    return out if batched else out.squeeze(0)


def _conv_transpose_nd(nd: int, op: str, input: Tensor, weight: Tensor, bias: Tensor | None, stride: Any,
                       padding: Any, output_padding: Any, groups: int, dilation: Any) -> Tensor:
    batched = _batched(input, nd, op)
    x = input if batched else input.unsqueeze(0)
    if isinstance(padding, str):
        raise TypeError(f"{op}(): argument 'padding' must be tuple of ints, not str")
    out = convolution(x, weight, bias, _int_list(stride, nd, "stride", op), _int_list(padding, nd, "padding", op),
                      _int_list(dilation, nd, "dilation", op), True,
                      _int_list(output_padding, nd, "output_padding", op), groups)
    return out if batched else out.squeeze(0)


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> Tensor:
    """1-D convolution of ``input`` (N, C, L) or (C, L) with ``weight`` (Co, C/groups, K).

    ``padding`` is an int, a tuple, ``'valid'`` (none) or ``'same'`` (output
    as long as the input; stride 1 only).  See :func:`conv2d`.
    """
    return _conv_nd(1, "conv1d", input, weight, bias, stride, padding, dilation, groups)


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> Tensor:
    """2-D convolution (cross-correlation) of ``input`` (N, C, H, W) or (C, H, W)
    with ``weight`` (Co, C/groups, kH, kW) plus an optional ``bias`` (Co,).

    Args:
        input: the batch of images (or one image, unbatched).
        weight: the filters; each group of ``C/groups`` input channels feeds
            ``Co/groups`` output channels.
        bias: added to each output channel, or None.
        stride: an int or a pair.
        dilation: an int or a pair.
        padding: an int, a pair, ``'valid'`` (none) or ``'same'`` (the output as
            large as the input; stride 1 only).
        groups: the number of channel groups.

    Returns:
        Tensor: (N, Co, H', W'), or (Co, H', W') for an unbatched input.

    Example::

        >>> import agrad
        >>> x = agrad.ones(1, 1, 3, 3)
        >>> agrad.conv2d(x, agrad.ones(1, 1, 2, 2)).tolist()
        [[[[4.0, 4.0], [4.0, 4.0]]]]
    """
    return _conv_nd(2, "conv2d", input, weight, bias, stride, padding, dilation, groups)


def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1, groups: int = 1) -> Tensor:
    """3-D convolution of ``input`` (N, C, D, H, W) or (C, D, H, W) with ``weight``
    (Co, C/groups, kD, kH, kW).  See :func:`conv2d`."""
    return _conv_nd(3, "conv3d", input, weight, bias, stride, padding, dilation, groups)


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
                     output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Tensor:
    """1-D transposed convolution ("deconvolution") of ``input`` (N, C, L) or
    (C, L) with ``weight`` (C, Co/groups, K).  See :func:`conv_transpose2d`."""
    return _conv_transpose_nd(1, "conv_transpose1d", input, weight, bias, stride, padding, output_padding, groups,
                              dilation)


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
                     output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Tensor:
    """2-D transposed convolution of ``input`` (N, C, H, W) or (C, H, W) with
    ``weight`` (C, Co/groups, kH, kW): the gradient of :func:`conv2d` with
    respect to its input, as a map.

    Args:
        input: the batch (or one unbatched sample).
        weight: the filters, input channels first.
        bias: added to each output channel, or None.
        stride: that of the convolution this one transposes.
        padding: that of the convolution this one transposes.
        dilation: that of the convolution this one transposes.
        output_padding: added to one side of each output dimension (smaller
            than the stride or the dilation), to pick among the input sizes
            that the strided convolution maps to the same output size.
        groups: the number of channel groups.

    Returns:
        Tensor: (N, Co, H', W') with ``H' = (H-1)*stride - 2*padding +
        dilation*(kH-1) + output_padding + 1``.

    Example::

        >>> import agrad
        >>> agrad.conv_transpose2d(agrad.ones(1, 1, 2, 2), agrad.ones(1, 1, 2, 2)).tolist()
        [[[[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]]]
    """
    return _conv_transpose_nd(2, "conv_transpose2d", input, weight, bias, stride, padding, output_padding, groups,
                              dilation)


def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1, padding: Any = 0,
                     output_padding: Any = 0, groups: int = 1, dilation: Any = 1) -> Tensor:
    """3-D transposed convolution of ``input`` (N, C, D, H, W) or (C, D, H, W) with
    ``weight`` (C, Co/groups, kD, kH, kW).  See :func:`conv_transpose2d`."""
    return _conv_transpose_nd(3, "conv_transpose3d", input, weight, bias, stride, padding, output_padding, groups,
                              dilation)
