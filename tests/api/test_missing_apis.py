"""APIs PyTorch's own autograd tests use most (issue 14, "Also missing"), each
compared with PyTorch where it is installed.  Op-table entries added for them
(``select``, ``diagonal``, ``all``/``any``, ``argsort``, ``isclose``) are also
checked sample by sample in tests/ops/test_op_table.py."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
from tests.helpers import requires_torch, torch

MULTI_VIEW = "is the output of a function that returns multiple views"


def _both(fn: Callable[[Any, Any], Any], *arrays: np.ndarray) -> tuple[Any, Any]:
    """``fn(lib, *leaves)`` run in agrad and in torch on float64 leaves that require grad."""
    ours = [agrad.tensor(a, dtype=agrad.float64, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    return (fn(agrad, *ours), ours), (fn(torch, *theirs), theirs)


def _raises_like_torch(fn: Callable[[Any], Any]) -> None:
    """``fn(lib)`` raises the same exception type in both, and the same message."""
    with pytest.raises(Exception) as theirs:
        fn(torch)
    with pytest.raises(type(theirs.value)) as ours:
        fn(agrad)
    assert str(ours.value) == str(theirs.value)


# -- view_as, select, unbind, diagonal ----------------------------------------------


@requires_torch
@pytest.mark.parametrize("fn", [
    lambda lib, x: x.view_as(lib.zeros(12)) * 2,
    lambda lib, x: x.select(1, -1) ** 2,
    lambda lib, x: lib.select(x, 0, 2).exp(),
    lambda lib, x: lib.stack([u * i for i, u in enumerate(x.unbind(1))]),
    lambda lib, x: lib.stack(lib.unbind(x)) ** 2,
    lambda lib, x: x.diagonal(1) * 3,
    lambda lib, x: lib.diagonal(x, -1, 1, 0).sin(),
    lambda lib, x: x.reshape(3, 2, 2).diagonal(0, -1, -2),
], ids=["view_as", "select_method", "select", "unbind_dim", "unbind", "diagonal_offset", "diagonal_dims",
        "diagonal_3d"])
def test_view_ops_values_gradients_and_node_names_match_torch(fn: Callable[..., Any]) -> None:
    x = np.random.default_rng(0).standard_normal((3, 4))
    (out, ours), (expected, theirs) = _both(fn, x)
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy())
    g = np.random.default_rng(1).standard_normal(out.shape)
    out.backward_sync(agrad.tensor(g))
    expected.backward(torch.tensor(g))
    np.testing.assert_allclose(ours[0].grad.numpy(), theirs[0].grad.numpy())


@requires_torch
def test_select_diagonal_node_names_and_views() -> None:
    x = agrad.randn(3, 4, requires_grad=True)
    assert x.select(0, 1).grad_fn.name() == "SelectBackward0"
    assert x.diagonal().grad_fn.name() == "DiagonalBackward0"
    assert x.view_as(agrad.zeros(4, 3)).grad_fn.name() == "ViewBackward0"
    for v in (x.select(1, 2), x.diagonal(), x.view_as(agrad.zeros(12)), *x.unbind()):
        assert v._base is x and v.data_ptr() != 0


@requires_torch
def test_writes_through_select_and_diagonal_match_torch() -> None:
    def write(lib: Any, x: Any) -> Any:
        y = x * 1
        y.diagonal().mul_(10)
        y.select(1, 3).add_(1)
        return y

    (out, ours), (expected, theirs) = _both(write, np.arange(12.0).reshape(3, 4))
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy())
    out.sum().backward_sync()
    expected.sum().backward()
    np.testing.assert_allclose(ours[0].grad.numpy(), theirs[0].grad.numpy())
    assert out.grad_fn.name().split("::")[-1] == expected.grad_fn.name().split("::")[-1]


@requires_torch
@pytest.mark.parametrize("fn", [
    lambda lib: lib.zeros(3, 4).select(0, 5),
    lambda lib: lib.zeros(3, 4).select(-3, 0),
    lambda lib: lib.zeros(3, 4).select(2, 0),
    lambda lib: lib.tensor(1.0).select(0, 0),
    lambda lib: lib.tensor(1.0).unbind(),
    lambda lib: lib.zeros(3).unbind(1),
    lambda lib: lib.zeros(3, 4).diagonal(0, 1, -1),
    lambda lib: lib.zeros(3, 4).diagonal(0, 0, 2),
    lambda lib: lib.tensor(1.0).diagonal(),
])
def test_view_op_errors_match_torch(fn: Callable[[Any], Any]) -> None:
    _raises_like_torch(fn)


@requires_torch
@pytest.mark.parametrize("write", [
    lambda lib, u: u.mul_(2),
    lambda lib, u: u.copy_(lib.ones(4)),
    lambda lib, u: u.__setitem__(1, 3.0),
], ids=["mul_", "copy_", "setitem"])
def test_in_place_on_unbind_outputs_raises_as_torch(write: Callable[[Any, Any], Any]) -> None:
    for lib in (torch, agrad):
        x = lib.ones(3, 4, requires_grad=True)
        u = x.clone().unbind(0)
        with pytest.raises(RuntimeError, match=MULTI_VIEW):
            write(lib, u[0])
        with lib.no_grad():
            write(lib, x.clone().unbind(0)[1])  # allowed: nothing is recorded
        write(lib, lib.ones(3, 4).unbind(0)[2])  # allowed: no input requires grad
        write(lib, x.clone().unbind(0)[0].detach())


def test_data_ptr_is_the_address_and_views_share_offsets() -> None:
    x = agrad.zeros(3, 4)
    assert x.data_ptr() == x._data.ctypes.data
    assert x[1:].data_ptr() - x.data_ptr() == 4 * 4
    assert x.select(1, 2).data_ptr() - x.data_ptr() == 2 * 4
    assert x.diagonal().data_ptr() == x.data_ptr()
    assert x.clone().data_ptr() != x.data_ptr()
    assert agrad.zeros(0).data_ptr() == 0
    if torch is not None:
        t = torch.zeros(3, 4)
        assert t[1:].data_ptr() - t.data_ptr() == 16 and torch.zeros(0).data_ptr() == 0


# -- all, any, argsort, allclose, var_mean --------------------------------------------


@requires_torch
@pytest.mark.parametrize("fn", [
    lambda lib, x: x.all(), lambda lib, x: lib.any(x, 1), lambda lib, x: x.all(dim=0, keepdim=True),
    lambda lib, x: lib.all(x > 0, (0, 1)), lambda lib, x: (x > 0).any(-1),
    lambda lib, x: x.argsort(), lambda lib, x: lib.argsort(x, 0, True), lambda lib, x: x.argsort(dim=0, stable=True),
    lambda lib, x: lib.argsort(x.round(), descending=True, stable=True),
    lambda lib, x: lib.isclose(x, x + 1e-6), lambda lib, x: lib.allclose(x, x * (1 + 1e-7)),
    lambda lib, x: x.allclose(x + 1.0), lambda lib, x: lib.allclose(x, x + 0.5, atol=0.6),
])
def test_logical_sorting_and_closeness_match_torch(fn: Callable[[Any, Any], Any]) -> None:
    x = np.random.default_rng(2).standard_normal((4, 5)) * 2
    x[0, 0] = 0.0
    ours = fn(agrad, agrad.tensor(x, requires_grad=True))
    theirs = fn(torch, torch.tensor(x, requires_grad=True))
    if isinstance(theirs, bool):
        assert ours is theirs
        return
    assert not ours.requires_grad and ours.dtype.name == str(theirs.dtype).removeprefix("torch.")
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@requires_torch
@pytest.mark.parametrize("fn", [
    lambda lib: lib.isclose(lib.tensor([1.0]), lib.tensor([1])),
    lambda lib: lib.isclose(lib.tensor([1.0]), 1.0),
    lambda lib: lib.allclose(lib.tensor([1.0]), lib.tensor([1.0]), rtol=-1.0),
])
def test_closeness_errors_match_torch(fn: Callable[[Any], Any]) -> None:
    with pytest.raises(Exception) as theirs:
        fn(torch)
    with pytest.raises(type(theirs.value)):
        fn(agrad)


@requires_torch
@pytest.mark.parametrize("name", ["var_mean", "std_mean"])
@pytest.mark.parametrize(("args", "kwargs"), [
    ((), {}), ((1,), {}), ((True,), {}), ((False,), {}), ((0, False), {}), ((1, True, True), {}),
    ((), {"dim": (0, 1), "correction": 0, "keepdim": True}), ((), {"dim": 1, "unbiased": False}),
])
def test_var_mean_and_std_mean_match_torch(name: str, args: tuple, kwargs: dict) -> None:
    fn = lambda lib, x: getattr(lib, name)(x, *args, **kwargs)  # noqa: E731
    (out, ours), (expected, theirs) = _both(fn, np.random.default_rng(3).standard_normal((3, 4)))
    assert isinstance(out, tuple) and len(out) == 2
    for a, t in zip(out, expected):
        np.testing.assert_allclose(a.detach().numpy(), t.detach().numpy())
    (out[0] * 2 + out[1]).sum().backward_sync()
    (expected[0] * 2 + expected[1]).sum().backward()
    np.testing.assert_allclose(ours[0].grad.numpy(), theirs[0].grad.numpy())


# -- autograd.graph: GradientEdge, multi-grad hooks, versions, mutation of saved tensors


@requires_torch
def test_gradient_edges_as_grad_and_backward_inputs_match_torch() -> None:
    results = {}
    for lib in (agrad, torch):
        graph = lib.autograd.graph
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x * 2
        z = (y * y).sum()
        edge = graph.get_gradient_edge(y)
        assert edge.node is y.grad_fn and edge.output_nr == 0 and edge.ownership_token is None
        assert graph.get_gradient_edge(x).node.name().endswith("AccumulateGrad")
        grad = lib.autograd.grad_sync if lib is agrad else lib.autograd.grad
        one = grad(z, edge, retain_graph=True)
        two = grad(z, [edge, x], retain_graph=True)
        backward = agrad.autograd.backward_sync if lib is agrad else torch.autograd.backward
        backward(z, inputs=[graph.get_gradient_edge(x)], retain_graph=True)
        backward(z, inputs=[edge])  # a non-leaf edge: runs, stores nothing
        results[lib.__name__] = [t.detach().numpy().copy() for t in (*one, *two, x.grad)]
        with pytest.raises(RuntimeError, match="materialize_grads cannot be used when the given input is a Gradi"):
            grad((x * 1).sum(), edge, allow_unused=True, materialize_grads=True)
        with pytest.raises(RuntimeError, match="not possible to get the gradient edge for a Tensor that does not"):
            graph.get_gradient_edge(lib.ones(2))
    for ours, theirs in zip(results["agrad"], results["torch"], strict=True):
        np.testing.assert_allclose(ours, theirs)


@requires_torch
@pytest.mark.parametrize("mode", ["all", "any"])
def test_register_multi_grad_hook_matches_torch(mode: str) -> None:
    seen: dict[str, list[Any]] = {"agrad": [], "torch": []}
    for lib in (agrad, torch):
        calls = seen[lib.__name__]
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        b = lib.tensor([3.0, 4.0], requires_grad=True)
        c, d = a * b, a + b
        if mode == "all":
            fn = lambda grads, calls=calls: calls.append([None if g is None else g.tolist() for g in grads])  # noqa: E731
        else:
            fn = lambda grad, calls=calls: calls.append(grad.tolist())  # noqa: E731
        handle = lib.autograd.graph.register_multi_grad_hook((a, b, c, d), fn, mode=mode)
        run = (lambda t, **kw: t.backward_sync(**kw)) if lib is agrad else (lambda t, **kw: t.backward(**kw))
        run(c.sum(), retain_graph=True)
        run((c * 3).sum(), inputs=(a,), retain_graph=True)
        run((c + d).sum(), retain_graph=True)
        handle.remove()
        run(c.sum())
        with pytest.raises(ValueError, match="Expects mode to be one of"):
            lib.autograd.graph.register_multi_grad_hook((a,), fn, mode="some")
    assert seen["agrad"] == seen["torch"] and seen["agrad"]


@requires_torch
def test_increment_version_makes_backward_detect_the_write_as_torch() -> None:
    for lib in (agrad, torch):
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        b = a.exp()
        out = (b * b).sum()
        lib.autograd.graph.increment_version([b])
        lib.autograd.graph.increment_version(b)
        assert b._version == 2
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.backward_sync() if lib is agrad else out.backward()


def _mutate_saved(lib: Any) -> tuple[Any, Any]:
    a = lib.tensor([[0.5, 1.0, 2.0], [1.5, -1.0, 3.0]], requires_grad=True)
    b = a.clone()
    out = (b ** 2).sum() + (b[0] * b[1].exp()).sum()
    b.sin_()  # b and a view of it were saved
    b[1].mul_(3)
    return a, out


@requires_torch
def test_allow_mutation_on_saved_tensors_matches_torch() -> None:
    with torch.autograd.graph.allow_mutation_on_saved_tensors():
        a_t, out_t = _mutate_saved(torch)
        out_t.backward()
    with agrad.autograd.graph.allow_mutation_on_saved_tensors() as ctx:
        a, out = _mutate_saved(agrad)
        out.backward_sync()
    np.testing.assert_allclose(a.grad.numpy(), a_t.grad.numpy())
    assert not ctx.original and not ctx.cloned  # cleared on exit
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        _mutate_saved(agrad)[1].backward_sync()  # outside the context it is an error again


@requires_torch
def test_allow_mutation_on_saved_tensors_misuse_raises_as_torch() -> None:
    for lib in (torch, agrad):
        graph = lib.autograd.graph
        with graph.allow_mutation_on_saved_tensors():
            with pytest.raises(RuntimeError, match="allow_mutation_on_saved_tensors contexts cannot be nested"):
                with graph.allow_mutation_on_saved_tensors():
                    pass
            a, out = _mutate_saved(lib)
        with pytest.raises(AssertionError, match="Trying to backward outside of the 'allow_mutation_on_saved_ten"):
            out.backward_sync() if lib is agrad else out.backward()


# -- grad_fn._saved_<name> / _raw_saved_<name> ------------------------------------------

SAVED_CASES = {
    "mul": (lambda lib, x, w: x * w, ["self", "other"]),
    "div": (lambda lib, x, w: x / w, ["other"]),
    "pow": (lambda lib, x, w: x.abs().pow(w), ["self", "exponent", "result"]),
    "exp": (lambda lib, x, w: x.exp(), ["result"]),
    "log": (lambda lib, x, w: lib.log(w.abs()), ["self"]),
    "tanh": (lambda lib, x, w: x.tanh(), ["result"]),
    "sigmoid": (lambda lib, x, w: lib.sigmoid(x), ["result"]),
    "relu": (lambda lib, x, w: lib.relu(x), ["result"]),
    "sum_dim": (lambda lib, x, w: x.sum(1, keepdim=True), ["dim", "keepdim", "self_sym_sizes"]),
    "sum": (lambda lib, x, w: x.sum(), ["self_sym_sizes"]),
    "mean_dim": (lambda lib, x, w: x.mean(0), ["dim", "keepdim"]),
    "mm": (lambda lib, x, w: lib.mm(x, w.T), ["self", "mat2"]),
    "matmul": (lambda lib, x, w: x @ w.T, ["self", "mat2"]),
    "index": (lambda lib, x, w: x[1:], ["self_sym_sizes"]),
    "select": (lambda lib, x, w: x.select(1, 2), ["dim", "index", "self_sym_sizes"]),
}


def _plain(v: Any) -> Any:
    if hasattr(v, "detach"):
        return v.detach().numpy()
    return tuple(np.atleast_1d(v)) if isinstance(v, (int, tuple)) and not isinstance(v, bool) else v


@requires_torch
@pytest.mark.parametrize("case", list(SAVED_CASES), ids=list(SAVED_CASES))
def test_saved_attributes_match_torch(case: str) -> None:
    fn, names = SAVED_CASES[case]
    x = np.random.default_rng(4).standard_normal((2, 3))
    w = np.random.default_rng(5).standard_normal((2, 3))
    ours = fn(agrad, agrad.tensor(x, requires_grad=True), agrad.tensor(w, requires_grad=True))
    theirs = fn(torch, torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True))
    tensors = []
    for name in names:
        a, t = getattr(ours.grad_fn, "_saved_" + name), getattr(theirs.grad_fn, "_saved_" + name)
        if hasattr(t, "detach"):
            tensors.append(name)
            np.testing.assert_allclose(_plain(a), _plain(t), err_msg=name)
            assert a.requires_grad == t.requires_grad
            assert type(getattr(ours.grad_fn, "_raw_saved_" + name)).__name__ == "SavedTensor"
        else:
            assert _plain(a) == _plain(t), name
    for lib, out in ((agrad, ours), (torch, theirs)):
        with pytest.raises(AttributeError, match="object has no attribute '_saved_nothing'"):
            out.grad_fn._saved_nothing  # noqa: B018
        out.sum().backward_sync() if lib is agrad else out.sum().backward()
        for name in tensors:  # freed by the backward
            with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
                getattr(out.grad_fn, "_saved_" + name)


@requires_torch
def test_saved_inputs_are_the_tensors_and_unsaved_are_none_as_torch() -> None:
    for lib in (agrad, torch):
        x = lib.ones(3, requires_grad=True)
        w = lib.ones(3) * 2
        y = x * w
        assert y.grad_fn._saved_other is w and y.grad_fn._saved_self is None  # w needs no grad: x not saved
        e = x.exp()
        assert e.grad_fn._saved_result.grad_fn is e.grad_fn
        with pytest.raises(AttributeError, match="object has no attribute '_saved_self'"):
            (x + w).grad_fn._saved_self  # noqa: B018
        with pytest.raises(AttributeError):
            (x * 1).grad_fn.next_functions[0][0]._saved_variable  # noqa: B018  # AccumulateGrad
        with pytest.raises(RuntimeError, match="with value None is forbidden"):
            y.grad_fn._raw_saved_self.register_hooks(lambda t: t, lambda t: t)
        y.sum().backward_sync() if lib is agrad else y.sum().backward()
        assert y.grad_fn._saved_self is None  # never saved: still None
        with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
            y.grad_fn._saved_other  # noqa: B018


@requires_torch
def test_raw_saved_register_hooks_matches_torch() -> None:
    grads, packed = {}, {}
    for lib in (agrad, torch):
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        w = lib.tensor([4.0, 5.0, 6.0], requires_grad=True)
        y = (x * w).sin()
        calls = packed[lib.__name__] = []
        raw = y.grad_fn.next_functions[0][0]._raw_saved_other
        raw.register_hooks(lambda t, calls=calls: calls.append(t.tolist()) or t * 2, lambda t: t)
        with pytest.raises(RuntimeError, match="hooks have already been set"):
            raw.register_hooks(lambda t: t, lambda t: t)
        y.sum().backward_sync() if lib is agrad else y.sum().backward()
        grads[lib.__name__] = (x.grad.tolist(), w.grad.tolist())
    assert packed["agrad"] == packed["torch"] == [[4.0, 5.0, 6.0]]
    np.testing.assert_allclose(grads["agrad"], grads["torch"])


# -- set_multithreading_enabled ---------------------------------------------------------


@requires_torch
def test_set_multithreading_enabled_toggles_as_torch() -> None:
    for lib in (torch, agrad):
        ag = lib.autograd
        assert ag.is_multithreading_enabled()
        with ag.set_multithreading_enabled(False):
            assert not ag.is_multithreading_enabled()
            with ag.set_multithreading_enabled(True):
                assert ag.is_multithreading_enabled()
            assert not ag.is_multithreading_enabled()
        assert ag.is_multithreading_enabled()
        ag.set_multithreading_enabled(False)  # called as a function: set at once
        assert not ag.is_multithreading_enabled()
        ag.set_multithreading_enabled(True)
        assert ag.is_multithreading_enabled()

    @agrad.autograd.set_multithreading_enabled(False)
    def decorated() -> bool:
        return agrad.autograd.is_multithreading_enabled()

    assert agrad.autograd.is_multithreading_enabled()  # (torch leaves it off here; see the docstring)
    assert decorated() is False and agrad.autograd.is_multithreading_enabled()


@pytest.mark.anyio
async def test_without_multithreading_every_kernel_runs_on_the_driving_thread() -> None:
    import threading

    threads: list[int] = []

    def unpack(t: agrad.Tensor) -> agrad.Tensor:  # runs inside the node's kernel
        threads.append(threading.get_ident())
        return t

    x = agrad.ones(3, requires_grad=True)
    with agrad.autograd.graph.engine_options(offload="always"):
        with agrad.autograd.graph.saved_tensors_hooks(lambda t: t, unpack):
            first, second = x.exp().sum(), x.exp().sum()
        await first.backward()
        with agrad.autograd.set_multithreading_enabled(False):
            await second.backward()
    assert threads[0] != threading.get_ident() and threads[1] == threading.get_ident()
    assert x.grad.tolist() == pytest.approx([2 * np.e] * 3)


# -- Function.clear_saved_tensors_on_access -----------------------------------------------


def _clearing_function(lib: Any, log: list[Any]) -> Any:
    class Scale(lib.autograd.Function):
        clear_saved_tensors_on_access = True

        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x * 3)  # an intermediate: only the graph holds it
            return x * 2

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (saved,) = ctx.saved_tensors
            import weakref
            ref = weakref.ref(saved)
            del saved
            log.append(ref() is None)  # freed: the node no longer holds it
            try:
                ctx.saved_tensors  # noqa: B018
            except RuntimeError as e:
                log.append(str(e))
            return g * 2

    return Scale


@requires_torch
def test_clear_saved_tensors_on_access_matches_torch() -> None:
    logs: dict[str, list[Any]] = {}
    for lib in (torch, agrad):
        assert lib.autograd.Function.clear_saved_tensors_on_access is False
        log = logs[lib.__name__] = []
        x = lib.ones(3, requires_grad=True)
        y = _clearing_function(lib, log).apply(x)
        run = (lambda t, **kw: t.backward_sync(**kw)) if lib is agrad else (lambda t, **kw: t.backward(**kw))
        run(y.sum(), retain_graph=True)
        with pytest.raises(RuntimeError, match="saved_tensors can only be accessed once when clear_saved_tensors"):
            run(y.sum())
        assert x.grad.tolist() == [2.0, 2.0, 2.0]
    assert logs["agrad"] == logs["torch"] and logs["agrad"][0] is True


# -- gradcheck / gradgradcheck fast_mode ---------------------------------------------------


def _wrong_double_backward(lib: Any) -> Any:
    """``x ** 3`` whose backward is right but whose second derivative is wrong
    (the backward is computed from a detached ``x``)."""

    class Cube(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            return g * 3 * x.detach() ** 2

    return Cube


def _wrong_backward(lib: Any) -> Any:
    class Double(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x * 2

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g * 2.01

    return Double


@requires_torch
@pytest.mark.parametrize("fast_mode", [True, False])
def test_gradcheck_and_gradgradcheck_fast_mode_agree_with_torch(fast_mode: bool) -> None:
    x = np.random.default_rng(6).standard_normal((3, 4))
    verdicts = {}
    for lib in (agrad, torch):
        t = lib.tensor(x, dtype=lib.float64, requires_grad=True)
        w = lib.tensor(x.T.copy(), dtype=lib.float64, requires_grad=True)
        ag = lib.autograd
        kw = {"fast_mode": fast_mode, "raise_exception": False}
        verdicts[lib.__name__] = [
            ag.gradcheck(lambda a, b: (a @ b).tanh(), (t, w), **kw),
            ag.gradgradcheck(lambda a, b: (a @ b).tanh(), (t, w), **kw),
            ag.gradcheck(_wrong_backward(lib).apply, (t,), **kw),
            ag.gradcheck(_wrong_double_backward(lib).apply, (t,), **kw),
            ag.gradgradcheck(_wrong_double_backward(lib).apply, (t,), **kw),
        ]
    assert verdicts["agrad"] == verdicts["torch"] == [True, True, False, True, False]
    with pytest.raises(RuntimeError, match="Jacobian mismatch"):
        agrad.autograd.gradcheck(_wrong_backward(agrad).apply,
                                 (agrad.tensor(x, dtype=agrad.float64, requires_grad=True),), fast_mode=fast_mode)


def test_fast_mode_evaluates_the_function_a_few_times_not_per_element() -> None:
    calls = []

    def f(a: agrad.Tensor) -> agrad.Tensor:
        calls.append(1)
        return (a * a).sum(0)

    x = agrad.randn(20, 30, dtype=agrad.float64, requires_grad=True)
    assert agrad.autograd.gradcheck(f, (x,), fast_mode=True)
    assert len(calls) <= 4  # the outputs once, then two evaluations along one direction
    calls.clear()
    assert agrad.autograd.gradgradcheck(f, (x,), fast_mode=True)
    assert len(calls) <= 8


# -- set_checkpoint_early_stop ---------------------------------------------------------------


@requires_torch
@pytest.mark.parametrize("enable", [None, True, False])
@pytest.mark.parametrize("early_stop_arg", [True, False])
def test_set_checkpoint_early_stop_matches_torch(enable: bool | None, early_stop_arg: bool) -> None:
    runs = {}
    for lib in (agrad, torch):
        tail_runs: list[int] = []

        def fn(t: Any, tail_runs: list[int] = tail_runs) -> Any:
            out = t.exp().sin()  # the last op that saves a tensor
            tail_runs.append(1)  # after it: skipped by an early-stopped recomputation
            return out

        x = lib.ones(3, requires_grad=True)
        ctx = lib.utils.checkpoint.set_checkpoint_early_stop(enable) if enable is not None else contextlib.nullcontext()
        with ctx:
            y = lib.utils.checkpoint.checkpoint(fn, x, use_reentrant=False, early_stop=early_stop_arg)
        y.sum().backward_sync() if lib is agrad else y.sum().backward()
        runs[lib.__name__] = (len(tail_runs), x.grad.tolist())
    assert runs["agrad"][0] == runs["torch"][0]
    np.testing.assert_allclose(runs["agrad"][1], runs["torch"][1], rtol=1e-6)
    assert runs["agrad"][0] == (1 if (early_stop_arg if enable is None else enable) else 2)


# -- pickling --------------------------------------------------------------------------------


@requires_torch
@pytest.mark.parametrize("make", [
    lambda lib: lib.tensor([1.0, 2.0], requires_grad=True),
    lambda lib: lib.tensor([1.0, 2.0], requires_grad=True) * 2,  # a non-leaf: loads as a leaf that requires grad
    lambda lib: lib.arange(6.0).reshape(2, 3)[:, 1],  # a view: loads with its own memory
    lambda lib: lib.tensor([1, 2], dtype=lib.int32),
    lambda lib: lib.tensor(3.0, dtype=lib.float64),
    lambda lib: (lib.tensor([1.0], requires_grad=True) * 2).detach(),
], ids=["leaf", "non_leaf", "view", "int32", "scalar_f64", "detached"])
def test_pickle_round_trip_matches_torch(make: Callable[[Any], Any]) -> None:
    import pickle

    ours, theirs = make(agrad), make(torch)
    for t in (ours, theirs):
        if t.is_leaf and t.requires_grad:
            t.grad = t.detach() * 0 + 1  # not pickled by either
    a, b = pickle.loads(pickle.dumps(ours)), pickle.loads(pickle.dumps(theirs))
    np.testing.assert_array_equal(a.numpy(force=True), b.detach().numpy())
    assert a.dtype.name == str(b.dtype).removeprefix("torch.")
    assert (a.requires_grad, a.is_leaf, a.grad, a._base) == (b.requires_grad, b.is_leaf, None, None)
    assert b.grad is None and b._base is None
    if a.requires_grad:
        (a * a).sum().backward_sync()
        (b * b).sum().backward()
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy())
    if a.ndim and a.numel() > 1:
        with agrad.no_grad():
            a[0] = 7  # its own memory: the original is unchanged
        assert ours.tolist() != a.tolist()


@requires_torch
def test_deepcopy_copies_leaves_with_grad_and_refuses_non_leaves_as_torch() -> None:
    import copy

    for lib in (agrad, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        x.grad = lib.ones(2)
        y = copy.deepcopy(x)
        assert y.requires_grad and y.is_leaf and y.grad.tolist() == [1.0, 1.0] and y.grad is not x.grad
        both = copy.deepcopy([x, x])
        assert both[0] is both[1]
        with pytest.raises(RuntimeError, match="Only Tensors created explicitly by the user .graph leaves. support"):
            copy.deepcopy(x * 2)
