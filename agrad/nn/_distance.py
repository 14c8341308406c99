"""Distance functions of nn.functional: cosine_similarity, pairwise_distance, pdist.

Composites of table ops.  :func:`_pnorm`, the ``p``-norm they share (with
``normalize`` and ``triplet_margin_loss``), takes PyTorch's subgradient at zero
(Note [Norms at zero]).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from agrad import _dtype
from agrad._errors import broadcast_error
from agrad._grad_mode import no_grad
from agrad._ops._elementwise import abs as _abs
from agrad._ops._elementwise import sign, where
from agrad._ops._reductions import vector_norm
from agrad._ops._shape import _wrap_dim
from agrad._tensor import Tensor

__all__ = ["cosine_similarity", "pairwise_distance", "pdist"]  # and cdist, which torch has at top level only


# Note [Norms at zero]
# ~~~~~~~~~~~~~~~~~~~~
# ``sum(|x|**p) ** (1/p)`` written plainly has no finite gradient where x or
# the whole norm is 0 (``0 ** (1/p - 1)`` is inf, and inf * 0 is NaN), yet
# distances of equal points are common (``pdist`` of repeated rows).  PyTorch's
# norm_backward and _pdist_backward give 0 there: the subgradient 0 at a zero
# element and at a zero norm.  So the powers here see 1 where the value is 0
# (``where(nz, a, 1)``), and ``where`` picks 0 for them: the discarded branch is
# finite, so its zero gradient stays zero.  p = 2 and p = inf are the table's
# vector_norm entries (which take the same subgradients); p = 0, the count of
# non-zeros, keeps a (zero) gradient as PyTorch's does, through ``sign``.
def _pnorm(x: Tensor, p: float, dim: Any, keepdim: bool = False) -> Tensor:
    """The ``p``-norm of ``x`` over ``dim``, with PyTorch's gradients (Note [Norms at zero])."""
    if p == 2 or math.isinf(p):
        return vector_norm(x, p, dim=dim, keepdim=keepdim)
    if p == 1:
        return _abs(x).sum(dim=dim, keepdim=keepdim)
    if p == 0:
        return _abs(sign(x)).sum(dim=dim, keepdim=keepdim)
    a = _abs(x)
    if p < 0:  # a zero element makes the norm 0 through inf, as in PyTorch
        return (a ** p).sum(dim=dim, keepdim=keepdim) ** (1.0 / p)
    nz = a > 0
    s = where(nz, where(nz, a, 1.0) ** p, 0.0).sum(dim=dim, keepdim=keepdim)
    pos = s > 0
    return where(pos, where(pos, s, 1.0) ** (1.0 / p), 0.0)


def _broadcast_pair(x1: Tensor, x2: Tensor) -> tuple[Tensor, Tensor]:
    """``x1`` and ``x2`` expanded to their broadcast shape (PyTorch's error if there is none)."""
    try:
        shape = np.broadcast_shapes(tuple(x1.shape), tuple(x2.shape))
    except ValueError:
        err = broadcast_error([tuple(x1.shape), tuple(x2.shape)])
        raise (err or RuntimeError("shapes cannot be broadcast")) from None
    return x1.expand(shape), x2.expand(shape)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """Cosine of the angle between ``x1`` and ``x2`` along ``dim`` (broadcast together).

    PyTorch 2.13's formula: each input is divided by its norm clamped to at least
    ``eps`` and the products summed, which stays within [-1, 1].  As in PyTorch,
    the clamp is applied in place without recording (``no_grad``), so the
    gradient flows to a clamped norm as if it were not clamped.

    Example::

        >>> import agrad
        >>> agrad.nn.functional.cosine_similarity(agrad.tensor([[1.0, 0.0]]), agrad.tensor([[1.0, 1.0]]))
        tensor([0.7071])
    """
    dt = _dtype.result_type([t.dtype for t in (x1, x2) if t.ndim], [t.dtype for t in (x1, x2) if not t.ndim], [])
    if not dt.is_floating_point:
        raise RuntimeError(f"expected common dtype to be floating point, yet common dtype is "
                           f"{_dtype.SCALAR_TYPE_NAMES[dt.name]}")
    a, b = _broadcast_pair(x1.to(dt), x2.to(dt))
    d = _wrap_dim(dim, a.ndim)
    na = vector_norm(a, 2, dim=d, keepdim=True).clone()
    nb = vector_norm(b, 2, dim=d, keepdim=True).clone()
    with no_grad():
        na.clamp_(min=eps)
        nb.clamp_(min=eps)
    return ((a / na) * (b / nb)).sum(dim=d)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Tensor:
    """The ``p``-norm of ``x1 - x2 + eps`` over the last dimension of their broadcast."""
    innermost = max(x1.ndim, x2.ndim) - 1
    diff = x1 - x2 + eps
    if innermost < 0:  # two 0-d tensors: the norm of one element
        return _pnorm(diff.reshape(1), p, 0, keepdim=False)
    return _pnorm(diff, p, innermost, keepdim=keepdim)


def pdist(input: Tensor, p: float = 2) -> Tensor:
    """The ``p``-norm distances between all pairs of rows ``i < j`` of the 2-D
    ``input``, in row-major order of the pairs: ``N * (N - 1) / 2`` values."""
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if not input.is_floating_point():
        raise RuntimeError("pdist only supports floating-point dtypes")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    i, j = np.triu_indices(input.shape[0], 1)
    diff = input[i] - input[j]
    if math.isinf(p):
        return _max_distance(diff)
    return _pnorm(diff, p, 1)


# Note [pdist's infinity norm]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch's norm (and so pairwise_distance) splits the gradient of a max-norm
# evenly among the elements tied at the maximum; its _pdist_backward instead
# gives each tied element the whole gradient, ``sign(diff) * (|diff| == dist)``.
# pdist keeps that: the value is the (detached) largest magnitude, and the
# gradient comes from ``(|d| - |d|.detach()) * tied``, exactly 0 in value.
def _max_distance(diff: Tensor) -> Tensor:
    """The infinity norm of each row of ``diff`` with pdist's gradient (Note [pdist's infinity norm])."""
    a = _abs(diff)
    # (an empty diff has only zero distances, or none: its sum is the max)
    dist = a.detach().amax(dim=1, keepdim=True) if diff.numel() else a.detach().sum(dim=1, keepdim=True)
    return (dist + ((a - a.detach()) * (a.detach() == dist)).sum(dim=1, keepdim=True)).reshape(-1)


def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """The ``p``-norm distance between each row of ``x1`` (..., P, M) and each
    row of ``x2`` (..., R, M): a (..., P, R) tensor (``torch.cdist``; leading
    dimensions broadcast).  Computed from the differences, whatever
    ``compute_mode`` says, so the distance of equal rows is exactly 0, with
    PyTorch's zero gradient there (Note [Norms at zero])."""
    if x1.ndim < 2 or x2.ndim < 2:
        which, t = ("X1", x1) if x1.ndim < 2 else ("X2", x2)
        raise RuntimeError(f"cdist only supports at least 2D tensors, {which} got: {t.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    if p < 0:
        raise RuntimeError("cdist only supports non-negative p values")
    return _pnorm(x1.unsqueeze(-2) - x2.unsqueeze(-3), p, dim=-1)
