"""Utilities (mirrors ``torch.utils``)."""

from agrad.utils import checkpoint, data, hooks

__all__ = ["hooks", "checkpoint", "data"]
