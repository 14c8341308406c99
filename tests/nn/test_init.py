"""``agrad.nn.init`` against ``torch.nn.init``: gains, fans, the distributions'
bounds and moments (agrad's generator is its own, so values are compared as
distributions), and errors."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
from agrad.nn import init
from tests.helpers import requires_torch, torch


@requires_torch
@pytest.mark.parametrize("args", [("linear",), ("conv2d",), ("sigmoid",), ("tanh",), ("relu",), ("leaky_relu",),
                                  ("leaky_relu", 0.2), ("leaky_relu", 3), ("selu",)])
def test_calculate_gain(args: tuple[Any, ...]) -> None:
    assert init.calculate_gain(*args) == torch.nn.init.calculate_gain(*args)


@requires_torch
@pytest.mark.parametrize("shape", [(3, 5), (4, 2, 3), (6, 3, 2, 2), (2, 2, 1, 2, 3)])
def test_fans(shape: tuple[int, ...]) -> None:
    assert init._calculate_fan_in_and_fan_out(agrad.empty(*shape)) == \
        torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(*shape))


# (initialiser, kwargs, expected (mean, std) as a function of fan_in, fan_out, bound or None)
def _uniform_std(bound: float) -> float:
    return bound / math.sqrt(3)


CASES: list[tuple[str, dict[str, Any], Callable[[int, int], tuple[float, float, float | None]]]] = [
    ("uniform_", {"a": -2.0, "b": 4.0}, lambda fi, fo: (1.0, _uniform_std(3.0), None)),
    ("normal_", {"mean": 1.0, "std": 0.5}, lambda fi, fo: (1.0, 0.5, None)),
    ("xavier_uniform_", {"gain": 2.0},
     lambda fi, fo: (0.0, 2.0 * math.sqrt(2 / (fi + fo)), 2.0 * math.sqrt(6 / (fi + fo)))),
    ("xavier_normal_", {}, lambda fi, fo: (0.0, math.sqrt(2 / (fi + fo)), None)),
    ("kaiming_uniform_", {"a": math.sqrt(5)}, lambda fi, fo: (0.0, _uniform_std(1 / math.sqrt(fi)),
                                                               1 / math.sqrt(fi))),
    ("kaiming_uniform_", {"mode": "fan_out", "nonlinearity": "relu"},
     lambda fi, fo: (0.0, math.sqrt(2 / fo), math.sqrt(6 / fo))),
    ("kaiming_normal_", {}, lambda fi, fo: (0.0, math.sqrt(2 / (1 + 0.01**2)) / math.sqrt(fi), None)),
    ("trunc_normal_", {"std": 1.0, "a": -1.0, "b": 1.0}, lambda fi, fo: (0.0, 0.5396, 1.0)),
]


@pytest.mark.parametrize("name,kwargs,expect", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_distribution(name: str, kwargs: dict[str, Any], expect: Any) -> None:
    agrad.manual_seed(0)
    w = agrad.empty(300, 200)
    assert getattr(init, name)(w, **kwargs) is w
    mean, std, bound = expect(200, 300)
    a = w.numpy()
    assert abs(a.mean() - mean) < 5 * std / math.sqrt(a.size) + 1e-12
    assert abs(a.std() - std) < 0.02 * std
    if bound is not None:
        assert np.abs(a - (mean if name == "trunc_normal_" else 0)).max() <= bound + 1e-6


def test_fill_and_structured() -> None:
    w = agrad.empty(3, 4, requires_grad=True)
    init.constant_(w, 0.3)
    assert w.requires_grad and w.grad_fn is None and np.allclose(w.detach().numpy(), 0.3)
    assert init.ones_(w).sum().item() == 12 and init.zeros_(w).sum().item() == 0
    assert init.eye_(agrad.empty(3, 4)).tolist() == np.eye(3, 4).tolist()
    d = init.dirac_(agrad.empty(4, 2, 3), groups=2).numpy()
    assert d.sum() == 4 and d[0, 0, 1] == d[1, 1, 1] == d[2, 0, 1] == d[3, 1, 1] == 1
    q = init.orthogonal_(agrad.empty(3, 5), gain=2.0).numpy()
    np.testing.assert_allclose(q @ q.T, 4 * np.eye(3), atol=1e-5)
    s = init.sparse_(agrad.empty(10, 4), sparsity=0.3).numpy()
    assert ((s == 0).sum(axis=0) == 3).all()


@requires_torch
@pytest.mark.parametrize("call", [
    lambda lib, w: lib.nn.init.eye_(w(2, 2, 2)),
    lambda lib, w: lib.nn.init.dirac_(w(2, 2)),
    lambda lib, w: lib.nn.init.dirac_(w(3, 2, 3), groups=2),
    lambda lib, w: lib.nn.init.xavier_uniform_(w(3)),
    lambda lib, w: lib.nn.init.kaiming_uniform_(w(3, 3), mode="fan_avg"),
    lambda lib, w: lib.nn.init.calculate_gain("softmax"),
    lambda lib, w: lib.nn.init.calculate_gain("leaky_relu", True),
    lambda lib, w: lib.nn.init.orthogonal_(w(3)),
    lambda lib, w: lib.nn.init.sparse_(w(2, 2, 2), 0.1),
])
def test_errors_are_torchs(call: Callable[[Any, Any], Any]) -> None:
    with pytest.raises(Exception) as theirs:
        call(torch, torch.empty)
    with pytest.raises(Exception) as mine:
        call(agrad, agrad.empty)
    assert type(mine.value) is type(theirs.value) and str(mine.value) == str(theirs.value)


def test_zero_element_kaiming_warns() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        init.kaiming_uniform_(agrad.empty(0, 3))
    assert "Initializing zero-element tensors is a no-op" in str(caught[0].message)
