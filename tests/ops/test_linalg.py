"""``agrad.linalg`` and the matrix functions of ``agrad.*`` against PyTorch.

The ``defop`` entries (det, pinv, matrix_exp, solve_triangular, mv, addmv...) are
checked from their samples by tests/ops/test_op_table.py.  This file checks
what is not one entry: the decompositions (several outputs, one node:
Note [Decompositions] in ``agrad._ops._decompositions``), the composites
(matrix_norm, multi_dot, matrix_power, lstsq...) and the ``torch.*`` spellings.

Each case is a function of the library module ``L`` (``agrad`` or ``torch``)
and its inputs; it runs on both libraries and the test compares values and
input gradients in float64, values in float32, and runs agrad's float64
``gradcheck`` and ``gradgradcheck``.  Decompositions whose gradient PyTorch
defines on symmetric or triangular matrices (eigh, cholesky, cholesky_solve,
cholesky_inverse, pinv with ``hermitian``) take their input through the map
that makes it so (``X + X.mT``, a triangular mask), as PyTorch's own
gradchecks do; eigenvectors and singular vectors, determined up to sign, are
compared through sign-invariant functions of them (their squares).
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
import agrad.linalg
from agrad.autograd import gradcheck, gradgradcheck
from tests.helpers import requires_torch, torch

_rng = np.random.default_rng(11)


def _r(*shape: int) -> np.ndarray:
    return _rng.uniform(-2.0, 2.0, size=shape)


def _well(*shape: int) -> np.ndarray:
    """Random square matrices, comfortably invertible."""
    return _r(*shape) + 4 * np.eye(shape[-1])


SQ3 = _r(3, 3)
SQ4B = _r(2, 4, 4)
TALL = _r(5, 3)
WIDE = _r(2, 5)
WIDE_B = _r(2, 3, 5)
TALL_B = _r(2, 4, 2)
RHS = _r(3, 2)
RHS5 = _r(5, 2)
VEC3 = _r(3)
VEC5 = _r(5)
WELL3 = _well(3, 3)
WELL3B = _well(2, 3, 3)
NONCONTIG = _r(4, 8)[:, ::2]  # a non-contiguous 4 x 4
TRI_L = np.tril(np.ones((3, 3)))
TRI_U = np.triu(np.ones((3, 3)))
EYE3 = np.eye(3)


def _sym(X: Any) -> Any:
    return X + X.mT


def _eye(L: Any, X: Any) -> Any:
    return L.eye(X.shape[-1], dtype=X.dtype, device=X.device)


def _spd(L: Any, X: Any) -> Any:
    """A symmetric positive-definite matrix made from any square ``X``."""
    return X @ X.mT + 3 * _eye(L, X)


def _lower(L: Any, X: Any) -> Any:
    """A lower-triangular matrix with a positive diagonal made from ``X`` (read as its lower triangle)."""
    return X * L.tensor(TRI_L, dtype=X.dtype, device=X.device) + 3 * _eye(L, X)


def _upper(L: Any, X: Any) -> Any:
    return X * L.tensor(TRI_U, dtype=X.dtype, device=X.device) + 3 * _eye(L, X)


def _quiet(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with deprecation warnings silenced (their own test checks them)."""
    def call(*args: Any) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return fn(*args)
    return call


class Case:
    """``fn(L, *tensors)`` on tensors made from ``inputs`` (float arrays are differentiated).
    ``grad=False``: values only (no gradient, or one PyTorch does not define there);
    ``torch_grad=False``: PyTorch's backward fails there (cond's in-place inverse), so
    agrad's gradient is checked by gradcheck only."""

    def __init__(self, fn: Callable[..., Any], *inputs: Any, grad: bool = True, torch_grad: bool = True) -> None:
        self.fn = fn
        self.inputs = inputs
        self.grad = grad
        self.torch_grad = torch_grad


