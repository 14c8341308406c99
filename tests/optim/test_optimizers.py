"""agrad.optim against torch.optim: trajectories, state dicts, saving, loading, misuse.

Each optimizer runs 20 steps (with a scheduler) on the same few leaves and
the same loss in both libraries; the parameters must agree to 1e-10
(float64) or 1e-5 (float32) relative, and the state dicts must have the same
structure and values.  Blocks are made small here so that every path of the
blocked update (Note [Blocked updates]) runs on small leaves.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
from tests.helpers import requires_torch, torch
from tests.nn.oracle import RTOL, assert_close

STEPS = 20
FIRST, SECOND = range(STEPS // 2), range(STEPS // 2, STEPS)

# (optimizer, kwargs): several hyper-parameter combinations per optimizer.
CASES: list[tuple[str, dict[str, Any]]] = [
    ("SGD", {"lr": 0.05}),
    ("SGD", {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    ("SGD", {"lr": 0.05, "momentum": 0.8, "dampening": 0.3, "maximize": True}),
    ("Adam", {"lr": 0.05}),
    ("Adam", {"lr": 0.05, "betas": (0.8, 0.9), "amsgrad": True, "weight_decay": 0.1}),
    ("Adam", {"lr": 0.05, "maximize": True, "eps": 1e-6, "decoupled_weight_decay": True, "weight_decay": 0.1}),
    ("AdamW", {"lr": 0.05}),
    ("AdamW", {"lr": 0.05, "amsgrad": True, "weight_decay": 0.5, "maximize": True}),
    ("RMSprop", {"lr": 0.01}),
    ("RMSprop", {"lr": 0.01, "alpha": 0.9, "centered": True, "momentum": 0.5, "weight_decay": 0.1}),
    ("RMSprop", {"lr": 0.01, "momentum": 0.3, "maximize": True}),
    ("Adagrad", {"lr": 0.1}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.05, "initial_accumulator_value": 0.5, "weight_decay": 0.1}),
    ("Adadelta", {}),
    ("Adadelta", {"lr": 0.5, "rho": 0.6, "weight_decay": 0.1, "maximize": True}),
    ("Adamax", {"lr": 0.05}),
    ("Adamax", {"lr": 0.05, "betas": (0.8, 0.9), "weight_decay": 0.1, "maximize": True}),
    ("NAdam", {"lr": 0.05}),
    ("NAdam", {"lr": 0.05, "momentum_decay": 0.1, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    ("NAdam", {"lr": 0.05, "weight_decay": 0.1, "maximize": True}),
    ("RAdam", {"lr": 0.05}),
    ("RAdam", {"lr": 0.05, "betas": (0.9, 0.8), "weight_decay": 0.1, "maximize": True}),
    ("RAdam", {"lr": 0.05, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    ("Rprop", {"lr": 0.05}),
    ("Rprop", {"lr": 0.05, "etas": (0.3, 1.5), "step_sizes": (1e-3, 0.2), "maximize": True}),
    ("ASGD", {"lr": 0.05}),
    ("ASGD", {"lr": 0.05, "lambd": 0.1, "alpha": 0.5, "t0": 5, "weight_decay": 0.1, "maximize": True}),
]
IDS = [f"{name}-{i}" for i, (name, _) in enumerate(CASES)]


SHAPES = [(3, 4), (4,), (), (200,), (12, 10)]


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 64 elements, so that small leaves take every path of the blocked update:
    at most one block, several blocks with a partial last one (200), and a
    column-major leaf larger than a block (120 elements, updated whole)."""
    monkeypatch.setattr(agrad.optim._elementwise, "BLOCK", 64)


def leaves(lib: Any, dtype: str) -> list[Any]:
    """The same leaves in either library: small ones, one of several blocks, one column-major."""
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(shape).astype(dtype) for shape in SHAPES]
    arrays[-1] = np.asfortranarray(arrays[-1])
    return [lib.from_numpy(a.copy(order="K")).requires_grad_() for a in arrays]


def noise(step: int, dtype: str) -> list[np.ndarray]:
    """Step ``step``'s data: a random linear term per leaf, so that gradients keep varying
    (as minibatch gradients do) and running variances stay away from zero."""
    rng = np.random.default_rng(1000 + step)
    return [np.asarray(0.3 * rng.standard_normal(shape), dtype=dtype) for shape in SHAPES]


