"""Shape and indexing ops against PyTorch beyond the op table's samples:
accumulation of repeated indices, cat/stack promotion and errors, split/chunk
outputs and partial use, negative dims, composites (flatten, tile, narrow,
pad), and a hypothesis round trip of permutations and flips."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agrad
from agrad._ops._shape import _pad
from agrad.autograd import gradcheck, gradgradcheck
from tests.helpers import requires_torch, torch

pytestmark = requires_torch

RNG = np.random.default_rng(0)


def _pair(a: np.ndarray, requires_grad: bool = True) -> tuple[Any, Any]:
    return (agrad.tensor(a, requires_grad=requires_grad),
            torch.tensor(a, requires_grad=requires_grad) if a.dtype.kind == "f" else torch.tensor(a))


def _close(mine: Any, ref: Any) -> None:
    assert mine.shape == tuple(ref.shape)
    assert mine.dtype.name == str(ref.dtype).removeprefix("torch.")
    np.testing.assert_allclose(mine.detach().numpy(), ref.detach().numpy(), rtol=1e-12, atol=1e-12)


def _check_grads(fn_a: Callable[..., Any], fn_t: Callable[..., Any], *arrays: np.ndarray) -> None:
    """Value and gradients of a scalar-valued function of ``arrays`` match PyTorch."""
    pairs = [_pair(a) for a in arrays]
    out_a = fn_a(*[p[0] for p in pairs])
    out_t = fn_t(*[p[1] for p in pairs])
    _close(out_a, out_t)
    out_a.backward_sync()
    out_t.backward()
    for a, t in pairs:
        _close(a.grad, t.grad)


# -- repeated indices accumulate -------------------------------------------------


def test_gather_repeated_indices_accumulate() -> None:
    x = RNG.standard_normal((3, 4))
    idx = np.array([[0, 0, 0, 3], [1, 1, 2, 2], [3, 3, 3, 3]])
    w = RNG.standard_normal((3, 4))
    _check_grads(lambda a: (a.gather(1, agrad.tensor(idx)) * agrad.tensor(w)).sum(),
                 lambda t: (t.gather(1, torch.tensor(idx)) * torch.tensor(w)).sum(), x)


def test_index_select_repeated_indices_accumulate() -> None:
    x = RNG.standard_normal((4, 3))
    idx = np.array([2, 2, 0, 2])
    w = RNG.standard_normal((4, 4))
    _check_grads(lambda a: (agrad.index_select(a, -1 + 1, agrad.tensor(idx)).T @ agrad.tensor(w)).sum(),
                 lambda t: (torch.index_select(t, 0, torch.tensor(idx)).T @ torch.tensor(w)).sum(), x)
    _check_grads(lambda a: (a.index_select(-1, agrad.tensor(np.array([1, 1, 1]))) ** 2).sum(),
                 lambda t: (t.index_select(-1, torch.tensor([1, 1, 1])) ** 2).sum(), x)


def test_getitem_repeated_indices_accumulate() -> None:
    x = RNG.standard_normal((4, 3))
    idx = np.array([1, 1, 3, 1])
    _check_grads(lambda a: (a[agrad.tensor(idx)] ** 2).sum(), lambda t: (t[torch.tensor(idx)] ** 2).sum(), x)


def test_scatter_add_grads_and_repeats() -> None:
    x, src = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
    idx = np.array([[0, 0, 0, 1], [3, 3, 3, 3], [2, 1, 2, 1]])
    _check_grads(lambda a, s: (a.scatter_add(1, agrad.tensor(idx), s) ** 2).sum(),
                 lambda t, s: (t.scatter_add(1, torch.tensor(idx), s) ** 2).sum(), x, src)


def test_scatter_add_inplace_and_gather_gradgrad() -> None:
    y = agrad.zeros(3, 4, dtype=agrad.float64)
    y.scatter_add_(0, agrad.tensor(np.array([[0, 1, 1, 2]])), agrad.ones(1, 4, dtype=agrad.float64))
    assert y.tolist() == torch.zeros(3, 4, dtype=torch.float64).scatter_add_(
        0, torch.tensor([[0, 1, 1, 2]]), torch.ones(1, 4, dtype=torch.float64)).tolist()
    x = agrad.tensor(RNG.standard_normal((3, 4)), requires_grad=True)
    idx = agrad.tensor(np.array([[0, 0], [3, 3], [1, 1]]))
    assert gradgradcheck(lambda a: a.gather(1, idx) ** 2, [x])


def test_gather_grad_fn_name() -> None:
    x = agrad.tensor(RNG.standard_normal((3, 4)), requires_grad=True)
    assert type(x.gather(0, agrad.tensor(np.array([[0, 1, 2, 0]]))).grad_fn).__name__ == "GatherBackward0"


# -- cat / stack ------------------------------------------------------------------


@pytest.mark.parametrize("fn", ["cat", "stack"])
@pytest.mark.parametrize(("da", "db"), [("float32", "float64"), ("int64", "float32"), ("int32", "int64"),
                                        ("bool", "int32"), ("float16", "int64")])
def test_cat_stack_type_promotion(fn: str, da: str, db: str) -> None:
    a, b = np.arange(6).reshape(2, 3), np.arange(6, 12).reshape(2, 3)
    ours = getattr(agrad, fn)([agrad.tensor(a).to(getattr(agrad, da)), agrad.tensor(b).to(getattr(agrad, db))])
    theirs = getattr(torch, fn)([torch.tensor(a).to(getattr(torch, da)), torch.tensor(b).to(getattr(torch, db))])
    _close(ours, theirs)


def test_cat_mixed_dtypes_gradients_keep_input_dtype() -> None:
    a = agrad.ones(2, dtype=agrad.float32, requires_grad=True)
    b = agrad.ones(3, dtype=agrad.float64, requires_grad=True)
    out = agrad.cat([a, b])
    assert out.dtype is agrad.float64
    out.sum().backward_sync()
    assert a.grad.dtype is agrad.float32 and b.grad.dtype is agrad.float64


def _errors(fn_a: Callable[[], Any], fn_t: Callable[[], Any]) -> None:
    with pytest.raises(Exception) as theirs:
        fn_t()
    with pytest.raises(type(theirs.value)) as ours:
        fn_a()
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("shapes,dim", [([(2, 3), (2, 4)], 0), ([(2, 3), (3,)], 0), ([(2, 3)], 2),
                                        ([(2, 3), (2, 3)], -3), ([()], 0), ([(), ()], 0)])
def test_cat_errors_match_torch(shapes: list[tuple[int, ...]], dim: int) -> None:
    _errors(lambda: agrad.cat([agrad.zeros(s) for s in shapes], dim),
            lambda: torch.cat([torch.zeros(s) for s in shapes], dim))


def test_cat_stack_empty_list_errors() -> None:
    _errors(lambda: agrad.cat([]), lambda: torch.cat([]))
    _errors(lambda: agrad.stack([]), lambda: torch.stack([]))


@pytest.mark.parametrize("shapes,dim", [([(2,), (3,)], 0), ([(2, 3), (2, 3)], 3), ([(2, 3), (3, 2)], -1)])
def test_stack_errors_match_torch(shapes: list[tuple[int, ...]], dim: int) -> None:
    _errors(lambda: agrad.stack([agrad.zeros(s) for s in shapes], dim),
            lambda: torch.stack([torch.zeros(s) for s in shapes], dim))


def test_cat_skips_legacy_empty_and_negative_dims() -> None:
    x, y = RNG.standard_normal((2, 3)), RNG.standard_normal((0,))
    _check_grads(lambda a, b: (agrad.cat([a, b, a], -2) ** 2).sum(),
                 lambda t, u: (torch.cat([t, u, t], -2) ** 2).sum(), x, y)
    _check_grads(lambda a: (agrad.stack([a, a * 2], -1) ** 3).sum(),
                 lambda t: (torch.stack([t, t * 2], -1) ** 3).sum(), x)


def test_cat_stack_gradgradcheck_with_tuples() -> None:
    a = agrad.tensor(RNG.standard_normal((2, 3)), requires_grad=True)
    b = agrad.tensor(RNG.standard_normal((1, 3)), requires_grad=True)
    assert gradgradcheck(lambda x, y: agrad.cat((x, y)) ** 2, [a, b])
    assert gradgradcheck(lambda x: agrad.stack((x, x), 1) ** 2, [a])


# -- split / chunk / narrow ------------------------------------------------------


@pytest.mark.parametrize("shape,arg,dim", [((7, 2), 3, 0), ((7, 2), [2, 0, 5], 0), ((2, 6), 4, -1),
                                           ((0, 3), 2, 0), ((4, 3), 10, 0), ((3, 4), (1, 3), -1)])
def test_split_matches_torch(shape: tuple[int, ...], arg: Any, dim: int) -> None:
    x = RNG.standard_normal(shape)
    a, t = _pair(x)
    ours, theirs = agrad.split(a, arg, dim), torch.split(t, arg, dim)
    assert isinstance(ours, tuple) and len(ours) == len(theirs)
    for o, r in zip(ours, theirs):
        _close(o, r)
    assert len(a.split(arg, dim)) == len(t.split(arg, dim))


@pytest.mark.parametrize("shape,chunks,dim", [((7, 2), 3, 0), ((6, 2), 3, 0), ((2, 5), 4, -1), ((2, 2), 5, 0),
                                              ((0, 3), 2, 0), ((13,), 6, 0)])
def test_chunk_matches_torch(shape: tuple[int, ...], chunks: int, dim: int) -> None:
    x = RNG.standard_normal(shape)
    a, t = _pair(x)
    ours, theirs = a.chunk(chunks, dim), torch.chunk(t, chunks, dim)
    assert len(ours) == len(theirs)
    for o, r in zip(ours, theirs):
        _close(o, r)


def test_split_chunk_gradients_when_only_some_outputs_are_used() -> None:
    x = RNG.standard_normal((7, 3))
    _check_grads(lambda a: (agrad.split(a, 3)[1] ** 2).sum() + agrad.split(a, 3)[2].sum(),
                 lambda t: (torch.split(t, 3)[1] ** 2).sum() + torch.split(t, 3)[2].sum(), x)
    _check_grads(lambda a: a.chunk(3, -1)[0].sum() * 2, lambda t: t.chunk(3, -1)[0].sum() * 2, x)


# -- multi-output views: one node for all outputs (Note [Multi-output views]) ------

# name: (the input's shape, the call)
MULTI_VIEWS: dict[str, tuple[tuple[int, ...], Callable[[Any], Any]]] = {
    "unbind": ((3, 3), lambda t: t.unbind(0)),
    "unbind-last": ((3, 3), lambda t: t.unbind(-1)),
    "split": ((3, 3), lambda t: t.split(2)),
    "split-sizes": ((3, 3), lambda t: t.split([1, 0, 2], 1)),
    "chunk": ((3, 3), lambda t: t.chunk(2, 1)),
    "split-empty-dim": ((0, 3), lambda t: t.split(2)),
    "chunk-empty-dim": ((0, 3), lambda t: t.chunk(3)),
    "unbind-of-a-view": ((3, 3), lambda t: t.transpose(0, 1)[1:].unbind(1)),
}
MULTI_VIEW_CASES = [pytest.param(shape, call, id=name) for name, (shape, call) in MULTI_VIEWS.items()]


def _graph_summary(lib: Any, shape: tuple[int, ...], call: Callable[[Any], Any]) -> tuple[Any, ...]:
    """How ``call``'s outputs sit in the graph: node names, output numbers, one node, saved attributes, views."""
    y = lib.tensor(RNG.standard_normal(shape), requires_grad=True) * 1
    outs = call(y)
    node = outs[0].grad_fn
    saved = {n: getattr(node, n) for n in dir(node) if n.startswith("_saved_") and n != "_saved_dim"}
    return (type(outs).__name__, [o.grad_fn.name() for o in outs], [o.output_nr for o in outs],
            all(o.grad_fn is node for o in outs), [f.name() for f, _ in node.next_functions], saved,
            all(o._base is y and o._version == y._version for o in outs))


