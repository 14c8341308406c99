"""The DataLoader's collation functions, at PyTorch's path (``torch.utils.data._utils``)."""

from agrad.utils.data._utils import collate

__all__ = ["collate"]
