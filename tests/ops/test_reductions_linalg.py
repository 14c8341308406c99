"""Reductions and linear algebra beyond the op table's samples: ties, zeros in
``prod``, ``max``/``min`` with indices, norms at zero, einsum and solve/inv
against PyTorch (values and gradients)."""

from __future__ import annotations

import numpy as np
import pytest

import agrad
import agrad.linalg
from agrad.autograd import gradcheck, gradgradcheck
from tests.helpers import requires_torch, torch

pytestmark = requires_torch


def _pair(a: np.ndarray) -> tuple[agrad.Tensor, object]:
    return agrad.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)


def _check(fn_ours, fn_torch, *arrays: np.ndarray, grad: bool = True) -> None:  # type: ignore[no-untyped-def]
    ours = [agrad.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, expected = fn_ours(*ours), fn_torch(*theirs)
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-10, atol=1e-12)
    assert out.shape == tuple(expected.shape)
    if grad:
        g = np.random.default_rng(3).standard_normal(out.shape)
        out.backward_sync(agrad.tensor(g))
        expected.backward(torch.tensor(g))
        for a, t in zip(ours, theirs, strict=True):
            np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)


TIES = np.array([[1.0, 3.0, 3.0, -1.0], [2.0, 2.0, 2.0, 0.5], [0.0, -4.0, 1.0, -4.0]])


@pytest.mark.parametrize("name", ["amax", "amin"])
@pytest.mark.parametrize("kw", [{}, {"dim": 1}, {"dim": 0, "keepdim": True}, {"dim": (0, 1)}, {"dim": -1}])
def test_amax_amin_split_ties_evenly(name: str, kw: dict) -> None:
    tkw = dict(kw) if "dim" in kw else {"dim": (), **kw}
    _check(lambda x: getattr(agrad, name)(x, **kw), lambda x: getattr(torch, name)(x, **tkw), TIES)


@pytest.mark.parametrize("name", ["max", "min"])
def test_full_max_min_split_ties_evenly(name: str) -> None:
    _check(lambda x: getattr(x, name)(), lambda x: getattr(x, name)(), TIES)
    x = agrad.tensor(TIES, requires_grad=True)
    assert type(getattr(x, name)().grad_fn).__name__ == f"{name.capitalize()}Backward1"


@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize(("dim", "keepdim"), [(1, False), (0, True), (-1, True), (-2, False)])
def test_max_min_dim_namedtuple(name: str, dim: int, keepdim: bool) -> None:
    x, tx = _pair(TIES)
    res = getattr(agrad, name)(x, dim, keepdim=keepdim)
    ref = getattr(torch, name)(tx, dim, keepdim=keepdim)
    values, indices = res
    assert values is res.values and indices is res.indices
    assert indices.dtype is agrad.int64
    np.testing.assert_array_equal(indices.numpy(), ref.indices.numpy())
    np.testing.assert_array_equal(values.detach().numpy(), ref.values.detach().numpy())
    g = np.arange(values.numel(), dtype=np.float64).reshape(values.shape) + 1
    values.backward_sync(agrad.tensor(g))
    ref.values.backward(torch.tensor(g))
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())  # only to the returned index
    assert getattr(x, name)(dim=dim, keepdim=keepdim).indices.shape == tuple(ref.indices.shape)


def test_max_min_dim_gradcheck() -> None:
    x = agrad.tensor(np.random.default_rng(0).standard_normal((3, 4)), dtype=agrad.float64, requires_grad=True)
    assert gradcheck(lambda t: agrad.max(t, 1).values, [x])
    assert gradgradcheck(lambda t: agrad.min(t, 0, keepdim=True).values, [x])


def test_max_min_with_other_is_elementwise() -> None:
    a, b = agrad.tensor([1.0, 5.0]), agrad.tensor([3.0, 2.0])
    np.testing.assert_array_equal(agrad.max(a, b).numpy(), [3.0, 5.0])
    np.testing.assert_array_equal(agrad.min(a, b).numpy(), [1.0, 2.0])


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("kw", [{}, {"dim": 1}, {"dim": -1, "keepdim": True}, {"keepdim": True}])
def test_argmax_argmin_match_torch(name: str, kw: dict) -> None:
    a = np.random.default_rng(0).standard_normal((3, 4))
    out = getattr(agrad, name)(agrad.tensor(a, requires_grad=True), **kw)
    ref = getattr(torch, name)(torch.tensor(a), **kw)
    assert out.dtype is agrad.int64 and not out.requires_grad
    assert out.shape == tuple(ref.shape)
    np.testing.assert_array_equal(out.numpy(), ref.numpy())


