"""Activations, softmax, ``linear`` and losses of ``agrad.nn.functional``.

These are composites of table ops (``agrad/_ops/``): their gradients
come from the primitives', so they need no backward rule of their own.
A composite's node is whatever its last primitive records (PyTorch's fused
losses record ``MultiMarginLossBackward0``...; here the reduction's node).
``nll_loss``, the loss of every classifier's training step, is the exception:
one entry with PyTorch's NllLossBackward0 (Note [nll_loss as one node]).

Every loss takes PyTorch's deprecated ``size_average``/``reduce`` as PyTorch
does (:func:`_legacy_reduction`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from agrad import _backends, _dtype
from agrad._creation import ones_like
from agrad._grad_mode import no_grad
from agrad._ops._elementwise import clamp, exp, log, log1p, minimum, sigmoid, sqrt, tanh, where
from agrad._ops._elementwise import relu as _relu
from agrad._ops._linalg import addmm, matmul
from agrad._ops._reductions import class_targets
from agrad._ops._reductions import log_softmax as _log_softmax
from agrad._ops._reductions import nll_loss as _nll_loss
from agrad._ops._reductions import softmax as _softmax
from agrad._ops._shape import constant_pad_nd, reshape, stack
from agrad._ops._structure import t as _t
from agrad._tensor import Tensor
from agrad.nn._activations import _implicit_dim, logsigmoid
from agrad.nn._distance import pairwise_distance

__all__ = [
    "relu", "sigmoid", "tanh", "softmax", "log_softmax", "linear", "mse_loss", "nll_loss", "cross_entropy",
    "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div",
    "margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss", "cosine_embedding_loss", "poisson_nll_loss",
    "gaussian_nll_loss", "multi_margin_loss", "multilabel_margin_loss", "multilabel_soft_margin_loss",
    "triplet_margin_loss", "triplet_margin_with_distance_loss", "ctc_loss",
]


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """Elementwise ``max(input, 0)``."""
    return input.relu_() if inplace else _relu(input)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """``log(softmax(input))`` along ``dim``, computed stably."""
    if dtype is not None:
        input = input.to(dtype)
    return _log_softmax(input, dim=_softmax_dim("log_softmax", input, dim, _stacklevel))


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """Normalised exponentials along ``dim``."""
    if dtype is not None:
        input = input.to(dtype)
    return _softmax(input, _softmax_dim("softmax", input, dim, _stacklevel))


def _softmax_dim(name: str, input: Tensor, dim: int | None, stacklevel: int) -> int:
    return dim if dim is not None else _implicit_dim(name, input.ndim, stacklevel + 1)


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias``.

    The ops are PyTorch's (ATen's ``linear``), so ``grad_fn`` is its: a matrix
    input and a bias are one ``addmm`` (AddmmBackward0); any other contiguous
    input with a vector bias is flattened to a matrix for the ``addmm`` and
    viewed back (ViewBackward0); the rest is a ``matmul`` plus the bias.
    """
    if bias is not None and weight.ndim == 2:
        if input.ndim == 2:
            return addmm(bias, input, _t(weight))  # Note [Linear as one node]; TBackward0, as PyTorch's
        shape = input._data.shape
        if shape and _fusable_bias(bias) and input._data.flags.c_contiguous:  # reshapes that are views
            rows = reshape(input, (math.prod(shape[:-1]), shape[-1]))
            return reshape(addmm(bias, rows, _t(weight)), (*shape[:-1], weight._data.shape[0]))
    out = matmul(input, _t(weight) if weight.ndim > 1 else weight)
    return out if bias is None else out + bias


def _fusable_bias(bias: Tensor) -> bool:
    """Whether ATen's ``linear`` folds ``bias`` into an ``addmm``: a contiguous
    vector, or one with extra dimensions of size one."""
    return (bias.ndim == 1 or sum(1 for s in bias.shape if s != 1) == 1) and bias._data.flags.c_contiguous


