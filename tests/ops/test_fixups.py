"""Regression tests for defects found in existing ops, each against PyTorch's
behaviour: values, dtypes, node names and the errors PyTorch raises."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
from agrad.autograd import gradcheck, gradgradcheck
from tests.helpers import requires_torch, torch

pytestmark = requires_torch


def _outcome(lib: Any, fn: Callable[[Any], Any]) -> tuple:
    """What ``fn(lib)`` does: its result's shape and dtype name, or its error's type and message."""
    try:
        out = fn(lib)
    except Exception as e:  # noqa: BLE001 - the error is what is compared
        return type(e).__name__, str(e)
    return tuple(out.shape), str(out.dtype).split(".")[-1]


def _same(fn: Callable[[Any], Any]) -> None:
    assert _outcome(agrad, fn) == _outcome(torch, fn)


# -- 1: erf is vectorised (no Python call per element) and accurate ---------------


def test_erf_matches_torch_to_full_precision() -> None:
    x = np.concatenate([np.linspace(-30, 30, 4001), [0.0, -0.0, 1e-300, 0.46875, 4.0, 26.5, 27.0,
                                                      np.inf, -np.inf, np.nan]])
    got = agrad.erf(agrad.tensor(x)).numpy()
    want = torch.erf(torch.from_numpy(x)).numpy()
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = np.isfinite(want) & (want != 0)
    assert np.all(np.abs(got[ok] - want[ok]) <= 1e-15 * np.abs(want[ok]))
    assert np.array_equal(got[~ok & ~np.isnan(want)], want[~ok & ~np.isnan(want)])
    for dt in ("float32", "int64"):
        _same(lambda L, dt=dt: L.erf(L.tensor([0.5, 1, 2]).to(getattr(L, dt))))


def test_erf_gradient() -> None:
    x = agrad.tensor(np.linspace(-3, 3, 7), requires_grad=True)
    assert gradcheck(agrad.erf, (x,)) and gradgradcheck(agrad.erf, (x,))


def test_erf_has_no_python_loop() -> None:
    import agrad._ops._elementwise as elementwise
    assert not any(isinstance(v, np.ufunc) and v.__name__ == "erf (vectorized)" for v in vars(elementwise).values())
    assert not hasattr(elementwise, "_ERF_PY")


# -- 2: alpha must fit the result's dtype --------------------------------------------


@pytest.mark.parametrize("case", [
    lambda L: L.sub(L.tensor([1, 2]), L.tensor([3, 4]), alpha=2.5),
    lambda L: L.add(L.tensor([1, 2]), L.tensor([3, 4]), alpha=2.5),
    lambda L: L.add(L.tensor([1, 2]), 2, alpha=2.0),
    lambda L: L.add(L.tensor([True, False]), L.tensor([True, True]), alpha=2.5),
    lambda L: L.add(L.tensor([True, False]), L.tensor([True, True]), alpha=2),
    lambda L: L.add(L.tensor([True, False]), L.tensor([True, True]), alpha=True),
    lambda L: L.add(L.tensor([1, 2]), L.tensor([3, 4]), alpha=True),
    lambda L: L.add(L.tensor([1.0, 2.0]), L.tensor([3, 4]), alpha=True),
    lambda L: L.add(L.tensor([1, 2]), 1.5, alpha=2.5),
    lambda L: L.sub(L.tensor([1, 2]), L.tensor(1.5), alpha=2.5),
    lambda L: L.add(L.tensor([1, 2], dtype=L.int32), L.tensor([3, 4], dtype=L.int32), alpha=3),
    lambda L: L.tensor([1, 2]).add_(L.tensor([3, 4]), alpha=2.5),
    lambda L: L.tensor([1, 2]).sub(L.tensor([3, 4]), alpha=1.0),
])
def test_alpha_checked_against_result_dtype(case: Callable[[Any], Any]) -> None:
    _same(case)


def test_bool_add_with_int_alpha_stays_bool() -> None:
    a, b = [True, False, False], [True, True, False]
    got = agrad.add(agrad.tensor(a), agrad.tensor(b), alpha=2)
    assert got.tolist() == torch.add(torch.tensor(a), torch.tensor(b), alpha=2).tolist()


# -- 3: comparison functions take a tensor first -------------------------------------


@pytest.mark.parametrize("name", ["gt", "lt", "ge", "le", "eq", "ne"])
def test_comparison_refuses_number_first(name: str) -> None:
    with pytest.raises(TypeError) as ours:
        getattr(agrad, name)(2, agrad.tensor([1, 2]))
    with pytest.raises(TypeError) as theirs:
        getattr(torch, name)(2, torch.tensor([1, 2]))
    assert str(ours.value) == str(theirs.value)
    # the operators, reflected forms included, and the methods still work
    t, u = agrad.tensor([1, 2, 3]), torch.tensor([1, 2, 3])
    op = {"gt": "__gt__", "lt": "__lt__", "ge": "__ge__", "le": "__le__", "eq": "__eq__", "ne": "__ne__"}[name]
    assert getattr(t, op)(2).tolist() == getattr(u, op)(2).tolist()
    assert getattr(agrad, name)(t, 2).tolist() == getattr(torch, name)(u, 2).tolist()
    assert getattr(t, name)(t).tolist() == getattr(u, name)(u).tolist()
    assert (2 < t).tolist() == (2 < u).tolist() and (2 >= t).tolist() == (2 >= u).tolist()


# -- 4: amax/amin/max/min/argmax of an empty input over a non-empty dim ---------------


@pytest.mark.parametrize("case", [
    lambda L: L.amax(L.zeros(0, 3), dim=1), lambda L: L.amin(L.zeros(0, 3), dim=1),
    lambda L: L.amax(L.zeros(0, 3), dim=(1,), keepdim=True), lambda L: L.amax(L.zeros(3, 0, 2), dim=(0, 2)),
    lambda L: L.amax(L.zeros(0, 3), dim=0), lambda L: L.amin(L.zeros(0, 3), dim=-2),
    lambda L: L.amax(L.zeros(0, 3), dim=(1, 0)), lambda L: L.amax(L.zeros(0, 3)),
    lambda L: L.amax(L.zeros(0, 3), dim=()),
    lambda L: L.max(L.zeros(0, 3), dim=1)[0], lambda L: L.min(L.zeros(0, 3), dim=0)[0],
    lambda L: L.max(L.zeros(0, 3)),
    lambda L: L.argmax(L.zeros(0, 3), dim=1), lambda L: L.argmin(L.zeros(0, 3), dim=1, keepdim=True),
    lambda L: L.argmax(L.zeros(0, 3), dim=-2), lambda L: L.argmax(L.zeros(0, 3)),
])
def test_extremes_of_empty_inputs(case: Callable[[Any], Any]) -> None:
    _same(case)


def test_amax_of_empty_input_backward() -> None:
    x = agrad.zeros(0, 3, requires_grad=True)
    agrad.amax(x, dim=1).sum().backward_sync()
    assert x.grad is not None and x.grad.shape == (0, 3)


# -- 5: norms of integer tensors -----------------------------------------------------


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool"])
@pytest.mark.parametrize("case", [
    lambda L, x: L.linalg.vector_norm(x), lambda L, x: L.norm(x), lambda L, x: L.norm(x, p=1),
    lambda L, x: L.linalg.vector_norm(x, float("inf")), lambda L, x: L.linalg.vector_norm(x, 0),
])
def test_norm_of_integers_raises(dtype: str, case: Callable[[Any, Any], Any]) -> None:
    _same(lambda L: case(L, L.tensor([1, 0, 1]).to(getattr(L, dtype))))


# -- 6: softmax over a row of -inf is NaN, silently ----------------------------------


@pytest.mark.parametrize("fn", ["log_softmax", "softmax"])
def test_softmax_of_all_minus_inf_row(fn: str) -> None:
    x = np.array([[-np.inf, -np.inf, -np.inf], [0.5, -np.inf, 1.0]])
    w = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    a = agrad.tensor(x, requires_grad=True)
    t = torch.tensor(x, requires_grad=True)
    out_a, out_t = getattr(agrad, fn)(a, 1), getattr(torch, fn)(t, 1)  # the suite turns warnings into errors
    np.testing.assert_allclose(out_a.detach().numpy(), out_t.detach().numpy(), rtol=1e-12)
    (out_a * agrad.tensor(w)).sum().backward_sync()
    (out_t * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-12)


# -- 8: einsum with an ellipsis and broadcasting -------------------------------------

EINSUM_CASES = [
    ("...ij,...jk->...ik", (2, 1, 2, 3), (3, 3, 2)),
    ("...i,...i", (2, 3), (4, 1, 3)),
    ("...i,...i->...", (2, 3), (4, 1, 3)),
    ("i...->...", (2, 3, 4)),
    ("...ij->...ji", (2, 3)),
    ("...->...", ()),
    ("...,...->...", (2, 1), (3,)),
    ("b...,b...->b", (2, 3), (2, 3)),
    ("bij,j->bi...", (2, 2, 3), (3,)),
    ("ij,ij->ij", (2, 3), (1, 3)),
    ("i,i->i", (1,), (3,)),
    ("...ii->...i", (2, 3, 3)),
    ("i...j,j->i", (2, 0, 3), (3,)),
    ("a...b, b...c -> ...ac", (2, 4, 3), (3, 4, 2)),
]


@pytest.mark.parametrize(("eq", "shapes"), [(c[0], c[1:]) for c in EINSUM_CASES], ids=[c[0] for c in EINSUM_CASES])
def test_einsum_ellipsis_matches_torch(eq: str, shapes: tuple) -> None:
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(s) for s in shapes]
    ins = [agrad.tensor(a, requires_grad=True) for a in arrays]
    refs = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, ref = agrad.einsum(eq, *ins), torch.einsum(eq, *refs)
    assert out.shape == tuple(ref.shape) and out.grad_fn.name() == "EinsumBackward0"
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = rng.standard_normal(tuple(ref.shape))
    got = agrad.autograd.grad_sync(out, ins, agrad.tensor(g))
    want = torch.autograd.grad(ref, refs, torch.tensor(g))
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-12)
    assert gradcheck(lambda *ts: agrad.einsum(eq, *ts), ins)
    assert gradgradcheck(lambda *ts: agrad.einsum(eq, *ts), ins)


@pytest.mark.parametrize("case", [
    lambda L: L.einsum("...ij->...ji", L.ones(3)),
    lambda L: L.einsum("i...,i...->i", L.ones(2, 3), L.ones(2, 4)),
    lambda L: L.einsum("..i", L.ones(2, 3)),
    lambda L: L.einsum("...i...", L.ones(2, 3)),
    lambda L: L.einsum("ij,jk", L.ones(2, 3), L.ones(4, 2)),
    lambda L: L.einsum("ij", L.ones(3)),
    lambda L: L.einsum("i1", L.ones(3, 2)),
    lambda L: L.einsum("ij->i>", L.ones(3, 2)),
])
def test_einsum_errors_match_torch(case: Callable[[Any], Any]) -> None:
    _same(case)


# -- 10: scatter_add checks as PyTorch's scatter ---------------------------------------


@pytest.mark.parametrize("case", [
    lambda L: L.scatter_add(L.zeros(3, 4), 1, L.zeros(3, 4, dtype=L.long), L.ones(3, 4, dtype=L.float64)),
    lambda L: L.zeros(3, 4).scatter_add_(0, L.zeros(2, 4, dtype=L.long), L.ones(2, 4, dtype=L.float64)),
    lambda L: L.scatter_add(L.zeros(3, 4), 1, L.zeros(3, 4, dtype=L.long), L.ones(4)),
    lambda L: L.scatter_add(L.zeros(3, 4), 1, L.zeros(5, 4, dtype=L.long), L.ones(5, 4)),
    lambda L: L.scatter_add(L.zeros(3, 4), 1, L.zeros(2, 5, dtype=L.long), L.ones(2, 4)),
    lambda L: L.scatter_add(L.zeros(3, 4), 1, L.zeros(2, 4, dtype=L.long), L.ones(2, 4, 3)),
    lambda L: L.scatter_add(L.zeros(3, 4), 1, L.zeros(2, dtype=L.long), L.ones(2, 4)),
    lambda L: L.scatter_add(L.zeros(3, 4), 1, L.full((2, 4), 4, dtype=L.long), L.ones(2, 4)),
    lambda L: L.scatter_add(L.zeros(3, 4), 1, L.zeros(2, 4), L.ones(2, 4)),
    lambda L: L.scatter_add(L.zeros(3, 4), 1, L.zeros(2, 4, dtype=L.long), L.ones(3, 5)),
    lambda L: L.scatter_add(L.zeros(()), 0, L.zeros((), dtype=L.long), L.ones(())),
])
def test_scatter_add_checks_match_torch(case: Callable[[Any], Any]) -> None:
    _same(case)


# -- 11, 12: node names of fills and splits --------------------------------------------


@pytest.mark.parametrize("case", [
    lambda L, x: x.clone().zero_(), lambda L, x: x.clone().fill_(1.0), lambda L, x: x.clone().fill_(L.tensor(1.0)),
    lambda L, x: L.fill(x, 1.0), lambda L, x: L.fill(x, L.tensor(1.0)), lambda L, x: L.zero_(x.clone()),
    lambda L, x: L.fill_(x.clone(), 2),
])
def test_fill_node_names(case: Callable[[Any, Any], Any]) -> None:
    names = [case(L, L.ones(3, requires_grad=True) * 1).grad_fn.name() for L in (agrad, torch)]
    assert names[0] == names[1]


@pytest.mark.parametrize("case", [
    lambda L, x: L.split(x, 2), lambda L, x: L.split(x, [2, 4]), lambda L, x: x.split(4), lambda L, x: L.chunk(x, 3),
    lambda L, x: L.chunk(x, 4), lambda L, x: x.split([6]), lambda L, x: L.split(x[:0], 2),
    lambda L, x: L.chunk(x[:0], 2), lambda L, x: L.split(x.reshape(2, 3), 2, dim=1),
])
def test_split_node_names_and_gradients(case: Callable[[Any, Any], Any]) -> None:
    results = []
    for L in (agrad, torch):
        x = L.tensor(np.arange(6.0), requires_grad=True)
        pieces = case(L, x)
        names = [p.grad_fn.name() for p in pieces]
        loss = sum((p * (i + 1)).sum() for i, p in enumerate(pieces))
        if L is agrad:
            loss.backward_sync()
        else:
            loss.backward()
        results.append((names, [tuple(p.shape) for p in pieces], x.grad.tolist()))
    assert results[0] == results[1]


def test_split_pieces_are_views() -> None:
    x = agrad.tensor(np.arange(6.0))
    a, _ = agrad.split(x, 3)
    a.mul_(2)
    assert x.tolist() == [0.0, 2.0, 4.0, 3.0, 4.0, 5.0]


# -- 9: argsort lives on _sorting's kernel ---------------------------------------------


def test_argsort_entry_moved() -> None:
    import agrad._ops._reductions as reductions
    import agrad._ops._sorting as sorting
    assert "argsort" not in reductions.__all__ and "argsort" in sorting.__all__
    assert agrad.argsort is sorting.argsort
    ties = np.array([[1.0, 2.0, 1.0, np.nan, 1.0], [0.0, 0.0, 3.0, -1.0, 3.0]])
    for kw in ({}, {"descending": True, "stable": True}, {"dim": 0}):
        assert agrad.argsort(agrad.tensor(ties), **kw).tolist() == torch.argsort(
            torch.tensor(ties), **kw, **({} if "stable" in kw else {"stable": True})).tolist()


# -- 13: summing +inf and -inf gradients: NaN, with numpy's warning ---------------------


@pytest.mark.parametrize("rows", [[math.inf, -math.inf], [math.inf, -math.inf, 1.0], [1.0, math.inf, -math.inf]])
def test_accumulating_opposite_infinities_gives_nan(rows: list[float]) -> None:
    # stack routes one gradient per row to x: its buffer sums inf and -inf (and, with
    # three rows, sums into a buffer the engine owns, in place).  PyTorch is silent;
    # agrad keeps numpy's warning, deliberately (docs/differences.md: silencing it
    # would cost every gradient sum).
    x, tx = agrad.tensor([1.0, 2.0], requires_grad=True), torch.tensor([1.0, 2.0], requires_grad=True)
    g = [[r, r] for r in rows]
    with pytest.warns(RuntimeWarning, match="invalid value"):
        agrad.stack([x] * len(rows)).backward_sync(agrad.tensor(g))
    torch.stack([tx] * len(rows)).backward(torch.tensor(g))
    assert np.isnan(x.grad.numpy()).tolist() == np.isnan(tx.grad.numpy()).tolist() == [True, True]


# -- 14: an in-place op whose input is its own target ----------------------------------


@pytest.mark.parametrize("other_requires_grad", [False, True])
@pytest.mark.parametrize("case", [lambda x, y: x.addcmul_(x, y, value=2), lambda x, y: x.addcmul_(y, x)])
def test_addcmul_inplace_on_own_input_as_torch(case: Callable[[Any, Any], Any], other_requires_grad: bool) -> None:
    # PyTorch saves the operand that the other one's gradient needs: with y not
    # requiring grad, x is not saved and the backward completes; otherwise the
    # overwritten x is needed and both libraries refuse it at backward time.
    results = []
    for L in (agrad, torch):
        a = L.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = L.tensor([0.5, -1.0, 2.0], requires_grad=other_requires_grad)
        x = case(a * 1, y)
        try:
            x.sum().backward_sync() if L is agrad else x.sum().backward()
        except RuntimeError as e:
            results.append(str(e).split(":")[0])
        else:
            results.append(a.grad.tolist())
    assert results[0] == results[1]


# -- 7: NaNs from log/sqrt of negative numbers have the sign bit clear ---------------------


@pytest.mark.parametrize("name", ["log", "sqrt", "log2"])  # (torch's log1p and rsqrt NaN signs vary by lane)
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
def test_nan_sign_of_invalid_inputs(name: str, dtype: str) -> None:
    values = [-1.0, -3.5, 0.0, 2.0, -math.inf, math.nan]
    got = getattr(agrad, name)(agrad.tensor(values).to(getattr(agrad, dtype))).numpy()
    want = getattr(torch, name)(torch.tensor(values).to(getattr(torch, dtype))).numpy()
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True)
    assert np.signbit(got).tolist() == np.signbit(want).tolist()
    scalar = getattr(agrad, name)(agrad.tensor(-2.0)).numpy()
    assert np.signbit(scalar) == np.signbit(getattr(torch, name)(torch.tensor(-2.0)).numpy())
