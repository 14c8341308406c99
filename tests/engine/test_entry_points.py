"""Every entry point of the backward, and every argument, against PyTorch.

``Tensor.backward``, ``agrad.autograd.backward`` and ``agrad.autograd.grad``,
each awaited and as its blocking twin (the ``api`` fixture, see
``conftest.py``), with ``gradient``/``grad_tensors``, ``retain_graph``,
``create_graph``, ``inputs``, ``grad_outputs``, ``allow_unused`` and
``materialize_grads``.  Numbers are compared with PyTorch (the oracle) on
small float64 models; where torch is absent the oracle tests skip and the
structural assertions still run.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
from tests.engine._models import assert_close, leaves, mlp_arrays, mlp_logits, mlp_loss, params
from tests.helpers import requires_torch, torch

pytestmark = pytest.mark.anyio

FREED = "Trying to backward through the graph a second time"
CREATE_GRAPH_WARNING = r"Using backward\(\) with create_graph=True will create a reference cycle"


@pytest.fixture
def arrays(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return mlp_arrays(rng)


def vec(*values: float) -> agrad.Tensor:
    return agrad.tensor(list(values), dtype=agrad.float64, requires_grad=True)


# -- plain backward: both spellings, both models, against torch --------------------------------
@requires_torch
@pytest.mark.parametrize("spelling", ["Tensor.backward", "autograd.backward"])
@pytest.mark.parametrize("activation,loss", [("tanh", "cross_entropy"), ("relu", "log_softmax"),
                                             ("sigmoid", "cross_entropy")])
async def test_backward_of_mlp_matches_torch(api, arrays, spelling: str, activation: str, loss: str) -> None:
    p, tp = leaves(agrad, arrays), leaves(torch, arrays)
    out = mlp_loss(agrad, p, activation, loss)
    if spelling == "Tensor.backward":
        await api.tensor_backward(out)
    else:
        await api.backward(out)
    mlp_loss(torch, tp, activation, loss).backward()
    for k in params(p):
        assert_close(p[k].grad, tp[k].grad)
        assert p[k].grad.dtype is agrad.float64
        assert not p[k].grad.requires_grad


async def test_backward_returns_none_and_fills_leaf_grads(api) -> None:
    x = vec(1.0, 2.0, 3.0)
    assert await api.tensor_backward((x * x).sum()) is None
    assert x.grad.tolist() == [2.0, 4.0, 6.0]
    assert x.grad.grad_fn is None


# -- gradient / grad_tensors ---------------------------------------------------------------------
@pytest.mark.parametrize("spelling", ["Tensor.backward(gradient=)", "autograd.backward(grad_tensors=)",
                                      "autograd.backward(grad_tensors as a list)"])
async def test_gradient_of_non_scalar_root(api, spelling: str) -> None:
    x = vec(1.0, 2.0, 3.0)
    y = x * x
    v = agrad.tensor([1.0, 10.0, 100.0], dtype=agrad.float64)
    if spelling == "Tensor.backward(gradient=)":
        await api.tensor_backward(y, gradient=v)
    elif spelling == "autograd.backward(grad_tensors=)":
        await api.backward(y, grad_tensors=v)
    else:
        await api.backward([y], [v])
    assert x.grad.tolist() == [2.0, 40.0, 600.0]
    assert v.tolist() == [1.0, 10.0, 100.0]  # the caller's gradient is not modified


async def test_gradient_of_scalar_root_scales(api) -> None:
    x = vec(1.0, 2.0)
    await api.tensor_backward((x * x).sum(), agrad.tensor(3.0, dtype=agrad.float64))
    assert x.grad.tolist() == [6.0, 12.0]


async def test_supplied_gradient_is_not_aliased_by_grad(api) -> None:
    # The root gradient flows untouched into a leaf's .grad; later accumulation
    # must not write into the caller's tensor.
    x = vec(1.0, 2.0)
    v = agrad.tensor([1.0, 1.0], dtype=agrad.float64)
    await api.tensor_backward(x.clone(), v)
    await api.tensor_backward(x.clone(), v)
    assert x.grad.tolist() == [2.0, 2.0]
    assert v.tolist() == [1.0, 1.0]


# -- retain_graph --------------------------------------------------------------------------------
@pytest.mark.parametrize("retain_graph", [None, False])
async def test_second_backward_without_retain_graph_raises(api, retain_graph) -> None:
    x = vec(1.0, 2.0)
    y = (x * x).sum()
    await api.tensor_backward(y, retain_graph=retain_graph)
    with pytest.raises(RuntimeError, match=FREED):
        await api.tensor_backward(y)
    assert x.grad.tolist() == [2.0, 4.0]


async def test_retain_graph_allows_a_second_backward(api) -> None:
    x = vec(1.0, 2.0)
    y = (x * x.exp()).sum()
    await api.tensor_backward(y, retain_graph=True)
    first = x.grad.clone()
    await api.tensor_backward(y, retain_graph=True)
    await api.tensor_backward(y)  # the last one may free the graph
    np.testing.assert_allclose(x.grad.numpy(), 3 * first.numpy(), rtol=1e-15)
    with pytest.raises(RuntimeError, match=FREED):
        await api.tensor_backward(y)


async def test_grad_with_retain_graph_then_backward(api) -> None:
    x = vec(1.0, 2.0)
    y = (x * x).sum()
    (g,) = await api.grad(y, x, retain_graph=True)
    await api.tensor_backward(y)
    assert g.tolist() == x.grad.tolist() == [2.0, 4.0]


# Graphs whose nodes save no tensor (only sizes, dims, scalars) have nothing to
# free: PyTorch lets them be backpropagated again without retain_graph.
NO_SAVED_TENSORS: dict[str, Callable[[Any], Any]] = {
    "neg": lambda t: -t,
    "add": lambda t: t + t,
    "add scalar": lambda t: t + 1,
    "sub": lambda t: t - 1,
    "sum": lambda t: t.sum(),
    "mean": lambda t: t.mean(),
    "transpose": lambda t: t.reshape(2, 1).transpose(0, 1),
    "expand": lambda t: t.expand(3, 2),
}


@pytest.mark.parametrize("op", list(NO_SAVED_TENSORS))
async def test_graph_without_saved_tensors_can_be_rerun(api, op: str) -> None:
    build = NO_SAVED_TENSORS[op]
    if torch is not None:  # the oracle agrees that this graph can be re-run
        tx = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
        ty = build(tx)
        ty.backward(torch.ones_like(ty))
        ty.backward(torch.ones_like(ty))
    x = vec(1.0, 2.0)
    y = build(x)
    ones = agrad.ones_like(y)
    await api.tensor_backward(y, ones)
    once = x.grad.clone()
    await api.tensor_backward(y, ones)
    assert x.grad.tolist() == (2 * once).tolist()


# -- create_graph --------------------------------------------------------------------------------
@requires_torch
async def test_grad_create_graph_gives_second_order_gradients_matching_torch(api, arrays) -> None:
    p, tp = leaves(agrad, arrays), leaves(torch, arrays)
    names = params(p)

    async def second_order(lib: Any, q: dict[str, Any]) -> list[Any]:
        loss = mlp_loss(lib, q, "tanh")
        inputs = [q[k] for k in names]
        if lib is agrad:
            grads = await api.grad(loss, inputs, create_graph=True)
        else:
            grads = torch.autograd.grad(loss, inputs, create_graph=True)
        assert all(g.requires_grad for g in grads)
        penalty = sum((g * g).sum() for g in grads)
        if lib is agrad:
            return list(await api.grad(penalty, inputs))
        return list(torch.autograd.grad(penalty, inputs))

    for mine, theirs in zip(await second_order(agrad, p), await second_order(torch, tp)):
        assert_close(mine, theirs, rtol=1e-9)
    assert all(p[k].grad is None for k in names)


async def test_grad_without_create_graph_returns_constants(api) -> None:
    x = vec(1.0, 2.0)
    (g,) = await api.grad((x * x).sum(), x)
    assert not g.requires_grad and g.grad_fn is None


@requires_torch
async def test_backward_create_graph_warns_and_records_the_gradient(api) -> None:
    x = vec(0.5, -1.0, 2.0)
    tx = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64, requires_grad=True)
    with pytest.warns(UserWarning, match=CREATE_GRAPH_WARNING):
        await api.tensor_backward((x.tanh() * x).sum(), create_graph=True)
    with warnings.catch_warnings():
        # torch emits this warning once per process (TORCH_WARN_ONCE); agrad on every call.
        warnings.simplefilter("ignore", UserWarning)
        (tx.tanh() * tx).sum().backward(create_graph=True)
    assert x.grad.requires_grad and x.grad.grad_fn is not None
    assert_close(x.grad, tx.grad)
    # Differentiate the recorded gradient: d/dx sum(d/dx (x tanh x)).
    (hess_diag,) = await api.grad(x.grad.sum(), x)
    (t_hess_diag,) = torch.autograd.grad(tx.grad.sum(), tx)
    assert_close(hess_diag, t_hess_diag)


async def test_create_graph_keeps_the_graph_by_default(api) -> None:
    x = vec(1.0, 2.0)
    y = (x * x * x).sum()
    (g,) = await api.grad(y, x, create_graph=True)
    (again,) = await api.grad(y, x)  # retain_graph defaulted to create_graph=True
    assert g.tolist() == again.tolist() == [3.0, 12.0]


async def test_autograd_backward_create_graph_warns(api) -> None:
    x = vec(1.0, 2.0)
    with pytest.warns(UserWarning, match=CREATE_GRAPH_WARNING):
        await api.backward([(x * x).sum()], create_graph=True)
    assert x.grad.tolist() == [2.0, 4.0] and x.grad.requires_grad


# -- inputs= on backward -----------------------------------------------------------------------
@requires_torch
@pytest.mark.parametrize("chosen", [["w0"], ["b1"], ["w0", "b1"], ["w1", "w0", "b0", "b1"]])
async def test_backward_inputs_accumulates_only_into_the_listed_leaves(api, arrays, chosen: list[str]) -> None:
    p, tp = leaves(agrad, arrays), leaves(torch, arrays)
    await api.tensor_backward(mlp_loss(agrad, p), inputs=[p[k] for k in chosen])
    mlp_loss(torch, tp).backward(inputs=[tp[k] for k in chosen])
    for k in params(p):
        if k in chosen:
            assert_close(p[k].grad, tp[k].grad)
        else:
            assert p[k].grad is None and tp[k].grad is None


@requires_torch
@pytest.mark.parametrize("with_leaf", [False, True], ids=["non-leaf only", "non-leaf and leaf"])
async def test_backward_inputs_on_a_non_leaf_fills_its_grad(api, arrays, with_leaf: bool) -> None:
    p, tp = leaves(agrad, arrays), leaves(torch, arrays)
    h, th = agrad.tanh(mlp_logits(agrad, p)), torch.tanh(mlp_logits(torch, tp))
    assert not h.retains_grad
    extra, t_extra = ([p["w1"]], [tp["w1"]]) if with_leaf else ([], [])
    await api.tensor_backward((h * h).sum(), inputs=[h, *extra])
    (th * th).sum().backward(inputs=[th, *t_extra])
    assert h.retains_grad and th.retains_grad
    assert_close(h.grad, th.grad)
    for k in params(p):
        if with_leaf and k == "w1":
            assert_close(p[k].grad, tp[k].grad)
        else:
            assert p[k].grad is None


async def test_backward_inputs_may_be_a_single_tensor(api) -> None:
    x, y = vec(1.0, 2.0), vec(3.0, 4.0)
    await api.backward([(x * y).sum()], inputs=x)
    assert x.grad.tolist() == [3.0, 4.0]
    assert y.grad is None


async def test_backward_inputs_skips_the_rest_of_the_graph(api) -> None:
    # Nothing outside the paths to ``inputs`` runs: a hook beside them never fires.
    x, y = vec(1.0, 2.0), vec(3.0, 4.0)
    fired = []
    y.register_hook(lambda g: fired.append(g))
    await api.tensor_backward((x * 2 + y * 3).sum(), inputs=[x])
    assert fired == [] and y.grad is None
    assert x.grad.tolist() == [2.0, 2.0]


# -- grad() ------------------------------------------------------------------------------------
@requires_torch
async def test_grad_of_mlp_matches_torch_and_leaves_grad_alone(api, arrays) -> None:
    p, tp = leaves(agrad, arrays), leaves(torch, arrays)
    names = params(p)
    before = agrad.ones_like(p["w0"])
    p["w0"].grad = before
    grads = await api.grad(mlp_loss(agrad, p, "relu"), [p[k] for k in names])
    t_grads = torch.autograd.grad(mlp_loss(torch, tp, "relu"), [tp[k] for k in names])
    assert len(grads) == len(names) and isinstance(grads, tuple)
    for g, tg in zip(grads, t_grads):
        assert_close(g, tg)
    assert p["w0"].grad is before and before.tolist() == agrad.ones_like(p["w0"]).tolist()
    assert all(p[k].grad is None for k in names if k != "w0")


async def test_grad_accepts_a_single_tensor_and_returns_a_tuple(api) -> None:
    x = vec(1.0, 2.0)
    result = await api.grad((x * x).sum(), x)
    assert isinstance(result, tuple) and len(result) == 1
    assert result[0].tolist() == [2.0, 4.0]


@requires_torch
async def test_grad_outputs_of_non_scalar_outputs(api, rng) -> None:
    a, b = rng.standard_normal(3), rng.standard_normal((2, 3))
    ga, gb = rng.standard_normal(3), rng.standard_normal(2)
    x, y = agrad.tensor(a, requires_grad=True), agrad.tensor(b, requires_grad=True)
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    outs = [agrad.tanh(x) * 2, (y * x).sum(dim=1)]
    t_outs = [torch.tanh(tx) * 2, (ty * tx).sum(dim=1)]
    got = await api.grad(outs, [x, y], [agrad.tensor(ga), agrad.tensor(gb)])
    want = torch.autograd.grad(t_outs, [tx, ty], [torch.tensor(ga), torch.tensor(gb)])
    for g, w in zip(got, want):
        assert_close(g, w)


async def test_grad_allow_unused_returns_none(api) -> None:
    x, unused = vec(1.0, 2.0), vec(5.0)
    gx, gu = await api.grad((x * x).sum(), [x, unused], allow_unused=True)
    assert gx.tolist() == [2.0, 4.0]
    assert gu is None


@pytest.mark.parametrize("allow_unused", [None, True], ids=["allow_unused=None", "allow_unused=True"])
async def test_grad_materialize_grads_returns_zeros(api, allow_unused) -> None:
    x = vec(1.0, 2.0)
    unused = agrad.zeros(3, dtype=agrad.float32, requires_grad=True)
    gx, gu = await api.grad((x * x).sum(), [x, unused], allow_unused=allow_unused, materialize_grads=True)
    assert gx.tolist() == [2.0, 4.0]
    assert gu.tolist() == [0.0, 0.0, 0.0]
    assert gu.shape == (3,) and gu.dtype is agrad.float32


@requires_torch
async def test_grad_wrt_intermediate_tensors(api, arrays) -> None:
    p, tp = leaves(agrad, arrays), leaves(torch, arrays)
    logits, t_logits = mlp_logits(agrad, p), mlp_logits(torch, tp)
    loss = agrad.nn.functional.cross_entropy(logits, p["target"])
    t_loss = torch.nn.functional.cross_entropy(t_logits, tp["target"])
    g_logits, g_w0 = await api.grad(loss, [logits, p["w0"]])
    tg_logits, tg_w0 = torch.autograd.grad(t_loss, [t_logits, tp["w0"]])
    assert_close(g_logits, tg_logits)
    assert_close(g_w0, tg_w0)
    assert p["w0"].grad is None


async def test_grad_wrt_an_intermediate_does_not_run_below_it(api) -> None:
    x = vec(1.0, 2.0)
    fired = []
    x.register_hook(lambda g: fired.append(g))
    h = x * 3
    (gh,) = await api.grad((h * h).sum(), h)
    assert gh.tolist() == [6.0, 12.0]
    assert fired == []


# -- several roots -----------------------------------------------------------------------------
@requires_torch
async def test_backward_of_several_roots_sums_their_gradients(api, arrays) -> None:
    p, tp = leaves(agrad, arrays), leaves(torch, arrays)
    logits, t_logits = mlp_logits(agrad, p), mlp_logits(torch, tp)
    roots = [agrad.nn.functional.cross_entropy(logits, p["target"]), logits.tanh()]
    t_roots = [torch.nn.functional.cross_entropy(t_logits, tp["target"]), t_logits.tanh()]
    weight = np.linspace(-1.0, 1.0, logits.numel()).reshape(logits.shape)
    await api.backward(roots, [None, agrad.tensor(weight)])
    torch.autograd.backward(t_roots, [None, torch.tensor(weight)])
    for k in params(p):
        assert_close(p[k].grad, tp[k].grad)


async def test_several_roots_on_disjoint_graphs(api) -> None:
    x, y = vec(1.0, 2.0), vec(3.0)
    await api.backward([(x * x).sum(), (y * 4).sum()])
    assert x.grad.tolist() == [2.0, 4.0] and y.grad.tolist() == [4.0]


async def test_grad_of_several_outputs_through_one_input(api) -> None:
    x = vec(1.0, 2.0)
    (g,) = await api.grad([(x * x).sum(), (x * 3).sum(), x.sum()], x)
    assert g.tolist() == [6.0, 8.0]


async def test_same_root_twice_counts_twice(api) -> None:
    x = vec(1.0, 2.0)
    y = (x * x).sum()
    await api.backward([y, y])
    if torch is not None:
        tx = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
        ty = (tx * tx).sum()
        torch.autograd.backward([ty, ty])
        assert tx.grad.tolist() == [4.0, 8.0]
    assert x.grad.tolist() == [4.0, 8.0]


# -- accumulation --------------------------------------------------------------------------------
async def test_gradients_accumulate_across_calls(api) -> None:
    x = vec(1.0, 2.0)
    await api.tensor_backward((x * x).sum())
    first = x.grad
    await api.tensor_backward((x * 3).sum())
    await api.backward([(x * x * x).sum()])
    assert x.grad.tolist() == [2 + 3 + 3, 4 + 3 + 12]
    assert first is x.grad  # accumulated in place, as torch does without create_graph
    x.grad = None
    await api.tensor_backward(x.sum())
    assert x.grad.tolist() == [1.0, 1.0]


async def test_accumulates_into_a_user_assigned_grad(api) -> None:
    x = vec(1.0, 2.0)
    x.grad = agrad.tensor([10.0, 20.0], dtype=agrad.float64)
    await api.tensor_backward((x * x).sum())
    assert x.grad.tolist() == [12.0, 24.0]


async def test_leaf_used_twice_in_one_backward_gets_the_sum(api) -> None:
    x = vec(1.0, 2.0)
    await api.tensor_backward((x * 2).sum() + (x * 5).sum() + (x * x).sum())
    assert x.grad.tolist() == [9.0, 11.0]


async def test_grad_does_not_touch_grad_of_leaves(api) -> None:
    x, y = vec(1.0, 2.0), vec(3.0, 4.0)
    y.grad = agrad.tensor([7.0, 7.0], dtype=agrad.float64)
    (gx, gy) = await api.grad((x * y).sum(), [x, y])
    assert (gx.tolist(), gy.tolist()) == ([3.0, 4.0], [1.0, 2.0])
    assert x.grad is None
    assert y.grad.tolist() == [7.0, 7.0]
