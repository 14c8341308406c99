"""Pooling layers (mirrors ``torch.nn.modules.pooling``).

Max, average, power-average (LP), adaptive max and adaptive average pooling
in 1, 2 and 3 spatial dimensions, and max unpooling (the partial inverse of a
max pool, from its indices).  Each layer stores its arguments as PyTorch's
does (so ``repr`` matches) and calls the ``agrad.nn.functional`` function of
the same name.  (FractionalMaxPool2d/3d are left out: agrad has no
fractional max pool op.)

    >>> pool = agrad.nn.MaxPool2d(2, return_indices=True)
    >>> out, indices = pool(agrad.arange(16.0).reshape(1, 1, 4, 4))
    >>> out
    tensor([[[[ 5.,  7.],
              [13., 15.]]]])
    >>> agrad.nn.MaxUnpool2d(2)(out, indices).shape
    agrad.Size([1, 1, 4, 4])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from agrad._tensor import Tensor
from agrad.nn import functional as F
from agrad.nn._convolution import _ntuple
from agrad.nn.modules.module import Module

__all__ = ["MaxPool1d", "MaxPool2d", "MaxPool3d", "MaxUnpool1d", "MaxUnpool2d", "MaxUnpool3d", "AvgPool1d",
           "AvgPool2d", "AvgPool3d", "LPPool1d", "LPPool2d", "LPPool3d", "AdaptiveMaxPool1d", "AdaptiveMaxPool2d",
           "AdaptiveMaxPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d"]


class _MaxPoolNd(Module):
    """Max pooling over windows of ``kernel_size`` (``stride`` defaults to it); with
    ``return_indices`` the forward also returns each maximum's flat index in its plane,
    which :class:`MaxUnpool1d` and its kin take."""

    __constants__ = ["kernel_size", "stride", "padding", "dilation", "return_indices", "ceil_mode"]
    _pool: ClassVar[Callable[..., Any]]
    return_indices: bool
    ceil_mode: bool

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
                 return_indices: bool = False, ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input: Tensor) -> Any:
        return self._pool(input, self.kernel_size, self.stride, self.padding, self.dilation,
                          ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """1-D max pooling over ``(N, C, L)`` or ``(C, L)`` input (``torch.nn.MaxPool1d``).

        >>> agrad.nn.MaxPool1d(3, stride=2, ceil_mode=True)(agrad.arange(6.0).reshape(1, 6))
        tensor([[2., 4., 5.]])
    """

    _pool = staticmethod(F.max_pool1d)


class MaxPool2d(_MaxPoolNd):
    """2-D max pooling over ``(N, C, H, W)`` or ``(C, H, W)`` input (``torch.nn.MaxPool2d``).

        >>> agrad.nn.MaxPool2d((2, 1), padding=(1, 0), dilation=2)
        MaxPool2d(kernel_size=(2, 1), stride=(2, 1), padding=(1, 0), dilation=2, ceil_mode=False)
    """

    _pool = staticmethod(F.max_pool2d)


class MaxPool3d(_MaxPoolNd):
    """3-D max pooling over ``(N, C, D, H, W)`` or ``(C, D, H, W)`` input (``torch.nn.MaxPool3d``).

        >>> agrad.nn.MaxPool3d(2)(agrad.ones(1, 1, 4, 4, 4)).shape
        agrad.Size([1, 1, 2, 2, 2])
    """

    _pool = staticmethod(F.max_pool3d)


class _MaxUnpoolNd(Module):
    """Max unpooling: each value goes to the flat position its index names in an output
    plane of zeros, whose size is computed from the pool's arguments or given as
    ``output_size`` (PyTorch's ``_MaxUnpoolNd``)."""

    _nd: ClassVar[int]
    _unpool: ClassVar[Callable[..., Tensor]]

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0) -> None:
        super().__init__()
        self.kernel_size = _ntuple(kernel_size, self._nd)
        self.stride = _ntuple(stride if stride is not None else kernel_size, self._nd)
        self.padding = _ntuple(padding, self._nd)

    def forward(self, input: Tensor, indices: Tensor, output_size: Sequence[int] | None = None) -> Tensor:
        return self._unpool(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """Partial inverse of :class:`MaxPool1d` (``torch.nn.MaxUnpool1d``).

        >>> out, idx = agrad.nn.MaxPool1d(2, return_indices=True)(agrad.tensor([[1.0, 3.0, 2.0, 0.0]]))
        >>> agrad.nn.MaxUnpool1d(2)(out, idx)
        tensor([[0., 3., 2., 0.]])
    """

    _nd = 1
    _unpool = staticmethod(F.max_unpool1d)


class MaxUnpool2d(_MaxUnpoolNd):
    """Partial inverse of :class:`MaxPool2d` (``torch.nn.MaxUnpool2d``).

        >>> agrad.nn.MaxUnpool2d(2, stride=1)
        MaxUnpool2d(kernel_size=(2, 2), stride=(1, 1), padding=(0, 0))
    """

    _nd = 2
    _unpool = staticmethod(F.max_unpool2d)


class MaxUnpool3d(_MaxUnpoolNd):
    """Partial inverse of :class:`MaxPool3d` (``torch.nn.MaxUnpool3d``).

        >>> agrad.nn.MaxUnpool3d(2)
        MaxUnpool3d(kernel_size=(2, 2, 2), stride=(2, 2, 2), padding=(0, 0, 0))
    """

    _nd = 3
    _unpool = staticmethod(F.max_unpool3d)


class _AvgPoolNd(Module):
    """Average pooling (PyTorch's ``_AvgPoolNd``): the mean over each window, counting the
    zero padding unless ``count_include_pad=False``."""

    __constants__ = ["kernel_size", "stride", "padding", "ceil_mode", "count_include_pad"]
    ceil_mode: bool
    count_include_pad: bool

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(_AvgPoolNd):
    """1-D average pooling over ``(N, C, L)`` or ``(C, L)`` input (``torch.nn.AvgPool1d``).

        >>> m = agrad.nn.AvgPool1d(2, padding=1, count_include_pad=False)
        >>> m
        AvgPool1d(kernel_size=(2,), stride=(2,), padding=(1,))
        >>> m(agrad.tensor([[1.0, 3.0, 5.0]]))
        tensor([[1., 4.]])
    """

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
                 count_include_pad: bool = True) -> None:
        super().__init__()
        self.kernel_size = _ntuple(kernel_size, 1)
        self.stride = _ntuple(stride if stride is not None else kernel_size, 1)
        self.padding = _ntuple(padding, 1)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)


