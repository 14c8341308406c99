"""Fold and Unfold: sliding local blocks to columns and back (mirrors ``torch.nn.modules.fold``).

``Unfold`` turns each ``kernel_size`` block of a batched ``(N, C, H, W)`` input
into a column of ``(N, C * prod(kernel_size), L)``; ``Fold`` sums such columns
back into an image, so ``Fold(Unfold(x))`` is ``x`` times each pixel's block count.

    >>> x = agrad.ones(1, 2, 4, 4)
    >>> cols = agrad.nn.Unfold(kernel_size=2, stride=2)(x)
    >>> cols.shape
    agrad.Size([1, 8, 4])
    >>> bool((agrad.nn.Fold(output_size=4, kernel_size=2, stride=2)(cols) == x).all())
    True
"""

from __future__ import annotations

from typing import Any

from agrad._tensor import Tensor
from agrad.nn import functional as F
from agrad.nn.modules.module import Module

__all__ = ["Fold", "Unfold"]


class Fold(Module):
    """Sum sliding-block columns ``(N, C * prod(kernel_size), L)`` into an ``(N, C, *output_size)`` image
    (the adjoint of :class:`Unfold`).  Sizes are ints or pairs.

        >>> agrad.nn.Fold(output_size=(4, 5), kernel_size=(2, 2))
        Fold(output_size=(4, 5), kernel_size=(2, 2), dilation=1, padding=0, stride=1)
    """

    __constants__ = ["output_size", "kernel_size", "dilation", "padding", "stride"]

    def __init__(self, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
                 stride: Any = 1) -> None:
        super().__init__()
        self.output_size = output_size
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input: Tensor) -> Tensor:
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return ("output_size={output_size}, kernel_size={kernel_size}, dilation={dilation}, padding={padding}, "
                "stride={stride}".format(**self.__dict__))


class Unfold(Module):
    """Extract sliding ``kernel_size`` blocks of ``(N, C, H, W)`` (or ``(C, H, W)``) as columns
    ``(N, C * prod(kernel_size), L)``, ``L`` being the number of block positions.

        >>> agrad.nn.Unfold(kernel_size=3, padding=1)(agrad.zeros(2, 1, 4, 4)).shape
        agrad.Size([2, 9, 16])
    """

    __constants__ = ["kernel_size", "dilation", "padding", "stride"]

    def __init__(self, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input: Tensor) -> Tensor:
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return "kernel_size={kernel_size}, dilation={dilation}, padding={padding}, stride={stride}".format(
            **self.__dict__)
