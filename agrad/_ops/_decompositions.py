"""Matrix decompositions and the linear-algebra functions built on them: det, slogdet,
eigh, svd, qr, cholesky, lu, lstsq, pinv, matrix_exp, the triangular solves and the
matrix norms (``torch.linalg`` and their ``torch.*`` spellings).

Single-output ops whose gradient is the one of their raw input (``det``,
``pinv``, ``matrix_exp``, ``solve_triangular``) are ``defop`` entries.  The
others are *decompositions* (Note [Decompositions]): several outputs with one
backward node, or a gradient that PyTorch defines on the symmetric or
triangular matrices their kernel reads (``cholesky`` reads one triangle, and
its gradient is symmetric), which no finite-difference check of the raw input
can reproduce; tests/ops/test_linalg.py checks those through the maps that
make their inputs symmetric or triangular, as PyTorch's own tests do.

Kernels are LAPACK's through ``numpy.linalg`` (batched over leading dims) with
one exception, LU (Note [LU in numpy], in ``_linalg``).  agrad has no complex
dtype, so ``eig``/``eigvals`` (complex results) are not here, and the gauge
checks PyTorch makes for complex eigenvectors and singular vectors never
apply: real eigenvectors and singular vectors are determined up to sign, and
a loss that depends on the sign is the caller's responsibility.
"""

from __future__ import annotations

import math
import operator
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from agrad import _backends
from agrad._errors import broadcast_error
from agrad._grad_mode import grad_enabled
from agrad._graph._node import _FREED, Node, SavedTensor
from agrad._ops._common import _r, _zeros_on
from agrad._ops._dispatch import _placement
from agrad._ops._elementwise import abs as _abs
from agrad._ops._elementwise import where
from agrad._ops._linalg import (
    LinAlgError,
    _check_float,
    _host,
    _legacy_name,
    _square,
    cross,
    first_failure,
    inner,
    inv,
    lu_kernel,
    matmul,
    matrix_power,
    singular_error,
    solve,
)
from agrad._ops._record import record
from agrad._ops._reductions import amax, amin, prod, vector_norm
from agrad._ops._registry import defop
from agrad._ops._shape import _wrap_dim, cat
from agrad._ops._shape import diagonal as _diagonal
from agrad._tensor import Tensor, mark_inference

# The public names of this family (star-imported by ``agrad/__init__.py``): the
# ``torch.*`` spellings.  ``agrad.linalg`` imports the ``torch.linalg`` ones.
__all__ = ["det", "logdet", "slogdet", "inverse", "pinverse", "cholesky", "cholesky_solve", "cholesky_inverse",
           "triangular_solve", "qr", "svd", "matrix_exp"]


# -- constants and masks ------------------------------------------------------------


def _eps(dt: Any) -> float:
    return float(np.finfo(dt).eps)


def _constant(like: Tensor, make: Callable[[Any], Any]) -> Tensor:
    """A constant tensor ``make(xp)`` made on ``like``'s device."""
    with _backends.on(like.device):
        return Tensor._make(make(_backends.array_module(like._data)))


def _tri_mask(t: Tensor, k: int, lower: bool) -> Tensor:
    """The bool mask of ``tril(k)`` (``lower``) or ``triu(k)`` of ``t``'s last two dims."""
    m, n = t.shape[-2:]
    if lower:
        return _constant(t, lambda xp: xp.tri(m, n, k, dtype=bool))
    return _constant(t, lambda xp: ~xp.tri(m, n, k - 1, dtype=bool))


def _tril(t: Tensor, k: int = 0) -> Tensor:
    """``torch.tril``: the lower triangle (from diagonal ``k``), the rest zero (selected, not multiplied)."""
    return where(_tri_mask(t, k, True), t, 0.0)


def _triu(t: Tensor, k: int = 0) -> Tensor:
    """``torch.triu``: the upper triangle (from diagonal ``k``), the rest zero."""
    return where(_tri_mask(t, k, False), t, 0.0)


def _eye(like: Tensor, n: int, m: int | None = None) -> Tensor:
    return _constant(like, lambda xp: xp.eye(n, m, dtype=like._data.dtype))


def _is_diagonal(like: Tensor, n: int) -> Tensor:
    return _constant(like, lambda xp: xp.eye(n, dtype=bool))


def _diag_embed(v: Tensor) -> Tensor:
    """``torch.diag_embed``: the matrices with ``v``'s last dimension on their diagonal."""
    return v.unsqueeze(-1) * _eye(v, v.shape[-1])


def _with_unit_diagonal(E: Tensor) -> Tensor:
    """``E`` with 1 on its diagonal: the denominators of the eigh and svd backwards, whose
    diagonal is divided into a zero numerator (PyTorch's ``E.diagonal().fill_(1)``)."""
    return where(_is_diagonal(E, E.shape[-1]), 1.0, E)


def _mT(a: Any) -> Any:
    return a.swapaxes(-1, -2)


# -- results ------------------------------------------------------------------------


def _result_type(name: str, fields: tuple[str, ...]) -> type:
    """A tuple of tensors with named fields, like PyTorch's ``torch.return_types.<name>``."""

    def new(cls: type, *values: Any) -> Any:
        return tuple.__new__(cls, values)

    def rep(self: tuple) -> str:
        return f"agrad.return_types.{name}(\n" + ",\n".join(f"{f}={v!r}" for f, v in zip(fields, self)) + ")"

    body: dict[str, Any] = {"__slots__": (), "__new__": new, "__repr__": rep, "n_fields": len(fields)}
    body.update({f: property(operator.itemgetter(i)) for i, f in enumerate(fields)})
    return type(name, (tuple,), body)


_Slogdet = _result_type("linalg_slogdet", ("sign", "logabsdet"))
_TorchSlogdet = _result_type("slogdet", ("sign", "logabsdet"))
_Eigh = _result_type("linalg_eigh", ("eigenvalues", "eigenvectors"))
_Svd = _result_type("linalg_svd", ("U", "S", "Vh"))
_TorchSvd = _result_type("svd", ("U", "S", "V"))
_Qr = _result_type("linalg_qr", ("Q", "R"))
_TorchQr = _result_type("qr", ("Q", "R"))
_CholeskyEx = _result_type("linalg_cholesky_ex", ("L", "info"))
_InvEx = _result_type("linalg_inv_ex", ("inverse", "info"))
_LuFactor = _result_type("linalg_lu_factor", ("LU", "pivots"))
_LuFactorEx = _result_type("linalg_lu_factor_ex", ("LU", "pivots", "info"))
_Lu = _result_type("linalg_lu", ("P", "L", "U"))
_Lstsq = _result_type("linalg_lstsq", ("solution", "residuals", "rank", "singular_values"))
_TriangularSolve = _result_type("triangular_solve", ("solution", "cloned_coefficient"))


# -- decompositions -----------------------------------------------------------------


# Note [Decompositions]
# ~~~~~~~~~~~~~~~~~~~~~
# A ``defop`` entry has one output.  eigh, svd, qr, slogdet, lu, lstsq and
# triangular_solve return several, and PyTorch records one node for all of
# them (``eigh(A).eigenvalues.grad_fn is eigh(A).eigenvectors.grad_fn``) whose
# backward takes all their gradients at once: the formulas couple them (svd's
# gA mixes gU, gS and gVh).  Such an op runs its kernel on the arrays and hands
# the outputs to ``_connect``, which records one ``_DecompositionNode`` of the
# op's class through ``record`` (the path a custom Function's node takes),
# saving the tensors the backward needs; integer outputs (pivots, info, rank)
# are plain tensors.  The node's ``vjp(grads, *saved, **attrs)`` gets one
# gradient per differentiable output, None where none flowed (each formula
# skips its terms, as PyTorch's undefined gradients), and is written in agrad
# ops, so a create_graph backward differentiates it again.  cholesky,
# cholesky_solve and cholesky_inverse have one output but are recorded the same
# way: see the module docstring.  A decomposition's kernel runs directly, not
# through the op dispatch: it does not pause a cooperative call midway.
class _DecompositionNode(Node):
    """Backward node of a decomposition (Note [Decompositions])."""

    __slots__ = ("_attrs",)

    @staticmethod
    def vjp(grads: list[Tensor | None], *saved: Any, **attrs: Any) -> Sequence[Tensor | None]:
        raise NotImplementedError

    def __init__(self, attrs: dict[str, Any]) -> None:
        super().__init__()
        self._attrs = attrs

    def apply(self, grads: list[Any], task: Any) -> Sequence[Any]:
        saved = self._saved
        if saved is None:
            raise RuntimeError(_FREED)
        if all(g is None for g in grads):
            return [None] * len(self.next_edges)
        values = [s.unpack(self) if type(s) is SavedTensor else s for s in saved]
        out = self.vjp(list(grads), *values, **self._attrs)
        return [None if e is None else g for e, g in zip(self.next_edges, out)]


def _node_class(name: str, vjp: Callable[..., Sequence[Tensor | None]]) -> type[_DecompositionNode]:
    """The node class PyTorch names ``name`` (``LinalgEighBackward0``), running ``vjp``."""
    return type(name, (_DecompositionNode,), {"__slots__": (), "vjp": staticmethod(vjp)})


def _tensor(t: Any, fn: str, arg: str = "A", position: int = 1) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' (position {position}) must be Tensor, not {type(t).__name__}")
    return t


def _kernel(kernel: Callable[..., Any], *tensors: Tensor, **attrs: Any) -> Any:
    """``kernel(xp, *arrays, **attrs)`` on the tensors' device (Note [Mixed devices])."""
    arrays = [t._data for t in tensors]
    dev = _placement(arrays)
    with _backends.on(dev):
        xp = _backends.array_module(arrays[0])
        out = kernel(xp, *arrays, **attrs)
        if isinstance(out, tuple):  # numpy returns scalars for single matrices: arrays, as every op's result
            return tuple(xp.asarray(o) if isinstance(o, np.generic) else o for o in out)
        return xp.asarray(out) if isinstance(out, np.generic) else out