CASES: dict[str, Case] = {
    # eigh / eigvalsh
    "eigh": Case(lambda L, X: (lambda r: (r.eigenvalues, r.eigenvectors ** 2))(L.linalg.eigh(_sym(X))), SQ3),
    "eigh-batch": Case(lambda L, X: (lambda r: (r.eigenvalues, r.eigenvectors ** 2))(L.linalg.eigh(_sym(X))), SQ4B),
    "eigh-U": Case(lambda L, X: (lambda r: (r.eigenvalues, r.eigenvectors ** 2))(L.linalg.eigh(_sym(X), "U")), SQ3),
    "eigh-vectors-only": Case(lambda L, X: L.linalg.eigh(_sym(X)).eigenvectors[..., 0] ** 2, SQ3),
    "eigh-empty": Case(lambda L, X: L.linalg.eigh(X).eigenvalues, _r(0, 0), grad=False),
    "eigvalsh": Case(lambda L, X: L.linalg.eigvalsh(_sym(X)), SQ4B),
    "eigvalsh-U": Case(lambda L, X: L.linalg.eigvalsh(_sym(X), UPLO="U"), NONCONTIG),
    # svd
    "svd-square": Case(lambda L, X: (lambda r: (r.U ** 2, r.S, r.Vh ** 2))(L.linalg.svd(X)), SQ3),
    "svd-tall-reduced": Case(lambda L, X: (lambda r: (r.U ** 2, r.S, r.Vh ** 2))(
        L.linalg.svd(X, full_matrices=False)), TALL),
    "svd-wide-batch": Case(lambda L, X: (lambda r: (r.U ** 2, r.S, r.Vh ** 2))(
        L.linalg.svd(X, full_matrices=False)), WIDE_B),
    "svd-tall-full": Case(lambda L, X: (lambda r: (r.U[..., :2] ** 2, r.S, r.Vh ** 2))(L.linalg.svd(X)), TALL_B),
    "svd-wide-full": Case(lambda L, X: (lambda r: (r.U ** 2, r.Vh[..., :2, :] ** 2))(L.linalg.svd(X)), WIDE),
    "svd-U-only": Case(lambda L, X: L.linalg.svd(X, full_matrices=False).U ** 2, TALL),
    "svd-Vh-only": Case(lambda L, X: L.linalg.svd(X, full_matrices=False).Vh ** 2, WIDE),
    "svdvals": Case(lambda L, X: L.linalg.svdvals(X), WIDE_B),
    "torch.svd": Case(lambda L, X: (lambda r: (r.U ** 2, r.S, r.V ** 2))(L.svd(X)), TALL),
    "torch.svd-some-false": Case(lambda L, X: (lambda r: (r.U[:, :3] ** 2, r.S, r.V ** 2))(L.svd(X, some=False)),
                                 TALL),
    "torch.svd-no-uv": Case(lambda L, X: tuple(L.svd(X, compute_uv=False)), TALL),
    # qr
    "qr-square": Case(lambda L, X: tuple(L.linalg.qr(X)), SQ3),
    "qr-tall": Case(lambda L, X: tuple(L.linalg.qr(X)), TALL),
    "qr-wide-batch": Case(lambda L, X: tuple(L.linalg.qr(X)), WIDE_B),
    "qr-complete-wide": Case(lambda L, X: tuple(L.linalg.qr(X, mode="complete")), WIDE),
    "qr-R-only": Case(lambda L, X: L.linalg.qr(X).R, TALL_B),
    "qr-Q-only": Case(lambda L, X: L.linalg.qr(X).Q, TALL),
    "qr-mode-r": Case(lambda L, X: L.linalg.qr(X, mode="r").R, TALL, grad=False),
    "qr-complete-tall": Case(lambda L, X: tuple(L.linalg.qr(X, mode="complete")), TALL, grad=False),
    "torch.qr": Case(_quiet(lambda L, X: tuple(L.qr(X))), TALL),
    "torch.qr-some-false": Case(_quiet(lambda L, X: tuple(L.qr(X, some=False))), WIDE),
    # cholesky and its solves
    "cholesky": Case(lambda L, X: L.linalg.cholesky(_spd(L, X)), SQ3),
    "cholesky-upper-batch": Case(lambda L, X: L.linalg.cholesky(_spd(L, X), upper=True), SQ4B),
    "cholesky_ex": Case(lambda L, X: L.linalg.cholesky_ex(_spd(L, X)).L, SQ3),
    "torch.cholesky": Case(_quiet(lambda L, X: L.cholesky(_spd(L, X))), SQ3),
    "torch.cholesky-upper": Case(_quiet(lambda L, X: L.cholesky(_spd(L, X), True)), SQ3),
    "cholesky_solve": Case(lambda L, B, X: L.cholesky_solve(B, _lower(L, X)), RHS, SQ3),
    "cholesky_solve-upper-broadcast": Case(lambda L, B, X: L.cholesky_solve(B, _upper(L, X), upper=True),
                                           _r(2, 3, 2), SQ3),
    "cholesky_inverse": Case(lambda L, X: L.cholesky_inverse(_lower(L, X)), SQ3),
    "cholesky_inverse-upper": Case(lambda L, X: L.cholesky_inverse(_upper(L, X), upper=True), SQ3),
    # determinants
    "slogdet": Case(lambda L, X: tuple(L.linalg.slogdet(X)), SQ4B),
    "torch.slogdet": Case(lambda L, X: tuple(L.slogdet(X)), SQ3),
    "logdet": Case(lambda L, X: L.logdet(_spd(L, X)), SQ3),
    "logdet-negative": Case(lambda L, X: L.logdet(X), np.diag([1.0, -2.0, 3.0]), grad=False),
    "det-torch-spelling": Case(lambda L, X: L.det(X), SQ4B),
    # inverses and LU
    "inv_ex": Case(lambda L, X: tuple(L.linalg.inv_ex(X)), WELL3B),
    "inverse": Case(lambda L, X: L.inverse(X), WELL3),
    "lu_factor": Case(lambda L, X: L.linalg.lu_factor(X).LU, SQ4B),
    "lu_factor-tall": Case(lambda L, X: L.linalg.lu_factor(X).LU, TALL),
    "lu_factor-wide": Case(lambda L, X: L.linalg.lu_factor(X).LU, WIDE_B),
    "lu_factor-pivots": Case(lambda L, X: tuple(L.linalg.lu_factor_ex(X))[1:], SQ4B, grad=False),
    "lu": Case(lambda L, X: tuple(L.linalg.lu(X)), SQ4B),
    "lu-tall": Case(lambda L, X: tuple(L.linalg.lu(X)), TALL),
    "lu-wide": Case(lambda L, X: tuple(L.linalg.lu(X)), WIDE),
    "lu-L-only": Case(lambda L, X: L.linalg.lu(X).L, TALL_B),
    "lu-U-only": Case(lambda L, X: L.linalg.lu(X).U, WIDE_B),
    # least squares, pseudo-inverse, rank
    "lstsq-square": Case(lambda L, A, B: L.linalg.lstsq(A, B).solution, WELL3, RHS),
    "lstsq-tall-gelsd": Case(lambda L, A, B: tuple(L.linalg.lstsq(A, B, driver="gelsd")), TALL, RHS5),
    "lstsq-tall-gels": Case(lambda L, A, B: tuple(L.linalg.lstsq(A, B, driver="gels"))[:2], TALL, RHS5),
    "lstsq-tall-gelss-vector": Case(lambda L, A, B: tuple(L.linalg.lstsq(A, B, driver="gelss")), TALL, VEC5),
    "lstsq-wide": Case(lambda L, A, B: L.linalg.lstsq(A, B).solution, WIDE, _r(2, 3)),
    "lstsq-broadcast": Case(lambda L, A, B: tuple(L.linalg.lstsq(A, B, driver="gelsd"))[:2], _r(2, 4, 3),
                            _r(1, 4, 2)),
    "lstsq-rank": Case(lambda L, A, B: L.linalg.lstsq(A, B).rank, TALL, RHS5, grad=False),
    "pinv-hermitian": Case(lambda L, X: L.linalg.pinv(_sym(X), hermitian=True), WELL3),
    "pinverse": Case(lambda L, X: L.pinverse(X), TALL),
    "matrix_rank": Case(lambda L, X: L.linalg.matrix_rank(X, 0.5), np.diag([3.0, 0.1, 2.0]), grad=False),
    # norms
    **{f"matrix_norm-{o}": Case(lambda L, X, o=o: L.linalg.matrix_norm(X, o), SQ4B)
       for o in ("fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf)},
    "matrix_norm-dims-keepdim": Case(lambda L, X: L.linalg.matrix_norm(X, 1, dim=(0, 2), keepdim=True), SQ4B),
    "matrix_norm-nuc-dims-keepdim": Case(lambda L, X: L.linalg.matrix_norm(X, "nuc", dim=(2, 0), keepdim=True), SQ4B),
    "matrix_norm-inf-dims": Case(lambda L, X: L.linalg.matrix_norm(X, -math.inf, dim=(2, 1)), SQ4B),
    "norm-default": Case(lambda L, X: L.linalg.norm(X), SQ4B),
    "norm-fro": Case(lambda L, X: L.linalg.norm(X, "fro"), SQ3),
    "norm-2-matrix": Case(lambda L, X: L.linalg.norm(X, 2), SQ3),
    "norm-nuc-dims": Case(lambda L, X: L.linalg.norm(X, "nuc", dim=(1, 2)), SQ4B),
    "norm-dim-tuple": Case(lambda L, X: L.linalg.norm(X, dim=(0, 1), keepdim=True), SQ4B),
    "norm-vector-ord": Case(lambda L, X: L.linalg.norm(X, 3), VEC5),
    "norm-vector-dim": Case(lambda L, X: L.linalg.norm(X, 1, dim=-1), SQ4B),
    "cond": Case(lambda L, X: L.linalg.cond(X), WELL3B),
    "cond-2-tall": Case(lambda L, X: L.linalg.cond(X, -2), TALL),
    **{f"cond-{p}": Case(lambda L, X, p=p: L.linalg.cond(X, p), WELL3, torch_grad=False)
       for p in ("fro", "nuc", 1, -math.inf)},
    "cond-singular": Case(lambda L, X: L.linalg.cond(X, 1), np.zeros((3, 3)), grad=False),
    # products
    "matrix_power-3": Case(lambda L, X: L.linalg.matrix_power(X, 3), SQ4B),
    "matrix_power-0": Case(lambda L, X: L.linalg.matrix_power(X, 0), SQ3),
    "matrix_power-1": Case(lambda L, X: L.matrix_power(X, 1), SQ3),
    "matrix_power-neg": Case(lambda L, X: L.linalg.matrix_power(X, -2), WELL3B),
    "matrix_power-int": Case(lambda L, X: L.linalg.matrix_power(X, 5), np.arange(4).reshape(2, 2), grad=False),
    "multi_dot-3": Case(lambda L, a, b, c: L.linalg.multi_dot([a, b, c]), _r(2, 3), _r(3, 5), _r(5, 1)),
    "multi_dot-4-vectors": Case(lambda L, a, b, c, d: L.linalg.multi_dot([a, b, c, d]), VEC3, _r(3, 4), _r(4, 2),
                                _r(2)),
    "multi_dot-2": Case(lambda L, a, b: L.linalg.multi_dot([a, b]), VEC3, VEC3),
    "chain_matmul": Case(_quiet(lambda L, a, b, c: L.chain_matmul(a, b, c)), _r(2, 3), _r(3, 5), _r(5, 1)),
    "inner": Case(lambda L, a, b: L.inner(a, b), _r(2, 3), _r(4, 3)),
    "inner-vectors": Case(lambda L, a, b: L.inner(a, b), VEC3, VEC3),
    "inner-scalar": Case(lambda L, a, b: L.inner(a, b), VEC3, np.array(1.5)),
    "tensordot-2": Case(lambda L, a, b: L.tensordot(a, b), _r(3, 4, 5), _r(4, 5, 2)),
    "tensordot-lists": Case(lambda L, a, b: L.tensordot(a, b, dims=([0, 1], [1, 0])), _r(3, 4, 5), _r(4, 3, 2)),
    "tensordot-0": Case(lambda L, a, b: L.tensordot(a, b, dims=0), VEC3, _r(2)),
    "vecdot": Case(lambda L, a, b: L.linalg.vecdot(a, b), _r(2, 3), _r(4, 1, 3)),
    "vecdot-dim": Case(lambda L, a, b: L.linalg.vecdot(a, b, dim=0), _r(3, 2), _r(3, 1)),
    "torch.cross-dim": Case(lambda L, a, b: L.cross(a, b, dim=0), _r(3, 4), _r(3, 4)),
    "torch.cross-default-dim": Case(_quiet(lambda L, a, b: L.cross(a, b)), _r(2, 3), _r(2, 3)),
    "ger": Case(lambda L, a, b: L.ger(a, b), VEC3, _r(2)),
    # triangular solves
    "triangular_solve": Case(_quiet(lambda L, b, A: tuple(L.triangular_solve(b, A))), RHS, WELL3),
    "triangular_solve-lower-transpose": Case(_quiet(lambda L, b, A: tuple(L.triangular_solve(
        b, A, upper=False, transpose=True))), _r(2, 3, 2), WELL3),
    "triangular_solve-unit": Case(_quiet(lambda L, b, A: L.triangular_solve(b, A, unitriangular=True).solution),
                                  RHS, WELL3B),
    "solve_triangular-singular": Case(lambda L, A, B: L.linalg.solve_triangular(A, B, upper=True),
                                      np.array([[0.0, 1.0], [0.0, 1.0]]), np.ones((2, 1)), grad=False),
    # tensors as matrices, and the rest
    "tensorinv": Case(lambda L, X: L.linalg.tensorinv(X.reshape(2, 2, 4), ind=2), _well(4, 4)),
    "tensorinv-ind1": Case(lambda L, X: L.linalg.tensorinv(X.reshape(4, 2, 2), ind=1), _well(4, 4)),
    "tensorsolve": Case(lambda L, X, b: L.linalg.tensorsolve(X.reshape(2, 3, 6), b), _well(6, 6), _r(2, 3)),
    "tensorsolve-dims": Case(lambda L, X, b: L.linalg.tensorsolve(X.reshape(6, 2, 3), b, dims=(0,)), _well(6, 6),
                             _r(2, 3)),
    "vander": Case(lambda L, x: L.linalg.vander(x), np.array([0.0, 1.5, -2.0])),
    "vander-N-batch": Case(lambda L, x: L.linalg.vander(x, N=4), _r(2, 3)),
    "vander-int": Case(lambda L, x: L.linalg.vander(x), np.arange(3), grad=False),
    "linalg.diagonal": Case(lambda L, X: L.linalg.diagonal(X, offset=1), SQ4B),
    "linalg.diagonal-dims": Case(lambda L, X: L.linalg.diagonal(X, dim1=0, dim2=2), SQ4B),
}


def _tensors(L: Any, inputs: tuple, dtype: Any, grad: bool) -> list[Any]:
    return [L.tensor(a, dtype=dtype, requires_grad=grad) if a.dtype.kind == "f" else L.tensor(a) for a in inputs]


def _outputs(out: Any) -> tuple:
    return out if isinstance(out, tuple) else (out,)


def _np(t: Any) -> np.ndarray:
    return t.detach().numpy()


def _float_leaves(ts: list[Any]) -> list[Any]:
    return [t for t in ts if t.requires_grad]


@requires_torch
@pytest.mark.parametrize("name", CASES)
def test_values_and_gradients_match_torch(name: str) -> None:
    case = CASES[name]
    ours = _tensors(agrad, case.inputs, agrad.float64, case.grad)
    theirs = _tensors(torch, case.inputs, torch.float64, case.grad)
    out, expected = _outputs(case.fn(agrad, *ours)), _outputs(case.fn(torch, *theirs))
    assert len(out) == len(expected)
    for o, e in zip(out, expected):
        assert o.shape == tuple(e.shape), name
        assert o.dtype.name == str(e.dtype).removeprefix("torch."), name
        np.testing.assert_allclose(_np(o), _np(e), rtol=1e-9, atol=1e-10)
    if not (case.grad and case.torch_grad):
        return
    weights = [np.random.default_rng(3).standard_normal(o.shape) for o in out]
    diff = [(o, e, w) for o, e, w in zip(out, expected, weights) if e.requires_grad]
    sum(((o * agrad.tensor(w)).sum() for o, _, w in diff), agrad.tensor(0.0, dtype=agrad.float64)).backward_sync()
    sum((e * torch.from_numpy(w)).sum() for _, e, w in diff).backward()
    for mine, ref in zip(_float_leaves(ours), _float_leaves(theirs), strict=True):
        assert (mine.grad is None) == (ref.grad is None), name
        if ref.grad is not None:
            np.testing.assert_allclose(mine.grad.numpy(), ref.grad.numpy(), rtol=1e-8, atol=1e-10)


@requires_torch
@pytest.mark.parametrize("name", CASES)
def test_float32_values_match_torch(name: str) -> None:
    case = CASES[name]
    out = _outputs(case.fn(agrad, *_tensors(agrad, case.inputs, agrad.float32, False)))
    expected = _outputs(case.fn(torch, *_tensors(torch, case.inputs, torch.float32, False)))
    for o, e in zip(out, expected, strict=True):
        assert o.dtype.name == str(e.dtype).removeprefix("torch.")
        np.testing.assert_allclose(_np(o), _np(e), rtol=2e-4, atol=2e-5)


def _differentiable_outputs(out: Any) -> Any:
    """The outputs a gradcheck differentiates: the floating ones that require grad."""
    kept = tuple(o for o in _outputs(out) if o.requires_grad)
    return kept if len(kept) != 1 else kept[0]


@pytest.mark.parametrize("check", [gradcheck, gradgradcheck], ids=["grad", "gradgrad"])
@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c.grad])
def test_gradcheck(name: str, check: Callable[..., bool]) -> None:
    case = CASES[name]
    inputs = _tensors(agrad, case.inputs, agrad.float64, True)
    assert check(lambda *ts: _differentiable_outputs(case.fn(agrad, *ts)), inputs)


