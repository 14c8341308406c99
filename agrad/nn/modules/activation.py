"""Activation layers (mirrors ``torch.nn.modules.activation``, less MultiheadAttention).

Each layer is a thin Module over its ``agrad.nn.functional`` function: the
constructor keeps the function's settings as attributes of PyTorch's names,
``forward`` passes them on, and ``repr`` shows them as PyTorch's does
(``ReLU(inplace=True)``, ``Softmax(dim=1)``).  Only :class:`PReLU` has a
parameter; none has a buffer.

    >>> agrad.nn.LeakyReLU(0.5)(agrad.tensor([-2.0, 3.0]))
    tensor([-1.,  3.])
    >>> agrad.nn.LeakyReLU(0.5, inplace=True)
    LeakyReLU(negative_slope=0.5, inplace=True)
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

import agrad.nn.functional as F
from agrad._creation import empty
from agrad._tensor import Tensor
from agrad.nn.init import constant_
from agrad.nn.modules.module import Module
from agrad.nn.parameter import Parameter

__all__ = [
    "Threshold", "ReLU", "RReLU", "Hardtanh", "ReLU6", "Sigmoid", "Hardsigmoid", "Tanh", "SiLU", "Mish",
    "Hardswish", "ELU", "CELU", "SELU", "GLU", "GELU", "Hardshrink", "LeakyReLU", "LogSigmoid", "Softplus",
    "Softshrink", "PReLU", "Softsign", "Tanhshrink", "Softmin", "Softmax", "Softmax2d", "LogSoftmax",
]


class _Activation(Module):
    """A parameter-free activation whose ``repr`` lists the attributes named in
    ``_shown`` as ``name=value`` (``inplace`` only when it is True), PyTorch's form."""

    _shown: ClassVar[tuple[str, ...]] = ()

    def extra_repr(self) -> str:
        return ", ".join(f"{name}={getattr(self, name)}" for name in self._shown
                         if name != "inplace" or getattr(self, name))


class _InPlace(_Activation):
    """An activation that can write its result into its input (``inplace=True``)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace


class Threshold(_InPlace):
    """``value`` where ``input <= threshold``, else ``input``.

    Args:
        threshold: the value to threshold at.
        value: the value that replaces the elements at or below ``threshold``.
        inplace: write the result into the input.
    """

    _shown = ("threshold", "value", "inplace")

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__(inplace)
        self.threshold = threshold
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        return F.threshold(input, self.threshold, self.value, self.inplace)


class ReLU(_InPlace):
    """``max(input, 0)`` elementwise.

        >>> agrad.nn.ReLU()(agrad.tensor([-1.0, 2.0]))
        tensor([0., 2.])
    """

    _shown = ("inplace",)

    def forward(self, input: Tensor) -> Tensor:
        return F.relu(input, inplace=self.inplace)


class RReLU(_InPlace):
    """Randomised leaky ReLU: in training each negative element's slope is drawn
    from U(``lower``, ``upper``); in eval the slope is their mean (so ``train()``
    and ``eval()`` change the result)."""

    _shown = ("lower", "upper", "inplace")

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False) -> None:
        super().__init__(inplace)
        self.lower = lower
        self.upper = upper

    def forward(self, input: Tensor) -> Tensor:
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)


class Hardtanh(_InPlace):
    """``input`` clamped to ``[min_val, max_val]``, with no gradient at the bounds.

    ``min_value``/``max_value`` are PyTorch's deprecated spellings of
    ``min_val``/``max_val`` (a FutureWarning); ``max_val`` must exceed ``min_val``.
    """

    _shown: ClassVar[tuple[str, ...]] = ("min_val", "max_val", "inplace")  # ReLU6 shows fewer

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False,
                 min_value: float | None = None, max_value: float | None = None) -> None:
        super().__init__(inplace)
        if min_value is not None:
            warnings.warn("keyword argument `min_value` is deprecated and renamed to `min_val`", FutureWarning,
                          stacklevel=2)
            min_val = min_value
        if max_value is not None:
            warnings.warn("keyword argument `max_value` is deprecated and renamed to `max_val`", FutureWarning,
                          stacklevel=2)
            max_val = max_value
        self.min_val = min_val
        self.max_val = max_val
        if self.max_val <= self.min_val:
            raise AssertionError(f"max_val ({self.max_val}) must be greater than min_val ({self.min_val})")

    def forward(self, input: Tensor) -> Tensor:
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)


class ReLU6(Hardtanh):
    """``min(max(input, 0), 6)``: a :class:`Hardtanh` on ``[0, 6]`` whose ``repr``
    shows only ``inplace``."""

    _shown = ("inplace",)

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(0.0, 6.0, inplace)


class Sigmoid(_Activation):
    """``1 / (1 + exp(-input))``."""

    def forward(self, input: Tensor) -> Tensor:
        return F.sigmoid(input)


class Hardsigmoid(_InPlace):
    """``0`` below -3, ``1`` above 3, ``input / 6 + 1 / 2`` between.  (PyTorch's
    ``repr`` does not show ``inplace`` for this one.)"""

    def forward(self, input: Tensor) -> Tensor:
        return F.hardsigmoid(input, self.inplace)


class Tanh(_Activation):
    """Hyperbolic tangent."""

    def forward(self, input: Tensor) -> Tensor:
        return F.tanh(input)


class SiLU(_InPlace):
    """``input * sigmoid(input)`` (the swish function)."""

    _shown = ("inplace",)

    def forward(self, input: Tensor) -> Tensor:
        return F.silu(input, inplace=self.inplace)


class Mish(_InPlace):
    """``input * tanh(softplus(input))``."""

    _shown = ("inplace",)

    def forward(self, input: Tensor) -> Tensor:
        return F.mish(input, inplace=self.inplace)


class Hardswish(_InPlace):
    """``0`` below -3, ``input`` above 3, ``input * (input + 3) / 6`` between.
    (PyTorch's ``repr`` does not show ``inplace`` for this one.)"""

    def forward(self, input: Tensor) -> Tensor:
        return F.hardswish(input, self.inplace)


class _ExponentialUnit(_InPlace):
    """ELU and CELU: ``alpha`` scales the exponential of the negative side."""

    _shown = ("alpha", "inplace")

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__(inplace)
        self.alpha = alpha


class ELU(_ExponentialUnit):
    """``input`` where positive, else ``alpha * (exp(input) - 1)``."""

    def forward(self, input: Tensor) -> Tensor:
        return F.elu(input, self.alpha, self.inplace)


class CELU(_ExponentialUnit):
    """``input`` where positive, else ``alpha * (exp(input / alpha) - 1)``."""

    def forward(self, input: Tensor) -> Tensor:
        return F.celu(input, self.alpha, self.inplace)


class SELU(_InPlace):
    """``scale * elu(input, alpha)`` with the self-normalising constants."""

    _shown = ("inplace",)

    def forward(self, input: Tensor) -> Tensor:
        return F.selu(input, self.inplace)


class GLU(_Activation):
    """Gated linear unit: the first half of the input along ``dim`` times the
    sigmoid of the second half (so that dimension halves)."""

    _shown = ("dim",)

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.glu(input, self.dim)


class GELU(_Activation):
    """Gaussian error linear unit, exact (``approximate='none'``) or with the tanh
    approximation (``'tanh'``).

        >>> agrad.nn.GELU(approximate="tanh")
        GELU(approximate='tanh')
    """

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class LeakyReLU(_InPlace):
    """``input`` where non-negative, else ``negative_slope * input``."""

    _shown = ("negative_slope", "inplace")

    def __init__(self, negative_slope: float = 1e-2, inplace: bool = False) -> None:
        super().__init__(inplace)
        self.negative_slope = negative_slope

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope, self.inplace)


