"""``agrad.nn.Module`` and ``Parameter`` against ``torch.nn``'s: registration, walking,
state dicts, hooks, conversions, printing and misuse, on custom modules built
the same way in both libraries (no layers, so only the base class is tested)."""

from __future__ import annotations

import copy
import pickle
import warnings
from collections import OrderedDict
from typing import Any

import anyio
import anyio.lowlevel
import numpy as np
import pytest

import agrad
from tests.helpers import requires_torch, torch


def build(lib: Any) -> Any:
    """A two-level custom module: parameters, a None parameter, buffers (one not
    persistent), a shared child registered twice, an extra_repr."""
    nn = lib.nn

    class Scale(nn.Module):
        def __init__(self, n: int) -> None:
            super().__init__()
            self.weight = nn.Parameter(lib.arange(1.0, n + 1.0))
            self.register_parameter("bias", None)
            self.register_buffer("count", lib.zeros(n))
            self.register_buffer("scratch", lib.ones(n), persistent=False)

        def forward(self, x: Any) -> Any:
            return x * self.weight

        def extra_repr(self) -> str:
            return f"n={self.weight.shape[0]}"

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first = Scale(3)
            self.shared = Scale(3)
            self.again = self.shared
            self.offset = nn.Parameter(lib.full((3,), 0.5))

        def forward(self, x: Any) -> Any:
            return self.again(self.first(x)) + self.offset

    return Net()


def names(pairs: Any) -> list[str]:
    return [name for name, _ in pairs]


@requires_torch
def test_walks_and_state_dict_keys_are_torchs() -> None:
    ours, theirs = build(agrad), build(torch)
    for method in ("named_parameters", "named_buffers", "named_modules", "named_children"):
        assert names(getattr(ours, method)()) == names(getattr(theirs, method)()), method
    assert names(ours.named_parameters(remove_duplicate=False)) == names(theirs.named_parameters(
        remove_duplicate=False))
    assert names(ours.named_parameters(prefix="m", recurse=False)) == names(theirs.named_parameters(
        prefix="m", recurse=False))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert list(ours.state_dict(prefix="p.")) == list(theirs.state_dict(prefix="p."))
    assert len(list(ours.parameters())) == len(list(theirs.parameters())) == 3
    assert len(list(ours.modules())) == len(list(theirs.modules())) == 3
    assert repr(ours).replace("agrad", "torch") == repr(theirs)


@requires_torch
def test_forward_and_gradients_match_after_load_state_dict() -> None:
    ours, theirs = build(agrad), build(torch)
    with torch.no_grad():
        for p in theirs.parameters():
            p.uniform_(-1, 1)
    result = ours.load_state_dict({k: agrad.from_numpy(v.numpy().copy()) for k, v in theirs.state_dict().items()})
    assert repr(result) == "<All keys matched successfully>"
    x = np.array([0.5, -1.0, 2.0])
    out = ours(agrad.from_numpy(x))
    ref = theirs(torch.from_numpy(x).float())
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-6)
    out.sum().backward_sync()
    ref.sum().backward()
    for (n, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-6, err_msg=n)


def test_state_dict_is_detached_and_shares_memory() -> None:
    m = build(agrad)
    sd = m.state_dict()
    assert isinstance(sd, OrderedDict)
    assert type(sd["offset"]) is agrad.Tensor and not sd["offset"].requires_grad
    sd["offset"].add_(1)
    assert m.offset.tolist() == [1.5, 1.5, 1.5]
    assert m.state_dict(keep_vars=True)["offset"] is m.offset


