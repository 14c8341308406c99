"""The backward graph's public types and saved-tensor hooks (mirrors
``torch.autograd.graph``), and how the engine schedules a backward over it
(agrad only: ``engine_options``)."""

from agrad._engine._options import engine_options
from agrad._graph._node import Node
from agrad._graph._saved_hooks import disable_saved_tensors_hooks, saved_tensors_hooks

__all__ = ["Node", "engine_options", "saved_tensors_hooks", "disable_saved_tensors_hooks"]
