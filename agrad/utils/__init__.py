"""Utilities (mirrors ``torch.utils``)."""

from agrad.utils import hooks

# ``agrad.utils.checkpoint`` is imported by ``agrad/__init__.py`` once the
# package is complete: this package is imported early (``_graph`` uses its
# hooks), before the engine and ``autograd`` that checkpointing needs.
__all__ = ["hooks", "checkpoint"]
