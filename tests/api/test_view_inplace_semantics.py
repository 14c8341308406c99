"""Views, in-place writes and hooks in the autograd layer, against PyTorch (issue 14).

Items 6 (``mark_dirty`` on a view input), 9 (``retain_grad()`` follows a new
``grad_fn``), 19 (hooks on a view written in place do not fire) and 22
(misuses PyTorch refuses).  Each scenario is written once against a library
module and run by agrad and by torch; the results must agree.  Ports of
PyTorch's own tests (``test/test_autograd.py``) keep their names.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import agrad
from tests.helpers import requires_torch, torch

pytestmark = requires_torch
LIBS = pytest.mark.parametrize("lib", ["agrad", "torch"])


def _lib(name: str) -> Any:
    return agrad if name == "agrad" else torch


def backward(t: Any, *args: Any, **kwargs: Any) -> None:
    if isinstance(t, agrad.Tensor):
        t.backward_sync(*args, **kwargs)
    else:
        t.backward(*args, **kwargs)


def val(t: Any) -> Any:
    return None if t is None else t.detach().tolist()


def both(scenario: Any) -> Any:
    """``scenario(lib)`` run by agrad and torch; their results, which must be equal."""
    mine, theirs = scenario(agrad), scenario(torch)
    assert mine == theirs
    return mine


def error_of(fn: Any) -> tuple[str, str]:
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - compared with torch's below
        return type(exc).__name__, str(exc)
    return "no error", ""


def _add(lib: Any) -> Any:
    class Add(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any, y: Any) -> Any:
            x.add_(y)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g, g

    return Add


# -- item 6: mark_dirty on a view input ------------------------------------------------


@pytest.mark.parametrize("make", ["non_leaf", "leaf_clone"])
def test_mark_dirty_on_a_view_rebases_its_base(make: str) -> None:
    def scenario(lib: Any) -> Any:
        a = lib.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        b = lib.ones(2, requires_grad=True)
        x = a * 1 if make == "non_leaf" else a.clone()
        v = x.narrow(0, 1, 1).squeeze(0)
        r = _add(lib).apply(v, b)
        assert r is v
        assert x.grad_fn.name().endswith("CopySlices")
        backward((x * lib.tensor([[1.0, 2.0], [3.0, 4.0]])).sum())
        return val(b.grad), val(a.grad), val(x)

    assert both(scenario)[0] == [3.0, 4.0]


def test_mark_dirty_on_a_view_of_a_base_without_grad() -> None:
    def scenario(lib: Any) -> Any:
        x = lib.zeros(2, 2)
        b = lib.ones(2, requires_grad=True)
        _add(lib).apply(x[1], b)
        assert x.requires_grad
        backward(x.sum())
        return val(b.grad)

    assert both(scenario) == [1.0, 1.0]


def test_mark_dirty_on_a_view_of_a_leaf_raises() -> None:
    def scenario(lib: Any) -> Any:
        a = lib.ones(2, 2, requires_grad=True)
        return error_of(lambda: _add(lib).apply(a[1], lib.ones(2, requires_grad=True)))

    assert both(scenario) == (
        "RuntimeError", "a view of a leaf Variable that requires grad is being used in an in-place operation.")


def test_mark_dirty_on_a_view_bypasses_its_hooks_and_moves_retain_grad() -> None:
    def scenario(lib: Any) -> Any:
        fired: list[Any] = []
        x = lib.ones(2, 2, requires_grad=True).clone()
        v = x[1]
        v.register_hook(lambda g: fired.append(val(g)))
        v.retain_grad()
        _add(lib).apply(v, lib.ones(2, requires_grad=True))
        backward(v.sum(), retain_graph=True)
        backward(x.sum())
        return fired, val(v.grad)

    assert both(scenario) == ([], [1.0, 1.0])


def test_mark_dirty_bumps_the_version_recording_or_not() -> None:
    def scenario(lib: Any) -> Any:
        x = lib.ones(2, requires_grad=True).clone()
        _add(lib).apply(x, lib.ones(2, requires_grad=True))
        base = lib.ones(2, 2, requires_grad=True).clone()
        v = base[0]
        _add(lib).apply(v, lib.ones(2, requires_grad=True))
        with lib.no_grad():
            plain = lib.ones(2)
            _add(lib).apply(plain, lib.ones(2))
        return x._version, base._version, v._version, plain._version

    assert both(scenario) == (2, 2, 2, 2)


def test_inplace_on_view_python() -> None:
    """PyTorch's test of the same name: two dirty views of one base, checked by gradcheck and gradgradcheck."""
    for lib in (agrad, torch):
        rng = np.random.default_rng(0)
        a = lib.tensor(rng.standard_normal((4, 4)), requires_grad=True)
        b = lib.tensor(rng.standard_normal((2, 2)), requires_grad=True)
        add = _add(lib)

        def func(root: Any, b: Any, add: Any = add) -> Any:
            x = root.clone()
            add.apply(x.narrow(1, 2, 2).narrow(0, 1, 2), b)
            add.apply(x.narrow(1, 0, 2).narrow(0, 1, 2), b)
            return x

        assert lib.autograd.gradcheck(func, (a, b))
        go = lib.tensor(rng.standard_normal((4, 4)), requires_grad=True)
        assert lib.autograd.gradgradcheck(func, (a, b), (go,))


