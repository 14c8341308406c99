"""The ``torch.*`` spellings of ``nn.functional`` functions, with PyTorch's
top-level signatures: positional ``train``/``training`` flags, integer
reductions (0, 1, 2 for ``"none"``, ``"mean"``, ``"sum"``), ``embedding``'s
weight first.  Each calls the ``nn.functional`` function; nothing is computed
here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agrad._tensor import Tensor
from agrad.nn import _layers, _losses, _normalization

__all__ = [
    "dropout", "dropout_", "feature_dropout", "feature_dropout_", "alpha_dropout", "alpha_dropout_",
    "feature_alpha_dropout", "feature_alpha_dropout_", "layer_norm", "batch_norm", "instance_norm", "group_norm",
    "rms_norm", "embedding", "kl_div", "binary_cross_entropy_with_logits", "margin_ranking_loss",
    "hinge_embedding_loss", "cosine_embedding_loss", "poisson_nll_loss", "triplet_margin_loss", "ctc_loss",
]

_REDUCTIONS = ("none", "mean", "sum")


def _reduction(reduction: int | str) -> str:
    """PyTorch's top-level losses take the reduction as an int (``at::Reduction``)."""
    return reduction if isinstance(reduction, str) else _REDUCTIONS[reduction]


def dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """``torch.dropout``: ``nn.functional.dropout(input, p, train)``."""
    return _layers.dropout(input, p, train)


def dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    return _layers.dropout(input, p, train, inplace=True)


def _feature_dropout(input: Tensor, p: float, train: bool, inplace: bool) -> Tensor:
    # whole channels zeroed: the dims after (N, C) share one draw
    by_ndim = {4: _layers.dropout2d, 5: _layers.dropout3d}
    return by_ndim.get(input.ndim, _layers.dropout1d)(input, p, train, inplace)


def feature_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """``torch.feature_dropout``: whole channels zeroed (``dropout1d``/``dropout2d``)."""
    return _feature_dropout(input, p, train, False)


def feature_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    return _feature_dropout(input, p, train, True)


def alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """``torch.alpha_dropout``: ``nn.functional.alpha_dropout(input, p, train)``."""
    return _layers.alpha_dropout(input, p, train)


def alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    return _layers.alpha_dropout(input, p, train, inplace=True)


def feature_alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """``torch.feature_alpha_dropout``: ``nn.functional.feature_alpha_dropout(input, p, train)``."""
    return _layers.feature_alpha_dropout(input, p, train)


def feature_alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    return _layers.feature_alpha_dropout(input, p, train, inplace=True)


def layer_norm(input: Tensor, normalized_shape: Sequence[int], weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-05, cudnn_enable: bool = True) -> Tensor:
    """``torch.layer_norm``: ``nn.functional.layer_norm``."""
    return _layers.layer_norm(input, normalized_shape, weight, bias, eps)


def batch_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None, running_mean: Tensor | None,
               running_var: Tensor | None, training: bool, momentum: float, eps: float, cudnn_enabled: bool) -> Tensor:
    """``torch.batch_norm``: ``nn.functional.batch_norm`` with PyTorch's top-level argument order."""
    return _normalization.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def instance_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None, running_mean: Tensor | None,
                  running_var: Tensor | None, use_input_stats: bool, momentum: float, eps: float,
                  cudnn_enabled: bool) -> Tensor:
    """``torch.instance_norm``: ``nn.functional.instance_norm`` with PyTorch's top-level argument order."""
    return _normalization.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum,
                                        eps)


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-05, cudnn_enabled: bool = True) -> Tensor:
    """``torch.group_norm``: ``nn.functional.group_norm``."""
    return _normalization.group_norm(input, num_groups, weight, bias, eps)


def rms_norm(input: Tensor, normalized_shape: Sequence[int], weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    """``torch.rms_norm``: ``nn.functional.rms_norm``."""
    return _normalization.rms_norm(input, normalized_shape, weight, eps)


def embedding(weight: Tensor, indices: Tensor, padding_idx: int = -1, scale_grad_by_freq: bool = False,
              sparse: bool = False) -> Tensor:
    """``torch.embedding``: the weight first, and ``padding_idx=-1`` for none."""
    return _layers.embedding(indices, weight, None if padding_idx == -1 else padding_idx,
                             scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


def kl_div(input: Tensor, target: Tensor, reduction: int = 1, *, log_target: bool = False) -> Tensor:
    # reduced here: nn.functional's 'mean' warns that it is not 'batchmean'; torch.kl_div does not
    pointwise = _losses.kl_div(input, target, reduction="none", log_target=log_target)
    how = _reduction(reduction)
    return pointwise if how == "none" else pointwise.mean() if how == "mean" else pointwise.sum()


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                     pos_weight: Tensor | None = None, reduction: int = 1) -> Tensor:
    return _losses.binary_cross_entropy_with_logits(input, target, weight, reduction=_reduction(reduction),
                                                    pos_weight=pos_weight)


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                        reduction: int = 1) -> Tensor:
    return _losses.margin_ranking_loss(input1, input2, target, margin, reduction=_reduction(reduction))


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0, reduction: int = 1) -> Tensor:
    return _losses.hinge_embedding_loss(input, target, margin, reduction=_reduction(reduction))


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                          reduction: int = 1) -> Tensor:
    return _losses.cosine_embedding_loss(input1, input2, target, margin, reduction=_reduction(reduction))


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool, full: bool, eps: float,
                     reduction: int) -> Tensor:
    return _losses.poisson_nll_loss(input, target, log_input, full, eps=eps, reduction=_reduction(reduction))


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0, p: float = 2,
                        eps: float = 1e-06, swap: bool = False, reduction: int = 1) -> Tensor:
    return _losses.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                       reduction=_reduction(reduction))


def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths: Any, target_lengths: Any, blank: int = 0,
             reduction: int = 1, zero_infinity: bool = False) -> Tensor:
    return _losses.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, _reduction(reduction),
                            zero_infinity)