# -- on another device -----------------------------------------------------------------




@pytest.mark.parametrize("name", [n for n, c in CASES.items() if c.grad])
def test_runs_on_the_inputs_device(name: str, fake_device: str) -> None:
    """Kernels, constants and backward rules stay on the inputs' device and give the CPU's results."""
    case = CASES[name]

    def run(device: str) -> tuple[tuple, list[Any]]:
        leaves = [agrad.tensor(a, dtype=agrad.float64 if a.dtype.kind == "f" else None, device=device,
                               requires_grad=a.dtype.kind == "f") for a in case.inputs]
        out = _outputs(case.fn(agrad, *leaves))
        diff = [o for o in out if o.requires_grad]
        total = sum(((o * o).sum() for o in diff), agrad.zeros((), dtype=agrad.float64, device=device))
        grads = agrad.autograd.grad_sync(total, [t for t in leaves if t.requires_grad], allow_unused=True)
        return out, list(grads)

    expected, expected_grads = run("cpu")
    out, grads = run(fake_device)
    for mine, ref in zip([*out, *grads], [*expected, *expected_grads], strict=True):
        assert (mine is None) == (ref is None)
        if ref is not None:
            assert str(mine.device) == fake_device
            np.testing.assert_allclose(mine.detach().cpu().numpy(), ref.detach().numpy(), rtol=1e-10, atol=1e-12)


