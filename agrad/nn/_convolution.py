"""nn.functional's convolution, pooling and resampling functions, on the op table's conv and pool entries.

The convolutions, ``max_pool1d`` … ``max_pool3d``, ``avg_pool1d``,
``adaptive_avg_pool1d`` and the shuffles are the ``agrad.*`` functions
(``agrad/_ops/_conv.py``, ``agrad/_ops/_pool.py``), as PyTorch's ``F.conv2d``
is ``torch.conv2d``.  The rest are defined here over the same entries, with
PyTorch's argument handling and errors: ``interpolate`` and its deprecated
``upsample*`` spellings, ``unfold``/``fold``, ``lp_pool*`` (composites, as in
PyTorch) and ``max_unpool*``.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Sequence
from typing import Any

from agrad._ops._conv import (
    conv1d,
    conv2d,
    conv3d,
    conv_transpose1d,
    conv_transpose2d,
    conv_transpose3d,
)
from agrad._ops._elementwise import abs, relu, sign
from agrad._ops._pool import (
    _adaptive_avg_nd,
    _adaptive_max_nd,
    _avg_pool_nd,
    _check_1d,
    _col2im,
    _im2col,
    _legacy,
    _max_pool_nd,
    _max_unpool,
    _one_size,
    _resample,
    adaptive_avg_pool1d,
    avg_pool1d,
    channel_shuffle,
    max_pool1d,
    max_pool1d_with_indices,
    max_pool2d,
    max_pool3d,
    pixel_shuffle,
    pixel_unshuffle,
)
from agrad._tensor import Tensor

__all__ = [
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "max_pool1d", "max_pool2d", "max_pool3d", "max_pool1d_with_indices", "max_pool2d_with_indices",
    "max_pool3d_with_indices", "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
    "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d",
    "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices", "adaptive_max_pool3d_with_indices",
    "lp_pool1d", "lp_pool2d", "lp_pool3d", "max_unpool1d", "max_unpool2d", "max_unpool3d",
    "unfold", "fold", "interpolate", "upsample", "upsample_nearest", "upsample_bilinear",
    "pixel_shuffle", "pixel_unshuffle", "channel_shuffle",
]

# -- pooling -------------------------------------------------------------------------------


def max_pool2d_with_indices(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
                            dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False
                            ) -> tuple[Tensor, Tensor]:
    """:func:`max_pool2d` returning ``(values, indices)``: each maximum's flat index
    in its input plane (int64), which :func:`max_unpool2d` takes."""
    return _max_pool_nd(2, "max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
                            dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False
                            ) -> tuple[Tensor, Tensor]:
    """:func:`max_pool3d` returning ``(values, indices)``."""
    return _max_pool_nd(3, "max_pool3d", input, kernel_size, stride, padding, dilation, ceil_mode, True)


def avg_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """2-D average pooling of ``input`` (N, C, H, W) or (C, H, W).

    Args:
        kernel_size: the window's size, an int or a pair.
        stride: the window's step (default: ``kernel_size``).
        padding: zero padding on each side, at most half the window.
        ceil_mode: round the output size up (a last, partial window).
        count_include_pad: divide by the window's size including the padding
            (else by the number of input elements in it).
        divisor_override: divide every window by this instead.

    Example::

        >>> import agrad
        >>> agrad.nn.functional.avg_pool2d(agrad.arange(16.0).reshape(1, 1, 4, 4), 2).tolist()
        [[[[2.5, 4.5], [10.5, 12.5]]]]
    """
    return _avg_pool_nd(2, "avg_pool2d", input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                        divisor_override)


def avg_pool3d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """3-D average pooling of ``input`` (N, C, D, H, W) or (C, D, H, W).  See :func:`avg_pool2d`."""
    return _avg_pool_nd(3, "avg_pool3d", input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                        divisor_override)


def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:
    """Average ``input`` (N, C, H, W) or (C, H, W) over ``output_size`` adaptive
    windows per dimension (None keeps that dimension's size).

    Example::

        >>> import agrad
        >>> agrad.nn.functional.adaptive_avg_pool2d(agrad.arange(6.0).reshape(1, 2, 3), (1, 2)).tolist()
        [[[2.0, 3.0]]]
    """
    return _adaptive_avg_nd(2, "adaptive_avg_pool2d", input, output_size)


def adaptive_avg_pool3d(input: Tensor, output_size: Any) -> Tensor:
    """Average ``input`` (N, C, D, H, W) or (C, D, H, W) over adaptive windows."""
    return _adaptive_avg_nd(3, "adaptive_avg_pool3d", input, output_size)


def adaptive_max_pool1d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """The max of ``input`` (N, C, L) or (C, L) over ``output_size`` adaptive windows
    (and, with ``return_indices``, each maximum's index)."""
    _check_1d(input, "adaptive_max_pool1d")
    o = _one_size(output_size, "adaptive_max_pool1d")
    values, indices = _adaptive_max_nd(2, "adaptive_max_pool2d", input.unsqueeze(-2), (1, o), True)
    values, indices = values.squeeze(-2), indices.squeeze(-2)
    return (values, indices) if return_indices else values


def adaptive_max_pool2d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """The max of ``input`` (N, C, H, W) or (C, H, W) over adaptive windows."""
    return _adaptive_max_nd(2, "adaptive_max_pool2d", input, output_size, return_indices)


def adaptive_max_pool3d(input: Tensor, output_size: Any, return_indices: bool = False) -> Any:
    """The max of ``input`` (N, C, D, H, W) or (C, D, H, W) over adaptive windows."""
    return _adaptive_max_nd(3, "adaptive_max_pool3d", input, output_size, return_indices)


def adaptive_max_pool1d_with_indices(input: Tensor, output_size: Any, return_indices: bool = False
                                     ) -> tuple[Tensor, Tensor]:
    """:func:`adaptive_max_pool1d` returning ``(values, indices)``."""
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input: Tensor, output_size: Any, return_indices: bool = False
                                     ) -> tuple[Tensor, Tensor]:
    """:func:`adaptive_max_pool2d` returning ``(values, indices)``."""
    return _adaptive_max_nd(2, "adaptive_max_pool2d", input, output_size, True)


def adaptive_max_pool3d_with_indices(input: Tensor, output_size: Any, return_indices: bool = False
                                     ) -> tuple[Tensor, Tensor]:
    """:func:`adaptive_max_pool3d` returning ``(values, indices)``."""
    return _adaptive_max_nd(3, "adaptive_max_pool3d", input, output_size, True)


def _ntuple(value: Any, n: int) -> tuple[Any, ...]:
    """PyTorch's ``_pair``/``_triple``: a sequence as is, anything else repeated."""
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * n


def _lp_finish(out: Tensor, norm_type: float, window: int) -> Tensor:
    """PyTorch's ``(sign(out) * relu(abs(out))).mul(window).pow(1 / p)``: the p-th root
    of the window's sum of powers (negative sums, from odd p, clamp to 0)."""
    return (sign(out) * relu(abs(out))).mul(window).pow(1.0 / norm_type)


def _lp_pool(nd: int, input: Tensor, norm_type: float, kernel_size: Any, stride: Any, ceil_mode: bool) -> Tensor:
    pools = {1: (max_pool1d, lambda x, k, s, c: avg_pool1d(x, k, s, 0, c)),
             2: (max_pool2d, lambda x, k, s, c: avg_pool2d(x, k, s, 0, c)),
             3: (max_pool3d, lambda x, k, s, c: avg_pool3d(x, k, s, 0, c))}
    max_pool, avg_pool = pools[nd]
    if isinstance(norm_type, numbers.Real) and math.isinf(norm_type):
        out = max_pool(input.abs() if norm_type > 0 else -input.abs(), kernel_size, stride, 0, 1, ceil_mode)
        return out if norm_type > 0 else -out
    window = kernel_size if nd == 1 else math.prod(_ntuple(kernel_size, nd))
    return _lp_finish(avg_pool(input.pow(norm_type), kernel_size, stride, ceil_mode), norm_type, window)


def lp_pool1d(input: Tensor, norm_type: float, kernel_size: int, stride: Any = None, ceil_mode: bool = False
              ) -> Tensor:
    """1-D power-average pooling: ``(sum over the window of x**p) ** (1/p)``
    (``p = inf``: the max of ``|x|``), PyTorch's composite of an average pool."""
    return _lp_pool(1, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False
              ) -> Tensor:
    """2-D power-average pooling.  See :func:`lp_pool1d`."""
    return _lp_pool(2, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(input: Tensor, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False
              ) -> Tensor:
    """3-D power-average pooling.  See :func:`lp_pool1d`."""
    return _lp_pool(3, input, norm_type, kernel_size, stride, ceil_mode)


# -- max unpooling --------------------------------------------------------------------------


def _unpool_output_size(input: Tensor, kernel: tuple[int, ...], stride: tuple[int, ...], padding: tuple[int, ...],
                        output_size: Any) -> tuple[int, ...]:
    """PyTorch's ``_unpool_output_size``: the default, or ``output_size`` checked
    to be within a stride of it."""
    nd = len(kernel)
    default = [(input.shape[input.ndim - nd + d] - 1) * stride[d] + kernel[d] - 2 * padding[d] for d in range(nd)]
    if output_size is None:
        out = default
    else:
        out = list(output_size)
        if len(out) == nd + 2:
            out = out[2:]
        if len(out) != nd:
            raise ValueError(f"output_size should be a sequence containing {nd} or {nd + 2} elements, but it has a "
                             f"length of '{len(out)}'")
        for d in range(nd):
            lo, hi = default[d] - stride[d], default[d] + stride[d]
            if not lo < out[d] < hi:
                raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be between {lo} and {hi})')
    for d in range(nd):
        if out[d] < 0:
            raise ValueError("max_unpooling: output_size must contain non-negative spatial dimensions, but got "
                             f"output_size[{d}]={out[d]}")
    return tuple(int(o) for o in out)


def _max_unpool_checked(nd: int, input: Tensor, indices: Tensor, output_size: tuple[int, ...]) -> Tensor:
    """PyTorch's ``max_unpooling2d``/``3d`` checks, then the entry."""
    if indices.dtype.name != "int64":
        name = {"float32": "Float", "float64": "Double", "float16": "Half"}.get(indices.dtype.name)
        raise RuntimeError(f"elements in indices should be type int64 but got: {name or _legacy(indices.dtype)}")
    if tuple(indices.shape) != tuple(input.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor ({list(input.shape)}) "
                           f"but got indices tensor with shape: {list(indices.shape)}")
    if input.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"Input to max_unpooling{nd}d should be a {nd + 1}d or {nd + 2}d Tensor, but got a tensor "
                           f"with {input.ndim} dimensions.")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"max_unpool{nd}d\" not implemented for '{_legacy(input.dtype)}'")
    plane = math.prod(output_size)
    if indices.numel():
        data = indices._data
        bad = (data < 0) | (data >= plane)
        if bool(bad.any()):
            raise RuntimeError(f"Found an invalid max index: {int(data[bad].reshape(-1)[0])} (output volumes are of "
                               f"size {'x'.join(map(str, output_size))})")
    return _max_unpool(input, indices, output_size=output_size)


