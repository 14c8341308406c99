"""Convolution layers (mirrors ``torch.nn.modules.conv``): Conv1d/2d/3d and ConvTranspose1d/2d/3d.

Each layer holds ``weight`` (``(out, in / groups, *kernel)``, or
``(in, out / groups, *kernel)`` when transposed) and an optional ``bias``,
initialised as PyTorch's ``reset_parameters`` does, and calls
``agrad.nn.functional.conv{n}d`` / ``conv_transpose{n}d``.  Constructor
arguments are normalised and checked as PyTorch does, with its errors, and
the attributes (``kernel_size``, ``stride``, ``padding``...) are the same
tuples, so ``repr`` and ``state_dict`` match PyTorch's.

    >>> _ = agrad.manual_seed(0)
    >>> conv = agrad.nn.Conv2d(3, 8, 3, padding=1)
    >>> conv(agrad.zeros(2, 3, 5, 5)).shape
    agrad.Size([2, 8, 5, 5])
    >>> [(name, tuple(p.shape)) for name, p in conv.named_parameters()]
    [('weight', (8, 3, 3, 3)), ('bias', (8,))]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from agrad._creation import empty
from agrad._grad_mode import no_grad
from agrad._tensor import Tensor
from agrad.nn import functional as F
from agrad.nn import init
from agrad.nn._convolution import _ntuple
from agrad.nn.modules.module import Module
from agrad.nn.parameter import Parameter

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]

class _ConvNd(Module):
    """What every convolution layer shares (PyTorch's ``_ConvNd``): argument checks, the
    ``weight``/``bias`` parameters and their initialisation, the padding for non-zero
    ``padding_mode``, and ``extra_repr``.  Arguments arrive normalised to tuples."""

    __constants__ = ["stride", "padding", "dilation", "groups", "padding_mode", "output_padding", "in_channels",
                     "out_channels", "kernel_size"]
    in_channels: int
    _reversed_padding_repeated_twice: list[int]
    out_channels: int
    kernel_size: tuple[int, ...]
    stride: tuple[int, ...]
    padding: str | tuple[int, ...]
    dilation: tuple[int, ...]
    transposed: bool
    output_padding: tuple[int, ...]
    groups: int
    padding_mode: str
    weight: Parameter
    bias: Parameter | None

    def __init__(self, in_channels: int, out_channels: int, kernel_size: tuple[int, ...], stride: tuple[int, ...],
                 padding: str | tuple[int, ...], dilation: tuple[int, ...], transposed: bool,
                 output_padding: tuple[int, ...], groups: int, bias: bool, padding_mode: str, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        valid_padding_strings = {"same", "valid"}
        if isinstance(padding, str):
            if padding not in valid_padding_strings:
                raise ValueError(f"Invalid padding string {padding!r}, should be one of {valid_padding_strings}")
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        valid_padding_modes = {"zeros", "reflect", "replicate", "circular"}  # torch's literal: its repr's order
        if padding_mode not in valid_padding_modes:
            raise ValueError(f"padding_mode must be one of {valid_padding_modes}, but got "
                             f"padding_mode='{padding_mode}'")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.transposed = transposed
        self.output_padding = output_padding
        self.groups = groups
        self.padding_mode = padding_mode
        self._reversed_padding_repeated_twice = self._explicit_padding()
        shape = (in_channels, out_channels // groups) if transposed else (out_channels, in_channels // groups)
        self.weight = Parameter(empty((*shape, *kernel_size), device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(empty(out_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def _explicit_padding(self) -> list[int]:
        """``padding`` in ``F.pad``'s order (last dimension first, each as ``[left, right]``);
        ``'same'`` puts the odd extra element on the right, as PyTorch does."""
        if not isinstance(self.padding, str):
            return [p for p in reversed(self.padding) for _ in range(2)]
        widths = [0, 0] * len(self.kernel_size)
        if self.padding == "same":
            for i, (d, k) in enumerate(zip(reversed(self.dilation), reversed(self.kernel_size))):
                total = d * (k - 1)
                widths[2 * i], widths[2 * i + 1] = total // 2, total - total // 2
        return widths

    def reset_parameters(self) -> None:
        """``weight`` by ``kaiming_uniform_(a=sqrt(5))``; ``bias`` from U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
        ``fan_in`` taken from ``weight`` as PyTorch does (also for the transposed layout)."""
        with no_grad():
            init.kaiming_uniform_(self.weight, a=math.sqrt(5))
            if self.bias is not None:
                fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
                bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * len(self.padding):
            s += f", padding={self.padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    """Conv1d/2d/3d: the public constructor and forward, for the ``_nd`` spatial dimensions
    and the functional ``_conv`` each subclass names."""

    _nd: ClassVar[int]
    _conv: ClassVar[Callable[..., Tensor]]

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        n = self._nd
        super().__init__(in_channels, out_channels, _ntuple(kernel_size, n), _ntuple(stride, n),
                         padding if isinstance(padding, str) else _ntuple(padding, n), _ntuple(dilation, n), False,
                         (0,) * n, groups, bias, padding_mode, device=device, dtype=dtype)

    def _conv_forward(self, input: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        """The convolution with ``weight`` and ``bias`` (a hook for layers that transform
        the weight first); non-zero padding modes pad explicitly, then convolve unpadded."""
        if self.padding_mode != "zeros":
            padded = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return self._conv(padded, weight, bias, self.stride, (0,) * self._nd, self.dilation, self.groups)
        return self._conv(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input: Tensor) -> Tensor:
        return self._conv_forward(input, self.weight, self.bias)


class Conv1d(_Conv):
    """1-D convolution (cross-correlation) over ``(N, C_in, L)`` or ``(C_in, L)`` input (``torch.nn.Conv1d``).

    ``padding`` is an int, a tuple, ``'valid'`` (none) or ``'same'`` (output
    as long as the input; stride 1 only); ``padding_mode`` is ``'zeros'``,
    ``'reflect'``, ``'replicate'`` or ``'circular'``.

        >>> m = agrad.nn.Conv1d(4, 6, 3, stride=2, bias=False)
        >>> m
        Conv1d(4, 6, kernel_size=(3,), stride=(2,), bias=False)
        >>> m(agrad.zeros(2, 4, 9)).shape
        agrad.Size([2, 6, 4])
    """

    _nd = 1
    _conv = staticmethod(F.conv1d)


class Conv2d(_Conv):
    """2-D convolution over ``(N, C_in, H, W)`` or ``(C_in, H, W)`` input (``torch.nn.Conv2d``).
    See :class:`Conv1d` for ``padding`` and ``padding_mode``.

        >>> m = agrad.nn.Conv2d(4, 6, (3, 5), padding="same", padding_mode="reflect", groups=2)
        >>> m
        Conv2d(4, 6, kernel_size=(3, 5), stride=(1, 1), padding=same, groups=2, padding_mode=reflect)
        >>> m(agrad.zeros(4, 7, 8)).shape
        agrad.Size([6, 7, 8])
    """

    _nd = 2
    _conv = staticmethod(F.conv2d)


class Conv3d(_Conv):
    """3-D convolution over ``(N, C_in, D, H, W)`` or ``(C_in, D, H, W)`` input (``torch.nn.Conv3d``).
    See :class:`Conv1d` for ``padding`` and ``padding_mode``.

        >>> m = agrad.nn.Conv3d(2, 3, 2, dilation=2)
        >>> m(agrad.zeros(1, 2, 5, 5, 5)).shape
        agrad.Size([1, 3, 3, 3, 3])
    """

    _nd = 3
    _conv = staticmethod(F.conv3d)


class _ConvTransposeNd(_ConvNd):
    """ConvTranspose1d/2d/3d: the public constructor, the ``output_size`` argument of
    ``forward`` and the forward itself, for the ``_nd`` spatial dimensions and the
    functional ``_conv`` each subclass names.  Only zero padding exists for them."""

    _nd: ClassVar[int]
    _conv: ClassVar[Callable[..., Tensor]]

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1, padding: Any = 0,
                 output_padding: Any = 0, groups: int = 1, bias: bool = True, dilation: Any = 1,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None) -> None:
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        n = self._nd
        super().__init__(in_channels, out_channels, _ntuple(kernel_size, n), _ntuple(stride, n),
                         _ntuple(padding, n), _ntuple(dilation, n), True, _ntuple(output_padding, n), groups, bias,
                         padding_mode, device=device, dtype=dtype)

    def _output_padding(self, input: Tensor, output_size: Sequence[int] | None, stride: Sequence[int],
                        padding: Sequence[int], kernel_size: Sequence[int], num_spatial_dims: int,
                        dilation: Sequence[int] | None = None) -> list[int]:
        """The ``output_padding`` that makes the output ``output_size`` (spatial, or with the
        batch and channel dimensions), checked against the sizes one input size can give."""
        if output_size is None:
            return list(self.output_padding)
        has_batch_dim = input.dim() == num_spatial_dims + 2
        num_non_spatial_dims = 2 if has_batch_dim else 1
        if len(output_size) == num_non_spatial_dims + num_spatial_dims:
            output_size = output_size[num_non_spatial_dims:]
        if len(output_size) != num_spatial_dims:
            raise ValueError(f"ConvTranspose{num_spatial_dims}D: for {input.dim()}D input, output_size must have "
                             f"{num_spatial_dims} or {num_non_spatial_dims + num_spatial_dims} elements "
                             f"(got {len(output_size)})")
        min_sizes = [(input.size(d + num_non_spatial_dims) - 1) * stride[d] - 2 * padding[d]
                     + (dilation[d] if dilation is not None else 1) * (kernel_size[d] - 1) + 1
                     for d in range(num_spatial_dims)]
        max_sizes = [m + s - 1 for m, s in zip(min_sizes, stride)]
        if any(not lo <= size <= hi for size, lo, hi in zip(output_size, min_sizes, max_sizes)):
            raise ValueError(f"requested an output size of {output_size}, but valid sizes range from {min_sizes} to "
                             f"{max_sizes} (for an input of {input.size()[2:]})")
        return [size - lo for size, lo in zip(output_size, min_sizes)]

    def forward(self, input: Tensor, output_size: Sequence[int] | None = None) -> Tensor:
        if self.padding_mode != "zeros":
            raise ValueError(f"Only `zeros` padding mode is supported for ConvTranspose{self._nd}d")
        assert isinstance(self.padding, tuple)
        output_padding = self._output_padding(input, output_size, self.stride, self.padding, self.kernel_size,
                                              self._nd, self.dilation)
        return self._conv(input, self.weight, self.bias, self.stride, self.padding, output_padding,
                                self.groups, self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    """1-D transposed convolution (the gradient of Conv1d with respect to its input;
    ``torch.nn.ConvTranspose1d``).  ``output_padding`` (or ``forward``'s ``output_size``)
    picks one of the output sizes a strided Conv1d maps to the same input size.

        >>> m = agrad.nn.ConvTranspose1d(4, 2, 3, stride=2, padding=1)
        >>> m
        ConvTranspose1d(4, 2, kernel_size=(3,), stride=(2,), padding=(1,))
        >>> m(agrad.zeros(1, 4, 5)).shape
        agrad.Size([1, 2, 9])
        >>> m(agrad.zeros(1, 4, 5), output_size=[10]).shape
        agrad.Size([1, 2, 10])
    """

    _nd = 1
    _conv = staticmethod(F.conv_transpose1d)


class ConvTranspose2d(_ConvTransposeNd):
    """2-D transposed convolution (``torch.nn.ConvTranspose2d``).  See :class:`ConvTranspose1d`.

        >>> down = agrad.nn.Conv2d(2, 2, 3, stride=2, padding=1)
        >>> up = agrad.nn.ConvTranspose2d(2, 2, 3, stride=2, padding=1)
        >>> x = agrad.zeros(1, 2, 12, 12)
        >>> up(down(x), output_size=x.size()).shape
        agrad.Size([1, 2, 12, 12])
    """

    _nd = 2
    _conv = staticmethod(F.conv_transpose2d)


class ConvTranspose3d(_ConvTransposeNd):
    """3-D transposed convolution (``torch.nn.ConvTranspose3d``).  See :class:`ConvTranspose1d`.

        >>> m = agrad.nn.ConvTranspose3d(2, 4, (1, 2, 3), groups=2)
        >>> m.weight.shape
        agrad.Size([2, 2, 1, 2, 3])
    """

    _nd = 3
    _conv = staticmethod(F.conv_transpose3d)