# -- one node for several outputs, named as PyTorch's --------------------------------


NODE_CASES: list[tuple[str, Callable[[Any, Any], Any], np.ndarray]] = [
    ("eigh", lambda L, X: tuple(L.linalg.eigh(_sym(X))), SQ3),
    ("eigvalsh", lambda L, X: L.linalg.eigvalsh(_sym(X)), SQ3),
    ("svd", lambda L, X: tuple(L.linalg.svd(X)), SQ3),
    ("svdvals", lambda L, X: L.linalg.svdvals(X), SQ3),
    ("torch.svd", lambda L, X: tuple(L.svd(X))[:2], SQ3),
    ("qr", lambda L, X: tuple(L.linalg.qr(X)), SQ3),
    ("qr-r", lambda L, X: L.linalg.qr(X, mode="r").R, SQ3),
    ("slogdet", lambda L, X: tuple(L.linalg.slogdet(X)), SQ3),
    ("cholesky", lambda L, X: L.linalg.cholesky(_spd(L, X)), SQ3),
    ("cholesky_ex", lambda L, X: L.linalg.cholesky_ex(_spd(L, X)).L, SQ3),
    ("torch.cholesky", _quiet(lambda L, X: L.cholesky(_spd(L, X))), SQ3),
    ("cholesky_solve", lambda L, X: L.cholesky_solve(X, _lower(L, X)), SQ3),
    ("cholesky_inverse", lambda L, X: L.cholesky_inverse(_lower(L, X)), SQ3),
    ("inv_ex", lambda L, X: L.linalg.inv_ex(X).inverse, WELL3),
    ("inverse", lambda L, X: L.inverse(X), WELL3),
    ("lu_factor", lambda L, X: L.linalg.lu_factor(X).LU, SQ3),
    ("lu", lambda L, X: tuple(L.linalg.lu(X))[1:], SQ3),
    ("lstsq", lambda L, X: tuple(L.linalg.lstsq(X, X[:, :2], driver="gelsd"))[:2], TALL),
    ("triangular_solve", _quiet(lambda L, X: tuple(L.triangular_solve(X, X))), WELL3),
    ("pinv", lambda L, X: L.linalg.pinv(X), TALL),
    ("pinverse", lambda L, X: L.pinverse(X), TALL),
    ("det", lambda L, X: L.det(X), SQ3),
    ("matrix_exp", lambda L, X: L.matrix_exp(X), SQ3),
    ("solve_triangular", lambda L, X: L.linalg.solve_triangular(X, X, upper=True), WELL3),
    ("linalg.cross", lambda L, X: L.linalg.cross(X, X), SQ3),
    ("cross", lambda L, X: L.cross(X, X, dim=0), SQ3),
    ("matrix_norm-fro", lambda L, X: L.linalg.matrix_norm(X), SQ3),
]