ZEROS = {
    "one": np.array([[1.5, 0.0, 2.0, -1.0], [2.0, 3.0, 0.5, 0.5], [0.0, 0.0, 1.0, 4.0]]),
    "several": np.array([[0.0, 0.0, 2.0], [0.0, 3.0, 0.0], [1.0, 2.0, 3.0]]),
}


@pytest.mark.parametrize("case", ZEROS)
@pytest.mark.parametrize("kw", [{}, {"dim": 1}, {"dim": 0, "keepdim": True}, {"dim": -1}])
def test_prod_gradient_with_zeros(case: str, kw: dict) -> None:
    _check(lambda x: agrad.prod(x, **kw), lambda x: torch.prod(x, **kw), ZEROS[case])


def test_prod_single_zero_is_twice_differentiable() -> None:
    x = agrad.tensor([[1.5, 0.0, 2.0], [0.5, -1.0, 3.0]], dtype=agrad.float64, requires_grad=True)
    assert gradgradcheck(lambda t: t.prod(), [x])
    assert gradgradcheck(lambda t: t.prod(1), [x])


def test_prod_node_names() -> None:
    x = agrad.ones(2, 3, requires_grad=True)
    assert type(x.prod().grad_fn).__name__ == "ProdBackward0"
    assert type(x.prod(1).grad_fn).__name__ == "ProdBackward1"


@pytest.mark.parametrize("name", ["var", "std"])
@pytest.mark.parametrize("kw", [{}, {"dim": 1}, {"dim": (0, 1), "keepdim": True}, {"correction": 0},
                                {"dim": -1, "correction": 2}, {"dim": 0, "correction": 0, "keepdim": True}])
def test_var_std_corrections(name: str, kw: dict) -> None:
    a = np.random.default_rng(1).standard_normal((4, 5))
    _check(lambda x: getattr(agrad, name)(x, **kw), lambda x: getattr(torch, name)(x, **kw), a)


def test_var_std_positional_dim_and_node_names() -> None:
    x = agrad.ones(2, 3, requires_grad=True) * 1.0
    assert type(x.var(1).grad_fn).__name__ == "VarBackward0"
    assert type(x.std().grad_fn).__name__ == "StdBackward0"


def test_std_gradient_is_zero_for_constant_input() -> None:
    _check(lambda x: x.std(), lambda x: x.std(), np.ones(3))
    _check(lambda x: x.std(1), lambda x: x.std(1), np.ones((2, 3)))


def test_logsumexp_is_stable() -> None:
    a = np.array([[1000.0, 1000.0], [-1000.0, -1e4], [-np.inf, 0.0]])
    _check(lambda x: agrad.logsumexp(x, dim=1), lambda x: torch.logsumexp(x, dim=1), a)


@pytest.mark.parametrize("kw", [{}, {"dim": 1}, {"dim": 1, "keepdim": True}])
def test_norm_gradient_is_zero_at_zero(kw: dict) -> None:
    a = np.array([[0.0, 0.0, 0.0], [3.0, -4.0, 0.0]])
    _check(lambda x: x.norm(**kw), lambda x: x.norm(**kw), a)
    _check(lambda x: agrad.linalg.vector_norm(x, **kw), lambda x: torch.linalg.vector_norm(x, **kw), a)
    x = agrad.zeros(3, requires_grad=True)
    x.norm().backward_sync()
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 0.0, 0.0])


@pytest.mark.parametrize("ord", [1, 2, 3, 0.5, float("inf"), float("-inf")])
def test_vector_norm_orders(ord: float) -> None:
    a = np.random.default_rng(2).standard_normal((3, 4))
    _check(lambda x: agrad.linalg.vector_norm(x, ord, dim=1), lambda x: torch.linalg.vector_norm(x, ord, dim=1), a)
    _check(lambda x: agrad.linalg.norm(x.reshape(-1), ord), lambda x: torch.linalg.norm(x.reshape(-1), ord), a)


def test_cumsum_matches_torch() -> None:
    a = np.random.default_rng(4).standard_normal((3, 4))
    _check(lambda x: x.cumsum(1), lambda x: x.cumsum(1), a)
    assert agrad.cumsum(agrad.tensor([1, 2, 3]), dim=0).dtype is agrad.int64
    assert type(agrad.tensor(a, requires_grad=True).cumsum(0).grad_fn).__name__ == "CumsumBackward0"


EINSUM = [("ij,jk->ik", (2, 3), (3, 4)), ("bij,bjk->bik", (2, 2, 3), (2, 3, 4)), ("i,i->", (4,), (4,)),
          ("ij->ji", (2, 3)), ("ii->i", (3, 3)), ("ij->", (2, 3)), ("bi,bi->b", (3, 4), (3, 4)),
          ("i,j->ij", (3,), (4,)), ("ii", (3, 3)), ("ij,jk", (2, 3), (3, 2)), ("ij,kj->ik", (2, 3), (4, 3)),
          ("i j , j -> i", (2, 3), (3,)), ("iij->j", (2, 2, 3))]


