"""``agrad.utils.checkpoint``: both variants give the gradients of the plain
forward (and PyTorch's), awaited and blocking; ``checkpoint_sequential``; the
warnings and errors of PyTorch; the non-reentrant variant with ``grad()``,
``inputs=``, ``retain_graph``, ``create_graph``, concurrency and offloaded
kernels, and that it really drops activations; the RNG state functions."""

from __future__ import annotations

import gc
import re
import warnings
import weakref
from typing import Any

import anyio
import numpy as np
import pytest

import agrad
from agrad.autograd.graph import engine_options
from agrad.utils.checkpoint import CheckpointError, checkpoint
from tests.engine._models import assert_close
from tests.helpers import requires_torch, torch

VARIANTS = [pytest.param(True, id="reentrant"), pytest.param(False, id="non_reentrant")]


def arrays(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.normal(size=(4, 5)), "c": rng.normal(size=(4, 8)), "w1": rng.normal(size=(5, 8)) / 2,
            "b1": rng.normal(size=8), "w2": rng.normal(size=(8, 3)) / 2}


def tensors(lib: Any, a: dict[str, np.ndarray]) -> dict[str, Any]:
    """Float64 tensors of ``lib``: all require grad but ``c``."""
    return {k: lib.tensor(v, dtype=lib.float64, requires_grad=k != "c") for k, v in a.items()}


def block(lib: Any, x: Any, c: Any, scale: float, w1: Any, b1: Any, w2: Any, p: float = 0.0) -> Any:
    """An MLP block: tensor and non-tensor inputs, relu, tanh, optional dropout."""
    h = (x @ w1 + b1).relu() * scale + c
    h = h.tanh()
    if p:
        h = lib.nn.functional.dropout(h, p=p, training=True)
    return h @ w2


def loss_of(lib: Any, t: dict[str, Any], use_reentrant: bool | None, p: float = 0.0) -> Any:
    args = (t["x"], t["c"], 1.5, t["w1"], t["b1"], t["w2"], p)
    if use_reentrant is None:
        out = block(lib, *args)
    else:
        ckpt = lib.utils.checkpoint.checkpoint
        out = ckpt(lambda *a: block(lib, *a), *args, use_reentrant=use_reentrant)
    return (out.sin() * out).sum()


def grads_of(t: dict[str, Any]) -> dict[str, Any]:
    return {k: None if v.grad is None else v.grad.numpy().copy() for k, v in t.items()}


def assert_same_grads(actual: dict[str, Any], expected: dict[str, Any]) -> None:
    assert actual.keys() == expected.keys()
    for k in expected:
        if expected[k] is None:
            assert actual[k] is None, k
        else:
            np.testing.assert_allclose(actual[k], expected[k], rtol=1e-12, atol=1e-14, err_msg=k)


def plain_grads(p: float = 0.0, seed: int = 7) -> tuple[dict[str, Any], np.ndarray]:
    """Gradients without checkpointing, and the next draw of the generator after the backward."""
    t = tensors(agrad, arrays())
    agrad.manual_seed(seed)
    loss_of(agrad, t, None, p).backward_sync()
    return grads_of(t), agrad.rand(3).numpy()


# -- same gradients as without checkpointing ---------------------------------------------------------


@pytest.mark.parametrize("use_reentrant", VARIANTS)
def test_same_gradients_blocking(use_reentrant: bool) -> None:
    expected, next_draw = plain_grads(p=0.3)
    t = tensors(agrad, arrays())
    agrad.manual_seed(7)
    loss_of(agrad, t, use_reentrant, p=0.3).backward_sync()
    assert_same_grads(grads_of(t), expected)
    assert expected["c"] is None
    # The recomputation restored the forward's RNG state, then the state outside.
    np.testing.assert_array_equal(agrad.rand(3).numpy(), next_draw)