@requires_torch
@pytest.mark.parametrize(("name", "fn", "a"), NODE_CASES, ids=[c[0] for c in NODE_CASES])
def test_records_pytorchs_node(name: str, fn: Callable[[Any, Any], Any], a: np.ndarray) -> None:
    ours = _outputs(fn(agrad, agrad.tensor(a, requires_grad=True)))
    theirs = _outputs(fn(torch, torch.tensor(a, requires_grad=True)))
    assert [o.grad_fn.name() for o in ours] == [t.grad_fn.name() for t in theirs]
    assert len({id(o.grad_fn) for o in ours}) == len({id(t.grad_fn) for t in theirs})
    assert [o.requires_grad for o in ours] == [t.requires_grad for t in theirs]


def test_non_differentiable_outputs() -> None:
    X = agrad.tensor(WELL3, requires_grad=True)
    lu_ex = agrad.linalg.lu_factor_ex(X)
    assert lu_ex.pivots.dtype is agrad.int32 and lu_ex.info.dtype is agrad.int32
    assert not lu_ex.pivots.requires_grad and not lu_ex.info.requires_grad
    P = agrad.linalg.lu(X).P
    assert P.grad_fn is None and not P.requires_grad
    ex = agrad.linalg.cholesky_ex(agrad.tensor(WELL3 @ WELL3.T, requires_grad=True))
    assert ex.info.dtype is agrad.int32 and not ex.info.requires_grad
    r = agrad.linalg.lstsq(X, X, driver="gelsd")
    assert r.rank.dtype is agrad.int64 and not r.rank.requires_grad and not r.singular_values.requires_grad
    assert agrad.linalg.matrix_rank(X).dtype is agrad.int64


def test_no_graph_without_grad_mode() -> None:
    X = agrad.tensor(_sym(SQ3), requires_grad=True)
    with agrad.no_grad():
        for out in (*agrad.linalg.eigh(X), *agrad.linalg.svd(X), agrad.linalg.eigvalsh(X), agrad.linalg.svdvals(X)):
            assert out.grad_fn is None and not out.requires_grad
    with agrad.inference_mode():
        assert agrad.linalg.qr(X).Q.is_inference()
    plain = agrad.linalg.eigh(agrad.tensor(_sym(SQ3)))
    assert plain.eigenvalues.grad_fn is None


def test_decomposition_saves_outputs_and_checks_versions() -> None:
    X = agrad.tensor(_sym(SQ3), requires_grad=True)
    L, V = agrad.linalg.eigh(X)
    loss = (V ** 2).sum() + L.sum()
    with agrad.no_grad():
        L.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward_sync()


def test_backward_twice_needs_retain_graph() -> None:
    X = agrad.tensor(SQ3, requires_grad=True)
    S = agrad.linalg.svdvals(X).sum()
    S.backward_sync(retain_graph=True)
    S.backward_sync()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        S.backward_sync()


# -- determinants at singular matrices ----------------------------------------------


@requires_torch
@pytest.mark.parametrize("a", [np.array([[1.0, 2.0], [2.0, 4.0]]),
                               np.stack([WELL3, np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])])],
                         ids=["singular", "mixed-batch"])
def test_det_gradient_at_singular_matrices_is_the_adjugate(a: np.ndarray) -> None:
    """Note [det at singular matrices]: PyTorch's create_graph formula, to second order."""
    A, T = agrad.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    g, = agrad.autograd.grad_sync(agrad.linalg.det(A).sum(), A, create_graph=True)
    gt, = torch.autograd.grad(torch.linalg.det(T).sum(), T, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), gt.detach().numpy(), rtol=1e-9, atol=1e-12)
    w = np.random.default_rng(0).standard_normal(a.shape)
    h, = agrad.autograd.grad_sync((g * agrad.tensor(w)).sum(), A)
    ht, = torch.autograd.grad((gt * torch.from_numpy(w)).sum(), T)
    np.testing.assert_allclose(h.numpy(), ht.numpy(), rtol=1e-8, atol=1e-10)


# -- errors -------------------------------------------------------------------------

_SING = np.zeros((3, 3))
_NOT_PD = -np.eye(3)

