"""Matrix decompositions and the linear-algebra functions built on them (det, eigh, svd, qr, cholesky, lstsq...)."""

from __future__ import annotations

# The public names of this family (star-imported by ``agrad/__init__.py``).
__all__: list[str] = []