@pytest.mark.parametrize(("shape", "call"), MULTI_VIEW_CASES)
def test_multi_output_views_are_the_outputs_of_one_node(shape: tuple[int, ...], call: Callable[[Any], Any]) -> None:
    assert _graph_summary(agrad, shape, call) == _graph_summary(torch, shape, call)


def test_multi_output_node_saves_the_dims_and_sizes() -> None:
    """PyTorch's ``_saved_`` attributes (it saves a negative dim as an unsigned int: agrad wraps it)."""
    y = agrad.ones(3, 4, requires_grad=True) * 1
    assert y.unbind(-1)[0].grad_fn._saved_dim == 1
    node = y.split(3, 1)[0].grad_fn
    assert (node._saved_dim, node._saved_self_sym_sizes, node._saved_split_size) == (1, (3, 4), 3)
    assert y.split([1, 2], 0)[0].grad_fn._saved_split_sizes == (1, 2)


@pytest.mark.parametrize(("shape", "call"), MULTI_VIEW_CASES)
def test_multi_output_view_gradients_match_torch(shape: tuple[int, ...], call: Callable[[Any], Any]) -> None:
    """Every other output unused (its gradient is zeros in the join), and double backward."""
    def loss(lib: Any, t: Any) -> Any:
        outs = call(t * 1)
        return sum(((o * (i + 1)) ** 2).sum() for i, o in enumerate(outs) if i % 2 == 0) + t.sum() * 0

    x = RNG.standard_normal(shape)
    _check_grads(lambda a: loss(agrad, a), lambda t: loss(torch, t), x)
    a = agrad.tensor(x, requires_grad=True)
    assert gradcheck(lambda t: tuple(o * 2 for o in call(t)[::2]), (a,))
    assert gradgradcheck(lambda t: tuple(o ** 2 for o in call(t)[::2]), (a,))