ERROR_CASES: list[tuple[str, Callable[[Any], Any]]] = [
    ("det-nonsquare", lambda L: L.linalg.det(L.ones(2, 3))),
    ("det-1d", lambda L: L.linalg.det(L.ones(3))),
    ("det-int", lambda L: L.linalg.det(L.ones(3, 3, dtype=L.int64))),
    ("slogdet-nonsquare", lambda L: L.linalg.slogdet(L.ones(2, 3))),
    ("inv-singular", lambda L: L.linalg.inv(L.zeros(3, 3))),
    ("inv-singular-batch", lambda L: L.linalg.inv(L.stack([L.eye(3), L.tensor([[1.0, 2, 3], [2, 4, 6], [0, 0, 1]])]))),
    ("inv-int", lambda L: L.linalg.inv(L.ones(3, 3, dtype=L.int64))),
    ("inv_ex-check", lambda L: L.linalg.inv_ex(L.zeros(3, 3), check_errors=True)),
    ("solve-singular-batch", lambda L: L.linalg.solve(L.stack([L.eye(3), L.zeros(3, 3)]), L.ones(2, 3))),
    ("solve-int", lambda L: L.linalg.solve(L.ones(3, 3, dtype=L.int64), L.ones(3, dtype=L.int64))),
    ("eigh-nonsquare", lambda L: L.linalg.eigh(L.ones(2, 3))),
    ("eigh-uplo", lambda L: L.linalg.eigh(L.eye(3), UPLO="X")),
    ("eigh-int", lambda L: L.linalg.eigh(L.ones(3, 3, dtype=L.int64))),
    ("eigvalsh-nonsquare", lambda L: L.linalg.eigvalsh(L.ones(2, 3))),
    ("svd-1d", lambda L: L.linalg.svd(L.ones(3))),
    ("svd-int", lambda L: L.linalg.svd(L.ones(3, 3, dtype=L.int64))),
    ("svdvals-1d", lambda L: L.linalg.svdvals(L.ones(3))),
    ("qr-mode", lambda L: L.linalg.qr(L.ones(2, 3), mode="x")),
    ("qr-1d", lambda L: L.linalg.qr(L.ones(3))),
    ("qr-int", lambda L: L.linalg.qr(L.ones(3, 3, dtype=L.int64))),
    ("cholesky-not-pd", lambda L: L.linalg.cholesky(-L.eye(3))),
    ("cholesky-not-pd-order-2", lambda L: L.linalg.cholesky(L.tensor([[4.0, 2.0], [100.0, 3.0]]))),
    ("cholesky-not-pd-upper", lambda L: L.linalg.cholesky(L.tensor([[4.0, 100.0], [2.0, 3.0]]), upper=True)),
    ("cholesky-not-pd-batch", lambda L: L.linalg.cholesky(L.stack([L.eye(3), -L.eye(3)]))),
    ("cholesky-nonsquare", lambda L: L.linalg.cholesky(L.ones(2, 3))),
    ("cholesky-int", lambda L: L.linalg.cholesky(L.ones(3, 3, dtype=L.int64))),
    ("torch.cholesky-not-pd", _quiet(lambda L: L.cholesky(-L.eye(3)))),
    ("lstsq-shapes", lambda L: L.linalg.lstsq(L.ones(3, 2), L.ones(4, 1))),
    ("lstsq-driver", lambda L: L.linalg.lstsq(L.ones(3, 2), L.ones(3, 1), driver="foo")),
    ("lstsq-1d", lambda L: L.linalg.lstsq(L.ones(3), L.ones(3))),
    ("lstsq-dtypes", lambda L: L.linalg.lstsq(L.ones(3, 3), L.ones(3, 1, dtype=L.float64))),
    ("pinv-1d", lambda L: L.linalg.pinv(L.ones(3))),
    ("matrix_norm-ord", lambda L: L.linalg.matrix_norm(L.ones(3, 3), ord=3)),
    ("matrix_norm-1d", lambda L: L.linalg.matrix_norm(L.ones(3))),
    ("matrix_norm-same-dims", lambda L: L.linalg.matrix_norm(L.ones(3, 3), dim=(0, 0))),
    ("matrix_norm-int", lambda L: L.linalg.matrix_norm(L.ones(3, 3, dtype=L.int64))),
    ("norm-string-1d", lambda L: L.linalg.norm(L.ones(3), "fro")),
    ("norm-three-dims", lambda L: L.linalg.norm(L.ones(2, 2, 2), "fro", dim=(0, 1, 2))),
    ("norm-ord-3-matrix", lambda L: L.linalg.norm(L.ones(3, 3), 3)),
    ("norm-ord-3d", lambda L: L.linalg.norm(L.ones(2, 2, 2), 2)),
    ("matrix_power-nonsquare", lambda L: L.linalg.matrix_power(L.ones(2, 3), 2)),
    ("matrix_power-1d", lambda L: L.linalg.matrix_power(L.ones(3), 2)),
    ("matrix_power-singular", lambda L: L.linalg.matrix_power(L.zeros(3, 3), -1)),
    ("matrix_power-float-n", lambda L: L.linalg.matrix_power(L.eye(2), 1.5)),
    ("matrix_exp-nonsquare", lambda L: L.linalg.matrix_exp(L.ones(2, 3))),
    ("matrix_exp-int", lambda L: L.linalg.matrix_exp(L.ones(3, 3, dtype=L.int64))),
    ("cross-size", lambda L: L.linalg.cross(L.ones(2, 4), L.ones(2, 4))),
    ("cross-broadcast", lambda L: L.linalg.cross(L.ones(2, 3), L.ones(4, 3))),
    ("cross-dim", lambda L: L.linalg.cross(L.ones(3, 2), L.ones(3, 2), dim=5)),
    ("cross-dtypes", lambda L: L.linalg.cross(L.ones(3), L.ones(3, dtype=L.float64))),
    ("torch.cross-no-size-3", _quiet(lambda L: L.cross(L.ones(4, 2), L.ones(4, 2)))),
    ("vecdot-int", lambda L: L.linalg.vecdot(L.ones(3, dtype=L.int32), L.ones(3, dtype=L.int32))),
    ("vecdot-dtypes", lambda L: L.linalg.vecdot(L.ones(3), L.ones(3, dtype=L.float64))),
    ("vecdot-broadcast", lambda L: L.linalg.vecdot(L.ones(2, 3), L.ones(4, 3))),
    ("multi_dot-one", lambda L: L.linalg.multi_dot([L.ones(3, 3)])),
    ("multi_dot-3d-last", lambda L: L.linalg.multi_dot([L.ones(3, 3), L.ones(2, 3, 3)])),
    ("multi_dot-3d-middle", lambda L: L.linalg.multi_dot([L.ones(2, 3), L.ones(2, 3, 2), L.ones(2, 2)])),
    ("multi_dot-shapes", lambda L: L.linalg.multi_dot([L.ones(3, 2), L.ones(3, 3)])),
    ("multi_dot-dtypes", lambda L: L.linalg.multi_dot([L.ones(2, 3), L.ones(3, 2, dtype=L.float64)])),
    ("solve_triangular-shapes", lambda L: L.linalg.solve_triangular(L.eye(3), L.ones(2, 2), upper=True)),
    ("solve_triangular-1d", lambda L: L.linalg.solve_triangular(L.eye(3), L.ones(3), upper=True)),
    ("solve_triangular-int", lambda L: L.linalg.solve_triangular(L.eye(3, dtype=L.int64),
                                                                 L.ones(3, 1, dtype=L.int64), upper=True)),
    ("cholesky_solve-shapes", lambda L: L.cholesky_solve(L.ones(4, 2), L.eye(3))),
    ("cholesky_solve-dtypes", lambda L: L.cholesky_solve(L.ones(3, 3), L.eye(3, dtype=L.float64))),
    ("cholesky_inverse-nonsquare", lambda L: L.cholesky_inverse(L.ones(2, 3))),
    ("cholesky_inverse-int", lambda L: L.cholesky_inverse(L.eye(3, dtype=L.int64))),
    ("triangular_solve-shapes", _quiet(lambda L: L.triangular_solve(L.ones(4, 2), L.eye(3)))),
    ("matrix_rank-1d", lambda L: L.linalg.matrix_rank(L.ones(3))),
    ("cond-1d", lambda L: L.linalg.cond(L.ones(3))),
    ("cond-nuc-nonsquare", lambda L: L.linalg.cond(L.ones(2, 3), "nuc")),
    ("vander-N", lambda L: L.linalg.vander(L.ones(2), N=1)),
    ("tensorinv-shape", lambda L: L.linalg.tensorinv(L.ones(4, 3), ind=1)),
    ("tensorinv-ind", lambda L: L.linalg.tensorinv(L.ones(4, 4), ind=0)),
    ("tensorsolve-shape", lambda L: L.linalg.tensorsolve(L.ones(2, 3, 5), L.ones(2, 3))),
    ("diagonal-1d", lambda L: L.linalg.diagonal(L.ones(3))),
    ("lu-1d", lambda L: L.linalg.lu(L.ones(3))),
    ("lu_factor-int", lambda L: L.linalg.lu_factor(L.ones(3, 3, dtype=L.int64))),
    ("lu_factor-singular-batch", lambda L: L.linalg.lu_factor(L.stack([L.eye(2), L.zeros(2, 2)]))),
    ("cholesky_ex-check", lambda L: L.linalg.cholesky_ex(L.stack([L.eye(2), -L.eye(2)]), check_errors=True)),
    ("mv-shapes", lambda L: L.mv(L.ones(2, 3), L.ones(4))),
    ("mv-3d", lambda L: L.mv(L.ones(2, 2, 3), L.ones(3))),
    ("mv-dtypes", lambda L: L.mv(L.ones(2, 3), L.ones(3, dtype=L.float64))),
    ("addmv-shapes", lambda L: L.addmv(L.ones(3), L.ones(2, 3), L.ones(3))),
    ("addr-shapes", lambda L: L.addr(L.ones(3, 3), L.ones(2), L.ones(3))),
    ("addr-2d", lambda L: L.addr(L.ones(3, 3), L.ones(3, 1), L.ones(3))),
    ("addbmm-sizes", lambda L: L.addbmm(L.ones(3, 3), L.ones(2, 3, 4), L.ones(2, 3, 3))),
    ("addbmm-batches", lambda L: L.addbmm(L.ones(3, 3), L.ones(2, 3, 4), L.ones(3, 4, 3))),
    ("addbmm-input", lambda L: L.addbmm(L.ones(2, 2), L.ones(2, 3, 4), L.ones(2, 4, 3))),
    ("baddbmm-sizes", lambda L: L.baddbmm(L.ones(2, 3, 3), L.ones(2, 3, 4), L.ones(2, 3, 3))),
    ("baddbmm-input", lambda L: L.baddbmm(L.ones(2, 2, 3), L.ones(2, 3, 4), L.ones(2, 4, 3))),
    ("vdot-sizes", lambda L: L.vdot(L.ones(3), L.ones(4))),
    ("vdot-2d", lambda L: L.vdot(L.ones(3, 1), L.ones(3, 1))),
    ("vdot-dtypes", lambda L: L.vdot(L.ones(3), L.ones(3, dtype=L.float64))),
    ("inner-sizes", lambda L: L.inner(L.ones(3), L.ones(4))),
    ("tensordot-sizes", lambda L: L.tensordot(L.ones(3, 4, 5), L.ones(4, 3, 6), dims=2)),
    ("tensordot-lists", lambda L: L.tensordot(L.ones(3, 4, 5), L.ones(4, 3, 6), dims=([0], [1, 0]))),
    ("dist-broadcast", lambda L: L.dist(L.ones(3), L.ones(4))),
    ("dist-int", lambda L: L.dist(L.ones(3, dtype=L.int64), L.ones(3, dtype=L.int64))),
    ("chain_matmul-none", _quiet(lambda L: L.chain_matmul())),
    ("chain_matmul-1d", _quiet(lambda L: L.chain_matmul(L.ones(3)))),
]


