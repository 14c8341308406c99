"""Errors of the backward: PyTorch's conditions, the gist of its messages, raised at the call.

Argument errors (non-scalar root without a gradient, a gradient of the wrong
shape or count, tensors that do not require grad, empty ``inputs``, unused
inputs) are raised by the entry point itself.  Errors raised while the graph
runs (freed buffers, a saved tensor modified in place, an exception in a hook
or a custom backward) reach the caller with their own type, name the failing
node in ``__notes__``, and leave every ``.grad`` exactly as it was; the engine
stays usable afterwards.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel
import numpy as np
import pytest

import agrad
from tests.helpers import requires_torch, torch

pytestmark = pytest.mark.anyio

FREED = "Trying to backward through the graph a second time"
INPLACE = "one of the variables needed for gradient computation has been modified by an inplace operation"
UNUSED = "appears to not have been used in the graph. Set allow_unused=True if this is the desired behavior"
IMPLICIT = "grad can be implicitly created only for scalar outputs"
NO_GRAD_FN = "element {} of tensors does not require grad and does not have a grad_fn"


def vec(*values: float) -> agrad.Tensor:
    return agrad.tensor(list(values), dtype=agrad.float64, requires_grad=True)


def torch_message(fn: Callable[[], Any]) -> str:
    """The message of the RuntimeError (or ValueError) that torch raises for ``fn``."""
    with pytest.raises((RuntimeError, ValueError)) as info:
        fn()
    return str(info.value)


# -- argument errors -----------------------------------------------------------------------------
async def test_backward_of_non_scalar_without_gradient(api) -> None:
    x = vec(1.0, 2.0)
    if torch is not None:
        assert IMPLICIT in torch_message(lambda: (torch.ones(2, requires_grad=True) * 2).backward())
    with pytest.raises(RuntimeError, match=IMPLICIT):
        await api.tensor_backward(x * 2)
    with pytest.raises(RuntimeError, match=IMPLICIT):
        await api.backward([(x * 2).sum(), x * 3])
    with pytest.raises(RuntimeError, match=IMPLICIT):
        await api.grad(x * 2, x)
    assert x.grad is None


async def test_single_element_non_scalar_root_needs_no_gradient(api) -> None:
    x = vec(3.0)
    await api.tensor_backward(x * x)  # shape (1,): implicitly ones, as in torch
    assert x.grad.tolist() == [6.0]


@pytest.mark.parametrize("second", ["backward", "grad"])
async def test_second_backward_through_freed_buffers(api, second: str) -> None:
    x = vec(1.0, 2.0)
    y = (x.exp() * x).sum()
    await api.tensor_backward(y)
    before = x.grad.tolist()
    with pytest.raises(RuntimeError, match=FREED) as info:
        if second == "backward":
            await api.tensor_backward(y)
        else:
            await api.grad(y, x)
    assert "retain_graph=True" in str(info.value)
    assert x.grad.tolist() == before


async def test_grad_frees_buffers_too(api) -> None:
    x = vec(1.0, 2.0)
    y = (x * x).sum()
    await api.grad(y, x)
    with pytest.raises(RuntimeError, match=FREED):
        await api.tensor_backward(y)
    assert x.grad is None


@pytest.mark.parametrize("bumps", [1, 2])
async def test_saved_tensor_modified_in_place(api, bumps: int) -> None:
    x = vec(1.0, 2.0)
    a = x * 1.0
    b = a.log()  # saves ``a``
    for _ in range(bumps):
        a.add_(1.0)
    expected = rf"is at version {bumps}; expected version 0 instead"
    if torch is not None:
        tx = torch.tensor([1.0, 2.0], requires_grad=True)
        ta = tx * 1.0
        tb = ta.log()
        for _ in range(bumps):
            ta.add_(1.0)
        msg = torch_message(lambda: tb.sum().backward())
        assert INPLACE in msg and f"is at version {bumps}; expected version 0 instead" in msg
    with pytest.raises(RuntimeError, match=INPLACE) as info:
        await api.tensor_backward(b.sum())
    assert info.match(expected)
    assert x.grad is None


def _in_place_case(lib: Any, case: str) -> Any:
    """A loss whose backward unpacks a tensor modified in place since it was saved."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    if case == "saved output":  # sigmoid saves its result
        y = x.sigmoid()
        y.add_(1.0)
        return y.sum()
    if case == "saved input":  # a * a saves a, whose grad_fn is the in-place op's now
        a = x * 1.0
        loss = (a * a).sum()
        a.add_(1.0)
        return loss
    w = lib.tensor([1.0, 2.0])  # a leaf that needs no grad: no grad_fn to name
    loss = (x * w).sum()
    w.add_(1.0)
    return loss


