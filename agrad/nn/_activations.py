"""Activations of ``agrad.nn.functional`` beyond those in ``_losses.py``.

Thin spellings of table ops (``agrad/_ops/_elementwise.py``), or composites of
them, so their gradients come from the primitives'.  A composite's node is
whatever its last primitive records (``hardswish`` ends in a MulBackward0
where PyTorch's fused kernel records HardswishBackward0); values, dtypes,
gradients and errors are PyTorch's.

The ``inplace=True`` forms and the ``_``-suffixed functions (``elu_``...) write
the result into ``input`` as the table ops' in-place methods do (see
``_apply``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from agrad import _backends, _creation, _dtype
from agrad._ops import _elementwise as _ew
from agrad._ops._inplace import inplace_method
from agrad._ops._reductions import argmax
from agrad._ops._reductions import softmax as _softmax
from agrad._ops._shape import _wrap_dim, narrow
from agrad._tensor import Tensor

__all__ = [
    "leaky_relu", "elu", "gelu", "silu", "softplus", "hardtanh", "relu6",
    "glu", "mish", "hardswish", "hardsigmoid", "softsign", "logsigmoid", "tanhshrink", "softshrink", "hardshrink",
    "threshold", "celu", "selu", "prelu", "rrelu", "softmin", "gumbel_softmax",
    "relu_", "elu_", "leaky_relu_", "hardtanh_", "celu_", "selu_", "rrelu_", "threshold_",
]


def _apply(fn: Callable[..., Tensor], input: Tensor, inplace: bool, *args: Any, **kwargs: Any) -> Tensor:
    # In place like the table ops' ``op_`` methods: computed on a copy of the old
    # value, written into ``input``, which takes the new grad_fn.
    if inplace:
        return inplace_method(fn, fn.__name__.lstrip("_") + "_")(input, *args, **kwargs)
    return fn(input, *args, **kwargs)


def _check_floating(input: Tensor, kernel: str) -> None:
    """PyTorch's error for an integer or bool input to a floating-only CPU kernel."""
    if not input.is_floating_point():
        raise NotImplementedError(f'"{kernel}" not implemented for \'{_dtype.SCALAR_TYPE_NAMES[input.dtype.name]}\'')


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``input`` where positive, else ``negative_slope * input``."""
    _check_floating(input, "leaky_relu_cpu")
    return _apply(_ew.leaky_relu, input, inplace, negative_slope=negative_slope)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``input`` where positive, else ``alpha * (exp(input) - 1)``."""
    _check_floating(input, "elu_cpu")
    return _apply(_ew.elu, input, inplace, alpha=alpha)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """Gaussian error linear unit (``approximate='none'`` or ``'tanh'``)."""
    _check_floating(input, "GeluKernelImpl")
    return _ew.gelu(input, approximate=approximate)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """``input * sigmoid(input)``."""
    _check_floating(input, "silu_cpu")
    return _apply(_ew.silu, input, inplace)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta * input)) / beta``, linear where ``beta * input > threshold``."""
    _check_floating(input, "softplus_cpu")
    return _ew.softplus(input, beta=beta, threshold=threshold)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """``input`` clamped to ``[min_val, max_val]``; no gradient passes *at* the
    bounds (PyTorch's HardtanhBackward0, unlike ``clamp``)."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    if not input.is_floating_point():  # PyTorch clamps integers too, keeping their dtype
        return _apply(_ew.clamp, input, inplace, int(min_val), int(max_val))
    return _apply(_ew.hardtanh, input, inplace, min_val=min_val, max_val=max_val)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """``min(max(input, 0), 6)``."""
    return hardtanh(input, 0.0, 6.0, inplace)


# -- gates and smooth activations ---------------------------------------------------


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """Gated linear unit: the first half of ``input`` along ``dim`` times the
    sigmoid of the second half.

    Example::

        >>> import agrad
        >>> agrad.nn.functional.glu(agrad.tensor([1.0, 2.0, 0.0, 0.0]))
        tensor([0.5000, 1.0000])
    """
    if input.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = _wrap_dim(dim, input.ndim)
    n = input.shape[d]
    if n % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {n}")
    _check_floating(input, "glu_cpu")
    return narrow(input, d, 0, n // 2) * _ew.sigmoid(narrow(input, d, n // 2, n // 2))


def _mish(input: Tensor) -> Tensor:
    return input * _ew.tanh(_ew.softplus(input))


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """``input * tanh(softplus(input))``."""
    _check_floating(input, "mish_cpu")
    return _apply(_mish, input, inplace)


def _hardswish(input: Tensor) -> Tensor:
    # x * relu6(x + 3) / 6: hardtanh passes no gradient at its bounds, so the
    # gradient is 0 at -3 and 1 at 3, PyTorch's hardswish_backward.
    return input * _ew.hardtanh(input + 3, min_val=0.0, max_val=6.0) / 6


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``0`` below -3, ``input`` above 3, ``input * (input + 3) / 6`` between."""
    _check_floating(input, "hardswish_cpu")
    return _apply(_hardswish, input, inplace)


def _hardsigmoid(input: Tensor) -> Tensor:
    return _ew.hardtanh(input + 3, min_val=0.0, max_val=6.0) / 6


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """``0`` below -3, ``1`` above 3, ``input / 6 + 1 / 2`` between (no gradient at ±3)."""
    _check_floating(input, "hardsigmoid_cpu")
    return _apply(_hardsigmoid, input, inplace)


def softsign(input: Tensor) -> Tensor:
    """``input / (1 + |input|)`` (integers compute in the default float dtype)."""
    return input / (_ew.abs(input) + 1)


def logsigmoid(input: Tensor) -> Tensor:
    """``log(sigmoid(input))``, with PyTorch's values: ``x - log1p(exp(x))`` below 0
    and ``-log1p(exp(-x))`` from 0 up, which never overflow.

    Each branch is the exact function on its side, so the derivatives of every
    order are continuous at 0 (a ``min(x, 0) - log1p(exp(-|x|))`` composite
    would get the second derivative there wrong); each branch sees its input
    clamped to its own side, so the one ``where`` discards stays finite.
    """
    _check_floating(input, "log_sigmoid_cpu")
    below = _ew.clamp(input, max=0.0)
    above = _ew.clamp(input, min=0.0)
    return _ew.where(input < 0, below - _ew.log1p(_ew.exp(below)), -_ew.log1p(_ew.exp(-above)))


def tanhshrink(input: Tensor) -> Tensor:
    """``input - tanh(input)``."""
    return input - _ew.tanh(input)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``input`` moved ``lambd`` towards 0, and 0 within ``[-lambd, lambd]``."""
    _check_floating(input, "softshrink_check")
    top = float(np.finfo(input._data.dtype).max)
    if not 0 <= lambd <= top:
        raise RuntimeError(f"lambda must be in range [0, {top:g}] for input dtype "
                           f"{_dtype.SCALAR_TYPE_NAMES[input.dtype.name]}, but found {lambd:g}")
    # x - clamp(x, -l, l): clamp passes the gradient at its bounds, so the
    # gradient is 0 on the closed interval, as PyTorch's softshrink_backward.
    return input - _ew.clamp(input, -lambd, lambd)


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``input``, except 0 within ``[-lambd, lambd]``."""
    _check_floating(input, "hardshrink_cpu")
    return _ew.where(_ew.logical_and(input >= -lambd, input <= lambd), 0.0, input)


def _threshold(input: Tensor, threshold: float, value: float) -> Tensor:
    return input.masked_fill(input <= threshold, value)


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``value`` where ``input <= threshold``, else ``input`` (its dtype kept; NaN stays NaN)."""
    return _apply(_threshold, input, inplace, threshold, value)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """In-place :func:`threshold`."""
    return _apply(_threshold, input, True, threshold, value)


def _celu(input: Tensor, alpha: float) -> Tensor:
    # The exp only sees min(x, 0) / alpha: where x > 0 the discarded branch is
    # exp(0), whose zero gradient (the clamp's) cannot turn into 0 * inf.
    return _ew.where(input > 0, input, _ew.expm1(_ew.clamp(input, max=0.0) / alpha) * alpha)


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``input`` where positive, else ``alpha * (exp(input / alpha) - 1)``."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError: alpha cannot be 0 for CELU")
    _check_floating(input, "elu_cpu")
    return _apply(_celu, input, inplace, alpha)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place :func:`celu`."""
    return celu(input, alpha, inplace=True)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _selu(input: Tensor) -> Tensor:
    return _ew.elu(input, alpha=_SELU_ALPHA) * _SELU_SCALE


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """``scale * elu(input, alpha)`` with the self-normalising constants."""
    _check_floating(input, "elu_cpu")
    return _apply(_selu, input, inplace)


def selu_(input: Tensor) -> Tensor:
    """In-place :func:`selu`."""
    return selu(input, inplace=True)


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """``input`` where positive, else ``weight * input``; ``weight`` has one
    element, or one per channel (dimension 1; a 1-D input is one channel)."""
    if weight.ndim > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = {weight.ndim}")
    n = weight.numel()
    channels = input.shape[1] if input.ndim >= 2 else 1
    if n != 1 and n != channels:
        raise RuntimeError("Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                           f"{n} and channel size = {channels}.")
    if weight.dtype is not input.dtype:
        raise RuntimeError(f"prelu: Type promoting not supported. Got {_dtype.SCALAR_TYPE_NAMES[input.dtype.name]} "
                           f"and {_dtype.SCALAR_TYPE_NAMES[weight.dtype.name]}")
    _check_floating(input, "prelu_cpu")
    w = weight.reshape(()) if n == 1 else weight.reshape((channels,) + (1,) * (input.ndim - 2))
    return _ew.where(input > 0, input, w * input)


def _rrelu_noise(input: Tensor, lower: float, upper: float) -> Tensor:
    """The random slopes of a training rrelu: uniform on ``[lower, upper]`` where
    ``input <= 0``, 1 elsewhere.  Drawn from agrad's default generator on the host
    (so ``agrad.manual_seed`` repeats them, on every device) and moved to ``input``'s device."""
    x = input._data
    slopes = _backends.transfer(_creation._rng(None).uniform(lower, upper, size=input.shape).astype(x.dtype),
                                input.device)
    with _backends.on(input.device):
        xp = _backends.array_module(x)
        return Tensor._make(xp.where(x <= 0, slopes, xp.ones((), x.dtype)))


def _rrelu(input: Tensor, lower: float, upper: float, training: bool) -> Tensor:
    if not training:
        return _ew.leaky_relu(input, negative_slope=(lower + upper) / 2)
    return input * _rrelu_noise(input, lower, upper)


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          inplace: bool = False) -> Tensor:
    """Randomised leaky ReLU: in training each non-positive element gets a slope
    drawn uniformly from ``[lower, upper]`` (the gradient is that slope); otherwise
    the fixed slope ``(lower + upper) / 2``."""
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    _check_floating(input, "rrelu_with_noise_out_cpu" if training else "leaky_relu_cpu")
    return _apply(_rrelu, input, inplace, lower, upper, training)


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False) -> Tensor:
    """In-place :func:`rrelu`."""
    return rrelu(input, lower, upper, training, inplace=True)


