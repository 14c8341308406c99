"""DataLoader: batches read from a dataset (mirrors ``torch.utils.data.dataloader``).

A loader combines a dataset, a sampler (the order of its keys) and a collate
function (samples into a batch), with PyTorch's arguments, defaults and
argument-conflict errors.  Loading is single-process, in the caller's thread.

Note [No worker processes]
~~~~~~~~~~~~~~~~~~~~~~~~~~
PyTorch's ``num_workers > 0`` forks worker processes that load batches and
send the tensors back through shared memory.  agrad has no shared-memory
tensors, and its engine runs on an event loop that a forked child would
inherit mid-flight, so a loader with workers raises ``NotImplementedError``
when it is built rather than running single-process under a promise it does
not keep.  Slow loading (files, decoding) can run in a thread instead: iterate
the loader in a worker thread (``anyio.to_thread.run_sync(next, it)``) or load
in the event loop's thread between steps.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from agrad._creation import Generator
from agrad.utils.data._utils.collate import default_collate, default_convert
from agrad.utils.data.dataset import Dataset, IterableDataset
from agrad.utils.data.sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader", "get_worker_info", "default_collate", "default_convert"]

T_co = TypeVar("T_co", covariant=True)


def get_worker_info() -> None:
    """Information about the worker process loading data: always ``None``, as in
    PyTorch's main process, since agrad loads in the caller (Note [No worker processes]).

    Example::

        >>> agrad.utils.data.get_worker_info() is None
        True
    """
    return None


class _InfiniteConstantSampler(Sampler[Any]):
    """The keys of an iterable-style dataset: ``None`` forever (its samples come
    from its own iterator)."""

    def __iter__(self) -> Iterator[Any]:
        while True:
            yield None


class DataLoader(Generic[T_co]):
    """Iterate over ``dataset`` in batches.

    A map-style dataset is read in the order of ``sampler`` (sequential, or
    random with ``shuffle=True``), ``batch_size`` keys at a time (or in the
    lists of keys of ``batch_sampler``), and each batch's samples are merged
    by ``collate_fn`` (:func:`~agrad.utils.data.default_collate`).  An
    iterable-style dataset is read in its own order.  ``batch_size=None``
    turns batching off: each sample is only converted
    (:func:`~agrad.utils.data.default_convert`).

    The arguments are PyTorch's; those about worker processes and pinned
    memory are checked as PyTorch checks them, but ``num_workers`` must be 0
    (Note [No worker processes]) and ``pin_memory`` is accepted and has no
    effect.  Shuffling draws from agrad's default generator (or ``generator``),
    so ``agrad.manual_seed`` makes it repeatable.

    Example::

        >>> ds = agrad.utils.data.TensorDataset(agrad.arange(10.0).reshape(5, 2), agrad.arange(5))
        >>> loader = agrad.utils.data.DataLoader(ds, batch_size=2)
        >>> len(loader), [tuple(y.tolist()) for _, y in loader]
        (3, [(0, 1), (2, 3), (4,)])
    """

    dataset: Dataset[T_co]
    batch_size: int | None
    num_workers: int
    pin_memory: bool
    drop_last: bool
    timeout: float
    sampler: Sampler[Any] | Iterable[Any]
    pin_memory_device: str
    prefetch_factor: int | None
    __initialized = False

    def __init__(self, dataset: Dataset[T_co], batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler: Sampler[Any] | Iterable[Any] | None = None,
                 batch_sampler: Sampler[list[Any]] | Iterable[list[Any]] | None = None, num_workers: int = 0,
                 collate_fn: Callable[[Any], Any] | None = None, pin_memory: bool = False, drop_last: bool = False,
                 timeout: float = 0, worker_init_fn: Callable[[int], None] | None = None,
                 multiprocessing_context: Any = None, generator: Generator | None = None, *,
                 prefetch_factor: int | None = None, persistent_workers: bool = False, pin_memory_device: str = "",
                 in_order: bool = True) -> None:
        _check_worker_options(num_workers, timeout, prefetch_factor, persistent_workers, multiprocessing_context)
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.in_order = in_order
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in {False, None}:
                raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle option, "
                                 f"but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler option, "
                                 f"but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified batch_sampler option, "
                                 f"but got batch_sampler={batch_sampler}")
        else:
            shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, "
                                 "and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with drop_last")
        if sampler is None:
            if self._iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)  # type: ignore[arg-type]
            else:
                sampler = SequentialSampler(dataset)  # type: ignore[arg-type]
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self.__initialized = True

    def __setattr__(self, attr: str, val: Any) -> None:
        if self.__initialized and attr in ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset",
                                           "persistent_workers"):
            raise ValueError(f"{attr} attribute should not be set after {self.__class__.__name__} is initialized")
        super().__setattr__(attr, val)

    @property
    def _auto_collation(self) -> bool:
        """Whether samples are batched (a batch sampler gives lists of keys)."""
        return self.batch_sampler is not None

    @property
    def _index_sampler(self) -> Any:
        """What the loader iterates: the batch sampler when batching, else the sampler."""
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self) -> Iterator[Any]:
        if self.timeout != 0:
            raise AssertionError("_SingleProcessDataLoaderIter requires timeout == 0")
        if self._iterable:
            return self._iter_stream()
        return self._iter_map()

    def _iter_map(self) -> Iterator[Any]:
        """The batches of a map-style dataset: ``__getitems__`` (if the dataset has
        it) or one ``__getitem__`` per key, then ``collate_fn``."""
        getitems = getattr(self.dataset, "__getitems__", None)
        for keys in self._index_sampler:
            if not self._auto_collation:
                yield self.collate_fn(self.dataset[keys])
            elif getitems:
                yield self.collate_fn(getitems(keys))
            else:
                yield self.collate_fn([self.dataset[key] for key in keys])

    def _iter_stream(self) -> Iterator[Any]:
        """The batches of an iterable-style dataset, read from its iterator in order;
        a short last batch is dropped with ``drop_last``."""
        samples = iter(self.dataset)
        if not self._auto_collation:
            for sample in samples:
                yield self.collate_fn(sample)
            return
        for keys in self._index_sampler:
            batch = [sample for _, sample in zip(keys, samples)]
            if not batch or (self.drop_last and len(batch) < len(keys)):
                return
            yield self.collate_fn(batch)

    def __len__(self) -> int:
        if not self._iterable:
            return len(self._index_sampler)
        length: int = len(self.dataset)  # type: ignore[arg-type]
        if self.batch_size is not None:
            length = length // self.batch_size if self.drop_last else math.ceil(length / self.batch_size)
        return length

    def check_worker_number_rationality(self) -> None:
        """PyTorch warns here when ``num_workers`` exceeds the CPUs; with no workers
        there is nothing to check."""


def _check_worker_options(num_workers: int, timeout: float, prefetch_factor: int | None, persistent_workers: bool,
                          multiprocessing_context: Any) -> None:
    """PyTorch's checks of the worker options, then the refusal of workers
    (Note [No worker processes])."""
    if num_workers < 0:
        raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable multiprocessing.")
    if timeout < 0:
        raise ValueError("timeout option should be non-negative")
    if num_workers == 0 and prefetch_factor is not None:
        raise ValueError("prefetch_factor option could only be specified in multiprocessing."
                         "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None.")
    if prefetch_factor is not None and prefetch_factor < 0:
        raise ValueError("prefetch_factor option should be non-negative")
    if persistent_workers and num_workers == 0:
        raise ValueError("persistent_workers option needs num_workers > 0")
    if multiprocessing_context is not None and num_workers == 0:
        raise ValueError("multiprocessing_context can only be used with multi-process loading (num_workers > 0), "
                         f"but got num_workers={num_workers}")
    if num_workers > 0:
        raise NotImplementedError(
            f"DataLoader(num_workers={num_workers}): agrad loads data in the calling thread only (it has no "
            "worker processes: no shared-memory tensors, and a forked child would inherit the engine's event "
            "loop). Use num_workers=0; to overlap loading with training, iterate the loader in a thread "
            "(e.g. anyio.to_thread.run_sync(next, iterator)).")