@requires_torch
@pytest.mark.parametrize("case", ["saved output", "saved input", "saved constant"])
def test_in_place_message_names_the_op_as_torch_does(case: str) -> None:
    theirs = torch_message(lambda: _in_place_case(torch, case).backward())
    with pytest.raises(RuntimeError) as info:
        _in_place_case(agrad, case).backward_sync()
    assert str(info.value).split(" Hint:")[0] == theirs.split(" Hint:")[0].replace("torch.", "agrad.")


async def test_modifying_a_tensor_not_saved_is_fine(api) -> None:
    x = vec(1.0, 2.0)
    a = x * 1.0
    b = a.exp()  # saves its output, not ``a``
    a.add_(1.0)
    await api.tensor_backward(b.sum())
    np.testing.assert_allclose(x.grad.numpy(), np.exp([1.0, 2.0]))


@pytest.mark.parametrize("allow_unused", [None, False], ids=["allow_unused=None", "allow_unused=False"])
@pytest.mark.parametrize("unused_at", [0, 1])
async def test_unused_input_without_allow_unused(api, allow_unused, unused_at: int) -> None:
    x, unused = vec(1.0, 2.0), vec(5.0)
    inputs = [unused, x] if unused_at == 0 else [x, unused]
    with pytest.raises(RuntimeError, match=UNUSED) as info:
        await api.grad((x * x).sum(), inputs, allow_unused=allow_unused)
    assert info.match(f"at index {unused_at}")
    if torch is not None:
        tx, tu = torch.ones(2, requires_grad=True), torch.ones(1, requires_grad=True)
        t_inputs = [tu, tx] if unused_at == 0 else [tx, tu]
        assert f"index {unused_at} {UNUSED}" in torch_message(
            lambda: torch.autograd.grad((tx * tx).sum(), t_inputs, allow_unused=allow_unused))


@pytest.mark.parametrize("entry", ["Tensor.backward", "autograd.backward", "grad"])
async def test_output_not_requiring_grad(api, entry: str) -> None:
    x = vec(1.0, 2.0)
    const = agrad.tensor(1.0)
    with pytest.raises(RuntimeError, match=NO_GRAD_FN.format(0)):
        if entry == "Tensor.backward":
            await api.tensor_backward(const)
        elif entry == "autograd.backward":
            await api.backward([const, (x * x).sum()])
        else:
            await api.grad(const, x)
    with pytest.raises(RuntimeError, match=NO_GRAD_FN.format(1)):
        await api.backward([(x * x).sum(), const])
    with agrad.no_grad():
        recorded_nothing = (x * x).sum()
    with pytest.raises(RuntimeError, match=NO_GRAD_FN.format(0)):
        await api.tensor_backward(recorded_nothing)
    assert x.grad is None


async def test_grad_input_not_requiring_grad(api) -> None:
    x = vec(1.0, 2.0)
    const = agrad.tensor([1.0, 2.0], dtype=agrad.float64)
    if torch is not None:
        tx = torch.ones(2, requires_grad=True)
        assert "One of the differentiated Tensors does not require grad" in torch_message(
            lambda: torch.autograd.grad((tx * 2).sum(), [tx, torch.ones(2)]))
    with pytest.raises(RuntimeError, match="One of the differentiated Tensors does not require grad"):
        await api.grad((x * const).sum(), [x, const])


async def test_backward_inputs_not_requiring_grad(api) -> None:
    # torch raises a RuntimeError here too (its message comes from retain_grad:
    # "can't retain_grad on Tensor that has requires_grad=False").
    x = vec(1.0, 2.0)
    with pytest.raises(RuntimeError, match="does not require grad|requires_grad=False"):
        await api.tensor_backward((x * 2).sum(), inputs=[x, agrad.tensor([1.0])])
    assert x.grad is None


@pytest.mark.parametrize("entry", ["Tensor.backward", "autograd.backward", "grad"])
async def test_supplied_gradient_of_wrong_shape(api, entry: str) -> None:
    x = vec(1.0, 2.0)
    y = x * 2
    g = agrad.ones(3, dtype=agrad.float64)
    pattern = r"Mismatch in shape: grad_output\[0\] has a shape of .*3.* and output\[0\] has a shape of .*2"
    if torch is not None:
        tx = torch.ones(2, requires_grad=True)
        assert "Mismatch in shape: grad_output[0] has a shape of" in torch_message(
            lambda: (tx * 2).backward(torch.ones(3)))
    with pytest.raises(RuntimeError, match=pattern):
        if entry == "Tensor.backward":
            await api.tensor_backward(y, g)
        elif entry == "autograd.backward":
            await api.backward([y], [g])
        else:
            await api.grad(y, x, g)
    assert x.grad is None