def _key(message: str) -> str:
    first = message.splitlines()[0] if message else message
    return re.sub(r" \(Triggered internally at .*\)$", "", first)


@requires_torch
@pytest.mark.parametrize(("name", "misuse"), ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_errors_match_torch(name: str, misuse: Callable[[Any], Any]) -> None:
    with pytest.raises(Exception) as theirs:
        misuse(torch)
    with pytest.raises(Exception) as ours:
        misuse(agrad)
    if type(theirs.value).__name__ == "_LinAlgError":
        assert type(ours.value) is agrad.linalg.LinAlgError
    else:
        assert type(ours.value) is type(theirs.value)
    assert _key(str(theirs.value)) in str(ours.value)


def test_linalg_error_is_a_runtime_error() -> None:
    assert issubclass(agrad.linalg.LinAlgError, RuntimeError)
    with pytest.raises(RuntimeError, match="singular"):
        agrad.linalg.inv(agrad.zeros(2, 2))


@pytest.mark.parametrize(("mode", "shape", "message"), [
    ("r", (3, 2), "The derivative of linalg.qr depends on Q"),
    ("complete", (3, 2), "not differentiable when mode='complete' and nrows > ncols")])
def test_qr_backward_errors(mode: str, shape: tuple, message: str) -> None:
    X = agrad.tensor(_r(*shape), requires_grad=True)
    out = agrad.linalg.qr(X, mode=mode)
    with pytest.raises(RuntimeError, match=re.escape(message)):
        out.R.sum().backward_sync()


# -- results and flags without errors -------------------------------------------------


@requires_torch
def test_ex_variants_report_instead_of_raising() -> None:
    a = np.stack([WELL3, _SING])
    inverse, info = agrad.linalg.inv_ex(agrad.tensor(a))
    assert info.tolist() == torch.linalg.inv_ex(torch.tensor(a)).info.tolist()
    np.testing.assert_allclose(inverse.numpy()[0], np.linalg.inv(WELL3))
    assert np.isnan(inverse.numpy()[1]).all()
    b = np.stack([WELL3 @ WELL3.T, np.array([[1.0, 0, 0], [0, -1, 0], [0, 0, 1]])])
    L, info = agrad.linalg.cholesky_ex(agrad.tensor(b))
    assert info.tolist() == torch.linalg.cholesky_ex(torch.tensor(b)).info.tolist() == [0, 2]
    np.testing.assert_allclose(L.numpy()[0], np.linalg.cholesky(b[0]))
    lu_info = agrad.linalg.lu_factor_ex(agrad.tensor(a)).info
    assert lu_info.tolist() == torch.linalg.lu_factor_ex(torch.tensor(a)).info.tolist()


def test_return_types() -> None:
    X = agrad.tensor(_sym(SQ3))
    r = agrad.linalg.eigh(X)
    assert isinstance(r, tuple) and r.n_fields == 2 and r[0] is r.eigenvalues and r[1] is r.eigenvectors
    assert repr(r).startswith("agrad.return_types.linalg_eigh(\neigenvalues=tensor(")
    U, S, V = agrad.svd(X)
    assert agrad.svd(X).V.shape == V.shape == (3, 3)
    assert [f for f in ("solution", "residuals", "rank", "singular_values")
            if hasattr(agrad.linalg.lstsq(X, X), f)] == ["solution", "residuals", "rank", "singular_values"]
    assert agrad.slogdet(X).logabsdet.shape == ()
    assert agrad.linalg.lu(X).P.shape == (3, 3)
    assert agrad.linalg.qr(X, mode="r").Q.shape == (0,)


# -- deprecated spellings warn as PyTorch's ------------------------------------------


@pytest.mark.parametrize(("call", "match"), [
    (lambda: agrad.cholesky(agrad.eye(2)), "torch.cholesky is deprecated"),
    (lambda: agrad.qr(agrad.eye(2)), "torch.qr is deprecated"),
    (lambda: agrad.triangular_solve(agrad.ones(2, 1), agrad.eye(2)), "torch.triangular_solve is deprecated"),
    (lambda: agrad.chain_matmul(agrad.eye(2), agrad.eye(2)), "torch.chain_matmul is deprecated"),
    (lambda: agrad.cross(agrad.ones(3, 2), agrad.ones(3, 2)), "Using torch.cross without specifying the dim arg"),
])
def test_deprecated_spellings_warn(call: Callable[[], Any], match: str) -> None:
    with pytest.warns(UserWarning, match=re.escape(match)):
        call()


# -- Tensor methods and in-place forms -------------------------------------------------


METHOD_NAMES = ["det", "logdet", "slogdet", "inverse", "pinverse", "cholesky", "cholesky_solve", "cholesky_inverse",
                "triangular_solve", "qr", "svd", "matrix_power", "matrix_exp", "cross", "addbmm", "baddbmm", "addmv",
                "addr", "mv", "inner", "vdot", "dist", "ger", "addmm_", "addbmm_", "baddbmm_", "addmv_", "addr_"]


@requires_torch
@pytest.mark.parametrize("name", METHOD_NAMES)
def test_methods_exist_as_in_torch(name: str) -> None:
    assert hasattr(torch.Tensor, name)
    assert callable(getattr(agrad.Tensor, name))


@requires_torch
def test_methods_match_functions() -> None:
    X = agrad.tensor(WELL3)
    np.testing.assert_allclose(X.det().numpy(), torch.tensor(WELL3).det().numpy())
    np.testing.assert_allclose(X.inverse().numpy(), np.linalg.inv(WELL3))
    np.testing.assert_allclose(X.matrix_power(2).numpy(), WELL3 @ WELL3)
    np.testing.assert_allclose(X.logdet().numpy(), torch.tensor(WELL3).logdet().numpy())
    np.testing.assert_allclose(X.slogdet().logabsdet.numpy(), np.linalg.slogdet(WELL3)[1])
    np.testing.assert_allclose(X.cross(X, dim=1).numpy(), np.zeros((3, 3)))
    np.testing.assert_allclose(X.inner(X).numpy(), WELL3 @ WELL3.T)
    np.testing.assert_allclose(X.pinverse().numpy(), np.linalg.pinv(WELL3), rtol=1e-10)
    np.testing.assert_allclose(X.matrix_exp().numpy(), torch.tensor(WELL3).matrix_exp().numpy(), rtol=1e-10)
    np.testing.assert_allclose(X.svd().S.numpy(), np.linalg.svd(WELL3, compute_uv=False))


INPLACE = [
    ("addmm_", (_r(2, 4), _r(2, 3), _r(3, 4)), {"beta": 0.5, "alpha": 2.0}),
    ("addbmm_", (_r(2, 4), _r(3, 2, 3), _r(3, 3, 4)), {}),
    ("baddbmm_", (_r(2, 2, 4), _r(2, 2, 3), _r(2, 3, 4)), {"alpha": -1.0}),
    ("addmv_", (_r(2), _r(2, 3), _r(3)), {"beta": 2.0}),
    ("addr_", (_r(2, 3), _r(2), _r(3)), {}),
]


@requires_torch
@pytest.mark.parametrize(("name", "arrays", "kwargs"), INPLACE, ids=[c[0] for c in INPLACE])
def test_inplace_forms_match_torch(name: str, arrays: tuple, kwargs: dict) -> None:
    def run(L: Any) -> tuple[Any, list[Any]]:
        leaves = [L.tensor(a, requires_grad=True) for a in arrays]
        target = leaves[0] * 1.0  # a non-leaf to write into
        out = getattr(target, name)(*leaves[1:], **kwargs)
        assert out is target
        return out, leaves

    out, ours = run(agrad)
    expected, theirs = run(torch)
    np.testing.assert_allclose(_np(out), _np(expected), rtol=1e-12)
    assert out.grad_fn.name() == expected.grad_fn.name()
    w = np.random.default_rng(2).standard_normal(out.shape)
    (out * agrad.tensor(w)).sum().backward_sync()
    (expected * torch.from_numpy(w)).sum().backward()
    for mine, ref in zip(ours, theirs):
        np.testing.assert_allclose(mine.grad.numpy(), ref.grad.numpy(), rtol=1e-10, atol=1e-12)


# -- public names ---------------------------------------------------------------------


@requires_torch
def test_public_names_exist_in_torch() -> None:
    from agrad._ops import _decompositions, _linalg

    for name in [*_linalg.__all__, *_decompositions.__all__]:
        assert hasattr(torch, name), name
        assert name in agrad.__all__, name
    for name in agrad.linalg.__all__:
        assert hasattr(torch.linalg, name), name


def test_aliases_are_the_same_function() -> None:
    assert agrad.ger is agrad.outer
    assert agrad.inverse is agrad.linalg.inv
    assert agrad.det is agrad.linalg.det
    assert agrad.matrix_exp is agrad.linalg.matrix_exp
    assert agrad.matrix_power is agrad.linalg.matrix_power
