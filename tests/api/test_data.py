"""agrad.utils.data against torch.utils.data: datasets, samplers, collation and
the DataLoader give the same batches, lengths and errors for the same inputs;
shuffling is repeatable under a seed and looks uniform."""

from __future__ import annotations

import collections
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import agrad
from agrad.utils import data
from tests.helpers import requires_torch, torch

Point = collections.namedtuple("Point", ["x", "y"])


def plain(value: Any) -> Any:
    """A library-free picture of a batch: tensors as (dtype, shape, values), containers by type."""
    if isinstance(value, agrad.Tensor) or (torch is not None and isinstance(value, torch.Tensor)):
        return ("tensor", str(value.dtype).split(".")[-1], tuple(value.shape), value.tolist())
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [plain(v) for v in value])
    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.tolist())
    return value


def libs() -> list[Any]:
    return [agrad, torch]


def same(make: Callable[[Any], Any]) -> None:
    """``make(lib)`` gives the same plain picture for agrad and torch."""
    assert plain(make(agrad)) == plain(make(torch))


def same_error(make: Callable[[Any], Any]) -> str:
    """``make(lib)`` raises the same exception type and message for agrad and torch; returns the message."""
    errors = []
    for lib in libs():
        with pytest.raises(Exception) as info:
            make(lib)
        errors.append((type(info.value), str(info.value).replace("torch", "agrad")))
    assert errors[0] == errors[1]
    return errors[0][1]


def tensors(lib: Any, n: int = 7) -> Any:
    return lib.utils.data.TensorDataset(lib.arange(2.0 * n).reshape(n, 2), lib.arange(n) % 3)


class Stream:
    """An iterable-style dataset of ``n`` numbers, built for either library."""

    @staticmethod
    def make(lib: Any, n: int) -> Any:
        class _Stream(lib.utils.data.IterableDataset):
            def __iter__(self) -> Iterator[int]:
                return iter(range(n))

            def __len__(self) -> int:
                return n

        return _Stream()


# -- datasets ---------------------------------------------------------------------------


@requires_torch
def test_tensor_dataset_rows_and_size_mismatch() -> None:
    same(lambda lib: [tensors(lib)[i] for i in range(7)] + [len(tensors(lib))])
    msg = same_error(lambda lib: lib.utils.data.TensorDataset(lib.zeros(3), lib.zeros(4)))
    assert msg == "Size mismatch between tensors"


@requires_torch
def test_concat_subset_stack_chain() -> None:
    same(lambda lib: [lib.utils.data.ConcatDataset([[1, 2], [3], [4, 5]])[i] for i in (0, 2, 4, -1, -5)])
    same(lambda lib: lib.utils.data.ConcatDataset([[1, 2], [3]]).cumulative_sizes)
    same(lambda lib: list(lib.utils.data.Subset("abcde", [4, 0, 2])) + [len(lib.utils.data.Subset("abc", [1]))])
    same(lambda lib: lib.utils.data.Subset(tensors(lib), [3, 1]).__getitems__([1, 0]))
    same(lambda lib: [lib.utils.data.StackDataset([1, 2], "ab")[1], lib.utils.data.StackDataset(a=[1, 2], b="ab")[0]])
    same(lambda lib: list(lib.utils.data.ChainDataset([Stream.make(lib, 2), Stream.make(lib, 3)])))
    same(lambda lib: list(Stream.make(lib, 2) + Stream.make(lib, 1)))
    same(lambda lib: type(lib.utils.data.TensorDataset(lib.zeros(2)) + [1]).__name__)
    same_error(lambda lib: lib.utils.data.ConcatDataset([[1, 2]])[-3])
    same_error(lambda lib: lib.utils.data.ConcatDataset([]))
    same_error(lambda lib: lib.utils.data.ConcatDataset([Stream.make(lib, 1)]))
    same_error(lambda lib: lib.utils.data.StackDataset([1], [1, 2]))
    same_error(lambda lib: lib.utils.data.StackDataset())
    same_error(lambda lib: lib.utils.data.StackDataset([1], a=[1]))
    same_error(lambda lib: len(lib.utils.data.ChainDataset([[1]])))


