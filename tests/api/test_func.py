"""``agrad.func`` against ``torch.func``: grad, grad_and_value, vjp (awaited and blocking) and
functional_call, including concurrent functional calls on one shared module."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import anyio
import numpy as np
import pytest

import agrad
from agrad import func
from tests.helpers import requires_torch, torch
from tests.nn.oracle import assert_close

RNG = np.random.default_rng(0)
X, W = RNG.standard_normal(3), RNG.standard_normal((2, 3))


def _t(lib: Any, a: np.ndarray, requires_grad: bool = False) -> Any:
    return lib.tensor(a, dtype=lib.float64, requires_grad=requires_grad)


def _same(mine: Any, theirs: Any, what: str = "") -> None:
    """Trees of equal structure with close float64 tensors."""
    if isinstance(theirs, dict):
        assert type(mine) is type(theirs) and list(mine) == list(theirs), what
        for k in theirs:
            _same(mine[k], theirs[k], f"{what}[{k!r}]")
    elif isinstance(theirs, (tuple, list)):
        assert type(mine) is type(theirs) and len(mine) == len(theirs), what
        for i, (a, b) in enumerate(zip(mine, theirs)):
            _same(a, b, f"{what}[{i}]")
    else:
        assert isinstance(mine, agrad.Tensor), what
        assert_close(mine, theirs, "float64", what)
        assert (mine.grad_fn is None) == (theirs.grad_fn is None), f"{what}: grad_fn presence"


# -- grad and grad_and_value ---------------------------------------------------------------------

CASES: list[tuple[str, Any, Any, dict[str, Any]]] = [
    ("one-arg", lambda lib: lambda x: (x.sin() * x).sum(), lambda lib: (_t(lib, X),), {}),
    ("argnum-1", lambda lib: lambda x, w: ((w @ x) ** 2).sum(), lambda lib: (_t(lib, X), _t(lib, W)),
     {"argnums": 1}),
    ("argnums-tuple", lambda lib: lambda x, w: ((w @ x) ** 2).sum(), lambda lib: (_t(lib, X), _t(lib, W)),
     {"argnums": (1, 0)}),
    ("negative", lambda lib: lambda x, w: (w @ x).exp().sum(), lambda lib: (_t(lib, X), _t(lib, W)),
     {"argnums": -1}),
    ("dict-arg", lambda lib: lambda p, x: (p["w"] @ x * p["b"]).sum(),
     lambda lib: ({"w": _t(lib, W), "b": _t(lib, X[:2])}, _t(lib, X)), {}),
    ("ordered-dict-arg", lambda lib: lambda p: (p["b"] * p["a"].exp()).sum(),
     lambda lib: (OrderedDict(b=_t(lib, X), a=_t(lib, X[::-1].copy())),), {}),
    ("tuple-arg", lambda lib: lambda p: (p[0] * p[1][0]).sum(), lambda lib: ((_t(lib, X), [_t(lib, X)]),), {}),
    ("has-aux", lambda lib: lambda x: ((x ** 2).sum(), {"double": x * 2}), lambda lib: (_t(lib, X),),
     {"has_aux": True}),
    ("unused", lambda lib: lambda x, w: (x * 2).sum(), lambda lib: (_t(lib, X), _t(lib, W)), {"argnums": (0, 1)}),
    ("constant", lambda lib: lambda x: lib.tensor(2.0, dtype=lib.float64), lambda lib: (_t(lib, X),), {}),
    ("requires-grad-input", lambda lib: lambda x: (x ** 3).sum(), lambda lib: (_t(lib, X, True),), {}),
]


@requires_torch
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("with_value", [False, True])
def test_grad_matches_torch_func(case: Any, with_value: bool) -> None:
    _, make_f, make_args, kwargs = case
    ours_t = func.grad_and_value_sync if with_value else func.grad_sync
    theirs_t = torch.func.grad_and_value if with_value else torch.func.grad
    _same(ours_t(make_f(agrad), **kwargs)(*make_args(agrad)), theirs_t(make_f(torch), **kwargs)(*make_args(torch)))


@requires_torch
def test_nested_grads_give_higher_derivatives() -> None:
    f = lambda x: (x ** 3).sin().sum()  # noqa: E731
    x = np.array([0.3, -0.7])
    ours = func.grad_sync(lambda x: func.grad_sync(f)(x).sum())(agrad.tensor(x))
    theirs = torch.func.grad(lambda x: torch.func.grad(f)(x).sum())(torch.tensor(x))
    _same(ours, theirs)
    third = func.grad_sync(func.grad_sync(func.grad_sync(lambda x: x ** 4)))(agrad.tensor(1.5))
    assert third.item() == pytest.approx(24 * 1.5)
    # the inner grad differentiates w.r.t. its own argument only: d/dx [d/dy (x * y)] at y = x is 1
    cross = func.grad_sync(lambda x: func.grad_sync(lambda y: x * y)(x))(agrad.tensor(2.0))
    assert cross.item() == 1.0


@requires_torch
def test_grad_of_a_requires_grad_input_stays_differentiable() -> None:
    x = agrad.tensor([1.0, 2.0], dtype=agrad.float64, requires_grad=True)
    g = func.grad_sync(lambda x: (x ** 3).sum())(x)  # 3x^2, recorded
    (gg,) = agrad.autograd.grad_sync(g.sum(), x)
    tx = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    (tgg,) = torch.autograd.grad(torch.func.grad(lambda x: (x ** 3).sum())(tx).sum(), tx)
    _same(gg, tgg)
    assert x.grad is None
    with agrad.no_grad():
        assert func.grad_sync(lambda x: (x ** 3).sum())(x).grad_fn is None


@requires_torch
def test_grad_through_a_closed_over_tensor_that_requires_grad_is_recorded() -> None:
    def run(lib: Any) -> tuple[Any, Any]:
        w = _t(lib, X, requires_grad=True)
        g = (func.grad_sync if lib is agrad else torch.func.grad)(lambda x: (w * x.sin()).sum())(_t(lib, X))
        (gw,) = (agrad.autograd.grad_sync if lib is agrad else torch.autograd.grad)(g.sum(), w)
        return g, gw

    _same(run(agrad), run(torch))
    inner_over_closure = func.grad_sync(lambda x: func.grad_sync(lambda y: (x * y).sum())(agrad.ones(1)).sum())
    assert inner_over_closure(agrad.tensor([2.0])).item() == 1.0  # the inner argument does not require grad


@pytest.mark.filterwarnings("ignore::agrad.BlockingCallWarning")  # a blocking twin on the loop, on purpose
@pytest.mark.anyio
async def test_awaited_forms_match_the_blocking_ones() -> None:
    f = lambda x, w: ((w @ x) ** 2).sum()  # noqa: E731
    args = (_t(agrad, X), _t(agrad, W))
    _same(await func.grad(f, argnums=(0, 1))(*args), func.grad_sync(f, argnums=(0, 1))(*args))
    _same(await func.grad_and_value(f)(*args), func.grad_and_value_sync(f)(*args))
    out, vjp_fn = func.vjp(lambda x, w: w @ x, *args)
    out_s, vjp_fn_s = func.vjp_sync(lambda x, w: w @ x, *args)
    _same(out, out_s)
    ct = _t(agrad, np.array([1.0, -2.0]))
    _same(await vjp_fn(ct), vjp_fn_s(ct))


@requires_torch
@pytest.mark.parametrize("call", [
    lambda F, lib: F.grad(lambda x: x * x)(lib.ones(3, dtype=lib.float64)),
    lambda F, lib: F.grad(lambda x: 3.0)(lib.ones(3)),
    lambda F, lib: F.grad(lambda x: x.sum(), has_aux=True)(lib.ones(3)),
    lambda F, lib: F.grad(lambda x: x.sum(), argnums=1)(lib.ones(3)),
    lambda F, lib: F.grad(lambda x: x.sum(), argnums=(0, 0))(lib.ones(3)),
    lambda F, lib: F.grad(lambda x: x.sum(), argnums=())(lib.ones(3)),
    lambda F, lib: F.grad(lambda x: x.sum(), argnums=0.5)(lib.ones(3)),
    lambda F, lib: F.grad(lambda x: x.sum(), argnums=[0])(lib.ones(3)),
    lambda F, lib: F.grad(lambda x, y: x.sum(), argnums=1)(lib.ones(3), 3),
    lambda F, lib: F.grad(lambda x: (x.sum(), 3), has_aux=True)(lib.ones(3)),
    lambda F, lib: F.grad(lambda x: x.sum())(lib.ones(3, dtype=lib.int64)),
    lambda F, lib: F.vjp(lambda x: x * 2, lib.ones(3))[1]((lib.ones(3),)),
    lambda F, lib: F.vjp(lambda x: None, lib.ones(3)),
    lambda F, lib: F.vjp(lambda x: 3, lib.ones(3)),
    lambda F, lib: F.vjp(lambda x: (x * 2).long(), lib.ones(3)),
    lambda F, lib: F.vjp(lambda x: x * 2, 3),
    lambda F, lib: F.vjp(lambda x: x * 2, lib.ones(3), has_aux=True),
], ids=["non-scalar", "not-a-tensor", "aux-not-a-pair", "argnum-range", "argnums-repeated", "argnums-empty",
        "argnums-float", "argnums-list", "argument-not-a-tensor", "aux-not-tensors", "int-input",
        "cotangent-structure", "none-output", "int-output", "integer-output", "primal-int",
        "vjp-aux-not-a-pair"])
def test_misuse_raises_torch_func_errors(call: Any) -> None:
    with pytest.raises(Exception) as theirs:
        call(torch.func, torch)
    with pytest.raises(Exception) as ours:
        mine = call(_SyncFunc, agrad)
        if callable(getattr(mine, "__await__", None)):  # pragma: no cover - the sync forms never return one
            raise AssertionError("awaitable")
    assert type(ours.value) is type(theirs.value)
    expected = str(theirs.value).replace("torch.", "agrad.").replace("torch", "agrad")
    assert str(ours.value) == expected


def test_a_cotangent_of_the_wrong_shape_is_refused() -> None:
    _, vjp_fn = func.vjp_sync(lambda x: x * 2, agrad.ones(3))
    with pytest.raises(RuntimeError, match=r"Mismatch in shape: grad_output\[0\] has a shape of"):
        vjp_fn(agrad.ones(2))


class _SyncFunc:
    """``torch.func``'s names for agrad's blocking forms, to call both the same way."""

    grad = staticmethod(func.grad_sync)
    vjp = staticmethod(func.vjp_sync)


# -- vjp ----------------------------------------------------------------------------------------------


@requires_torch
@pytest.mark.parametrize("structured", [False, True])
def test_vjp_matches_torch_func(structured: bool) -> None:
    def f(lib: Any) -> Any:
        if structured:
            return lambda x, w: {"y": w @ x, "pair": ((x * x).sum(), lib.exp(x))}
        return lambda x, w: (w @ x).tanh()

    def cotangent(lib: Any) -> Any:
        y = _t(lib, np.array([0.5, -1.0]))
        return {"y": y, "pair": (_t(lib, np.array(2.0)), _t(lib, X))} if structured else y

    out, vjp_fn = func.vjp_sync(f(agrad), _t(agrad, X), _t(agrad, W))
    tout, tvjp_fn = torch.func.vjp(f(torch), _t(torch, X), _t(torch, W))
    _same(out, tout)
    _same(vjp_fn(cotangent(agrad)), tvjp_fn(cotangent(torch)))
    _same(vjp_fn(cotangent(agrad)), tvjp_fn(cotangent(torch)))  # the graph is retained


@requires_torch
def test_vjp_with_aux_and_create_graph() -> None:
    out, vjp_fn, aux = func.vjp_sync(lambda x: (x.sin(), x.cos()), _t(agrad, X), has_aux=True)
    tout, tvjp_fn, taux = torch.func.vjp(lambda x: (x.sin(), x.cos()), _t(torch, X), has_aux=True)
    _same((out, aux), (tout, taux))
    x = _t(agrad, X, requires_grad=True)
    _, vjp_fn = func.vjp_sync(lambda x: x ** 3, x)
    (g,) = vjp_fn(agrad.ones(3, dtype=agrad.float64))
    assert g.grad_fn is not None  # x requires grad: the product is recorded
    (gg,) = agrad.autograd.grad_sync(g.sum(), x)
    np.testing.assert_allclose(gg.numpy(), 6 * X)
    (g_plain,) = vjp_fn(agrad.ones(3, dtype=agrad.float64), create_graph=False)
    assert g_plain.grad_fn is None


# -- functional_call --------------------------------------------------------------------------------


def _mlp(lib: Any) -> Any:
    lib.manual_seed(0)
    return lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 2)).double()


def _state(lib: Any) -> dict[str, Any]:
    rng = np.random.default_rng(5)
    return {"0.weight": _t(lib, rng.standard_normal((4, 3))), "0.bias": _t(lib, rng.standard_normal(4)),
            "2.weight": _t(lib, rng.standard_normal((2, 4)))}


@requires_torch
@pytest.mark.parametrize("as_list", [False, True])
def test_functional_call_matches_torch_and_leaves_the_module_alone(as_list: bool) -> None:
    ours, theirs = _mlp(agrad), _mlp(torch)
    ours.load_state_dict({k: agrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    before = {k: v.detach().numpy().copy() for k, v in ours.state_dict().items()}
    params_before = list(ours.parameters())
    state, tstate = _state(agrad), _state(torch)
    if as_list:
        state = [{k: v for k, v in state.items() if "weight" in k}, {"0.bias": state["0.bias"]}]
        tstate = [{k: v for k, v in tstate.items() if "weight" in k}, {"0.bias": tstate["0.bias"]}]
    x = RNG.standard_normal((5, 3))
    out = func.functional_call(ours, state, (_t(agrad, x),))
    tout = torch.func.functional_call(theirs, tstate, (_t(torch, x),))
    assert_close(out, tout, "float64", "output")
    assert list(ours.parameters()) == params_before  # the very same Parameter objects
    for k, v in ours.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k])
    assert_close(ours(_t(agrad, x)), theirs(_t(torch, x)), "float64", "plain call afterwards")


@requires_torch
def test_grad_through_functional_call_matches_torch() -> None:
    ours, theirs = _mlp(agrad), _mlp(torch)
    ours.load_state_dict({k: agrad.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    x, y = RNG.standard_normal((5, 3)), RNG.standard_normal((5, 2))

    def loss(lib: Any, module: Any) -> Any:
        return lambda p, x, y: ((lib.func.functional_call(module, p, (x,)) - y) ** 2).mean()

    params = {k: v.detach() for k, v in ours.named_parameters()}
    tparams = {k: v.detach() for k, v in theirs.named_parameters()}
    grads = func.grad_sync(loss(agrad, ours))(params, _t(agrad, x), _t(agrad, y))
    tgrads = torch.func.grad(loss(torch, theirs))(tparams, _t(torch, x), _t(torch, y))
    _same(grads, tgrads)
    assert all(p.grad is None for p in ours.parameters())


class _Tied(agrad.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.foo = agrad.nn.Parameter(agrad.ones(()))
        self.register_buffer("count", agrad.zeros(()))

    def forward(self, x: agrad.Tensor) -> agrad.Tensor:
        return x + self.foo + self.foo_tied


def _tied() -> _Tied:
    m = _Tied()
    m.foo_tied = m.foo
    return m


def test_tie_weights_and_strict() -> None:
    m, zero = _tied(), agrad.zeros(())
    assert m(zero).item() == 2.0
    assert func.functional_call(m, {"foo": agrad.zeros(())}, zero).item() == 0.0
    assert func.functional_call(m, {"foo": agrad.zeros(())}, zero, tie_weights=False).item() == 1.0
    with pytest.raises(ValueError, match=r"multiple values for keys \['foo', 'foo_tied'\], which are tied"):
        func.functional_call(m, {"foo": agrad.zeros(()), "foo_tied": agrad.ones(())}, zero)
    same = agrad.zeros(())
    assert func.functional_call(m, {"foo": same, "foo_tied": same}, zero).item() == 0.0
    with pytest.raises(RuntimeError, match="Error\\(s\\) in reparametrizing for _Tied:\n\tUnexpected key\\(s\\): "
                                           "'bar'.\n\tMissing key\\(s\\): 'count'."):
        func.functional_call(m, {"foo": agrad.zeros(()), "bar": agrad.zeros(())}, zero, strict=True)
    assert func.functional_call(m, {"foo": agrad.zeros(()), "count": agrad.ones(())}, zero, strict=True) == 0.0
    assert m(zero).item() == 2.0


@requires_torch
@pytest.mark.parametrize("dicts", [
    lambda lib: 3,
    lambda lib: [{"foo": lib.zeros(())}, 3],
    lambda lib: [{"foo": lib.zeros(())}, {"foo": lib.ones(())}],
    lambda lib: {"foo": 3},
    lambda lib: {"nope.foo": lib.zeros(())},
    lambda lib: {"": lib.zeros(())},
], ids=["not-a-dict", "not-all-dicts", "repeated", "not-a-tensor", "no-submodule", "empty-name"])
def test_functional_call_misuse_raises_torchs_errors(dicts: Any) -> None:
    class TorchTied(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.foo = torch.nn.Parameter(torch.ones(()))

        def forward(self, x: Any) -> Any:
            return x + self.foo

    with pytest.raises(Exception) as theirs:
        torch.func.functional_call(TorchTied(), dicts(torch), torch.zeros(()))
    with pytest.raises(Exception) as ours:
        func.functional_call(_tied(), dicts(agrad), agrad.zeros(()))
    assert type(ours.value) is type(theirs.value)
    assert str(ours.value).replace("_Tied", "TorchTied") == str(theirs.value).replace("torch", "agrad")


class _Counter(agrad.nn.Module):
    """Reassigns a buffer and updates another in place, and may fail."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("calls", agrad.zeros(()))
        self.register_buffer("total", agrad.zeros(()))

    def forward(self, x: agrad.Tensor, fail: bool = False) -> agrad.Tensor:
        self.calls = self.calls + 1
        self.total.add_(x)
        if fail:
            raise ValueError("boom")
        return self.calls


