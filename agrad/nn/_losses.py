"""Activations, softmax, ``linear`` and losses of ``agrad.nn.functional``.

These are composites of table ops (``agrad/_ops/``): their gradients
come from the primitives', so they need no backward rule of their own.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from agrad import _backends, _dtype
from agrad._ops._common import _grids
from agrad._ops._elementwise import exp, log, sigmoid, tanh, where
from agrad._ops._elementwise import relu as _relu
from agrad._ops._linalg import addmm, matmul
from agrad._ops._reductions import log_softmax as _log_softmax
from agrad._ops._reductions import softmax as _softmax
from agrad._tensor import Tensor

__all__ = [
    "relu", "sigmoid", "tanh", "softmax", "log_softmax", "linear", "mse_loss", "nll_loss", "cross_entropy",
    "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
]


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
    if dtype is not None:
        input = input.to(dtype)
    return _softmax(input, _softmax_dim(input, dim))


def _softmax_dim(input: Tensor, dim: int | None) -> int:
    if dim is not None:
        return dim
    return 0 if input.ndim in (0, 1, 3) else 1  # PyTorch's legacy implicit choice


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias``."""
    if bias is not None and input.ndim == 2 and weight.ndim == 2:
        return addmm(bias, input, weight.mT)  # Note [Linear as one node]
    out = matmul(input, weight.mT if weight.ndim > 1 else weight)
    return out if bias is None else out + bias


def _check_reduction(reduction: str) -> None:
    if reduction not in ("none", "sum", "mean"):
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _reduce(losses: Tensor, reduction: str) -> Tensor:
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    if reduction == "mean":
        return losses.mean()
    raise ValueError(f"{reduction} is not a valid value for reduction")


def _warn_if_broadcast(input: Tensor, target: Tensor) -> None:
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(f"Using a target size ({_size_str(target)}) that is different to the input size "
                      f"({_size_str(input)}). This will likely lead to incorrect results due to broadcasting. "
                      "Please ensure they have the same size.", UserWarning, stacklevel=3)


def _reduce_weighted(losses: Tensor, input: Tensor, weight: Tensor | None, reduction: str,
                     mean_by_weight: bool) -> Tensor:
    # PyTorch's pointwise losses with ``weight``: "mean" divides by the total weight
    # (mse, l1) or by the element count (huber).
    if weight is None:
        return _reduce(losses, reduction)
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError("Weights and input must have the same size.")
    losses = losses * weight
    if reduction == "mean" and mean_by_weight:
        return losses.sum() / weight.sum()
    if reduction not in ("none", "sum", "mean"):
        raise ValueError(f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', 'sum'.")
    return _reduce(losses, reduction)


def mse_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
             reduction: str = "mean", weight: Tensor | None = None) -> Tensor:
    """Mean squared error between ``input`` and ``target`` (optionally weighted elementwise)."""
    _warn_if_broadcast(input, target)
    if weight is None:
        _check_reduction(reduction)
    return _reduce_weighted((input - target) ** 2, input, weight, reduction, mean_by_weight=True)


def _class_targets(input: Tensor, target: Tensor, ignore_index: int) -> tuple[Any, Any]:
    """The class indices with ignored ones replaced by 0, and the mask of the others
    (arrays on ``input``'s device; a target given as a list or array is moved there)."""
    t = target._data if isinstance(target, Tensor) else _backends.transfer(np.asarray(target), input.device)
    if t.dtype.name not in ("int64", "uint8"):
        raise RuntimeError("expected target dtype to be Long or Byte, but got "
                           f"{_dtype.SCALAR_TYPE_NAMES[t.dtype.name]}")
    xp = _backends.array_module(t)
    n_classes = input.shape[1] if input.ndim > 1 else input.shape[0]
    with _backends.on(input.device):  # raw array kernels: on the data's device
        valid = xp.asarray(t != ignore_index)  # an array when t is 0-d too (numpy gives a scalar)
        bad = valid & ((t < 0) | (t >= n_classes))
        if bool(xp.any(bad)):
            raise IndexError(f"Target {int(t[bad].reshape(-1)[0])} is out of bounds.")
        return xp.where(valid, t, 0), valid