@pytest.mark.filterwarnings("ignore::agrad.BlockingCallWarning")  # a blocking twin on the loop, on purpose
@pytest.mark.anyio
@pytest.mark.parametrize("awaited", [True, False], ids=["awaited", "blocking-inside-a-running-loop"])
@pytest.mark.parametrize("use_reentrant", VARIANTS)
async def test_same_gradients_on_a_running_loop(use_reentrant: bool, awaited: bool) -> None:
    expected, next_draw = plain_grads(p=0.3)
    t = tensors(agrad, arrays())
    agrad.manual_seed(7)
    loss = loss_of(agrad, t, use_reentrant, p=0.3)
    if awaited:
        await loss.backward()
    else:
        loss.backward_sync()
    assert_same_grads(grads_of(t), expected)
    np.testing.assert_array_equal(agrad.rand(3).numpy(), next_draw)


@pytest.mark.anyio
async def test_non_reentrant_with_offloaded_kernels() -> None:
    # Every kernel in a thread: unpacks (and the recomputation) run off the loop.
    expected, _ = plain_grads(p=0.3)
    t = tensors(agrad, arrays())
    agrad.manual_seed(7)
    loss = loss_of(agrad, t, False, p=0.3)
    with engine_options(offload="always"):
        await loss.backward()
    assert_same_grads(grads_of(t), expected)


@requires_torch
@pytest.mark.parametrize("use_reentrant", VARIANTS)
def test_matches_torch(use_reentrant: bool) -> None:
    a = arrays()
    ta, tt = tensors(agrad, a), tensors(torch, a)
    loss_a, loss_t = loss_of(agrad, ta, use_reentrant), loss_of(torch, tt, use_reentrant)
    assert_close(loss_a, loss_t)
    loss_a.backward_sync()
    loss_t.backward()
    for k in a:
        if k == "c":
            assert ta[k].grad is None and tt[k].grad is None
        else:
            assert_close(ta[k].grad, tt[k].grad)


@requires_torch
@pytest.mark.parametrize("use_reentrant", VARIANTS)
@pytest.mark.parametrize("segments", [1, 2, 3, 4])
def test_checkpoint_sequential(use_reentrant: bool, segments: int) -> None:
    rng = np.random.default_rng(3)
    ws = [rng.normal(size=(4, 4)) / 2 for _ in range(5)]
    x0 = rng.normal(size=(2, 4))

    def run(lib: Any, checkpointed: bool) -> tuple[Any, list[Any]]:
        w = [lib.tensor(v, dtype=lib.float64, requires_grad=True) for v in ws]
        x = lib.tensor(x0, dtype=lib.float64, requires_grad=True)
        layers = [lambda h, wi=wi: (h @ wi).tanh() for wi in w]
        if checkpointed:
            out = lib.utils.checkpoint.checkpoint_sequential(layers, segments, x, use_reentrant=use_reentrant)
        else:
            out = x
            for layer in layers:
                out = layer(out)
        loss = (out * out).sum()
        loss.backward_sync() if lib is agrad else loss.backward()
        return loss, [x.grad, *(wi.grad for wi in w)]

    loss, grads = run(agrad, True)
    plain_loss, plain = run(agrad, False)
    torch_loss, torch_grads = run(torch, True)
    assert_close(loss, torch_loss)
    for g, p, tg in zip(grads, plain, torch_grads):
        np.testing.assert_allclose(g.numpy(), p.numpy(), rtol=1e-12)
        assert_close(g, tg)


# -- warnings and errors, as PyTorch's ------------------------------------------------------------------