def test_unbind_create_graph_matches_torch() -> None:
    x = RNG.standard_normal((4, 3))
    results = []
    for lib, grad in ((agrad, agrad.autograd.grad_sync), (torch, torch.autograd.grad)):
        t = lib.tensor(x, requires_grad=True)
        steps = t.unbind(0)
        y = sum((s ** 3).sum() for s in steps[1:])
        (g,) = grad(y, t, create_graph=True)
        (gg,) = grad((g * g).sum(), t)
        results.append((g.grad_fn.name(), g.detach().numpy().copy(), gg.numpy().copy()))
    assert results[0][0] == results[1][0] == "StackBackward0"  # the join, differentiable again
    np.testing.assert_allclose(results[0][1], results[1][1], rtol=1e-12)
    np.testing.assert_allclose(results[0][2], results[1][2], rtol=1e-12)


@pytest.mark.parametrize("lib_name", ["agrad", "torch"])
def test_multi_output_node_runs_again_and_keeps_hooks(lib_name: str) -> None:
    """The node saves no tensor, so a second backward through it works; ``retain_grad`` and
    hooks on one output see that output's gradient."""
    lib = agrad if lib_name == "agrad" else torch
    x = lib.ones(3, 2, requires_grad=True)
    outs = x.clone().unbind(0)
    outs[1].retain_grad()
    seen = []
    outs[2].register_hook(lambda g: seen.append(g.tolist()))
    loss = (outs[1] + outs[2] + outs[2]).sum()  # saves no tensor either
    _backward = (lambda t: t.backward_sync()) if lib is agrad else (lambda t: t.backward())
    _backward(loss)
    _backward(loss)
    assert outs[1].grad.tolist() == [2.0, 2.0]
    assert seen == [[2.0, 2.0], [2.0, 2.0]]
    assert x.grad.tolist() == [[0.0, 0.0], [2.0, 2.0], [4.0, 4.0]]


