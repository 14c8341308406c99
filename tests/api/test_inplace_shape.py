"""In-place view ops (``t_``, ``transpose_``, ``swapaxes_``, ``swapdims_``,
``squeeze_``, ``unsqueeze_``) against PyTorch: the tensor itself returned,
its new shape over the same memory, its version, its node, gradients through
it and through views (made of it before, and views it is), and the errors.
See Note [In-place view ops] in ``agrad/_tensor.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
from agrad.autograd import gradcheck, gradgradcheck
from tests.helpers import requires_torch, torch

pytestmark = requires_torch

# (method, args, input shape)
CASES = [
    ("t_", (), (2, 3)),
    ("t_", (), (3,)),
    ("t_", (), ()),
    ("t_", (), (0, 2)),
    ("transpose_", (0, 1), (2, 3)),
    ("transpose_", (-1, 0), (2, 3, 4)),
    ("transpose_", (1, 1), (2, 3)),
    ("transpose_", (0, -1), ()),
    ("swapaxes_", (2, 0), (2, 3, 4)),
    ("swapdims_", (0, 1), (2, 3)),
    ("squeeze_", (), (2, 1, 3, 1)),
    ("squeeze_", (1,), (2, 1, 3)),
    ("squeeze_", (0,), (2, 1, 3)),  # not of size one: a no-op, still recorded
    ("squeeze_", ((0, 2),), (1, 3, 1)),
    ("squeeze_", (0,), ()),
    ("squeeze_", (), (0, 1)),
    ("unsqueeze_", (0,), (2, 3)),
    ("unsqueeze_", (-1,), (2, 3)),
    ("unsqueeze_", (0,), ()),
    ("unsqueeze_", (1,), (0, 2)),
]
IDS = [f"{m}{a}-{s}" for m, a, s in CASES]


def _pair(shape: tuple[int, ...], dtype: str = "float64", seed: int = 0) -> tuple[Any, Any]:
    data = np.random.default_rng(seed).uniform(-2, 2, size=shape).astype(dtype)
    return agrad.tensor(data), torch.tensor(data)


def _name(t: Any) -> str | None:
    return None if t.grad_fn is None else t.grad_fn.name()


@pytest.mark.parametrize(("method", "args", "shape"), CASES, ids=IDS)
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64"])
def test_values_shape_identity_version(method: str, args: tuple, shape: tuple[int, ...], dtype: str) -> None:
    a, t = _pair(shape, dtype)
    ptr, version = a.data_ptr(), a._version
    out = getattr(a, method)(*args)
    expected = getattr(t, method)(*args)
    assert out is a
    assert a.shape == tuple(expected.shape)
    assert a.dtype.name == str(expected.dtype).removeprefix("torch.")
    np.testing.assert_array_equal(a.numpy(), expected.numpy())
    assert a.data_ptr() == ptr  # the same memory
    assert a._version == version + 1 == t._version
    assert a.is_contiguous() == t.is_contiguous()


@pytest.mark.parametrize(("method", "args", "shape"), CASES, ids=IDS)
def test_node_and_gradient(method: str, args: tuple, shape: tuple[int, ...]) -> None:
    a, t = _pair(shape)
    a.requires_grad_()
    t.requires_grad_()
    x, y = a * 2, t * 2
    getattr(x, method)(*args)
    getattr(y, method)(*args)
    assert _name(x) == _name(y)
    weight = np.random.default_rng(1).uniform(-2, 2, size=tuple(y.shape))
    (x * agrad.tensor(weight)).sum().backward_sync()
    (y * torch.tensor(weight)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy())


@pytest.mark.parametrize(("method", "args", "shape"), [c for c in CASES if 0 not in c[2]],
                         ids=[i for i, c in zip(IDS, CASES) if 0 not in c[2]])
def test_gradcheck_through_non_leaf(method: str, args: tuple, shape: tuple[int, ...]) -> None:
    def f(x: agrad.Tensor) -> agrad.Tensor:
        y = x.sin()
        getattr(y, method)(*args)
        return y * y.cos()

    x = agrad.tensor(np.random.default_rng(2).uniform(-2, 2, size=shape), requires_grad=True)
    assert gradcheck(f, (x,))
    assert gradgradcheck(f, (x,))


def test_gradcheck_through_a_view() -> None:
    def f(x: agrad.Tensor) -> agrad.Tensor:
        base = x * 1
        v = base[1]
        v.t_()
        v.mul_(base[0].t().clone().sin())  # written through the transposed view: CopySlices on base
        v.unsqueeze_(0)
        return base.exp() + v.sum()

    x = agrad.tensor(np.random.default_rng(3).uniform(-1, 1, size=(3, 2, 4)), requires_grad=True)
    assert gradcheck(f, (x,))
    assert gradgradcheck(f, (x,))


def _run_both(fn: Callable[[Any, Any], Any]) -> None:
    """``fn(lib, base_leaf)`` with agrad and torch: equal outputs and gradients."""
    data = np.arange(24.0).reshape(2, 3, 4)
    outs = []
    for lib, leaf in ((agrad, agrad.tensor(data, requires_grad=True)), (torch, torch.tensor(data, requires_grad=True))):
        out = fn(lib, leaf)
        grad = leaf.grad
        outs.append((out.detach().numpy() if out is not None else None, grad.numpy() if grad is not None else None))
    for got, want in zip(*outs):
        if want is None:
            assert got is None
        else:
            np.testing.assert_allclose(got, want)


def _backward(lib: Any, y: Any) -> None:
    y.backward_sync() if lib is agrad else y.backward()


def _weights(lib: Any, *shape: int) -> Any:
    return lib.tensor(np.arange(float(np.prod(shape))).reshape(shape) - 3.0)


def test_view_changed_in_place_then_written() -> None:
    # ``v`` is a view: its replay from ``base`` must now include the transpose.
    def fn(lib: Any, leaf: Any) -> Any:
        base = leaf * 1
        v = base[0]
        v.t_()
        assert v._base is base and tuple(v.shape) == (4, 3) and v._version == base._version == 1
        v.mul_(_weights(lib, 3))  # broadcast along v's (new) last dimension
        _backward(lib, (base * _weights(lib, 2, 3, 4)).sum())
        return base

    _run_both(fn)


def test_view_changed_in_place_then_base_written() -> None:
    # ``v``'s grad_fn is re-derived from the base's new history in its new shape.
    def fn(lib: Any, leaf: Any) -> Any:
        base = leaf * 1
        v = base[1]
        v.unsqueeze_(0)
        base.mul_(2)
        assert tuple(v.shape) == (1, 3, 4)
        _backward(lib, (v * _weights(lib, 1, 3, 4)).sum())
        return v

    _run_both(fn)


def test_views_made_before_the_base_changed() -> None:
    # ``w`` was made of ``base`` before ``base`` was transposed and squeezed:
    # writing through it, and reading its grad_fn, still address its elements.
    def fn(lib: Any, leaf: Any) -> Any:
        base = (leaf * 1).unsqueeze(1).clone()  # (2, 1, 3, 4), not a view
        w = base[1, 0, :, 2]
        base.squeeze_(1)
        base.transpose_(0, 2)  # (4, 3, 2)
        w.mul_(_weights(lib, 3))
        u = base[0]  # made after: replays from the new geometry
        u.add_(1.0)
        _backward(lib, (base * _weights(lib, 4, 3, 2)).sum() + (w * w).sum())
        return base

    _run_both(fn)


def test_view_of_a_view_made_after_base_changed_without_recording() -> None:
    def fn(lib: Any, leaf: Any) -> Any:
        x = lib.zeros(2, 3)
        v = x[:, 1:]
        x.t_()
        u = v[0]  # v's replay predates x's transpose
        u.copy_(leaf[0, 0, :2] * 3)
        _backward(lib, (x * _weights(lib, 3, 2)).sum())
        return x

    _run_both(fn)


def test_no_grad_changes_only_the_shape() -> None:
    def fn(lib: Any, leaf: Any) -> Any:
        x = leaf * 1
        v = x[0]
        with lib.no_grad():
            v.t_()
        assert tuple(v.shape) == (4, 3) and v.requires_grad and v._version == 1
        _backward(lib, (v * _weights(lib, 4, 3)).sum())
        return v

    _run_both(fn)


def test_leaf_under_no_grad() -> None:
    for lib in (agrad, torch):
        leaf = lib.ones(2, 3, 4, requires_grad=True)
        with lib.no_grad():
            assert leaf.transpose_(0, 2) is leaf
        assert tuple(leaf.shape) == (4, 3, 2) and leaf.is_leaf and leaf.requires_grad and leaf._version == 1


def test_plain_tensor_with_views() -> None:
    for lib in (agrad, torch):
        x = lib.zeros(2, 1, 3)
        w = x[1]
        x.squeeze_()
        w.fill_(1.0)
        v = x[:, :2]
        v.t_()
        v[0, 1] = 5.0
        assert x.tolist() == [[0.0, 0.0, 0.0], [5.0, 1.0, 1.0]]
        assert tuple(v.shape) == (2, 2)


def test_detached_alias_keeps_its_shape() -> None:
    for lib in (agrad, torch):
        x = lib.ones(2, 3)
        d = x.detach()
        x.t_()
        assert tuple(d.shape) == (2, 3) and tuple(x.shape) == (3, 2) and d._version == 1


def test_saved_tensor_changed_in_place_is_refused() -> None:
    x = agrad.randn(2, 3, requires_grad=True)
    y = x * 1
    z = y.sin()
    y.t_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward_sync()


@pytest.mark.parametrize(("method", "args"), [("t_", ()), ("transpose_", (0, 1)), ("squeeze_", (0,)),
                                              ("unsqueeze_", (0,)), ("swapaxes_", (0, 1))])
def test_leaf_and_view_of_leaf_errors(method: str, args: tuple) -> None:
    for lib in (agrad, torch):
        leaf = lib.ones(2, 3, requires_grad=True)
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in an in-place"):
            getattr(leaf, method)(*args)
        with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
            getattr(leaf[0:1], method)(*args)
        assert tuple(leaf.shape) == (2, 3) and leaf._version == 0


def test_multi_output_and_no_grad_views_are_refused() -> None:
    for lib in (agrad, torch):
        x = lib.ones(2, 3, requires_grad=True) * 1
        with pytest.raises(RuntimeError, match="Output 0 of Unbind is a view and is being modified inplace"):
            x.unbind(0)[0].unsqueeze_(0)
        with lib.no_grad():
            nv = x[0]
        with pytest.raises(RuntimeError, match="A view was created in no_grad mode"):
            nv.unsqueeze_(0)
        plain = lib.ones(2, 3)
        with lib.no_grad():
            pv = plain[0]
        assert tuple(pv.unsqueeze_(0).shape) == (1, 3)  # nothing recorded: allowed


def test_inference_tensor_is_refused() -> None:
    for lib in (agrad, torch):
        with lib.inference_mode():
            x = lib.ones(2, 3)
        with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside InferenceMode"):
            x.t_()


@pytest.mark.parametrize(("method", "args", "shape"), [
    ("t_", (), (2, 3, 4)),
    ("transpose_", (0, 3), (2, 3, 4)),
    ("transpose_", (-4, 0), (2, 3, 4)),
    ("transpose_", (0, 1), ()),
    ("swapaxes_", (5, 0), (2, 3)),
    ("swapdims_", (0, 2), (2, 3)),
    ("squeeze_", (3,), (2, 3, 4)),
    ("squeeze_", ((0, 3),), (1, 3, 4)),
    ("squeeze_", (1,), ()),
    ("unsqueeze_", (4,), (2, 3, 4)),
    ("unsqueeze_", (-5,), (2, 3, 4)),
    ("unsqueeze_", (2,), ()),
])
def test_bad_dims(method: str, args: tuple, shape: tuple[int, ...]) -> None:
    a, t = _pair(shape)
    with pytest.raises(Exception) as expected:
        getattr(t, method)(*args)
    with pytest.raises(type(expected.value)) as got:
        getattr(a, method)(*args)
    assert str(got.value) == str(expected.value)
    assert a.shape == shape and a._version == 0


def test_keyword_arguments() -> None:
    for lib in (agrad, torch):
        x = lib.ones(2, 3, 1)
        x.transpose_(dim0=0, dim1=1).swapaxes_(axis0=1, axis1=2).swapdims_(dim0=0, dim1=1)
        x.squeeze_(dim=0).unsqueeze_(dim=-1)
        assert tuple(x.shape) == (3, 2, 1)


def test_hooks_registered_after_go_to_the_new_node() -> None:
    # Note [Hooks when grad_fn changes]: retain_grad moves to the new node.
    x = agrad.ones(2, 3, requires_grad=True)
    y = x * 1
    y.retain_grad()
    y.t_()
    (y * agrad.tensor(np.arange(6.0).reshape(3, 2))).sum().backward_sync()
    assert y.grad is not None and y.grad.shape == (3, 2)
    np.testing.assert_array_equal(x.grad.numpy(), np.arange(6.0).reshape(3, 2).T)
