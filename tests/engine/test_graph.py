"""The recorded graph: ``grad_fn``, ``next_functions``, AccumulateGrad, sequence and
topological numbers, saved-tensor release, and node names (against PyTorch's).
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
from tests.helpers import requires_torch, torch

pytestmark = pytest.mark.anyio

ACCUMULATE_GRAD = "agrad::autograd::AccumulateGrad"
FREED = "Trying to backward through the graph a second time"


def vec(lib: Any, *values: float, requires_grad: bool = True) -> Any:
    return lib.tensor(list(values), dtype=lib.float64, requires_grad=requires_grad)


def describe(fn: Any) -> Any:
    """A node and everything below it as nested (name, input_nr) tuples, library-neutral."""
    if fn is None:
        return None
    name = fn.name().replace("torch::", "agrad::")
    if name == ACCUMULATE_GRAD:
        return name
    return (name, tuple((describe(f), nr) for f, nr in fn.next_functions))


# -- structure ----------------------------------------------------------------------------------
STRUCTURES: dict[str, Callable[[Any, Any, Any, Any], Any]] = {
    "leaf * leaf": lambda lib, x, y, c: x * y,
    "leaf * constant tensor": lambda lib, x, y, c: x * c,
    "constant tensor * leaf": lambda lib, x, y, c: c * x,
    "leaf * python number": lambda lib, x, y, c: x * 2.0,
    "chain": lambda lib, x, y, c: ((x * y).exp() + x).sum(),
    "same input twice": lambda lib, x, y, c: x * x,
    "mixed": lambda lib, x, y, c: lib.tanh(x.reshape(1, 2) @ y.reshape(2, 1).expand(2, 3)).mean() * c.sum(),
}


@requires_torch
@pytest.mark.parametrize("case", list(STRUCTURES))
def test_next_functions_match_torch(case: str) -> None:
    build = STRUCTURES[case]
    mine = build(agrad, vec(agrad, 1.0, 2.0), vec(agrad, 3.0, 4.0), vec(agrad, 5.0, 6.0, requires_grad=False))
    theirs = build(torch, vec(torch, 1.0, 2.0), vec(torch, 3.0, 4.0), vec(torch, 5.0, 6.0, requires_grad=False))
    assert describe(mine.grad_fn) == describe(theirs.grad_fn)


def test_next_functions_entries() -> None:
    x, y = vec(agrad, 1.0, 2.0), vec(agrad, 3.0, 4.0)
    c = vec(agrad, 5.0, 6.0, requires_grad=False)
    a = x * y
    (fx, nx), (fy, ny) = a.grad_fn.next_functions
    assert fx.name() == fy.name() == ACCUMULATE_GRAD and nx == ny == 0
    assert fx.variable is x and fy.variable is y
    assert (x * c).grad_fn.next_functions[1] == (None, 0)
    assert (c * x).grad_fn.next_functions[0] == (None, 0)
    assert (x * 2.0).grad_fn.next_functions[1] == (None, 0)
    s = a.sum()
    assert s.grad_fn.next_functions == ((a.grad_fn, 0),)
    assert isinstance(s.grad_fn, agrad.autograd.graph.Node)
    assert s.grad_fn.metadata == {}


def test_leaves_and_non_leaves() -> None:
    x = vec(agrad, 1.0, 2.0)
    c = vec(agrad, 1.0, 2.0, requires_grad=False)
    assert x.is_leaf and x.grad_fn is None and x.requires_grad
    y = x * 2
    assert not y.is_leaf and y.grad_fn is not None and y.requires_grad and y.output_nr == 0
    z = c * 2  # no input requires grad: nothing recorded
    assert z.is_leaf and z.grad_fn is None and not z.requires_grad
    d = y.detach()
    assert d.is_leaf and d.grad_fn is None and not d.requires_grad
    assert d.tolist() == y.tolist()


def test_output_nr_of_a_multi_output_function() -> None:
    class Split(agrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            return g1 * 2 + g2 * 3

    x = vec(agrad, 1.0, 2.0)
    first, second = Split.apply(x)
    assert first.grad_fn is second.grad_fn
    assert (first.output_nr, second.output_nr) == (0, 1)
    assert (first * second).grad_fn.next_functions == ((first.grad_fn, 0), (first.grad_fn, 1))


@requires_torch
def test_calling_a_node_directly_matches_torch() -> None:
    x, y = vec(agrad, 1.0, 2.0), vec(agrad, 3.0, 4.0)
    tx, ty = vec(torch, 1.0, 2.0), vec(torch, 3.0, 4.0)
    mine = (x * y).grad_fn(agrad.ones(2, dtype=agrad.float64))
    theirs = (tx * ty).grad_fn(torch.ones(2, dtype=torch.float64))
    assert [m.tolist() for m in mine] == [t.tolist() for t in theirs] == [[3.0, 4.0], [1.0, 2.0]]


# -- AccumulateGrad ------------------------------------------------------------------------------
def test_accumulate_grad_is_cached_while_alive() -> None:
    x = vec(agrad, 1.0, 2.0)
    e, f = x * 2, x.exp()
    acc = e.grad_fn.next_functions[0][0]
    assert acc.name() == ACCUMULATE_GRAD
    assert f.grad_fn.next_functions[0][0] is acc
    assert acc.topological_nr == 0
    if torch is not None:
        tx = vec(torch, 1.0, 2.0)
        assert (tx * 2).grad_fn.next_functions[0][0] is (tx * 3).grad_fn.next_functions[0][0]


def test_accumulate_grad_is_cached_weakly() -> None:
    # The leaf does not keep its node alive: once no graph uses it, it goes away,
    # and the next graph gets a fresh one that works the same.
    x = vec(agrad, 1.0, 2.0)
    ref = weakref.ref((x * 2).grad_fn.next_functions[0][0])
    gc.collect()
    assert ref() is None
    y = (x * 3).sum()
    y.backward_sync()
    assert x.grad.tolist() == [3.0, 3.0]


# -- numbering ------------------------------------------------------------------------------------
def test_sequence_nr_increases_in_creation_order() -> None:
    x, y = vec(agrad, 1.0, 2.0), vec(agrad, 3.0, 4.0)
    a = x * y
    b = a.exp()
    c = b + x
    d = c * a
    numbers = [t.grad_fn.sequence_nr for t in (a, b, c, d)]
    assert numbers == sorted(numbers) and len(set(numbers)) == 4
    if torch is not None:
        tx, ty = vec(torch, 1.0, 2.0), vec(torch, 3.0, 4.0)
        ta = tx * ty
        tb = ta.exp()
        assert ta.grad_fn._sequence_nr() < tb.grad_fn._sequence_nr()


def test_topological_nr_is_the_longest_path_to_a_leaf() -> None:
    x, y = vec(agrad, 1.0, 2.0), vec(agrad, 3.0, 4.0)
    c = vec(agrad, 1.0, 1.0, requires_grad=False)
    a = x * y          # 1
    b = a.exp()        # 2
    s = b + x          # 3 (the longest path wins over the direct edge to x)
    d = s * a          # 4
    e = (x * c) * 2.0  # 2; inputs not requiring grad do not count
    assert [t.grad_fn.topological_nr for t in (a, b, s, d, e)] == [1, 2, 3, 4, 2]
    assert (x * c).grad_fn.topological_nr == 1


# -- saved tensors --------------------------------------------------------------------------------
async def test_saved_tensors_are_released_after_backward(api) -> None:
    x = vec(agrad, 1.0, 2.0)
    y = (x * x).exp().sum()
    await api.tensor_backward(y)
    with pytest.raises(RuntimeError, match=FREED):
        await api.tensor_backward(y)
    with pytest.raises(RuntimeError, match=FREED):
        await api.grad(y, x)


async def test_retain_graph_keeps_saved_tensors_until_a_backward_without_it(api) -> None:
    x = vec(agrad, 1.0, 2.0)
    y = (x * x).exp().sum()
    (g1,) = await api.grad(y, x, retain_graph=True)
    (g2,) = await api.grad(y, x, retain_graph=True)
    await api.tensor_backward(y)
    assert g1.tolist() == g2.tolist() == x.grad.tolist()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.array([1.0, 2.0]) * np.exp([1.0, 4.0]))
    with pytest.raises(RuntimeError, match=FREED):
        await api.tensor_backward(y)


async def test_backward_with_inputs_frees_only_what_it_ran(api) -> None:
    # Nodes skipped by ``inputs=`` keep their saved tensors, as in torch: the
    # part of the graph leading only to ``w`` is still usable.
    x, w = vec(agrad, 1.0, 2.0), vec(agrad, 3.0, 4.0)
    h = x.exp()
    y = (h * w.exp()).sum()
    await api.tensor_backward(y, inputs=[x], retain_graph=False)
    if torch is not None:
        tx, tw = vec(torch, 1.0, 2.0), vec(torch, 3.0, 4.0)
        ty = (tx.exp() * tw.exp()).sum()
        ty.backward(inputs=[tx])
        with pytest.raises(RuntimeError, match=FREED):
            ty.backward(inputs=[tw])  # MulBackward0 ran and freed its saved tensors
    with pytest.raises(RuntimeError, match=FREED):
        await api.tensor_backward(y, inputs=[w])


# -- node names -----------------------------------------------------------------------------------
OPS: dict[str, Callable[[Any, Any], Any]] = {
    "add": lambda lib, t: t + t,
    "add scalar": lambda lib, t: t + 1.0,
    "mul": lambda lib, t: t * t,
    "mul scalar": lambda lib, t: t * 2.0,
    "sub": lambda lib, t: t - t.exp(),
    "div": lambda lib, t: t / t.exp(),
    "div scalar": lambda lib, t: t / 2.0,
    "neg": lambda lib, t: -t,
    "exp": lambda lib, t: lib.exp(t),
    "log": lambda lib, t: lib.log(t),
    "tanh": lambda lib, t: lib.tanh(t),
    "sigmoid": lambda lib, t: lib.sigmoid(t),
    "relu": lambda lib, t: lib.relu(t),
    "sum": lambda lib, t: t.sum(),
    "sum(dim)": lambda lib, t: t.sum(dim=1),
    "mean": lambda lib, t: t.mean(),
    "mean(dim)": lambda lib, t: t.mean(dim=0),
    "transpose": lambda lib, t: t.transpose(0, 1),
    "expand": lambda lib, t: t[:1].expand(3, 2),
    "log_softmax": lambda lib, t: lib.log_softmax(t, dim=1),
    "matmul": lambda lib, t: t @ t.transpose(0, 1),
}


@requires_torch
@pytest.mark.parametrize("op", list(OPS))
def test_node_names_match_torch(op: str) -> None:
    data = np.array([[1.0, 2.0], [3.0, 4.0], [0.5, 1.5]])
    mine = OPS[op](agrad, agrad.tensor(data, requires_grad=True))
    theirs = OPS[op](torch, torch.tensor(data, requires_grad=True))
    assert mine.grad_fn.name() == theirs.grad_fn.name()
    assert repr(mine.grad_fn).startswith(f"<{theirs.grad_fn.name()} object at ")