def _connect(node_cls: type[_DecompositionNode], inputs: Sequence[Tensor], outputs: Sequence[Tensor],
             save: Sequence[Tensor | None], attrs: dict[str, Any]) -> None:
    """Make ``outputs`` (fresh tensors) the outputs of one new ``node_cls`` node of
    ``inputs``, saving ``save``, when grad mode is on and an input requires grad
    (Note [Decompositions]).  Outside grad mode they become inference tensors where
    inference mode is on, as every op's result."""
    if not grad_enabled.get():
        for o in outputs:
            mark_inference(o)
        return
    edges = [t._gradient_edge() if t.requires_grad else None for t in inputs]
    if all(e is None for e in edges):
        return

    def connect(node: Node) -> None:
        for i, o in enumerate(outputs):
            o._connect_function_output(node, i)

    record(None, inputs, {}, None, node=node_cls(attrs), edges=edges, outputs=outputs, to_save=save, connect=connect)


def _plain(array: Any) -> Tensor:
    """A non-differentiable output (pivots, info, rank) as a tensor."""
    t = Tensor._make(array)
    if not grad_enabled.get():
        mark_inference(t)
    return t


def _needs_grad(*tensors: Tensor) -> bool:
    return grad_enabled.get() and any(t.requires_grad for t in tensors)


def _float_or_not_implemented(kernel: str, a: Any) -> None:
    """PyTorch's error for an integer input of the LAPACK kernels that have no integer dispatch."""
    if a.dtype.kind != "f":
        raise NotImplementedError(f'"{kernel}" not implemented for \'{_legacy_name(a.dtype)}\'')


# -- determinants -------------------------------------------------------------------


def _prod_others(S: Tensor) -> Tensor:
    """For each element of ``S``'s last dimension, the product of the others (without
    dividing, so zeros are fine), differentiable through ``prod``'s backward."""
    n = S.shape[-1]
    M = S.unsqueeze(-2).expand(*S.shape[:-1], n, n)
    return prod(where(_is_diagonal(S, n), 1.0, M), dim=-1)


def _det_nonsingular(A: Tensor, gdet: Tensor) -> Tensor:
    # d det(A) = det(A) tr(A^-1 dA): the gradient solves A^T G = g det(A) I.
    return solve(A.mT, gdet.unsqueeze(-1).unsqueeze(-1) * _eye(A, A.shape[-1]))


def _det_singular(A: Tensor, g: Tensor) -> Tensor:
    # The adjugate through the SVD, det(A) = det(U) det(Vh) prod(S), whose product
    # rule needs no division: PyTorch's formula for singular matrices.
    U, S, Vh = linalg_svd(A)
    alpha = det(U) * det(Vh) * g
    return (U * (_prod_others(S) * alpha.unsqueeze(-1)).unsqueeze(-2)) @ Vh


# Note [det at singular matrices]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The gradient of det is g det(A) A^-T, solved; where |det A| < 100 eps (about
# singular) it is the adjugate, computed through the SVD, as PyTorch's
# create_graph formula does.  A batch mixing both computes each formula on the
# whole batch with the other kind replaced (by the identity, and by a matrix of
# distinct singular values whose SVD backward is finite) and selects: ``where``
# selects, so a replaced matrix sends no gradient and no NaN back.  PyTorch's
# first-order backward (no create_graph) solves with a perturbed LU instead,
# which at an exactly singular matrix gives 0 where the adjugate is not: agrad
# gives the adjugate in both modes.
def _det_grad(g: Tensor, A: Tensor, out: Tensor) -> Tensor:
    n = A.shape[-1]
    if A._data.size == 0:
        return _zeros_on(A, A.shape)
    singular = np.abs(_host(out._data)) < 100 * _eps(A._data.dtype)
    if not singular.any():
        return _det_nonsingular(A, g * out)
    if singular.all():
        return _det_singular(A, g)
    mask = _constant(A, lambda xp: _backends.transfer(singular, A.device)[..., None, None])
    spread = _constant(A, lambda xp: xp.diag(xp.arange(1, n + 1, dtype=A._data.dtype)))
    return where(mask, _det_singular(where(mask, A, spread), g), _det_nonsingular(where(mask, _eye(A, n), A), g * out))


def _factor_work(tensors: Any, result: Tensor) -> int:
    """Backward work of a factorisation-based op (Note [Offload threshold]): its
    O(n^3) solves, counted as ``_linalg._product_work`` counts products."""
    a = tensors[0]._data
    return a.size * a.shape[-1] // 16 + (result._data.size + a.size) // 8 if a.ndim else a.size


@defop(ref=lambda torch: torch.linalg.det, vjp=_det_grad, node="LinalgDetBackward0", methods=("det",),
       work=_factor_work,
       samples=lambda rng: [((_r(rng, 3, 3),), {}), ((_r(rng, 2, 4, 4),), {}), ((_r(rng, 1, 1),), {}),
                            ((_r(rng, 0, 2, 2),), {}), ((_r(rng, 2, 0, 0),), {}),
                            ((_r(rng, 3, 6)[:, ::2],), {})])  # non-contiguous; singular ones: test_linalg.py
def det(xp, A):
    """The determinant of a square matrix or of each in a batch (``torch.linalg.det``)."""
    _square("det", A)
    _check_float("linalg.det", A)
    return xp.linalg.det(A)


def _slogdet_vjp(grads: list[Tensor | None], A: Tensor) -> list[Tensor | None]:
    # The sign of a real matrix is piecewise constant: only logabsdet has a gradient.
    g = grads[1]
    if g is None:
        return [None]
    return [solve(A.mT, g.unsqueeze(-1).unsqueeze(-1) * _eye(A, A.shape[-1]))]


_SlogdetNode = _node_class("LinalgSlogdetBackward0", _slogdet_vjp)


def _slogdet(A: Tensor, result: type) -> Any:
    _tensor(A, "linalg_slogdet")
    _square("slogdet", A._data)
    _check_float("linalg.slogdet", A._data)
    s, logabs = _kernel(lambda xp, a: xp.linalg.slogdet(a), A)
    outs = [Tensor._make(s), Tensor._make(logabs)]
    _connect(_SlogdetNode, [A], outs, [A], {})
    return result(*outs)


def slogdet(A: Tensor) -> Any:
    """``(sign, logabsdet)`` of the determinant, computed without overflow (``torch.slogdet``)."""
    return _slogdet(A, _TorchSlogdet)


def linalg_slogdet(A: Tensor) -> Any:
    """``(sign, logabsdet)`` of the determinant, computed without overflow (``torch.linalg.slogdet``)."""
    return _slogdet(A, _Slogdet)


def logdet(input: Tensor) -> Tensor:
    """The log of the determinant: NaN where it is negative, -inf where it is 0."""
    s, logabs = linalg_slogdet(input)
    return where(s < 0, math.nan, logabs)


# -- symmetric eigendecomposition ---------------------------------------------------


def _eigh_vjp(grads: list[Tensor | None], L: Tensor, V: Tensor) -> list[Tensor | None]:
    # PyTorch's linalg_eig_backward, Hermitian case: with E_ij = L_j - L_i (1 on the
    # diagonal), gA = V (diag(gL) + skew(V^T gV) / 2 / E) V^T.
    gL, gV = grads
    if gV is None:
        return [(V * gL.unsqueeze(-2)) @ V.mT]  # type: ignore[union-attr]  # one of them flowed
    VhgV = V.mT @ gV
    VhgV = 0.5 * (VhgV - VhgV.mT)
    gA = VhgV / _with_unit_diagonal(L.unsqueeze(-2) - L.unsqueeze(-1))
    if gL is not None:
        gA = gA + _diag_embed(gL)  # the skew part's diagonal is zero: this sets it
    return [V @ gA @ V.mT]


_EighNode = _node_class("LinalgEighBackward0", _eigh_vjp)


def _uplo(UPLO: str) -> None:
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")


def eigh(A: Tensor, UPLO: str = "L") -> Any:
    """Eigenvalues (ascending) and orthonormal eigenvectors of symmetric matrices, read from
    the ``UPLO`` triangle (``torch.linalg.eigh``).  Each eigenvector is determined up to sign.

    Example::

        >>> import agrad
        >>> A = agrad.tensor([[2.0, 0.0], [0.0, 1.0]], requires_grad=True)
        >>> w, V = agrad.linalg.eigh(A)
        >>> w.tolist(), w.grad_fn is V.grad_fn
        ([1.0, 2.0], True)
        >>> w.sum().backward_sync()
        >>> A.grad.tolist()
        [[1.0, 0.0], [0.0, 1.0]]
    """
    _tensor(A, "linalg_eigh")
    _square("eigh", A._data)
    _uplo(UPLO)
    _float_or_not_implemented("linalg_eigh_cpu", A._data)
    L, V = _kernel(lambda xp, a: xp.linalg.eigh(a, UPLO=UPLO), A)
    outs = [Tensor._make(L), Tensor._make(V)]
    _connect(_EighNode, [A], outs, outs, {})
    return _Eigh(*outs)


def eigvalsh(A: Tensor, UPLO: str = "L") -> Tensor:
    """The eigenvalues (ascending) of symmetric matrices (``torch.linalg.eigvalsh``); its
    gradient needs the eigenvectors, so with one the node is eigh's, as in PyTorch."""
    if _needs_grad(_tensor(A, "linalg_eigvalsh")):
        return eigh(A, UPLO).eigenvalues
    _square("eigh", A._data)
    _uplo(UPLO)
    _float_or_not_implemented("linalg_eigh_cpu", A._data)
    return _plain(_kernel(lambda xp, a: xp.linalg.eigvalsh(a, UPLO=UPLO), A))


# -- singular value decomposition ---------------------------------------------------