def max_unpool1d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 output_size: Any = None) -> Tensor:
    """The partial inverse of :func:`max_pool1d`: ``input`` put back at ``indices``
    (zeros elsewhere), run as PyTorch runs it, a 2-D unpool over a unit width."""
    kernel = _ntuple(kernel_size, 1)
    st = kernel if stride is None else _ntuple(stride, 1)
    out = _unpool_output_size(input, kernel, st, _ntuple(padding, 1), output_size)
    return _max_unpool_checked(2, input.unsqueeze(-1), indices.unsqueeze(-1), out + (1,)).squeeze(-1)


def max_unpool2d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 output_size: Any = None) -> Tensor:
    """The partial inverse of :func:`max_pool2d`: each value of ``input`` (N, C, H, W)
    or (C, H, W) put at its flat ``indices`` in a zero plane of ``output_size``
    (by default the size the pool was taken from).

    Example::

        >>> import agrad
        >>> F = agrad.nn.functional
        >>> x = agrad.tensor([[[[1.0, 2.0], [3.0, 4.0]]]])
        >>> out, idx = F.max_pool2d(x, 2, return_indices=True)
        >>> F.max_unpool2d(out, idx, 2).tolist()
        [[[[0.0, 0.0], [0.0, 4.0]]]]
    """
    kernel = _ntuple(kernel_size, 2)
    st = kernel if stride is None else _ntuple(stride, 2)
    out = _unpool_output_size(input, kernel, st, _ntuple(padding, 2), output_size)
    return _max_unpool_checked(2, input, indices, out)