def _legacy_reduction(size_average: bool | None, reduce: bool | None, reduction: str) -> str:
    """PyTorch's ``_Reduction.legacy_get_string``: the deprecated ``size_average`` and
    ``reduce`` (either one given) override ``reduction``, with PyTorch's warning."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    ret = "mean" if size_average and reduce else "sum" if reduce else "none"
    warnings.warn(f"size_average and reduce args will be deprecated, please use reduction='{ret}' instead.",
                  UserWarning, stacklevel=3)
    return ret


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
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _warn_if_broadcast(input, target)
    if weight is None:
        _check_reduction(reduction)
    return _reduce_weighted((input - target) ** 2, input, weight, reduction, mean_by_weight=True)


def _class_targets(input: Tensor, target: Tensor, ignore_index: int) -> tuple[Any, Any]:
    """The class indices with ignored ones replaced by 0, and the mask of the others
    (arrays on ``input``'s device), checked as ``nll_loss`` checks them."""
    t = _target_array(input, target)
    n_classes = input.shape[1] if input.ndim > 1 else input.shape[0]
    with _backends.on(input.device):  # raw array kernels: on the data's device
        return class_targets(_backends.array_module(t), t, n_classes, ignore_index)


def _target_array(input: Tensor, target: Tensor) -> Any:
    """``target``'s array (a target given as a list or array is moved to ``input``'s device)."""
    return target._data if isinstance(target, Tensor) else _backends.transfer(np.asarray(target), input.device)


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
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if input.ndim == 0:
        raise ValueError("Expected 1 or more dimensions (got 0)")
    _not_differentiable("nll_loss_forward", weight=weight)
    _check_target_shape(input.shape, tuple(target.shape if isinstance(target, Tensor) else np.shape(target)))
    t = target if isinstance(target, Tensor) else Tensor._make(_target_array(input, target))
    return _nll_loss(input, t, weight, reduction, ignore_index)  # Note [nll_loss as one node]


def _target_weights(input: Tensor, weight: Tensor | None, safe: Any, valid: Any) -> Any:
    """Each target's class weight (1 without ``weight``), 0 where it is ignored (``valid``
    None: nowhere); ``input``'s dtype."""
    dt = input._data.dtype
    with _backends.on(input.device):
        w = _backends.array_module(safe).ones(safe.shape, dt) if weight is None else weight._data[safe]
        return (w if valid is None else w * valid).astype(dt, copy=False)


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
    reduction = _legacy_reduction(size_average, reduce, reduction)
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
    n_classes = input.shape[class_dim]
    per_class = logp if weight is None else logp * _class_weight(weight, input)
    smooth = per_class.sum(dim=class_dim)
    if valid is not None:
        with _backends.on(input.device):
            smooth = smooth * Tensor._make(valid.astype(input._data.dtype))
    smooth = -smooth / n_classes
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
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _warn_if_broadcast(input, target)
    if weight is None:
        _check_reduction(reduction)
    return _reduce_weighted(_abs(input - target), input, weight, reduction, mean_by_weight=True)


def smooth_l1_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
                   reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """``0.5 d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta`` (``beta=0`` is L1)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
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
    reduction = _legacy_reduction(size_average, reduce, reduction)
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
    reduction = _legacy_reduction(size_average, reduce, reduction)
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
    reduction = _legacy_reduction(size_average, reduce, reduction)
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


# -- margin and embedding losses ---------------------------------------------------


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0,
                        size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> Tensor:
    """``max(0, -target * (input1 - input2) + margin)``: ``target`` (1 or -1) says
    which input should rank higher."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if not input1.ndim == input2.ndim == target.ndim:
        raise RuntimeError("margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {_size_str(input1)}, input2: {_size_str(input2)}, target: {_size_str(target)} ")
    return _reduce(clamp(-target * (input1 - input2) + margin, min=0), reduction)


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0, size_average: Any = None,
                         reduce: Any = None, reduction: str = "mean") -> Tensor:
    """``input`` where ``target`` is 1, ``max(0, margin - input)`` where it is -1
    (and, as PyTorch's, their sum where it is neither)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    below_margin = where(target != 1, clamp(margin - input, min=0), 0.0)
    return _reduce(below_margin + where(target != -1, input, 0.0), reduction)


def soft_margin_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
                     reduction: str = "mean") -> Tensor:
    """``log(1 + exp(-target * input))`` (PyTorch's formula, which overflows as
    PyTorch's does for large ``-target * input``)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _not_differentiable("soft_margin_loss", target=target)
    return _reduce(log1p(exp(-input * target)), reduction)


_COSINE_EPS = 1e-12  # PyTorch's EPSILON in cosine_embedding_loss


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0,
                          size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> Tensor:
    """``1 - cos(input1, input2)`` where ``target`` is 1, ``max(0, cos - margin)``
    where it is -1; the cosine is over the last dimension of (N, D) or (D,) inputs."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    dim = target.ndim
    if dim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if input1.ndim != dim + 1 or input2.ndim != dim + 1:
        raise RuntimeError(f"{dim}D target tensor expects {dim + 1}D input tensors, but found inputs with sizes "
                           f"{list(input1.shape)} and {list(input2.shape)}.")
    dot = (input1 * input2).sum(dim=dim)
    squares = ((input1 * input1).sum(dim=dim) + _COSINE_EPS) * ((input2 * input2).sum(dim=dim) + _COSINE_EPS)
    cos = dot / sqrt(squares)
    losses = where(target == 1, 1 - cos, 0.0) + where(target == -1, clamp(cos - margin, min=0), 0.0)
    return _reduce(losses, reduction)


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0, p: float = 2,
                        eps: float = 1e-6, swap: bool = False, size_average: Any = None, reduce: Any = None,
                        reduction: str = "mean") -> Tensor:
    """``max(0, margin + d(anchor, positive) - d(anchor, negative))`` with ``d`` the
    ``pairwise_distance`` (``p``, ``eps``); ``swap`` uses the smaller of
    ``d(anchor, negative)`` and ``d(positive, negative)``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    return _triplet(anchor, positive, negative, lambda a, b: pairwise_distance(a, b, p, eps), margin, swap,
                    reduction)


def _triplet(anchor: Tensor, positive: Tensor, negative: Tensor, distance: Callable[[Tensor, Tensor], Tensor],
             margin: float, swap: bool, reduction: str) -> Tensor:
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError("The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {anchor.ndim}D, positive {positive.ndim}D, and negative "
                           f"{negative.ndim}D inputs")
    dist_pos = distance(anchor, positive)
    dist_neg = distance(anchor, negative)
    if swap:
        dist_neg = minimum(dist_neg, distance(positive, negative))
    return _reduce(clamp(margin + dist_pos - dist_neg, min=0), reduction)


def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *,
                                      distance_function: Callable[[Tensor, Tensor], Tensor] | None = None,
                                      margin: float = 1.0, swap: bool = False, reduction: str = "mean") -> Tensor:
    """:func:`triplet_margin_loss` with any ``distance_function`` (``pairwise_distance`` by default)."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    return _triplet(anchor, positive, negative, distance_function or pairwise_distance, margin, swap, reduction)


# -- likelihood losses ------------------------------------------------------------------


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True, full: bool = False,
                     size_average: Any = None, eps: float = 1e-8, reduce: Any = None,
                     reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of ``target`` under a Poisson distribution of rate
    ``exp(input)`` (``log_input``) or ``input``; ``full`` adds Stirling's term
    where ``target > 1``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    losses = exp(input) - target * input if log_input else input - target * log(input + eps)
    if full:
        stirling = target * log(target) - target + 0.5 * log(2 * math.pi * target)
        losses = losses + stirling.masked_fill(target <= 1, 0)
    return _reduce(losses, reduction)


def gaussian_nll_loss(input: Tensor, target: Tensor, var: Tensor | float, full: bool = False, eps: float = 1e-6,
                      reduction: str = "mean") -> Tensor:
    """``0.5 * (log(var) + (input - target)**2 / var)`` (plus ``0.5 * log(2 pi)`` if
    ``full``).  ``var`` is a number, or a tensor of ``input``'s shape, or with its
    last dimension (or one other) missing or 1.  As PyTorch's, ``var`` is clamped
    to at least ``eps`` in place without recording, so its gradient is as if
    unclamped.
    """
    if isinstance(var, (int, float)):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = var * ones_like(input)
    elif bool((var < 0).any()):
        raise ValueError("var has negative entry/entries")
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif not (input.ndim == var.ndim
                  and sum(v for i, v in zip(input.shape, var.shape) if i != v) == 1):
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    var = var.clone()
    with no_grad():
        var.clamp_(min=eps)
    losses = 0.5 * (log(var) + (input - target) ** 2 / var)
    if full:
        losses = losses + 0.5 * math.log(2 * math.pi)
    return _reduce(losses, reduction)


# -- multi-class margin losses ------------------------------------------------------------


def _check_long_target(target: Tensor) -> None:
    if target.dtype is not _dtype.int64:
        raise RuntimeError(f"expected scalar type Long but found {_dtype.SCALAR_TYPE_NAMES[target.dtype.name]}")


def _frames(input: Tensor) -> tuple[int, int]:
    """(samples, classes) of a multi-class margin loss's input: (N, C), (C,) or ()."""
    if not ((input.ndim == 2 and input.shape[1]) or (input.ndim == 1 and input.shape[0]) or input.ndim == 0):
        raise RuntimeError("Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(input.shape)}")
    if input.ndim <= 1:
        return 1, input.shape[0] if input.ndim else 1
    return input.shape[0], input.shape[1]


