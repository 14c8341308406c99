"""Hooks: tensor hooks, retain_grad, Node hooks, post-accumulate-grad hooks, queue_callback.

Each scenario is written once against a library module (``agrad`` or
``torch``): it records what every hook saw, in order, into a log.  The same
scenario run by PyTorch gives the expected log, so order and values are
checked against the oracle where torch has the same API; the assertions that
do not need torch state the expected values directly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import agrad
from tests.helpers import requires_torch, torch

pytestmark = pytest.mark.anyio


def vec(lib: Any, *values: float) -> Any:
    return lib.tensor(list(values), dtype=lib.float64, requires_grad=True)


def queue_callback(lib: Any) -> Callable[[Callable[[], None]], None]:
    if lib is agrad:
        return agrad.autograd.queue_callback
    return torch.autograd.Variable._execution_engine.queue_callback


def val(t: Any) -> Any:
    """A gradient as a plain list (None stays None), for logs comparable across libraries."""
    return None if t is None else t.detach().tolist()


async def run_backward(lib: Any, api: Any, root: Any, **kwargs: Any) -> None:
    if lib is agrad:
        await api.tensor_backward(root, **kwargs)
    else:
        root.backward(**kwargs)


async def run_grad(lib: Any, api: Any, outputs: Any, inputs: Any, **kwargs: Any) -> tuple:
    if lib is agrad:
        return await api.grad(outputs, inputs, **kwargs)
    return torch.autograd.grad(outputs, inputs, **kwargs)


# -- scenarios: (lib, api) -> log -------------------------------------------------------------
async def every_kind_of_hook(lib: Any, api: Any) -> list:
    """All hook kinds on one small graph: the order they run in and what they see."""
    log: list = []
    x = vec(lib, 1.0, 2.0)
    a = x * 2
    a.register_hook(lambda g: log.append(("a hook 1", val(g))) or g * 10)
    a.retain_grad()
    a.register_hook(lambda g: log.append(("a hook 2", val(g))))
    x.register_hook(lambda g: log.append(("x hook", val(g))))
    x.register_post_accumulate_grad_hook(lambda t: log.append(("x post-accumulate", val(t.grad))))
    a.grad_fn.register_prehook(lambda go: log.append(("a node prehook", [val(g) for g in go])))
    a.grad_fn.register_hook(lambda gi, go: log.append(("a node hook", [val(g) for g in gi], [val(g) for g in go])))

    def after() -> None:
        log.append(("callback", val(x.grad), val(a.grad)))

    b = (a * a).sum()
    b.grad_fn.register_hook(lambda gi, go: queue_callback(lib)(after))
    await run_backward(lib, api, b)
    log.append(("end", val(x.grad), val(a.grad)))
    return log


async def leaf_hooks_replace_and_chain(lib: Any, api: Any) -> list:
    log: list = []
    x = vec(lib, 1.0, 2.0)
    x.register_hook(lambda g: log.append(("first", val(g))) or g + 1)
    x.register_hook(lambda g: log.append(("second", val(g))))  # None keeps the gradient
    x.register_hook(lambda g: log.append(("third", val(g))) or g * 3)
    await run_backward(lib, api, (x * x).sum())
    log.append(("grad", val(x.grad)))
    return log


async def non_leaf_hook_changes_what_flows_on(lib: Any, api: Any) -> list:
    log: list = []
    x, y = vec(lib, 1.0, 2.0), vec(lib, 3.0, 4.0)
    h = x * y
    h.register_hook(lambda g: log.append(("h", val(g))) or g * -1)
    out = (h * h).sum() + (y * 5).sum()
    await run_backward(lib, api, out)
    log.append(("grads", val(x.grad), val(y.grad)))
    return log


async def hook_registered_after_retain_grad(lib: Any, api: Any) -> list:
    # Since torch 2.0 the retained .grad is the gradient after all tensor hooks,
    # whatever the registration order.
    x = vec(lib, 1.0, 2.0)
    a = x * 2
    a.retain_grad()
    a.register_hook(lambda g: g * 10)
    loss = (a * a).sum()
    await run_backward(lib, api, loss, retain_graph=True)
    log: list = [("after one", val(a.grad), val(x.grad))]
    await run_backward(lib, api, loss)
    log.append(("after two", val(a.grad), val(x.grad)))
    return log


async def node_hooks_replace_gradients(lib: Any, api: Any) -> list:
    log: list = []
    x, y = vec(lib, 1.0, 2.0), vec(lib, 3.0, 4.0)
    m = x * y
    m.grad_fn.register_hook(lambda gi, go: (gi[0] * 100, None))
    s = (m * 3).sum()
    s.grad_fn.register_prehook(lambda go: (go[0] * 7,))
    await run_backward(lib, api, s)
    log.append(("grads", val(x.grad), val(y.grad)))
    return log


async def leaf_used_twice_hooked_once(lib: Any, api: Any) -> list:
    log: list = []
    x = vec(lib, 1.0, 2.0)
    x.register_hook(lambda g: log.append(("x", val(g))))
    await run_backward(lib, api, (x * 2 + x * x).sum())
    return log


async def post_accumulate_sees_accumulated_grad(lib: Any, api: Any) -> list:
    log: list = []
    x = vec(lib, 1.0, 2.0)
    x.grad = lib.tensor([10.0, 10.0], dtype=lib.float64)
    handle = x.register_post_accumulate_grad_hook(lambda t: log.append(("post", val(t.grad))))
    await run_backward(lib, api, (x * x).sum())
    handle.remove()
    await run_backward(lib, api, (x * x).sum())
    log.append(("grad", val(x.grad)))
    return log


async def hooks_during_grad(lib: Any, api: Any) -> list:
    # grad(): leaf tensor hooks run (and may replace the result); .grad and
    # post-accumulate-grad hooks are untouched; callbacks still run.
    log: list = []
    x = vec(lib, 1.0, 2.0)
    x.register_hook(lambda g: log.append(("x hook", val(g))) or g * 2)
    x.register_post_accumulate_grad_hook(lambda t: log.append("post-accumulate"))
    a = x * 3
    a.register_hook(lambda g: queue_callback(lib)(lambda: log.append("callback")))
    (g,) = await run_grad(lib, api, (a * x).sum(), x)
    log.append(("result", val(g), val(x.grad)))
    return log


async def callbacks_queued_from_callbacks(lib: Any, api: Any) -> list:
    log: list = []
    x = vec(lib, 1.0, 2.0)
    q = queue_callback(lib)

    def first() -> None:
        log.append("cb1")
        q(lambda: log.append("cb3"))

    def hook(g: Any) -> None:
        q(first)
        q(lambda: log.append("cb2"))

    a = x * 2
    a.register_hook(hook)
    await run_backward(lib, api, a.sum())
    return log


async def removed_hooks_do_not_run(lib: Any, api: Any) -> list:
    log: list = []
    x = vec(lib, 1.0, 2.0)
    a = x * 2
    handles = [
        x.register_hook(lambda g: log.append("x hook") or g * 100),
        a.register_hook(lambda g: log.append("a hook") or g * 100),
        a.grad_fn.register_hook(lambda gi, go: log.append("node hook")),
        a.grad_fn.register_prehook(lambda go: log.append("node prehook")),
        x.register_post_accumulate_grad_hook(lambda t: log.append("post-accumulate")),
    ]
    a.register_hook(lambda g: log.append("kept"))
    for h in handles:
        h.remove()
    handles[0].remove()  # removing twice is harmless
    await run_backward(lib, api, a.sum())
    log.append(("grad", val(x.grad)))
    return log


SCENARIOS = [every_kind_of_hook, leaf_hooks_replace_and_chain, non_leaf_hook_changes_what_flows_on,
             hook_registered_after_retain_grad, node_hooks_replace_gradients, leaf_used_twice_hooked_once,
             post_accumulate_sees_accumulated_grad, hooks_during_grad, callbacks_queued_from_callbacks,
             removed_hooks_do_not_run]


@requires_torch
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.__name__ for s in SCENARIOS])
async def test_hooks_match_torch(api, scenario) -> None:
    assert await scenario(agrad, api) == await scenario(torch, None)


# -- the same behaviours, stated directly (these run without torch) ---------------------------------
async def test_every_kind_of_hook_in_order(api) -> None:
    assert await every_kind_of_hook(agrad, api) == [
        ("a hook 1", [4.0, 8.0]),
        ("a hook 2", [40.0, 80.0]),
        ("a node prehook", [[40.0, 80.0]]),
        ("a node hook", [[80.0, 160.0], None], [[40.0, 80.0]]),
        ("x hook", [80.0, 160.0]),
        ("x post-accumulate", [80.0, 160.0]),
        ("callback", [80.0, 160.0], [40.0, 80.0]),
        ("end", [80.0, 160.0], [40.0, 80.0]),
    ]


async def test_leaf_hook_replacement_reaches_grad(api) -> None:
    assert await leaf_hooks_replace_and_chain(agrad, api) == [
        ("first", [2.0, 4.0]), ("second", [3.0, 5.0]), ("third", [3.0, 5.0]), ("grad", [9.0, 15.0])]


async def test_non_leaf_hook_replacement_flows_to_leaves(api) -> None:
    # d/dx (xy)^2 = 2xy*y, negated by the hook; y also gets +5 from the other branch.
    assert await non_leaf_hook_changes_what_flows_on(agrad, api) == [
        ("h", [6.0, 16.0]), ("grads", [-18.0, -64.0], [-6.0 + 5.0, -32.0 + 5.0])]


async def test_retained_grad_is_after_hooks_and_accumulates(api) -> None:
    assert await hook_registered_after_retain_grad(agrad, api) == [
        ("after one", [40.0, 80.0], [80.0, 160.0]), ("after two", [80.0, 160.0], [160.0, 320.0])]


async def test_node_hooks_replace_gradients(api) -> None:
    assert await node_hooks_replace_gradients(agrad, api) == [("grads", [6300.0, 8400.0], None)]


async def test_post_accumulate_grad_hook_runs_after_grad_is_updated(api) -> None:
    assert await post_accumulate_sees_accumulated_grad(agrad, api) == [
        ("post", [12.0, 14.0]), ("grad", [14.0, 18.0])]


async def test_queue_callback_runs_once_after_commit_in_fifo_order(api) -> None:
    assert await callbacks_queued_from_callbacks(agrad, api) == ["cb1", "cb2", "cb3"]


async def test_removed_hooks_do_not_run(api) -> None:
    assert await removed_hooks_do_not_run(agrad, api) == ["kept", ("grad", [2.0, 2.0])]


async def test_retain_grad(api) -> None:
    x = vec(agrad, 1.0, 2.0)
    a = x * 3
    b = a.tanh()
    assert not a.retains_grad
    a.retain_grad()
    a.retain_grad()  # twice is the same as once
    x.retain_grad()  # a no-op on a leaf
    assert a.retains_grad and not x.retains_grad
    await api.tensor_backward((b * 2).sum())
    expected = 2 * (1 - b.detach() * b.detach())
    assert a.grad.tolist() == expected.tolist()
    assert not a.grad.requires_grad
    # Without retain_grad, a non-leaf's .grad stays None and reading it warns, as in torch.
    with pytest.warns(UserWarning, match="is not a leaf Tensor is being accessed"):
        assert b.grad is None


async def test_leaf_hook_registered_after_its_node_exists(api) -> None:
    # A leaf's AccumulateGrad node is created by the first op using it; a hook
    # registered afterwards must still run, as one registered before does.
    x, y = vec(agrad, 1.0, 2.0), vec(agrad, 1.0, 2.0)
    y.register_hook(lambda g: g * 2)
    out = (x * x).sum() + (y * y).sum()
    x.register_hook(lambda g: g * 2)
    await api.tensor_backward(out)
    assert x.grad.tolist() == y.grad.tolist() == [4.0, 8.0]


async def test_hook_may_not_change_the_shape(api) -> None:
    x = vec(agrad, 1.0, 2.0)
    a = x * 2
    a.register_hook(lambda g: g.sum())
    with pytest.raises(RuntimeError, match="hook '<lambda>' has changed the size of value"):  # PyTorch's words
        await api.tensor_backward(a.sum())
    assert x.grad is None


async def test_queue_callback_sees_committed_grads_of_all_leaves(api) -> None:
    x, y = vec(agrad, 1.0, 2.0), vec(agrad, 3.0, 4.0)
    seen = []
    h = x * 2
    h.register_hook(lambda g: agrad.autograd.queue_callback(lambda: seen.append((val(x.grad), val(y.grad)))))
    await api.tensor_backward((h * y).sum())
    assert seen == [([6.0, 8.0], [2.0, 4.0])]


async def test_queue_callback_does_not_run_after_a_failed_backward(api) -> None:
    x = vec(agrad, 1.0, 2.0)
    log = []
    a = x * 2
    a.register_hook(lambda g: agrad.autograd.queue_callback(lambda: log.append("callback")))

    def boom(g: Any) -> None:
        raise KeyError("boom")

    x.register_hook(boom)
    with pytest.raises(KeyError):
        await api.tensor_backward((a * 3).sum())
    assert log == []


def test_queue_callback_outside_a_backward_raises() -> None:
    if torch is not None:
        with pytest.raises(RuntimeError, match="Final callbacks can only be installed during backward pass"):
            torch.autograd.Variable._execution_engine.queue_callback(lambda: None)
    with pytest.raises(RuntimeError, match="Final callbacks can only be installed during backward pass"):
        agrad.autograd.queue_callback(lambda: None)


async def test_queue_callback_after_a_backward_has_finished_raises(api) -> None:
    x = vec(agrad, 1.0)
    await api.tensor_backward((x * 2).sum())
    with pytest.raises(RuntimeError, match="Final callbacks can only be installed during backward pass"):
        agrad.autograd.queue_callback(lambda: None)


@pytest.mark.parametrize("lib_name", ["agrad", "torch"])
def test_hook_registration_errors(lib_name: str) -> None:
    if lib_name == "torch" and torch is None:
        pytest.skip("PyTorch (the test oracle) is not installed")
    lib = agrad if lib_name == "agrad" else torch
    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't require gradient"):
        lib.ones(2).register_hook(lambda g: g)
    x = vec(lib, 1.0)
    with pytest.raises(RuntimeError, match="post accumulate grad hooks cannot be registered on non-leaf tensors"):
        (x * 2).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(RuntimeError, match="can't retain_grad on Tensor that has requires_grad=False"):
        lib.ones(2).retain_grad()