def max_unpool3d(input: Tensor, indices: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 output_size: Any = None) -> Tensor:
    """The partial inverse of :func:`max_pool3d`.  See :func:`max_unpool2d`."""
    kernel = _ntuple(kernel_size, 3)
    st = kernel if stride is None else _ntuple(stride, 3)
    out = _unpool_output_size(input, kernel, st, _ntuple(padding, 3), output_size)
    return _max_unpool_checked(3, input, indices, out)


# -- unfold / fold ---------------------------------------------------------------------------


def _floats_only(input: Tensor, kernel: str) -> None:
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{_legacy(input.dtype)}'")


def _pair(value: Any, name: str) -> tuple[int, int]:
    items = _ntuple(value, 2)
    if len(items) != 2:
        raise RuntimeError(f"It is expected {name} equals to 2, but got size {len(items)}")
    return int(items[0]), int(items[1])


def _check_blocks(kernel: tuple[int, int], dilation: tuple[int, int], padding: tuple[int, int],
                  stride: tuple[int, int]) -> None:
    for name, v, bound in (("kernel", kernel, 0), ("dilation", dilation, 0), ("stride", stride, 0)):
        if v[0] <= bound or v[1] <= bound:
            raise RuntimeError(f"{name} should be greater than zero, but got {name}_height: {v[0]} {name}_width: "
                               f"{v[1]}")
    if padding[0] < 0 or padding[1] < 0:
        raise RuntimeError(f"padding should be non-negative, but got pad_height: {padding[0]} pad_width: "
                           f"{padding[1]}")


