"""agrad.optim.lr_scheduler against torch.optim.lr_scheduler: the same lr (and momentum)
sequences as exact floats, the same state dicts, resuming, warnings and errors."""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable
from typing import Any

import pytest

import agrad
from tests.helpers import requires_torch, torch

STEPS = 30


def sched_of(lib: Any) -> Any:
    return lib.optim.lr_scheduler


def optimizer(lib: Any, name: str = "SGD") -> Any:
    """Two groups with different lrs (schedules are per group), momentum to cycle."""
    ps = [lib.zeros(1, requires_grad=True) for _ in range(2)]
    groups = [{"params": [p], "lr": 0.1 * (i + 1)} for i, p in enumerate(ps)]
    return getattr(lib.optim, name)(groups, **({"momentum": 0.9} if name == "SGD" else {}))


# name -> a function building the scheduler on an optimizer, in either library.
SCHEDULERS: dict[str, Callable[[Any, Any], Any]] = {
    "StepLR": lambda L, o: L.StepLR(o, 3, 0.5),
    "MultiStepLR": lambda L, o: L.MultiStepLR(o, [2, 5, 5, 9], 0.3),
    "ExponentialLR": lambda L, o: L.ExponentialLR(o, 0.9),
    "CosineAnnealingLR": lambda L, o: L.CosineAnnealingLR(o, 7, 0.01),
    "OneCycleLR": lambda L, o: L.OneCycleLR(o, [1.0, 2.0], total_steps=STEPS),
    "OneCycleLR-three-phase": lambda L, o: L.OneCycleLR(o, 1.0, total_steps=STEPS + 1, three_phase=True,
                                                        anneal_strategy="linear"),
    "LambdaLR": lambda L, o: L.LambdaLR(o, lambda epoch: 1 / (epoch + 1)),
    "LinearLR": lambda L, o: L.LinearLR(o, 0.2, 0.9, 10),
    "ConstantLR": lambda L, o: L.ConstantLR(o, 0.5, 4),
    "MultiplicativeLR": lambda L, o: L.MultiplicativeLR(o, lambda epoch: 0.95),
    "PolynomialLR": lambda L, o: L.PolynomialLR(o, 10, 2.0),
    "CosineAnnealingWarmRestarts": lambda L, o: L.CosineAnnealingWarmRestarts(o, 3, 2, 0.001),
    "CyclicLR": lambda L, o: L.CyclicLR(o, 0.01, 0.1, 4, mode="triangular2"),
    "CyclicLR-exp-range": lambda L, o: L.CyclicLR(o, 0.01, 0.1, 3, 5, mode="exp_range", gamma=0.9),
    "SequentialLR": lambda L, o: L.SequentialLR(o, [L.LinearLR(o, 0.1, total_iters=5), L.CosineAnnealingLR(o, 10),
                                                    L.StepLR(o, 2)], milestones=[5, 15]),
    "ChainedScheduler": lambda L, o: L.ChainedScheduler([L.ConstantLR(o, 0.5, 4), L.ExponentialLR(o, 0.9)]),
}


def momenta(opt: Any) -> list[Any]:
    return [g["betas"][0] if "betas" in g else g.get("momentum") for g in opt.param_groups]


def run(lib: Any, build: Callable[[Any, Any], Any], opt_name: str = "SGD", steps: int = STEPS,
        metric: Callable[[int], float] | None = None) -> tuple[list[Any], Any, Any]:
    """Step optimizer then scheduler ``steps`` times; the lrs and momenta after each."""
    opt = optimizer(lib, opt_name)
    sched = build(sched_of(lib), opt)
    seen = [[g["lr"] for g in opt.param_groups] + momenta(opt)]
    for i in range(steps):
        opt.step()
        if metric is None:
            sched.step()
        else:
            sched.step(metric(i))
        seen.append([g["lr"] for g in opt.param_groups] + momenta(opt))
    return seen, sched, opt


@requires_torch
@pytest.mark.parametrize("opt_name", ["SGD", "Adam"])
@pytest.mark.parametrize("name", list(SCHEDULERS))
def test_sequences_and_state_dicts_match_torch(name: str, opt_name: str) -> None:
    ours, sched, opt = run(agrad, SCHEDULERS[name], opt_name)
    theirs, tsched, topt = run(torch, SCHEDULERS[name], opt_name)
    assert ours == theirs
    assert sched.get_last_lr() == tsched.get_last_lr()
    state, tstate = sched.state_dict(), tsched.state_dict()
    assert sorted(state) == sorted(tstate)
    assert opt.param_groups[0].keys() - {"params"} == topt.param_groups[0].keys() - {"params"}