def _check_target_shape(shape: tuple[int, ...], target: tuple[int, ...]) -> None:
    """PyTorch's checks of class indices ``target`` against ``input``'s ``shape``, in its order."""
    if len(shape) > 1 and target and target[0] != shape[0]:
        raise ValueError(f"Expected input batch_size ({shape[0]}) to match target batch_size ({target[0]}).")
    if len(shape) <= 2 and len(target) > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    expected = (shape[0], *shape[2:])
    if len(shape) > 2 and target != expected:
        raise RuntimeError(f"Expected target size {list(expected)}, got {list(target)}")


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average: Any = None,
             ignore_index: int = -100, reduce: Any = None, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of class ``target`` under log-probabilities ``input``.

    ``input`` is (C,), (N, C) or (N, C, d1, ..., dK) with ``target`` (), (N,) or (N, d1, ..., dK).
    """
    if input.ndim == 0:
        raise ValueError("Expected 1 or more dimensions (got 0)")
    _not_differentiable("nll_loss_forward", weight=weight)
    _check_target_shape(input.shape, tuple(target.shape if isinstance(target, Tensor) else np.shape(target)))
    safe, valid = _class_targets(input, target, ignore_index)
    if input.ndim == 1:
        picked = input[safe]
    else:
        with _backends.on(input.device):
            grid = _grids(_backends.array_module(safe), safe.shape)
        picked = input[(grid[0], safe, *grid[1:])]
    w = Tensor._make(_target_weights(input, weight, safe, valid))
    losses = -(picked * w)
    if reduction == "mean":
        return losses.sum() / w.sum()
    return _reduce(losses, reduction)


def _target_weights(input: Tensor, weight: Tensor | None, safe: Any, valid: Any) -> Any:
    """Each target's class weight (1 without ``weight``), 0 where it is ignored; ``input``'s dtype."""
    dt = input._data.dtype
    with _backends.on(input.device):
        return valid.astype(dt) if weight is None else (weight._data[safe] * valid).astype(dt)


def _class_weight(weight: Tensor, input: Tensor) -> Tensor:
    # Class weights broadcast along the class dimension (1, or 0 for an unbatched input).
    if input.ndim < 2:
        return weight
    return weight.reshape(1, -1, *([1] * (input.ndim - 2)))


# PyTorch's names of the integer dtypes in its messages.
_TYPE_NAMES = {_dtype.int64: "Long", _dtype.int32: "Int", _dtype.int16: "Short", _dtype.int8: "Char",
               _dtype.uint8: "Byte", _dtype.bool: "Bool"}


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average: Any = None,
                  ignore_index: int = -100, reduce: Any = None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Cross entropy between logits ``input`` and class indices (or class probabilities) ``target``."""
    class_dim = 1 if input.ndim > 1 else 0
    logp = log_softmax(input, class_dim)
    if isinstance(target, Tensor) and target.shape == input.shape and not target.is_floating_point():
        raise RuntimeError("Expected floating point type for target with class probabilities, got "
                           f"{_TYPE_NAMES.get(target.dtype, target.dtype)}")
    if isinstance(target, Tensor) and target.shape == input.shape and target.is_floating_point():
        n = input.shape[class_dim]
        if label_smoothing:
            target = target * (1 - label_smoothing) + label_smoothing / n
        losses = -(logp * (target if weight is None else target * _class_weight(weight, input))).sum(dim=class_dim)
        return _reduce(losses, reduction)
    nll = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    if not label_smoothing:
        return nll
    # PyTorch's label smoothing for class indices: each sample also pays
    # eps/C times the (weighted) sum of -log p over all classes; "mean"
    # divides by the total weight of the non-ignored targets, like nll_loss.
    safe, valid = _class_targets(input, target, ignore_index)
    with _backends.on(input.device):
        mask = Tensor._make(valid.astype(input._data.dtype))
    n_classes = input.shape[class_dim]
    per_class = logp if weight is None else logp * _class_weight(weight, input)
    smooth = -(per_class.sum(dim=class_dim) * mask) / n_classes
    if reduction == "mean":
        smooth = smooth.sum() / Tensor._make(_target_weights(input, weight, safe, valid)).sum()
    else:
        smooth = _reduce(smooth, reduction)
    return nll * (1 - label_smoothing) + smooth * label_smoothing


# -- regression and binary losses --------------------------------------------------


def _abs(x: Tensor) -> Tensor:
    # |x| from relu, whose gradient at 0 is 0 like PyTorch's sign(0).
    return _relu(x) + _relu(-x)


def l1_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
            reduction: str = "mean", weight: Tensor | None = None) -> Tensor:
    """Mean absolute error between ``input`` and ``target`` (optionally weighted elementwise)."""
    _warn_if_broadcast(input, target)
    if weight is None:
        _check_reduction(reduction)
    return _reduce_weighted(_abs(input - target), input, weight, reduction, mean_by_weight=True)