@pytest.mark.parametrize("call", [lambda t: t.unbind(1), lambda t: t.split(2), lambda t: t.split([2, 1]),
                                  lambda t: t.chunk(2)], ids=["unbind", "split", "split-sizes", "chunk"])
def test_in_place_on_a_multi_output_view_raises_as_torch(call: Callable[[Any], Any]) -> None:
    texts = []
    for lib in (agrad, torch):
        outs = call(lib.ones(3, 2, requires_grad=True) * 1)
        with pytest.raises(RuntimeError, match="returns multiple views") as err:
            outs[1].mul_(2)
        texts.append(str(err.value))
        with lib.no_grad():
            outs[1].mul_(2)  # not recorded: allowed
    assert texts[0] == texts[1]


def test_multi_output_views_outside_grad_mode() -> None:
    """No node, no mark: views still, and inference tensors' pieces are inference tensors."""
    x = agrad.ones(3, 2, requires_grad=True) * 1
    with agrad.no_grad():
        outs = x.unbind(0)
    assert all(o._base is x and o.grad_fn is None for o in outs)
    with agrad.inference_mode():
        z = agrad.ones(3, 2)
        pieces = z.split(1)
    assert all(p.is_inference() and not p._is_view() for p in pieces)
    assert agrad.zeros(0, 2, requires_grad=True).unbind(0) == ()