def relu_(input: Tensor) -> Tensor:
    """In-place ``relu``."""
    return input.relu_()


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place :func:`elu`."""
    return elu(input, alpha, inplace=True)


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """In-place :func:`leaky_relu`."""
    return leaky_relu(input, negative_slope, inplace=True)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """In-place :func:`hardtanh`."""
    return hardtanh(input, min_val, max_val, inplace=True)


# -- softmin and gumbel-softmax -------------------------------------------------------


def _implicit_dim(name: str, ndim: int, stacklevel: int) -> int:
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. "
                  "Change the call to include dim=X as an argument.", UserWarning, stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1  # PyTorch's legacy implicit choice


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """``softmax(-input)`` along ``dim`` (cast to ``dtype`` first when given)."""
    if dim is None:
        dim = _implicit_dim("softmin", input.ndim, _stacklevel)
    out = -input
    if dtype is not None:
        out = out.to(dtype)
    return _softmax(out, dim)


def gumbel_softmax(logits: Tensor, tau: float = 1, hard: bool = False, eps: float = 1e-10, dim: int = -1) -> Tensor:
    """A sample of the Gumbel-softmax distribution over ``dim``: ``softmax((logits + g) / tau)``
    with Gumbel(0, 1) noise ``g`` from agrad's default generator.  With ``hard=True``
    the value is the one-hot of its argmax and the gradient the soft sample's
    (``y_hard - y_soft.detach() + y_soft``)."""
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", UserWarning, stacklevel=2)
    dt = logits._data.dtype
    with np.errstate(divide="ignore"):  # an exponential sample of 0 is an infinite gumbel, as in PyTorch
        noise = -np.log(_creation._rng(None).exponential(size=logits.shape)).astype(dt)
    gumbels = (logits + Tensor._make(_backends.transfer(noise, logits.device))) / tau
    y_soft = _softmax(gumbels, dim)
    if not hard:
        return y_soft
    d = _wrap_dim(dim, logits.ndim)
    with _backends.on(logits.device):
        if logits.ndim == 0:
            hot = _backends.array_module(logits._data).ones((), dt)
        else:
            index = argmax(y_soft.detach(), dim=d, keepdim=True)._data
            xp = _backends.array_module(index)
            classes = xp.arange(logits.shape[d]).reshape((-1,) + (1,) * (logits.ndim - 1 - d))
            hot = (classes == index).astype(dt)
    return Tensor._make(hot) - y_soft.detach() + y_soft