# -- item 9: retain_grad() moves with the grad_fn ----------------------------------------


@pytest.mark.parametrize("write", ["view", "base"])
def test_retain_grad_on_a_view_survives_an_inplace_write(write: str) -> None:
    def scenario(lib: Any) -> Any:
        x = lib.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True).clone()
        v = x[0]
        v.retain_grad()
        (v if write == "view" else x).mul_(2)
        assert v.retains_grad
        backward((v * v).sum())
        return val(v.grad)

    assert both(scenario) is not None


def test_retain_grad_on_a_view_follows_the_view_not_the_base() -> None:
    def scenario(lib: Any) -> Any:
        x = lib.ones(3, 2, requires_grad=True).clone()
        v = x[0]
        v.retain_grad()
        v.mul_(2)
        backward(x.sum())  # v's new grad_fn is not on this graph
        return val(v.grad)

    assert both(scenario) is None


def test_retains_grad_inplace() -> None:
    """PyTorch's test of the same name."""
    def scenario(lib: Any) -> Any:
        out = []
        for times in (1, 2):
            a = lib.ones(2, requires_grad=True).clone()
            a.retain_grad()
            for _ in range(times):
                a.mul_(2)
            backward(a.sum())
            out.append(val(a.grad))
        # an in-place write on a view moves the base's retain_grad to CopySlices
        x = lib.ones(2, requires_grad=True).clone()
        x.retain_grad()
        x_view = x[:]
        x_view *= 2
        x *= 2
        backward(x.sum())
        out.append(val(x.grad))
        # a base that did not require grad has nothing to move
        x = lib.zeros(4)
        y = x.view(2, 2)
        y.add_(lib.ones(2, 2, requires_grad=True))
        backward(x.view(2, 2).sum())
        return out

    assert both(scenario) == [[1.0, 1.0]] * 3


def test_retain_grad_on_a_base_moves_to_copy_slices() -> None:
    def scenario(lib: Any) -> Any:
        out = []
        for write in ("setitem", "view"):
            x = lib.ones(2, requires_grad=True).clone()
            x.retain_grad()
            if write == "setitem":
                x[:] *= 2
            else:
                x[:].mul_(2)
            backward((x * lib.tensor([1.0, 2.0])).sum())
            out.append(val(x.grad))
        return out

    assert both(scenario) == [[1.0, 2.0], [1.0, 2.0]]


def test_retain_grad_inplace_on_view() -> None:
    """PyTorch's test of the same name."""
    def scenario(lib: Any) -> Any:
        base = lib.ones(2, requires_grad=True).clone()
        view, view2 = base[:], base[:]
        view.retain_grad()
        view2.retain_grad()
        view.mul_(2)
        backward((view + view2).sum())
        return val(view.grad), val(view2.grad)

    assert both(scenario) == ([1.0, 1.0], [1.0, 1.0])


def test_retains_grad_inplace_multiple_outputs() -> None:
    """PyTorch's test of the same name (its custom Function case)."""
    def scenario(lib: Any) -> Any:
        class DoubleMul(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, x: Any) -> Any:
                return x * 2, x * 3

            @staticmethod
            def backward(ctx: Any, g1: Any, g2: Any) -> Any:
                return g1 * 2 + g2 * 3

        b = lib.tensor([[0.5, 1.0], [1.5, 2.0]], requires_grad=True)
        var, mean = DoubleMul.apply(b)
        var.retain_grad()
        mean.retain_grad()
        var.mul_(2)
        backward((var + mean).sum())
        return val(var.grad), val(mean.grad)

    assert both(scenario) == ([[1.0, 1.0], [1.0, 1.0]], [[1.0, 1.0], [1.0, 1.0]])


