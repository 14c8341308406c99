"""PixelShuffle and PixelUnshuffle: trade channels for resolution (mirrors ``torch.nn.modules.pixelshuffle``).

``PixelShuffle(r)`` rearranges ``(*, C * r^2, H, W)`` into ``(*, C, H * r, W * r)``
(sub-pixel convolution's upsampling step); ``PixelUnshuffle(r)`` undoes it.

    >>> x = agrad.arange(16.0).reshape(1, 4, 2, 2)
    >>> up = agrad.nn.PixelShuffle(2)(x)
    >>> up.shape
    agrad.Size([1, 1, 4, 4])
    >>> bool((agrad.nn.PixelUnshuffle(2)(up) == x).all())
    True
"""

from __future__ import annotations

from agrad._tensor import Tensor
from agrad.nn import functional as F
from agrad.nn.modules.module import Module

__all__ = ["PixelShuffle", "PixelUnshuffle"]


class PixelShuffle(Module):
    """``(*, C * r^2, H, W)`` to ``(*, C, H * r, W * r)`` with ``r = upscale_factor``.

        >>> agrad.nn.PixelShuffle(3)
        PixelShuffle(upscale_factor=3)
    """

    __constants__ = ["upscale_factor"]
    upscale_factor: int

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """``(*, C, H * r, W * r)`` to ``(*, C * r^2, H, W)`` with ``r = downscale_factor``.

        >>> agrad.nn.PixelUnshuffle(2)(agrad.zeros(3, 4, 6)).shape
        agrad.Size([12, 2, 3])
    """

    __constants__ = ["downscale_factor"]
    downscale_factor: int

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"