@requires_torch
@pytest.mark.parametrize("case", ["missing", "unexpected", "shape", "all", "not_a_tensor"])
def test_load_state_dict_errors_are_torchs(case: str) -> None:
    def bad(lib: Any) -> dict[str, Any]:
        sd = dict(build(lib).state_dict())
        if case in ("missing", "all"):
            del sd["first.count"]
        if case in ("unexpected", "all"):
            sd["first.extra"] = lib.zeros(1)
            sd["nothing.here"] = lib.zeros(1)
        if case in ("shape", "all"):
            sd["offset"] = lib.zeros(4)
        if case == "not_a_tensor":
            sd["offset"] = [1.0, 2.0, 3.0]
        return sd

    with pytest.raises(RuntimeError) as theirs:
        build(torch).load_state_dict(bad(torch))
    ours = build(agrad)
    before = {k: v.clone() for k, v in ours.state_dict().items()}
    with pytest.raises(RuntimeError) as mine:
        ours.load_state_dict(bad(agrad))
    assert str(mine.value) == str(theirs.value).replace("torch", "agrad")
    # Note [Loading is all or nothing]: nothing was copied
    for k, v in ours.state_dict().items():
        assert agrad.equal(v, before[k]), k


@requires_torch
def test_load_state_dict_not_strict_returns_the_keys() -> None:
    sd_t = dict(build(torch).state_dict())
    sd_a = dict(build(agrad).state_dict())
    for sd, lib in ((sd_t, torch), (sd_a, agrad)):
        del sd["shared.weight"]
        sd["extra"] = lib.zeros(1)
    theirs = build(torch).load_state_dict(sd_t, strict=False)
    ours = build(agrad).load_state_dict(sd_a, strict=False)
    assert (ours.missing_keys, ours.unexpected_keys) == (theirs.missing_keys, theirs.unexpected_keys)
    assert repr(ours) == repr(theirs).replace("torch", "agrad")
    with pytest.raises(TypeError, match="Expected state_dict to be dict-like"):
        build(agrad).load_state_dict([1, 2])


def test_load_state_dict_assign_and_dtype_cast() -> None:
    m = build(agrad)
    sd = {k: v.double() + 1 for k, v in m.state_dict().items()}
    m.load_state_dict(sd)  # copied into the float32 parameters
    assert m.offset.dtype is agrad.float32 and m.offset.tolist() == [1.5, 1.5, 1.5]
    old = m.offset
    m.load_state_dict({k: v.float() for k, v in sd.items()}, assign=True)
    assert m.offset is not old and isinstance(m.offset, agrad.nn.Parameter) and m.offset.requires_grad


@requires_torch
@pytest.mark.parametrize("what", [
    "param_wrong_type", "param_before_init", "module_before_init", "buffer_name_dot", "buffer_name_empty",
    "buffer_name_type", "buffer_exists", "buffer_wrong_type", "module_over_param", "add_module_type",
    "missing_attr", "kwargs_to_init", "non_leaf_param", "get_submodule", "get_parameter", "train_mode",
    "module_to_int_dtype",
])
def test_misuse_raises_what_torch_raises(what: str) -> None:
    def act(lib: Any) -> None:
        nn = lib.nn
        m = build(lib)
        if what == "param_wrong_type":
            m.offset = lib.zeros(3)
        elif what == "param_before_init":
            class Early(nn.Module):
                def __init__(self) -> None:
                    self.w = nn.Parameter(lib.zeros(1))
            Early()
        elif what == "module_before_init":
            class Early2(nn.Module):
                def __init__(self) -> None:
                    self.child = nn.Module()
            Early2()
        elif what == "buffer_name_dot":
            m.register_buffer("a.b", lib.zeros(1))
        elif what == "buffer_name_empty":
            m.register_buffer("", lib.zeros(1))
        elif what == "buffer_name_type":
            m.register_buffer(3, lib.zeros(1))
        elif what == "buffer_exists":
            m.register_buffer("offset", lib.zeros(1))
        elif what == "buffer_wrong_type":
            m.register_buffer("b", [1])
        elif what == "module_over_param":
            m.first = 3
        elif what == "add_module_type":
            m.add_module("x", 3)
        elif what == "missing_attr":
            _ = m.nope
        elif what == "kwargs_to_init":
            nn.Module(foo=1)
        elif what == "non_leaf_param":
            x = lib.ones(2, requires_grad=True)
            m.register_parameter("w", nn.Parameter(x) * 2)
        elif what == "get_submodule":
            m.get_submodule("first.nope")
        elif what == "get_parameter":
            m.get_parameter("first.count")
        elif what == "train_mode":
            m.train("yes")
        elif what == "module_to_int_dtype":
            m.to(lib.int64)

    with pytest.raises(Exception) as theirs:
        act(torch)
    with pytest.raises(Exception) as mine:
        act(agrad)
    assert type(mine.value) is type(theirs.value)
    assert str(mine.value) == str(theirs.value).replace("torch", "agrad")


