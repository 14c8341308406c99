"""Normalisation functions of nn.functional: batch_norm, instance_norm,
group_norm, rms_norm, local_response_norm and normalize (``layer_norm`` is in
``_layers.py``).

Composites of table ops: the statistics are means of the input, so the
gradients through them (training-mode batch norm, group norm...) come from the
primitives'.  The running statistics are updated as PyTorch's kernels update
them (Note [Running statistics]).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from agrad import _backends, _dtype
from agrad._grad_mode import no_grad
from agrad._ops._elementwise import rsqrt
from agrad._ops._shape import _wrap_dim, constant_pad_nd
from agrad._tensor import Tensor
from agrad.nn._distance import _pnorm

__all__ = ["batch_norm", "instance_norm", "group_norm", "rms_norm", "local_response_norm", "normalize"]


def _size_str(shape: Sequence[int]) -> str:
    return f"torch.Size({list(shape)})"


def _type_name(t: Tensor) -> str:
    return _dtype.SCALAR_TYPE_NAMES[t.dtype.name]


def _verify_batch_size(size: Sequence[int], shown: str) -> None:
    if int(np.prod([size[0], *size[2:]])) == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {shown}")


def _check_floating(input: Tensor, kernel: str) -> None:
    if not input.is_floating_point():
        raise NotImplementedError(f'"{kernel}" not implemented for \'{_type_name(input)}\'')


def _channel_shape(input: Tensor) -> tuple[int, ...]:
    """The shape that broadcasts a per-channel vector along dimension 1 of ``input``."""
    return (input.shape[1],) + (1,) * (input.ndim - 2)


# Note [Running statistics]
# ~~~~~~~~~~~~~~~~~~~~~~~~~
# In training, batch norm moves ``running_mean`` and ``running_var`` towards
# the batch's mean and *unbiased* variance: ``r = (1 - momentum) * r +
# momentum * stat``.  PyTorch's kernel writes the buffers' memory directly: the
# update records nothing and does not bump their version counter (a graph
# that saved a buffer in an earlier eval-mode step stays valid).  agrad writes
# their arrays in the same way, from statistics computed without recording.
def _update_running(stat: Tensor, new: Tensor) -> None:
    """Overwrite the buffer ``stat`` with ``new`` (Note [Running statistics])."""
    with _backends.on(stat.device):
        stat._data[...] = new._data.reshape(stat._data.shape)


def _check_params(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
                  weight: Tensor | None, bias: Tensor | None, training: bool) -> None:
    """PyTorch's checks of batch norm's parameters, in its order."""
    _check_floating(input, "batch_norm")
    channels = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var)):
        if t is not None:
            if t.numel() != channels:
                raise RuntimeError(f"{name} should contain {channels} elements not {t.numel()}")
        elif not training:
            raise RuntimeError(f"{name} must be defined in evaluation mode")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.numel() != channels:
            raise RuntimeError(f"{name} should contain {channels} elements not {t.numel()}")
    for t in (running_mean, running_var, weight, bias):
        if t is not None and t.dtype is not input.dtype:
            if input.dtype is _dtype.float32:
                raise RuntimeError("mixed dtype (CPU): expect parameter to have scalar type of Float")
            raise RuntimeError("mixed dtype (CPU): all inputs must share same datatype.")


def _affine(out: Tensor, weight: Tensor | None, bias: Tensor | None, shape: tuple[int, ...]) -> Tensor:
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def _batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None, weight: Tensor | None,
                bias: Tensor | None, training: bool, momentum: float, eps: float) -> Tensor:
    """``torch.batch_norm`` (without ``F.batch_norm``'s checks of its arguments)."""
    if input.ndim < 2:
        raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but got 1)")
    if input.numel() == 0:  # PyTorch's special case: a copy, still scaled by the first weight and bias
        out = input.clone()
        if weight is not None:
            out = out * weight[0]
        if bias is not None:
            out = out + bias[0]
        return out
    _check_params(input, running_mean, running_var, weight, bias, training)
    shape = _channel_shape(input)
    if not training:
        assert running_mean is not None and running_var is not None
        out = (input - running_mean.detach().reshape(shape)) * rsqrt(running_var.detach().reshape(shape) + eps)
        return _affine(out, weight, bias, shape)
    dims = (0, *range(2, input.ndim))
    centred = input - input.mean(dim=dims, keepdim=True)
    var = (centred * centred).mean(dim=dims, keepdim=True)
    out = centred * rsqrt(var + eps)
    if running_mean is not None and running_var is not None:
        n = input.numel() // input.shape[1]
        with no_grad():
            mean = input.mean(dim=dims)
            unbiased = var.reshape(-1) * (n / (n - 1))
            _update_running(running_mean, running_mean * (1 - momentum) + mean * momentum)
            _update_running(running_var, running_var * (1 - momentum) + unbiased * momentum)
    return _affine(out, weight, bias, shape)


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None, weight: Tensor | None = None,
               bias: Tensor | None = None, training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each channel (dimension 1) of ``input`` over the batch and spatial dimensions.

    In training, the batch's mean and biased variance normalise, and
    ``running_mean``/``running_var`` (if given) move towards the batch's mean and
    unbiased variance by ``momentum``, in place (Note [Running statistics]).
    Otherwise the running statistics normalise.  Then ``weight`` scales and
    ``bias`` shifts each channel.
    """
    if training:
        if input.ndim == 0:
            raise IndexError("tuple index out of range")
        _verify_batch_size(input.shape, _size_str(input.shape))
    if training and eps <= 0.0:
        raise ValueError(f"batch_norm eps must be positive during training, but got {eps}")
    if eps < 0.0:
        raise ValueError(f"batch_norm eps must be non-negative, but got {eps}")
    if (running_mean is None) != (running_var is None):
        raise ValueError("running_mean and running_var must either both be None or neither be None")
    return _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def _repeat(t: Tensor | None, n: int) -> Tensor | None:
    return None if t is None else t.repeat(n)


def instance_norm(input: Tensor, running_mean: Tensor | None = None, running_var: Tensor | None = None,
                  weight: Tensor | None = None, bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalise each channel of each sample over its spatial dimensions.

    With ``use_input_stats`` the sample's own statistics normalise and the running
    statistics (if given) move towards their mean over the batch; otherwise
    the running statistics normalise.  As PyTorch, this is batch norm of the
    input viewed as one sample of ``N * C`` channels.
    """
    if use_input_stats:
        if int(np.prod(input.shape[2:])) == 1:
            raise ValueError(f"Expected more than 1 spatial element when training, got input size "
                             f"{_size_str(input.shape)}")
    elif running_mean is None or running_var is None:
        raise RuntimeError("Expected running_mean and running_var to be defined when use_input_stats is false")
    if input.ndim < 2:
        raise IndexError("Dimension out of range (expected to be in range of [-1, 0], but got 1)")
    b, c = input.shape[0], input.shape[1]
    mean_rep, var_rep = _repeat(running_mean, b), _repeat(running_var, b)
    out = _batch_norm(input.reshape(1, b * c, *input.shape[2:]), mean_rep, var_rep, _repeat(weight, b),
                      _repeat(bias, b), use_input_stats, momentum, eps)
    if use_input_stats and b * c and running_mean is not None and running_var is not None:
        assert mean_rep is not None and var_rep is not None
        # Unlike batch norm's, PyTorch's instance norm copies the averaged
        # statistics back with an in-place copy, which bumps their version.
        with no_grad():
            running_mean.copy_(mean_rep.reshape(b, c).mean(dim=0))
            running_var.copy_(var_rep.reshape(b, c).mean(dim=0))
    return out.reshape(input.shape)


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Normalise each of ``num_groups`` groups of channels of each sample (biased
    variance), then scale and shift each channel by ``weight`` and ``bias``."""
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.ndim}")
    n, c = input.shape[0], input.shape[1]
    stats_shape = [n * c // num_groups, num_groups, *input.shape[2:]]
    _verify_batch_size(stats_shape, str(stats_shape))
    if c % num_groups:
        raise RuntimeError("Expected number of channels in input to be divisible by num_groups, but got input of "
                           f"shape {list(input.shape)} and num_groups={num_groups}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (t.ndim != 1 or t.numel() != c):
            raise RuntimeError(f"Expected {name} to be a vector of size equal to the number of channels in input, "
                               f"but got {name} of shape {list(t.shape)} and input of shape {list(input.shape)}")
    _check_floating(input, "GroupNormKernelImpl")
    grouped = input.reshape(n, num_groups, c // num_groups * int(np.prod(input.shape[2:])))
    centred = grouped - grouped.mean(dim=2, keepdim=True)
    var = (centred * centred).mean(dim=2, keepdim=True)
    out = (centred * rsqrt(var + eps)).reshape(input.shape)
    return _affine(out, weight, bias, _channel_shape(input))


def rms_norm(input: Tensor, normalized_shape: Sequence[int], weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    """Divide by the root mean square over the trailing ``normalized_shape``
    dimensions (plus ``eps``: the dtype's machine epsilon when None), then scale by ``weight``."""
    if not isinstance(normalized_shape, (tuple, list)):
        raise TypeError("rms_norm(): argument 'normalized_shape' (position 2) must be tuple of ints, not "
                        f"{type(normalized_shape).__name__}")
    shape = tuple(int(s) for s in normalized_shape)
    k = len(shape)
    if input.ndim < k or tuple(input.shape[input.ndim - k:]) != shape:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*{', '.join(str(s) for s in shape)}], but got input of size{list(input.shape)}")
    if weight is not None and tuple(weight.shape) != shape:
        raise RuntimeError(f"Expected weight to be of same shape as normalized_shape, but got weight of shape "
                           f"{list(weight.shape)} and normalized_shape = {list(shape)}")
    _check_floating(input, "rms_norm")
    if eps is None:
        eps = float(np.finfo(input._data.dtype).eps)
    dims = tuple(range(input.ndim - k, input.ndim))
    out = input * rsqrt((input * input).mean(dim=dims, keepdim=True) + eps)
    return out if weight is None else out * weight