def loss_of(lib: Any, ps: list[Any], step: int) -> Any:
    """A convex quadratic around the step's data plus a bounded tanh coupling: rounding
    differences shrink along the trajectory instead of growing.  The large leaves'
    gradients (``p + n``) are computed with one rounding in either library, so
    elements whose gradient is near zero, where Adam-like updates turn tiny
    absolute differences into large relative ones, agree too."""
    a, b, c, big, wide = ps
    na, nb, nc, nbig, nwide = (lib.from_numpy(n) for n in noise(step, str(a.dtype).split(".")[1]))
    quadratic = sum(((p + n) ** 2).sum() for p, n in [(a, na), (b, nb), (c, nc), (big, nbig), (wide, nwide)])
    return 0.5 * quadratic + 0.2 * (lib.tanh(a) @ b).sum() * lib.tanh(c)


def backward(lib: Any, loss: Any) -> None:
    if lib is agrad:
        loss.backward_sync()
    else:
        loss.backward()


def train(lib: Any, opt: Any, ps: list[Any], steps: range, sched: Any = None) -> None:
    for step in steps:
        opt.zero_grad()
        backward(lib, loss_of(lib, ps, step))
        opt.step()
        if sched is not None:
            sched.step()


def make(lib: Any, name: str, kwargs: dict[str, Any], ps: list[Any]) -> tuple[Any, Any]:
    opt = getattr(lib.optim, name)(ps, **kwargs)
    return opt, lib.optim.lr_scheduler.StepLR(opt, step_size=7, gamma=0.5)


def to_agrad(obj: Any) -> Any:
    """A torch state dict with its tensors converted (copied) with agrad.from_numpy."""
    if isinstance(obj, torch.Tensor):
        return agrad.from_numpy(obj.detach().numpy().copy())
    if isinstance(obj, dict):
        return {k: to_agrad(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_agrad(v) for v in obj)
    return obj


def assert_same_state(mine: Any, theirs: Any, dtype: str, where: str = "state_dict") -> None:
    """Same structure (keys in order, types) and values: tensors close, the rest equal."""
    if isinstance(theirs, torch.Tensor):
        assert isinstance(mine, agrad.Tensor), where
        assert str(mine.dtype).split(".")[1] == str(theirs.dtype).split(".")[1], where
        assert_close(mine, theirs, dtype, where)
    elif isinstance(theirs, dict):
        assert isinstance(mine, dict) and list(mine) == list(theirs), f"{where}: {list(mine)} != {list(theirs)}"
        for k in theirs:
            assert_same_state(mine[k], theirs[k], dtype, f"{where}[{k!r}]")
    elif isinstance(theirs, (list, tuple)):
        assert type(mine) is type(theirs) and len(mine) == len(theirs), where
        for i, (m, t) in enumerate(zip(mine, theirs)):
            assert_same_state(m, t, dtype, f"{where}[{i}]")
    elif isinstance(theirs, float):
        rtol = RTOL[dtype]
        assert abs(mine - theirs) <= rtol * max(1.0, abs(theirs)), f"{where}: {mine!r} != {theirs!r}"
    else:
        assert mine == theirs, f"{where}: {mine!r} != {theirs!r}"


def assert_same_params(mine: list[Any], theirs: list[Any], dtype: str) -> None:
    for i, (m, t) in enumerate(zip(mine, theirs)):
        assert_close(m, t, dtype, f"parameter {i}")


@requires_torch
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,kwargs", CASES, ids=IDS)
def test_trajectory_and_state_dict_match_torch(name: str, kwargs: dict[str, Any], dtype: str) -> None:
    ours, theirs = leaves(agrad, dtype), leaves(torch, dtype)
    opt, sched = make(agrad, name, kwargs, ours)
    topt, tsched = make(torch, name, kwargs, theirs)
    train(agrad, opt, ours, range(STEPS), sched)
    train(torch, topt, theirs, range(STEPS), tsched)
    assert_same_params(ours, theirs, dtype)
    assert_same_state(opt.state_dict(), topt.state_dict(), dtype)
    assert repr(opt) == repr(topt)


@requires_torch
@pytest.mark.parametrize("name,kwargs", CASES, ids=IDS)
def test_save_load_round_trip_continues_the_trajectory(name: str, kwargs: dict[str, Any]) -> None:
    """Bit for bit, in float32: in float64, loading casts NAdam's and ASGD's float32
    scalar state to float64, as PyTorch's ``load_state_dict`` does."""
    ps = leaves(agrad, "float32")
    opt, _ = make(agrad, name, kwargs, ps)
    train(agrad, opt, ps, FIRST)
    buf = io.BytesIO()
    agrad.save({"params": ps, "optimizer": opt.state_dict()}, buf)
    buf.seek(0)
    saved = agrad.load(buf)
    resumed = [p.detach().clone().requires_grad_() for p in saved["params"]]
    opt2 = getattr(agrad.optim, name)(resumed, **kwargs)
    opt2.load_state_dict(saved["optimizer"])
    train(agrad, opt, ps, SECOND)
    train(agrad, opt2, resumed, SECOND)
    for a, b in zip(ps, resumed):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())


