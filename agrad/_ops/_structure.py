"""Structural ops built on the shape family: triangles and diagonals, stacking
and splitting helpers, moved and rotated dims."""

from __future__ import annotations

# The public names of this family (star-imported by ``agrad/__init__.py``).
__all__: list[str] = []