class _AvgPoolDivisorNd(_AvgPoolNd):
    """AvgPool2d/3d: the arguments kept as given, and ``divisor_override``, a fixed divisor
    in place of the window's size."""

    __constants__ = ["kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"]
    _pool: ClassVar[Callable[..., Tensor]]

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override: int | None = None) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input: Tensor) -> Tensor:
        return self._pool(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad,
                          self.divisor_override)


class AvgPool2d(_AvgPoolDivisorNd):
    """2-D average pooling over ``(N, C, H, W)`` or ``(C, H, W)`` input (``torch.nn.AvgPool2d``).

        >>> agrad.nn.AvgPool2d(2, divisor_override=1)(agrad.ones(1, 1, 2, 2))
        tensor([[[[4.]]]])
    """

    _pool = staticmethod(F.avg_pool2d)


class AvgPool3d(_AvgPoolDivisorNd):
    """3-D average pooling over ``(N, C, D, H, W)`` or ``(C, D, H, W)`` input (``torch.nn.AvgPool3d``).

        >>> agrad.nn.AvgPool3d((1, 2, 2), stride=1)
        AvgPool3d(kernel_size=(1, 2, 2), stride=1, padding=0)
    """

    _pool = staticmethod(F.avg_pool3d)


class _LPPoolNd(Module):
    """Power-average pooling: ``(sum over the window of x ** norm_type) ** (1 / norm_type)``
    (PyTorch's ``_LPPoolNd``; ``stride=None`` means the kernel size)."""

    __constants__ = ["norm_type", "kernel_size", "stride", "ceil_mode"]
    _pool: ClassVar[Callable[..., Tensor]]
    norm_type: float
    ceil_mode: bool

    def __init__(self, norm_type: float, kernel_size: Any, stride: Any = None, ceil_mode: bool = False) -> None:
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def forward(self, input: Tensor) -> Tensor:
        return self._pool(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self) -> str:
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPoolNd):
    """1-D power-average pooling (``torch.nn.LPPool1d``).

        >>> agrad.nn.LPPool1d(2, 2)(agrad.tensor([[3.0, 4.0]]))
        tensor([[5.]])
    """

    _pool = staticmethod(F.lp_pool1d)


