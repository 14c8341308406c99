"""Elementwise math beyond the arithmetic core: trigonometric and special
functions, integer and bitwise arithmetic, predicates (isnan...) and aliases."""

from __future__ import annotations

# The public names of this family (star-imported by ``agrad/__init__.py``).
__all__: list[str] = []
