"""Padding layers: constant (and zero), reflection, replication and circular (mirrors ``torch.nn.modules.padding``).

``padding`` is an int (the same on every side) or a tuple ``(left, right)``,
``(left, right, top, bottom)`` or ``(left, right, top, bottom, front, back)``
for the 1d, 2d and 3d layers, last dimension first as in ``nn.functional.pad``.
Negative padding crops.

The reflect, replicate and circular layers call ``nn.functional.pad``, which
gathers (Note [Non-constant padding] in ``agrad/_ops/_shape.py``).

    >>> x = agrad.arange(4.0).reshape(1, 1, 4)
    >>> agrad.nn.ReflectionPad1d(2)(x)
    tensor([[[2., 1., 0., 1., 2., 3., 2., 1.]]])
    >>> agrad.nn.ReplicationPad1d((1, 2))(x)
    tensor([[[0., 0., 1., 2., 3., 3., 3.]]])
    >>> agrad.nn.CircularPad1d(1)(x)
    tensor([[[3., 0., 1., 2., 3., 0.]]])
"""

from __future__ import annotations

from typing import Any, ClassVar

from agrad._tensor import Tensor
from agrad.nn import functional as F
from agrad.nn._convolution import _ntuple
from agrad.nn.modules.module import Module

__all__ = [
    "CircularPad1d", "CircularPad2d", "CircularPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
    "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
    "ReplicationPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
]


class _PadNd(Module):
    """A padding layer of ``_dims`` dimensions: ``padding`` normalised to a ``2 * _dims`` tuple."""

    __constants__ = ["padding"]
    _dims: ClassVar[int]
    padding: tuple[int, ...]

    def __init__(self, padding: Any) -> None:
        super().__init__()
        self.padding = _ntuple(padding, 2 * self._dims)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _GatherPadNd(_PadNd):
    """Padding by ``_mode``, one of reflect, replicate, circular (``F.pad``)."""

    _mode: ClassVar[str]

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, self._mode)


