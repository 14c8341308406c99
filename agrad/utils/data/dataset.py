"""Datasets (mirrors ``torch.utils.data.dataset``).

A map-style dataset answers ``dataset[i]`` and ``len(dataset)``; an
iterable-style one (:class:`IterableDataset`) is a stream of samples.  The
wrappers here build datasets from tensors (:class:`TensorDataset`), from other
datasets (:class:`ConcatDataset`, :class:`ChainDataset`, :class:`StackDataset`,
:class:`Subset`) and by splitting one at random (:func:`random_split`), with
PyTorch's names, arguments and errors.
"""

from __future__ import annotations

import bisect
import itertools
import math
import warnings
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar

from agrad._creation import Generator, default_generator
from agrad._tensor import Tensor
from agrad.utils.data._utils.draws import public

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "StackDataset", "ConcatDataset", "ChainDataset", "Subset",
           "random_split"]

T_co = TypeVar("T_co", covariant=True)
T = TypeVar("T")


class Dataset(Generic[T_co]):
    """A map-style dataset: subclasses define ``__getitem__`` (a sample for a key)
    and usually ``__len__``, which samplers and :class:`~agrad.utils.data.DataLoader`
    use to enumerate the keys.  A subclass may also define ``__getitems__`` (the
    samples for a list of keys, at once) to speed up batched loading.

    ``a + b`` is their :class:`ConcatDataset`.

    Example::

        >>> class Squares(agrad.utils.data.Dataset):
        ...     def __getitem__(self, i):
        ...         return i * i
        ...     def __len__(self):
        ...         return 4
        >>> [Squares()[i] for i in range(4)]
        [0, 1, 4, 9]
    """

    def __getitem__(self, index: Any) -> T_co:
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other: Dataset[T_co]) -> ConcatDataset[T_co]:
        return ConcatDataset([self, other])


class IterableDataset(Dataset[T_co], Iterable[T_co]):
    """An iterable-style dataset: subclasses define ``__iter__``, a stream of
    samples (for data read sequentially, where random access is costly or
    impossible).  A :class:`~agrad.utils.data.DataLoader` over one takes no
    sampler: it batches the stream in order.

    ``a + b`` is their :class:`ChainDataset`.

    Example::

        >>> class Count(agrad.utils.data.IterableDataset):
        ...     def __iter__(self):
        ...         return iter(range(3))
        >>> list(Count() + Count())
        [0, 1, 2, 0, 1, 2]
    """

    def __add__(self, other: Dataset[T_co]) -> ChainDataset:  # type: ignore[override]
        return ChainDataset([self, other])


class TensorDataset(Dataset[tuple[Tensor, ...]]):
    """The rows of tensors that share their first dimension: sample ``i`` is
    ``tuple(t[i] for t in tensors)``, typically (input, target).

    Example::

        >>> ds = agrad.utils.data.TensorDataset(agrad.arange(6).reshape(3, 2), agrad.tensor([0, 1, 0]))
        >>> len(ds), ds[1]
        (3, (tensor([2, 3]), tensor(1)))
    """

    tensors: tuple[Tensor, ...]

    def __init__(self, *tensors: Tensor) -> None:
        if any(tensors[0].size(0) != tensor.size(0) for tensor in tensors):
            raise AssertionError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index: Any) -> tuple[Tensor, ...]:
        return tuple(tensor[index] for tensor in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].size(0)


def _same_length(datasets: Iterable[Any]) -> int:
    """The length the datasets share; ``ValueError`` if they differ."""
    lengths = {len(dataset) for dataset in datasets}
    if len(lengths) != 1:
        raise ValueError("Size mismatch between datasets")
    return lengths.pop()


class StackDataset(Dataset[Any]):
    """Datasets of one length side by side: sample ``i`` is the tuple of their
    samples ``i`` (datasets given positionally) or a dict (given by keyword), so
    different parts of a sample can come from different datasets.

    Example::

        >>> ds = agrad.utils.data.StackDataset(image=[10, 11], label=[0, 1])
        >>> ds[1]
        {'image': 11, 'label': 1}
    """

    datasets: tuple[Any, ...] | dict[str, Any]

    def __init__(self, *args: Dataset[Any], **kwargs: Dataset[Any]) -> None:
        if args and kwargs:
            raise ValueError("Supported either ``tuple``- (via ``args``) or"
                             "``dict``- (via ``kwargs``) like input/output, but both types are given.")
        if not args and not kwargs:
            raise ValueError("At least one dataset should be passed")
        self.datasets = args or kwargs
        self._length = _same_length(args or kwargs.values())

    def __getitem__(self, index: Any) -> Any:
        if isinstance(self.datasets, dict):
            return {k: dataset[index] for k, dataset in self.datasets.items()}
        return tuple(dataset[index] for dataset in self.datasets)

    def __len__(self) -> int:
        return self._length


