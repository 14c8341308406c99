"""Activations of ``agrad.nn.functional`` beyond those in ``_losses.py``.

Thin spellings of table ops (``agrad/_ops/_elementwise.py``), or composites of
them, so their gradients come from the primitives'.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agrad._ops import _elementwise as _ew
from agrad._ops._inplace import inplace_method
from agrad._tensor import Tensor

__all__ = ["leaky_relu", "elu", "gelu", "silu", "softplus", "hardtanh", "relu6"]


def _apply(fn: Callable[..., Tensor], input: Tensor, inplace: bool, **kwargs: Any) -> Tensor:
    # In place like the table ops' ``op_`` methods: computed on a copy of the old
    # value, written into ``input``, which takes the new grad_fn.
    return inplace_method(fn, fn.__name__ + "_")(input, **kwargs) if inplace else fn(input, **kwargs)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``input`` where positive, else ``negative_slope * input``."""
    return _apply(_ew.leaky_relu, input, inplace, negative_slope=negative_slope)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``input`` where positive, else ``alpha * (exp(input) - 1)``."""
    return _apply(_ew.elu, input, inplace, alpha=alpha)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """Gaussian error linear unit (``approximate='none'`` or ``'tanh'``)."""
    return _ew.gelu(input, approximate=approximate)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """``input * sigmoid(input)``."""
    return _apply(_ew.silu, input, inplace)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta * input)) / beta``, linear where ``beta * input > threshold``."""
    return _ew.softplus(input, beta=beta, threshold=threshold)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """``input`` clamped to ``[min_val, max_val]``; no gradient passes *at* the
    bounds (PyTorch's HardtanhBackward0, unlike ``clamp``)."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _apply(_ew.hardtanh, input, inplace, min_val=min_val, max_val=max_val)


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """``min(max(input, 0), 6)``."""
    return hardtanh(input, 0.0, 6.0, inplace)
