"""Loss layers (mirrors ``torch.nn.modules.loss``).

Each loss is a thin Module over its ``agrad.nn.functional`` function: the
constructor keeps the settings (``reduction``, ``margin``, ...) as attributes
of PyTorch's names and ``forward`` passes them on, so a bad setting (an
unknown ``reduction``) fails at the first call, as in PyTorch.  Class weights
are *buffers* (``weight``; ``pos_weight`` of :class:`BCEWithLogitsLoss`): they
follow ``.to()`` and appear in ``state_dict`` when set.

The deprecated ``size_average``/``reduce`` pair, where PyTorch still takes it,
is turned into ``reduction`` once, at construction, with PyTorch's warning.

    >>> loss = agrad.nn.MSELoss(reduction="sum")
    >>> loss(agrad.tensor([1.0, 2.0]), agrad.tensor([0.0, 0.0]))
    tensor(5.)
    >>> agrad.nn.CrossEntropyLoss(weight=agrad.ones(3)).state_dict()
    OrderedDict([('weight', tensor([1., 1., 1.]))])
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import agrad.nn.functional as F
from agrad._tensor import Tensor
from agrad.nn._losses import _legacy_reduction
from agrad.nn.modules.distance import PairwiseDistance
from agrad.nn.modules.module import Module

__all__ = [
    "L1Loss", "NLLLoss", "NLLLoss2d", "PoissonNLLLoss", "GaussianNLLLoss", "KLDivLoss", "MSELoss", "BCELoss",
    "BCEWithLogitsLoss", "HingeEmbeddingLoss", "MultiLabelMarginLoss", "SmoothL1Loss", "HuberLoss", "SoftMarginLoss",
    "CrossEntropyLoss", "MultiLabelSoftMarginLoss", "CosineEmbeddingLoss", "MarginRankingLoss", "MultiMarginLoss",
    "TripletMarginLoss", "TripletMarginWithDistanceLoss", "CTCLoss",
]


class _Loss(Module):
    """Base of the losses: holds ``reduction`` (``'none'``, ``'mean'`` or ``'sum'``),
    or the one that the deprecated ``size_average``/``reduce`` name."""

    reduction: str

    def __init__(self, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = _legacy_reduction(size_average, reduce, reduction)


class _WeightedLoss(_Loss):
    """A loss with an optional per-class ``weight``, registered as a buffer (absent
    from ``state_dict`` while it is None)."""

    weight: Tensor | None

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)


class L1Loss(_Loss):
    """Mean (or sum, or each) absolute difference ``|input - target|``."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.l1_loss(input, target, reduction=self.reduction)


class NLLLoss(_WeightedLoss):
    """Negative log-likelihood of class indices ``target`` under log-probabilities
    ``input`` ((C,), (N, C) or (N, C, d1, ...)).  Targets equal to ``ignore_index``
    count for nothing; ``'mean'`` divides by the total ``weight`` of the others."""

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None, ignore_index: int = -100,
                 reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index, reduction=self.reduction)


class NLLLoss2d(NLLLoss):
    """PyTorch's deprecated name of :class:`NLLLoss` for images (a FutureWarning)."""

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None, ignore_index: int = -100,
                 reduce: bool | None = None, reduction: str = "mean") -> None:
        warnings.warn("`NLLLoss2d` has been deprecated. Please use `NLLLoss` instead as a drop-in replacement and see "
                      "https://pytorch.org/docs/main/nn.html#torch.nn.NLLLoss for more details.", FutureWarning,
                      stacklevel=2)
        super().__init__(weight, size_average, ignore_index, reduce, reduction)