@requires_torch
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("name,kwargs", CASES, ids=IDS)
def test_loading_torch_state_dict_continues_identically(name: str, kwargs: dict[str, Any], dtype: str) -> None:
    """Both libraries load the state dict PyTorch saved halfway, then take the same steps."""
    theirs = leaves(torch, dtype)
    topt, _ = make(torch, name, kwargs, theirs)
    train(torch, topt, theirs, FIRST)
    saved = topt.state_dict()
    ours = [agrad.from_numpy(t.detach().numpy().copy(order="K")).requires_grad_() for t in theirs]
    opt = getattr(agrad.optim, name)(ours, **kwargs)
    opt.load_state_dict(to_agrad(saved))
    topt = getattr(torch.optim, name)(theirs, **kwargs)
    topt.load_state_dict(saved)
    train(agrad, opt, ours, SECOND)
    train(torch, topt, theirs, SECOND)
    assert_same_params(ours, theirs, dtype)
    assert_same_state(opt.state_dict(), topt.state_dict(), dtype)


# -- LBFGS ------------------------------------------------------------------------------------

LBFGS_CASES: list[dict[str, Any]] = [
    {},
    {"line_search_fn": "strong_wolfe"},
    {"lr": 0.5, "max_iter": 5, "history_size": 3},
    {"line_search_fn": "strong_wolfe", "history_size": 2, "max_iter": 7},
]


