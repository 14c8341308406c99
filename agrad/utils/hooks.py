"""Hook handles (mirrors ``torch.utils.hooks``).

The class lives with the graph, in ``agrad/_graph/_hooks.py``: tensors and
Nodes, below this public module, register their hooks there.
"""

from agrad._graph._hooks import RemovableHandle

__all__ = ["RemovableHandle"]