@pytest.mark.parametrize(("eq", "shapes"), [(e[0], e[1:]) for e in EINSUM], ids=[e[0] for e in EINSUM])
def test_einsum_matches_torch(eq: str, shapes: tuple) -> None:
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal(s) for s in shapes]
    _check(lambda *ts: agrad.einsum(eq, *ts), lambda *ts: torch.einsum(eq, *ts), *arrays)
    ins = [agrad.tensor(a, requires_grad=True) for a in arrays]
    assert gradgradcheck(lambda *ts: agrad.einsum(eq, *ts), ins)
    assert agrad.einsum(eq, ins).shape == agrad.einsum(eq, *ins).shape  # list of operands


def test_einsum_errors() -> None:
    with pytest.raises(RuntimeError, match="operands"):
        agrad.einsum("ij,jk->ik", agrad.ones(2, 3))
    with pytest.raises(RuntimeError, match="subscripts"):
        agrad.einsum("ijk->i", agrad.ones(2, 3))


def test_mm_bmm_dot_outer_match_torch() -> None:
    rng = np.random.default_rng(6)
    _check(agrad.mm, torch.mm, rng.standard_normal((2, 3)), rng.standard_normal((3, 4)))
    _check(agrad.bmm, torch.bmm, rng.standard_normal((2, 2, 3)), rng.standard_normal((2, 3, 4)))
    _check(agrad.dot, torch.dot, rng.standard_normal(3), rng.standard_normal(3))
    _check(agrad.outer, torch.outer, rng.standard_normal(3), rng.standard_normal(2))


@pytest.mark.parametrize(("fn", "shapes"), [
    ("mm", ((2, 3), (4, 2))), ("mm", ((3,), (3, 2))), ("bmm", ((2, 2, 3), (3, 3, 2))), ("bmm", ((2, 3), (2, 3, 1))),
    ("dot", ((3,), (4,))), ("dot", ((2, 3), (3,))), ("outer", ((2, 2), (3,)))])
def test_linalg_shape_errors_like_torch(fn: str, shapes: tuple) -> None:
    with pytest.raises(RuntimeError):
        getattr(torch, fn)(*(torch.ones(s) for s in shapes))
    with pytest.raises(RuntimeError):
        getattr(agrad, fn)(*(agrad.ones(*s) for s in shapes))


@pytest.mark.parametrize(("a_shape", "b_shape"), [((3, 3), (3, 2)), ((3, 3), (3,)), ((2, 3, 3), (2, 3, 4)),
                                                    ((2, 3, 3), (2, 3)), ((2, 3, 3), (3, 1))])
def test_solve_matches_torch(a_shape: tuple, b_shape: tuple) -> None:
    rng = np.random.default_rng(7)
    a = rng.standard_normal(a_shape) + 4 * np.eye(3)
    b = rng.standard_normal(b_shape)
    _check(agrad.linalg.solve, torch.linalg.solve, a, b)
    A, B = agrad.tensor(a, requires_grad=True), agrad.tensor(b, requires_grad=True)
    assert gradcheck(agrad.linalg.solve, [A, B])
    assert gradgradcheck(agrad.linalg.solve, [A, B])
    assert type(agrad.linalg.solve(A, B).grad_fn).__name__ == "LinalgSolveExBackward0"


def test_inv_matches_torch() -> None:
    a = np.random.default_rng(8).standard_normal((2, 3, 3)) + 4 * np.eye(3)
    _check(agrad.linalg.inv, torch.linalg.inv, a)
    A = agrad.tensor(a, requires_grad=True)
    assert gradcheck(agrad.linalg.inv, [A]) and gradgradcheck(agrad.linalg.inv, [A])
    assert type(agrad.linalg.inv(A).grad_fn).__name__ == "LinalgInvExBackward0"


def test_solve_inv_errors() -> None:
    with pytest.raises(RuntimeError, match="square"):
        agrad.linalg.inv(agrad.ones(2, 3))
    with pytest.raises(RuntimeError, match="singular"):
        agrad.linalg.inv(agrad.zeros(2, 2))
    with pytest.raises(RuntimeError, match="singular"):
        agrad.linalg.solve(agrad.zeros(2, 2), agrad.ones(2))
    with pytest.raises(RuntimeError, match="Incompatible"):
        agrad.linalg.solve(agrad.eye(2), agrad.ones(3, 1))


@pytest.mark.parametrize("kind", ["max", "min"])
def test_extreme_along_a_dim_records_torchs_node(kind: str) -> None:
    values = getattr(agrad.tensor([[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]], requires_grad=True), kind)(dim=1).values
    assert values.grad_fn.name() == f"{kind.capitalize()}Backward0"  # torch: MaxBackward0 / MinBackward0