def unfold(input: Tensor, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1) -> Tensor:
    """Extract the sliding blocks of ``input`` (N, C, H, W) or (C, H, W) as columns
    (im2col): (N, C * kH * kW, L), L the number of blocks.

    Example::

        >>> import agrad
        >>> agrad.nn.functional.unfold(agrad.arange(9.0).reshape(1, 1, 3, 3), 2).tolist()
        [[[0.0, 1.0, 3.0, 4.0], [1.0, 2.0, 4.0, 5.0], [3.0, 4.0, 6.0, 7.0], [4.0, 5.0, 7.0, 8.0]]]
    """
    k, d, p, s = (_pair(kernel_size, "kernel_size"), _pair(dilation, "dilation"), _pair(padding, "padding"),
                  _pair(stride, "stride"))
    _check_blocks(k, d, p, s)
    if input.ndim not in (3, 4) or any(n == 0 for n in input.shape[input.ndim - 3:]):
        if input.ndim < 3:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-max(input.ndim, 1)}, "
                             f"{max(input.ndim, 1) - 1}], but got {input.ndim})")
        raise RuntimeError("Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other non-zero "
                           f"dimensions for input, but got: {list(input.shape)}")
    size = input.shape[-2:]
    blocks = [(size[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2)]
    if any(b < 1 for b in blocks):
        raise RuntimeError(f"Given input with spatial size ({size[0]}, {size[1]}), kernel_size=({k[0]}, {k[1]}), "
                           f"dilation=({d[0]}, {d[1]}), padding=({p[0]}, {p[1]}), calculated shape of the array of "
                           f"sliding blocks as ({blocks[0]}, {blocks[1]}), but its components must be at least one.")
    _floats_only(input, "im2col_out_cpu")
    return _im2col(input, kernel_size=k, dilation=d, padding=p, stride=s)


def fold(input: Tensor, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1
         ) -> Tensor:
    """Sum columns (N, C * kH * kW, L) or (C * kH * kW, L) into (N, C, *output_size)
    (col2im), overlapping blocks added: the adjoint of :func:`unfold`."""
    o = _pair(output_size, "output_size")
    k, d, p, s = (_pair(kernel_size, "kernel_size"), _pair(dilation, "dilation"), _pair(padding, "padding"),
                  _pair(stride, "stride"))
    _check_blocks(k, d, p, s)
    if input.ndim not in (2, 3) or any(n == 0 for n in input.shape[input.ndim - 2:]):
        raise RuntimeError("Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero "
                           f"dimensions for input, but got: {list(input.shape)}")
    ck, length = input.shape[-2], input.shape[-1]
    if ck % (k[0] * k[1]):
        raise RuntimeError("Expected size of input's dimension 1 to be divisible by the product of kernel_size, but "
                           f"got input.size(1)={ck} and kernel_size=({k[0]}, {k[1]}).")
    blocks = [(o[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2)]
    if blocks[0] * blocks[1] != length:
        raise RuntimeError(f"Given output_size=({o[0]}, {o[1]}), kernel_size=({k[0]}, {k[1]}), dilation=({d[0]}, "
                           f"{d[1]}), padding=({p[0]}, {p[1]}), stride=({s[0]}, {s[1]}), expected size of input's "
                           f"dimension 2 to match the calculated number of sliding blocks {blocks[0]} * {blocks[1]} = "
                           f"{blocks[0] * blocks[1]}, but got input.size(2)={length}.")
    _floats_only(input, "col2im_out_cpu")
    return _col2im(input, output_size=o, kernel_size=k, dilation=d, padding=p, stride=s)


# -- interpolation --------------------------------------------------------------------------

_INTERPOLATING = ("linear", "bilinear", "bicubic", "trilinear")
_MODE_DIMS = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}
_MODES = "nearest | linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact"


def interpolate(input: Tensor, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:
    """Resize ``input`` (N, C, *spatial) to ``size``, or by ``scale_factor``.

    Args:
        size: the output's spatial size (an int for every dimension, or one each).
        scale_factor: a multiplier per dimension (the output is
            ``floor(in * scale_factor)``); PyTorch's index formulas use it as
            given unless ``recompute_scale_factor``.
        mode: ``'nearest'``, ``'nearest-exact'``, ``'linear'`` (3-D input),
            ``'bilinear'``/``'bicubic'`` (4-D), ``'trilinear'`` (5-D) or
            ``'area'`` (adaptive average pooling).
        align_corners: for the interpolating modes, map the corner pixels'
            centres onto each other (default False).
        recompute_scale_factor: compute the scale from the output size.
        antialias: not supported (``NotImplementedError``).

    Example::

        >>> import agrad
        >>> x = agrad.tensor([[[1.0, 3.0]]])
        >>> agrad.nn.functional.interpolate(x, scale_factor=2, mode="linear").tolist()
        [[[1.0, 1.5, 2.5, 3.0]]]
    """
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    elif align_corners is None:
        align_corners = False
    nd = input.ndim - 2
    scales: Sequence[float] | None
    out: Sequence[int] | None
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is not None:
        scales = None
        if isinstance(size, (list, tuple)):
            if len(size) != nd:
                raise ValueError("Input and output must have the same number of spatial dimensions, but got input "
                                 f"with spatial dimensions of {list(input.shape[2:])} and output size of {size}. "
                                 "Please provide input tensor in (N, C, d1, d2, ...,dK) format and output size in "
                                 "(o1, o2, ...,oK) format.")
            if not all(isinstance(v, numbers.Integral) for v in size):
                raise TypeError("expected size to be one of int or Tuple[int] or Tuple[int, int] or "
                                f"Tuple[int, int, int], but got size with types {[type(v) for v in size]}")
            out = list(size)
        else:
            out = [size] * nd
    elif scale_factor is not None:
        out = None
        if isinstance(scale_factor, (list, tuple)):
            if len(scale_factor) != nd:
                raise ValueError("Input and scale_factor must have the same number of spatial dimensions, but got "
                                 f"input with spatial dimensions of {list(input.shape[2:])} and scale_factor of "
                                 f"shape {scale_factor}. Please provide input tensor in (N, C, d1, d2, ...,dK) "
                                 "format and scale_factor in (s1, s2, ...,sK) format.")
            scales = list(scale_factor)
        else:
            scales = [scale_factor] * nd
    else:
        raise ValueError("either size or scale_factor should be defined")
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if mode == "area" and out is None:
        recompute_scale_factor = True
    if recompute_scale_factor and scales is not None:
        out = [int(input.shape[2 + i] * scales[i]) for i in range(nd)]
        scales = None
    if antialias:
        if not (mode in ("bilinear", "bicubic", "lanczos") and input.ndim == 4):
            raise ValueError("Anti-alias option is restricted to bilinear, bicubic, and lanczos modes and requires a "
                             "4-D tensor as input")
        raise NotImplementedError("interpolate: antialias=True is not supported by agrad")
    if input.ndim not in (3, 4, 5) or mode not in ("nearest", "nearest-exact", "area", *_INTERPOLATING):
        if mode == "lanczos" and input.ndim == 4:
            raise NotImplementedError("interpolate: mode 'lanczos' is not supported by agrad")
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) for "
                                  f"the modes: {_MODES} (got {mode})")
    if mode in _MODE_DIMS and _MODE_DIMS[mode] != nd:
        if mode == "bicubic":
            raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) "
                                      f"for the modes: {_MODES} (got {mode})")
        raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs {_MODE_DIMS[mode] + 2}D input")
    if mode == "area":
        assert out is not None
        if nd == 1:
            return adaptive_avg_pool1d(input, out)
        return _adaptive_avg_nd(nd, f"adaptive_avg_pool{nd}d", input, out)
    if out is None:
        assert scales is not None
        out = [int(input.shape[2 + i] * scales[i]) for i in range(nd)]
    return _upsample(input, mode, tuple(int(o) for o in out), bool(align_corners),
                     None if scales is None else tuple(float(s) for s in scales))


