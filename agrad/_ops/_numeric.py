"""Numerical utilities: isin, trapezoid, cov, corrcoef, histogram, renorm, frexp, gradient, and friends.

Ops with a gradient of their own (``renorm``, ``mvlgamma``) are ``defop``
entries; ``frexp`` has two outputs and records one node through the
decompositions' ``_connect`` (Note [Decompositions]).  The rest are
composites of other ops (``trapezoid``, ``cov``, ``gradient``...), whose
gradients follow from theirs, or are integer-valued (``isin``,
``unravel_index``, ``histogram``).  PyTorch's deprecated ``torch.lu``,
``nuclear_norm`` and ``frobenius_norm`` warn as PyTorch's do, and the
functions PyTorch removed in 1.9 (``solve``, ``lstsq``, ``symeig``, ``eig``)
raise its error.
"""

from __future__ import annotations

from typing import Any

# The public names of this family (star-imported by ``agrad/__init__.py``).
__all__: list[str] = []

# Tensor methods of this family that are not one entry's ``methods=``
# (composites, aliases with another signature); bound by ``_methods.bind``.
METHODS: dict[str, Any] = {}