def _svd_vjp(grads: list[Tensor | None], U: Tensor, S: Tensor, Vh: Tensor, full_matrices: bool
             ) -> list[Tensor | None]:
    # PyTorch's svd_backward (real case), on the reduced factors: with
    # E_jk = S_k^2 - S_j^2 (1 on the diagonal) and skew(X) = X - X^T,
    # gA = U [(skew(U^T gU) S + S skew(V^T gV)) / E + diag(gS)] Vh, plus the
    # components of gU (gV) outside U's (V's) span when A is tall (wide).
    gU, gS, gVh = grads
    k = S.shape[-1]
    if full_matrices:  # the completed columns do not depend on A: only the first k count
        U, Vh = U[..., :k], Vh[..., :k, :]
        gU = None if gU is None else gU[..., :k]
        gVh = None if gVh is None else gVh[..., :k, :]
    m, n = U.shape[-2], Vh.shape[-1]
    if gU is None and gVh is None:
        return [matmul(U, gS.unsqueeze(-1) * Vh) if m >= n else matmul(U * gS.unsqueeze(-2), Vh)]  # type: ignore
    E = S * S
    E = _with_unit_diagonal(E.unsqueeze(-2) - E.unsqueeze(-1))
    if gU is not None:
        UhgU = U.mT @ gU
        UhgU = UhgU - UhgU.mT
    if gVh is not None:
        VhgV = Vh @ gVh.mT
        VhgV = VhgV - VhgV.mT
    if gU is not None and gVh is not None:
        gA = (UhgU * S.unsqueeze(-2) + S.unsqueeze(-1) * VhgV) / E
    elif gU is not None:
        gA = (UhgU / E) * S.unsqueeze(-2)
    else:
        gA = S.unsqueeze(-1) * (VhgV / E)
    if gS is not None:
        gA = gA + _diag_embed(gS)
    if m > n and gU is not None:
        gA = U @ gA
        gUSinv = gU / S.unsqueeze(-2)
        gA = (gA + gUSinv - U @ (U.mT @ gUSinv)) @ Vh
    elif m < n and gVh is not None:
        gA = gA @ Vh
        SinvgVh = gVh / S.unsqueeze(-1)
        gA = U @ (gA + SinvgVh - (SinvgVh @ Vh.mT) @ Vh)
    else:
        gA = U @ (gA @ Vh) if m >= n else (U @ gA) @ Vh
    return [gA]


_SvdNode = _node_class("LinalgSvdBackward0", _svd_vjp)


def _svd_checks(A: Tensor, fn: str) -> None:
    _tensor(A, fn)
    if A.ndim < 2:
        raise RuntimeError("linalg.svd: The input tensor A must have at least 2 dimensions.")
    _check_float("linalg.svd", A._data)


def linalg_svd(A: Tensor, full_matrices: bool = True, *, driver: str | None = None) -> Any:
    """``(U, S, Vh)`` with ``A = U diag(S) Vh``, singular values descending (``torch.linalg.svd``).
    Singular vectors are determined up to sign.  ``driver`` (a CUDA option in PyTorch) is ignored."""
    _svd_checks(A, "linalg_svd")
    U, S, Vh = _kernel(lambda xp, a: xp.linalg.svd(a, full_matrices=full_matrices), A)
    outs = [Tensor._make(U), Tensor._make(S), Tensor._make(Vh)]
    _connect(_SvdNode, [A], outs, outs, {"full_matrices": full_matrices})
    return _Svd(*outs)


def svdvals(A: Tensor, *, driver: str | None = None) -> Tensor:
    """The singular values, descending (``torch.linalg.svdvals``); with a gradient, through svd."""
    if _needs_grad(_tensor(A, "linalg_svdvals")):
        return linalg_svd(A, full_matrices=False).S
    _svd_checks(A, "linalg_svdvals")
    return _plain(_kernel(lambda xp, a: xp.linalg.svd(a, compute_uv=False), A))


def svd(input: Tensor, some: bool = True, compute_uv: bool = True) -> Any:
    """``torch.svd``: ``(U, S, V)`` with ``input = U diag(S) V^T`` (V, not Vh); ``some`` reduces
    the factors; without ``compute_uv`` U and V are zeros of shapes (m, m) and (n, n)."""
    if compute_uv:
        U, S, Vh = linalg_svd(input, full_matrices=not some)
        return _TorchSvd(U, S, Vh.mT)
    S = svdvals(input)
    m, n = input.shape[-2:]
    return _TorchSvd(_zeros_on(input, (*input.shape[:-2], m, m)), S, _zeros_on(input, (*input.shape[:-2], n, n)))


# -- QR -----------------------------------------------------------------------------


def _qr_vjp(grads: list[Tensor | None], Q: Tensor, R: Tensor, mode: str) -> list[Tensor | None]:
    # PyTorch's linalg_qr_backward.
    if mode == "r":
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please "
                           "use linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr.")
    m, n = Q.shape[-2], R.shape[-1]
    if mode == "complete" and m > n:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
    gQ, gR = grads
    if gQ is not None:
        gA = gR @ R.mT - Q.mT @ gQ if gR is not None else -(Q.mT @ gQ)
    else:
        gA = gR @ R.mT
    if m >= n:
        upper = _triu(gA)
        gA = Q @ (upper + upper.mT - _diag_embed(_diagonal(upper, 0, -2, -1)))
        if gQ is not None:
            gA = gA + gQ
        return [solve_triangular(R.mT, gA, upper=False, left=False)]
    gA = Q @ _tril(gA.mT - gA)
    gA = solve_triangular(R[..., :m].mT, gA, upper=False, left=False)
    gA = cat([gA, _zeros_on(gA, (*gA.shape[:-1], n - m))], dim=-1)
    if gR is not None:
        gA = gA + Q @ gR
    return [gA]


_QrNode = _node_class("LinalgQrBackward0", _qr_vjp)


def _qr(A: Tensor, mode: str, result: type) -> Any:
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' (default), 'r', "
                           "or 'complete'")
    if A.ndim < 2:
        raise RuntimeError("linalg.qr: The input tensor A must have at least 2 dimensions.")
    _check_float("linalg.qr", A._data)

    def kernel(xp: Any, a: Any) -> tuple[Any, Any]:
        if mode == "r":
            return xp.zeros((0,), a.dtype), xp.linalg.qr(a, mode="r")
        return xp.linalg.qr(a, mode=mode)

    outs = [Tensor._make(x) for x in _kernel(kernel, A)]
    _connect(_QrNode, [A], outs, outs, {"mode": mode})
    return result(*outs)


def linalg_qr(A: Tensor, mode: str = "reduced") -> Any:
    """``(Q, R)`` with ``A = QR``, Q orthonormal and R upper triangular (``torch.linalg.qr``);
    ``mode`` 'reduced', 'complete' or 'r' (R only: Q is empty and there is no gradient)."""
    return _qr(_tensor(A, "linalg_qr"), mode, _Qr)


def qr(input: Tensor, some: bool = True) -> Any:
    """``torch.qr`` (deprecated): ``linalg.qr`` in mode 'reduced' (``some``) or 'complete'."""
    warnings.warn("torch.qr is deprecated in favor of torch.linalg.qr and will be removed in a future PyTorch "
                  "release.\nThe boolean parameter 'some' has been replaced with a string parameter 'mode'.\n"
                  "Q, R = torch.qr(A, some)\nshould be replaced with\n"
                  "Q, R = torch.linalg.qr(A, 'reduced' if some else 'complete')", UserWarning, stacklevel=2)
    return _qr(_tensor(input, "qr", "input"), "reduced" if some else "complete", _TorchQr)


# -- Cholesky -----------------------------------------------------------------------


def _cholesky_vjp(grads: list[Tensor | None], L: Tensor, upper: bool) -> list[Tensor | None]:
    # PyTorch's cholesky_backward: gA = L^-T sym(tril(L^T gL)) L^-1, symmetric.
    gL = grads[0]
    if upper:
        L, gL = L.mT, gL.mT  # type: ignore[union-attr]  # it flowed
    gA = _tril(L.mT @ gL)
    gA = 0.5 * (gA + _tril(gA, -1).mT)
    gA = solve_triangular(L.mT, gA, upper=True, left=True)
    return [solve_triangular(L, gA, upper=False, left=False)]


_CholeskyExNode = _node_class("LinalgCholeskyExBackward0", _cholesky_vjp)
_CholeskyNode = _node_class("CholeskyBackward0", _cholesky_vjp)


def _cholesky_info(xp: Any, a: Any) -> Any:
    """The order of the first leading minor of each matrix that is not positive-definite
    (0 where all are), as potrf's ``info``: the sign of the determinants of the leading
    submatrices of the symmetric matrix read from the lower triangle, padded with the identity."""
    n = a.shape[-1]
    sym = xp.tril(a) + _mT(xp.tril(a, -1))
    k = xp.arange(n)
    keep = (k[:, None, None] >= k[None, :, None]) & (k[:, None, None] >= k[None, None, :])
    minors = xp.where(keep, sym[..., None, :, :], xp.eye(n, dtype=a.dtype))
    with np.errstate(invalid="ignore"):
        s, logabs = xp.linalg.slogdet(minors)
    bad = (s <= 0) | xp.isnan(logabs)
    return xp.where(bad.any(axis=-1), xp.argmax(bad, axis=-1) + 1, 0).astype(np.int32)


def _cholesky_kernel(xp: Any, a: Any, upper: bool, name: str, check_errors: bool) -> tuple[Any, Any]:
    """``(L, info)``; L of a matrix that is not positive-definite is NaN (PyTorch leaves
    LAPACK's partial factor there).  ``upper`` reads the upper triangle and returns U."""
    src = _mT(a) if upper else a
    try:
        L = xp.linalg.cholesky(src)
        info = xp.zeros(a.shape[:-2], dtype=np.int32)
    except np.linalg.LinAlgError:
        info = _cholesky_info(xp, src)
        if check_errors:
            prefix, k = first_failure(a.shape, info) or ("", 1)
            raise LinAlgError(f"{name}: {prefix}The factorization could not be completed "
                              f"because the input is not positive-definite (the leading minor of order {k} is not "
                              "positive-definite).") from None
        failed = (info != 0)[..., None, None]
        L = xp.where(failed, xp.nan, xp.linalg.cholesky(xp.where(failed, xp.eye(a.shape[-1], dtype=a.dtype), src)))
    return (_mT(L) if upper else L), info


def _cholesky(A: Tensor, upper: bool, check_errors: bool, name: str, node: type[_DecompositionNode],
              reported: str | None = None) -> Any:
    """``(L, info)``; ``name`` in the messages of the checks, ``reported`` (default ``name``)
    in the one of a matrix that is not positive-definite."""
    _square(name.removeprefix("linalg."), A._data)
    _check_float(name, A._data)
    L, info = _kernel(lambda xp, a: _cholesky_kernel(xp, a, upper, reported or name, check_errors), A)
    out = Tensor._make(L)
    _connect(node, [A], [out], [out], {"upper": upper})
    return out, info


