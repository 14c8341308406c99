"""Where the samplers and ``random_split`` draw: the public ``agrad`` namespace.

PyTorch's samplers call ``torch.randperm``, ``torch.randint`` and
``torch.multinomial`` through the ``torch`` module, so a program that seeds,
replaces or wraps those functions sees every draw a DataLoader makes (the
tutorial ports' replay, tests/api/test_tutorial_ports.py, relies on it).
agrad's do the same through ``agrad``, imported when a draw is made: the
package is fully imported by then (``agrad`` imports ``agrad.utils.data``,
so a module-level import would be a cycle; tests/test_layering.py allows
this one call-time edge).
"""

from __future__ import annotations

from typing import Any

__all__ = ["public"]


def public() -> Any:
    """The ``agrad`` namespace (see the module docstring)."""
    import agrad

    return agrad
