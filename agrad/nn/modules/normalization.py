"""Normalisation layers that need no running statistics (mirrors ``torch.nn.modules.normalization``).

LayerNorm and RMSNorm normalise over the trailing ``normalized_shape``
dimensions of each sample, GroupNorm over groups of channels, and
LocalResponseNorm across neighbouring channels.  None keeps state beyond
its optional affine parameters, so training and evaluation behave alike;
each forward is the ``agrad.nn.functional`` function of the same name.
(CrossMapLRN2d, a legacy Lua-torch layer whose kernel sums an uneven
channel window that always includes channel 0, is left out.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agrad._creation import empty
from agrad._tensor import Tensor
from agrad.nn import functional as F
from agrad.nn import init
from agrad.nn.modules.module import Module
from agrad.nn.parameter import Parameter

__all__ = ["LocalResponseNorm", "LayerNorm", "GroupNorm", "RMSNorm"]


def _as_shape(normalized_shape: int | Sequence[int]) -> tuple[int, ...]:
    """``normalized_shape`` as a tuple, an integer meaning one trailing dimension (as in PyTorch)."""
    if isinstance(normalized_shape, Sequence):
        return tuple(normalized_shape)
    return (int(normalized_shape),)


def _register_affine(module: Module, shape: tuple[int, ...], affine: bool, bias: bool, device: Any,
                     dtype: Any) -> None:
    """Register ``module.weight`` and ``module.bias``, uninitialised Parameters of ``shape``, in
    PyTorch's order; each is None without ``affine``, and the bias also without ``bias``."""
    module.register_parameter("weight", Parameter(empty(shape, device=device, dtype=dtype)) if affine else None)
    module.register_parameter("bias", Parameter(empty(shape, device=device, dtype=dtype)) if affine and bias else None)


def _reset_affine(module: Module) -> None:
    """The affine parameters' initial values, as PyTorch's norm layers set them: weight ones, bias zeros."""
    if module.weight is not None:
        init.ones_(module.weight)
    if module.bias is not None:
        init.zeros_(module.bias)


class LocalResponseNorm(Module):
    """Local response normalisation across channels (``torch.nn.LocalResponseNorm``):
    each element is divided by ``(k + alpha / size * sum of squares over size neighbouring channels) ** beta``.

        >>> m = agrad.nn.LocalResponseNorm(2)
        >>> m
        LocalResponseNorm(2, alpha=0.0001, beta=0.75, k=1.0)
        >>> m(agrad.ones(1, 3, 4)).shape
        agrad.Size([1, 3, 4])
    """

    __constants__ = ["size", "alpha", "beta", "k"]
    size: int
    alpha: float
    beta: float
    k: float

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> None:
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input: Tensor) -> Tensor:
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class LayerNorm(Module):
    """Layer normalisation over the trailing ``normalized_shape`` dimensions (``torch.nn.LayerNorm``).

    With ``elementwise_affine`` it learns a ``weight`` (ones) and, unless
    ``bias=False``, a ``bias`` (zeros) of shape ``normalized_shape``; the
    variance is the biased one, as in PyTorch.

        >>> m = agrad.nn.LayerNorm(4)
        >>> m
        LayerNorm((4,), eps=1e-05, elementwise_affine=True, bias=True)
        >>> m(agrad.arange(8.0).reshape(2, 4)).sum(-1).detach()
        tensor([0., 0.])
    """

    __constants__ = ["normalized_shape", "eps", "elementwise_affine"]
    normalized_shape: tuple[int, ...]
    eps: float
    elementwise_affine: bool

    def __init__(self, normalized_shape: int | Sequence[int], eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.normalized_shape = _as_shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _register_affine(self, self.normalized_shape, elementwise_affine, bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight to ones and bias to zeros, as PyTorch does."""
        _reset_affine(self)

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


class GroupNorm(Module):
    """Group normalisation: the channels split into ``num_groups`` groups, each normalised
    over its channels and the spatial dimensions (``torch.nn.GroupNorm``).

        >>> m = agrad.nn.GroupNorm(2, 4)
        >>> m
        GroupNorm(2, 4, eps=1e-05, affine=True, bias=True)
        >>> m(agrad.ones(3, 4, 5)).shape
        agrad.Size([3, 4, 5])
    """

    __constants__ = ["num_groups", "num_channels", "eps", "affine"]
    num_groups: int
    num_channels: int
    eps: float
    affine: bool

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True,
                 device: Any = None, dtype: Any = None, *, bias: bool = True) -> None:
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _register_affine(self, (num_channels,), affine, bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight to ones and bias to zeros, as PyTorch does."""
        _reset_affine(self)

    def forward(self, input: Tensor) -> Tensor:
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class RMSNorm(Module):
    """Root-mean-square normalisation over the trailing ``normalized_shape`` dimensions
    (``torch.nn.RMSNorm``); ``eps=None`` means the input dtype's machine epsilon.

        >>> m = agrad.nn.RMSNorm([2, 3])
        >>> m
        RMSNorm((2, 3), eps=None, elementwise_affine=True)
        >>> m(agrad.ones(4, 2, 3)).shape
        agrad.Size([4, 2, 3])
    """

    __constants__ = ["normalized_shape", "eps", "elementwise_affine"]
    normalized_shape: tuple[int, ...]
    eps: float | None
    elementwise_affine: bool

    def __init__(self, normalized_shape: int | Sequence[int], eps: float | None = None,
                 elementwise_affine: bool = True, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.normalized_shape = _as_shape(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(empty(self.normalized_shape, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight to ones, as PyTorch does."""
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, x: Tensor) -> Tensor:
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
