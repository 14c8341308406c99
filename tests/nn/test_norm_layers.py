"""Normalisation layers (batch, instance, layer, group, RMS, local response norm) against torch.nn.

Each configuration runs forward and backward through ``check_module`` (values,
input and parameter gradients, and the buffers after the forward) in float64
and float32, in training and in evaluation mode; batch and instance norm also
run several training steps before evaluating, so the running statistics and
``num_batches_tracked`` must follow torch's step by step.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import agrad
from tests.helpers import requires_torch, torch
from tests.nn.oracle import assert_close, check_module, load_from_torch

DTYPES = ["float64", "float32"]

# (class name, constructor args, constructor kwargs, input shape)
CASES: list[tuple[str, tuple[Any, ...], dict[str, Any], tuple[int, ...]]] = [
    ("BatchNorm1d", (3,), {}, (4, 3)),
    ("BatchNorm1d", (3,), {"momentum": None, "affine": False}, (4, 3, 5)),
    ("BatchNorm1d", (3,), {"bias": False, "eps": 1e-3}, (2, 3, 2)),
    ("BatchNorm2d", (2,), {"momentum": 0.3}, (3, 2, 3, 2)),
    ("BatchNorm2d", (2,), {"track_running_stats": False}, (3, 2, 2, 2)),
    ("BatchNorm3d", (2,), {}, (2, 2, 2, 2, 3)),
    ("InstanceNorm1d", (3,), {}, (2, 3, 5)),
    ("InstanceNorm1d", (3,), {"affine": True, "track_running_stats": True}, (3, 5)),
    ("InstanceNorm2d", (2,), {"affine": True, "momentum": None, "track_running_stats": True}, (3, 2, 3, 2)),
    ("InstanceNorm2d", (2,), {"affine": True, "bias": False}, (2, 3, 3)),
    ("InstanceNorm3d", (2,), {"track_running_stats": True}, (2, 2, 2, 3, 2)),
    ("LayerNorm", (4,), {}, (3, 4)),
    ("LayerNorm", ([2, 3],), {"eps": 1e-3, "bias": False}, (2, 4, 2, 3)),
    ("LayerNorm", ((3,),), {"elementwise_affine": False}, (5, 3)),
    ("GroupNorm", (2, 4), {}, (3, 4, 5)),
    ("GroupNorm", (3, 6), {"affine": False}, (2, 6, 2, 2)),
    ("GroupNorm", (1, 2), {"bias": False, "eps": 1e-2}, (2, 2)),
    ("RMSNorm", (4,), {}, (3, 4)),
    ("RMSNorm", ([2, 3],), {"eps": 1e-3}, (4, 2, 3)),
    ("RMSNorm", (3,), {"elementwise_affine": False}, (2, 5, 3)),
    ("LocalResponseNorm", (2,), {}, (2, 4, 3)),
    ("LocalResponseNorm", (3,), {"alpha": 0.3, "beta": 0.6, "k": 1.5}, (2, 5, 2, 3)),
    ("LocalResponseNorm", (4,), {"alpha": 0.1}, (1, 3, 2, 2, 2)),
]
IDS = [f"{name}-{args}-{kwargs}-{shape}" for name, args, kwargs, shape in CASES]


def _pair(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """The same layer built by agrad and by torch, torch's with non-trivial affine parameters
    and running statistics (which check_module then loads into agrad's)."""
    theirs = getattr(torch.nn, name)(*args, **kwargs)
    with torch.no_grad():
        for t in theirs.parameters():
            t.uniform_(0.5, 1.5)
        for key in ("running_mean", "running_var"):
            buf = getattr(theirs, key, None)
            if buf is not None:
                buf.uniform_(0.5, 1.5)
    return getattr(agrad.nn, name)(*args, **kwargs), theirs


def _input(shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(sum(shape)).standard_normal(shape)


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize(("name", "args", "kwargs", "shape"), CASES, ids=IDS)
def test_matches_torch(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], shape: tuple[int, ...],
                       training: bool, dtype: str) -> None:
    ours, theirs = _pair(name, args, kwargs)
    theirs.train(training)
    check_module(ours, theirs, [_input(shape)], dtype)


@requires_torch
@pytest.mark.parametrize(("name", "args", "kwargs", "shape"), CASES, ids=IDS)
def test_repr_and_state_dict(name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                             shape: tuple[int, ...]) -> None:
    ours, theirs = getattr(agrad.nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    assert repr(ours) == repr(theirs).replace("torch", "agrad")
    mine, state = ours.state_dict(), theirs.state_dict()
    assert list(mine) == list(state)
    for key, value in state.items():  # freshly built: the initial values too (ones, zeros, counter 0)
        assert str(mine[key].dtype).replace("agrad", "torch") == str(value.dtype)
        np.testing.assert_array_equal(mine[key].numpy(), value.numpy())


STATEFUL = [case for case in CASES if case[0].startswith(("BatchNorm", "InstanceNorm"))]


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("name", "args", "kwargs", "shape"), STATEFUL,
                         ids=[i for i, c in zip(IDS, CASES) if c in STATEFUL])
def test_running_stats_over_steps(name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
                                  shape: tuple[int, ...], dtype: str) -> None:
    """Three training forwards on different batches, then evaluation: the running statistics and
    the counter after each step, and the evaluation outputs and gradients, are torch's."""
    ours, theirs = getattr(agrad.nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    theirs.to(getattr(torch, dtype))
    ours.to(getattr(agrad, dtype))
    load_from_torch(ours, theirs)
    rng = np.random.default_rng(1)
    for step in range(3):
        x = (rng.standard_normal(shape) * (step + 1) + step).astype(dtype)
        assert_close(ours(agrad.from_numpy(x)), theirs(torch.from_numpy(x)), dtype, f"step {step} output")
        for key, value in theirs.state_dict().items():
            assert_close(ours.state_dict()[key], value, dtype, f"step {step} {key}")
    theirs.eval()
    ours.eval()
    x = rng.standard_normal(shape).astype(dtype)
    assert_close(ours(agrad.from_numpy(x)), theirs(torch.from_numpy(x)), dtype, "eval output")
    check_module(ours, theirs, [x], dtype)


def test_batch_norm_counter_and_cumulative_average() -> None:
    """``momentum=None``: the running mean is the plain average of the batch means seen."""
    bn = agrad.nn.BatchNorm1d(1, momentum=None, affine=False)
    for value in (1.0, 2.0, 6.0):
        bn(agrad.tensor([[value - 1.0], [value + 1.0]]))
    assert bn.num_batches_tracked.dtype is agrad.int64
    assert bn.num_batches_tracked.item() == 3
    assert bn.running_mean.tolist() == pytest.approx([3.0])
    bn.reset_running_stats()
    assert (bn.running_mean.item(), bn.running_var.item(), bn.num_batches_tracked.item()) == (0.0, 1.0, 0)


def test_batch_norm_eval_without_running_stats_uses_the_batch() -> None:
    bn = agrad.nn.BatchNorm1d(2, track_running_stats=False, affine=False).eval()
    out = bn(agrad.tensor([[1.0, 10.0], [3.0, 30.0]]))
    np.testing.assert_allclose(out.numpy(), [[-1.0, -1.0], [1.0, 1.0]], atol=1e-4)
    assert bn.running_mean is None and bn.num_batches_tracked is None


@requires_torch
def test_batch_norm_loads_a_checkpoint_without_the_counter() -> None:
    """As torch: a missing ``num_batches_tracked`` keeps the layer's own counter, and is no missing key."""
    theirs, ours = torch.nn.BatchNorm2d(3), agrad.nn.BatchNorm2d(3)
    ours.num_batches_tracked.fill_(5)
    theirs.num_batches_tracked.fill_(5)
    state = {k: v for k, v in theirs.state_dict().items() if k != "num_batches_tracked"}
    result = ours.load_state_dict({k: agrad.from_numpy(v.numpy().copy()) for k, v in state.items()})
    assert repr(result) == repr(theirs.load_state_dict(state)) == "<All keys matched successfully>"
    assert ours.num_batches_tracked.item() == theirs.num_batches_tracked.item() == 5
    nested = agrad.nn.Module()
    nested.bn = agrad.nn.BatchNorm1d(2)
    assert not nested.load_state_dict({"bn.weight": agrad.ones(2), "bn.bias": agrad.zeros(2),
                                       "bn.running_mean": agrad.zeros(2), "bn.running_var": agrad.ones(2)}).missing_keys


@requires_torch
def test_instance_norm_rejects_running_stats_it_does_not_track() -> None:
    state = {"running_mean": np.zeros(3, np.float32)}
    with pytest.raises(RuntimeError) as expected:
        torch.nn.InstanceNorm1d(3).load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    with pytest.raises(RuntimeError) as got:
        agrad.nn.InstanceNorm1d(3).load_state_dict({k: agrad.from_numpy(v) for k, v in state.items()})
    assert str(got.value) == str(expected.value)


def test_instance_norm_warns_on_unused_num_features() -> None:
    with pytest.warns(UserWarning, match=r"input's size at dim=1 does not match num_features"):
        agrad.nn.InstanceNorm1d(3)(agrad.ones(2, 4, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        agrad.nn.InstanceNorm1d(4)(agrad.ones(2, 4, 5))


def test_device_and_dtype_factory_kwargs() -> None:
    for layer in (agrad.nn.BatchNorm1d(2, dtype=agrad.float64), agrad.nn.LayerNorm(2, dtype=agrad.float64),
                  agrad.nn.GroupNorm(1, 2, dtype=agrad.float64), agrad.nn.RMSNorm(2, device="cpu",
                                                                                  dtype=agrad.float64)):
        assert {t.dtype for t in layer.parameters()} == {agrad.float64}
    assert agrad.nn.BatchNorm1d(2, dtype=agrad.float64).num_batches_tracked.dtype is agrad.int64


MISUSE = [
    (lambda nn: nn.GroupNorm(3, 4), None),
    (lambda nn: nn.BatchNorm1d(3), (4, 3, 2, 2)),
    (lambda nn: nn.BatchNorm1d(3), (1, 3)),
    (lambda nn: nn.BatchNorm2d(3), (2, 3)),
    (lambda nn: nn.BatchNorm3d(3), (2, 3, 2, 2)),
    (lambda nn: nn.InstanceNorm1d(3, affine=True), (2, 4, 5)),
    (lambda nn: nn.InstanceNorm1d(3), (3,)),
    (lambda nn: nn.InstanceNorm2d(3), (3, 3)),
    (lambda nn: nn.InstanceNorm3d(3), (2, 3, 2, 2, 2, 2)),
    (lambda nn: nn.InstanceNorm1d(3), (2, 3, 1)),
    (lambda nn: nn.LayerNorm(3), (2, 4)),
    (lambda nn: nn.GroupNorm(2, 4), (2, 6, 3)),
    (lambda nn: nn.RMSNorm([2, 3]), (3, 2)),
]


@requires_torch
@pytest.mark.parametrize(("build", "shape"), MISUSE, ids=[str(i) for i in range(len(MISUSE))])
def test_misuse_errors_match_torch(build: Any, shape: tuple[int, ...] | None) -> None:
    def run(nn: Any, lib: Any) -> None:
        layer = build(nn)
        if shape is not None:
            layer(lib.zeros(*shape))

    with pytest.raises(Exception) as expected:
        run(torch.nn, torch)
    with pytest.raises(Exception) as got:
        run(agrad.nn, agrad)
    assert type(got.value) is type(expected.value)
    assert str(got.value).replace("torch", "agrad") == str(expected.value).replace("torch", "agrad")