def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False) -> Any:
    """``(L, info)``: the Cholesky factor of symmetric positive-definite matrices, and for each
    the order of its first leading minor that is not positive-definite (0 if none); raises
    only with ``check_errors`` (``torch.linalg.cholesky_ex``)."""
    L, info = _cholesky(_tensor(A, "linalg_cholesky_ex"), upper, check_errors, "linalg.cholesky", _CholeskyExNode,
                        "linalg.cholesky_ex")
    return _CholeskyEx(L, _plain(info))


def linalg_cholesky(A: Tensor, *, upper: bool = False) -> Tensor:
    """The lower-triangular L with ``A = L L^T`` (``upper``: U with ``A = U^T U``), read from
    that triangle of ``A``; raises ``LinAlgError`` if A is not positive-definite."""
    return _cholesky(_tensor(A, "linalg_cholesky"), upper, True, "linalg.cholesky", _CholeskyExNode)[0]


def cholesky(input: Tensor, upper: bool = False) -> Tensor:
    """``torch.cholesky`` (deprecated: ``linalg.cholesky``); records CholeskyBackward0."""
    warnings.warn("torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be removed in a future "
                  "PyTorch release.\nL = torch.cholesky(A)\nshould be replaced with\nL = torch.linalg.cholesky(A)\n"
                  "and\nU = torch.cholesky(A, upper=True)\nshould be replaced with\nU = torch.linalg.cholesky(A).mH\n"
                  "This transform will produce equivalent results for all valid (symmetric positive definite) "
                  "inputs.", UserWarning, stacklevel=2)
    return _cholesky(_tensor(input, "cholesky", "input"), upper, True, "cholesky", _CholeskyNode)[0]


def _triangle(xp: Any, a: Any, upper: bool, unit: bool = False) -> Any:
    """The ``upper`` (or lower) triangle of ``a``, its diagonal set to 1 if ``unit``."""
    t = xp.triu(a) if upper else xp.tril(a)
    if unit:
        n = a.shape[-1]
        t = xp.where(xp.eye(n, dtype=bool), xp.ones((), a.dtype), t)
    return t


def _cholesky_solve_vjp(grads: list[Tensor | None], L: Tensor, out: Tensor, upper: bool) -> list[Tensor | None]:
    # PyTorch's cholesky_solve_backward.
    gB = cholesky_solve(grads[0], L, upper)  # type: ignore[arg-type]  # it flowed
    common = gB @ out.mT
    common = common + common.mT
    return [gB, -(L @ common) if upper else -(common @ L)]


_CholeskySolveNode = _node_class("CholeskySolveBackward0", _cholesky_solve_vjp)


def cholesky_solve(B: Tensor, L: Tensor, upper: bool = False) -> Tensor:
    """The solution X of ``A X = B`` given A's Cholesky factor L (``A = L L^T``; ``upper``:
    ``A = U^T U``), read from that triangle; batch dims broadcast (``torch.cholesky_solve``)."""
    _tensor(B, "cholesky_solve", "input")
    _tensor(L, "cholesky_solve", "input2", 2)
    for name, t in (("b", B), ("A", L)):
        if t.ndim < 2:
            raise RuntimeError(f"{'b' if name == 'b' else 'u'} should have at least 2 dimensions, but has "
                               f"{t.ndim} dimensions instead")
    if B.dtype is not L.dtype:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type "
                           f"{_legacy_name(B._data.dtype)} and A of type {_legacy_name(L._data.dtype)} instead.")
    n = L.shape[-1]
    if L.shape[-2] != n or B.shape[-2] != n:
        raise RuntimeError(f"Incompatible matrix sizes for cholesky_solve: each A matrix is {L.shape[-2]} by {n} "
                           f"but each b matrix is {B.shape[-2]} by {B.shape[-1]}")
    _float_or_not_implemented("cholesky_solve_cpu", B._data)
    err = broadcast_error([B.shape[:-2], L.shape[:-2]])
    if err is not None:
        raise err

    def kernel(xp: Any, b: Any, a: Any) -> Any:
        t = _triangle(xp, a, upper)
        first, second = (_mT(t), t) if upper else (t, _mT(t))
        return _tri_solve(xp, second, _tri_solve(xp, first, b, not upper), upper)

    out = Tensor._make(_kernel(kernel, B, L))
    _connect(_CholeskySolveNode, [B, L], [out], [L, out], {"upper": upper})
    return out


def _cholesky_inverse_vjp(grads: list[Tensor | None], L: Tensor, out: Tensor, upper: bool) -> list[Tensor | None]:
    # PyTorch's cholesky_inverse_backward.
    g = grads[0]
    common = out @ (g + g.mT) @ out  # type: ignore[union-attr]  # it flowed
    return [-(L @ common) if upper else -(common @ L)]


_CholeskyInverseNode = _node_class("CholeskyInverseBackward0", _cholesky_inverse_vjp)


def cholesky_inverse(L: Tensor, upper: bool = False) -> Tensor:
    """The inverse of ``A = L L^T`` (``upper``: ``U^T U``) from its Cholesky factor, read from
    that triangle (``torch.cholesky_inverse``)."""
    _tensor(L, "cholesky_inverse", "input")
    if L.ndim < 2:
        raise RuntimeError("cholesky_inverse: The input tensor A must have at least 2 dimensions.")
    if L.shape[-1] != L.shape[-2]:
        raise RuntimeError(f"cholesky_inverse: A must be batches of square matrices, but they are {L.shape[-2]} by "
                           f"{L.shape[-1]} matrices")
    _float_or_not_implemented("cholesky_inverse_out_cpu", L._data)

    def kernel(xp: Any, a: Any) -> Any:
        t_inv = xp.linalg.inv(_triangle(xp, a, upper)) if a.size else a.copy()
        return t_inv @ _mT(t_inv) if upper else _mT(t_inv) @ t_inv

    out = Tensor._make(_kernel(kernel, L))
    _connect(_CholeskyInverseNode, [L], [out], [L, out], {"upper": upper})
    return out


# -- inverse and LU -----------------------------------------------------------------


def _inv_ex_vjp(grads: list[Tensor | None], out: Tensor) -> list[Tensor | None]:
    g = grads[0]
    return [-(out.mT @ g @ out.mT)]


_InvExNode = _node_class("LinalgInvExBackward0", _inv_ex_vjp)


def inv_ex(A: Tensor, *, check_errors: bool = False) -> Any:
    """``(inverse, info)``: the inverses, and for each matrix its first zero pivot (0 if
    invertible); a singular matrix's inverse is NaN here, and it raises only with
    ``check_errors`` (``torch.linalg.inv_ex``)."""
    _tensor(A, "linalg_inv_ex")
    _square("inv", A._data)
    _check_float("linalg.inv", A._data)

    def kernel(xp: Any, a: Any) -> tuple[Any, Any]:
        try:
            return xp.linalg.inv(a), xp.zeros(a.shape[:-2], dtype=np.int32)
        except np.linalg.LinAlgError:
            info = lu_kernel(xp, a)[2]
            if check_errors:
                raise singular_error("linalg.inv_ex", a, info) from None
            failed = (info != 0)[..., None, None]
            eye = xp.eye(a.shape[-1], dtype=a.dtype)
            return xp.where(failed, xp.nan, xp.linalg.inv(xp.where(failed, eye, a))), info

    inverse, info = _kernel(kernel, A)
    out = Tensor._make(inverse)
    _connect(_InvExNode, [A], [out], [out], {})
    return _InvEx(out, _plain(info))


def _unpack_lu(LU: Tensor) -> tuple[Tensor, Tensor]:
    """L (unit diagonal, m x k) and U (k x n) from the packed factors, in agrad ops."""
    m, n = LU.shape[-2:]
    k = min(m, n)
    return _tril(LU[..., :, :k], -1) + _eye(LU, m, k), _triu(LU[..., :k, :])


def _permutation(xp: Any, pivots: Any, m: int, dt: Any) -> Any:
    """The permutation matrices P with ``A = P L U`` from getrf's 1-based row swaps
    (one pass per swap, vectorised over the batch)."""
    batch = pivots.shape[:-1]
    piv = pivots.reshape(math.prod(batch), pivots.shape[-1]) - 1
    perm = xp.broadcast_to(xp.arange(m), (piv.shape[0], m)).copy()
    rows = xp.arange(piv.shape[0])
    for j in range(piv.shape[1]):
        p = piv[:, j]
        swapped = perm[rows, p].copy()
        perm[rows, p] = perm[rows, j]
        perm[rows, j] = swapped
    P = xp.zeros((piv.shape[0], m, m), dtype=dt)
    P[rows[:, None], perm, xp.arange(m)] = 1
    return P.reshape(*batch, m, m)


def _lu_backward(gL: Tensor | None, gU: Tensor | None, P: Tensor, L: Tensor, U: Tensor) -> Tensor:
    # PyTorch's linalg_lu_backward (with pivoting).
    m, n = L.shape[-2], U.shape[-1]
    k = min(m, n)
    if m == n:
        gA = _tril(L.mT @ gL, -1) if gL is not None else None
        if gU is not None:
            gA = _triu(gU @ U.mT) if gA is None else gA + _triu(gU @ U.mT)
        gA = solve_triangular(U.mT, gA, upper=False, left=False)
        return P @ solve_triangular(L.mT, gA, upper=True, left=True, unitriangular=True)
    if m < n:
        gA = L.mT @ gL if gL is not None else None
        if gU is not None:
            gA = -(_triu(gU) @ U.mT) if gA is None else gA - _triu(gU) @ U.mT
        assert gA is not None  # one of gL, gU flowed
        gA = solve_triangular(U[..., :k].mT, _tril(gA, -1), upper=False, left=False)
        if gU is not None:
            gA = cat([gA + _triu(gU[..., :k]), gU[..., k:]], dim=-1)
        gA = solve_triangular(L.mT, gA, upper=True, left=True, unitriangular=True)
        if gU is None:
            gA = cat([gA, _zeros_on(gA, (*gA.shape[:-1], n - k))], dim=-1)
        return P @ gA
    gA = gU @ U.mT if gU is not None else None
    if gL is not None:
        gA = -(L.mT @ _tril(gL, -1)) if gA is None else gA - L.mT @ _tril(gL, -1)
    assert gA is not None  # one of gL, gU flowed
    gA = solve_triangular(L[..., :k, :].mT, _triu(gA), upper=True, left=True, unitriangular=True)
    if gL is not None:
        gA = cat([gA + _tril(gL[..., :k, :], -1), gL[..., k:, :]], dim=-2)
    gA = solve_triangular(U.mT, gA, upper=False, left=False)
    if gL is None:
        gA = cat([gA, _zeros_on(gA, (*gA.shape[:-2], m - k, gA.shape[-1]))], dim=-2)
    return P @ gA