def smooth_l1_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
                   reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """``0.5 d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta`` (``beta=0`` is L1)."""
    _warn_if_broadcast(input, target)
    _check_reduction(reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    diff = input - target
    ad = _abs(diff)
    if beta == 0:
        return _reduce(ad, reduction)
    return _reduce(where(ad < beta, diff * diff * (0.5 / beta), ad - 0.5 * beta), reduction)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0,
               weight: Tensor | None = None) -> Tensor:
    """``0.5 d**2`` where ``|d| < delta``, else ``delta (|d| - 0.5 delta)`` (optionally weighted)."""
    _warn_if_broadcast(input, target)
    if weight is None:
        _check_reduction(reduction)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    diff = input - target
    ad = _abs(diff)
    losses = where(ad < delta, diff * diff * 0.5, (ad - 0.5 * delta) * delta)
    return _reduce_weighted(losses, input, weight, reduction, mean_by_weight=False)


def _check_same_size(input: Tensor, target: Tensor) -> None:
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({_size_str(target)}) that is different to the input size "
                         f"({_size_str(input)}) is deprecated. Please ensure they have the same size.")


def _size_str(t: Tensor) -> str:
    return f"torch.Size({list(t.shape)})"


def _not_differentiable(fn: str, **args: Tensor | None) -> None:
    # PyTorch's fused kernels have no derivative for these arguments and refuse them up front.
    for name, t in args.items():
        if t is not None and t.requires_grad:
            raise RuntimeError(f"The function '{fn}' is not differentiable with respect to argument '{name}'. "
                               "This input cannot have requires_grad True.")


_LOG_FLOOR = float(np.exp(-100.0))


def _clamped_log(x: Tensor) -> Tensor:
    # PyTorch clamps the log at -100 so that a probability of 0 or 1 gives a finite loss.  The log
    # only ever sees values above exp(-100), so neither the value nor the gradient becomes inf/nan.
    above = x > _LOG_FLOOR
    return where(above, log(where(above, x, 1.0)), -100.0)


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, size_average: Any = None,
                         reduce: Any = None, reduction: str = "mean") -> Tensor:
    """Binary cross entropy between probabilities ``input`` and ``target`` (log clamped at -100)."""
    _check_reduction(reduction)
    _check_same_size(input, target)
    _not_differentiable("binary_cross_entropy", weight=weight)
    x = input._data
    xp = _backends.array_module(x)
    with _backends.on(input.device):
        if bool(xp.any((x < 0) | (x > 1) | xp.isnan(x))):
            raise RuntimeError("all elements of input should be between 0 and 1")
    losses = -(target * _clamped_log(input) + (1 - target) * _clamped_log(1 - input))
    if weight is not None:
        losses = losses * weight
    return _reduce(losses, reduction)


def _softplus_neg(x: Tensor) -> Tensor:
    # log(1 + exp(-x)) = relu(-x) + log(1 + exp(-|x|)): exp never overflows.
    return _relu(-x) + log(1 + exp(-_abs(x)))


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     size_average: Any = None, reduce: Any = None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """Binary cross entropy of ``sigmoid(input)`` against ``target``, computed stably from the logits."""
    _check_reduction(reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({_size_str(target)}) must be the same as input size ({_size_str(input)})")
    _not_differentiable("binary_cross_entropy_with_logits", weight=weight, pos_weight=pos_weight)
    sp = _softplus_neg(input)  # -log(sigmoid(input))
    if pos_weight is not None:
        sp = sp * (1 + (pos_weight - 1) * target)
    losses = (1 - target) * input + sp
    if weight is not None:
        losses = losses * weight
    return _reduce(losses, reduction)


def kl_div(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
           log_target: bool = False) -> Tensor:
    """Pointwise KL divergence ``target * (log(target) - input)`` with log-probabilities ``input``."""
    if reduction not in ("none", "sum", "mean", "batchmean"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                      UserWarning, stacklevel=2)
    if log_target:
        losses = exp(target) * (target - input)
    else:
        # xlogy: 0 where target == 0; the log sees 1 there so no inf/nan reaches the gradient.
        positive = target > 0
        losses = where(positive, target * log(where(positive, target, 1.0)) - target * input, -(target * input))
    if reduction == "batchmean":
        return losses.sum() / (input.shape[0] if input.ndim else 1)
    return _reduce(losses, reduction)
