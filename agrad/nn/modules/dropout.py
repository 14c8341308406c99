"""Dropout layers (mirrors ``torch.nn.modules.dropout``).

Each applies its ``agrad.nn.functional`` counterpart with ``training`` taken
from the module's mode: in ``eval()`` every one is the identity.  Masks come
from agrad's default generator, so ``agrad.manual_seed`` repeats them.

    >>> drop = agrad.nn.Dropout(p=0.5)
    >>> x = agrad.ones(4, 4)
    >>> y = drop(x)
    >>> sorted({float(v) for v in y.flatten()} - {0.0, 2.0})
    []
    >>> drop.eval()(x) is x
    True
"""

from __future__ import annotations

from agrad._tensor import Tensor
from agrad.nn import functional as F
from agrad.nn.modules.module import Module

__all__ = ["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"]


class _DropoutNd(Module):
    """The dropout layers' shared state: the probability ``p`` of dropping, checked to lie in [0, 1],
    and ``inplace``."""

    __constants__ = ["p", "inplace"]
    p: float
    inplace: bool

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p
        self.inplace = inplace

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """In training, zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``.

        >>> agrad.nn.Dropout(0.2)
        Dropout(p=0.2, inplace=False)
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training, self.inplace)


class Dropout1d(_DropoutNd):
    """In training, zero whole channels of ``(N, C, L)`` or ``(C, L)`` with probability ``p``,
    scaling the rest by ``1 / (1 - p)``.

        >>> agrad.nn.Dropout1d()(agrad.ones(2, 3, 5)).shape
        agrad.Size([2, 3, 5])
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    """In training, zero whole channels of ``(N, C, H, W)`` or ``(C, H, W)`` with probability ``p``,
    scaling the rest by ``1 / (1 - p)``.  A 3-D input is taken as ``(N, C, L)``, with PyTorch's warning.

        >>> agrad.nn.Dropout2d(0.3).eval()(agrad.ones(1, 2, 3, 3)).sum()
        tensor(18.)
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout2d(input, self.p, self.training, self.inplace)


class Dropout3d(_DropoutNd):
    """In training, zero whole channels of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` with probability ``p``,
    scaling the rest by ``1 / (1 - p)``.

        >>> agrad.nn.Dropout3d()(agrad.ones(1, 2, 2, 2, 2)).shape
        agrad.Size([1, 2, 2, 2, 2])
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout3d(input, self.p, self.training, self.inplace)


class AlphaDropout(_DropoutNd):
    """Dropout for SELU networks: dropped elements take SELU's negative saturation value and the
    output is scaled and shifted so a standardised input keeps mean 0 and variance 1.
    (``inplace`` is stored but unused, as in PyTorch.)

        >>> agrad.nn.AlphaDropout(0.2)
        AlphaDropout(p=0.2, inplace=False)
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.alpha_dropout(input, self.p, self.training)


class FeatureAlphaDropout(_DropoutNd):
    """:class:`AlphaDropout` of whole channels (dimension 1 of ``(N, C, *)``).

        >>> agrad.nn.FeatureAlphaDropout()(agrad.zeros(2, 3, 4)).shape
        agrad.Size([2, 3, 4])
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.feature_alpha_dropout(input, self.p, self.training)
