"""Datasets, samplers and the DataLoader (mirrors ``torch.utils.data``).

The names a training program imports from ``torch.utils.data``, with
PyTorch's signatures, defaults and errors; loading is single-process (see
Note [No worker processes] in ``dataloader.py``).

Example::

    >>> from agrad.utils.data import DataLoader, TensorDataset
    >>> x, y = agrad.arange(8.0).reshape(4, 2), agrad.tensor([0, 1, 1, 0])
    >>> [xb.shape for xb, yb in DataLoader(TensorDataset(x, y), batch_size=3)]
    [agrad.Size([3, 2]), agrad.Size([1, 2])]
"""

from agrad.utils.data._utils.collate import default_collate, default_convert
from agrad.utils.data.dataloader import DataLoader, get_worker_info
from agrad.utils.data.dataset import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
    random_split,
)
from agrad.utils.data.sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = [
    "BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "Dataset", "IterableDataset", "RandomSampler",
    "Sampler", "SequentialSampler", "StackDataset", "Subset", "SubsetRandomSampler", "TensorDataset",
    "WeightedRandomSampler", "default_collate", "default_convert", "get_worker_info", "random_split",
]
