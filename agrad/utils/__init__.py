"""Utilities (mirrors ``torch.utils``)."""

from agrad.utils import hooks

__all__ = ["hooks"]
