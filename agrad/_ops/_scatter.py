"""Scatter and index-write ops: scatter, index_add, index_copy, index_fill, masked_scatter, take..."""

from __future__ import annotations

from typing import Any

# The public names of this family (star-imported by ``agrad/__init__.py``).
__all__: list[str] = []

# Tensor methods of this family that are not one entry's ``methods=``
# (composites, aliases with another signature); bound by ``_methods.bind``.
METHODS: dict[str, Any] = {}
