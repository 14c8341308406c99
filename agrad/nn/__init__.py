"""Neural-network building blocks (mirrors ``torch.nn``); today its functional API."""

from agrad.nn import functional

__all__ = ["functional"]
