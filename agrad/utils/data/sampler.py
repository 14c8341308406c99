"""Samplers: the order in which a map-style dataset's keys are read (mirrors
``torch.utils.data.sampler``).

A sampler is an iterable of keys (or, for a batch sampler, of lists of keys)
with, usually, a length.  The random ones draw from agrad's generators, so
``agrad.manual_seed`` (or a ``generator=``) makes their order repeatable.

Note [Sampler draws]
~~~~~~~~~~~~~~~~~~~~
The random samplers call ``agrad.randperm``, ``agrad.randint`` and
``agrad.multinomial`` through the ``agrad`` module, as PyTorch's call
``torch.randperm``...: a test that patches those names (to record or replay
the draws) reaches them.  A :class:`RandomSampler` without a generator, like
PyTorch's, takes one 63-bit seed from the default generator per pass and
draws the pass from a generator seeded with it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import Any, Generic, TypeVar

from agrad import _dtype
from agrad._creation import Generator, as_tensor
from agrad._tensor import Tensor
from agrad.utils.data._utils.draws import public

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler",
           "BatchSampler"]

T_co = TypeVar("T_co", covariant=True)


class Sampler(Generic[T_co]):
    """The base class of samplers: subclasses define ``__iter__`` (the keys, or
    lists of keys, to read) and, for ``len(DataLoader)``, ``__len__``.

    Example::

        >>> class Backwards(agrad.utils.data.Sampler):
        ...     def __init__(self, n):
        ...         self.n = n
        ...     def __iter__(self):
        ...         return iter(range(self.n - 1, -1, -1))
        ...     def __len__(self):
        ...         return self.n
        >>> list(agrad.utils.data.DataLoader([5, 6, 7], sampler=Backwards(3)))
        [tensor([7]), tensor([6]), tensor([5])]
    """

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError


class SequentialSampler(Sampler[int]):
    """The keys ``0 .. len(data_source)-1`` in order.

    Example::

        >>> list(agrad.utils.data.SequentialSampler("abc"))
        [0, 1, 2]
    """

    data_source: Sized

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


def _check_positive(name: str, value: Any) -> None:
    """PyTorch's check of a sampler's count (``num_samples``, ``batch_size``): a positive int, not a bool."""
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} should be a positive integer value, but got {name}={value}")


class RandomSampler(Sampler[int]):
    """The keys in random order: without replacement, a fresh permutation per
    pass (several, if ``num_samples`` exceeds the length); with replacement,
    ``num_samples`` keys drawn uniformly.  See Note [Sampler draws].

    Args:
        data_source: the dataset (only its length is read).
        replacement: draw with replacement.
        num_samples: how many keys a pass yields (default: ``len(data_source)``).
        generator: draws the order (default: a generator seeded from agrad's default one per pass).

    Example::

        >>> sampler = agrad.utils.data.RandomSampler(range(5), generator=agrad.Generator().manual_seed(0))
        >>> sorted(sampler)
        [0, 1, 2, 3, 4]
    """

    data_source: Sized
    replacement: bool

    def __init__(self, data_source: Sized, replacement: bool = False, num_samples: int | None = None,
                 generator: Generator | None = None) -> None:
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={self.replacement}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={self.num_samples}")

    @property
    def num_samples(self) -> int:
        """The keys one pass yields: ``num_samples`` if given, else the dataset's length."""
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        agrad = public()
        generator = self.generator
        if generator is None:
            seed = int(agrad.empty((), dtype=agrad.int64).random_().item())
            generator = agrad.Generator().manual_seed(seed)
        if self.replacement:  # in chunks of 32, as PyTorch draws them
            for _ in range(self.num_samples // 32):
                yield from agrad.randint(0, n, (32,), dtype=agrad.int64, generator=generator).tolist()
            yield from agrad.randint(0, n, (self.num_samples % 32,), dtype=agrad.int64, generator=generator).tolist()
        else:
            for _ in range(self.num_samples // n):
                yield from agrad.randperm(n, generator=generator).tolist()
            yield from agrad.randperm(n, generator=generator).tolist()[:self.num_samples % n]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler[int]):
    """The given ``indices`` in random order (a fresh permutation per pass).

    Example::

        >>> sorted(agrad.utils.data.SubsetRandomSampler([4, 8, 9]))
        [4, 8, 9]
    """

    indices: Sequence[int]

    def __init__(self, indices: Sequence[int], generator: Generator | None = None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        for i in public().randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler[int]):
    """``num_samples`` keys of ``0 .. len(weights)-1``, each drawn with probability
    proportional to its weight (with or without replacement).

    Example::

        >>> list(agrad.utils.data.WeightedRandomSampler([0.0, 1.0, 0.0], 3))
        [1, 1, 1]
    """

    weights: Tensor
    num_samples: int
    replacement: bool

    def __init__(self, weights: Sequence[float], num_samples: int, replacement: bool = True,
                 generator: Generator | None = None) -> None:
        _check_positive("num_samples", num_samples)
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement}")
        weights_tensor = as_tensor(weights, dtype=_dtype.float64)
        if len(weights_tensor.shape) != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape "
                             f"{tuple(weights_tensor.shape)}")
        self.weights = weights_tensor
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        drawn = public().multinomial(self.weights, self.num_samples, self.replacement, generator=self.generator)
        yield from iter(drawn.tolist())

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler[list[int]]):
    """Lists of ``batch_size`` consecutive keys of ``sampler`` (the last one
    shorter, or dropped with ``drop_last``).

    Example::

        >>> list(agrad.utils.data.BatchSampler(range(7), batch_size=3, drop_last=False))
        [[0, 1, 2], [3, 4, 5], [6]]
        >>> list(agrad.utils.data.BatchSampler(range(7), batch_size=3, drop_last=True))
        [[0, 1, 2], [3, 4, 5]]
    """

    def __init__(self, sampler: Sampler[int] | Iterable[int], batch_size: int, drop_last: bool) -> None:
        _check_positive("batch_size", batch_size)
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list[int]]:
        keys = iter(self.sampler)
        while batch := list(itertools.islice(keys, self.batch_size)):
            if self.drop_last and len(batch) < self.batch_size:
                return
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        return n // self.batch_size if self.drop_last else (n + self.batch_size - 1) // self.batch_size