def _lu_factor_vjp(grads: list[Tensor | None], LU: Tensor, P: Tensor) -> list[Tensor | None]:
    # PyTorch's lu_factor_ex_backward: the packed gradient's two triangles are L's and U's.
    g = grads[0]
    k = min(LU.shape[-2:])
    L, U = _unpack_lu(LU)
    return [_lu_backward(g[..., :, :k], g[..., :k, :], P, L, U)]  # type: ignore[index]  # it flowed


def _lu_vjp(grads: list[Tensor | None], L: Tensor, U: Tensor, P: Tensor) -> list[Tensor | None]:
    return [_lu_backward(grads[0], grads[1], P, L, U)]


_LuFactorExNode = _node_class("LinalgLuFactorExBackward0", _lu_factor_vjp)
_LuNode = _node_class("LinalgLuBackward0", _lu_vjp)


def _lu_checks(A: Tensor, name: str, pivot: bool) -> None:
    if A.ndim < 2:
        raise RuntimeError(f"{name}: Expected tensor with 2 or more dimensions. Got size: {list(A.shape)} instead")
    _float_or_not_implemented("lu_cpu", A._data)
    if not pivot:
        raise RuntimeError(f"{name}: LU without pivoting is not implemented on the CPU")


def lu_factor_ex(A: Tensor, *, pivot: bool = True, check_errors: bool = False) -> Any:
    """``(LU, pivots, info)``: the LU factorisation with partial pivoting, packed as LAPACK's
    getrf packs it, the 1-based row swaps, and the first zero pivot (0 if none)
    (``torch.linalg.lu_factor_ex``; Note [LU in numpy])."""
    _lu_checks(_tensor(A, "linalg_lu_factor_ex"), "torch.linalg.lu_factor_ex", pivot)
    LU, pivots, info = _kernel(lu_kernel, A)
    if check_errors:
        _lu_error(A, info)
    out = Tensor._make(LU)
    P = _constant(out, lambda xp: _permutation(xp, pivots, A.shape[-2], LU.dtype))
    _connect(_LuFactorExNode, [A], [out], [out, P], {})
    return _LuFactorEx(out, _plain(pivots), _plain(info))


def _lu_error(A: Tensor, info: Any) -> None:
    failure = first_failure(A.shape, info)
    if failure is not None:
        prefix, k = failure
        raise RuntimeError(f"torch.linalg.lu_factor: {prefix}U[{k},{k}] is zero and using it on lu_solve would "
                           "result in a division by zero. If you still want to perform the factorization, consider "
                           "calling linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)")


def lu_factor(A: Tensor, *, pivot: bool = True) -> Any:
    """``(LU, pivots)`` of ``lu_factor_ex``; raises for a singular matrix (a RuntimeError,
    as PyTorch's, not a LinAlgError) (``torch.linalg.lu_factor``)."""
    LU, pivots, info = lu_factor_ex(A, pivot=pivot)
    _lu_error(A, info._data)
    return _LuFactor(LU, pivots)


def lu(A: Tensor, *, pivot: bool = True) -> Any:
    """``(P, L, U)`` with ``A = P L U``: P a permutation, L unit lower and U upper triangular
    (``torch.linalg.lu``); P takes no gradient."""
    _lu_checks(_tensor(A, "linalg_lu"), "linalg.lu", pivot)

    def kernel(xp: Any, a: Any) -> tuple[Any, Any, Any]:
        LU, pivots, _ = lu_kernel(xp, a)
        m, n = a.shape[-2:]
        k = min(m, n)
        L = xp.tril(LU[..., :, :k], -1) + xp.eye(m, k, dtype=LU.dtype)
        return _permutation(xp, pivots, m, LU.dtype), L, xp.triu(LU[..., :k, :])

    P, L, U = _kernel(kernel, A)
    outs = [Tensor._make(L), Tensor._make(U)]
    P_t = _plain(P)
    _connect(_LuNode, [A], outs, [*outs, P_t], {})
    return _Lu(P_t, *outs)


# -- triangular solves --------------------------------------------------------------


def _substitute(xp: Any, T: Any, B: Any, upper: bool) -> Any:
    """``T^-1 B`` by substitution, one row at a time (vectorised over the batch and the
    right-hand sides): trsm's arithmetic, for triangles that ``solve`` refuses as singular,
    where it gives IEEE's inf and NaN as PyTorch does."""
    n = T.shape[-1]
    X = xp.zeros(np.broadcast_shapes(T.shape[:-2], B.shape[:-2]) + B.shape[-2:], dtype=B.dtype)
    with np.errstate(all="ignore"):
        for i in (range(n - 1, -1, -1) if upper else range(n)):
            rest = xp.matmul(T[..., i:i + 1, :], X)[..., 0, :]
            X[..., i, :] = (B[..., i, :] - rest) / T[..., i, i, None]
    return X


def _tri_solve(xp: Any, T: Any, B: Any, upper: bool) -> Any:
    """``T^-1 B`` for triangular ``T`` (batch dims broadcast): LAPACK's solve, or
    substitution where it finds T singular."""
    if T.size == 0 or B.size == 0:
        return xp.zeros(np.broadcast_shapes(T.shape[:-2], B.shape[:-2]) + B.shape[-2:], dtype=B.dtype)
    try:
        return xp.linalg.solve(T, B)
    except np.linalg.LinAlgError:
        return _substitute(xp, T, B, upper)


def _solve_triangular_grad_A(g: Tensor, A: Tensor, out: Tensor, upper: bool, left: bool, unitriangular: bool
                             ) -> Tensor:
    # PyTorch's linalg_solve_triangular_backward: -G_B X^T (X^T G_B on the right),
    # projected on the triangle the kernel read.
    gB = solve_triangular(A.mT, g, upper=not upper, left=left, unitriangular=unitriangular)
    gA = -(gB @ out.mT) if left else -(out.mT @ gB)
    return _triu(gA, int(unitriangular)) if upper else _tril(gA, -int(unitriangular))


def _solve_triangular_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    def tri(*shape: int) -> np.ndarray:
        return _r(rng, *shape) + 4 * np.eye(shape[-1])

    return [((tri(3, 3), _r(rng, 3, 2)), {"upper": True}), ((tri(3, 3), _r(rng, 3, 2)), {"upper": False}),
            ((tri(2, 3, 3), _r(rng, 3, 4)), {"upper": False, "unitriangular": True}),
            ((tri(3, 3), _r(rng, 2, 2, 3)), {"upper": True, "left": False}),
            ((tri(1, 3, 3), _r(rng, 2, 1, 3)), {"upper": False, "left": False, "unitriangular": True}),
            ((tri(6, 6)[::2, ::2], _r(rng, 3, 0)), {"upper": True}), ((tri(0, 0), _r(rng, 0, 2)), {"upper": True})]


@defop(ref=lambda torch: torch.linalg.solve_triangular,
       vjp=(_solve_triangular_grad_A, lambda g, A, upper, left, unitriangular: solve_triangular(
           A.mT, g, upper=not upper, left=left, unitriangular=unitriangular)),
       node="LinalgSolveTriangularBackward0", work=_factor_work,
       parse=lambda A, B, *, upper, left=True, unitriangular=False: (
           (A, B), {"upper": upper, "left": left, "unitriangular": unitriangular}),
       samples=_solve_triangular_samples)