class LPPool2d(_LPPoolNd):
    """2-D power-average pooling (``torch.nn.LPPool2d``).

        >>> agrad.nn.LPPool2d(1.5, (3, 2), stride=(2, 1))
        LPPool2d(norm_type=1.5, kernel_size=(3, 2), stride=(2, 1), ceil_mode=False)
    """

    _pool = staticmethod(F.lp_pool2d)


class LPPool3d(_LPPoolNd):
    """3-D power-average pooling (``torch.nn.LPPool3d``).

        >>> agrad.nn.LPPool3d(2, 2)(agrad.ones(1, 1, 2, 2, 2))
        tensor([[[[[2.8284]]]]])
    """

    _pool = staticmethod(F.lp_pool3d)


class _AdaptiveMaxPoolNd(Module):
    """Adaptive max pooling: windows chosen so the output has ``output_size`` (an entry
    None keeps that input size); ``return_indices`` as for max pooling."""

    __constants__ = ["output_size", "return_indices"]
    _pool: ClassVar[Callable[..., Any]]
    return_indices: bool

    def __init__(self, output_size: Any, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def forward(self, input: Tensor) -> Any:
        return self._pool(input, self.output_size, self.return_indices)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool1d(_AdaptiveMaxPoolNd):
    """1-D adaptive max pooling (``torch.nn.AdaptiveMaxPool1d``).

        >>> agrad.nn.AdaptiveMaxPool1d(2)(agrad.tensor([[1.0, 5.0, 2.0, 4.0, 3.0]]))
        tensor([[5., 4.]])
    """

    _pool = staticmethod(F.adaptive_max_pool1d)


class AdaptiveMaxPool2d(_AdaptiveMaxPoolNd):
    """2-D adaptive max pooling (``torch.nn.AdaptiveMaxPool2d``).

        >>> agrad.nn.AdaptiveMaxPool2d((None, 1))(agrad.ones(1, 3, 4)).shape
        agrad.Size([1, 3, 1])
    """

    _pool = staticmethod(F.adaptive_max_pool2d)


class AdaptiveMaxPool3d(_AdaptiveMaxPoolNd):
    """3-D adaptive max pooling (``torch.nn.AdaptiveMaxPool3d``).

        >>> agrad.nn.AdaptiveMaxPool3d(1, return_indices=True)
        AdaptiveMaxPool3d(output_size=1)
    """

    _pool = staticmethod(F.adaptive_max_pool3d)


class _AdaptiveAvgPoolNd(Module):
    """Adaptive average pooling: windows chosen so the output has ``output_size`` (an entry
    None keeps that input size)."""

    __constants__ = ["output_size"]
    _pool: ClassVar[Callable[..., Tensor]]

    def __init__(self, output_size: Any) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, input: Tensor) -> Tensor:
        return self._pool(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptiveAvgPoolNd):
    """1-D adaptive average pooling (``torch.nn.AdaptiveAvgPool1d``).

        >>> agrad.nn.AdaptiveAvgPool1d(1)(agrad.tensor([[1.0, 2.0, 6.0]]))
        tensor([[3.]])
    """

    _pool = staticmethod(F.adaptive_avg_pool1d)


class AdaptiveAvgPool2d(_AdaptiveAvgPoolNd):
    """2-D adaptive average pooling (``torch.nn.AdaptiveAvgPool2d``), a network's usual global pool.

        >>> agrad.nn.AdaptiveAvgPool2d((1, 1))(agrad.ones(2, 3, 5, 7)).shape
        agrad.Size([2, 3, 1, 1])
    """

    _pool = staticmethod(F.adaptive_avg_pool2d)


class AdaptiveAvgPool3d(_AdaptiveAvgPoolNd):
    """3-D adaptive average pooling (``torch.nn.AdaptiveAvgPool3d``).

        >>> agrad.nn.AdaptiveAvgPool3d(2)(agrad.ones(1, 4, 4, 4)).shape
        agrad.Size([1, 2, 2, 2])
    """

    _pool = staticmethod(F.adaptive_avg_pool3d)
