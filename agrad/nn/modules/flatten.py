"""Flatten and Unflatten: reshape layers for use inside a Sequential (mirrors ``torch.nn.modules.flatten``).

    >>> x = agrad.zeros(2, 3, 4)
    >>> agrad.nn.Flatten()(x).shape
    agrad.Size([2, 12])
    >>> agrad.nn.Unflatten(1, (3, 4))(agrad.nn.Flatten()(x)).shape
    agrad.Size([2, 3, 4])
"""

from __future__ import annotations

from typing import Any

from agrad._tensor import Tensor
from agrad.nn.modules.module import Module

__all__ = ["Flatten", "Unflatten"]


class Flatten(Module):
    """Flatten dimensions ``start_dim`` through ``end_dim`` into one (by default all but the batch dimension).

        >>> agrad.nn.Flatten(0, 1)
        Flatten(start_dim=0, end_dim=1)
    """

    __constants__ = ["start_dim", "end_dim"]
    start_dim: int
    end_dim: int

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input: Tensor) -> Tensor:
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split dimension ``dim`` into ``unflattened_size`` (a tuple or list of ints; one may be -1).

        >>> agrad.nn.Unflatten(-1, (2, -1))(agrad.zeros(3, 8)).shape
        agrad.Size([3, 2, 4])
    """

    __constants__ = ["dim", "unflattened_size"]
    dim: int
    unflattened_size: tuple[int, ...] | list[int]

    def __init__(self, dim: int, unflattened_size: tuple[int, ...] | list[int]) -> None:
        super().__init__()
        self._require_tuple_int(unflattened_size)
        self.dim = dim
        self.unflattened_size = unflattened_size

    def _require_tuple_int(self, input: Any) -> None:
        if not isinstance(input, (tuple, list)):
            raise TypeError(f"unflattened_size must be a tuple of ints, but found type {type(input).__name__}")
        for idx, elem in enumerate(input):
            if not isinstance(elem, int):
                raise TypeError("unflattened_size must be tuple of ints, "
                                f"but found element of type {type(elem).__name__} at pos {idx}")

    def forward(self, input: Tensor) -> Tensor:
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