def warning_texts(fn: Any) -> list[tuple[type, str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [(w.category, str(w.message)) for w in caught]


def as_agrad(message: str) -> str:
    return message.replace("torch.utils", "agrad.utils")


@requires_torch
def test_use_reentrant_not_passed_warns_as_torch() -> None:
    for lib in (agrad, torch):
        x = lib.ones(3, requires_grad=True)
        got = warning_texts(lambda: lib.utils.checkpoint.checkpoint(lambda x: x.exp(), x))  # noqa: B023
        got_seq = warning_texts(lambda: lib.utils.checkpoint.checkpoint_sequential([lib.exp], 1, x))  # noqa: B023
        if lib is agrad:
            mine = got, got_seq
        else:
            theirs = [(c, as_agrad(m)) for c, m in got], [(c, as_agrad(m)) for c, m in got_seq]
    assert mine == theirs
    assert mine[0][0][0] is UserWarning and mine[0][0][1].startswith(
        "agrad.utils.checkpoint: the use_reentrant parameter should be passed explicitly.")


@requires_torch
def test_reentrant_warns_when_no_input_requires_grad() -> None:
    mine = warning_texts(lambda: checkpoint(lambda x: x.exp(), agrad.ones(3), use_reentrant=True))
    theirs = warning_texts(lambda: torch.utils.checkpoint.checkpoint(lambda x: x.exp(), torch.ones(3),
                                                                     use_reentrant=True))
    assert mine == theirs == [(UserWarning, "None of the inputs have requires_grad=True. Gradients will be None")]


def torch_error(fn: Any) -> str:
    with pytest.raises(Exception) as info:
        fn()
    return as_agrad(str(info.value))


@requires_torch
@pytest.mark.parametrize("how", ["grad", "inputs"])
def test_reentrant_rejects_grad_and_inputs(how: str) -> None:
    def run(lib: Any) -> None:
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = lib.utils.checkpoint.checkpoint(lambda x: x.exp(), x, use_reentrant=True).sum()
        if how == "grad":
            agrad.autograd.grad_sync(y, x) if lib is agrad else torch.autograd.grad(y, x)
        else:
            y.backward_sync(inputs=[x]) if lib is agrad else y.backward(inputs=[x])

    expected = torch_error(lambda: run(torch))
    assert expected.startswith("When use_reentrant=True, agrad.utils.checkpoint is incompatible with .grad()")
    with pytest.raises(RuntimeError, match=re.escape(expected)):
        run(agrad)


@requires_torch
def test_reentrant_needs_an_output_that_requires_grad() -> None:
    def run(lib: Any) -> None:
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = lib.utils.checkpoint.checkpoint(lambda x: x.detach() * 2, x, use_reentrant=True)
        y.sum().backward_sync() if lib is agrad else y.sum().backward()

    expected = torch_error(lambda: run(torch))
    with pytest.raises(RuntimeError, match=re.escape(expected)):
        run(agrad)


@requires_torch
@pytest.mark.parametrize("call", [
    lambda lib, x: lib.utils.checkpoint.checkpoint(lambda x, k: x * k, x, use_reentrant=True, k=2, j=3),
    lambda lib, x: lib.utils.checkpoint.checkpoint_sequential([lib.exp], 1, x, use_reentrant=False, foo=3),
    lambda lib, x: lib.utils.checkpoint.checkpoint(lambda x: x, x, use_reentrant=True,
                                                   context_fn=lib.utils.checkpoint.noop_context_fn, debug=True),
    lambda lib, x: lib.utils.checkpoint.checkpoint(lambda x: x, x, use_reentrant=False, determinism_check="x"),
], ids=["kwargs", "sequential_kwargs", "reentrant_context_fn", "determinism_check"])
def test_value_errors_as_torch(call: Any) -> None:
    expected = torch_error(lambda: call(torch, torch.ones(2, requires_grad=True)))
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        call(agrad, agrad.ones(2, requires_grad=True))


def nondeterministic(state: dict[str, Any]) -> Any:
    def f(x: agrad.Tensor) -> agrad.Tensor:
        y = x[: state["n"]].exp()
        if state["more"]:
            y = y.exp()
        return y
    return f


@pytest.mark.parametrize("change,early_stop,message", [
    ({"more": False}, True, "A different number of tensors was saved during the original forward and "
                            "recomputation.\nNumber of tensors saved during forward: 2\n"
                            "Number of tensors saved during recomputation: 1."),
    ({"n": 2}, True, "Recomputed values for the following tensors have different metadata than during the "
                     "forward pass.\ntensor at position 0:\nsaved metadata: {'shape': agrad.Size([3])"),
    ({"more": True}, False, "trying to save more tensors during recomputation than during the original forward"),
])
def test_recomputation_must_save_the_same_tensors(change: dict[str, Any], early_stop: bool, message: str) -> None:
    state = {"n": 3, "more": not change.get("more", True)}
    x = agrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = checkpoint(nondeterministic(state), x, use_reentrant=False, early_stop=early_stop)
    state.update(change)
    with pytest.raises(CheckpointError, match=re.escape("agrad.utils.checkpoint: " + message)):
        y.sum().backward_sync()
    assert x.grad is None


def test_determinism_check_none_skips_the_metadata_check() -> None:
    state = {"dtype": agrad.float32}
    x = agrad.tensor([1.0, 2.0], requires_grad=True)
    y = checkpoint(lambda x: x.to(state["dtype"]).exp(), x, use_reentrant=False, determinism_check="none")
    state["dtype"] = agrad.float64
    y.sum().backward_sync()
    np.testing.assert_allclose(x.grad.numpy(), np.exp([1.0, 2.0]), rtol=1e-6)


def test_unpacking_a_tensor_twice_in_one_backward_is_an_error() -> None:
    class SavesTwice(agrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            _ = ctx.saved_tensors
            return ctx.saved_tensors[0] * 0 + 2 * g

    x = agrad.ones(2, requires_grad=True)
    y = checkpoint(lambda x: SavesTwice.apply(x.exp()), x, use_reentrant=False)
    with pytest.raises(CheckpointError, match="Unpack is being triggered for a tensor that was already unpacked"):
        y.sum().backward_sync()


# -- the non-reentrant variant: every way of running a backward ---------------------------------------


def f3(x: agrad.Tensor, *, scale: float) -> agrad.Tensor:
    return (x.sin() * x).exp() * scale


def test_non_reentrant_keyword_arguments_grad_inputs_and_retain_graph() -> None:
    x = agrad.tensor([0.5, 1.0, 2.0], dtype=agrad.float64, requires_grad=True)
    (expected,) = agrad.autograd.grad_sync(f3(x, scale=2.0).sum(), x)
    y = checkpoint(f3, x, use_reentrant=False, scale=2.0).sum()
    for _ in range(2):  # each backward recomputes for itself
        (g,) = agrad.autograd.grad_sync(y, x, retain_graph=True)
        np.testing.assert_allclose(g.numpy(), expected.numpy(), rtol=1e-12)
    y.backward_sync(inputs=[x], retain_graph=True)
    y.backward_sync()
    np.testing.assert_allclose(x.grad.numpy(), 2 * expected.numpy(), rtol=1e-12)
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.backward_sync()


def test_non_reentrant_create_graph() -> None:
    def second_order(checkpointed: bool) -> tuple[np.ndarray, np.ndarray]:
        x = agrad.tensor([0.5, 1.0, 2.0], dtype=agrad.float64, requires_grad=True)
        y = checkpoint(f3, x, use_reentrant=False, scale=3.0) if checkpointed else f3(x, scale=3.0)
        (g,) = agrad.autograd.grad_sync(y.sum(), x, create_graph=True)
        (gg,) = agrad.autograd.grad_sync(g.sum(), x)
        return g.detach().numpy(), gg.numpy()

    for a, e in zip(second_order(True), second_order(False)):
        np.testing.assert_allclose(a, e, rtol=1e-12)


@pytest.mark.filterwarnings("ignore::agrad.BlockingCallWarning")  # a blocking twin on the loop, on purpose
@pytest.mark.anyio
async def test_non_reentrant_concurrent_backwards_on_one_graph() -> None:
    x = agrad.tensor([0.5, 1.0, 2.0], dtype=agrad.float64, requires_grad=True)
    (expected,) = agrad.autograd.grad_sync(f3(x, scale=1.0).sum(), x)
    y = checkpoint(f3, x, use_reentrant=False, scale=1.0).sum()
    results: list[Any] = []

    async def one() -> None:
        results.append((await agrad.autograd.grad(y, x, retain_graph=True))[0])

    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(one)
    assert len(results) == 4
    for g in results:
        np.testing.assert_allclose(g.numpy(), expected.numpy(), rtol=1e-12)


def test_nested_checkpoints() -> None:
    def inner(h: agrad.Tensor) -> agrad.Tensor:
        return (h.tanh() * h).exp()

    def outer(x: agrad.Tensor, w: agrad.Tensor) -> agrad.Tensor:
        h = (x @ w).sin()
        return checkpoint(inner, h, use_reentrant=False).cos()

    def run(checkpointed: bool) -> list[np.ndarray]:
        a = arrays()
        x = agrad.tensor(a["x"], requires_grad=True, dtype=agrad.float64)
        w = agrad.tensor(a["w1"], requires_grad=True, dtype=agrad.float64)
        y = checkpoint(outer, x, w, use_reentrant=False) if checkpointed else outer(x, w)
        y.sum().backward_sync(retain_graph=True)
        y.sum().backward_sync()
        return [x.grad.numpy(), w.grad.numpy()]

    for a, e in zip(run(True), run(False)):
        np.testing.assert_allclose(a, e, rtol=1e-12)


class _Note:
    """A reusable context manager noting each entry (the recompute context is entered per recomputation)."""

    def __init__(self, entered: list[str], name: str) -> None:
        self.entered, self.name = entered, name

    def __enter__(self) -> None:
        self.entered.append(self.name)

    def __exit__(self, *exc: object) -> None:
        pass


@pytest.mark.filterwarnings("ignore::agrad.BlockingCallWarning")  # a blocking twin on the loop, on purpose
@pytest.mark.anyio
@pytest.mark.filterwarnings("ignore:None of the inputs have requires_grad")  # reentrant in reentrant, as torch
@pytest.mark.parametrize("outer_reentrant", VARIANTS)
@pytest.mark.parametrize("inner_reentrant", VARIANTS)
async def test_nested_variants_and_non_tensor_outputs(outer_reentrant: bool, inner_reentrant: bool) -> None:
    def inner(h: agrad.Tensor) -> tuple[agrad.Tensor, int]:
        return h.tanh() * h, 3

    def outer(x: agrad.Tensor) -> agrad.Tensor:
        a, k = checkpoint(inner, x.sin(), use_reentrant=inner_reentrant)
        return (a * k).exp()

    x = agrad.tensor([0.3, 1.2], dtype=agrad.float64, requires_grad=True)
    await checkpoint(outer, x, use_reentrant=outer_reentrant).sum().backward()
    h = x.sin()
    (expected,) = agrad.autograd.grad_sync((h.tanh() * h * 3).exp().sum(), x)
    np.testing.assert_allclose(x.grad.numpy(), expected.numpy(), rtol=1e-12)


@pytest.mark.parametrize("early_stop", [True, False])
def test_backward_inside_the_checkpointed_function(early_stop: bool) -> None:
    # PyTorch's Rule 6 of Note [Nestable Checkpoint]: the grad() call in the
    # forward unpacks holders before the forward is complete.
    def f(x: agrad.Tensor) -> agrad.Tensor:
        z = x.sin().cos()
        (gx,) = agrad.autograd.grad_sync(z.sum(), x, create_graph=True)
        return gx * z

    x = agrad.tensor([0.3, 1.2], dtype=agrad.float64, requires_grad=True)
    checkpoint(f, x, use_reentrant=False, early_stop=early_stop).sum().backward_sync()
    (expected,) = agrad.autograd.grad_sync(f(x).sum(), x)
    np.testing.assert_allclose(x.grad.numpy(), expected.numpy(), rtol=1e-12)


def test_context_fn_forward_and_recompute_contexts() -> None:
    entered: list[str] = []
    x = agrad.tensor([1.0, 2.0], requires_grad=True)
    y = checkpoint(lambda x: x.exp(), x, use_reentrant=False,
                   context_fn=lambda: (_Note(entered, "forward"), _Note(entered, "recompute"))).sum()
    assert entered == ["forward"]
    y.backward_sync(retain_graph=True)
    y.backward_sync()
    assert entered == ["forward", "recompute", "recompute"]


def test_context_fn_must_not_suppress_a_forward_error() -> None:
    def boom(x: agrad.Tensor) -> agrad.Tensor:
        raise ValueError("boom")

    with pytest.raises(RuntimeError, match="the forward context provided by context_fn suppressed an exception"):
        checkpoint(boom, agrad.ones(2, requires_grad=True), use_reentrant=False,
                   context_fn=lambda: (_Suppress(), _Suppress()))


class _Suppress:
    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: object) -> bool:
        return True


# -- memory: activations are not kept ------------------------------------------------------------------


def tracked(refs: list[weakref.ref]) -> Any:
    """A function that records weak references to the arrays of its intermediates, at every call."""
    def f(x: agrad.Tensor) -> agrad.Tensor:
        h = x.exp()
        h2 = h.sin()
        h3 = h2 * h
        refs.extend(weakref.ref(t._data) for t in (h, h2, h3))
        return h3.sin()  # saves h3 (sin saves its input)
    return f


@pytest.mark.parametrize("use_reentrant", [None, *VARIANTS])
def test_activations_are_not_kept_after_forward(use_reentrant: bool | None) -> None:
    refs: list[weakref.ref] = []
    x = agrad.tensor(np.linspace(0, 1, 1000), requires_grad=True)
    f = tracked(refs)
    y = f(x) if use_reentrant is None else checkpoint(f, x, use_reentrant=use_reentrant)
    gc.collect()
    alive = [r() is not None for r in refs]
    assert alive == ([True] * 3 if use_reentrant is None else [False] * 3)
    y.sum().backward_sync()
    np.testing.assert_allclose(x.grad.numpy(), agrad.autograd.grad_sync(f(x).sum(), x)[0].numpy())


@pytest.mark.parametrize("retain_graph", [False, True])
def test_recomputed_activations_are_dropped_as_they_are_unpacked(retain_graph: bool) -> None:
    # Probe's backward runs after every node of the checkpointed region: by
    # then each recomputed tensor has been unpacked and dropped, even when the
    # graph is retained (PyTorch's Rule 4).
    refs: list[weakref.ref] = []
    alive_at_probe: list[bool] = []

    class Probe(agrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            gc.collect()
            alive_at_probe.extend(r() is not None for r in refs[3:])  # the recomputation's
            return g

    x = agrad.tensor(np.linspace(0, 1, 1000), requires_grad=True)
    y = checkpoint(tracked(refs), Probe.apply(x), use_reentrant=False).sum()
    y.backward_sync(retain_graph=retain_graph)
    assert len(refs) == 6 and alive_at_probe == [False] * 3


def test_under_no_grad_checkpoint_just_calls_the_function() -> None:
    x = agrad.ones(2, requires_grad=True)
    with agrad.no_grad():
        for use_reentrant in (True, False):
            y = checkpoint(lambda x: x.exp(), x, use_reentrant=use_reentrant)
            assert not y.requires_grad


# -- RNG state ---------------------------------------------------------------------------------------


def test_rng_state_functions() -> None:
    agrad.manual_seed(11)
    state = agrad.get_rng_state()
    a = agrad.rand(4).numpy()
    agrad.set_rng_state(state)
    np.testing.assert_array_equal(agrad.rand(4).numpy(), a)
    agrad.set_rng_state(state)
    with agrad.random.fork_rng():
        agrad.randn(10)
    np.testing.assert_array_equal(agrad.rand(4).numpy(), a)
    agrad.set_rng_state(state)
    with agrad.random.fork_rng(enabled=False):
        agrad.randn(10)
    assert not np.array_equal(agrad.rand(4).numpy(), a)