@requires_torch
def test_subset_subclass_must_override_getitems() -> None:
    def make(lib: Any) -> Any:
        class Doubled(lib.utils.data.Subset):
            def __getitem__(self, idx: int) -> Any:
                return 2 * super().__getitem__(idx)

        return Doubled([1, 2], [0])

    assert "overrides __getitem__ but not __getitems__" in same_error(make)


@requires_torch
@pytest.mark.parametrize("lengths", [[3, 7], [0.7, 0.3], [0.5, 0.25, 0.25], [0.34, 0.33, 0.33], [1.0]])
def test_random_split_sizes_match_torch(lengths: list[float]) -> None:
    for lib in libs():
        parts = lib.utils.data.random_split(range(10), lengths, generator=lib.Generator().manual_seed(1))
        assert sorted(i for p in parts for i in p.indices) == list(range(10))
    same(lambda lib: [len(p) for p in lib.utils.data.random_split(range(10), lengths)])


@requires_torch
def test_random_split_errors_and_empty_split_warning() -> None:
    same_error(lambda lib: lib.utils.data.random_split(range(10), [3, 3]))
    for lib in libs():
        with pytest.warns(UserWarning, match="Length of split at index 1 is 0"):
            lib.utils.data.random_split(range(2), [1.0, 0.0])


def test_random_split_repeats_under_a_seed() -> None:
    def split(seed: int) -> list[list[int]]:
        return [list(p.indices) for p in data.random_split(range(20), [0.5, 0.5],
                                                            generator=agrad.Generator().manual_seed(seed))]

    assert split(3) == split(3) != split(4)
    agrad.manual_seed(5)
    first = [list(p.indices) for p in data.random_split(range(20), [10, 10])]
    agrad.manual_seed(5)
    assert first == [list(p.indices) for p in data.random_split(range(20), [10, 10])]


# -- collation --------------------------------------------------------------------------


def batch_of(lib: Any) -> list[Any]:
    """Samples of a nested structure: tensors, numbers, strings, numpy values, dicts, namedtuples, lists, tuples."""
    return [{"t": lib.tensor([i, i + 1.0]), "f": i + 0.5, "i": i, "b": i % 2 == 0, "s": f"s{i}",
             "np": np.array([i, 2 * i], dtype=np.int32), "npf": np.float32(i), "p": Point(i, [i, -i]),
             "tup": (i, "x"), "bytes": b"b"} for i in range(3)]


@requires_torch
def test_default_collate_nested_structures_and_dtypes() -> None:
    same(lambda lib: lib.utils.data.default_collate(batch_of(lib)))
    got = data.default_collate(batch_of(agrad))
    assert got["f"].dtype == agrad.float64 and got["i"].dtype == agrad.int64 and got["b"].dtype == agrad.bool
    assert got["t"].shape == (3, 2) and got["s"] == ["s0", "s1", "s2"] and isinstance(got["p"], Point)


@requires_torch
def test_default_collate_errors() -> None:
    same_error(lambda lib: lib.utils.data.default_collate([[1, 2], [3]]))
    same_error(lambda lib: lib.utils.data.default_collate([object(), object()]))
    same_error(lambda lib: lib.utils.data.default_collate([np.array(["a"]), np.array(["b"])]))


@requires_torch
def test_default_convert() -> None:
    same(lambda lib: lib.utils.data.default_convert(
        {"a": np.arange(3), "b": (np.float64(1.5), "s"), "c": [np.array(["x"])], "d": Point(np.int64(1), 2)}))
    same(lambda lib: lib.utils.data.default_convert(lib.tensor([1, 2])))


# -- samplers ---------------------------------------------------------------------------


@requires_torch
@pytest.mark.parametrize("batch_size, drop_last", [(1, False), (3, False), (3, True), (7, True), (10, False)])
def test_batch_sampler_matches_torch(batch_size: int, drop_last: bool) -> None:
    def batches(lib: Any) -> Any:
        s = lib.utils.data.BatchSampler(lib.utils.data.SequentialSampler(range(7)), batch_size, drop_last)
        return list(s), len(s)

    same(batches)


