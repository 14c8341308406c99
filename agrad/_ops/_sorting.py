"""Sorting, selection and cumulative ops: sort, topk, median, unique, searchsorted, cumprod..."""

from __future__ import annotations

# The public names of this family (star-imported by ``agrad/__init__.py``).
__all__: list[str] = []