def solve_triangular(xp, A, B, *, upper, left=True, unitriangular=False):
    """The solution X of ``A X = B`` (``X A = B`` unless ``left``) for triangular A, read from
    its ``upper`` (or lower) triangle, with a unit diagonal if ``unitriangular``
    (``torch.linalg.solve_triangular``); batch dims broadcast."""
    _float_or_not_implemented("triangular_solve_cpu", A)
    for name, a in (("A", A), ("B", B)):
        if a.ndim < 2:
            raise RuntimeError(f"linalg.solve_triangular: The input tensor {name} must have at least 2 dimensions.")
    _square("solve_triangular", A)
    if A.dtype != B.dtype:
        raise RuntimeError(f"linalg.solve_triangular: Expected A and B to have the same dtype, but found A of type "
                           f"{_legacy_name(A.dtype)} and B of type {_legacy_name(B.dtype)} instead")
    n = A.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        eq = "AX = B" if left else "XA = B"
        raise RuntimeError(f"linalg.solve_triangular: Incompatible shapes of A and B for the equation {eq} "
                           f"({n}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    err = broadcast_error([A.shape[:-2], B.shape[:-2]])
    if err is not None:
        raise err
    T = _triangle(xp, A, upper, unitriangular)
    if left:
        return _tri_solve(xp, T, B, upper)
    return _mT(_tri_solve(xp, _mT(T), _mT(B), not upper))


def _triangular_solve_vjp(grads: list[Tensor | None], A: Tensor, X: Tensor, upper: bool, transpose: bool,
                          unitriangular: bool) -> list[Tensor | None]:
    # PyTorch's triangular_solve_backward; inputs (b, A).
    gX, gM = grads
    gb = gA = None
    if gX is not None:
        op = A if transpose else A.mT
        gb = solve_triangular(op, gX, upper=upper == transpose, unitriangular=unitriangular)
        gA = -(X @ gb.mT) if transpose else -(gb @ X.mT)
        gA = _triu(gA, int(unitriangular)) if upper else _tril(gA, -int(unitriangular))
    if gM is not None:
        gA = gM if gA is None else gA + gM
    return [gb, gA]


_TriangularSolveNode = _node_class("TriangularSolveBackward0", _triangular_solve_vjp)


def triangular_solve(b: Tensor, A: Tensor, upper: bool = True, transpose: bool = False,
                     unitriangular: bool = False) -> Any:
    """``torch.triangular_solve`` (deprecated: ``linalg.solve_triangular``): the solution X of
    ``A X = b`` (``A^T X = b`` with ``transpose``) and a copy of A."""
    warnings.warn("torch.triangular_solve is deprecated in favor of torch.linalg.solve_triangularand will be removed "
                  "in a future PyTorch release.\ntorch.linalg.solve_triangular has its arguments reversed and does "
                  "not return a copy of one of the inputs.\nX = torch.triangular_solve(B, A).solution\nshould be "
                  "replaced with\nX = torch.linalg.solve_triangular(A, B).", UserWarning, stacklevel=2)
    _tensor(b, "triangular_solve", "input")
    _tensor(A, "triangular_solve", "A", 2)
    for t in (b, A):
        if t.ndim < 2:
            raise RuntimeError(f"torch.triangular_solve: Expected b to have at least 2 dimensions, but it has "
                               f"{b.ndim} dimensions instead" if t is b else
                               f"torch.triangular_solve: Expected A to have at least 2 dimensions, but it has "
                               f"{A.ndim} dimensions instead")
    if A.shape[-1] != A.shape[-2] or b.shape[-2] != A.shape[-1]:
        raise RuntimeError(f"Incompatible matrix sizes for triangular_solve: each A matrix is {A.shape[-2]} by "
                           f"{A.shape[-1]} but each b matrix is {b.shape[-2]} by {b.shape[-1]}")
    _float_or_not_implemented("triangular_solve_cpu", A._data)

    def kernel(xp: Any, bb: Any, a: Any) -> tuple[Any, Any]:
        T = _triangle(xp, a, upper, unitriangular)
        X = _tri_solve(xp, _mT(T), bb, not upper) if transpose else _tri_solve(xp, T, bb, upper)
        batch = np.broadcast_shapes(a.shape[:-2], bb.shape[:-2])
        return X, xp.broadcast_to(a, batch + a.shape[-2:]).copy()

    X, M = _kernel(kernel, b, A)
    outs = [Tensor._make(X), Tensor._make(M)]
    _connect(_TriangularSolveNode, [b, A], outs, [A, outs[0]],
             {"upper": upper, "transpose": transpose, "unitriangular": unitriangular})
    return _TriangularSolve(*outs)


# -- pseudo-inverse, least squares, rank ---------------------------------------------


def _tolerance(xp: Any, s_max: Any, m: int, n: int, dt: Any, atol: Any, rtol: Any) -> Any:
    """PyTorch's cut-off for singular values: ``max(atol, rtol * s_max)``, rtol defaulting to
    ``eps * max(m, n)`` unless a positive atol is given."""
    if rtol is None:
        rtol = _eps(dt) * max(m, n) if atol is None or _host_scalar(atol) == 0 else 0.0
    a = 0.0 if atol is None else _array_arg(xp, atol)
    return xp.maximum(a, _array_arg(xp, rtol) * s_max)


def _host_scalar(v: Any) -> Any:
    return np.max(_host(v._data)) if isinstance(v, Tensor) else v


def _array_arg(xp: Any, v: Any) -> Any:
    """A tolerance given as a number or a tensor (broadcast over the batch)."""
    return xp.asarray(v._data) if isinstance(v, Tensor) else v


def _pinv_grad(g: Tensor, A: Tensor, out: Tensor) -> Tensor:
    # PyTorch's pinv_backward, on the smaller of the two dimensions.
    m, n = A.shape[-2:]
    pinvAh, gh = out.mT, g.mT
    if m <= n:
        K = gh @ out
        KpinvAh = K @ pinvAh
        return -(out @ K).mT + KpinvAh - (A @ out) @ KpinvAh + (pinvAh @ out) @ (gh - K @ A)
    K = out @ gh
    pinvAhK = pinvAh @ K
    return -(K @ out).mT + (gh - A @ K) @ out @ pinvAh + pinvAhK - pinvAhK @ out @ A


def _pinv_parse(A: Tensor, rcond: Any = None, hermitian: bool = False, *, atol: Any = None, rtol: Any = None
                ) -> tuple[tuple, dict]:
    if rcond is not None:  # PyTorch's older overload: rcond is a relative tolerance
        rtol = rcond
    return (A,), {"atol": atol, "rtol": rtol, "hermitian": hermitian}


def _pinv_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    return [((_r(rng, 3, 3) + 3 * np.eye(3),), {}), ((_r(rng, 4, 2),), {}), ((_r(rng, 2, 2, 5),), {}),
            ((_r(rng, 3, 2),), {"rtol": 1e-3}), ((_r(rng, 2, 3),), {"atol": 1e-6}), ((_r(rng, 0, 3),), {}),
            ((_r(rng, 6, 4)[::2, ::2],), {})]


@defop(ref=lambda torch: torch.linalg.pinv, vjp=_pinv_grad, node="LinalgPinvBackward0", parse=_pinv_parse,
       work=_factor_work, samples=_pinv_samples)
def pinv(xp, A, *, atol=None, rtol=None, hermitian=False):
    """The Moore-Penrose pseudo-inverse, singular values below ``max(atol, rtol * s_max)``
    cut off (``torch.linalg.pinv``); ``hermitian`` reads A's lower triangle as a symmetric
    matrix and uses its eigenvalues."""
    if A.ndim < 2 or A.dtype.kind != "f":
        raise RuntimeError(f"linalg.pinv({_legacy_name(A.dtype)}{{{list(A.shape)}}}): expected a tensor with 2 or "
                           "more dimensions of float, double, cfloat or cdouble types")
    m, n = A.shape[-2:]
    if A.size == 0:
        return xp.zeros((*A.shape[:-2], n, m), dtype=A.dtype)
    if hermitian:
        L, V = xp.linalg.eigh(A)
        s = xp.abs(L)
        tol = _tolerance(xp, s.max(axis=-1), m, n, A.dtype, atol, rtol)
        with np.errstate(divide="ignore"):
            inv_s = xp.where(s > tol[..., None], 1 / L, 0).astype(A.dtype)
        return (V * inv_s[..., None, :]) @ _mT(V)
    U, S, Vh = xp.linalg.svd(A, full_matrices=False)
    tol = _tolerance(xp, S[..., 0], m, n, A.dtype, atol, rtol)
    with np.errstate(divide="ignore"):
        inv_s = xp.where(S > tol[..., None], 1 / S, 0).astype(A.dtype)
    return (_mT(Vh) * inv_s[..., None, :]) @ _mT(U)


def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:
    """``torch.pinverse``: ``linalg.pinv`` with relative tolerance ``rcond``."""
    return pinv(input, rtol=rcond)


def _lstsq_vjp(grads: list[Tensor | None], A: Tensor, B: Tensor, X: Tensor) -> list[Tensor | None]:
    # PyTorch's linalg_lstsq_backward: through pinv for the solution, and the residuals'
    # gradient computed as if X did not depend on A and B (Danskin's theorem).
    gX, gL = grads
    vector = X.ndim == B.ndim and B.ndim == A.ndim - 1
    Bm = B.unsqueeze(-1) if vector else B
    gA = gB = None
    if gX is not None:
        gXm = gX.unsqueeze(-1) if vector else gX
        pinvA = pinv(A)
        gA = _pinv_grad(gXm @ Bm.mT, A, pinvA)
        gB = pinvA.mT @ gXm
    if gL is not None and gL.numel():
        Xm = X.unsqueeze(-1) if vector else X
        r = A @ Xm - Bm
        gLm = gL.unsqueeze(-2)
        gA_L = 2 * (gLm * r) @ Xm.mT
        gB_L = -2 * gLm * r
        gA = gA_L if gA is None else gA + gA_L
        gB = gB_L if gB is None else gB + gB_L
    if vector and gB is not None:
        gB = gB.squeeze(-1)
    return [gA, gB]


_LstsqNode = _node_class("LinalgLstsqBackward0", _lstsq_vjp)
_DRIVERS = (None, "gels", "gelsy", "gelsd", "gelss")


def lstsq(A: Tensor, B: Tensor, rcond: float | None = None, *, driver: str | None = None) -> Any:
    """``(solution, residuals, rank, singular_values)`` of the least-squares problem
    ``min ||A X - B||`` (``torch.linalg.lstsq``), through the SVD: the minimum-norm solution,
    singular values below ``rcond * s_max`` cut off.  As PyTorch's CPU drivers: residuals
    (squared, per column) only for tall full-rank A and not with 'gelsy' (the default);
    rank except with 'gels'; singular values with 'gelsd' and 'gelss'."""
    _tensor(A, "linalg_lstsq", "self")
    _tensor(B, "linalg_lstsq", "b", 2)
    if driver not in _DRIVERS:
        raise RuntimeError("torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    if A.ndim < 2:
        raise RuntimeError("torch.linalg.lstsq: input must have at least 2 dimensions.")
    if B.ndim < 1:
        raise RuntimeError("torch.linalg.lstsq: other must have at least 1 dimension.")
    if A.dtype is not B.dtype:
        raise RuntimeError(f"torch.linalg.lstsq: Expected input and other to have the same dtype, but got input's "
                           f"dtype {_legacy_name(A._data.dtype)} and other's dtype {_legacy_name(B._data.dtype)}")
    if A._data.dtype.kind != "f":
        raise RuntimeError("This function doesn't handle types other than float and double")
    if not (A.ndim >= B.ndim and A.ndim - B.ndim <= 1):
        raise RuntimeError("torch.linalg.lstsq: input.dim() must be greater or equal to other.dim() and "
                           "(input.dim() - other.dim()) <= 1")
    vector = B.ndim == A.ndim - 1
    m, n = A.shape[-2:]
    if (B.shape[-1] if vector else B.shape[-2]) != m:
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    driver = driver or "gelsy"

    def kernel(xp: Any, a: Any, b: Any) -> tuple[Any, Any, Any, Any]:
        bm = b[..., None] if vector else b
        batch = np.broadcast_shapes(a.shape[:-2], bm.shape[:-2])
        if a.size == 0:
            U, S, Vh = xp.zeros((*a.shape[:-2], m, 0)), xp.zeros((*a.shape[:-2], 0)), xp.zeros((*a.shape[:-2], 0, n))
            U, S, Vh = (x.astype(a.dtype) for x in (U, S, Vh))
        else:
            U, S, Vh = xp.linalg.svd(a, full_matrices=False)
        cut = (_eps(a.dtype) * max(m, n) if rcond is None or rcond < 0 else rcond) * \
            (S[..., :1] if S.shape[-1] else xp.zeros((*S.shape[:-1], 1), a.dtype))
        kept = S > cut
        with np.errstate(divide="ignore"):
            inv_s = xp.where(kept, 1 / S, 0).astype(a.dtype)
        X = _mT(Vh) @ (inv_s[..., None] * (_mT(U) @ bm))
        X = xp.broadcast_to(X, batch + X.shape[-2:])
        rank = kept.sum(axis=-1).astype(np.int64)
        full_rank = bool((_host(rank) == min(m, n)).all())
        if m > n and driver != "gelsy" and full_rank:
            residuals = ((a @ X - bm) ** 2).sum(axis=-2)
        else:
            residuals = xp.zeros((0,), a.dtype)
        rank_out = xp.broadcast_to(rank, batch).copy() if driver != "gels" else xp.zeros((0,), np.int64)
        sv = xp.broadcast_to(S, batch + S.shape[-1:]).copy() if driver in ("gelsd", "gelss") else \
            xp.zeros((0,), a.dtype)
        return (X[..., 0] if vector else X), residuals, rank_out, sv

    X, residuals, rank, sv = _kernel(kernel, A, B)
    outs = [Tensor._make(X), Tensor._make(residuals)]
    _connect(_LstsqNode, [A, B], outs, [A, B, outs[0]], {})
    return _Lstsq(*outs, _plain(rank), _plain(sv))


def _matrix_rank_parse(A: Tensor, tol: Any = None, hermitian: bool = False, *, atol: Any = None, rtol: Any = None
                       ) -> tuple[tuple, dict]:
    if tol is not None:  # PyTorch's older overload: an absolute tolerance
        atol, rtol = tol, 0.0
    return (A,), {"atol": atol, "rtol": rtol, "hermitian": hermitian}


@defop(ref=lambda torch: torch.linalg.matrix_rank, vjp=None, parse=_matrix_rank_parse,
       samples=lambda rng: [((_r(rng, 3, 3),), {}), ((np.outer([1.0, 2.0, 3.0], [1.0, 0.5]),), {}),
                            ((_r(rng, 2, 4, 3),), {"atol": 0.5}), ((_r(rng, 3, 5),), {"rtol": 0.3}),
                            ((np.diag([3.0, 1e-3, 2.0]),), {"hermitian": True, "atol": 0.01}),
                            ((_r(rng, 0, 3),), {})])
def matrix_rank(xp, A, *, atol=None, rtol=None, hermitian=False):
    """The number of singular values (``hermitian``: eigenvalue magnitudes) above
    ``max(atol, rtol * s_max)`` (``torch.linalg.matrix_rank``), as int64."""
    if A.ndim < 2:
        raise RuntimeError("torch.linalg.matrix_rank: The input tensor input must have at least 2 dimensions.")
    if A.dtype.kind != "f":
        raise RuntimeError("This function doesn't handle types other than float and double")
    m, n = A.shape[-2:]
    if A.size == 0:
        return xp.zeros(A.shape[:-2], dtype=np.int64)
    s = xp.abs(xp.linalg.eigvalsh(A)) if hermitian else xp.linalg.svd(A, compute_uv=False)
    tol = _tolerance(xp, s.max(axis=-1), m, n, A.dtype, atol, rtol)
    return (s > tol[..., None]).sum(axis=-1).astype(np.int64)


# -- the matrix exponential ---------------------------------------------------------

# Padé [13/13] coefficients, and the 1-norm up to which it is accurate in double
# precision without scaling (Higham, "The scaling and squaring method for the
# matrix exponential revisited", 2005).
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0, 129060195264000.0,
           10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152


def _expm(xp: Any, A: Any) -> Any:
    """exp of each matrix of ``A``: scaling and squaring with Padé [13/13], each matrix
    scaled by its own power of two, then squared back only as often as it was scaled."""
    n = A.shape[-1]
    if A.size == 0:
        return A.copy()
    norm = xp.abs(A).sum(axis=-2).max(axis=-1)
    with np.errstate(divide="ignore"):
        s = xp.maximum(0, xp.ceil(xp.log2(norm / _THETA13))).astype(np.int64)
    s = xp.where(xp.isfinite(norm), s, 0)
    A = A / (2.0 ** s)[..., None, None].astype(A.dtype)
    b = _PADE13
    eye = xp.eye(n, dtype=A.dtype)
    A2 = A @ A
    A4 = A2 @ A2
    A6 = A4 @ A2
    U = A @ (A6 @ (b[13] * A6 + b[11] * A4 + b[9] * A2) + b[7] * A6 + b[5] * A4 + b[3] * A2 + b[1] * eye)
    V = A6 @ (b[12] * A6 + b[10] * A4 + b[8] * A2) + b[6] * A6 + b[4] * A4 + b[2] * A2 + b[0] * eye
    R = xp.linalg.solve(V - U, V + U)
    for i in range(int(_host(s).max(initial=0))):
        R = xp.where((s > i)[..., None, None], R @ R, R)
    return R


def _matrix_exp_grad(g: Tensor, A: Tensor) -> Tensor:
    # PyTorch's differential of an analytic matrix function: the adjoint of the
    # derivative at A in direction G is the upper-right block of
    # exp([[A^T, G], [0, A^T]]), itself differentiable.
    n = A.shape[-1]
    At = A.mT
    top = cat([At, g.expand(*A.shape) if g.shape != A.shape else g], dim=-1)
    bottom = cat([_zeros_on(A, A.shape), At], dim=-1)
    return matrix_exp(cat([top, bottom], dim=-2))[..., :n, n:]


@defop(ref=lambda torch: torch.linalg.matrix_exp, vjp=_matrix_exp_grad, node="LinalgMatrixExpBackward0",
       methods=("matrix_exp",), work=_factor_work,
       samples=lambda rng: [((_r(rng, 3, 3),), {}), ((_r(rng, 2, 2, 2) * 4,), {}), ((_r(rng, 1, 1),), {}),
                            ((_r(rng, 0, 0),), {}), ((_r(rng, 4, 8)[:, ::2] / 4,), {})])
def matrix_exp(xp, A):
    """The matrix exponential of a square matrix or of each in a batch (``torch.linalg.matrix_exp``)."""
    _square("matrix_exp", A)
    _check_float("linalg.matrix_exp", A)
    return _expm(xp, A)


# -- norms --------------------------------------------------------------------------


def _norm_dims(name: str, A: Tensor, dim: Any) -> tuple[int, int]:
    if A.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    if not isinstance(dim, (tuple, list)) or len(dim) != 2:
        raise RuntimeError(f"{name}: dim must be a 2-tuple. Got {dim}")
    d0, d1 = _wrap_dim(dim[0], A.ndim), _wrap_dim(dim[1], A.ndim)
    if d0 == d1:
        raise RuntimeError(f"{name}: dims must be different. Got ({dim[0]}, {dim[1]})")
    return d0, d1


def _svd_norm(A: Tensor, d0: int, d1: int, keepdim: bool, reduce: Callable[[Tensor], Tensor]) -> Tensor:
    """``reduce`` of the singular values of the matrices in dims ``(d0, d1)``."""
    rest = [d for d in range(A.ndim) if d not in (d0, d1)]
    out = reduce(svdvals(A.permute(*rest, d0, d1)))
    if keepdim:
        for d in sorted((d0, d1)):
            out = out.unsqueeze(d)
    return out


def matrix_norm(A: Tensor, ord: Any = "fro", dim: Any = (-2, -1), keepdim: bool = False, *,
                dtype: Any = None) -> Tensor:
    """The matrix norm of ``A`` over the two dims ``dim`` (``torch.linalg.matrix_norm``):
    'fro' and 'nuc', the spectral norm and smallest singular value (2, -2), the largest and
    smallest column (1, -1) and row (inf, -inf) absolute sums."""
    _tensor(A, "linalg_matrix_norm")
    d0, d1 = _norm_dims("linalg.matrix_norm", A, dim)
    if dtype is not None:
        A = A.to(dtype)
    _check_float("linalg.matrix_norm", A._data)
    if ord == "fro":
        return vector_norm(A, 2, dim=(d0, d1), keepdim=keepdim)
    if ord == "nuc":
        return _svd_norm(A, d0, d1, keepdim, lambda s: s.sum(dim=-1))
    if ord in (2, -2):
        return _svd_norm(A, d0, d1, keepdim, lambda s: (amax if ord == 2 else amin)(s, dim=-1))
    if ord in (1, -1, math.inf, -math.inf):
        summed, reduced = (d0, d1) if ord in (1, -1) else (d1, d0)
        extreme = amax if ord > 0 else amin
        return extreme(_abs(A).sum(dim=summed, keepdim=True), dim=reduced, keepdim=True) if keepdim else \
            extreme(_abs(A).sum(dim=summed, keepdim=True), dim=(summed, reduced))
    raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")


def cond(A: Tensor, p: Any = None) -> Tensor:
    """The condition number of ``A`` in the norm ``p`` (``torch.linalg.cond``): the ratio of
    extreme singular values for p in (None, 2, -2), else ``norm(A) * norm(inv(A))``, inf
    for a singular matrix."""
    _tensor(A, "linalg_cond")
    if A.ndim < 2:
        raise RuntimeError("linalg.cond: The input tensor must have at least 2 dimensions.")
    if p in (None, 2, -2):
        s = svdvals(A)
        if s.shape[-1] == 0:
            return _zeros_on(s, s.shape[:-1])
        big, small = s[..., 0], s[..., -1]
        return big / small if p != -2 else small / big
    if p not in ("fro", "nuc", 1, -1, math.inf, -math.inf):
        raise RuntimeError(f"linalg.cond got an invalid norm type: {p}")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.cond(ord={p}): A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")
    inverse, info = inv_ex(A)
    with np.errstate(invalid="ignore"):
        out = matrix_norm(A, p) * matrix_norm(inverse, p)
    return where(info > 0, math.inf, out)


# -- tensors as matrices, and small helpers ------------------------------------------


def tensorinv(A: Tensor, ind: int = 2) -> Tensor:
    """The inverse of ``A`` seen as a matrix of its first ``ind`` dims by the rest, shaped
    ``A.shape[ind:] + A.shape[:ind]`` (``torch.linalg.tensorinv``)."""
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    rows, cols = math.prod(A.shape[:ind]), math.prod(A.shape[ind:])
    if rows != cols:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {cols} != {rows}")
    return inv(A.reshape(rows, cols)).reshape(*A.shape[ind:], *A.shape[:ind])


def tensorsolve(A: Tensor, B: Tensor, dims: Sequence[int] | None = None) -> Tensor:
    """The X with ``tensordot(A, X, X.ndim) == B`` (``torch.linalg.tensorsolve``); ``dims``
    are dims of A moved to the end first."""
    if dims is not None:
        moved = [_wrap_dim(d, A.ndim) for d in dims]
        A = A.permute(*[d for d in range(A.ndim) if d not in moved], *moved)
    rows, cols = math.prod(A.shape[:B.ndim]), math.prod(A.shape[B.ndim:])
    if rows != cols:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[other.ndim:]) == "
                           f"prod(self.shape[:other.ndim]), but got {cols} != {rows}")
    return solve(A.reshape(rows, cols), B.reshape(rows)).reshape(*A.shape[B.ndim:])