def test_narrow_matches_torch() -> None:
    x = RNG.standard_normal((5, 4))
    _check_grads(lambda a: (a.narrow(0, 1, 3) ** 2).sum(), lambda t: (t.narrow(0, 1, 3) ** 2).sum(), x)
    _check_grads(lambda a: (agrad.narrow(a, -1, -3, 2) ** 2).sum(),
                 lambda t: (torch.narrow(t, -1, -3, 2) ** 2).sum(), x)
    _errors(lambda: agrad.zeros(5).narrow(0, 3, 3), lambda: torch.zeros(5).narrow(0, 3, 3))


# -- composites -------------------------------------------------------------------


@pytest.mark.parametrize("shape,start,end", [((2, 3, 4), 0, -1), ((2, 3, 4), 1, 2), ((2, 3, 4), -2, -1),
                                             ((), 0, -1), ((2, 0, 3), 0, 1), ((2, 3), 1, 1)])
def test_flatten_matches_torch(shape: tuple[int, ...], start: int, end: int) -> None:
    x = RNG.standard_normal(shape)
    _check_grads(lambda a: (agrad.flatten(a, start, end) ** 2).sum(),
                 lambda t: (torch.flatten(t, start, end) ** 2).sum(), x)
    a, t = _pair(x)
    _close(a.flatten(start, end), t.flatten(start, end))


@pytest.mark.parametrize("shape,dims", [((2, 3), (2,)), ((2, 3), (2, 1, 2)), ((3,), (2, 2)), ((), (3,)),
                                        ((2, 3), ())])
def test_tile_and_repeat_match_torch(shape: tuple[int, ...], dims: tuple[int, ...]) -> None:
    x = RNG.standard_normal(shape)
    _check_grads(lambda a: (agrad.tile(a, dims) ** 2).sum(), lambda t: (torch.tile(t, dims) ** 2).sum(), x)
    a, t = _pair(x)
    _close(a.tile(*dims) if dims else a.tile(dims), t.tile(*dims) if dims else t.tile(dims))


def test_broadcast_to_and_expand_as() -> None:
    x, y = RNG.standard_normal((3, 1)), RNG.standard_normal((2, 3, 4))
    _check_grads(lambda a: (agrad.broadcast_to(a, (2, 3, 4)) ** 2).sum(),
                 lambda t: (torch.broadcast_to(t, (2, 3, 4)) ** 2).sum(), x)
    _check_grads(lambda a, b: (a.expand_as(b) * b).sum(), lambda t, u: (t.expand_as(u) * u).sum(), x, y)


@pytest.mark.parametrize("pad,value", [((1, 2), 0.0), ((1, 1, 0, 2), 3.0), ((-1, 1, 2, -2), None), ((0, 0), 1.0)])
def test_pad_constant_matches_torch(pad: tuple[int, ...], value: float | None) -> None:
    x = RNG.standard_normal((2, 3, 4))
    _check_grads(lambda a: (_pad(a, pad, value=value) ** 2).sum(),
                 lambda t: (torch.nn.functional.pad(t, pad, value=value) ** 2).sum(), x)
    a = agrad.tensor(x, requires_grad=True)
    assert gradgradcheck(lambda t: _pad(t, pad, value=value), [a])


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("shape,pad", [((2, 3, 5), (2, 1)), ((1, 2, 4, 5), (1, 2, 0, 3)),
                                       ((2, 3, 3, 4), (-1, 2, 1, -1)), ((1, 1, 3, 3, 4), (1, 1, 2, 0, 1, 2))])