@pytest.mark.parametrize("entry", ["autograd.backward", "grad"])
async def test_gradient_count_mismatch(api, entry: str) -> None:
    x = vec(1.0, 2.0)
    roots = [(x * 2).sum(), (x * 3).sum()]
    one = [agrad.tensor(1.0, dtype=agrad.float64)]
    if torch is not None:
        tx = torch.ones(2, requires_grad=True)
        assert "got 2 tensors and 1 gradients" in torch_message(
            lambda: torch.autograd.backward([(tx * 2).sum(), (tx * 3).sum()], [torch.tensor(1.0)]))
    with pytest.raises(RuntimeError, match="got 2 tensors and 1 gradients"):
        if entry == "grad":
            await api.grad(roots, x, one)
        else:
            await api.backward(roots, one)
    assert x.grad is None


@pytest.mark.parametrize("entry", ["backward", "grad"])
async def test_empty_inputs(api, entry: str) -> None:
    x = vec(1.0, 2.0)
    message = f"`inputs` argument to `{entry}()` cannot be empty."
    if torch is not None:
        tx = torch.ones(2, requires_grad=True)
        call = (lambda: (tx * 2).sum().backward(inputs=[])) if entry == "backward" else (
            lambda: torch.autograd.grad((tx * 2).sum(), []))
        assert message in torch_message(call)
    with pytest.raises(RuntimeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        if entry == "backward":
            await api.tensor_backward((x * 2).sum(), inputs=[])
        else:
            await api.grad((x * 2).sum(), [])


async def test_materialize_grads_with_allow_unused_false(api) -> None:
    x = vec(1.0, 2.0)
    message = "Expected allow_unused to be True or not passed when materialize_grads=True"
    if torch is not None:
        tx = torch.ones(2, requires_grad=True)
        with pytest.raises(ValueError, match=message):
            torch.autograd.grad((tx * 2).sum(), tx, allow_unused=False, materialize_grads=True)
    with pytest.raises(ValueError, match=message):
        await api.grad((x * 2).sum(), x, allow_unused=False, materialize_grads=True)


async def test_argument_errors_do_not_run_anything(api) -> None:
    # A failed argument check happens before any node runs: hooks stay silent
    # and the graph is still intact for a correct call.
    x = vec(1.0, 2.0)
    fired = []
    x.register_hook(lambda g: fired.append(g))
    y = x * x
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        await api.tensor_backward(y, agrad.ones(5, dtype=agrad.float64))
    with pytest.raises(RuntimeError, match=IMPLICIT):
        await api.tensor_backward(y)
    assert fired == []
    await api.tensor_backward(y, agrad.ones(2, dtype=agrad.float64))
    assert len(fired) == 1 and x.grad.tolist() == [2.0, 4.0]


# -- exceptions raised while the graph runs --------------------------------------------------------
class Boom(ValueError):
    """The error a failing node raises (a ValueError subclass, to check the type survives)."""


class Failing(agrad.autograd.Function):
    """Identity whose backward raises :class:`Boom`."""

    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        raise Boom("boom in Function.backward")


class FailingAsync(agrad.autograd.Function):
    """Identity whose ``async def backward`` raises :class:`Boom` after a checkpoint."""

    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    async def backward(ctx, g):
        await anyio.lowlevel.checkpoint()
        raise Boom("boom in async Function.backward")


def _raise(*_: Any) -> None:
    raise Boom("boom in a hook")


def fail_via(where: str, h: agrad.Tensor) -> tuple[agrad.Tensor, str]:
    """Make the backward fail at ``h`` (a non-leaf); return the tensor to continue
    the forward from and the name of the node that will fail."""
    if where == "Function.backward":
        return Failing.apply(h), "FailingBackward"
    if where == "async Function.backward":
        return FailingAsync.apply(h), "FailingAsyncBackward"
    if where == "tensor hook":
        h.register_hook(_raise)
    elif where == "node prehook":
        h.grad_fn.register_prehook(_raise)
    elif where == "node post hook":
        h.grad_fn.register_hook(_raise)
    return h, h.grad_fn.name()


FAILURES = ["Function.backward", "async Function.backward", "tensor hook", "node prehook", "node post hook"]


def deep_model(where: str) -> tuple[dict[str, agrad.Tensor], agrad.Tensor, agrad.Tensor, agrad.Tensor, str]:
    """A 3-layer model whose backward fails at the first layer (deep in the graph),
    after the gradients of the later layers' leaves and of a retained
    intermediate have been computed."""
    rng = np.random.default_rng(0)
    p = {k: agrad.tensor(rng.standard_normal(s), requires_grad=True)
         for k, s in [("w0", (4, 3)), ("w1", (4, 4)), ("w2", (2, 4)), ("b2", (2,))]}
    x = agrad.tensor(rng.standard_normal((5, 3)))
    h0 = agrad.tanh(x @ p["w0"].transpose(0, 1))
    h0, failing = fail_via(where, h0)
    h1 = agrad.tanh(h0 @ p["w1"].transpose(0, 1))
    h1.retain_grad()
    out = h1 @ p["w2"].transpose(0, 1) + p["b2"]
    loss = (out * out).mean()
    return p, h1, loss, out, failing


@pytest.mark.parametrize("where", FAILURES)
async def test_exception_in_a_node_reaches_the_caller_and_changes_no_grad(api, where: str) -> None:
    p, h1, loss, out, failing = deep_model(where)
    # A first backward through the later layers only: h1 and the leaves get a .grad.
    await api.tensor_backward((out * 3).sum(), inputs=[h1, p["w2"], p["b2"]], retain_graph=True)
    p["w0"].grad = agrad.full((4, 3), 7.0, dtype=agrad.float64)
    snapshot = {k: None if t.grad is None else t.grad.numpy().copy() for k, t in p.items()}
    h1_grad = h1.grad.numpy().copy()
    assert p["w1"].grad is None

    with pytest.raises(Boom) as info:
        await api.tensor_backward(loss, retain_graph=True)
    assert any(failing in note for note in getattr(info.value, "__notes__", ())), info.value.__notes__

    for k, t in p.items():
        if snapshot[k] is None:
            assert t.grad is None, k
        else:
            np.testing.assert_array_equal(t.grad.numpy(), snapshot[k], err_msg=k)
    np.testing.assert_array_equal(h1.grad.numpy(), h1_grad)


@pytest.mark.parametrize("where", FAILURES)
async def test_exception_in_grad_changes_no_retained_grad(api, where: str) -> None:
    p, h1, loss, _, failing = deep_model(where)
    with pytest.raises(Boom) as info:
        await api.grad(loss, [p["w0"], p["w2"]])
    assert any(failing in note for note in info.value.__notes__)
    assert h1.grad is None
    assert all(t.grad is None for t in p.values())


@pytest.mark.parametrize("where", FAILURES)
async def test_engine_works_after_a_failed_backward(api, where: str) -> None:
    x = vec(1.0, 2.0)
    h, _ = fail_via(where, x * 1.0)
    with pytest.raises(Boom):
        await api.tensor_backward((h * h).sum())
    assert x.grad is None
    # Another backward, on a fresh graph over the same leaf, succeeds.
    await api.tensor_backward((x * x * x).sum())
    assert x.grad.tolist() == [3.0, 12.0]
    (g,) = await api.grad((x * 5).sum(), x)
    assert g.tolist() == [5.0, 5.0]


async def test_error_names_the_innermost_failing_node(api) -> None:
    # The note names the node whose backward raised, not the node that started the backward.
    x = vec(1.0, 2.0)
    y = Failing.apply(x.tanh()).exp().sum()
    with pytest.raises(Boom) as info:
        await api.tensor_backward(y)
    notes = "\n".join(info.value.__notes__)
    assert "FailingBackward" in notes
    assert "SumBackward0" not in notes and "ExpBackward0" not in notes


async def test_freed_buffer_error_names_the_node(api) -> None:
    x = vec(1.0, 2.0)
    y = x.exp()
    ones = agrad.ones_like(y)
    await api.tensor_backward(y, ones)
    with pytest.raises(RuntimeError, match=FREED) as info:
        await api.tensor_backward(y, ones)
    assert any("ExpBackward0" in note for note in info.value.__notes__)


@requires_torch
async def test_exception_type_matches_torch(api) -> None:
    # torch lets a hook's exception reach the caller with its own type, too.
    tx = torch.ones(2, requires_grad=True)
    th = tx * 2
    th.register_hook(_raise)
    with pytest.raises(Boom):
        th.sum().backward()
    x = vec(1.0, 1.0)
    h = x * 2
    h.register_hook(_raise)
    with pytest.raises(Boom):
        await api.tensor_backward(h.sum())
