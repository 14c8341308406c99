"""Views and in-place ops: shared memory and version counters, PyTorch's
in-place errors, and rebasing a base's history when a view is written in place
(CopySlices), each checked against PyTorch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
from agrad.autograd import gradcheck, gradgradcheck
from tests.helpers import requires_torch, torch


def _backward(lib: Any, t: Any) -> None:
    t.backward_sync() if lib is agrad else t.backward()


def write_through_slice(lib: Any, x: Any) -> Any:
    b = x * 2
    b[1:].mul_(3)
    return b


def leaf_buffer_gets_history(lib: Any, x: Any) -> Any:
    buf = lib.zeros(3, dtype=x.dtype)
    buf[1:].add_(x[:2])
    return buf * lib.tensor([1.0, 2.0, 3.0], dtype=x.dtype)


def base_modified_after_view(lib: Any, x: Any) -> Any:
    b = x * 2
    view = b[0:1]
    b.mul_(5)
    return view


def setitem_scalar(lib: Any, x: Any) -> Any:
    b = x * 2
    b[1] = 7.0
    return b


def setitem_from_graph(lib: Any, x: Any) -> Any:
    b = x * 2
    b[0:2] = x[1:] ** 2
    return b


def transposed_view_of_reshape(lib: Any, x: Any) -> Any:
    b = (x * 2).reshape(3, 1)
    b.transpose(0, 1).mul_(x.reshape(1, 3))
    return b


def advanced_setitem(lib: Any, x: Any) -> Any:
    b = x * 1
    b[lib.tensor([0, 2])] = lib.tensor([5.0, 6.0], dtype=x.dtype) * x[0:2]
    return b


def copy_into_view(lib: Any, x: Any) -> Any:
    b = x * x
    b[::2].copy_(x[1:] * 3)
    return b


def view_of_view(lib: Any, x: Any) -> Any:
    b = (x * 1).reshape(3, 1)
    b[1:].squeeze(1).mul_(x[:2])
    return b


def unbind_after_write(lib: Any, x: Any) -> Any:
    b = x * 2
    b[1:].mul_(3)
    first, *rest = b.unbind(0)  # one UnbindBackward0 on the CopySlices history
    return lib.stack([*rest, first * first])


SCENARIOS: list[Callable[[Any, Any], Any]] = [
    write_through_slice, leaf_buffer_gets_history, base_modified_after_view, setitem_scalar,
    setitem_from_graph, transposed_view_of_reshape, advanced_setitem, copy_into_view, view_of_view,
    unbind_after_write,
]


@requires_torch
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
def test_values_gradients_and_node_names_match_torch(scenario: Callable[[Any, Any], Any]) -> None:
    results = []
    for lib in (agrad, torch):
        x = lib.tensor([1.0, 2.0, 3.0], dtype=lib.float64, requires_grad=True)
        out = scenario(lib, x)
        name = out.grad_fn.name().replace("agrad::", "torch::")
        _backward(lib, (out * lib.arange(1, out.numel() + 1, dtype=lib.float64).reshape(out.shape)).sum())
        results.append((out.detach().numpy().copy(), x.grad.numpy().copy(), name))
    (ours, our_grad, our_name), (theirs, their_grad, their_name) = results
    np.testing.assert_allclose(ours, theirs)
    np.testing.assert_allclose(our_grad, their_grad)
    # PyTorch re-derives a view's grad_fn as an as_strided of the base;
    # agrad replays the view ops themselves (Note [View grad_fn regeneration]).
    if their_name != "AsStridedBackward0":
        assert our_name == their_name


@requires_torch
@pytest.mark.parametrize("lib_name", ["agrad", "torch"])
def test_writing_a_saved_output_through_a_view_is_detected(lib_name: str) -> None:
    lib = agrad if lib_name == "agrad" else torch
    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = x.exp()  # ExpBackward0 saves its output
    b[::2].copy_(x[1:] * 3)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        _backward(lib, b.sum())


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda f: f.__name__)
def test_gradcheck_through_in_place_views(scenario: Callable[[Any, Any], Any]) -> None:
    x = agrad.tensor([0.5, 1.5, -1.0], dtype=agrad.float64, requires_grad=True)
    assert gradcheck(lambda t: scenario(agrad, t), (x,))
    assert gradgradcheck(lambda t: scenario(agrad, t), (x,))


def test_views_share_memory_base_and_version() -> None:
    a = agrad.arange(6.0)
    r = a.reshape(2, 3)
    t = r.transpose(0, 1)
    assert r._is_view() and t._is_view() and not a._is_view()
    assert r._base is a and t._base is a
    t.mul_(2)
    assert a.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    assert a._version == r._version == t._version == 1


def test_copying_ops_are_not_views() -> None:
    a = agrad.arange(6.0).reshape(2, 3)
    assert not a.transpose(0, 1).reshape(6)._is_view()  # numpy must copy here, as torch does
    assert not a[agrad.tensor([0, 1])]._is_view()  # advanced indexing copies


@requires_torch
@pytest.mark.parametrize("lib_name", ["agrad", "torch"])
def test_in_place_on_leaf_view_raises(lib_name: str) -> None:
    lib = agrad if lib_name == "agrad" else torch
    x = lib.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad is being used in an in-place"):
        x[0:2].add_(1)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
        x.add_(1)
    with lib.no_grad():
        x[0:2].add_(1)
    assert x.tolist() == [2.0, 2.0, 1.0]


def test_modifying_a_saved_tensor_through_a_view_is_detected() -> None:
    x = agrad.ones(3, requires_grad=True)
    b = x * 2
    y = (b * b).sum()
    b[0:1].mul_(3)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward_sync()


def test_multi_output_views_regenerate_as_their_own_view_op() -> None:
    """After an in-place write into the base, PyTorch refuses to use an output of unbind or
    split; agrad re-derives it as its own select or slice (Note [Multi-output views])."""
    a = agrad.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=agrad.float64, requires_grad=True)
    b = a * 1
    row, col = b.unbind(0)[1], b.split(1, 1)[0]
    assert row.grad_fn.name() == "UnbindBackward0" and col.grad_fn.name() == "SplitBackward0"
    b.mul_(3)
    assert row.grad_fn.name() == "SelectBackward0" and col.grad_fn.name() == "SliceBackward0"
    assert row._version == col._version == b._version == 1
    loss = (row * col.squeeze(1)).sum()  # 9 * (a10 * a00 + a11 * a10)
    assert loss.item() == 135.0
    loss.backward_sync()
    assert a.grad.tolist() == [[27.0, 0.0], [45.0, 27.0]]

    def regenerated(t: Any) -> Any:
        u = t * 1
        pieces = u.unbind(1)
        u.mul_(2)
        return pieces[0] * pieces[1]

    assert gradcheck(regenerated, (a.detach().requires_grad_(),))
    assert gradgradcheck(regenerated, (a.detach().requires_grad_(),))