class LogSigmoid(_Activation):
    """``log(sigmoid(input))``, computed without overflow."""

    def forward(self, input: Tensor) -> Tensor:
        return F.logsigmoid(input)


class Softplus(_Activation):
    """``log(1 + exp(beta * input)) / beta``, linear where ``beta * input > threshold``."""

    _shown = ("beta", "threshold")

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input: Tensor) -> Tensor:
        return F.softplus(input, self.beta, self.threshold)


class _Shrink(_Activation):
    """The shrink activations keep ``lambd``; PyTorch's ``repr`` shows its bare value."""

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def extra_repr(self) -> str:
        return str(self.lambd)


class Hardshrink(_Shrink):
    """``input``, except 0 within ``[-lambd, lambd]``.

        >>> agrad.nn.Hardshrink(1.0)
        Hardshrink(1.0)
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.hardshrink(input, self.lambd)


class Softshrink(_Shrink):
    """``input`` moved ``lambd`` towards 0, and 0 within ``[-lambd, lambd]``."""

    def forward(self, input: Tensor) -> Tensor:
        return F.softshrink(input, self.lambd)


class PReLU(Module):
    """``input`` where non-negative, else ``weight * input`` with a learnt slope
    ``weight``: one for all channels (``num_parameters=1``) or one per channel
    (dimension 1 of the input), each initialised to ``init``.

        >>> m = agrad.nn.PReLU(2)
        >>> m
        PReLU(num_parameters=2)
        >>> m.weight
        Parameter containing:
        tensor([0.2500, 0.2500], requires_grad=True)
    """

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(empty(num_parameters, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Set every slope back to ``init``."""
        constant_(self.weight, self.init)

    def forward(self, input: Tensor) -> Tensor:
        return F.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class Softsign(_Activation):
    """``input / (1 + |input|)``."""

    def forward(self, input: Tensor) -> Tensor:
        return F.softsign(input)


class Tanhshrink(_Activation):
    """``input - tanh(input)``."""

    def forward(self, input: Tensor) -> Tensor:
        return F.tanhshrink(input)


class _Normalized(_Activation):
    """The softmax family: a normalisation along ``dim``.  ``dim=None`` is
    PyTorch's deprecated implicit choice (a warning at each call)."""

    _shown = ("dim",)

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Modules pickled before ``dim`` existed load with the implicit choice, as in PyTorch.
        super().__setstate__(state)
        if not hasattr(self, "dim"):
            self.dim = None


class Softmin(_Normalized):
    """``softmax(-input)`` along ``dim``: elements in [0, 1] that sum to 1."""

    def forward(self, input: Tensor) -> Tensor:
        return F.softmin(input, self.dim, _stacklevel=5)


class Softmax(_Normalized):
    """Normalised exponentials along ``dim``: elements in [0, 1] that sum to 1.

        >>> agrad.nn.Softmax(dim=0)(agrad.tensor([0.0, 0.0]))
        tensor([0.5000, 0.5000])
    """

    def forward(self, input: Tensor) -> Tensor:
        return F.softmax(input, self.dim, _stacklevel=5)


class Softmax2d(_Activation):
    """Softmax over the channels at each spatial location of a (C, H, W) or
    (N, C, H, W) input (dimension -3)."""

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.ndim}D instead")
        return F.softmax(input, -3, _stacklevel=5)


class LogSoftmax(_Normalized):
    """``log(softmax(input))`` along ``dim``, computed stably."""

    def forward(self, input: Tensor) -> Tensor:
        return F.log_softmax(input, self.dim, _stacklevel=5)
