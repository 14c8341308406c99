"""``agrad.autograd.functional`` (vjp, jacobian, hessian) against
``torch.autograd.functional``: async on every backend, and the sync twins."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import agrad
from agrad.autograd import functional as F
from tests.helpers import requires_torch, torch

pytestmark = [pytest.mark.anyio, requires_torch]

RNG = np.random.default_rng(0)
A, B = RNG.standard_normal((3,)), RNG.standard_normal((2, 3))


def _lib(lib: Any) -> Any:
    return lib


def _f_single(lib: Any) -> Any:
    return lambda x: (x ** 3).sum() + (x[0] * x[1])


def _f_vec(lib: Any) -> Any:
    return lambda x: lib.exp(x) * x.sum()


def _f_multi(lib: Any) -> Any:
    return lambda x, w: (w @ x, (x * x).sum())


def _f_scalar_two(lib: Any) -> Any:
    return lambda x, w: ((w @ x) ** 2).sum()


def _ours(arrays: tuple) -> tuple:
    return tuple(agrad.tensor(a) for a in arrays)


def _theirs(arrays: tuple) -> tuple:
    return tuple(torch.tensor(a) for a in arrays)


def _assert_same(ours: Any, theirs: Any) -> None:
    if isinstance(theirs, tuple):
        assert isinstance(ours, tuple) and len(ours) == len(theirs)
        for o, t in zip(ours, theirs):
            _assert_same(o, t)
        return
    assert isinstance(ours, agrad.Tensor)
    assert ours.shape == tuple(theirs.shape)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-10, atol=1e-12)


CASES = {
    "vjp-scalar": ("vjp", _f_single, (A,), None, False),
    "vjp-vector": ("vjp", _f_vec, (A,), (RNG.standard_normal(3),), False),
    "vjp-tuple": ("vjp", _f_multi, (A, B), (RNG.standard_normal(2), np.array(1.5)), True),
    "jacobian-single": ("jacobian", _f_vec, (A,), None, False),
    "jacobian-tuple-in": ("jacobian", _f_scalar_two, (A, B), None, True),
    "jacobian-tuple-out": ("jacobian", _f_multi, (A, B), None, True),
    "hessian-single": ("hessian", _f_single, (A,), None, False),
    "hessian-tuple": ("hessian", _f_scalar_two, (A, B), None, True),
}


def _args(kind: str, make: Any, arrays: tuple, v: Any, as_tuple: bool, lib: Any, conv: Any) -> tuple:
    inputs = conv(arrays) if as_tuple else conv(arrays)[0]
    args: tuple = (make(lib), inputs)
    if kind == "vjp" and v is not None:
        vs = conv(v)
        args += (vs if len(vs) > 1 else vs[0],)
    return args


def _expected(name: str) -> Any:
    kind, make, arrays, v, as_tuple = CASES[name]
    return getattr(torch.autograd.functional, kind)(*_args(kind, make, arrays, v, as_tuple, torch, _theirs))


@pytest.mark.parametrize("name", list(CASES))
async def test_async_matches_torch(name: str) -> None:
    kind, make, arrays, v, as_tuple = CASES[name]
    out = await getattr(F, kind)(*_args(kind, make, arrays, v, as_tuple, agrad, _ours))
    _assert_same(out, _expected(name))


@pytest.mark.parametrize("name", list(CASES))
def test_sync_matches_torch(name: str) -> None:
    kind, make, arrays, v, as_tuple = CASES[name]
    out = getattr(F, kind + "_sync")(*_args(kind, make, arrays, v, as_tuple, agrad, _ours))
    _assert_same(out, _expected(name))


def test_results_are_detached_without_create_graph() -> None:
    x = agrad.tensor(A, requires_grad=True)
    out, g = F.vjp_sync(_f_single(agrad), x)
    assert not out.requires_grad and not g.requires_grad
    assert not F.hessian_sync(_f_single(agrad), x).requires_grad


@pytest.mark.filterwarnings("ignore::agrad.BlockingCallWarning")  # a blocking twin on the loop, on purpose
async def test_create_graph_allows_differentiating_the_result() -> None:
    x = agrad.tensor(A, requires_grad=True)
    _, g = await F.vjp(_f_single(agrad), x, create_graph=True)
    assert g.requires_grad
    (h,) = await agrad.autograd.grad(g.sum(), x)
    tx = torch.tensor(A, requires_grad=True)
    _, tg = torch.autograd.functional.vjp(_f_single(torch), tx, create_graph=True)
    (th,) = torch.autograd.grad(tg.sum(), tx)
    np.testing.assert_allclose(h.numpy(), th.numpy(), rtol=1e-10)
    jac = F.jacobian_sync(_f_vec(agrad), x, create_graph=True)
    assert jac.requires_grad


def test_unused_input_gives_zeros_or_raises_in_strict_mode() -> None:
    f = lambda x, y: x * 2.0  # noqa: E731
    ins = (agrad.tensor(A), agrad.tensor(A))
    jac = F.jacobian_sync(f, ins)
    np.testing.assert_array_equal(jac[1].numpy(), np.zeros((3, 3)))
    with pytest.raises(RuntimeError, match="independent"):
        F.jacobian_sync(f, ins, strict=True)
    _, grads = F.vjp_sync(lambda x, y: (x * 2.0).sum(), ins)
    np.testing.assert_array_equal(grads[1].numpy(), np.zeros(3))


def test_errors() -> None:
    x = agrad.tensor(A)
    with pytest.raises(RuntimeError, match="single element"):
        F.vjp_sync(lambda t: t * 2.0, x)
    with pytest.raises(RuntimeError, match="single element"):
        F.hessian_sync(lambda t: t * 2.0, x)
    with pytest.raises(TypeError):
        F.jacobian_sync(lambda t: t, [1.0])
