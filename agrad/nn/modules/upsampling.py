"""Upsampling layers (mirrors ``torch.nn.modules.upsampling``): ``nn.functional.interpolate`` as a module.

    >>> up = agrad.nn.Upsample(scale_factor=2, mode="nearest")
    >>> up(agrad.ones(1, 1, 2, 3)).shape
    agrad.Size([1, 1, 4, 6])
    >>> up
    Upsample(scale_factor=2.0, mode='nearest')
"""

from __future__ import annotations

from typing import Any

from agrad._tensor import Tensor
from agrad.nn import functional as F
from agrad.nn.modules.module import Module

__all__ = ["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d"]


class Upsample(Module):
    """Resize ``(N, C, *spatial)`` to ``size`` or by ``scale_factor`` (one of them), with ``mode`` one of
    ``'nearest'``, ``'nearest-exact'``, ``'linear'``, ``'bilinear'``, ``'bicubic'``, ``'trilinear'``
    (see :func:`agrad.nn.functional.interpolate`).  Scale factors are stored as floats.

        >>> agrad.nn.Upsample(size=(3, 5), mode="bilinear", align_corners=False)(agrad.zeros(1, 2, 2, 2)).shape
        agrad.Size([1, 2, 3, 5])
    """

    __constants__ = ["size", "scale_factor", "mode", "align_corners", "name", "recompute_scale_factor"]
    name: str
    size: Any
    scale_factor: float | tuple[float, ...] | None
    mode: str
    align_corners: bool | None
    recompute_scale_factor: bool | None

    def __init__(self, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                 align_corners: bool | None = None, recompute_scale_factor: bool | None = None) -> None:
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, tuple):
            self.scale_factor = tuple(float(factor) for factor in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickling a module saved before ``recompute_scale_factor`` existed gives it PyTorch's old default."""
        state.setdefault("recompute_scale_factor", True)
        super().__setstate__(state)

    def extra_repr(self) -> str:
        info = ("scale_factor=" + repr(self.scale_factor) if self.scale_factor is not None
                else "size=" + repr(self.size))
        return info + ", mode=" + repr(self.mode)


class UpsamplingNearest2d(Upsample):
    """:class:`Upsample` with ``mode='nearest'`` (kept for old code; use Upsample).

        >>> agrad.nn.UpsamplingNearest2d(scale_factor=3)(agrad.zeros(1, 1, 2, 2)).shape
        agrad.Size([1, 1, 6, 6])
    """

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """:class:`Upsample` with ``mode='bilinear'`` and ``align_corners=True`` (kept for old code; use Upsample).

        >>> agrad.nn.UpsamplingBilinear2d(size=4)
        UpsamplingBilinear2d(size=4, mode='bilinear')
    """

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