class PoissonNLLLoss(_Loss):
    """Negative log-likelihood of ``target`` under a Poisson distribution whose rate
    is ``exp(input)`` (``log_input=True``) or ``input``; ``full`` adds Stirling's
    approximation of ``log(target!)``."""

    def __init__(self, log_input: bool = True, full: bool = False, size_average: bool | None = None,
                 eps: float = 1e-8, reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_input = log_input
        self.full = full
        self.eps = eps

    def forward(self, log_input: Tensor, target: Tensor) -> Tensor:
        return F.poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full, eps=self.eps,
                                  reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    """Negative log-likelihood of ``target`` under a Gaussian of mean ``input`` and
    variance ``var`` (clamped to at least ``eps``); ``full`` adds the constant."""

    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean") -> None:
        super().__init__(None, None, reduction)
        self.full = full
        self.eps = eps

    def forward(self, input: Tensor, target: Tensor, var: Tensor | float) -> Tensor:
        return F.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps, reduction=self.reduction)


class KLDivLoss(_Loss):
    """Pointwise KL divergence of ``target`` from the log-probabilities ``input``
    (``target`` given as log-probabilities too with ``log_target``).  Use
    ``reduction='batchmean'`` for the mathematical KL divergence; ``'mean'`` warns,
    as in PyTorch."""

    def __init__(self, size_average: bool | None = None, reduce: bool | None = None, reduction: str = "mean",
                 log_target: bool = False) -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class MSELoss(_Loss):
    """Mean (or sum, or each) squared difference ``(input - target)**2``."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.mse_loss(input, target, reduction=self.reduction)


class BCELoss(_WeightedLoss):
    """Binary cross entropy between probabilities ``input`` (in [0, 1]) and
    ``target``, each element times ``weight``; the logs are clamped at -100."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross entropy of ``sigmoid(input)`` against ``target``, computed
    stably from the logits.  ``weight`` rescales each element, ``pos_weight`` the
    positive term of each class; both are buffers."""

    weight: Tensor | None
    pos_weight: Tensor | None

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean", pos_weight: Tensor | None = None) -> None:
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy_with_logits(input, target, self.weight, pos_weight=self.pos_weight,
                                                  reduction=self.reduction)


class HingeEmbeddingLoss(_Loss):
    """``input`` where ``target`` is 1, ``max(0, margin - input)`` where it is -1:
    for ``input`` a distance that should be small for similar pairs."""

    def __init__(self, margin: float = 1.0, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.hinge_embedding_loss(input, target, margin=self.margin, reduction=self.reduction)


class MultiLabelMarginLoss(_Loss):
    """Multi-label hinge loss: ``target`` lists each sample's classes (int64, ended
    by the first -1); every listed class should score 1 above every other."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.multilabel_margin_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    """Squared error ``0.5 d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta``."""

    def __init__(self, size_average: bool | None = None, reduce: bool | None = None, reduction: str = "mean",
                 beta: float = 1.0) -> None:
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """``0.5 d**2`` where ``|d| < delta``, else ``delta * (|d| - 0.5 delta)``
    (:class:`SmoothL1Loss` times ``delta``); ``delta`` must be a number."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        if not isinstance(delta, (float, int)):
            raise TypeError(f"delta must be a float or int, got: {type(delta)}")
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class SoftMarginLoss(_Loss):
    """Two-class logistic loss ``log(1 + exp(-target * input))`` for ``target`` of ±1."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class CrossEntropyLoss(_WeightedLoss):
    """Cross entropy between logits ``input`` and ``target``: class indices (int64;
    those equal to ``ignore_index`` count for nothing) or class probabilities (the
    shape of ``input``).  ``label_smoothing`` mixes the target with the uniform
    distribution; ``weight`` rescales each class.

        >>> loss = agrad.nn.CrossEntropyLoss()
        >>> loss(agrad.zeros(2, 4), agrad.tensor([0, 3]))
        tensor(1.3863)
    """

    def __init__(self, weight: Tensor | None = None, size_average: bool | None = None, ignore_index: int = -100,
                 reduce: bool | None = None, reduction: str = "mean", label_smoothing: float = 0.0) -> None:
        super().__init__(weight, size_average, reduce, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class MultiLabelSoftMarginLoss(_WeightedLoss):
    """Per sample, the mean over classes of the binary cross entropy of
    ``sigmoid(input)`` against the 0/1 ``target``, each class times ``weight``."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.multilabel_soft_margin_loss(input, target, weight=self.weight, reduction=self.reduction)


