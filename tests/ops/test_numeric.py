"""The numerical utilities (``agrad._ops._numeric``) and the last ``agrad.linalg``
functions (solve_ex, lu_solve, householder_product) against PyTorch.

The composites (no op-table entry of their own) are checked table-driven, as
tests/ops/test_functional.py does: values and gradients against torch in
float64, values in float32, and float64 gradcheck and gradgradcheck.  The
entries (``renorm``, ``mvlgamma``, ``isin``) are checked by the op table from
their samples; their in-place forms, errors, multi-output results
(``frexp``, ``histogram``, ``unravel_index``) and warnings are checked here.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
from agrad.autograd import gradcheck, gradgradcheck
from tests.helpers import non_contiguous, requires_torch, torch

_rng = np.random.default_rng(11)
Y = _rng.standard_normal((3, 5))
X_POINTS = np.sort(_rng.uniform(0, 4, 5))
X_GRID = np.sort(_rng.uniform(0, 4, (3, 5)), axis=1)
OBS = _rng.standard_normal((3, 6))
OBS_1D = _rng.standard_normal(6)
FW = np.array([1, 2, 1, 3, 1, 2])
AW = _rng.uniform(0.5, 2.0, 6)
V = _rng.uniform(0.5, 2.0, 4)
F2 = _rng.standard_normal((4, 5))
COORD = np.array([0.0, 0.5, 1.5, 1.75, 3.0])
SQ = _rng.standard_normal((2, 3, 3)) + 3 * np.eye(3)
RHS = _rng.standard_normal((2, 3, 2))
RHS_RIGHT = _rng.standard_normal((2, 2, 3))
HH = _rng.standard_normal((5, 3))
HH_B = _rng.standard_normal((2, 4, 3))
TAU = _rng.uniform(0.2, 1.5, 2)
TAU_B = _rng.uniform(0.2, 1.5, (2, 3))
MAT = _rng.standard_normal((3, 4))


class Case:
    """A call ``fn(lib, *tensors)`` on tensors made from ``inputs`` (float arrays require grad)."""

    def __init__(self, fn: Callable[..., Any], *inputs: np.ndarray, constants: tuple[int, ...] = (),
                 ref: Callable[..., Any] | None = None) -> None:
        self.fn = fn
        self.ref = ref or fn  # torch's side, where torch's own function cannot be differentiated
        self.inputs = inputs
        self.constants = constants  # indices of float inputs that do not take gradients


def _vander(x: Any, N: int, increasing: bool) -> Any:
    """torch.vander's values through pow: torch's own vander fails in backward (it writes
    in place into a tensor its cumprod saved), so its gradient comes from this; its
    values are checked against torch.vander in test_vander_values_match_torch."""
    out = x.unsqueeze(-1) ** torch.arange(N, dtype=x.dtype)
    return out if increasing else out.flip(-1)


def _lu_solve(lib: Any, A: Any, B: Any, **kw: Any) -> Any:
    LU, piv = lib.linalg.lu_factor(A)
    return lib.linalg.lu_solve(LU, piv, B, **kw)


CASES: dict[str, Case] = {
    "trapezoid": Case(lambda L, y: L.trapezoid(y), Y),
    "trapezoid-dx-dim0": Case(lambda L, y: L.trapezoid(y, dx=0.3, dim=0), Y),
    "trapezoid-x1d": Case(lambda L, y, x: L.trapezoid(y, x), Y, X_POINTS),
    "trapezoid-xnd": Case(lambda L, y, x: L.trapezoid(y, x), Y, X_GRID),
    "trapezoid-0d-dim": Case(lambda L, y: L.trapezoid(y, dim=0), Y[:, :1]),
    "trapz-x": Case(lambda L, y, x: L.trapz(y, x, dim=-1), Y, X_POINTS),
    "cumulative_trapezoid": Case(lambda L, y: L.cumulative_trapezoid(y), Y),
    "cumulative_trapezoid-dx": Case(lambda L, y: L.cumulative_trapezoid(y, dx=2.0, dim=0), Y),
    "cumulative_trapezoid-x": Case(lambda L, y, x: L.cumulative_trapezoid(y, x), Y, X_POINTS),
    "cov": Case(lambda L, x: L.cov(x), OBS),
    "cov-1d": Case(lambda L, x: L.cov(x), OBS_1D),
    "cov-correction0": Case(lambda L, x: L.cov(x, correction=0), OBS),
    "cov-fweights": Case(lambda L, x, f: L.cov(x, fweights=f), OBS, FW),
    "cov-aweights": Case(lambda L, x, a: L.cov(x, aweights=a), OBS, AW),
    "cov-both": Case(lambda L, x, f, a: L.cov(x, fweights=f, aweights=a, correction=2), OBS, FW, AW),
    "cov-method": Case(lambda L, x: x.cov(), OBS),
    "corrcoef": Case(lambda L, x: L.corrcoef(x), OBS),
    "corrcoef-method": Case(lambda L, x: x.corrcoef(), OBS[:2]),
    "vander": Case(lambda L, x: L.vander(x), V, ref=lambda L, x: _vander(x, 4, False)),
    "vander-N-increasing": Case(lambda L, x: L.vander(x, N=6, increasing=True), V,
                                ref=lambda L, x: _vander(x, 6, True)),
    "vander-N1": Case(lambda L, x: L.vander(x, 1), V, ref=lambda L, x: _vander(x, 1, False)),
    "gradient": Case(lambda L, f: L.gradient(f), F2),
    "gradient-spacing-edge2": Case(lambda L, f: L.gradient(f, spacing=0.5, dim=1, edge_order=2), F2),
    "gradient-spacings": Case(lambda L, f: L.gradient(f, spacing=[2.0, 0.5]), F2),
    "gradient-coords": Case(lambda L, f, c: L.gradient(f, spacing=(c,), dim=1), F2, COORD, constants=(1,)),
    "gradient-coords-edge2": Case(lambda L, f, c: L.gradient(f, spacing=(c,), dim=-1, edge_order=2), F2, COORD,
                                  constants=(1,)),
    "nuclear_norm": Case(lambda L, x: L.nuclear_norm(x), MAT),
    "nuclear_norm-dim": Case(lambda L, x: L.nuclear_norm(x, (1, 0), True), MAT),
    "frobenius_norm": Case(lambda L, x: L.frobenius_norm(x, (0, 1)), MAT),
    "frobenius_norm-dim": Case(lambda L, x: L.frobenius_norm(x, 1, keepdim=True), MAT),
    "frexp-mantissa": Case(lambda L, x: L.frexp(x * 5).mantissa, MAT),
    "solve_ex": Case(lambda L, A, B: L.linalg.solve_ex(A, B).result, SQ, RHS),
    "solve_ex-right": Case(lambda L, A, B: L.linalg.solve_ex(A, B, left=False).result, SQ, RHS_RIGHT),
    "lu_solve": Case(lambda L, A, B: _lu_solve(L, A, B), SQ, RHS),
    "lu_solve-adjoint": Case(lambda L, A, B: _lu_solve(L, A, B, adjoint=True), SQ, RHS),
    "lu_solve-right": Case(lambda L, A, B: _lu_solve(L, A, B, left=False), SQ, RHS_RIGHT),
    "lu_solve-right-adjoint": Case(lambda L, A, B: _lu_solve(L, A, B, left=False, adjoint=True), SQ, RHS_RIGHT),
    "lu_solve-torch": Case(lambda L, A, B: L.lu_solve(B, *L.linalg.lu_factor(A)), SQ, RHS),
    "lu_solve-method": Case(lambda L, A, B: B.lu_solve(*L.linalg.lu_factor(A)), SQ, RHS),
    "householder_product": Case(lambda L, A, t: L.linalg.householder_product(A, t), HH, TAU),
    "householder_product-batch": Case(lambda L, A, t: L.linalg.householder_product(A, t), HH_B, TAU_B),
}


def _tensors(lib: Any, case: Case, dtype: Any) -> list[Any]:
    out = []
    for i, a in enumerate(case.inputs):
        if a.dtype.kind == "f":
            out.append(lib.tensor(a, dtype=dtype, requires_grad=i not in case.constants))
        else:
            out.append(lib.tensor(a))
    return out


def _outputs(out: Any) -> list[Any]:
    return list(out) if isinstance(out, tuple) else [out]


def _quiet_call(fn: Callable[..., Any], *args: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the deprecated names warn (checked below)
        return fn(*args)


@requires_torch
@pytest.mark.parametrize("name", [n for n, c in CASES.items()
                                  if any(a.dtype.kind == "f" and not non_contiguous(a).flags.c_contiguous
                                         for a in c.inputs)])
def test_matches_torch_on_non_contiguous_inputs(name: str) -> None:
    """Values and gradients with every float input a leaf over non-contiguous memory."""
    case = CASES[name]
    _check_float64(case, [agrad.from_numpy(non_contiguous(a.astype(np.float64))).requires_grad_(i not in case.constants)
                          if a.dtype.kind == "f" else t
                          for i, (a, t) in enumerate(zip(case.inputs, _tensors(agrad, case, agrad.float64)))])


def _check_float64(case: Case, ours: list[Any]) -> None:
    theirs = _tensors(torch, case, torch.float64)
    outs = _outputs(_quiet_call(case.fn, agrad, *ours))
    refs = _outputs(_quiet_call(case.ref, torch, *theirs))
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        assert o.shape == tuple(r.shape) and o.dtype.name == str(r.dtype).removeprefix("torch.")
        np.testing.assert_allclose(o.detach().numpy(), r.detach().numpy(), rtol=1e-9, atol=1e-11)
    seeds = [np.random.default_rng(3).standard_normal(o.shape) for o in outs]
    agrad.autograd.backward_sync(outs, [agrad.tensor(s) for s in seeds])
    torch.autograd.backward(refs, [torch.tensor(s) for s in seeds])
    for a, t in zip(ours, theirs):
        if t.requires_grad:
            np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-8, atol=1e-10)


@requires_torch
@pytest.mark.parametrize("name", list(CASES))
def test_matches_torch(name: str) -> None:
    case = CASES[name]
    _check_float64(case, _tensors(agrad, case, agrad.float64))
    outs32 = _outputs(_quiet_call(case.fn, agrad, *_tensors(agrad, case, agrad.float32)))
    refs32 = _outputs(_quiet_call(case.ref, torch, *_tensors(torch, case, torch.float32)))
    for o, r in zip(outs32, refs32):
        assert o.dtype.name == str(r.dtype).removeprefix("torch.")
        np.testing.assert_allclose(o.detach().numpy(), r.detach().numpy(), rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("check", [gradcheck, gradgradcheck], ids=["grad", "gradgrad"])
@pytest.mark.parametrize("name", list(CASES))
def test_gradcheck(name: str, check: Callable[..., bool]) -> None:
    case = CASES[name]
    inputs = _tensors(agrad, case, agrad.float64)
    if not any(getattr(t, "requires_grad", False) for t in inputs):
        pytest.skip("no differentiable input")
    assert _quiet_call(lambda: check(lambda *ts: case.fn(agrad, *ts), inputs))


# -- integer inputs, dtypes -----------------------------------------------------------


@requires_torch
@pytest.mark.parametrize("call", [
    lambda L, t: L.trapezoid(t), lambda L, t: L.trapezoid(t, dx=2), lambda L, t: L.cumulative_trapezoid(t),
    lambda L, t: L.cov(t), lambda L, t: L.corrcoef(t), lambda L, t: L.vander(t[0]),
    lambda L, t: L.gradient(t)[0], lambda L, t: L.mvlgamma(t + 2, 2), lambda L, t: L.trapezoid(t, t),
])
def test_integer_inputs_match_torch(call: Callable[..., Any]) -> None:
    a = np.array([[1, 2, 4, 7], [3, 1, 2, 2]])
    out, ref = call(agrad, agrad.tensor(a)), call(torch, torch.tensor(a))
    assert out.dtype.name == str(ref.dtype).removeprefix("torch.")
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-6)


@requires_torch
def test_empty_and_degenerate_match_torch() -> None:
    for call in (lambda L: L.trapezoid(L.zeros(3, 0)), lambda L: L.cumulative_trapezoid(L.zeros(0)),
                 lambda L: L.vander(L.tensor([1.0, 2.0]), N=0), lambda L: L.gradient(L.tensor(1.0)),
                 lambda L: L.trapezoid(L.zeros(2, 0), dim=0)):
        out, ref = call(agrad), call(torch)
        if isinstance(ref, tuple):
            assert out == ()
            continue
        assert out.shape == tuple(ref.shape)
        np.testing.assert_allclose(out.numpy(), ref.numpy())


# -- the entries' in-place forms and node names ------------------------------------------


@requires_torch
def test_inplace_forms_and_node_names() -> None:
    x = MAT.copy()
    for name, args in (("renorm", (2, 0, 1.0)), ("mvlgamma", (2,))):
        base = np.abs(x) + 2
        a, t = agrad.tensor(base, requires_grad=True), torch.tensor(base, requires_grad=True)
        ao, to = a * 1, t * 1
        getattr(ao, name + "_")(*args)
        getattr(to, name + "_")(*args)
        np.testing.assert_allclose(ao.detach().numpy(), to.detach().numpy(), rtol=1e-10)
        assert ao.grad_fn.name() == to.grad_fn.name()
        ao.sum().backward_sync()
        to.sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-9)
    a = agrad.tensor(x, requires_grad=True)
    assert agrad.frexp(a).mantissa.grad_fn.name() == "FrexpBackward0"
    assert agrad.renorm(a, 2, 1, 0.5).grad_fn.name() == "RenormBackward0"


# -- multi-output and integer-valued functions --------------------------------------------


@requires_torch
def test_frexp_matches_torch() -> None:
    a = np.array([0.0, -0.0, 1.0, -3.5, 1e-300, 6.0e20, np.inf, np.nan])
    for dt in ("float64", "float32"):
        m, e = agrad.frexp(agrad.tensor(a, dtype=getattr(agrad, dt)))
        tm, te = torch.frexp(torch.tensor(a, dtype=getattr(torch, dt)))
        assert m.dtype.name == dt and e.dtype is agrad.int32 and te.dtype is torch.int32
        np.testing.assert_array_equal(m.numpy(), tm.numpy())
        finite = np.isfinite(a)
        np.testing.assert_array_equal(e.numpy()[finite], te.numpy()[finite])
    m, e = agrad.tensor(MAT).frexp()
    np.testing.assert_allclose((m * 2.0 ** e.to(agrad.float64)).numpy(), MAT)
    with pytest.raises(RuntimeError, match="only supports floating-point"):
        agrad.frexp(agrad.tensor([1, 2]))


@requires_torch
@pytest.mark.parametrize("kwargs", [
    {"bins": 5}, {"bins": 4, "range": (-1.0, 1.0)}, {"bins": 3, "density": True},
    {"bins": 4, "range": (0.0, 2.0), "weight": True}, {"bins": 4, "weight": True, "density": True},
    {"bins": "edges"}, {"bins": "edges", "density": True, "weight": True}, {"bins": 3, "range": (3.0, 3.0)},
])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_histogram_matches_torch(kwargs: dict, dtype: str) -> None:
    data = np.concatenate([_rng.standard_normal(40), [1.0, -1.0, 2.0]])
    w = _rng.uniform(0.1, 1.0, data.shape)
    results = []
    for lib in (agrad, torch):
        dt = getattr(lib, dtype)
        kw = dict(kwargs)
        if kw.get("weight"):
            kw["weight"] = lib.tensor(w, dtype=dt)
        else:
            kw.pop("weight", None)
        if kw["bins"] == "edges":
            kw["bins"] = lib.tensor([-2.0, -0.5, 0.0, 0.3, 1.0, 2.0], dtype=dt)
        results.append(lib.histogram(lib.tensor(data, dtype=dt), **kw))
    (h, e), (th, te) = results
    assert h.dtype.name == dtype and e.dtype.name == dtype
    np.testing.assert_allclose(e.numpy(), te.numpy(), rtol=1e-6)
    np.testing.assert_allclose(h.numpy(), th.numpy(), rtol=1e-5)
    assert agrad.tensor(data).histogram(4).hist.shape == (4,)


def test_histogram_errors() -> None:
    with pytest.raises(NotImplementedError, match="histogramdd"):
        agrad.histogram(agrad.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="min should not exceed max"):
        agrad.histogram(agrad.tensor([1.0]), 3, range=(3.0, 1.0))
    with pytest.raises(RuntimeError, match="same dtype"):
        agrad.histogram(agrad.tensor([1.0], dtype=agrad.float64), agrad.tensor([0.0, 1.0]))


@requires_torch
def test_unravel_index_matches_torch() -> None:
    for idx, shape in (([5, 7, 0], (2, 4)), ([[1234], [5678]], (10, 10, 10, 10)), (5, 8), ([3, 11], [3, 4])):
        ours = agrad.unravel_index(agrad.tensor(idx), shape)
        theirs = torch.unravel_index(torch.tensor(idx), shape)
        assert len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            assert o.dtype is agrad.int64 and o.shape == tuple(t.shape)
            np.testing.assert_array_equal(o.numpy(), t.numpy())
    with pytest.raises(TypeError, match="integer dtype"):
        agrad.unravel_index(agrad.tensor([1.0]), (2,))
    with pytest.raises(ValueError, match="negative"):
        agrad.unravel_index(agrad.tensor([1]), (2, -1))


# -- errors ---------------------------------------------------------------------------------


@requires_torch
@pytest.mark.parametrize("call", [
    lambda L: L.renorm(L.randn(3, 4), 0, 0, 1.0), lambda L: L.renorm(L.randn(3, 4), 2, 0, -1.0),
    lambda L: L.renorm(L.tensor(2.0), 2, 0, 1.0), lambda L: L.renorm(L.ones(3, 4, dtype=L.int64), 2, 0, 1.0),
    lambda L: L.renorm(L.randn(3, 4), 2, 2, 1.0),
    lambda L: L.mvlgamma(L.tensor([3.0]), 0),
    lambda L: L.gradient(L.tensor([1.0, 2.0]), edge_order=2),
    lambda L: L.gradient(L.tensor([1.0, 2.0, 4.0, 8.0]), edge_order=3),
    lambda L: L.trapezoid(L.ones(3, 4), L.ones(3)), lambda L: L.trapezoid(L.ones(3, 4), dim=3),
    lambda L: L.cov(L.ones(2, 3, 4)), lambda L: L.cov(L.ones(2, 3), fweights=L.tensor([1.0, 2.0, 3.0])),
    lambda L: L.cov(L.ones(2, 3), aweights=L.tensor([1, 2, 3])),
    lambda L: L.cov(L.ones(2, 3), fweights=L.tensor([1, -2, 3])),
    lambda L: L.corrcoef(L.ones(2, 3, 4)), lambda L: L.vander(L.ones(2, 2)),
    lambda L: L.linalg.solve_ex(L.zeros(2, 2), L.ones(2), check_errors=True),
    lambda L: L.linalg.householder_product(L.ones(2, 3), L.ones(1)),
    lambda L: L.linalg.householder_product(L.ones(3, 2), L.ones(3)),
    lambda L: L.linalg.lu_solve(*L.linalg.lu_factor(L.eye(3)), L.ones(2, 1)),
    lambda L: L.isin(1, 2),
])
def test_errors_match_torch(call: Callable[..., Any]) -> None:
    with pytest.raises(Exception) as theirs:
        call(torch)
    with pytest.raises(Exception) as ours:
        call(agrad)
    expected = theirs.type
    if expected.__name__ == "_LinAlgError":
        expected = agrad.linalg.LinAlgError
    assert isinstance(ours.value, expected), (ours.value, theirs.value)


@requires_torch
def test_solve_ex_singular_matches_torch() -> None:
    A = np.stack([np.eye(2), np.zeros((2, 2))])
    res, info = agrad.linalg.solve_ex(agrad.tensor(A), agrad.ones(2, 2, dtype=agrad.float64))
    tres, tinfo = torch.linalg.solve_ex(torch.tensor(A), torch.ones(2, 2, dtype=torch.float64))
    np.testing.assert_array_equal(info.numpy(), tinfo.numpy())
    assert info.dtype is agrad.int32
    np.testing.assert_array_equal(res.numpy()[0], tres.numpy()[0])
    assert not np.isfinite(res.numpy()[1]).all()


@requires_torch
@pytest.mark.parametrize("name", ["solve", "lstsq", "symeig", "eig"])
def test_removed_functions_raise_torch_error(name: str) -> None:
    A = np.eye(2)
    with pytest.raises(RuntimeError) as theirs:
        getattr(torch.tensor(A), name)(torch.tensor(A))
    with pytest.raises(RuntimeError) as ours:
        getattr(agrad.tensor(A), name)(agrad.tensor(A))
    assert str(ours.value) == str(theirs.value)
    with pytest.raises(RuntimeError, match="deprecated since version 1.9"):
        getattr(agrad, name)(agrad.tensor(A))


@requires_torch
def test_deprecated_lu_and_norms_warn() -> None:
    A = _rng.standard_normal((3, 3))
    with pytest.warns(UserWarning, match="torch.lu is deprecated"):
        LU, piv = agrad.lu(agrad.tensor(A))
    with pytest.warns(UserWarning, match="torch.lu is deprecated"):
        tLU, tpiv = torch.lu(torch.tensor(A))
    np.testing.assert_allclose(LU.numpy(), tLU.numpy())
    np.testing.assert_array_equal(piv.numpy(), tpiv.numpy())
    with pytest.warns(UserWarning):
        LU2, piv2, info = agrad.tensor(np.zeros((2, 2))).lu(get_infos=True)
    assert info.item() == 1 and piv2.dtype is agrad.int32
    with pytest.warns(UserWarning, match="nuclear_norm is deprecated"):
        agrad.nuclear_norm(agrad.tensor(A))
    with pytest.warns(UserWarning, match="frobenius_norm is deprecated"):
        agrad.frobenius_norm(agrad.tensor(A), (0, 1))
    with pytest.warns(UserWarning, match="degrees of freedom"):
        agrad.cov(agrad.ones(2, 3), correction=3)


@requires_torch
def test_vander_values_match_torch() -> None:
    for args in ((V,), (V, 6, True), (V, 1), (V, 0), (np.array([0.0, 2.0, -1.5]), 5)):
        out = agrad.vander(agrad.tensor(args[0]), *args[1:])
        ref = torch.vander(torch.tensor(args[0]), *args[1:])
        assert out.shape == tuple(ref.shape)
        np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-12)