@requires_torch
def test_reduce_lr_on_plateau_matches_torch() -> None:
    def build(L: Any, o: Any) -> Any:
        return L.ReduceLROnPlateau(o, patience=2, cooldown=1, factor=0.5, min_lr=[0.0, 0.05])

    def metric(i: int) -> float:
        return 1.0 / (i + 1) if i < 5 else 2.0

    ours, sched, _ = run(agrad, build, metric=metric)
    theirs, tsched, _ = run(torch, build, metric=metric)
    assert ours == theirs
    assert sched.state_dict() == tsched.state_dict()


@requires_torch
@pytest.mark.parametrize("name", ["StepLR", "MultiStepLR", "CosineAnnealingLR", "OneCycleLR", "CyclicLR",
                                  "SequentialLR", "CosineAnnealingWarmRestarts"])
def test_state_dict_resumes_the_schedule(name: str) -> None:
    full, _, _ = run(agrad, SCHEDULERS[name], steps=20)
    _, sched, opt = run(agrad, SCHEDULERS[name], steps=10)
    buf = io.BytesIO()
    agrad.save({"optimizer": opt.state_dict(), "scheduler": sched.state_dict()}, buf)
    buf.seek(0)
    saved = agrad.load(buf)
    opt2 = optimizer(agrad)
    sched2 = SCHEDULERS[name](sched_of(agrad), opt2)
    opt2.load_state_dict(saved["optimizer"])
    sched2.load_state_dict(saved["scheduler"])
    for i in range(10):
        opt2.step()
        sched2.step()
        assert [g["lr"] for g in opt2.param_groups] == full[11 + i][:2]


def test_resuming_needs_initial_lr() -> None:
    opt = optimizer(agrad)
    with pytest.raises(KeyError, match="param 'initial_lr' is not specified in param_groups\\[0\\]"):
        agrad.optim.lr_scheduler.StepLR(opt, 3, last_epoch=4)


@requires_torch
@pytest.mark.parametrize("lib_name", ["agrad", "torch"])
def test_warnings_as_torch(lib_name: str) -> None:
    lib = agrad if lib_name == "agrad" else torch
    opt = optimizer(lib)
    sched = sched_of(lib).StepLR(opt, 3)
    with pytest.warns(UserWarning, match="Detected call of `lr_scheduler.step\\(\\)` before `optimizer.step\\(\\)`"):
        sched.step()
    with pytest.warns(UserWarning, match="please use `get_last_lr\\(\\)`"):
        sched.get_lr()
    with pytest.warns(UserWarning, match="The epoch parameter in `scheduler.step\\(\\)` was not necessary"):
        sched.step(5)
    assert sched.get_last_lr() == [0.1 * 0.1, 0.2 * 0.1]  # the closed form at epoch 5
    opt2 = optimizer(lib)
    sched2 = sched_of(lib).StepLR(opt2, 3)
    opt2.step = lambda closure=None: None  # replaced after the scheduler wrapped it
    with pytest.warns(UserWarning, match="Seems like `optimizer.step\\(\\)` has been overridden"):
        sched2.step()


