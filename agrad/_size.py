"""``agrad.Size``: a tensor's shape, PyTorch's ``torch.Size``."""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable
from typing import Any, SupportsIndex, overload

__all__ = ["Size", "size_of"]


class Size(tuple[int, ...]):
    """The sizes of a tensor's dimensions: a tuple of ints with :meth:`numel`.

    What ``Tensor.shape`` and ``Tensor.size()`` return.  It compares, hashes
    and unpacks as the plain tuple it is; slicing it, and adding or repeating
    it, give a ``Size`` again, as PyTorch's do.

        >>> import agrad
        >>> s = agrad.zeros(2, 3).shape
        >>> s
        agrad.Size([2, 3])
        >>> s.numel(), s == (2, 3), s[1:]
        (6, True, agrad.Size([3]))
    """

    __slots__ = ()

    def __new__(cls, sizes: Iterable[Any] = ()) -> Size:
        items = tuple(sizes)
        for i, s in enumerate(items):
            if type(s) is not int:
                try:
                    operator.index(s)
                except TypeError:
                    raise TypeError(f"agrad.Size() takes an iterable of 'int' (item {i} is '{type(s).__name__}')"
                                    ) from None
                items = tuple(operator.index(v) for v in items)
                break
        return super().__new__(cls, items)

    def numel(self) -> int:
        """The number of elements of a tensor of this shape (1 for ``Size([])``)."""
        return math.prod(self)

    def __repr__(self) -> str:
        return f"agrad.Size({list(self)})"

    __str__ = __repr__

    @overload
    def __getitem__(self, i: SupportsIndex) -> int: ...
    @overload
    def __getitem__(self, i: slice) -> Size: ...
    def __getitem__(self, i: SupportsIndex | slice) -> int | Size:
        if isinstance(i, slice):
            return Size(tuple.__getitem__(self, i))
        return tuple.__getitem__(self, i)

    def __add__(self, other: tuple[Any, ...]) -> Size:
        return Size(tuple.__add__(self, other))

    def __radd__(self, other: tuple[Any, ...]) -> Size:
        return Size(tuple.__add__(tuple(other), self))

    def __mul__(self, n: SupportsIndex) -> Size:
        return Size(tuple.__mul__(self, n))

    __rmul__ = __mul__

    def __reduce__(self) -> tuple[type[Size], tuple[tuple[int, ...]]]:
        return Size, (tuple(self),)


def size_of(shape: tuple[int, ...]) -> Size:
    """An array's ``shape`` (a tuple of ints already) as a ``Size``, unchecked:
    what ``Tensor.shape`` returns on every access, at a tuple's cost."""
    return tuple.__new__(Size, shape)