def vander(x: Tensor, N: int | None = None) -> Tensor:
    """The Vandermonde matrix of ``x`` (``..., n``): columns ``x^0 … x^(N-1)``, shaped
    ``(..., n, N)`` (``torch.linalg.vander``; N defaults to n)."""
    if N is None:
        N = x.shape[-1] if x.ndim else 0
    if N <= 1:
        raise RuntimeError("N must be greater than 1.")
    powers = _constant(x, lambda xp: xp.arange(N, dtype=x._data.dtype))
    return x.unsqueeze(-1) ** powers


def linalg_diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """``torch.diagonal`` with the last two dims as the default plane (``torch.linalg.diagonal``)."""
    return _diagonal(A, offset, dim1, dim2)


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """The dot product of ``x`` and ``y`` along ``dim``, broadcast (``torch.linalg.vecdot``)."""
    if x.dtype is not y.dtype:
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found x of type "
                           f"{_legacy_name(x._data.dtype)} and y of type {_legacy_name(y._data.dtype)} instead")
    _check_float("linalg.vecdot", x._data)
    return (x * y).sum(dim=dim)


# -- solving with factors -----------------------------------------------------------

_SolveEx = _result_type("linalg_solve_ex", ("result", "info"))


def solve_ex(A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False) -> Any:
    """``(result, info)``: the solution of ``A X = B`` (``X A = B`` unless ``left``) and, per
    matrix, its first zero pivot (0 if invertible); a singular matrix's solution is NaN
    here, and it raises only with ``check_errors`` (``torch.linalg.solve_ex``)."""
    _tensor(A, "linalg_solve_ex")
    _tensor(B, "linalg_solve_ex", "B", 2)
    _square("solve_ex", A._data)
    _check_float("linalg.solve_ex", A._data)

    def solved(A: Tensor) -> Tensor:
        return solve(A, B) if left else solve(A.mT, B.mT).mT

    info = _constant(A, lambda xp: xp.zeros(A.shape[:-2], dtype=np.int32))
    try:
        result = solved(A)
    except LinAlgError:
        info = _plain(_kernel(lambda xp, a: lu_kernel(xp, a)[2], A))
        if check_errors:
            prefix, _ = first_failure(A.shape, info._data) or ("", 0)
            raise LinAlgError(f"torch.linalg.solve_ex: {prefix}The solver failed because the input matrix is "
                              "singular.") from None
        failed = (info > 0).reshape(*info.shape, 1, 1)
        result = solved(where(failed, _eye(A, A.shape[-1]), A))  # the singular ones replaced, then NaN
        result = where(failed.reshape(*info.shape, *(1,) * (result.ndim - info.ndim)), math.nan, result)
    return _SolveEx(result, info)