def test_in_place_updates_and_reassignments_reach_the_given_dict() -> None:
    m = _Counter()
    given = {"calls": agrad.zeros(()), "total": agrad.zeros(())}
    total = given["total"]
    func.functional_call(m, given, (agrad.tensor(3.0),))
    assert given["calls"].item() == 1.0 and given["total"] is total and total.item() == 3.0
    with pytest.raises(ValueError, match="boom"):
        func.functional_call(m, given, (agrad.tensor(1.0),), {"fail": True})
    assert given["calls"].item() == 2.0 and total.item() == 4.0  # written back even on error, as PyTorch
    assert m.calls.item() == 0.0 and m.total.item() == 0.0 and "calls" in m._buffers


# -- concurrent functional calls on one shared module -------------------------------------------------


class _AsyncScale(agrad.nn.Module):
    """An ``async def forward`` that reads its parameter on both sides of an await."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = agrad.nn.Parameter(agrad.ones(()))
        self.seen: list[tuple[float, float]] = []

    async def forward(self, x: agrad.Tensor) -> agrad.Tensor:
        before = self.scale
        await anyio.sleep(0.01)
        assert self.scale is before
        self.seen.append((before.item(), self.scale.item()))
        return x * self.scale


@pytest.mark.anyio
async def test_concurrent_async_functional_calls_see_only_their_own_tensors() -> None:
    m = _AsyncScale()
    results: dict[float, float] = {}
    observed: list[float] = []

    async def call(scale: float) -> None:
        out = await func.functional_call(m, {"scale": agrad.tensor(scale)}, agrad.tensor(10.0))
        results[scale] = out.item()

    async def watch() -> None:  # the shared module, looked at while both calls are suspended
        await anyio.sleep(0.005)
        observed.append(m.scale.item())

    async with anyio.create_task_group() as tg:
        tg.start_soon(call, 2.0)
        tg.start_soon(call, 3.0)
        tg.start_soon(watch)
    assert results == {2.0: 20.0, 3.0: 30.0}
    assert observed == [1.0] and m.scale.item() == 1.0
    assert sorted(m.seen) == [(2.0, 2.0), (3.0, 3.0)]  # plain attributes are shared with the copies


class _Steps(agrad.nn.Module):
    """A synchronous forward of many ops, each reading the parameter, logging which call runs."""

    def __init__(self, log: list[str]) -> None:
        super().__init__()
        self.w = agrad.nn.Parameter(agrad.ones(2))
        self.log = log

    def forward(self, x: agrad.Tensor, tag: str) -> agrad.Tensor:
        for _ in range(20):
            self.log.append(tag)
            x = x * self.w + 1.0
        return x


@pytest.mark.anyio
async def test_concurrent_cooperative_functional_calls_see_only_their_own_tensors() -> None:
    pytest.importorskip("greenlet")  # agrad.cooperative's
    log: list[str] = []
    m = _Steps(log)
    results: dict[str, np.ndarray] = {}

    def call(tag: str, w: float) -> None:
        params = {"w": agrad.full((2,), w)}
        results[tag] = func.functional_call(m, params, (agrad.zeros(2), tag)).numpy()

    with agrad.autograd.graph.engine_options(time_slice=1e-9):  # a pause at every op: the two calls interleave op by op
        async with anyio.create_task_group() as tg:
            tg.start_soon(agrad.cooperative, call, "a", 0.5)
            tg.start_soon(agrad.cooperative, call, "b", 2.0)

    def expected(w: float) -> np.ndarray:
        x = np.zeros(2)
        for _ in range(20):
            x = x * w + 1.0
        return x

    np.testing.assert_allclose(results["a"], expected(0.5))
    np.testing.assert_allclose(results["b"], expected(2.0))
    assert "".join(log).count("ab") + "".join(log).count("ba") > 2  # they did interleave
    np.testing.assert_array_equal(m.w.detach().numpy(), [1.0, 1.0])