def multi_margin_loss(input: Tensor, target: Tensor, p: int = 1, margin: float = 1.0, weight: Tensor | None = None,
                      size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> Tensor:
    """Multi-class hinge loss: per sample, ``sum_{d != y} max(0, margin - x[y] + x[d])**p / C``
    (each term times ``weight[y]``) for class indices ``target`` = y."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.ndim != 1:
        raise ValueError("weight must be one-dimensional")
    nframe, dim = _frames(input)
    if target.ndim > 1 or target.numel() != nframe:
        raise RuntimeError("multi_margin_loss: target tensor should be 1-D with size equal to the number of input "
                           f"samples (batch size). Expected target size [{nframe}], but got {list(target.shape)}. "
                           f"Input has shape {list(input.shape)}.")
    if weight is not None and weight.numel() != dim:
        raise RuntimeError(f"inconsistent weight size, expected {dim} but got {list(weight.shape)}")
    _not_differentiable("multi_margin_loss", weight=weight)
    if not input.is_floating_point():
        raise NotImplementedError(f'"multi_margin_loss_cpu_kernel" not implemented for '
                                  f"'{_dtype.SCALAR_TYPE_NAMES[input.dtype.name]}'")
    _check_long_target(target)
    t = target._data.reshape(nframe)
    with _backends.on(input.device):
        xp = _backends.array_module(t)
        if bool(xp.any((t < 0) | (t >= dim))):
            raise RuntimeError("target out of range")
        others = Tensor._make(xp.arange(dim) != t[:, None])
    x = input.reshape(nframe, dim)
    index = Tensor._make(t)
    hinge = _relu(margin - x.gather(1, index.unsqueeze(1)) + x)
    if p == 2:
        hinge = hinge * hinge
    if weight is not None:
        hinge = hinge * weight.index_select(0, index).unsqueeze(1)
    losses = where(others, hinge, 0.0).sum(dim=1) / dim
    if reduction == "none" and target.ndim == 0:
        losses = losses.reshape(())
    return _reduce(losses, reduction)


def multilabel_margin_loss(input: Tensor, target: Tensor, size_average: Any = None, reduce: Any = None,
                           reduction: str = "mean") -> Tensor:
    """Multi-label hinge loss: per sample, ``sum_{j, d} max(0, 1 - x[y_j] + x[d]) / C``
    over the target classes ``y_j`` (``target``'s entries before its first -1) and the
    classes ``d`` that are not targets."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    nframe, dim = _frames(input)
    if input.ndim <= 1:
        consistent = target.ndim <= 1 and target.numel() == dim
    else:
        consistent = target.ndim == 2 and tuple(target.shape) == (nframe, dim)
    if not consistent:
        raise RuntimeError(f"inconsistent target size: {list(target.shape)} for input of size: {list(input.shape)}")
    t = target._data.reshape(nframe, dim)
    with _backends.on(input.device):
        xp = _backends.array_module(t)
        if t.size and (int(t.min()) < -1 or int(t.max()) >= dim):
            raise RuntimeError("argument #2 'target' is out of range")
        if not input.is_floating_point():
            raise NotImplementedError('"multilabel_margin_loss_forward_out_frame" not implemented for '
                                      f"'{_dtype.SCALAR_TYPE_NAMES[input.dtype.name]}'")
        _check_long_target(target)
        # The targets of a sample are its entries before the first -1.
        listed = xp.cumprod(t != -1, axis=1).astype(bool)
        safe = xp.where(listed, t, 0)
        is_target = ((safe[:, :, None] == xp.arange(dim)) & listed[:, :, None]).any(axis=1)
        pairs = Tensor._make(listed[:, :, None] & ~is_target[:, None, :])  # (sample, target entry, class)
    x = input.reshape(nframe, dim)
    picked = x.gather(1, Tensor._make(safe))
    losses = where(pairs, _relu(1 - picked.unsqueeze(2) + x.unsqueeze(1)), 0.0).sum(dim=(1, 2)) / dim
    if reduction == "none" and target.ndim <= 1:
        losses = losses.reshape(())
    return _reduce(losses, reduction)


def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                size_average: Any = None, reduce: Any = None, reduction: str = "mean") -> Tensor:
    """Per sample, the mean over classes (the last dimension) of the binary cross
    entropy of ``sigmoid(input)`` against ``target``, each class times ``weight``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if input.ndim == 0:
        raise IndexError("Dimension specified as -1 but tensor has no dimensions")
    losses = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        losses = losses * weight
    class_dim = input.ndim - 1
    losses = losses.sum(dim=class_dim) / input.shape[class_dim]
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    return _reduce(losses, reduction)


# -- connectionist temporal classification ---------------------------------------------------

# Note [CTC in log space]
# ~~~~~~~~~~~~~~~~~~~~~~~
# ctc_loss runs the forward (alpha) recursion over the extended target
# ``blank, y1, blank, y2, ..., blank`` (length 2S + 1): vectorised over the
# batch and the target positions, one step per time step, in agrad ops, so
# the gradient (and the second derivative) is autograd's.  States that are not
# reachable hold ``_CTC_NEG`` rather than -inf: a logsumexp of finite values
# has a finite gradient everywhere, where -inf would turn the zero gradient of
# an unreachable state into NaN (0 * exp(-inf + inf)).  ``_CTC_NEG`` is so
# far below any log-probability sum that it never changes a reachable value,
# and a loss above ``-_CTC_NEG / 2`` can only come from unreachable states:
# no alignment exists (fewer input steps than the target needs), and the loss
# is inf (0 with zero_infinity).
#
# A deliberate difference: PyTorch's CtcLossBackward0 returns
# ``exp(log_probs) - posterior``, the gradient with respect to the *logits*
# of a log_softmax (it assumes ``log_probs`` is one); here the gradient is the
# derivative with respect to ``log_probs`` itself, ``-posterior``.  Through a
# log_softmax, the usual way to make ``log_probs``, both give the same
# gradient of the logits.  Impossible alignments get gradient 0 here (PyTorch:
# NaN unless zero_infinity).
_CTC_NEG = -1e30


def _lengths(lengths: Any, name: str, batch: int) -> np.ndarray:
    """Lengths given as a tensor or a sequence of ints, on the host as int64."""
    arr = np.asarray(lengths.tolist() if isinstance(lengths, Tensor) else lengths, dtype=np.int64).reshape(-1)
    if arr.size != batch:
        raise RuntimeError(f"{name} must be of size batch_size")
    return arr


def _check_lengths(arr: np.ndarray, name: str, at_most: int | None = None) -> None:
    where = " (while checking arguments for ctc_loss_allocate_outputs)"
    if arr.size and arr.min() < 0:
        raise RuntimeError(f"Expected {name} to have value at least 0, but got value {arr.min()}{where}")
    if at_most is not None and arr.size and arr.max() > at_most:
        raise RuntimeError(f"Expected {name} to have value at most {at_most}, but got value {arr.max()}{where}")


def _padded_targets(targets: Tensor, target_lengths: np.ndarray, batch: int) -> np.ndarray:
    """The targets as (N, S) on the host: padded as given, or split from their concatenation."""
    t = np.asarray(targets.tolist(), dtype=np.int64) if isinstance(targets, Tensor) else np.asarray(targets, np.int64)
    longest = int(target_lengths.max()) if target_lengths.size else 0
    if t.ndim == 2:
        return t
    if t.ndim == 1:  # concatenated: sample n's targets start at the sum of the lengths before it
        starts = np.concatenate([[0], np.cumsum(target_lengths)[:-1]])
        cols = np.arange(longest)
        picked = np.minimum(starts[:, None] + cols, max(t.size - 1, 0))
        return np.where(cols < target_lengths[:, None], t[picked] if t.size else 0, 0)
    raise RuntimeError(f"Expected 1-dimensional or 2-dimensional targets, but got {t.ndim}-dimensional targets")


def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths: Any, target_lengths: Any, blank: int = 0,
             reduction: str = "mean", zero_infinity: bool = False) -> Tensor:
    """Connectionist temporal classification loss: ``-log`` of the probability, under
    the per-step class log-probabilities ``log_probs`` (T, N, C), of all alignments
    that collapse (merging repeats, then dropping ``blank``) to each target.

    ``targets`` are padded (N, S) or concatenated (sum of ``target_lengths``);
    an unbatched call passes (T, C) and (S,).  ``'mean'`` divides each loss by its
    target length before averaging over the batch.  See Note [CTC in log space]
    (the time steps are a loop; the batch and the targets are vectorised).
    """
    _check_reduction(reduction)
    batched = log_probs.ndim == 3
    if not batched:
        if log_probs.ndim != 2:
            raise RuntimeError(f"Expected 3-dimensional tensor, but got {log_probs.ndim + 1}-dimensional tensor for "
                               "argument #1 'log_probs' (while checking arguments for ctc_loss_allocate_outputs)")
        log_probs = log_probs.unsqueeze(1)
        targets = targets.unsqueeze(0) if isinstance(targets, Tensor) else np.asarray(targets)[None]
    if not log_probs.is_floating_point():
        raise NotImplementedError('"ctc_loss_cpu" not implemented for '
                                  f"'{_dtype.SCALAR_TYPE_NAMES[log_probs.dtype.name]}'")
    steps, batch, classes = log_probs.shape
    if not 0 <= blank < classes:
        raise RuntimeError("blank must be in label range")
    in_len = _lengths(input_lengths, "input_lengths", batch)
    tgt_len = _lengths(target_lengths, "target_lengths", batch)
    _check_lengths(in_len, "input_lengths", steps)
    _check_lengths(tgt_len, "target_lengths")
    padded = _padded_targets(targets, tgt_len, batch)
    longest = int(tgt_len.max()) if batch else 0
    if padded.ndim == 2 and padded.shape[1] < longest:
        raise RuntimeError(f"Expected tensor to have size at least {longest} at dimension 1, but got size "
                           f"{padded.shape[1]} for argument #2 'targets' (while checking arguments for "
                           "ctc_loss_allocate_outputs)")
    labels = padded[:, :longest]
    # The extended targets (blank between labels), and where a state may skip
    # the blank before it (a label differing from the label two states back).
    width = 2 * longest + 1
    ext = np.full((batch, width), blank, np.int64)
    ext[:, 1::2] = np.where(np.arange(longest) < tgt_len[:, None], labels, blank)
    skip = np.zeros((batch, width), bool)
    skip[:, 3::2] = ext[:, 3::2] != ext[:, 1:-2:2]  # PyTorch's test (a blank label may skip too)

    dev, dt = log_probs.device, log_probs._data.dtype

    def const(a: np.ndarray) -> Tensor:
        return Tensor._make(_backends.transfer(np.ascontiguousarray(a), dev))

    emit = log_probs.gather(2, const(np.broadcast_to(ext, (steps, batch, width))))  # (T, N, 2S + 1)
    start = np.zeros((batch, width), bool)
    start[:, 0] = True
    if width > 1:
        start[:, 1] = tgt_len > 0
    alpha = where(const(start), emit.select(0, 0), _CTC_NEG) if steps else None
    can_skip = const(skip)
    for t in range(1, steps):
        shifted = constant_pad_nd(alpha, (2, 0), _CTC_NEG)
        moves = stack([alpha, shifted.narrow(1, 1, width), where(can_skip, shifted.narrow(1, 0, width), _CTC_NEG)])
        stepped = moves.logsumexp(dim=0) + emit.select(0, t)
        alpha = where(const((t < in_len)[:, None]), stepped, alpha)
    if alpha is None:  # no time steps: only empty targets are possible
        losses = Tensor._make(_backends.transfer(np.where(tgt_len == 0, 0.0, np.inf).astype(dt), dev))
    else:
        ends = np.stack([2 * tgt_len, np.maximum(2 * tgt_len - 1, 0)], axis=1)
        last = where(const(np.stack([np.ones(batch, bool), tgt_len > 0], axis=1)), alpha.gather(1, const(ends)),
                     _CTC_NEG)
        losses = -last.logsumexp(dim=1)
        with _backends.on(dev):
            impossible = Tensor._make(losses._data > -_CTC_NEG / 2)  # only unreachable states led there
        empty = (in_len == 0) & (tgt_len == 0)  # nothing to emit and nothing emitted: probability 1
        losses = where(const(empty), 0.0, where(impossible, 0.0 if zero_infinity else math.inf, losses))
    if reduction == "mean":
        return (losses / const(np.maximum(tgt_len, 1).astype(dt))).mean()
    if reduction == "sum":
        return losses.sum()
    return losses if batched else losses.squeeze(0)