def test_optimizer_step_then_scheduler_step_does_not_warn() -> None:
    opt = optimizer(agrad)
    sched = agrad.optim.lr_scheduler.ExponentialLR(opt, 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt.step()
        sched.step()
    assert sched.get_last_lr() == [0.05, 0.1]


def test_tensor_lr_is_filled_in_place() -> None:
    p = agrad.zeros(1, requires_grad=True)
    lr = agrad.tensor(0.5, dtype=agrad.float64)
    opt = agrad.optim.SGD([p], lr=lr)
    sched = agrad.optim.lr_scheduler.StepLR(opt, 1, 0.5)
    opt.step()
    sched.step()
    assert opt.param_groups[0]["lr"] is lr and float(lr) == 0.25
    assert float(sched.get_last_lr()[0]) == 0.25 and sched.get_last_lr()[0] is not lr


ERRORS: list[tuple[Callable[[Any, Any], Any], type[Exception], str]] = [
    (lambda L, o: L.StepLR(object(), 3), TypeError, "object is not an Optimizer"),
    (lambda L, o: L.ConstantLR(o, factor=1.5), ValueError, "Constant multiplicative factor expected to be between"),
    (lambda L, o: L.LinearLR(o, start_factor=0), ValueError, "Starting multiplicative factor expected"),
    (lambda L, o: L.LinearLR(o, end_factor=2), ValueError, "Ending multiplicative factor expected"),
    (lambda L, o: L.LambdaLR(o, [lambda e: 1.0]), ValueError, "Expected 2 lr_lambdas, but got 1"),
    (lambda L, o: L.MultiplicativeLR(o, 0.5), TypeError, "lr_lambda should be a function, but got float"),
    (lambda L, o: L.OneCycleLR(o, 1.0), ValueError, "You must define either total_steps OR"),
    (lambda L, o: L.OneCycleLR(o, 1.0, total_steps=0), ValueError, "Expected positive integer total_steps"),
    (lambda L, o: L.OneCycleLR(o, 1.0, total_steps=5, pct_start=1.5), ValueError, "Expected float between 0 and 1"),
    (lambda L, o: L.OneCycleLR(o, 1.0, 5, anneal_strategy="x"), ValueError, "anneal_strategy must be one of"),
    (lambda L, o: L.OneCycleLR(o, [1.0], 5), ValueError, "max_lr must have the same length as optimizer.param_groups"),
    (lambda L, o: L.CosineAnnealingWarmRestarts(o, 0), ValueError, "Expected positive integer T_0, but got 0"),
    (lambda L, o: L.CosineAnnealingWarmRestarts(o, 2, T_mult=0), ValueError, "Expected integer T_mult >= 1"),
    (lambda L, o: L.CyclicLR(o, 0.1, 1.0, mode="x"), ValueError, "mode is invalid and scale_fn is None"),
    (lambda L, o: L.ReduceLROnPlateau(o, factor=1.0), ValueError, "Factor should be < 1.0."),
    (lambda L, o: L.ReduceLROnPlateau(o, mode="x"), ValueError, "mode x is unknown!"),
    (lambda L, o: L.ReduceLROnPlateau(o, threshold_mode="x"), ValueError, "threshold mode x is unknown!"),
    (lambda L, o: L.ReduceLROnPlateau(o, min_lr=[0.1]), ValueError, "expected 2 min_lrs, got 1"),
    (lambda L, o: L.SequentialLR(o, [L.StepLR(o, 2)], milestones=[3]), ValueError,
     "Sequential Schedulers expects number of schedulers provided to be one more"),
    (lambda L, o: L.SequentialLR(o, [], milestones=[]), ValueError, "SequentialLR expects at least one scheduler"),
    (lambda L, o: L.SequentialLR(o, [L.ReduceLROnPlateau(o)], milestones=[]), ValueError,
     "SequentialLR does not support `ReduceLROnPlateau`"),
    (lambda L, o: L.ChainedScheduler([]), ValueError, "ChainedScheduler expects at least one scheduler to be chained"),
]


@requires_torch
@pytest.mark.parametrize("lib_name", ["agrad", "torch"])
@pytest.mark.parametrize("build,error,message", ERRORS, ids=[m[:40] for _, _, m in ERRORS])
def test_errors_as_torch(lib_name: str, build: Callable[[Any, Any], Any], error: type[Exception],
                         message: str) -> None:
    lib = agrad if lib_name == "agrad" else torch
    with pytest.raises(error, match=message.replace("(", "\\(").replace(")", "\\)").replace("*", "\\*")):
        build(sched_of(lib), optimizer(lib))


@requires_torch
@pytest.mark.parametrize("lib_name", ["agrad", "torch"])
def test_cycling_momentum_needs_an_optimizer_with_momentum(lib_name: str) -> None:
    lib = agrad if lib_name == "agrad" else torch
    with pytest.raises(ValueError, match="optimizer must support momentum or beta1"):
        sched_of(lib).OneCycleLR(optimizer(lib, "Adagrad"), 1.0, total_steps=5)


@requires_torch
@pytest.mark.parametrize("lib_name", ["agrad", "torch"])
def test_one_cycle_refuses_to_step_past_its_end(lib_name: str) -> None:
    lib = agrad if lib_name == "agrad" else torch
    opt = optimizer(lib)
    sched = sched_of(lib).OneCycleLR(opt, 1.0, total_steps=2)
    opt.step()
    sched.step()
    sched.step()
    with pytest.raises(ValueError, match="Tried to step 3 times. The specified number of total steps is 2"):
        sched.step()