def test_hooks_run_in_torchs_order_and_can_replace() -> None:
    m = build(agrad)
    calls: list[str] = []
    m.register_forward_pre_hook(lambda mod, args: calls.append("pre1"))
    m.register_forward_pre_hook(lambda mod, args: calls.append("pre0"), prepend=True)
    m.register_forward_pre_hook(lambda mod, args, kwargs: ((args[0] * 0,), kwargs), with_kwargs=True)
    h = m.register_forward_hook(lambda mod, args, out: out + 100)
    m.register_forward_hook(lambda mod, args, kwargs, out: calls.append(f"post {kwargs}"), with_kwargs=True)
    out = m(agrad.ones(3))
    assert calls == ["pre0", "pre1", "post {}"]
    assert out.tolist() == [100.5, 100.5, 100.5]  # input zeroed by the pre-hook, output shifted by the hook
    h.remove()
    assert m(agrad.ones(3)).tolist() == [0.5, 0.5, 0.5]


def test_always_call_hook_runs_when_forward_raises() -> None:
    class Boom(agrad.nn.Module):
        def forward(self, x: Any) -> Any:
            raise ValueError("boom")

    seen: list[Any] = []
    m = Boom()
    m.register_forward_hook(lambda mod, args, out: seen.append(out), always_call=True)
    m.register_forward_hook(lambda mod, args, out: seen.append("not always"))
    with pytest.raises(ValueError, match="boom"):
        m(agrad.ones(1))
    assert seen == [None]


