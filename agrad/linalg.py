"""Linear algebra (mirrors ``torch.linalg``).

The functions live in the op families ``agrad._ops._linalg`` (products, solve,
inv, cross) and ``agrad._ops._decompositions`` (decompositions and what is
built on them); this module is their ``torch.linalg`` path.  Where ``torch.*``
has a function of the same name with other semantics (``torch.svd`` returns V,
``torch.qr`` takes ``some``, ``torch.cross`` picks its own dim) the one here is
``torch.linalg``'s.
"""

from __future__ import annotations

from typing import Any

from agrad._ops._decompositions import (
    cholesky_ex,
    cond,
    det,
    eigh,
    eigvalsh,
    householder_product,
    inv_ex,
    lstsq,
    lu,
    lu_factor,
    lu_factor_ex,
    matrix_exp,
    matrix_norm,
    matrix_rank,
    pinv,
    solve_ex,
    solve_triangular,
    svdvals,
    tensorinv,
    tensorsolve,
    vander,
    vecdot,
)
from agrad._ops._decompositions import linalg_cholesky as cholesky
from agrad._ops._decompositions import linalg_diagonal as diagonal
from agrad._ops._decompositions import linalg_lu_solve as lu_solve
from agrad._ops._decompositions import linalg_qr as qr
from agrad._ops._decompositions import linalg_slogdet as slogdet
from agrad._ops._decompositions import linalg_svd as svd
from agrad._ops._linalg import LinAlgError, inv, matmul, matrix_power, multi_dot, solve
from agrad._ops._linalg import linalg_cross as cross
from agrad._ops._reductions import vector_norm
from agrad._tensor import Tensor

__all__ = ["LinAlgError", "vector_norm", "matrix_norm", "norm", "solve", "inv", "inv_ex", "det", "slogdet", "eigh",
           "eigvalsh", "svd", "svdvals", "qr", "cholesky", "cholesky_ex", "lu", "lu_factor", "lu_factor_ex", "lstsq",
           "pinv", "matrix_power", "matrix_exp", "matrix_rank", "cond", "cross", "vecdot", "multi_dot", "matmul",
           "solve_triangular", "tensorinv", "tensorsolve", "vander", "diagonal", "solve_ex",
           "lu_solve", "householder_product"]


def norm(A: Tensor, ord: Any = None, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """A vector or matrix norm (``torch.linalg.norm``).

    With a 2-tuple ``dim``, or a string ``ord``, or an ``ord`` and no ``dim`` on a 2-D
    ``A``, it is :func:`matrix_norm` (``ord`` 'fro' by default); otherwise
    :func:`vector_norm` (the 2-norm of all elements when neither is given).

    Example::

        >>> import agrad
        >>> A = agrad.tensor([[3.0, 0.0], [0.0, 4.0]])
        >>> agrad.linalg.norm(A).item(), agrad.linalg.norm(A, 2).item(), agrad.linalg.norm(A, "nuc").item()
        (5.0, 4.0, 7.0)
        >>> agrad.linalg.norm(A, 1, dim=0).tolist()
        [3.0, 4.0]
    """
    if dim is not None:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        if len(dims) not in (1, 2):
            raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. Got {list(dims)}")
        if len(dims) == 2:
            return matrix_norm(A, "fro" if ord is None else ord, dims, keepdim, dtype=dtype)
        if isinstance(ord, str):
            raise RuntimeError(f"linalg.vector_norm: Expected a float ord but got {ord}")
    elif ord is not None:
        if A.ndim not in (1, 2):
            raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. "
                               f"Got {A.ndim}D.")
        if A.ndim == 2 or isinstance(ord, str):
            return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    if dtype is not None:
        A = A.to(dtype)
    return vector_norm(A, 2 if ord is None else ord, dim=dim, keepdim=keepdim)

