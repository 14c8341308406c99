"""``agrad.autograd.graph.saved_tensors_hooks``: what is packed and unpacked, and
when; nesting and per-task isolation; hooks that change the tensor; saved
outputs and ``create_graph``; the errors; ``disable_saved_tensors_hooks``."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import anyio
import anyio.lowlevel
import numpy as np
import pytest

import agrad
from agrad.autograd.graph import disable_saved_tensors_hooks, saved_tensors_hooks
from tests.engine._models import assert_close
from tests.helpers import requires_torch, torch


def recording_hooks(log: list[Any], name: str = "") -> saved_tensors_hooks:
    """Hooks that log ("pack"/"unpack", name, values) and pass a detached tensor through."""
    def pack(x: agrad.Tensor) -> agrad.Tensor:
        log.append(("pack", name, x.tolist()))
        return x.detach()

    def unpack(x: agrad.Tensor) -> agrad.Tensor:
        log.append(("unpack", name, x.tolist()))
        return x

    return saved_tensors_hooks(pack, unpack)


def make_square(lib: Any) -> type:
    """``x ** 2`` as a custom Function saving its input and its output."""
    class Square(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            out = x * x
            ctx.save_for_backward(x, out)
            return out

        @staticmethod
        def backward(ctx, g):
            x, out = ctx.saved_tensors
            return 2 * out / x * g  # = 2x g, differentiable in x through both saves

    return Square


SQUARE = make_square(agrad)


def test_pack_in_forward_order_unpack_in_backward_order() -> None:
    log: list[Any] = []
    x = agrad.tensor([1.0, 2.0], requires_grad=True)
    with recording_hooks(log):
        y = x.exp()      # saves its output
        z = (y * 3.0).sin()  # sin saves its input; the constant 3.0 is not packed (as in PyTorch)
    e = np.exp(np.array([1.0, 2.0], np.float32))
    assert log == [("pack", "", e.tolist()), ("pack", "", (e * 3).tolist())]
    del log[:]
    z.sum().backward_sync()
    assert log == [("unpack", "", (e * 3).tolist()), ("unpack", "", e.tolist())]
    expected = np.cos(3 * np.exp([1.0, 2.0])) * 3 * np.exp([1.0, 2.0])
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-5)


def test_hooks_apply_only_inside_the_context_and_innermost_wins() -> None:
    log: list[Any] = []
    x = agrad.tensor([2.0], requires_grad=True)
    with recording_hooks(log, "outer"):
        a = x.exp()
        with recording_hooks(log, "inner"):
            b = x.sin()
        c = x.cos()
    d = x.tanh()
    assert [(kind, name) for kind, name, _ in log] == [("pack", "outer"), ("pack", "inner"), ("pack", "outer")]
    del log[:]
    (a + b + c + d).backward_sync()
    assert sorted(name for _, name, _ in log) == ["inner", "outer", "outer"]
    np.testing.assert_allclose(x.grad.numpy(), np.exp(2.0) + np.cos(2.0) - np.sin(2.0) + 1 - np.tanh(2.0) ** 2,
                               rtol=1e-5)


def test_one_instance_can_be_reentered() -> None:
    log: list[Any] = []
    hooks = recording_hooks(log)
    x = agrad.tensor([2.0], requires_grad=True)
    with hooks:
        with hooks:
            x.exp()
        x.sin()
    x.cos()
    assert len(log) == 2


@pytest.mark.filterwarnings("ignore::agrad.BlockingCallWarning")  # a blocking twin on the loop, on purpose
@pytest.mark.anyio
async def test_concurrent_tasks_see_only_their_own_hooks() -> None:
    logs: dict[str, list[Any]] = {"a": [], "b": [], "none": []}
    x = agrad.tensor([1.0], requires_grad=True)
    results: dict[str, agrad.Tensor] = {}

    async def record(name: str) -> None:
        # Each task enters its hooks (or none), then the three interleave op by op.
        ctx = recording_hooks(logs[name], name) if name != "none" else None
        if ctx is not None:
            ctx.__enter__()
        try:
            y = x
            for _ in range(3):
                y = y.exp() * 0.5
                await anyio.lowlevel.checkpoint()
            results[name] = y
        finally:
            if ctx is not None:
                ctx.__exit__(None, None, None)
        await y.backward(retain_graph=True)

    async with anyio.create_task_group() as tg:
        for name in logs:
            tg.start_soon(record, name)
    assert logs["none"] == []
    for name in "ab":
        assert {n for _, n, _ in logs[name]} == {name}
        # exp saves its output; the constant 0.5 is not packed
        assert [kind for kind, _, _ in logs[name]] == ["pack"] * 3 + ["unpack"] * 3
    np.testing.assert_allclose(x.grad.numpy(), 3 * agrad.autograd.grad_sync(results["a"], x)[0].numpy(),
                               rtol=1e-6)


def test_saved_tensor_is_not_kept_alive_by_the_graph() -> None:
    store: dict[int, np.ndarray] = {}

    def pack(t: agrad.Tensor) -> int:
        store[len(store)] = t.detach().numpy().copy()
        return len(store) - 1

    x = agrad.tensor([0.5, 1.5], requires_grad=True)
    with saved_tensors_hooks(pack, lambda key: agrad.from_numpy(store[key])):
        h = x * 2.0
        ref = weakref.ref(h)
        y = h.sin()
    del h
    gc.collect()
    assert ref() is None  # sin saved a copy, not the tensor
    y.sum().backward_sync()
    np.testing.assert_allclose(x.grad.numpy(), 2 * np.cos(np.array([1.0, 3.0], np.float32)), rtol=1e-6)


@pytest.mark.parametrize("op", ["exp", "sigmoid", "tanh", "custom"])
def test_saved_outputs_first_and_second_order(op: str) -> None:
    def f(x: agrad.Tensor) -> agrad.Tensor:
        return SQUARE.apply(x) if op == "custom" else getattr(x, op)()

    def grads(hooked: bool) -> tuple[np.ndarray, np.ndarray]:
        x = agrad.tensor([0.3, -1.2, 2.0], dtype=agrad.float64, requires_grad=True)
        log: list[Any] = []
        if hooked:
            with recording_hooks(log):
                y = f(x) * x
        else:
            y = f(x) * x
        (g,) = agrad.autograd.grad_sync(y.sum(), x, create_graph=True)
        assert g.requires_grad
        (gg,) = agrad.autograd.grad_sync(g.sum(), x)
        assert bool(log) == hooked
        return g.detach().numpy(), gg.numpy()

    plain, hooked = grads(False), grads(True)
    np.testing.assert_allclose(hooked[0], plain[0], rtol=1e-12)
    np.testing.assert_allclose(hooked[1], plain[1], rtol=1e-12)


def test_leaf_saved_under_hooks_accumulates_into_the_leaf_with_create_graph() -> None:
    # pack/unpack hand back a detached tensor: the double backward must still
    # reach x (the unpacked tensor takes x's place in the graph).
    x = agrad.tensor([1.0, 2.0], dtype=agrad.float64, requires_grad=True)
    with saved_tensors_hooks(lambda t: t.detach(), lambda t: t):
        y = (x * x * x).sum()
    (g,) = agrad.autograd.grad_sync(y, x, create_graph=True)
    g.sum().backward_sync()
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 12.0])


@requires_torch
def test_unpack_returning_another_tensor_matches_torch() -> None:
    def run(lib: Any) -> tuple[Any, Any]:
        x = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64, requires_grad=True)
        y = lib.tensor([4.0, 5.0, 6.0], dtype=lib.float64, requires_grad=True)
        with lib.autograd.graph.saved_tensors_hooks(lambda t: t.detach() + 1, lambda t: t * 10):
            z = (x * y).exp()
        loss = z.sum()
        loss.backward_sync() if lib is agrad else loss.backward()
        return x.grad, y.grad

    ax, ay = run(agrad)
    tx, ty = run(torch)
    assert_close(ax, tx)
    assert_close(ay, ty)


@requires_torch
def test_custom_function_saves_match_torch_with_hooks() -> None:
    def run(lib: Any) -> Any:
        square = make_square(lib)
        x = lib.tensor([0.5, 1.5], dtype=lib.float64, requires_grad=True)
        with lib.autograd.graph.saved_tensors_hooks(lambda t: t.detach(), lambda t: t):
            y = square.apply(x).sum()
        (g,) = lib.autograd.grad(y, x, create_graph=True) if lib is torch else agrad.autograd.grad_sync(
            y, x, create_graph=True)
        (gg,) = lib.autograd.grad(g.sum(), x) if lib is torch else agrad.autograd.grad_sync(g.sum(), x)
        return g.detach(), gg

    for a, t in zip(run(agrad), run(torch)):
        assert_close(a, t)


def test_unpack_hook_must_return_a_tensor() -> None:
    x = agrad.ones(3, requires_grad=True)
    with saved_tensors_hooks(lambda t: t.detach(), lambda t: 5):
        y = x.exp()
    with pytest.raises(TypeError, match="Output of saved tensor unpack_hook expected to be a Tensor but got "
                                        "result of type int"):
        y.sum().backward_sync()


def test_pack_hook_runs_without_grad_and_must_not_modify_its_input() -> None:
    modes = []

    def pack(t: agrad.Tensor) -> agrad.Tensor:
        modes.append(agrad.is_grad_enabled())
        return t.detach()

    x = agrad.ones(2, requires_grad=True)
    with saved_tensors_hooks(pack, lambda t: t):
        (x * 2.0).exp()
    assert modes and not any(modes)

    def modifying(t: agrad.Tensor) -> agrad.Tensor:
        t.add_(1)
        return t

    h = agrad.ones(2, requires_grad=True) * 1.0
    with saved_tensors_hooks(modifying, lambda t: t), pytest.raises(
            RuntimeError, match="A saved tensor pack hook is modifying its input in place"):
        h.sin()


def test_version_check_is_skipped_with_hooks_as_in_pytorch() -> None:
    x = agrad.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2.0
    z = y * y
    with agrad.no_grad():
        y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward_sync()
    y = x * 2.0
    with saved_tensors_hooks(lambda t: t.detach(), lambda t: t):
        z = y * y
    with agrad.no_grad():
        y.add_(1)
    z.sum().backward_sync()  # the hooks see the modified data: 4 * y = 4 * (2x + 1)
    np.testing.assert_allclose(x.grad.numpy(), [12.0, 20.0])


def test_disable_saved_tensors_hooks() -> None:
    with disable_saved_tensors_hooks("hooks are off here"):
        with pytest.raises(RuntimeError, match="^hooks are off here$"):
            with saved_tensors_hooks(lambda t: t, lambda t: t):
                pass
        with disable_saved_tensors_hooks("inner"):
            with pytest.raises(RuntimeError, match="^inner$"):
                saved_tensors_hooks(lambda t: t, lambda t: t).__enter__()
        with pytest.raises(RuntimeError, match="^hooks are off here$"):
            saved_tensors_hooks(lambda t: t, lambda t: t).__enter__()
    with saved_tensors_hooks(lambda t: t, lambda t: t):
        with pytest.raises(RuntimeError, match="^active$"):
            with disable_saved_tensors_hooks("active"):
                pass