class AsyncNet(agrad.nn.Module):
    """Note [Async forward]: a forward that awaits between layers."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = build(agrad)

    async def forward(self, x: agrad.Tensor) -> agrad.Tensor:
        await anyio.lowlevel.checkpoint()
        return self.inner(x) * 2


@pytest.mark.anyio
async def test_async_forward_is_awaited_with_hooks() -> None:
    m = AsyncNet()
    m.register_forward_hook(lambda mod, args, out: out + 1)
    x = agrad.ones(3, requires_grad=True)
    out = await m(x)
    assert out.tolist() == [4.0, 10.0, 20.0]  # (1*w1*w2 + 0.5) * 2 + 1 with w = 1, 2, 3
    await out.sum().backward()
    assert x.grad.tolist() == [2.0, 8.0, 18.0]


def test_conversions_keep_parameter_identity() -> None:
    m = build(agrad)
    p = m.offset
    m(agrad.ones(3)).sum().backward_sync()
    assert m.double() is m
    assert m.offset is p and p.dtype is agrad.float64 and p.grad.dtype is agrad.float64
    assert m.first.count.dtype is agrad.float64
    m.to(agrad.float32)
    assert p.dtype is agrad.float32
    m.to("cpu", agrad.float64)
    assert p.dtype is agrad.float64
    m.to(agrad.zeros(1, dtype=agrad.float32))
    assert p.dtype is agrad.float32


def test_zero_grad_requires_grad_train_eval_apply() -> None:
    m = build(agrad)
    m(agrad.ones(3)).sum().backward_sync()
    m.zero_grad(set_to_none=False)
    assert m.offset.grad.tolist() == [0.0, 0.0, 0.0]
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())
    assert m.eval() is m and not any(mod.training for mod in m.modules())
    m.train()
    assert all(mod.training for mod in m.modules())
    seen: list[str] = []
    m.apply(lambda mod: seen.append(type(mod).__name__))
    assert seen == ["Scale", "Scale", "Net"]


def test_parameter_basics() -> None:
    p = agrad.nn.Parameter(agrad.ones(2))
    assert isinstance(p, agrad.Tensor) and p.requires_grad and p.is_leaf
    assert type(p + 1) is agrad.Tensor and type(p.detach()) is agrad.Tensor
    assert not agrad.nn.Parameter(agrad.ones(2), requires_grad=False).requires_grad
    assert agrad.nn.Parameter().shape == (0,)
    q = copy.deepcopy(p)
    assert type(q) is agrad.nn.Parameter and q.requires_grad and q is not p
    r = pickle.loads(pickle.dumps(p))
    assert type(r) is agrad.nn.Parameter and r.tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError, match="only Tensors of floating point"):
        agrad.nn.Parameter(agrad.ones(2, dtype=agrad.int64))


def test_buffer_marker_registers_a_buffer() -> None:
    class M(agrad.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.kept = agrad.nn.Buffer(agrad.ones(1))
            self.dropped = agrad.nn.Buffer(agrad.zeros(1), persistent=False)

    m = M()
    assert list(m.state_dict()) == ["kept"] and names(m.named_buffers()) == ["kept", "dropped"]
    assert isinstance(m.kept, agrad.nn.Buffer)  # as PyTorch: the registered tensor keeps its buffer mark


def test_deepcopy_keeps_sharing() -> None:
    m = build(agrad)
    c = copy.deepcopy(m)
    assert c.shared is c.again and c.shared is not m.shared
    assert type(c.offset) is agrad.nn.Parameter
    assert names(c.named_parameters()) == names(m.named_parameters())


def _hooked_run(lib: Any, input_requires_grad: bool, replace: bool) -> tuple[list[Any], Any, Any]:
    """Run build(lib)'s first layer with full backward hooks; what they saw, x.grad and the weight's grad."""
    m = build(lib)
    layer = m.first
    seen: list[Any] = []

    def pre_hook(mod: Any, grad_output: Any) -> Any:
        seen.append(("pre", [g.tolist() for g in grad_output]))
        return (grad_output[0] * 10,) if replace else None

    def hook(mod: Any, grad_input: Any, grad_output: Any) -> Any:
        seen.append(("full", [None if g is None else g.tolist() for g in grad_input],
                     [g.tolist() for g in grad_output]))
        return (grad_input[0] + 1,) if replace and grad_input[0] is not None else None

    layer.register_full_backward_pre_hook(pre_hook)
    layer.register_full_backward_hook(hook)
    x = lib.tensor([1.0, 2.0, 3.0], requires_grad=input_requires_grad)
    loss = (m(x) * lib.tensor([1.0, -1.0, 2.0])).sum()
    loss.backward() if lib is torch else loss.backward_sync()
    return seen, None if x.grad is None else x.grad.tolist(), layer.weight.grad.tolist()


@requires_torch
@pytest.mark.parametrize("input_requires_grad", [True, False])
@pytest.mark.parametrize("replace", [False, True])
def test_full_backward_hooks_see_and_replace_what_torchs_do(input_requires_grad: bool, replace: bool) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # both warn when no input requires grad
        theirs = _hooked_run(torch, input_requires_grad, replace)
        ours = _hooked_run(agrad, input_requires_grad, replace)
    assert ours == theirs


def test_full_backward_hook_warns_without_input_grad() -> None:
    with pytest.warns(UserWarning, match="Full backward hook is firing when gradients are computed"):
        _hooked_run(agrad, False, False)


def test_layer_list_is_every_familys() -> None:
    """``agrad.nn.modules.__all__`` is one literal list (mypy reads it); it must be
    ``Module`` and every family's ``__all__``, each name once, and all in ``agrad.nn``."""
    import importlib
    import pkgutil

    import agrad.nn.modules as modules

    families = [m.name for m in pkgutil.iter_modules(modules.__path__) if not m.name.startswith("_")
                and m.name not in ("module", "utils")]  # utils: state-dict helpers, no layers (as in torch)
    expected = ["Module"] + [n for f in families for n in importlib.import_module(f"agrad.nn.modules.{f}").__all__]
    assert sorted(modules.__all__) == sorted(expected) and len(set(expected)) == len(expected)
    assert set(modules.__all__) <= set(agrad.nn.__all__)
