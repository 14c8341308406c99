"""The backward graph's public types (mirrors ``torch.autograd.graph``)."""

from agrad._graph._node import Node

__all__ = ["Node"]
