"""Scatter and index-write ops: scatter, index_add, index_copy, index_fill, masked_scatter, take..."""

from __future__ import annotations

# The public names of this family (star-imported by ``agrad/__init__.py``).
__all__: list[str] = []
