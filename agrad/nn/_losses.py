"""Activations, softmax, ``linear`` and losses of ``agrad.nn.functional``.

These are composites of table ops (``agrad/_ops/``): their gradients
come from the primitives', so they need no backward rule of their own.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agrad._ops._elementwise import exp, sigmoid, tanh
from agrad._ops._elementwise import relu as _relu
from agrad._ops._linalg import matmul
from agrad._ops._reductions import log_softmax as _log_softmax
from agrad._tensor import Tensor

__all__ = ["relu", "sigmoid", "tanh", "softmax", "log_softmax", "linear", "mse_loss", "nll_loss", "cross_entropy"]


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """Elementwise ``max(input, 0)``."""
    return input.relu_() if inplace else _relu(input)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """``log(softmax(input))`` along ``dim``, computed stably."""
    if dtype is not None:
        input = input.to(dtype)
    return _log_softmax(input, dim=_softmax_dim(input, dim))


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """Normalised exponentials along ``dim``."""
    return exp(log_softmax(input, dim, dtype=dtype))


def _softmax_dim(input: Tensor, dim: int | None) -> int:
    if dim is not None:
        return dim
    return 0 if input.ndim in (0, 1, 3) else 1  # PyTorch's legacy implicit choice


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias``."""
    out = matmul(input, weight.mT if weight.ndim > 1 else weight)
    return out if bias is None else out + bias


def _reduce(losses: Tensor, reduction: str) -> Tensor:
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    if reduction == "mean":
        return losses.mean()
    raise ValueError(f"{reduction} is not a valid value for reduction")


def mse_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
             reduction: str = "mean") -> Tensor:
    """Mean squared error between ``input`` and ``target``."""
    return _reduce((input - target) ** 2, reduction)


def _class_targets(input: Tensor, target: Tensor, ignore_index: int) -> tuple[np.ndarray, np.ndarray]:
    t = target._data if isinstance(target, Tensor) else np.asarray(target)
    if t.dtype.kind not in "iu":
        raise RuntimeError(f"expected scalar type Long but found {t.dtype}")
    n_classes = input.shape[1] if input.ndim > 1 else input.shape[0]
    valid = t != ignore_index
    if np.any((t[valid] < 0) | (t[valid] >= n_classes)):
        bad = t[valid][(t[valid] < 0) | (t[valid] >= n_classes)][0]
        raise IndexError(f"Target {bad} is out of bounds.")
    return np.where(valid, t, 0), valid


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average: Any = None,
             ignore_index: int = -100, reduce: Any = None, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of class ``target`` under log-probabilities ``input`` (N, C) or (C,)."""
    if input.ndim not in (1, 2):
        raise NotImplementedError("nll_loss supports (N, C) and (C,) inputs")
    batched = input.ndim == 2
    safe, valid = _class_targets(input, target, ignore_index)
    picked = input[np.arange(input.shape[0]), safe] if batched else input[safe]
    w = weight._data[safe] if weight is not None else np.ones(safe.shape, input._data.dtype)
    w = Tensor._make((w * valid).astype(input._data.dtype))
    losses = -(picked * w)
    if reduction == "mean":
        return losses.sum() / w.sum()
    return _reduce(losses, reduction)


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average: Any = None,
                  ignore_index: int = -100, reduce: Any = None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Cross entropy between logits ``input`` and class indices (or class probabilities) ``target``."""
    class_dim = 1 if input.ndim > 1 else 0
    logp = log_softmax(input, class_dim)
    if isinstance(target, Tensor) and target.is_floating_point():
        n = input.shape[class_dim]
        if label_smoothing:
            target = target * (1 - label_smoothing) + label_smoothing / n
        losses = -(logp * (target if weight is None else target * weight)).sum(dim=class_dim)
        return _reduce(losses, reduction)
    nll = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    if not label_smoothing:
        return nll
    # PyTorch's label smoothing for class indices: each sample also pays
    # eps/C times the (weighted) sum of -log p over all classes; "mean"
    # divides by the total weight of the non-ignored targets, like nll_loss.
    safe, valid = _class_targets(input, target, ignore_index)
    mask = Tensor._make(valid.astype(input._data.dtype))
    n_classes = input.shape[class_dim]
    per_class = logp if weight is None else logp * (weight if class_dim == 0 else weight.reshape(1, -1))
    smooth = -(per_class.sum(dim=class_dim) * mask) / n_classes
    if reduction == "mean":
        w = weight._data[safe] if weight is not None else np.ones(safe.shape, input._data.dtype)
        smooth = smooth.sum() / float((w * valid).sum())
    else:
        smooth = _reduce(smooth, reduction)
    return nll * (1 - label_smoothing) + smooth * label_smoothing