class ConcatDataset(Dataset[T_co]):
    """Map-style datasets one after another: keys ``0 .. len(a)-1`` are ``a``'s,
    the next ``len(b)`` are ``b``'s, and so on; negative keys count from the end.

    Example::

        >>> ds = agrad.utils.data.ConcatDataset([[1, 2], [3]])
        >>> len(ds), ds[2], ds[-3], ds.cumulative_sizes
        (3, 3, 1, [2, 3])
    """

    datasets: list[Dataset[T_co]]
    cumulative_sizes: list[int]

    @staticmethod
    def cumsum(sequence: Iterable[Any]) -> list[int]:
        """The running totals of the lengths of ``sequence``'s datasets."""
        return list(itertools.accumulate(len(e) for e in sequence))

    def __init__(self, datasets: Iterable[Dataset[Any]]) -> None:
        self.datasets = list(datasets)
        if len(self.datasets) == 0:
            raise AssertionError("datasets should not be an empty iterable")
        if any(isinstance(d, IterableDataset) for d in self.datasets):
            raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = self.cumsum(self.datasets)

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx: int) -> T_co:
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        dataset_idx = bisect.bisect_right(self.cumulative_sizes, idx)
        sample_idx = idx - self.cumulative_sizes[dataset_idx - 1] if dataset_idx else idx
        return self.datasets[dataset_idx][sample_idx]


def _only_iterable(d: Any) -> Any:
    """``d``, which must be an :class:`IterableDataset` (``ChainDataset``'s check)."""
    if not isinstance(d, IterableDataset):
        raise AssertionError("ChainDataset only supports IterableDataset")
    return d


class ChainDataset(IterableDataset[Any]):
    """Iterable-style datasets one after another, chained as they are read.

    Example::

        >>> class Two(agrad.utils.data.IterableDataset):
        ...     def __iter__(self):
        ...         return iter("ab")
        >>> list(agrad.utils.data.ChainDataset([Two(), Two()]))
        ['a', 'b', 'a', 'b']
    """

    def __init__(self, datasets: Iterable[Dataset[Any]]) -> None:
        self.datasets = datasets

    def __iter__(self) -> Iterator[Any]:
        for d in self.datasets:
            yield from _only_iterable(d)

    def __len__(self) -> int:
        return sum(len(_only_iterable(d)) for d in self.datasets)


class Subset(Dataset[T_co]):
    """The samples of ``dataset`` at ``indices``: key ``i`` is ``dataset[indices[i]]``.

    Example::

        >>> sub = agrad.utils.data.Subset([10, 11, 12, 13], [3, 0])
        >>> len(sub), sub[0], sub.__getitems__([1, 0])
        (2, 13, [10, 13])
    """

    dataset: Dataset[T_co]
    indices: Sequence[int]

    def __init__(self, dataset: Dataset[T_co], indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices
        if type(self).__getitem__ is not Subset.__getitem__ and type(self).__getitems__ is Subset.__getitems__:
            raise NotImplementedError(
                f"{type(self).__name__} overrides __getitem__ but not __getitems__. "
                "When subclassing Subset and overriding __getitem__, you must also override "
                "__getitems__ to ensure DataLoader works correctly with your custom logic. "
                "A simple implementation:\n\n"
                "def __getitems__(self, indices):\n"
                "    return [self.__getitem__(idx) for idx in indices]")

    def __getitem__(self, idx: Any) -> T_co:
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices: list[int]) -> list[T_co]:
        keys = [self.indices[idx] for idx in indices]
        if callable(getattr(self.dataset, "__getitems__", None)):
            return self.dataset.__getitems__(keys)  # type: ignore[attr-defined]
        return [self.dataset[key] for key in keys]

    def __len__(self) -> int:
        return len(self.indices)


def _split_lengths(n: int, fractions: Sequence[float]) -> list[int]:
    """Fractions of ``n`` as counts: each ``floor(n * frac)``, the remainder handed
    out one at a time, round-robin from the first (PyTorch's rule)."""
    lengths = []
    for i, frac in enumerate(fractions):
        if frac < 0 or frac > 1:
            raise ValueError(f"Fraction at index {i} is not between 0 and 1")
        lengths.append(math.floor(n * frac))
    for i in range(n - sum(lengths)):
        lengths[i % len(lengths)] += 1
    for i, length in enumerate(lengths):
        if length == 0:
            warnings.warn(f"Length of split at index {i} is 0. This might result in an empty dataset.",
                          stacklevel=3)
    return lengths


def random_split(dataset: Dataset[T], lengths: Sequence[int | float],
                 generator: Generator | None = default_generator) -> list[Subset[T]]:
    """Split ``dataset`` at random into non-overlapping :class:`Subset` s of the
    given ``lengths``, or of the given fractions of its length when they sum to 1.

    Args:
        dataset: the map-style dataset to split.
        lengths: the subsets' lengths (summing to ``len(dataset)``), or fractions
            (summing to 1; remainders go one each to the first subsets).
        generator: draws the permutation (agrad's default generator unless given).

    Example::

        >>> parts = agrad.utils.data.random_split(range(10), [0.7, 0.3], generator=agrad.Generator().manual_seed(0))
        >>> [len(p) for p in parts], sorted(parts[0].indices + parts[1].indices) == list(range(10))
        ([7, 3], True)
    """
    n = len(dataset)  # type: ignore[arg-type]
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        lengths = _split_lengths(n, lengths)
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    counts = [int(length) for length in lengths]
    indices = public().randperm(sum(counts), generator=generator).tolist()
    return [Subset(dataset, indices[offset - length:offset])
            for offset, length in zip(itertools.accumulate(counts), counts)]
