"""Input buffers: gradients arriving at one node are summed, in place only when
nothing else can see the buffered one (Note [Accumulating in place])."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import agrad
from agrad._ops import _registry

pytestmark = pytest.mark.anyio


def _leaf(n: int = 4) -> agrad.Tensor:
    return agrad.tensor(np.linspace(-1, 1, n), dtype=agrad.float64, requires_grad=True)


def _count_adds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    apply = _registry.apply

    def spy(op: Any, args: Any, attrs: Any) -> Any:
        seen.append(op.name)
        return apply(op, args, attrs)

    monkeypatch.setattr(_registry, "apply", spy)
    return seen


def test_a_leaf_used_many_times_sums_its_gradients_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    x = _leaf()
    ws = [agrad.tensor(np.full(4, k + 1.0), dtype=agrad.float64) for k in range(6)]
    loss = agrad.zeros((), dtype=agrad.float64)
    for w in ws:
        loss = loss + agrad.tanh(x * w).sum()
    ops = _count_adds(monkeypatch)
    loss.backward_sync()
    assert "add" not in ops  # each of the five later gradients summed by one numpy call
    xs = x.detach().numpy()
    expected = sum((1 - np.tanh(xs * (k + 1.0)) ** 2) * (k + 1.0) for k in range(6))
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-12)


def test_a_gradient_a_hook_kept_is_not_overwritten() -> None:
    x = _leaf()
    kept: list[agrad.Tensor] = []
    a = (x * 5.0).sum()  # recorded first, so it runs last: the kept gradient is buffered first
    y = x + 0.0  # AddBackward0 passes its gradient on as the same tensor
    y.register_hook(lambda g: kept.append(g))
    (a + (y * 3.0).sum()).backward_sync()
    np.testing.assert_array_equal(kept[0].numpy(), np.full(4, 3.0))
    np.testing.assert_array_equal(x.grad.numpy(), np.full(4, 8.0))


def test_the_callers_root_gradient_is_not_overwritten() -> None:
    x = _leaf()
    root = agrad.tensor(np.arange(4.0), dtype=agrad.float64)
    out = x + x * 2.0  # the root gradient reaches x's buffer as is, then x * 2's adds to it
    out.backward_sync(root)
    np.testing.assert_array_equal(root.numpy(), np.arange(4.0))
    np.testing.assert_array_equal(x.grad.numpy(), 3 * np.arange(4.0))


@pytest.mark.parametrize("repeat", [2, 3, 5])
def test_one_gradient_routed_to_several_inputs_is_summed_out_of_place(repeat: int) -> None:
    x = _leaf()
    h = x * 1.0
    total = h
    for _ in range(repeat - 1):
        total = total + h  # AddBackward0 returns the same tensor for both of its inputs
    total.sum().backward_sync()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(4, float(repeat)))


async def test_create_graph_records_the_sum() -> None:
    x = _leaf()
    loss = (x * x).sum() + (x * 3.0).sum()
    (gx,) = await agrad.autograd.grad(loss, x, create_graph=True)
    assert gx.grad_fn is not None
    (ggx,) = await agrad.autograd.grad(gx.sum(), x)
    np.testing.assert_array_equal(ggx.numpy(), np.full(4, 2.0))


def test_a_view_in_the_buffer_is_summed_out_of_place() -> None:
    x = _leaf()
    y = x.sum() + 0.0  # SumBackward0's gradient is a broadcast: read-only, never written
    (y + (x * 2.0).sum()).backward_sync()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(4, 3.0))