@requires_torch
def test_sampler_argument_errors() -> None:
    same_error(lambda lib: lib.utils.data.BatchSampler(range(3), 0, False))
    same_error(lambda lib: lib.utils.data.BatchSampler(range(3), True, False))
    same_error(lambda lib: lib.utils.data.BatchSampler(range(3), 2, 1))
    same_error(lambda lib: lib.utils.data.RandomSampler(range(3), replacement=1))
    same_error(lambda lib: lib.utils.data.RandomSampler(range(3), num_samples=0))
    same_error(lambda lib: lib.utils.data.RandomSampler([]))
    same_error(lambda lib: lib.utils.data.WeightedRandomSampler([1.0], 0))
    same_error(lambda lib: lib.utils.data.WeightedRandomSampler([1.0], 2, replacement=None))
    same_error(lambda lib: lib.utils.data.WeightedRandomSampler([[1.0]], 2))


def test_random_sampler_contents_and_lengths() -> None:
    assert sorted(data.RandomSampler(range(9))) == list(range(9))
    long = list(data.RandomSampler(range(4), num_samples=10))
    assert len(long) == 10 and sorted(long[:4]) == sorted(long[4:8]) == [0, 1, 2, 3]
    drawn = list(data.RandomSampler(range(4), replacement=True, num_samples=70))
    assert len(drawn) == len(data.RandomSampler(range(4), replacement=True, num_samples=70)) == 70
    assert set(drawn) <= {0, 1, 2, 3}
    assert sorted(data.SubsetRandomSampler([5, 9, 2])) == [2, 5, 9] and len(data.SubsetRandomSampler([5, 9])) == 2
    weighted = list(data.WeightedRandomSampler([0.0, 2.0, 0.0, 1.0], 50))
    assert len(weighted) == 50 and set(weighted) == {1, 3}
    assert sorted(data.WeightedRandomSampler([1.0, 1.0, 0.5], 3, replacement=False)) == [0, 1, 2]


def test_random_sampler_repeats_under_seeds_and_generators() -> None:
    agrad.manual_seed(0)
    first = [list(data.RandomSampler(range(30))) for _ in range(2)]
    agrad.manual_seed(0)
    assert [list(data.RandomSampler(range(30))) for _ in range(2)] == first
    assert first[0] != first[1]  # each pass draws a new order
    g = agrad.Generator()
    sampler = data.RandomSampler(range(30), generator=g)
    g.manual_seed(7)
    a = list(sampler)
    g.manual_seed(7)
    assert list(sampler) == a


def test_shuffle_is_uniform() -> None:
    """Over many epochs, every element lands in every position about equally often."""
    n, epochs = 5, 2000
    agrad.manual_seed(0)
    loader = data.DataLoader(list(range(n)), batch_size=n, shuffle=True)
    counts = np.zeros((n, n))
    for _ in range(epochs):
        (batch,) = list(loader)
        counts[np.arange(n), batch.numpy()] += 1
    expected = epochs / n
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 60  # 16 degrees of freedom: P(chi2 > 60) < 1e-6
    assert counts.sum(axis=1).tolist() == [epochs] * n


# -- DataLoader -------------------------------------------------------------------------


@requires_torch
@pytest.mark.parametrize("kwargs", [{}, {"batch_size": 3}, {"batch_size": 3, "drop_last": True},
                                    {"batch_size": 10}, {"batch_size": None}])
def test_loader_batches_match_torch(kwargs: dict[str, Any]) -> None:
    same(lambda lib: (list(lib.utils.data.DataLoader(tensors(lib), **kwargs)),
                      len(lib.utils.data.DataLoader(tensors(lib), **kwargs))))
    same(lambda lib: list(lib.utils.data.DataLoader(batch_of(lib) * 2, **kwargs)))