def _lu_solve_checks(LU: Tensor, pivots: Tensor, B: Tensor, left: bool) -> None:
    for name, t in (("LU", LU), ("B", B)):
        if t.ndim < 2:
            raise RuntimeError(f"linalg.lu_solve: Expected {name} to have at least 2 dimensions, but it has "
                               f"{t.ndim} dimensions instead")
    n = LU.shape[-1]
    if LU.shape[-2] != n:
        raise RuntimeError(f"linalg.lu_solve: Expected LU to be a square matrix, but got {LU.shape[-2]}x{n}")
    if pivots._data.dtype != np.int32:
        raise RuntimeError(f"linalg.lu_solve: Expected pivots to be of type Int, but got "
                           f"{_legacy_name(pivots._data.dtype)}")
    if pivots.shape != LU.shape[:-1]:
        raise RuntimeError(f"linalg.lu_solve: Expected pivots of shape {list(LU.shape[:-1])}, but got "
                           f"{list(pivots.shape)}")
    if (B.shape[-2] if left else B.shape[-1]) != n:
        eq = "AX = B" if left else "XA = B"
        raise RuntimeError(f"linalg.lu_solve: Incompatible shapes of A and B for the equation {eq} "
                           f"({n}x{n} and {B.shape[-2]}x{B.shape[-1]})")
    if LU.dtype is not B.dtype:
        raise RuntimeError(f"linalg.lu_solve: Expected LU and B to have the same dtype, but found LU of type "
                           f"{_legacy_name(LU._data.dtype)} and B of type {_legacy_name(B._data.dtype)} instead")


def linalg_lu_solve(LU: Tensor, pivots: Tensor, B: Tensor, *, left: bool = True, adjoint: bool = False) -> Tensor:
    """The solution of ``A X = B`` from A's ``lu_factor`` (``X A = B`` unless ``left``;
    ``A^T`` for A with ``adjoint``) (``torch.linalg.lu_solve``).  Two triangular solves
    and the permutation, in agrad ops: the gradient w.r.t. ``LU`` is PyTorch's, each
    entry of the packed factors taken on its own."""
    _tensor(LU, "linalg_lu_solve", "LU")
    _tensor(B, "linalg_lu_solve", "B", 3)
    _lu_solve_checks(LU, pivots, B, left)
    _float_or_not_implemented("lu_solve_cpu", LU._data)
    L, U = _unpack_lu(LU)
    P = _constant(LU, lambda xp: _permutation(xp, pivots._data, LU.shape[-1], LU._data.dtype))
    # A = P L U: each case undoes the factors in turn, from the side ``left`` names.
    if left and not adjoint:
        Y = solve_triangular(L, P.mT @ B, upper=False, unitriangular=True)
        return solve_triangular(U, Y, upper=True)
    if left:  # A^T X = U^T L^T P^T X = B
        Y = solve_triangular(U.mT, B, upper=False)
        return P @ solve_triangular(L.mT, Y, upper=True, unitriangular=True)
    if not adjoint:  # X P L U = B
        Y = solve_triangular(U, B, upper=True, left=False)
        return solve_triangular(L, Y, upper=False, left=False, unitriangular=True) @ P.mT
    Y = solve_triangular(L.mT, B @ P, upper=True, left=False, unitriangular=True)  # X U^T L^T P^T = B
    return solve_triangular(U.mT, Y, upper=False, left=False)


def householder_product(A: Tensor, tau: Tensor) -> Tensor:
    """The first n columns of the product ``H_1 … H_k`` of Householder reflectors
    ``H_i = I - tau_i v_i v_i^T``, ``v_i`` the i-th column of ``A`` below its diagonal with
    a 1 on it (``torch.linalg.householder_product``, LAPACK's orgqr).  The reflectors are
    applied one by one in agrad ops (one pass per reflector, vectorised over the batch),
    so the gradient follows from theirs."""
    _tensor(A, "linalg_householder_product")
    _tensor(tau, "linalg_householder_product", "tau", 2)
    name = "torch.linalg.householder_product"
    if A.ndim < 2:
        raise RuntimeError(f"{name}: input must have at least 2 dimensions.")
    m, n = A.shape[-2:]
    if m < n:
        raise RuntimeError(f"{name}: input.shape[-2] must be greater than or equal to input.shape[-1]")
    if tau.ndim != A.ndim - 1:
        raise RuntimeError(f"{name}: Expected tau to have one dimension less than input, but got tau.ndim equal "
                           f"to {tau.ndim} and input.ndim is equal to {A.ndim}")
    k = tau.shape[-1]
    if n < k:
        raise RuntimeError(f"{name}: input.shape[-1] must be greater than or equal to tau.shape[-1]")
    if tau.shape[:-1] != A.shape[:-2]:
        raise RuntimeError(f"{name}: Expected batch dimensions of tau to be equal to input.shape[:-2], but got "
                           f"{list(tau.shape[:-1])}")
    if tau.dtype is not A.dtype:
        raise RuntimeError(f"{name}: tau dtype {_legacy_name(tau._data.dtype)} does not match input dtype "
                           f"{_legacy_name(A._data.dtype)}")
    _float_or_not_implemented("orgqr_cpu", A._data)
    V = _tril(A, -1) + _eye(A, m, n)
    Q = _eye(A, m, n).expand(*A.shape)
    for i in reversed(range(k)):  # Q = H_i Q, from the last reflector to the first
        v = V[..., :, i:i + 1]
        Q = Q - tau[..., i:i + 1].unsqueeze(-1) * (v @ (v.mT @ Q))
    return Q


# Tensor methods of this family that are not one entry's ``methods=`` (composites,
# aliases with another signature); bound by ``_methods.bind``.  The products'
# composites (``_linalg``) are bound here too: ``_linalg`` has no table of its own.
METHODS: dict[str, Any] = {
    "logdet": logdet,
    "slogdet": slogdet,
    "inverse": inv,
    "pinverse": pinverse,
    "cholesky": cholesky,
    "cholesky_solve": cholesky_solve,
    "cholesky_inverse": cholesky_inverse,
    "triangular_solve": triangular_solve,
    "qr": qr,
    "svd": svd,
    "matrix_power": matrix_power,
    "cross": cross,
    "inner": inner,
}

inverse = inv  # torch.inverse: linalg.inv

