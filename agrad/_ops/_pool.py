"""Pooling (max, average, adaptive), unfold/fold, interpolation and pixel shuffles."""

from __future__ import annotations

# The public names of this family (star-imported by ``agrad/__init__.py``).
__all__: list[str] = []
