"""PyTorch's autograd API semantics where agrad differed (issue 14), checked against torch."""

from __future__ import annotations

import anyio
import pytest

import agrad
from tests.helpers import requires_torch, torch


def _doubler(lib, calls):
    class Double(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            calls.append(1)
            return g * 2

    return Double


# -- item 7: grad() prunes nodes on no path to its inputs ----------------------
@requires_torch
@pytest.mark.anyio
async def test_grad_prunes_a_lone_root_unrelated_to_inputs():
    results = {}
    for lib in (torch, agrad):
        calls: list[int] = []
        a = lib.ones(3, requires_grad=True)
        b = lib.ones(3, requires_grad=True)
        y = _doubler(lib, calls).apply(a)
        args = (y, [b])
        kwargs = dict(grad_outputs=[lib.ones(3)], allow_unused=True)
        got = lib.autograd.grad(*args, **kwargs) if lib is torch else await lib.autograd.grad(*args, **kwargs)
        results[lib] = (got, len(calls))
    assert results[agrad] == results[torch] == ((None,), 0)


@requires_torch
@pytest.mark.anyio
async def test_grad_prunes_a_function_beside_the_inputs():
    for lib in (torch, agrad):
        calls: list[int] = []
        a = lib.ones(3, requires_grad=True)
        b = lib.ones(3, requires_grad=True)
        h = b * 2
        out = (_doubler(lib, calls).apply(a) * h).sum()
        (g,) = lib.autograd.grad(out, [h]) if lib is torch else await lib.autograd.grad(out, [h])
        assert g.tolist() == [2.0, 2.0, 2.0]
        assert calls == []


# -- item 8: materialize_grads with create_graph --------------------------------
@requires_torch
@pytest.mark.parametrize("create_graph", [False, True])
def test_materialized_zeros_require_grad_under_create_graph(create_graph):
    a, b = agrad.ones(2, requires_grad=True), agrad.ones(2, requires_grad=True)
    ta, tb = torch.ones(2, requires_grad=True), torch.ones(2, requires_grad=True)
    got = agrad.autograd.grad_sync((a * 2).sum(), [a, b], create_graph=create_graph, materialize_grads=True)
    want = torch.autograd.grad((ta * 2).sum(), [ta, tb], create_graph=create_graph, materialize_grads=True)
    assert [g.tolist() for g in got] == [w.tolist() for w in want]
    assert [g.requires_grad for g in got] == [w.requires_grad for w in want]
    assert got[1].is_leaf == want[1].is_leaf


# -- item 10: grad-mode decorators on generators, async generators, classes ------
# Built only inside a test: set_grad_enabled(False) sets the mode as it is constructed.
_MODE_DECORATORS = {
    "no_grad()": (lambda lib: lib.no_grad(), False),
    "no_grad": (lambda lib: lib.no_grad, False),
    "enable_grad()": (lambda lib: lib.enable_grad(), True),
    "set_grad_enabled(False)": (lambda lib: lib.set_grad_enabled(False), False),
    "inference_mode()": (lambda lib: lib.inference_mode(), False),
    "inference_mode(False)": (lambda lib: lib.inference_mode(False), True),
}


@requires_torch
@pytest.mark.parametrize("name", list(_MODE_DECORATORS))
@pytest.mark.parametrize("outer", [True, False])
def test_decorated_generator_runs_under_the_mode_and_restores_it_between_items(name, outer):
    seen = {}
    for lib in (torch, agrad):
        make, mode = _MODE_DECORATORS[name]
        with lib.set_grad_enabled(outer):
            decorator = make(lib)

            @decorator
            def gen(lib=lib):
                received = yield lib.is_grad_enabled()
                yield (lib.is_grad_enabled(), received)
                return "done"

            g = gen()
            first = next(g)
            between = lib.is_grad_enabled()
            second = g.send("sent")
            with pytest.raises(StopIteration) as stop:
                next(g)
            seen[lib] = (first, between, second, stop.value.value)
        assert seen[lib] == (mode, outer, (mode, "sent"), "done")
        assert lib.is_grad_enabled()
    assert seen[agrad] == seen[torch]


@requires_torch
def test_decorated_generator_sees_the_mode_in_throw_and_close():
    for lib in (torch, agrad):
        modes = []

        @lib.no_grad()
        def gen(lib=lib, modes=modes):
            try:
                yield 1
            except KeyError:
                modes.append(("throw", lib.is_grad_enabled()))
                yield 2
            finally:
                modes.append(("finally", lib.is_grad_enabled()))

        g = gen()
        next(g)
        assert g.throw(KeyError("k")) == 2
        g.close()
        assert modes == [("throw", False), ("finally", False)]
        assert lib.is_grad_enabled()


@pytest.mark.anyio
async def test_decorated_async_generator_and_coroutine_run_under_the_mode():
    # PyTorch only creates the coroutine or async generator under the mode;
    # agrad holds it while their bodies run (Note [Decorated generators]).
    @agrad.no_grad()
    async def agen():
        x = agrad.ones(2, requires_grad=True)
        received = yield (x * 2).requires_grad
        yield agrad.is_grad_enabled(), received

    @agrad.inference_mode()
    async def coro():
        return agrad.is_grad_enabled(), agrad.is_inference_mode_enabled()

    g = agen()
    assert await g.asend(None) is False
    assert agrad.is_grad_enabled()
    assert await g.asend("sent") == (False, "sent")
    await g.aclose()
    assert await coro() == (False, True)
    assert agrad.is_grad_enabled() and not agrad.is_inference_mode_enabled()


@requires_torch
@pytest.mark.parametrize("name", ["no_grad", "enable_grad", "inference_mode"])
def test_decorating_a_class_warns_and_constructs_under_the_mode(name):
    for lib in (torch, agrad):
        with pytest.warns(FutureWarning, match="Decorating classes is deprecated"):
            @getattr(lib, name)()
            class Probe:
                def __init__(self, lib=lib):
                    self.mode = lib.is_grad_enabled()

        assert Probe().mode is (name == "enable_grad")


# -- item 12: numpy() under no_grad, tensor() of tensors -------------------------
@requires_torch
def test_numpy_of_a_tensor_requiring_grad_is_allowed_under_no_grad():
    for lib in (torch, agrad):
        x = lib.ones(2, requires_grad=True)
        with pytest.raises(RuntimeError, match="Can't call numpy\\(\\) on Tensor that requires grad"):
            x.numpy()
        with lib.no_grad():
            assert x.numpy().tolist() == [1.0, 1.0]


@requires_torch
def test_tensor_of_one_element_tensors_copies_their_values():
    for lib in (torch, agrad):
        s = lib.tensor(3.0, requires_grad=True)
        with pytest.warns(UserWarning, match="Converting a tensor with requires_grad=True to a scalar"):
            got = lib.tensor([s, 1.0])
        assert got.tolist() == [3.0, 1.0] and not got.requires_grad and got.dtype == lib.float32
        with lib.no_grad():
            assert lib.tensor([[s, s]]).tolist() == [[3.0, 3.0]]
        assert lib.tensor([lib.tensor(3), lib.tensor(4)]).dtype == lib.int64
        with pytest.raises(ValueError, match="only one element tensors can be converted to Python scalars"):
            lib.tensor([lib.ones(2), lib.ones(2)])


# -- item 13: setup_context receives forward's defaults ---------------------------
@requires_torch
def test_setup_context_inputs_include_forward_defaults():
    results = {}
    for lib in (torch, agrad):
        seen = []

        class Affine(lib.autograd.Function):
            @staticmethod
            def forward(x, scale=3.0, shift=1.0):
                return x * scale + shift

            @staticmethod
            def setup_context(ctx, inputs, output, seen=seen):
                seen.append(inputs[1:])
                ctx.scale = inputs[1]

            @staticmethod
            def backward(ctx, g):
                return g * ctx.scale, None, None

        x = lib.ones(2, requires_grad=True)
        Affine.apply(x)
        y = Affine.apply(x, shift=0.5)
        (g,) = lib.autograd.grad(y.sum(), [x]) if lib is torch else lib.autograd.grad_sync(y.sum(), [x])
        results[lib] = (seen, y.tolist(), g.tolist())
    assert results[agrad] == results[torch] == ([(3.0, 1.0), (3.0, 0.5)], [3.5, 3.5], [3.0, 3.0])


# -- item 18: inference mode and inference tensors (after PyTorch's test_autograd.py) --
@pytest.fixture(params=["agrad", "torch"])
def lib(request):
    if request.param == "torch":
        if torch is None:
            pytest.skip("PyTorch (the test oracle) is not installed")
        return torch
    return agrad


_SAVED = "Inference tensors cannot be saved for backward"
_INPLACE = "Inplace update to inference tensor outside InferenceMode is not allowed"


def test_inference_mode_context_manager(lib):
    assert not lib.is_inference_mode_enabled()
    with lib.inference_mode():
        assert lib.is_inference_mode_enabled() and not lib.is_grad_enabled()
        with lib.inference_mode(False):
            assert not lib.is_inference_mode_enabled() and lib.is_grad_enabled()
        assert lib.is_inference_mode_enabled()
    assert not lib.is_inference_mode_enabled() and lib.is_grad_enabled()


def test_inference_mode_decorator(lib):
    for mode in (True, False):
        @lib.inference_mode(mode)
        def func(x, lib=lib, mode=mode):
            assert lib.is_inference_mode_enabled() == mode
            return x * x

        for requires_grad in (True, False):
            c = lib.ones(1, 2, 3, requires_grad=requires_grad)
            d = func(c)
            assert not mode or d.is_inference()
            assert d.requires_grad == (requires_grad and not mode)


def test_inference_mode_tensor_creation(lib):
    with lib.inference_mode():
        c = lib.ones(1, 2, 3, requires_grad=True)
        assert c.requires_grad and c.is_inference()
        tmp = lib.ones(1, 2, 3)
        assert not tmp.requires_grad and tmp.is_inference()
        tmp = lib.ones(1, 2, 3).requires_grad_(False)
        assert not tmp.requires_grad and tmp.is_inference()
        assert lib.tensor([1.0]).is_inference()
    assert not lib.ones(1).is_inference()


def test_inference_mode_existing_autograd_session(lib):
    s = lib.ones(1, 2, 3, requires_grad=True)
    a = s.clone()
    out = a * a  # saves a, recorded outside inference mode
    with lib.inference_mode():
        a.add_(2)  # a normal tensor: its version still counts
    assert a._version == 1
    with pytest.raises(RuntimeError, match="one of the variables needed for gradient computation has been modified"):
        out.backward(lib.ones_like(out)) if lib is torch else out.backward_sync(lib.ones_like(out))


@pytest.mark.parametrize("requires_grad", [True, False])
def test_inference_mode_inf_tensor_in_inf_mode_ops(lib, requires_grad):
    with lib.inference_mode():
        c = lib.ones(1, 2, 3, requires_grad=requires_grad)
        for out in (c * c, c.view(2, 3), c[0], c.unsqueeze(0)):  # functional ops and views
            assert out.is_inference() and not out.requires_grad
        c.add_(2)  # in place, inside inference mode: allowed
        c.view(-1)[0:1].mul_(2)
        assert c.is_inference() and c.requires_grad == requires_grad
        with pytest.raises(RuntimeError, match="Inference tensors do not track version counter"):
            _ = c._version


@pytest.mark.parametrize("requires_grad", [True, False])
def test_inference_mode_inf_tensor_in_normal_mode(lib, requires_grad):
    with lib.inference_mode():
        c = lib.ones(2, 3, requires_grad=requires_grad)
    assert not c.exp().is_inference()  # a functional op outside inference mode makes a normal tensor
    assert c.view(6).is_inference() and c[0:1].is_inference() and c.detach().is_inference()
    assert not c.clone().is_inference()
    before = c.tolist()
    # A leaf that requires grad is refused as such first, as in PyTorch.
    leaf = "a leaf Variable that requires grad" if requires_grad else _INPLACE
    for write, refusal in ((lambda: c.add_(1), leaf), (lambda: c.view(6).mul_(2), _INPLACE),
                           (lambda: c.__setitem__(0, 5.0), _INPLACE)):
        with pytest.raises(RuntimeError, match=refusal):
            write()
        if lib is agrad:
            assert c.tolist() == before  # nothing half-applied (PyTorch writes, then raises)
    with pytest.raises(RuntimeError, match="Setting requires_grad=True on inference tensor outside InferenceMode"):
        c.detach().requires_grad_()
    c.detach().requires_grad_(False)


def test_inference_tensors_cannot_be_saved_for_backward(lib):
    with lib.inference_mode():
        i = lib.ones(2, 3)
    x = lib.ones(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match=_SAVED):
        x * i
    with pytest.raises(RuntimeError, match=_SAVED):
        x.clone().mul_(i)
    y = x + i  # add saves neither input
    (y.sum().backward() if lib is torch else y.sum().backward_sync())
    assert x.grad.tolist() == [[1.0] * 3] * 2

    class Saves(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(b)
            return a * 1

        @staticmethod
        def backward(ctx, g):
            return g, None

    with pytest.raises(RuntimeError, match=_SAVED):
        Saves.apply(x, i)
    with lib.inference_mode(False):
        with pytest.raises(RuntimeError, match=_SAVED):
            x * i


def test_normal_tensor_views_made_in_inference_mode_stay_normal(lib):
    n = lib.ones(2, 3)
    with lib.inference_mode():
        v = n.view(6)
        n.add_(1)
    assert not v.is_inference() and n._version == 1
    v.mul_(2)
    assert n.tolist() == [[4.0] * 3] * 2


@pytest.mark.anyio
async def test_inference_mode_is_per_task():
    seen = {}
    entered = anyio.Event()
    leave = anyio.Event()

    async def inside():
        with agrad.inference_mode():
            entered.set()
            await leave.wait()
            seen["inside"] = agrad.is_inference_mode_enabled(), agrad.ones(1).is_inference()

    async def beside():
        await entered.wait()
        seen["beside"] = agrad.is_inference_mode_enabled(), agrad.ones(1).is_inference()
        leave.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(inside)
        tg.start_soon(beside)
    assert seen == {"inside": (True, True), "beside": (False, False)}


# -- item 20: saved_tensors_hooks' stack, and what pack hooks see -------------------
def test_hooks_reentered_in_another_context_do_not_outlive_their_with():
    import contextvars

    packed = []
    hooks = agrad.autograd.graph.saved_tensors_hooks(lambda t: packed.append(1) or t, lambda t: t)
    x = agrad.ones(2, requires_grad=True)
    hooks.__enter__()
    other = contextvars.copy_context()
    other.run(hooks.__enter__)  # e.g. its own unpack hook, run in a backward's kernel thread
    hooks.__exit__(None, None, None)
    x * x
    assert packed == []  # inactive here once this context left its with
    other.run(lambda: x * x)
    assert packed == [1, 1]  # still active in the other context, which has not left its with


@requires_torch
def test_hooks_entered_inside_their_own_unpack_hook(lib):
    bw = (lambda t: t.backward()) if lib is torch else (lambda t: t.backward_sync())
    packed = []

    def unpack(t):
        with hooks:
            pass
        return t

    hooks = lib.autograd.graph.saved_tensors_hooks(lambda t: packed.append(1) or t, unpack)
    a = lib.ones(2, requires_grad=True)
    with hooks:
        y = (a * a).sum()
        bw(y)
        y = (a * a).sum()
    bw(y)
    assert len(packed) == 4
    packed.clear()
    a * a
    assert packed == []


@requires_torch
def test_unbalanced_saved_tensors_hooks_exit_raises_runtime_error(lib):
    hooks = lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t)
    with pytest.raises(RuntimeError):
        hooks.__exit__(None, None, None)


@requires_torch
@pytest.mark.parametrize("exponent", ["number", "tensor", "tensor requiring grad"])
def test_pow_double_backward_packs_masks_only_where_torch_does(exponent):
    dtypes = {}
    for lib in (torch, agrad):
        seen = []
        x = lib.tensor([1.5, 2.0], requires_grad=True)
        e = {"number": 2.0, "tensor": lib.tensor([2.0, 3.0]),
             "tensor requiring grad": lib.tensor([2.0, 3.0], requires_grad=True)}[exponent]
        y = (x ** e).sum()
        with lib.autograd.graph.saved_tensors_hooks(lambda t, seen=seen: seen.append(t.dtype) or t, lambda t: t):
            args = (y, [x])
            lib.autograd.grad(*args, create_graph=True) if lib is torch else lib.autograd.grad_sync(*args,
                                                                                                   create_graph=True)
        dtypes[lib] = [str(d).split(".")[-1] for d in seen if str(d).endswith("bool")]
    assert dtypes[agrad] == dtypes[torch]


# -- item 23: PyTorch's warnings, and gradcheck's undefined-grad check ---------------
def _raising_function(lib):
    class Bad(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            raise ValueError("boom")

    return Bad


@requires_torch
def test_detect_anomaly_warns_when_constructed(lib):
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled. This mode will increase the runtime"):
        mode = lib.autograd.detect_anomaly()
    with mode:
        assert lib.is_anomaly_enabled()
    with lib.autograd.set_detect_anomaly(True):  # no warning (filterwarnings = error)
        assert lib.is_anomaly_enabled()


@requires_torch
@pytest.mark.parametrize("forward_anomaly", [True, False])
def test_backward_error_in_anomaly_mode_warns_with_the_forward_trace(lib, forward_anomaly):
    x = lib.ones(2, requires_grad=True)
    with lib.autograd.set_detect_anomaly(forward_anomaly):
        y = _raising_function(lib).apply(x).sum()
    detail = "Traceback of forward call that caused the error:\n" if forward_anomaly else "No forward pass information"
    with lib.autograd.set_detect_anomaly(True), pytest.raises(ValueError, match="boom"):
        with pytest.warns(UserWarning, match="Error detected in BadBackward. " + detail) as record:
            y.backward() if lib is torch else y.backward_sync()
    if forward_anomaly:
        assert "test_autograd_semantics.py" in str(record[0].message)  # the forward's frame


@requires_torch
def test_backward_error_outside_anomaly_mode_does_not_warn(lib):
    x = lib.ones(2, requires_grad=True)
    with lib.autograd.set_detect_anomaly(True):
        y = _raising_function(lib).apply(x).sum()
    with pytest.raises(ValueError, match="boom"):
        y.backward() if lib is torch else y.backward_sync()


@requires_torch
def test_saved_variables_is_deprecated(lib):
    class Square(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            with pytest.warns(DeprecationWarning, match="'saved_variables' is deprecated; use 'saved_tensors'"):
                (x,) = ctx.saved_variables
            return 2 * x * g

    x = lib.tensor([3.0], requires_grad=True)
    y = Square.apply(x).sum()
    (g,) = lib.autograd.grad(y, [x]) if lib is torch else lib.autograd.grad_sync(y, [x])
    assert g.tolist() == [6.0]


def _undefined_grad_functions(lib):
    class RefusesUndefined(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            if g is None:
                raise RuntimeError("undefined gradient")
            return g * 2

    class NonZeroForUndefined(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            ctx.shape = x.shape
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return lib.ones(ctx.shape, dtype=lib.float64) if g is None else g * 2

    return RefusesUndefined, NonZeroForUndefined


@requires_torch
@pytest.mark.parametrize("fast_mode", [False, True])
def test_gradcheck_checks_undefined_output_grads(lib, fast_mode):
    refuses, nonzero = _undefined_grad_functions(lib)
    x = lib.tensor([0.5, 1.5, 2.0], dtype=lib.float64, requires_grad=True)
    gradcheck = lib.autograd.gradcheck
    for fn, message in ((refuses, "Expected backward function to handle undefined output grads"),
                        (nonzero, "Expected all input grads to be undefined or zero")):
        with pytest.warns(UserWarning, match="Backwards compatibility: New undefined gradient support checking"):
            with pytest.raises(RuntimeError, match=message):  # GradcheckError, a RuntimeError in both
                gradcheck(fn.apply, (x,), fast_mode=fast_mode)
        with pytest.warns(UserWarning, match="Backwards compatibility"):
            assert gradcheck(fn.apply, (x,), fast_mode=fast_mode, raise_exception=False) is False
        assert gradcheck(fn.apply, (x,), fast_mode=fast_mode, check_undefined_grad=False)


@pytest.mark.parametrize("requires_grad", [True, False])
def test_inference_mode_inf_tensor_in_normal_mode_view_op(lib, requires_grad):
    with lib.inference_mode():
        c = lib.ones(1, 2, 3, requires_grad=requires_grad)
    out = c.view(-1)
    assert out.is_inference() and not out.requires_grad and not out._is_view() and out.is_leaf


@pytest.mark.parametrize("requires_grad", [True, False])
def test_mix_inference_and_normal_tensors(lib, requires_grad):
    s = lib.ones(1, 2, 3, requires_grad=requires_grad)
    with lib.inference_mode():
        c = lib.ones(1, 2, 3, requires_grad=requires_grad)
    out = c.add(s)  # add saves nothing: allowed
    assert not out.is_inference() and out.requires_grad == requires_grad
    if requires_grad:  # a leaf inference tensor requiring grad still gets its gradient
        out.backward(lib.ones_like(out)) if lib is torch else out.backward_sync(lib.ones_like(out))
        assert c.grad.tolist() == lib.ones_like(c).tolist()
    tmp1, tmp2 = c.view_as(s), s.view_as(c)
    assert tmp1.is_inference() and not tmp1.requires_grad
    assert not tmp2.is_inference() and tmp2.requires_grad == requires_grad