class _PairMarginLoss(_Loss):
    """The losses of a pair of inputs and a ±1 ``target``, with a ``margin``."""

    def __init__(self, margin: float = 0.0, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin


class CosineEmbeddingLoss(_PairMarginLoss):
    """``1 - cos(input1, input2)`` where ``target`` is 1, ``max(0, cos - margin)``
    where it is -1: pulls similar pairs together, pushes dissimilar ones apart."""

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return F.cosine_embedding_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class MarginRankingLoss(_PairMarginLoss):
    """``max(0, -target * (input1 - input2) + margin)``: ``target`` 1 says
    ``input1`` should rank higher, -1 that ``input2`` should."""

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return F.margin_ranking_loss(input1, input2, target, margin=self.margin, reduction=self.reduction)


class MultiMarginLoss(_WeightedLoss):
    """Multi-class hinge loss for class indices ``target``: every other class should
    score ``margin`` below the target's (``p`` = 1 or 2: the hinge's power)."""

    def __init__(self, p: int = 1, margin: float = 1.0, weight: Tensor | None = None,
                 size_average: bool | None = None, reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)
        if p != 1 and p != 2:
            raise ValueError("only p == 1 and p == 2 supported")
        if weight is not None and weight.ndim != 1:
            raise ValueError(f"MultiMarginLoss: expected weight to be None or 1D tensor, got {weight.ndim}D instead")
        self.p = p
        self.margin = margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return F.multi_margin_loss(input, target, p=self.p, margin=self.margin, weight=self.weight,
                                   reduction=self.reduction)


def _check_margin(loss: str, margin: float) -> None:
    if margin <= 0:
        raise ValueError(f"{loss}: expected margin to be greater than 0, got {margin} instead")


class TripletMarginLoss(_Loss):
    """``max(0, margin + d(anchor, positive) - d(anchor, negative))`` with ``d`` the
    ``p``-norm pairwise distance; ``swap`` uses the smaller of the two negative
    distances (anchor's and positive's)."""

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6, swap: bool = False,
                 size_average: bool | None = None, reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        _check_margin("TripletMarginLoss", margin)
        self.margin = margin
        self.p = p
        self.eps = eps
        self.swap = swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return F.triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p, eps=self.eps,
                                     swap=self.swap, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_Loss):
    """:class:`TripletMarginLoss` with any ``distance_function`` of two tensors.
    The default is a :class:`PairwiseDistance`, which (being a Module) shows as a
    child in ``repr``, as in PyTorch."""

    distance_function: Callable[[Tensor, Tensor], Tensor] | None

    def __init__(self, *, distance_function: Callable[[Tensor, Tensor], Tensor] | None = None, margin: float = 1.0,
                 swap: bool = False, reduction: str = "mean") -> None:
        super().__init__(size_average=None, reduce=None, reduction=reduction)
        _check_margin("TripletMarginWithDistanceLoss", margin)
        self.distance_function = distance_function if distance_function is not None else PairwiseDistance()
        self.margin = margin
        self.swap = swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return F.triplet_margin_with_distance_loss(anchor, positive, negative, distance_function=self.distance_function,
                                                   margin=self.margin, swap=self.swap, reduction=self.reduction)


class CTCLoss(_Loss):
    """Connectionist temporal classification: ``-log`` of the probability, under the
    per-step log-probabilities ``log_probs`` (T, N, C), of every alignment that
    collapses to each target (``blank`` is the class of "no label")."""

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> None:
        super().__init__(reduction=reduction)
        self.blank = blank
        self.zero_infinity = zero_infinity

    def forward(self, log_probs: Tensor, targets: Tensor, input_lengths: Any, target_lengths: Any) -> Tensor:
        return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction,
                          self.zero_infinity)