def test_pad_non_constant_matches_torch(mode: str, shape: tuple[int, ...], pad: tuple[int, ...]) -> None:
    x = RNG.standard_normal(shape)
    _check_grads(lambda a: (_pad(a, pad, mode=mode) ** 2).sum(),
                 lambda t: (torch.nn.functional.pad(t, pad, mode=mode) ** 2).sum(), x)


def test_pad_errors() -> None:
    F = torch.nn.functional
    _errors(lambda: _pad(agrad.zeros(2), (1,)), lambda: F.pad(torch.zeros(2), (1,)))
    _errors(lambda: _pad(agrad.zeros(2), (1, 1, 1, 1)), lambda: F.pad(torch.zeros(2), (1, 1, 1, 1)))
    _errors(lambda: _pad(agrad.zeros(1, 2, 3), (1, 1), mode="wrap"), lambda: F.pad(torch.zeros(1, 2, 3), (1, 1),
                                                                                    mode="wrap"))
    _errors(lambda: _pad(agrad.zeros(1, 2, 3), (1, 1), mode="reflect", value=1.0),
            lambda: F.pad(torch.zeros(1, 2, 3), (1, 1), mode="reflect", value=1.0))
    _errors(lambda: _pad(agrad.zeros(1, 2, 3), (3, 1), mode="reflect"),
            lambda: F.pad(torch.zeros(1, 2, 3), (3, 1), mode="reflect"))


def test_masked_fill_scalar_tensor_and_inplace() -> None:
    x = RNG.standard_normal((3, 4))
    mask = RNG.uniform(size=(4,)) > 0.5
    _check_grads(lambda a: (a.masked_fill(agrad.tensor(mask), 2.0) ** 2).sum(),
                 lambda t: (t.masked_fill(torch.tensor(mask), 2.0) ** 2).sum(), x)
    _check_grads(lambda a, v: (agrad.masked_fill(a, agrad.tensor(mask), v) ** 2).sum(),
                 lambda t, v: (torch.masked_fill(t, torch.tensor(mask), v) ** 2).sum(), x, np.array(0.5))
    _check_grads(lambda a: (a * 1).masked_fill_(agrad.tensor(mask), -1.0).pow(2).sum(),
                 lambda t: (t * 1).masked_fill_(torch.tensor(mask), -1.0).pow(2).sum(), x)
    i = agrad.tensor(np.arange(4))
    assert i.masked_fill(agrad.tensor(mask), 1.7).dtype is agrad.int64
    a = agrad.tensor(x, requires_grad=True)
    node = (a * 1).masked_fill_(agrad.tensor(mask), 0.0).grad_fn
    assert type(node).__name__ == "MaskedFillBackward0"


def test_roll_flat_and_negative_dims() -> None:
    x = RNG.standard_normal((3, 4))
    _check_grads(lambda a: (a.roll(5) * agrad.tensor(np.arange(12.0).reshape(3, 4))).sum(),
                 lambda t: (t.roll(5) * torch.arange(12.0, dtype=torch.float64).reshape(3, 4)).sum(), x)
    _check_grads(lambda a: (agrad.roll(a, (-1, 2), (-1, -2)) ** 3).sum(),
                 lambda t: (torch.roll(t, (-1, 2), (-1, -2)) ** 3).sum(), x)


# -- hypothesis: permutations and flips round-trip --------------------------------


