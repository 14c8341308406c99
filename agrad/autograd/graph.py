"""The backward graph's public types (mirrors ``torch.autograd.graph``), and
how the engine schedules a backward over it (agrad only: ``engine_options``)."""

from agrad._engine._options import engine_options
from agrad._graph._node import Node

__all__ = ["Node", "engine_options"]
