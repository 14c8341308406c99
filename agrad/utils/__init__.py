"""Utilities (mirrors ``torch.utils``)."""

from agrad.utils import checkpoint, hooks

__all__ = ["hooks", "checkpoint"]