# -- item 19: hooks registered before an in-place write -------------------------------


def test_hook_on_a_view_written_in_place_does_not_fire() -> None:
    def scenario(lib: Any) -> Any:
        fired: list[Any] = []
        x = lib.ones(3, 2, requires_grad=True).clone()
        v = x[0]
        v.register_hook(lambda g: fired.append(val(g)))
        v.mul_(2)
        backward(x.sum(), retain_graph=True)
        backward(v.sum())
        return fired

    assert both(scenario) == []


def test_hook_on_a_non_view_fires_with_the_old_values_gradient() -> None:
    def scenario(lib: Any) -> Any:
        fired: list[Any] = []
        x = lib.ones(3, requires_grad=True).clone()
        x.register_hook(lambda g: fired.append(val(g)))
        x.mul_(2)
        backward(x.sum())
        return fired

    assert both(scenario) == [[2.0, 2.0, 2.0]]


def test_hook_registered_on_a_stale_view_hooks_its_current_history() -> None:
    def scenario(lib: Any) -> Any:
        fired: list[Any] = []
        x = lib.ones(3, 2, requires_grad=True).clone()
        v = x[0]
        x.mul_(2)
        v.grad_fn  # noqa: B018 - torch needs the refresh (without it, it crashes); agrad does it itself
        v.register_hook(lambda g: fired.append(val(g)))
        backward(v.sum())
        return fired

    assert both(scenario) == [[1.0, 1.0]]


def test_hook_registered_on_a_stale_view_fires_without_touching_grad_fn() -> None:
    # PyTorch crashes here (a hook on the stale node, then a backward through
    # the new one); agrad refreshes the view first, as ``v.grad_fn`` would.
    fired: list[Any] = []
    x = agrad.ones(3, 2, requires_grad=True).clone()
    v = x[0]
    x.mul_(2)
    v.register_hook(lambda g: fired.append(val(g)))
    backward(v.sum())
    assert fired == [[1.0, 1.0]]


def test_tensor_hooks_inplace() -> None:
    """PyTorch's test of the same name: a hook registered after the write hooks the new value."""
    def scenario(lib: Any) -> Any:
        seen: list[Any] = []

        def hook(tag: str) -> Any:
            def fn(grad: Any) -> Any:
                seen.append((tag, val(grad)))
                return grad * 2
            return fn

        a = lib.tensor(1.0, requires_grad=True)
        b = a.clone()
        b.register_hook(hook("before"))
        b.mul_(2)
        b.register_hook(hook("after"))
        backward(b.sum())
        first = val(a.grad)
        a = lib.tensor(1.0, requires_grad=True)
        b = a.clone()
        b.register_hook(hook("twice"))
        b.mul_(2)
        b.mul_(2)
        backward(b.sum())
        return seen, first, val(a.grad)

    assert both(scenario) == ([("after", 1.0), ("before", 4.0), ("twice", 4.0)], 8.0, 8.0)


def test_tensor_hooks_inplace_over_view() -> None:
    """PyTorch's test of the same name."""
    def scenario(lib: Any) -> Any:
        fired: list[Any] = []
        base = lib.tensor([1.0], requires_grad=True).clone()
        view, view2 = base[:], base[:]
        view.register_hook(lambda g: fired.append(("view", val(g))))
        view2.register_hook(lambda g: fired.append(("view2 before", val(g))))
        view.mul_(2)
        view2.grad_fn  # noqa: B018 - the refresh PyTorch's test triggers explicitly
        view2.register_hook(lambda g: fired.append(("view2 after", val(g))))
        backward((view + view2).sum())
        return fired

    assert both(scenario) == [("view2 after", [1.0])]


# -- item 22: misuses PyTorch refuses --------------------------------------------------


