"""PyTorch's autograd API semantics where agrad differed (issue 14), checked against torch."""

from __future__ import annotations

import pytest

import agrad
from tests.helpers import requires_torch, torch


def _doubler(lib, calls):
    class Double(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            calls.append(1)
            return g * 2

    return Double


# -- item 7: grad() prunes nodes on no path to its inputs ----------------------
@requires_torch
@pytest.mark.anyio
async def test_grad_prunes_a_lone_root_unrelated_to_inputs():
    results = {}
    for lib in (torch, agrad):
        calls: list[int] = []
        a = lib.ones(3, requires_grad=True)
        b = lib.ones(3, requires_grad=True)
        y = _doubler(lib, calls).apply(a)
        args = (y, [b])
        kwargs = dict(grad_outputs=[lib.ones(3)], allow_unused=True)
        got = lib.autograd.grad(*args, **kwargs) if lib is torch else await lib.autograd.grad(*args, **kwargs)
        results[lib] = (got, len(calls))
    assert results[agrad] == results[torch] == ((None,), 0)


@requires_torch
@pytest.mark.anyio
async def test_grad_prunes_a_function_beside_the_inputs():
    for lib in (torch, agrad):
        calls: list[int] = []
        a = lib.ones(3, requires_grad=True)
        b = lib.ones(3, requires_grad=True)
        h = b * 2
        out = (_doubler(lib, calls).apply(a) * h).sum()
        (g,) = lib.autograd.grad(out, [h]) if lib is torch else await lib.autograd.grad(out, [h])
        assert g.tolist() == [2.0, 2.0, 2.0]
        assert calls == []


# -- item 8: materialize_grads with create_graph --------------------------------
@requires_torch
@pytest.mark.parametrize("create_graph", [False, True])
def test_materialized_zeros_require_grad_under_create_graph(create_graph):
    a, b = agrad.ones(2, requires_grad=True), agrad.ones(2, requires_grad=True)
    ta, tb = torch.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    got = agrad.autograd.grad_sync((a * 2).sum(), [a, b], create_graph=create_graph, materialize_grads=True)
    want = torch.autograd.grad((ta * 2).sum(), [ta, tb], create_graph=create_graph, materialize_grads=True)
    assert [g.tolist() for g in got] == [w.tolist() for w in want]
    assert [g.requires_grad for g in got] == [w.requires_grad for w in want]
    assert got[1].is_leaf == want[1].is_leaf
