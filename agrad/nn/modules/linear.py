"""Identity, Linear and Bilinear layers (mirrors ``torch.nn.modules.linear``).

Parameters are registered and initialised as PyTorch does (same names, order,
shapes and distributions), so a ``state_dict`` moves between the two.

    >>> _ = agrad.manual_seed(0)
    >>> fc = agrad.nn.Linear(3, 2)
    >>> fc(agrad.zeros(5, 3)).shape
    agrad.Size([5, 2])
    >>> [(name, tuple(p.shape)) for name, p in fc.named_parameters()]
    [('weight', (2, 3)), ('bias', (2,))]
"""

from __future__ import annotations

import math
from typing import Any

from agrad._creation import empty
from agrad._tensor import Tensor
from agrad.nn import functional as F
from agrad.nn import init
from agrad.nn.modules.module import Module
from agrad.nn.parameter import Parameter

__all__ = ["Identity", "Linear", "Bilinear"]


def _bias_or_none(module: Module, out_features: int, bias: bool, device: Any, dtype: Any) -> None:
    """Register ``module.bias`` as an uninitialised ``(out_features,)`` Parameter, or as None without ``bias``."""
    if bias:
        module.bias = Parameter(empty(out_features, device=device, dtype=dtype))
    else:
        module.register_parameter("bias", None)


class Identity(Module):
    """Returns its input unchanged; its arguments are accepted and ignored (a placeholder for a removed layer).

        >>> x = agrad.ones(2)
        >>> agrad.nn.Identity(54, unused=0.1)(x) is x
        True
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


class Linear(Module):
    """``y = x @ weight.T + bias`` on the last dimension of ``x``.

    ``weight`` is ``(out_features, in_features)`` and ``bias`` ``(out_features,)``,
    both drawn from U(-1/sqrt(in_features), 1/sqrt(in_features)) by
    :meth:`reset_parameters` (PyTorch's ``kaiming_uniform_(a=sqrt(5))``).

        >>> fc = agrad.nn.Linear(20, 30, bias=False)
        >>> fc
        Linear(in_features=20, out_features=30, bias=False)
        >>> fc(agrad.zeros(128, 20)).shape
        agrad.Size([128, 30])
    """

    __constants__ = ["in_features", "out_features"]
    in_features: int
    out_features: int
    weight: Parameter
    bias: Parameter | None

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(empty((out_features, in_features), device=device, dtype=dtype))
        _bias_or_none(self, out_features, bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Redraw ``weight`` by ``kaiming_uniform_(a=sqrt(5))``, ``bias`` from U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class NonDynamicallyQuantizableLinear(Linear):
    """The Linear of ``MultiheadAttention.out_proj``.

    PyTorch gives it its own class (so its quantization tools leave it alone);
    agrad keeps the class so that ``repr`` of an attention module reads as PyTorch's.
    It is exactly a :class:`Linear`.

        >>> from agrad.nn.modules.linear import NonDynamicallyQuantizableLinear
        >>> NonDynamicallyQuantizableLinear(4, 4)
        NonDynamicallyQuantizableLinear(in_features=4, out_features=4, bias=True)
    """


class Bilinear(Module):
    """``y[..., o] = x1 @ weight[o] @ x2 + bias[o]`` on the last dimensions of ``x1`` and ``x2``.

    ``weight`` is ``(out_features, in1_features, in2_features)``; it and
    ``bias`` are drawn from U(-1/sqrt(in1_features), 1/sqrt(in1_features)).

        >>> bl = agrad.nn.Bilinear(2, 3, 4)
        >>> bl(agrad.zeros(5, 2), agrad.zeros(5, 3)).shape
        agrad.Size([5, 4])
        >>> bl
        Bilinear(in1_features=2, in2_features=3, out_features=4, bias=True)
    """

    __constants__ = ["in1_features", "in2_features", "out_features"]
    in1_features: int
    in2_features: int
    out_features: int
    weight: Parameter
    bias: Parameter | None

    def __init__(self, in1_features: int, in2_features: int, out_features: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = Parameter(empty((out_features, in1_features, in2_features), device=device, dtype=dtype))
        _bias_or_none(self, out_features, bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Redraw ``weight`` and ``bias`` from U(-1/sqrt(in1_features), 1/sqrt(in1_features))."""
        if self.in1_features <= 0:
            raise ValueError(f"in1_features must be > 0, but got (in1_features={self.in1_features})")
        bound = 1 / math.sqrt(self.weight.size(1))
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