def _cases(lib: Any) -> dict[str, Any]:
    def detach_view() -> None:
        lib.ones(3, requires_grad=True)[1:].detach_()

    def own_grad() -> None:
        x = lib.ones(3, requires_grad=True)
        x.grad = x

    def int_data() -> None:
        a = lib.ones(3, requires_grad=True)
        a.data = lib.tensor([1, 2, 3])

    def grad_fn_arity(n: int) -> Any:
        def call() -> None:
            y = lib.ones(3, requires_grad=True) * lib.ones(3, requires_grad=True)
            y.grad_fn(*[lib.ones(3)] * n)
        return call

    def post_hook(result: Any) -> Any:
        def run() -> None:
            a = lib.ones(3, requires_grad=True)
            a.register_post_accumulate_grad_hook(lambda t: result(lib, t))
            backward((a * 2).sum())
        return run

    def second_backward(write: str) -> Any:
        def run() -> None:
            y = lib.ones(4, requires_grad=True).clone()
            if write == "index_put":
                y[lib.tensor([0, 2])] = lib.tensor([1.0, 2.0])
            else:
                y[0] = 5.0
            z = y.sum()
            backward(z)
            backward(z)
        return run

    def saved_detached() -> None:
        y = lib.ones(4, requires_grad=True) * 2
        z = y * y
        y.detach_()
        backward(z.sum())

    def multi_output(split: Any, write: Any) -> Any:
        def run() -> None:
            write(split(lib.ones(4, requires_grad=True) * 1)[0])
        return run

    def mark_dirty(t: Any) -> None:
        _add(lib).apply(t, lib.ones(t.shape, requires_grad=True))

    def dirty_view_two_outputs() -> None:
        class AddAndDouble(lib.autograd.Function):
            @staticmethod
            def forward(ctx: Any, x: Any, y: Any) -> Any:
                x.add_(y)
                ctx.mark_dirty(x)
                return x, y * 2

            @staticmethod
            def backward(ctx: Any, g: Any, h: Any) -> Any:
                return g, g + 2 * h

        AddAndDouble.apply((lib.ones(2, 2, requires_grad=True) * 1)[0], lib.ones(2, requires_grad=True))

    def no_grad_view(value_requires_grad: bool) -> Any:
        def run() -> None:
            x = lib.ones(4, requires_grad=not value_requires_grad) * 1
            with lib.no_grad():
                v = x[:2]
            v.mul_(lib.ones(1, requires_grad=True) if value_requires_grad else 2.0)
        return run

    def custom_view(derived: bool) -> Any:
        def run() -> None:
            class Flat(lib.autograd.Function):
                @staticmethod
                def forward(ctx: Any, x: Any) -> Any:
                    return x.view(-1)

                @staticmethod
                def backward(ctx: Any, g: Any) -> Any:
                    return g.view(2, 2)

            out = Flat.apply(lib.ones(2, 2, requires_grad=True) * 1)
            (out[:2] if derived else out).mul_(2)
        return run

    def mul_(t: Any) -> None:
        t.mul_(2)

    def setitem(t: Any) -> None:
        t[0] = 1.0

    return {
        "detach_ a view": detach_view,
        "assign a tensor as its own grad": own_grad,
        "int data on a leaf that requires grad": int_data,
        "grad_fn called with 2 gradients": grad_fn_arity(2),
        "grad_fn called with 0 gradients": grad_fn_arity(0),
        "post-accumulate hook returns a tensor": post_hook(lambda lib, t: t * 2),
        "post-accumulate hook returns an int": post_hook(lambda lib, t: 5),
        "second backward through index_put": second_backward("index_put"),
        "second backward through CopySlices": second_backward("copy_slices"),
        "saved input detached in place": saved_detached,
        "in-place on split()": multi_output(lambda t: t.split(2), mul_),
        "in-place on split(sizes)": multi_output(lambda t: t.split([1, 3]), mul_),
        "in-place on chunk()": multi_output(lambda t: t.chunk(2), mul_),
        "in-place on unbind()": multi_output(lambda t: t.unbind(), mul_),
        "detach_ on split()": multi_output(lambda t: t.split(2), lambda t: t.detach_()),
        "mark_dirty on split()": multi_output(lambda t: t.split(2), mark_dirty),
        "mark_dirty on a view, two outputs": dirty_view_two_outputs,
        "in-place on a view made in no_grad mode": no_grad_view(False),
        "requiring write into a no_grad view of a plain base": no_grad_view(True),
        "in-place on a custom Function's view output": custom_view(False),
        "in-place on a view of a custom Function's view output": custom_view(True),
        "autograd.backward(None)": lambda: (lib.autograd.backward_sync if lib is agrad
                                            else lib.autograd.backward)(None),
        "autograd.grad(None, x)": lambda: (lib.autograd.grad_sync if lib is agrad
                                           else lib.autograd.grad)(None, lib.ones(1, requires_grad=True)),
    }