def _upsample(input: Tensor, mode: str, size: tuple[int, ...], align_corners: bool,
              scales: tuple[float, ...] | None) -> Tensor:
    """PyTorch's ``upsample_*`` kernels' checks, then the ``resample`` entry."""
    nd = len(size)
    kernel = {"nearest": "upsample_nearest", "nearest-exact": "_upsample_nearest_exact"}.get(mode, f"upsample_{mode}")
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"{kernel.lstrip('_')}{nd}d\" not implemented for '{_legacy(input.dtype)}'")
    if any(o <= 0 for o in size) or any(n <= 0 for n in input.shape[2:]):
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input "
                           f"({', '.join(map(str, input.shape[2:]))}) output ({', '.join(map(str, size))})")
    if mode in ("linear", "bilinear", "trilinear", "bicubic") and input.shape[1] == 0:
        raise RuntimeError(f"Non-empty {nd + 2}D data tensor expected but got a tensor with sizes "
                           f"{list(input.shape)}")
    return _resample(input, mode="linear" if mode in ("bilinear", "trilinear") else mode, size=size,
                     align_corners=align_corners, scales=scales)


def upsample(input: Tensor, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
             align_corners: bool | None = None) -> Tensor:
    """Deprecated spelling of :func:`interpolate` (warns, as PyTorch's does)."""
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
    """Deprecated: :func:`interpolate` with ``mode='nearest'`` (warns)."""
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
    """Deprecated: :func:`interpolate` with ``mode='bilinear', align_corners=True`` (warns)."""
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)