def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> Tensor:
    """Divide by ``(k + alpha * mean of the squares over a window of size channels) ** beta``.

    The window of channel ``c`` is ``[c - size // 2, c + (size - 1) // 2]``,
    zero-padded at the ends and always divided by ``size``, as PyTorch's
    average pooling does.  Its sums are differences of a cumulative sum over
    the channels, so the cost does not grow with ``size``.
    """
    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality                          input (got {input.ndim} "
                         "dimensions)")
    if input.numel() == 0:
        return input
    # One extra zero in front: the cumulative sum then starts at 0, and the
    # window of channel c is cum[c + size] - cum[c].
    squares = constant_pad_nd(input * input, (0, 0) * (input.ndim - 2) + (size // 2 + 1, (size - 1) // 2))
    cum = squares.cumsum(dim=1)
    c = input.shape[1]
    window = cum.narrow(1, size, c) - cum.narrow(1, 0, c)
    return input / (window * (alpha / size) + k) ** beta


def normalize(input: Tensor, p: float = 2.0, dim: Any = 1, eps: float = 1e-12, out: Tensor | None = None) -> Tensor:
    """``input`` divided by its ``p``-norm over ``dim``, clamped to at least ``eps``.

    Example::

        >>> import agrad
        >>> agrad.nn.functional.normalize(agrad.tensor([[3.0, 4.0]]))
        tensor([[0.6000, 0.8000]])
    """
    if not input.is_floating_point():
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. "
                           f"Got {_type_name(input)}")
    if isinstance(dim, (tuple, list)):
        dims: Any = tuple(_wrap_dim(d, input.ndim) for d in dim)
    else:
        dims = _wrap_dim(dim, input.ndim)
    result = input / _pnorm(input, p, dims, keepdim=True).clamp(min=eps).expand_as(input)
    if out is None:
        return result
    if result.requires_grad:
        raise RuntimeError("div(): functions with out=... arguments don't support automatic differentiation, but "
                           "one of the arguments requires grad.")
    return out.copy_(result)