class _ConstantPadNd(_PadNd):
    """Padding with the constant ``value``."""

    __constants__ = ["padding", "value"]
    value: float

    def __init__(self, padding: Any, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class _ZeroPadNd(_ConstantPadNd):
    """Padding with zeros; its repr shows only the padding."""

    def __init__(self, padding: Any) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _CircularPadNd(_GatherPadNd):
    """Circular padding: what leaves one edge comes back at the other.  The input must be ``(N, C, *)`` or
    ``(C, *)`` over the padded dimensions (PyTorch's ValueError otherwise)."""

    _mode = "circular"

    def forward(self, input: Tensor) -> Tensor:
        if input.dim() not in (self._dims + 1, self._dims + 2):
            raise ValueError(f"expected {self._dims + 1}D or {self._dims + 2}D input (got {input.dim()}D input)")
        return super().forward(input)


class _ReflectionPadNd(_GatherPadNd):
    """Reflection padding: mirrored about the edge, the edge itself not repeated (padding < size)."""

    _mode = "reflect"


class _ReplicationPadNd(_GatherPadNd):
    """Replication padding: the edge value repeated."""

    _mode = "replicate"


class CircularPad1d(_CircularPadNd):
    """Pad the last dimension of ``(N, C, W)`` or ``(C, W)`` circularly by ``padding`` (int or (left, right)).

        >>> agrad.nn.CircularPad1d((1, 2))
        CircularPad1d((1, 2))
    """

    _dims = 1


class CircularPad2d(_CircularPadNd):
    """Pad the last two dimensions of ``(N, C, H, W)`` or ``(C, H, W)`` circularly.

        >>> agrad.nn.CircularPad2d(1)(agrad.zeros(1, 2, 3, 3)).shape
        agrad.Size([1, 2, 5, 5])
    """

    _dims = 2


class CircularPad3d(_CircularPadNd):
    """Pad the last three dimensions of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` circularly.

        >>> agrad.nn.CircularPad3d(1)(agrad.zeros(2, 2, 2, 2)).shape
        agrad.Size([2, 4, 4, 4])
    """

    _dims = 3


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dimension with ``value``.

        >>> agrad.nn.ConstantPad1d(1, 3.5)(agrad.zeros(1, 2))
        tensor([[3.5000, 0.0000, 0.0000, 3.5000]])
    """

    _dims = 1


class ConstantPad2d(_ConstantPadNd):
    """Pad the last two dimensions with ``value``.

        >>> agrad.nn.ConstantPad2d((1, 0, 0, 2), -1.0)
        ConstantPad2d(padding=(1, 0, 0, 2), value=-1.0)
    """

    _dims = 2


class ConstantPad3d(_ConstantPadNd):
    """Pad the last three dimensions with ``value``.

        >>> agrad.nn.ConstantPad3d(1, 0.5)(agrad.zeros(1, 1, 1)).shape
        agrad.Size([3, 3, 3])
    """

    _dims = 3


class ReflectionPad1d(_ReflectionPadNd):
    """Pad the last dimension of ``(N, C, W)`` or ``(C, W)`` by reflection (each padding < W).

        >>> agrad.nn.ReflectionPad1d((0, 2))(agrad.tensor([[1.0, 2.0, 3.0]]))
        tensor([[1., 2., 3., 2., 1.]])
    """

    _dims = 1


class ReflectionPad2d(_ReflectionPadNd):
    """Pad the last two dimensions of ``(N, C, H, W)`` or ``(C, H, W)`` by reflection.

        >>> agrad.nn.ReflectionPad2d(1)(agrad.zeros(1, 3, 3)).shape
        agrad.Size([1, 5, 5])
    """

    _dims = 2


class ReflectionPad3d(_ReflectionPadNd):
    """Pad the last three dimensions of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` by reflection.

        >>> agrad.nn.ReflectionPad3d(1)
        ReflectionPad3d((1, 1, 1, 1, 1, 1))
    """

    _dims = 3


class ReplicationPad1d(_ReplicationPadNd):
    """Pad the last dimension of ``(N, C, W)`` or ``(C, W)`` by repeating the edge values.

        >>> agrad.nn.ReplicationPad1d((2, 0))(agrad.tensor([[1.0, 2.0]]))
        tensor([[1., 1., 1., 2.]])
    """

    _dims = 1


class ReplicationPad2d(_ReplicationPadNd):
    """Pad the last two dimensions of ``(N, C, H, W)`` or ``(C, H, W)`` by repeating the edge values.

        >>> agrad.nn.ReplicationPad2d((1, 1, 2, 0))(agrad.zeros(1, 1, 2, 2)).shape
        agrad.Size([1, 1, 4, 4])
    """

    _dims = 2


class ReplicationPad3d(_ReplicationPadNd):
    """Pad the last three dimensions of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` by repeating the edge values.

        >>> agrad.nn.ReplicationPad3d(1)(agrad.zeros(1, 1, 1, 1)).shape
        agrad.Size([1, 3, 3, 3])
    """

    _dims = 3


class ZeroPad1d(_ZeroPadNd, ConstantPad1d):
    """Pad the last dimension with zeros.

        >>> agrad.nn.ZeroPad1d((1, 2))(agrad.ones(1, 2))
        tensor([[0., 1., 1., 0., 0.]])
    """


class ZeroPad2d(_ZeroPadNd, ConstantPad2d):
    """Pad the last two dimensions with zeros.

        >>> agrad.nn.ZeroPad2d(1)
        ZeroPad2d((1, 1, 1, 1))
    """


class ZeroPad3d(_ZeroPadNd, ConstantPad3d):
    """Pad the last three dimensions with zeros.

        >>> agrad.nn.ZeroPad3d((1, 1, 0, 0, 0, 0))(agrad.zeros(1, 1, 1, 1)).shape
        agrad.Size([1, 1, 1, 3])
    """
