"""Linear algebra (mirrors ``torch.linalg``)."""

from __future__ import annotations

from typing import Any

from agrad._ops._linalg import inv, solve
from agrad._ops._reductions import vector_norm
from agrad._tensor import Tensor

__all__ = ["vector_norm", "solve", "inv", "norm"]


def norm(A: Tensor, ord: Any = None, dim: Any = None, keepdim: bool = False) -> Tensor:
    """The vector norm of ``A`` (``ord`` as :func:`vector_norm`; 2 by default).

    Only vector norms are supported: a matrix ``ord`` ('fro', 'nuc', or with a
    2-tuple ``dim``) computes the Frobenius norm for ``'fro'`` and raises otherwise.
    """
    if ord is None or ord == "fro":
        return vector_norm(A, 2, dim=dim, keepdim=keepdim)
    if isinstance(ord, str) or (isinstance(dim, (tuple, list)) and len(dim) == 2):
        raise NotImplementedError(f"linalg.norm: matrix norm ord={ord!r} is not supported by agrad")
    return vector_norm(A, ord, dim=dim, keepdim=keepdim)