def lbfgs_run(lib: Any, kwargs: dict[str, Any], dtype: str, steps: int) -> tuple[list[Any], list[float], Any]:
    """``steps`` L-BFGS steps on a smooth, strictly convex function of two leaves."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((12, 12)).astype(dtype)
    matrix = lib.from_numpy(a @ a.T / 12 + np.eye(12, dtype=dtype))
    ps = [lib.from_numpy(rng.standard_normal(shape).astype(dtype)).requires_grad_() for shape in [(6,), (2, 3)]]
    opt = lib.optim.LBFGS(ps, **kwargs)

    def closure() -> Any:
        opt.zero_grad()
        x = lib.cat([ps[0], ps[1].reshape(-1)])
        loss = 0.5 * (x @ (matrix @ x)) + lib.tanh(x).sum() + 0.01 * (x**4).sum()
        backward(lib, loss)
        return loss.detach()

    losses = [float(opt.step(closure)) for _ in range(steps)]
    return ps, losses, opt


@requires_torch
@pytest.mark.parametrize("dtype,steps", [("float64", 4), ("float32", 1)])
@pytest.mark.parametrize("kwargs", LBFGS_CASES, ids=[str(k) for k in LBFGS_CASES])
def test_lbfgs_matches_torch(kwargs: dict[str, Any], dtype: str, steps: int) -> None:
    """float32 takes one step of at most 3 iterations: near the minimum, iterates wander
    in float32 rounding noise, differently in each library."""
    if dtype == "float32":
        kwargs = {**kwargs, "max_iter": min(kwargs.get("max_iter", 20), 3)}
    ours, losses, opt = lbfgs_run(agrad, kwargs, dtype, steps)
    theirs, tlosses, topt = lbfgs_run(torch, kwargs, dtype, steps)
    assert_same_params(ours, theirs, dtype)
    np.testing.assert_allclose(losses, tlosses, rtol=RTOL[dtype])
    assert_same_state(opt.state_dict(), topt.state_dict(), dtype)


@requires_torch
@pytest.mark.parametrize("lib_name", ["agrad", "torch"])
def test_lbfgs_misuse(lib_name: str) -> None:
    lib = agrad if lib_name == "agrad" else torch
    a, b = lib.ones(1, requires_grad=True), lib.ones(1, requires_grad=True)
    with pytest.raises(ValueError, match="LBFGS doesn't support per-parameter options"):
        lib.optim.LBFGS([{"params": [a]}, {"params": [b]}])
    opt = lib.optim.LBFGS([a], line_search_fn="armijo")

    def closure() -> Any:
        opt.zero_grad()
        loss = (a * a).sum()
        backward(lib, loss)
        return loss.detach()

    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        opt.step(closure)


# -- the Optimizer contract -------------------------------------------------------------------


def quadratic_step(opt: Any, w: Any) -> None:
    opt.zero_grad()
    (w * w).sum().backward_sync()
    opt.step()


def test_step_skips_parameters_without_grad_and_keeps_no_state_for_them() -> None:
    a, b = agrad.ones(2, requires_grad=True), agrad.ones(2, requires_grad=True)
    opt = agrad.optim.Adam([a, b], lr=0.1)
    (a * a).sum().backward_sync()
    opt.step()
    assert b.tolist() == [1.0, 1.0] and b not in opt.state
    assert list(opt.state_dict()["state"]) == [0]


def test_sgd_without_momentum_keeps_no_state() -> None:
    w = agrad.ones(2, requires_grad=True)
    opt = agrad.optim.SGD([w], lr=0.1)
    quadratic_step(opt, w)
    assert opt.state_dict()["state"] == {}


def test_adagrad_makes_its_state_at_construction() -> None:
    w = agrad.ones(2, requires_grad=True)
    opt = agrad.optim.Adagrad([w], initial_accumulator_value=0.25)
    assert opt.state[w]["sum"].tolist() == [0.25, 0.25] and float(opt.state[w]["step"]) == 0.0


def test_step_bumps_the_parameter_version_and_records_nothing() -> None:
    w = agrad.ones(2, requires_grad=True)
    opt = agrad.optim.SGD([w], lr=0.1)
    y = (w * w).sum()  # saves w
    (w * 3).sum().backward_sync()
    version = w._version
    opt.step()
    assert w._version == version + 1 and w.grad_fn is None and w.is_leaf
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward_sync()


def test_step_state_is_a_float32_scalar_tensor() -> None:
    w = agrad.ones(2, dtype=agrad.float64, requires_grad=True)
    opt = agrad.optim.Adam([w])
    quadratic_step(opt, w)
    quadratic_step(opt, w)
    step = opt.state[w]["step"]
    assert step.dtype == agrad.float32 and step.shape == () and float(step) == 2.0
    assert opt.state[w]["exp_avg"].dtype == agrad.float64


def test_closure_runs_with_grad_enabled_and_its_loss_is_returned() -> None:
    w = agrad.tensor([2.0], requires_grad=True)
    opt = agrad.optim.SGD([w], lr=0.25)

    def closure() -> agrad.Tensor:
        assert agrad.is_grad_enabled()
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward_sync()
        return loss

    with agrad.no_grad():
        loss = opt.step(closure)
    assert float(loss) == 4.0 and w.tolist() == [1.0]
    assert opt.step() is None


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad(set_to_none: bool) -> None:
    w = agrad.ones(2, requires_grad=True)
    opt = agrad.optim.SGD([w], lr=0.1)
    (w * w).sum().backward_sync()
    opt.zero_grad(set_to_none=set_to_none)
    assert (w.grad is None) if set_to_none else w.grad.tolist() == [0.0, 0.0]


def test_param_groups_take_defaults_and_their_own_options() -> None:
    a, b = agrad.ones(1, requires_grad=True), agrad.ones(1, requires_grad=True)
    opt = agrad.optim.SGD([{"params": [a]}, {"params": b, "lr": 0.5}], lr=0.1, momentum=0.9)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert opt.param_groups[1]["params"] == [b] and opt.param_groups[1]["momentum"] == 0.9
    c = agrad.ones(1, requires_grad=True)
    opt.add_param_group({"params": [c], "lr": 0.2})
    assert opt.state_dict()["param_groups"][2]["params"] == [2]


def test_named_parameters_are_recorded_as_param_names() -> None:
    a, b = agrad.ones(1, requires_grad=True), agrad.ones(1, requires_grad=True)
    opt = agrad.optim.Adam([("a", a), ("b", b)])
    assert opt.param_groups[0]["params"] == [a, b]
    assert opt.state_dict()["param_groups"][0]["param_names"] == ["a", "b"]


def test_tensor_lr_is_accepted() -> None:
    w = agrad.tensor([1.0], requires_grad=True)
    opt = agrad.optim.SGD([w], lr=agrad.tensor(0.5))
    quadratic_step(opt, w)
    assert w.tolist() == [0.0]


def test_adamw_groups_are_always_decoupled() -> None:
    w = agrad.ones(1, requires_grad=True)
    opt = agrad.optim.AdamW([w])
    state = opt.state_dict()
    state["param_groups"][0]["decoupled_weight_decay"] = False
    opt.load_state_dict(state)
    assert opt.param_groups[0]["decoupled_weight_decay"] is True


def test_loading_fills_options_an_older_state_dict_lacks() -> None:
    w = agrad.ones(1, requires_grad=True)
    opt = agrad.optim.Adam([w], amsgrad=True)
    quadratic_step(opt, w)
    state = opt.state_dict()
    del state["param_groups"][0]["maximize"]
    state["state"][0]["step"] = 1  # PyTorch 1.x stored a number
    opt.load_state_dict(state)
    assert opt.param_groups[0]["maximize"] is False
    assert opt.state[w]["step"].dtype == agrad.float32
    quadratic_step(opt, w)
    assert float(opt.state[w]["step"]) == 2.0


def test_step_hooks_and_state_dict_hooks() -> None:
    w = agrad.ones(1, requires_grad=True)
    opt = agrad.optim.SGD([w], lr=0.1)
    calls: list[str] = []
    pre = opt.register_step_pre_hook(lambda o, args, kwargs: calls.append("pre"))
    opt.register_step_post_hook(lambda o, args, kwargs: calls.append("post"))
    glob = agrad.optim.optimizer.register_optimizer_step_pre_hook(lambda o, args, kwargs: calls.append("global"))
    opt.register_state_dict_post_hook(lambda o, sd: {**sd, "extra": 1})
    opt.register_load_state_dict_pre_hook(lambda o, sd: {k: v for k, v in sd.items() if k != "extra"})
    try:
        opt.step()
    finally:
        glob.remove()
    pre.remove()
    opt.step()
    assert calls == ["global", "pre", "post", "post"]
    state = opt.state_dict()
    assert state["extra"] == 1
    opt.load_state_dict(state)


def test_hooks_run_once_when_a_subclass_step_calls_super() -> None:
    class Mine(agrad.optim.SGD):
        def step(self, closure: Callable[[], Any] | None = None) -> Any:
            return super().step(closure)

    w = agrad.ones(1, requires_grad=True)
    opt = Mine([w], lr=0.1)
    calls: list[int] = []
    opt.register_step_pre_hook(lambda o, args, kwargs: calls.append(1))
    opt.step()
    assert calls == [1]


# -- misuse ---------------------------------------------------------------------------------


@requires_torch
@pytest.mark.parametrize("lib_name", ["agrad", "torch"])
def test_misuse_errors_match_torch(lib_name: str) -> None:
    lib = agrad if lib_name == "agrad" else torch
    w = lib.ones(2, requires_grad=True)
    with pytest.raises(TypeError, match=f"should be an iterable of Tensors or dicts, but got {lib_name}.FloatTensor"):
        lib.optim.SGD(w, lr=0.1)
    with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
        lib.optim.Adam([])
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        lib.optim.SGD([w * 2], lr=0.1)
    with pytest.raises(TypeError, match="optimizer can only optimize Tensors, but one of the params is int"):
        lib.optim.SGD([w, 3], lr=0.1)
    with pytest.raises(TypeError, match="ordered collections"):
        lib.optim.SGD([{"params": {w}}], lr=0.1)
    with pytest.raises(ValueError, match="some parameters appear in more than one parameter group"):
        lib.optim.SGD([{"params": [w]}, {"params": [w]}], lr=0.1)
    with pytest.warns(UserWarning, match="duplicate parameters"):
        lib.optim.SGD([w, w], lr=0.1)
    with pytest.raises(ValueError, match="Nesterov momentum requires a momentum and zero dampening"):
        lib.optim.SGD([w], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="all optimizer params should be with/without names"):
        lib.optim.SGD([("a", w), lib.ones(1, requires_grad=True)], lr=0.1)
    opt = lib.optim.SGD([w], lr=0.1)
    with pytest.raises(ValueError, match="loaded state dict has a different number of parameter groups"):
        opt.load_state_dict({"state": {}, "param_groups": []})
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        opt.load_state_dict({"state": {}, "param_groups": [{"params": [0, 1]}]})
    with pytest.raises(TypeError, match="param_group must be a dict"):
        opt.add_param_group([w])


INVALID: list[tuple[str, dict[str, Any], str]] = [
    ("SGD", {"lr": -0.1}, "Invalid learning rate: -0.1"),
    ("SGD", {"lr": 0.1, "momentum": -1.0}, "Invalid momentum value: -1.0"),
    ("SGD", {"lr": 0.1, "weight_decay": -1.0}, "Invalid weight_decay value: -1.0"),
    ("Adam", {"lr": -1.0}, "Invalid learning rate: -1.0"),
    ("Adam", {"eps": -1.0}, "Invalid epsilon value: -1.0"),
    ("Adam", {"betas": (1.0, 0.999)}, "Invalid beta parameter at index 0: 1.0"),
    ("Adam", {"betas": (0.9, -0.1)}, "Invalid beta parameter at index 1: -0.1"),
    ("Adam", {"weight_decay": -0.5}, "Invalid weight_decay value: -0.5"),
    ("Adam", {"betas": (0.9, 0)}, "betas must be either both floats or both Tensors"),
    ("AdamW", {"betas": (-0.5, 0.9)}, "Invalid beta parameter at index 0: -0.5"),
    ("RMSprop", {"alpha": -0.5}, "Invalid alpha value: -0.5"),
    ("RMSprop", {"momentum": -0.5}, "Invalid momentum value: -0.5"),
    ("Adagrad", {"lr_decay": -0.5}, "Invalid lr_decay value: -0.5"),
    ("Adagrad", {"initial_accumulator_value": -0.5}, "Invalid initial_accumulator_value value: -0.5"),
    ("Adadelta", {"rho": 1.5}, "Invalid rho value: 1.5"),
    ("Adadelta", {"eps": -1.0}, "Invalid epsilon value: -1.0"),
    ("Adamax", {"betas": (0.9, 1.0)}, "Invalid beta parameter at index 1: 1.0"),
    ("NAdam", {"momentum_decay": -1.0}, "Invalid momentum_decay value: -1.0"),
    ("RAdam", {"lr": -1.0}, "Invalid learning rate: -1.0"),
    ("Rprop", {"etas": (1.5, 1.2)}, "Invalid eta values: 1.5, 1.2"),
    ("ASGD", {"weight_decay": -1.0}, "Invalid weight_decay value: -1.0"),
]


@requires_torch
@pytest.mark.parametrize("lib_name", ["agrad", "torch"])
@pytest.mark.parametrize("name,kwargs,message", INVALID, ids=[m for _, _, m in INVALID])
def test_invalid_hyper_parameters(lib_name: str, name: str, kwargs: dict[str, Any], message: str) -> None:
    lib = agrad if lib_name == "agrad" else torch
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        getattr(lib.optim, name)([lib.ones(1, requires_grad=True)], **kwargs)


def test_differentiable_is_refused() -> None:
    with pytest.raises(NotImplementedError, match="differentiable=True"):
        agrad.optim.Adam([agrad.ones(1, requires_grad=True)], differentiable=True)


@requires_torch
def test_fused_with_foreach_is_refused_as_torch_does() -> None:
    for lib in (agrad, torch):
        with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True` together."):
            lib.optim.Adam([lib.ones(1, requires_grad=True)], fused=True, foreach=True)