@st.composite
def _shape_perm_flip(draw: Any) -> tuple[tuple[int, ...], list[int], list[int]]:
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=0, max_size=4)))
    perm = draw(st.permutations(range(len(shape))))
    flips = draw(st.lists(st.sampled_from(range(len(shape))), unique=True)) if shape else []
    negate = draw(st.booleans())
    if negate:
        perm = [d - len(shape) for d in perm]
        flips = [d - len(shape) for d in flips]
    return shape, list(perm), flips


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(_shape_perm_flip(), st.integers(0, 2**32 - 1))
def test_permute_flip_round_trip_matches_torch(case: tuple[Any, list[int], list[int]], seed: int) -> None:
    shape, perm, flips = case
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    w = rng.standard_normal(tuple(shape[d] for d in perm))
    a, t = _pair(x)
    ya = a.permute(perm).flip(flips)
    yt = t.permute(perm).flip(flips)
    _close(ya, yt)
    inv = list(np.argsort([d % max(len(shape), 1) for d in perm])) if shape else []
    np.testing.assert_array_equal(agrad.permute(ya.flip(flips), inv).detach().numpy(), x)
    (ya * agrad.tensor(w)).sum().backward_sync()
    (yt * torch.tensor(w)).sum().backward()
    _close(a.grad, t.grad)


def test_permute_flip_gradcheck_and_errors() -> None:
    a = agrad.tensor(RNG.standard_normal((2, 3, 4)), requires_grad=True)
    assert gradcheck(lambda x: x.permute(2, 0, 1).flip(-1, 0), [a])
    _errors(lambda: agrad.zeros(2, 3).permute(0, 0), lambda: torch.zeros(2, 3).permute(0, 0))
    _errors(lambda: agrad.zeros(2, 3).flip(2), lambda: torch.zeros(2, 3).flip(2))


def test_view_ops_share_memory_and_inplace_writes_match_torch() -> None:
    x = RNG.standard_normal((3, 4))

    def f(lib: Any, a: Any) -> Any:
        b = a * 1
        b.permute(1, 0)[1].mul_(3)
        b.narrow(0, 1, 2).narrow(0, 1, 1).add_(1)
        return (b ** 2).sum()

    _check_grads(lambda a: f(agrad, a), lambda t: f(torch, t), x)
    y = agrad.zeros(2, 3)
    assert y.permute(1, 0)._base is y and agrad.flatten(y)._base is y and y.split(1)[0]._base is y


@pytest.mark.parametrize("call", [
    lambda lib: lib.zeros(2, 3).gather(1, lib.tensor([[5]])),
    lambda lib: lib.zeros(2, 3).gather(1, lib.tensor([[-1]])),
    lambda lib: lib.zeros(2, 3).gather(1, lib.tensor([[1.0]])),
    lambda lib: lib.zeros(2, 3).scatter_add(1, lib.tensor([[5]]), lib.zeros(1, 1)),
    lambda lib: lib.index_select(lib.zeros(3), 0, lib.tensor([3])),
    lambda lib: lib.index_select(lib.zeros(3), 0, lib.tensor([-1])),
    lambda lib: lib.zeros(5).narrow(0, 1, -1),
    lambda lib: lib.zeros(2, 3).permute(),
    lambda lib: lib.zeros(2, 3).permute(0),
    lambda lib: lib.zeros(2, 3).repeat(2),
    lambda lib: lib.zeros(2, 3).roll((1, 2)),
    lambda lib: lib.zeros(2, 3).flatten(1, 0),
    lambda lib: lib.zeros(5).split([2, 2]),
    lambda lib: lib.zeros(3).chunk(0),
], ids=["gather-oob", "gather-neg", "gather-float", "scatter-oob", "isel-oob", "isel-neg", "narrow-neglen",
        "permute-none", "permute-short", "repeat-short", "roll-align", "flatten-order", "split-sum", "chunk-0"])
def test_errors_match_torch(call: Callable[[Any], Any]) -> None:
    _errors(lambda: call(agrad), lambda: call(torch))


@pytest.mark.parametrize("name", ["cat", "stack"])
def test_variadic_op_on_view_modified_in_place(name: str) -> None:
    def f(lib: Any, a: Any) -> Any:
        b = a * 1
        v = b[0]
        b.mul_(2)
        return (getattr(lib, name)([v, v]) ** 2).sum()

    _check_grads(lambda a: f(agrad, a), lambda t: f(torch, t), np.arange(6.0).reshape(2, 3))
