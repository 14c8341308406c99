"""Distance layers (mirrors ``torch.nn.modules.distance``): thin Modules over
``agrad.nn.functional.pairwise_distance`` and ``cosine_similarity``.

    >>> cos = agrad.nn.CosineSimilarity(dim=0)
    >>> cos(agrad.tensor([1.0, 0.0]), agrad.tensor([0.0, 2.0]))
    tensor(0.)
"""

from __future__ import annotations

import agrad.nn.functional as F
from agrad._tensor import Tensor
from agrad.nn.modules.module import Module

__all__ = ["PairwiseDistance", "CosineSimilarity"]


class PairwiseDistance(Module):
    """The ``p``-norm of ``x1 - x2 + eps`` over the last dimension, for (N, D) or (D,)
    inputs (broadcast together); ``keepdim`` keeps that dimension as size 1.

    The degree is kept as ``norm`` (PyTorch's attribute name for ``p``).

        >>> agrad.nn.PairwiseDistance(p=1.0, eps=0.0)(agrad.tensor([[1.0, 2.0]]), agrad.tensor([[0.0, 0.0]]))
        tensor([3.])
    """

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm = p
        self.eps = eps
        self.keepdim = keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class CosineSimilarity(Module):
    """Cosine of the angle between ``x1`` and ``x2`` along ``dim``, each norm
    clamped to at least ``eps``."""

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim = dim
        self.eps = eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.cosine_similarity(x1, x2, self.dim, self.eps)
