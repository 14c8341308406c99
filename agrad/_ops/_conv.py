"""Convolutions (N-d, transposed) as im2col views plus BLAS products."""

from __future__ import annotations

# The public names of this family (star-imported by ``agrad/__init__.py``).
__all__: list[str] = []