@requires_torch
def test_loader_samplers_and_collate_fn() -> None:
    same(lambda lib: list(lib.utils.data.DataLoader(tensors(lib), batch_sampler=[[0, 5], [2], [6, 1, 3]])))
    same(lambda lib: list(lib.utils.data.DataLoader(list("abcdef"), batch_size=4, sampler=[5, 3, 1, 0, 2])))
    same(lambda lib: list(lib.utils.data.DataLoader(range(5), batch_size=2, collate_fn=sum)))
    same(lambda lib: len(lib.utils.data.DataLoader(range(5), batch_size=2, shuffle=True)))
    same(lambda lib: list(lib.utils.data.DataLoader(lib.utils.data.Subset(tensors(lib), [6, 0, 3]), batch_size=2)))


@requires_torch
@pytest.mark.parametrize("kwargs", [{}, {"batch_size": 2}, {"batch_size": 2, "drop_last": True},
                                    {"batch_size": None}, {"batch_size": 5}, {"batch_size": 6, "drop_last": True}])
def test_loader_over_iterable_dataset(kwargs: dict[str, Any]) -> None:
    same(lambda lib: (list(lib.utils.data.DataLoader(Stream.make(lib, 5), **kwargs)),
                      len(lib.utils.data.DataLoader(Stream.make(lib, 5), **kwargs))))


ERRORS = [
    {"shuffle": True, "sampler": [0, 1]},
    {"batch_sampler": [[0]], "batch_size": 2},
    {"batch_sampler": [[0]], "shuffle": True},
    {"batch_sampler": [[0]], "sampler": [0]},
    {"batch_sampler": [[0]], "drop_last": True},
    {"batch_size": None, "drop_last": True},
    {"num_workers": -1},
    {"timeout": -1},
    {"prefetch_factor": 2},
    {"persistent_workers": True},
    {"multiprocessing_context": "spawn"},
    {"batch_size": 0},
]


@requires_torch
@pytest.mark.parametrize("kwargs", ERRORS, ids=lambda kw: ",".join(kw))
def test_loader_argument_conflicts(kwargs: dict[str, Any]) -> None:
    same_error(lambda lib: lib.utils.data.DataLoader(list(range(4)), **kwargs))


@requires_torch
@pytest.mark.parametrize("kwargs", [{"shuffle": True}, {"sampler": [0]}, {"batch_sampler": [[0]]}],
                         ids=lambda kw: ",".join(kw))
def test_iterable_dataset_refuses_samplers(kwargs: dict[str, Any]) -> None:
    assert "IterableDataset" in same_error(lambda lib: lib.utils.data.DataLoader(Stream.make(lib, 3), **kwargs))


@requires_torch
def test_loader_attributes_fixed_after_init_and_timeout() -> None:
    same_error(lambda lib: setattr(lib.utils.data.DataLoader([1]), "batch_size", 2))
    same_error(lambda lib: iter(lib.utils.data.DataLoader([1], timeout=1)))
    loader = data.DataLoader([1, 2], batch_size=2)
    assert loader.batch_size == 2 and isinstance(loader.sampler, data.SequentialSampler)
    assert isinstance(data.DataLoader([1], shuffle=True).sampler, data.RandomSampler)


def test_workers_are_refused_with_the_reason() -> None:
    with pytest.raises(NotImplementedError, match="num_workers=2.*no worker processes"):
        data.DataLoader([1, 2], num_workers=2)
    assert data.get_worker_info() is None


def test_loader_shuffle_repeats_under_seed_and_generator() -> None:
    def epochs(loader: data.DataLoader[Any]) -> list[list[int]]:
        return [[b.tolist() for b in loader] for _ in range(2)]

    agrad.manual_seed(3)
    first = epochs(data.DataLoader(list(range(12)), batch_size=4, shuffle=True))
    agrad.manual_seed(3)
    assert epochs(data.DataLoader(list(range(12)), batch_size=4, shuffle=True)) == first
    assert first[0] != first[1]
    with_generator = [epochs(data.DataLoader(list(range(12)), batch_size=4, shuffle=True,
                                             generator=agrad.Generator().manual_seed(1))) for _ in range(2)]
    assert with_generator[0] == with_generator[1]


def test_pin_memory_is_accepted() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [b.tolist() for b in data.DataLoader([1, 2], batch_size=2, pin_memory=True)] == [[1, 2]]