@pytest.mark.parametrize("case", list(_cases(agrad)))
def test_misuse_raises_torchs_error(case: str) -> None:
    mine, theirs = error_of(_cases(agrad)[case]), error_of(_cases(torch)[case])
    assert mine[0] == theirs[0] != "no error"
    # The op named in a view's message is agrad's node (Index where PyTorch says Slice).
    mine_text, theirs_text = (m.replace("of Index ", "of Slice ") for m in (mine[1], theirs[1]))
    assert mine_text == theirs_text or mine_text in theirs_text, (mine, theirs)


def test_write_through_a_view_of_a_split_output_raises_and_changes_nothing() -> None:
    """A view of a multi-output view inherits the refusal (PyTorch names the
    view's own op, Select; agrad names the op the outputs came from)."""
    for lib in (agrad, torch):
        x = lib.ones(4, requires_grad=True) * 1
        out = x.split(2)[1]
        kind, msg = error_of(lambda out=out: out.__setitem__(0, 5.0))
        assert kind == "RuntimeError" and "This view is the output of a function that returns multiple views" in msg
        assert val(x) == [1.0] * 4 and x._version == 0


def test_detached_view_and_int_data_leave_the_tensor_as_it_was() -> None:
    for lib in (agrad, torch):
        a = lib.ones(3, requires_grad=True)
        v = a[1:]
        error_of(v.detach_)
        assert v.requires_grad and v.grad_fn is not None
        error_of(lambda a=a, lib=lib: setattr(a, "data", lib.tensor([1, 2, 3])))
        assert a.dtype == lib.float32 and val(a) == [1.0, 1.0, 1.0]


def test_split_outputs_may_be_written_where_nothing_is_recorded() -> None:
    def scenario(lib: Any) -> Any:
        x = lib.ones(4, requires_grad=True) * 1
        outs = x.split(2)
        with lib.no_grad():
            outs[0].mul_(2)
        plain = lib.ones(4).split(2)
        plain[0].mul_(3)
        return val(x), val(plain[0])

    assert both(scenario) == ([2.0, 2.0, 1.0, 1.0], [3.0, 3.0])


def test_write_into_a_view_of_a_no_grad_view_raises() -> None:
    """PyTorch names the derived view's node ("Output 0 of Slice is a view of a
    view which was created in no_grad mode"); agrad's derived view has no node
    (its source does not require grad there) and says "A view was created"."""
    for lib in (agrad, torch):
        x = lib.ones(4, requires_grad=True) * 1
        with lib.no_grad():
            v = x[:2]
        w = v[:1]
        kind, msg = error_of(lambda w=w: w.mul_(2))
        assert kind == "RuntimeError"
        assert "created in no_grad mode and is being modified inplace with grad mode enabled" in msg
        assert val(x) == [1.0] * 4


def test_views_made_in_no_grad_mode_may_be_written_where_nothing_is_recorded() -> None:
    def scenario(lib: Any) -> Any:
        x = lib.ones(4, requires_grad=True) * 1
        with lib.no_grad():
            v = x[:2]
            v.mul_(2)
        plain = lib.ones(4)
        with lib.no_grad():
            w = plain[:2]
        w.mul_(3)
        return val(x), val(plain)

    assert both(scenario) == ([2.0, 2.0, 1.0, 1.0], [3.0, 3.0, 1.0, 1.0])


def test_a_second_backward_with_retain_graph_still_works() -> None:
    def scenario(lib: Any) -> Any:
        x = lib.ones(4, requires_grad=True)
        y = x.clone()
        y[lib.tensor([0, 2])] = lib.tensor([1.0, 2.0])
        y[1] = 3.0
        z = (y * lib.tensor([1.0, 2.0, 3.0, 4.0])).sum()
        backward(z, retain_graph=True)
        backward(z)
        return val(x.grad)

    assert both(scenario) == [0.0, 0.0, 0.0, 8.0]
