"""Tests of PyTorch's ``test/test_autograd.py`` that failed when run against
agrad by rename (issue 14), each ported with the smallest adaptation
(``torch`` -> ``agrad``, ``backward`` -> ``backward_sync``, ``grad`` ->
``grad_sync``) and named after the torch test it comes from.  Where a test
compares with PyTorch, the same code is run on torch as the oracle."""

from __future__ import annotations

import contextlib
import gc
import weakref
from collections.abc import Iterator
from typing import Any

import pytest

import agrad
from agrad.autograd import Function
from tests.helpers import requires_torch, torch


@contextlib.contextmanager
def disabled_gc() -> Iterator[None]:
    """torch.testing's ``disable_gc``: only reference counting frees objects inside."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


LEGACY = "Legacy autograd function with non-static forward method is deprecated"
INSTANTIATED = "should not be instantiated"


def _identity_function(lib: Any) -> type:
    class Id(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x

        @staticmethod
        def backward(ctx: Any, grad_x: Any) -> Any:
            return grad_x

    return Id


def test_legacy_function_deprecation_exception() -> None:
    """torch: TestAutograd.test_legacy_function_deprecation_exception."""

    class MyFunction(Function):
        def forward(self, x):  # type: ignore[override]
            return x

        def backward(self, grad_output):  # type: ignore[override]
            return grad_output

    with pytest.warns(DeprecationWarning, match=INSTANTIATED), pytest.raises(RuntimeError, match=LEGACY):
        MyFunction()(agrad.randn(3, 4))


@pytest.mark.parametrize("lib_name", ["agrad", pytest.param("torch", marks=requires_torch)])
def test_naughty_autograd_function_attribute_access(lib_name: str) -> None:
    """torch: TestAutograd.test_naughty_autograd_function_attribute_access (its
    first half: the node-attribute checks need torch's C++ node internals)."""
    lib = agrad if lib_name == "agrad" else torch
    Id = _identity_function(lib)
    with pytest.warns(DeprecationWarning, match=INSTANTIATED):
        f = Id()
    assert isinstance(f, Id)
    x = lib.zeros(1, requires_grad=True)
    with pytest.raises(RuntimeError, match="non-static forward method is deprecated"):
        f(x)
    t = Id.apply(x)
    assert t.grad_fn.name() == "IdBackward"


# -- GradientEdge as a root of backward()/grad() ---------------------------------------------------
LIBS = ["agrad", pytest.param("torch", marks=requires_torch)]


def _lib(name: str) -> Any:
    return agrad if name == "agrad" else torch


def _grad(lib: Any, *args: Any, **kwargs: Any) -> Any:
    return (lib.autograd.grad_sync if lib is agrad else lib.autograd.grad)(*args, **kwargs)


def _backward(lib: Any, *args: Any, **kwargs: Any) -> Any:
    return (lib.autograd.backward_sync if lib is agrad else lib.autograd.backward)(*args, **kwargs)


@pytest.mark.parametrize("lib_name", LIBS)
def test_gradient_edge_output(lib_name: str) -> None:
    """torch: TestAutograd.test_gradient_edge_output (less its complex-dtype case)."""
    lib = _lib(lib_name)
    x = lib.tensor([1.0, 2.0], requires_grad=True)

    def fn(x: Any, reduce: bool = True) -> Any:
        tmp = x.sin().cos()
        if reduce:
            tmp = tmp.sum()
        out = tmp.exp().clone().sin().sum()
        return out, lib.autograd.graph.get_gradient_edge(tmp)

    out, tmp_edge = fn(x)
    (tmp_grad,) = _grad(lib, out, (tmp_edge,))
    (x_grad,) = _grad(lib, tmp_edge, (x,), grad_outputs=(tmp_grad,))
    out, _ = fn(x)
    (x_grad_ref,) = _grad(lib, out, (x,))
    assert lib.allclose(x_grad, x_grad_ref)

    out, tmp_edge = fn(x, reduce=False)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar output"):
        _grad(lib, tmp_edge, (x,))
    out, tmp_edge = fn(x, reduce=True)
    _grad(lib, tmp_edge, (x,))
    out, tmp_edge = fn(x)
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        _grad(lib, tmp_edge, (x,), grad_outputs=lib.tensor([1.0, 2.0, 3.0, 4.0]))

    out, tmp_edge = fn(x)
    _backward(lib, tmp_edge, retain_graph=True)
    (x_grad_ref,) = _grad(lib, tmp_edge, (x,), retain_graph=True)
    assert lib.allclose(x.grad, x_grad_ref)
    x.grad = None
    _backward(lib, (tmp_edge,), retain_graph=True)
    assert lib.allclose(x.grad, x_grad_ref)

    out1, tmp_edge1 = fn(x)
    out2, _ = fn(x)
    (x_grad_ref,) = _grad(lib, (tmp_edge1, out2), (x,), retain_graph=True)
    x.grad = None
    _backward(lib, (tmp_edge1, out2), retain_graph=True)
    assert lib.allclose(x.grad, x_grad_ref)

    out, tmp_edge = fn(x)
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        _backward(lib, tmp_edge, inputs=(x,), grad_tensors=lib.tensor([1.0, 2.0, 3.0, 4.0]))


@pytest.mark.parametrize("lib_name", LIBS)
def test_gradient_edge_graph_ownership(lib_name: str) -> None:
    """torch: TestAutograd.test_gradient_edge_graph_ownership."""
    lib = _lib(lib_name)

    class Clone(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x.clone()

        @staticmethod
        def backward(ctx: Any, gX: Any) -> Any:
            return gX.clone()

    inp = lib.rand(1, requires_grad=True).clone()
    for make in (lambda t: t.clone(), Clone.apply):
        out = make(inp)
        edge = lib.autograd.graph.get_gradient_edge(out)
        _backward(lib, edge)
        del out
        _backward(lib, edge)


@pytest.mark.parametrize("lib_name", LIBS)
def test_grad_to_node_materialize(lib_name: str) -> None:
    """torch: TestAutograd.test_grad_to_node_materialize: only an unused
    GradientEdge input is refused with materialize_grads."""
    lib = _lib(lib_name)
    x = lib.rand(2, requires_grad=True).clone()
    edge_x = lib.autograd.graph.GradientEdge(x.grad_fn, x.output_nr)
    y = lib.rand(2, requires_grad=True).clone()
    edge_y = lib.autograd.graph.GradientEdge(y.grad_fn, y.output_nr)
    out = x.clone()

    _grad(lib, out.sum(), (edge_x, y), allow_unused=True, materialize_grads=True)
    _grad(lib, out.sum(), (x, y), allow_unused=True, materialize_grads=True)
    _grad(lib, out.sum(), (x, edge_y), allow_unused=True)
    with pytest.raises(RuntimeError, match="materialize_grads cannot be used when the given input is a GradientEdge"):
        _grad(lib, out.sum(), (x, edge_y), allow_unused=True, materialize_grads=True)


# -- gradcheck's own checks ----------------------------------------------------------------------------
def _gradcheck(lib: Any) -> tuple[Any, Any]:
    return lib.autograd.gradcheck, lib.autograd.gradgradcheck


@pytest.mark.parametrize("lib_name", LIBS)
@pytest.mark.parametrize("fast_mode", [True, False])
def test_gradcheck_nondeterministic(lib_name: str, fast_mode: bool) -> None:
    """torch: TestAutograd.test_gradcheck_nondeterministic: backward is run
    twice and must agree within ``nondet_tol``."""
    lib = _lib(lib_name)
    gradcheck, gradgradcheck = _gradcheck(lib)

    class NonDetFunc(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any, jitter: float = 0.0) -> Any:
            ctx._jitter = jitter
            return x

        @staticmethod
        def backward(ctx: Any, grad_out: Any) -> Any:
            return NonDetFunc.apply(grad_out, ctx._jitter) * (1 + lib.rand_like(grad_out) * ctx._jitter), None

    inp = lib.randn(5, 5, dtype=lib.double, requires_grad=True)
    gradcheck(lambda x: NonDetFunc.apply(x, 0.0), inp, check_batched_grad=False, fast_mode=fast_mode)
    with pytest.raises(RuntimeError, match="Backward is not reentrant"):
        gradcheck(lambda x: NonDetFunc.apply(x, 1e-6), inp, check_batched_grad=False, fast_mode=fast_mode)
    with pytest.raises(RuntimeError, match="Backward is not reentrant"):
        gradgradcheck(lambda x: NonDetFunc.apply(x, 1e-12), inp, check_batched_grad=False, fast_mode=fast_mode)
    gradcheck(lambda x: NonDetFunc.apply(x, 0.0), inp, nondet_tol=1e-5, check_batched_grad=False,
              fast_mode=fast_mode)
    gradcheck(lambda x: NonDetFunc.apply(x, 1e-6), inp, nondet_tol=1e-5, check_batched_grad=False,
              fast_mode=fast_mode)
    gradgradcheck(lambda x: NonDetFunc.apply(x, 1e-12), inp, nondet_tol=1e-5, check_batched_grad=False,
                  fast_mode=fast_mode)


@pytest.mark.parametrize("lib_name", LIBS)
@pytest.mark.parametrize("fast_mode", [True, False])
def test_gradcheck_validates_inputs(lib_name: str, fast_mode: bool) -> None:
    """torch: TestAutograd.test_gradcheck_validates_inputs (its dense half)."""
    lib = _lib(lib_name)
    gradcheck, _ = _gradcheck(lib)
    x = lib.rand(10, requires_grad=False)
    with pytest.raises(ValueError, match="at least one input tensor to require gradient"):
        gradcheck(lambda x: x, (x,), raise_exception=False, fast_mode=fast_mode)
    x = lib.ones(1, dtype=lib.float32, requires_grad=True)
    with pytest.warns(UserWarning, match="Input #0 requires gradient and is not a double precision"):
        assert gradcheck(lambda x: x, (x,), atol=1e-1, fast_mode=fast_mode)
    x = lib.ones(1, dtype=lib.float64, requires_grad=True).expand((2, 2))
    with pytest.raises(RuntimeError, match="The 0th input has a dimension with stride 0"):
        gradcheck(lambda x: x, (x,), raise_exception=False, fast_mode=fast_mode)


@pytest.mark.parametrize("lib_name", LIBS)
@pytest.mark.parametrize("fast_mode", [True, False])
def test_gradcheck_check_no_differentiable_outputs(lib_name: str, fast_mode: bool) -> None:
    """torch: TestAutograd.test_gradcheck_check_no_differentiable_outputs (with
    a float64 input, and ``tensor([x.detach()])`` for ``tensor([x])``: pytest
    turns the warnings of those into errors, and torch warns only once per
    process, which another test checks)."""
    lib = _lib(lib_name)
    gradcheck, _ = _gradcheck(lib)
    x = lib.ones((1,), dtype=lib.double, requires_grad=True)
    with pytest.raises(RuntimeError, match="Numerical gradient for function expected to be zero"):
        gradcheck(lambda x: lib.tensor([x.detach()]), x)
    assert not gradcheck(lambda x: lib.tensor([x.detach()]), x, raise_exception=False, fast_mode=fast_mode)
    assert gradcheck(lambda x: (), (x,), fast_mode=fast_mode)


@pytest.mark.parametrize("lib_name", LIBS)
@pytest.mark.parametrize("fast_mode", [True, False])
def test_gradcheck_backward_mul_by_grad_output(lib_name: str, fast_mode: bool) -> None:
    """torch: TestAutograd.test_gradcheck_backward_mul_by_grad_output (its dense case)."""
    lib = _lib(lib_name)
    gradcheck, _ = _gradcheck(lib)

    def fn2(x: Any) -> Any:
        y = x.clone()
        y.register_hook(lambda g: g + 1e-2)
        return y

    x = lib.ones(1, dtype=lib.double, requires_grad=True)
    with pytest.raises(RuntimeError, match="backward not multiplied by grad_output"):
        gradcheck(fn2, (x,), atol=1e-1, fast_mode=fast_mode)
    assert not gradcheck(fn2, (x,), atol=1e-1, raise_exception=False, fast_mode=fast_mode)


@pytest.mark.parametrize("lib_name", LIBS)
@pytest.mark.parametrize("fast_mode", [True, False])
def test_gradcheck_output_shape_or_dtype_depend_on_values(lib_name: str, fast_mode: bool) -> None:
    """torch: TestAutograd.test_gradcheck_output_shape_or_dtype_depend_on_values."""
    lib = _lib(lib_name)
    gradcheck, _ = _gradcheck(lib)
    a = lib.ones(1, dtype=lib.double, requires_grad=True)
    with pytest.raises(AssertionError, match="return outputs with the same shape when inputs are perturbed"):
        gradcheck(lambda x: lib.cat([x, x]) if lib.all(x >= 1) else x, (a,), fast_mode=fast_mode)
    with pytest.raises(AssertionError, match="return outputs with the same dtype when inputs are perturbed"):
        gradcheck(lambda x: x.to(lib.float32) if lib.all(x >= 1) else x, (a,), fast_mode=fast_mode)


# -- hooks see undefined gradients ---------------------------------------------------------------------
def _undefined_backward(lib: Any) -> type:
    class U(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x.clone()

        @staticmethod
        def backward(ctx: Any, g: Any) -> None:
            return None

    return U


@pytest.mark.parametrize("lib_name", LIBS)
@pytest.mark.parametrize("fast_mode", [True, False])
def test_gradcheck_undefined_grad(lib_name: str, fast_mode: bool) -> None:
    """torch: TestAutograd.test_gradcheck_undefined_grad: a tensor hook is
    called with None for an undefined gradient (Note [Hooks see undefined gradients])."""
    lib = _lib(lib_name)
    gradcheck, _ = _gradcheck(lib)

    def fn(x: Any) -> Any:
        def hook(g: Any) -> None:
            if g is None:
                raise RuntimeError("x is undefined")

        y = x.clone()
        y.register_hook(hook)
        return y

    x = lib.ones(1, dtype=lib.double, requires_grad=True)
    with pytest.warns(UserWarning, match="Backwards compatibility: New undefined gradient support checking feature"):
        with pytest.raises(RuntimeError, match="Expected backward function to handle undefined output grads"):
            gradcheck(fn, (x,), fast_mode=fast_mode)
        assert not gradcheck(fn, (x,), raise_exception=False, fast_mode=fast_mode)


@pytest.mark.parametrize("lib_name", LIBS)
def test_hooks_see_an_undefined_gradient(lib_name: str) -> None:
    """The tensor hook and the node pre-hook of a node whose gradient is
    undefined run with None, and may not replace it (as in torch)."""
    lib = _lib(lib_name)
    U = _undefined_backward(lib)
    x = lib.randn(2, requires_grad=True)
    y = x * 2
    seen: list[Any] = []
    y.register_hook(lambda g: seen.append(("tensor", g)))
    y.grad_fn.register_prehook(lambda gs: seen.append(("node", gs)))
    _backward(lib, U.apply(y).sum())
    assert seen == [("tensor", None), ("node", (None,))]
    assert x.grad is None

    y = x * 2
    y.register_hook(lambda g: lib.ones(2))
    with pytest.raises(RuntimeError, match="can't replace a None gradient with a non-None value"):
        _backward(lib, U.apply(y).sum())


@pytest.mark.parametrize("lib_name", LIBS)
def test_set_materialize_non_diff_grads(lib_name: str) -> None:
    """torch: TestAutograd.test_set_materialize_non_diff_grads."""
    lib = _lib(lib_name)
    seen: list[Any] = []

    class Func(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            out0 = x.clone()
            out1 = x.clone()
            ctx.mark_non_differentiable(out1)
            ctx._materialize_non_diff_grads = False
            return out0, out1

        @staticmethod
        def backward(ctx: Any, g0: Any, g1: Any) -> Any:
            seen.append(g1)
            return g0

    a = lib.tensor(1.0, requires_grad=True)
    _backward(lib, Func.apply(a)[0])
    assert seen == [None]


# -- anomaly mode ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("lib_name", LIBS)
def test_nested_anomaly_detect_nan(lib_name: str) -> None:
    """torch: TestAutograd.test_nested_anomaly_detect_nan: a node recorded by a
    create_graph backward in anomaly mode names the node that induced it
    (Note [Anomaly parents])."""
    lib = _lib(lib_name)
    size = 10

    class MyFunc(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, inp1: Any, fail_0th: bool) -> Any:
            ctx.fail_0th = fail_0th
            ctx.save_for_backward(inp1)
            return inp1.sum(0, keepdim=True)

        @staticmethod
        def backward(ctx: Any, gO: Any) -> Any:
            (inp,) = ctx.saved_tensors
            g = gO.clone().expand(size)
            return MyFunc2.apply(g * inp, g + inp, ctx.fail_0th), None

    class MyFunc2(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, inp1: Any, inp2: Any, fail_0th: bool) -> Any:
            ctx.fail_0th = fail_0th
            return inp1 * 2.0 + inp2

        @staticmethod
        def backward(ctx: Any, gO: Any) -> Any:
            g1 = gO.clone()
            g2 = gO.clone()
            g1[0] = 0
            g2[0] = 0
            if ctx.fail_0th:
                g1[0] /= 0
            else:
                g2[0] /= 0
            return g1, g2, None

    inp = lib.rand(size, requires_grad=True)
    (ginp,) = _grad(lib, MyFunc.apply(inp, True), (inp,), create_graph=True)
    _backward(lib, ginp.sum())  # no NaN check outside anomaly mode

    inp = lib.rand(size, requires_grad=True)
    (ginp,) = _grad(lib, MyFunc.apply(inp, True), (inp,), create_graph=True)
    with pytest.warns(UserWarning) as w:
        with pytest.raises(RuntimeError, match="Function 'MyFunc2Backward' returned nan values in its 0th output."):
            with lib.autograd.detect_anomaly():
                _backward(lib, ginp.sum())
    assert "No forward pass information" in str(w[1].message)

    inp = lib.rand(size, requires_grad=True)
    with pytest.warns(UserWarning) as w:
        with pytest.raises(RuntimeError, match="Function 'MyFunc2Backward' returned nan values in its 1th output."):
            with lib.autograd.detect_anomaly():
                out = MyFunc.apply(inp, False)
                (ginp,) = _grad(lib, out, (inp,), create_graph=True)
                _backward(lib, ginp.sum())
    assert "MyFunc2.apply" in str(w[1].message)
    assert "Previous calculation was induced by MyFuncBackward" in str(w[2].message)
    assert "MyFunc.apply" in str(w[2].message)
    assert ginp.grad_fn.next_functions[0][0].metadata["parent_"] is out.grad_fn


# -- checkpoint ------------------------------------------------------------------------------------------
def test_custom_autograd_ac_early_stop() -> None:
    """torch: TestAutograd.test_custom_autograd_ac_early_stop: the tensors a
    custom Function saves while non-reentrant checkpoint recomputes it are
    freed with the backward, without the garbage collector.  (Not run on
    torch: there the first forward's tensor is sometimes still held by a
    frame of the early-stop exception's traceback until a collection.)"""
    lib = agrad
    checkpoint = agrad.utils.checkpoint.checkpoint
    refs = []

    class Test(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            y = x.clone()
            ctx.save_for_backward(y)
            refs.append(weakref.ref(y))
            return y

        @staticmethod
        def backward(ctx: Any, *args: Any) -> None:
            _ = ctx.saved_tensors
            return None

    inp = lib.randn(5, 5, requires_grad=True)

    def scope() -> None:
        out = checkpoint(Test.apply, inp, use_reentrant=False)
        _backward(lib, out.sum())

    with disabled_gc():
        scope()
        assert [r() for r in refs] == [None, None]


@pytest.mark.parametrize("lib_name", LIBS)
def test_attribute_deletion(lib_name: str) -> None:
    """torch: TestAutograd.test_attribute_deletion (less ``_backward_hooks``,
    a torch internal agrad has not, and, for agrad, ``del x._grad_fn``: see
    docs/differences.md)."""
    lib = _lib(lib_name)
    x = lib.randn((5, 5), requires_grad=True)
    del x.grad
    assert x.grad is None
    with pytest.raises(RuntimeError, match="Deleting tensor data is not allowed"):
        del x.data
    with pytest.raises(TypeError):
        x.data = None
    with pytest.raises(RuntimeError, match="requires_grad must be a bool"):
        del x.requires_grad
    if lib_name == "torch":  # agrad does not guard its private slot: docs/differences.md
        with pytest.raises(RuntimeError, match="Deletion of _grad_fn not allowed"):
            del x._grad_fn
    assert (x * 2).grad_fn is not None and x.requires_grad


def test_saved_tensor_hooks_extra_exit_during_bw_no_crash() -> None:
    """torch's ``test_saved_tensor_hooks_extra_exit_during_bw_no_crash``: an
    unpack hook that leaves a ``saved_tensors_hooks`` context during a backward
    changes nothing after the backward, as PyTorch restores its thread-local
    state (so the later exits are balanced)."""

    def unpack(x: Any) -> Any:
        ctx_1.__exit__()
        return x

    ctx_1 = agrad.autograd.graph.saved_tensors_hooks(lambda x: x, unpack)
    ctx_2 = agrad.autograd.graph.saved_tensors_hooks(lambda x: x, lambda x: x)
    for _ in range(10):
        with ctx_2:
            ctx_1.__enter__()
            x = agrad.randn(3, 3, requires_grad=True)
            x.sin().sum().backward_sync()
    for _ in range(10):
        ctx_1.__exit__()
    a = agrad.tensor(1.0, requires_grad=True)
    y = a.exp()
    y.grad_fn._raw_saved_result.register_hooks(lambda x: x, lambda x: x)


def test_saved_tensor_hooks_extra_enter_during_bw_no_leak() -> None:
    """torch's ``test_saved_tensor_hooks_extra_enter_during_bw_no_leak``: an
    unpack hook that enters its own context during a backward leaves no
    reference to it behind."""

    def scope() -> weakref.ref:
        def unpack(x: Any) -> Any:
            weak_ctx_1().__enter__()
            return x

        ctx_1 = agrad.autograd.graph.saved_tensors_hooks(lambda x: x, unpack)
        weak_ctx_1 = weakref.ref(ctx_1)
        x = agrad.randn(3, 3, requires_grad=True)
        with ctx_1:
            x.sin().sum().backward_sync()
        return weakref.ref(unpack)

    with disabled_gc():
        unpack_hook_ref = scope()
        assert unpack_hook_ref() is None
