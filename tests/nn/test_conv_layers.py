"""Convolution and pooling layers against torch.nn.

Every configuration runs forward and backward through ``check_module`` in
float64 and float32 (values, input and weight gradients), and its ``repr``
must be torch's.  Constructor and forward misuse raise torch's exception type
and message; the default initialisation draws from torch's bounds.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest

import agrad
from tests.helpers import requires_torch, torch
from tests.nn.oracle import check_module

DTYPES = ["float64", "float32"]

# (class name, constructor args, constructor kwargs, input shape, forward kwargs)
CONV_CASES: list[tuple[str, tuple[Any, ...], dict[str, Any], tuple[int, ...], dict[str, Any]]] = [
    ("Conv1d", (4, 6, 3), {"stride": 2, "bias": False}, (2, 4, 9), {}),
    ("Conv1d", (2, 4, 3), {"padding": "same", "dilation": 2}, (2, 2, 7), {}),
    ("Conv1d", (2, 2, 2), {"padding": "same", "padding_mode": "replicate"}, (2, 5), {}),
    ("Conv1d", (3, 3, 2), {"padding": "valid", "groups": 3}, (1, 3, 4), {}),
    ("Conv1d", (2, 3, 3), {"padding": 2, "padding_mode": "circular"}, (2, 2, 4), {}),
    ("Conv2d", (4, 6, (3, 2)), {"padding": "same", "padding_mode": "reflect", "groups": 2}, (2, 4, 5, 6), {}),
    ("Conv2d", (3, 4, 3), {"padding": (1, 2), "padding_mode": "circular", "dilation": (1, 2)}, (3, 5, 6), {}),
    ("Conv2d", (2, 3, (2, 3)), {"stride": (2, 1), "padding": 1}, (2, 2, 5, 4), {}),
    ("Conv2d", (2, 2, 3), {"padding": (2, 1), "padding_mode": "reflect", "bias": False}, (1, 2, 4, 3), {}),
    ("Conv3d", (2, 3, 2), {"padding": 1, "padding_mode": "replicate"}, (1, 2, 3, 4, 3), {}),
    ("Conv3d", (2, 4, (1, 2, 2)), {"stride": (1, 2, 1), "groups": 2}, (2, 3, 4, 3), {}),
    ("ConvTranspose1d", (4, 2, 3), {"stride": 2, "padding": 1, "output_padding": 1}, (1, 4, 5), {}),
    ("ConvTranspose1d", (2, 3, 3), {"stride": 3, "bias": False}, (2, 4), {"output_size": [12]}),
    ("ConvTranspose2d", (4, 6, 3), {"stride": (2, 1), "groups": 2, "dilation": 2}, (2, 4, 3, 4), {}),
    ("ConvTranspose2d", (2, 2, 3), {"stride": 2, "padding": 1}, (1, 2, 3, 3), {"output_size": (1, 2, 6, 5)}),
    ("ConvTranspose3d", (2, 2, 2), {"stride": 2, "output_padding": (1, 0, 0)}, (1, 2, 2, 3, 2), {}),
]

POOL_CASES: list[tuple[str, tuple[Any, ...], dict[str, Any], tuple[int, ...], dict[str, Any]]] = [
    ("MaxPool1d", (3,), {"stride": 2, "padding": 1, "ceil_mode": True}, (2, 3, 8), {}),
    ("MaxPool1d", (2,), {"dilation": 2, "return_indices": True}, (3, 7), {}),
    ("MaxPool2d", (2,), {}, (2, 2, 4, 5), {}),
    ("MaxPool2d", ((3, 2),), {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 2), "return_indices": True},
     (1, 2, 5, 6), {}),
    ("MaxPool3d", (2,), {"stride": 1, "ceil_mode": True, "return_indices": True}, (1, 2, 3, 3, 3), {}),
    ("AvgPool1d", (3,), {"stride": 2, "padding": 1, "count_include_pad": False}, (2, 3, 7), {}),
    ("AvgPool1d", (2,), {"ceil_mode": True}, (2, 5), {}),
    ("AvgPool2d", (2,), {"padding": 1, "divisor_override": 3}, (1, 2, 4, 5), {}),
    ("AvgPool2d", ((3, 2),), {"stride": 1, "padding": (1, 0), "count_include_pad": False, "ceil_mode": True},
     (2, 4, 4), {}),
    ("AvgPool3d", (2,), {"stride": (1, 2, 2), "padding": 1}, (1, 2, 3, 4, 4), {}),
    ("AdaptiveAvgPool1d", (3,), {}, (2, 3, 7), {}),
    ("AdaptiveAvgPool2d", ((2, None),), {}, (1, 2, 5, 3), {}),
    ("AdaptiveAvgPool2d", (1,), {}, (2, 4, 3), {}),
    ("AdaptiveAvgPool3d", ((2, 1, 3),), {}, (1, 2, 3, 4, 5), {}),
    ("AdaptiveMaxPool1d", (3,), {"return_indices": True}, (2, 3, 7), {}),
    ("AdaptiveMaxPool2d", ((2, 3),), {}, (1, 2, 5, 4), {}),
    ("AdaptiveMaxPool3d", (2,), {"return_indices": True}, (2, 3, 4, 5), {}),
    ("LPPool1d", (2, 3), {"stride": 2}, (2, 3, 7), {}),
    ("LPPool1d", (float("inf"), 2), {"ceil_mode": True}, (2, 5), {}),
    ("LPPool2d", (1.5, (2, 3)), {"stride": (1, 2)}, (1, 2, 4, 6), {}),
    ("LPPool3d", (3, 2), {}, (1, 1, 4, 4, 2), {}),
]

CASES = CONV_CASES + POOL_CASES
IDS = [f"{name}-{args}-{kwargs}-{shape}-{fkw}" for name, args, kwargs, shape, fkw in CASES]


def _input(shape: tuple[int, ...], name: str) -> np.ndarray:
    x = np.random.default_rng(sum(shape)).standard_normal(shape)
    return np.abs(x) + 0.1 if name.startswith("LPPool") else x  # fractional powers need positive sums


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("name", "args", "kwargs", "shape", "forward_kwargs"), CASES, ids=IDS)
def test_matches_torch(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], shape: tuple[int, ...],
                       forward_kwargs: dict[str, Any], dtype: str) -> None:
    ours, theirs = getattr(agrad.nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    assert repr(ours) == repr(theirs).replace("torch", "agrad")
    check_module(ours, theirs, [_input(shape, name)], dtype, kwargs=forward_kwargs)


UNPOOL_CASES = [
    ("1d", (2,), {}, (2, 3, 8), {}),
    ("1d", (3,), {"stride": 2, "padding": 1}, (1, 7), {"output_size": [8]}),
    ("2d", (2,), {"stride": 1}, (1, 2, 4, 5), {}),
    ("2d", ((2, 3),), {"padding": (1, 0)}, (2, 5, 7), {"output_size": (5, 7)}),
    ("3d", (2,), {}, (1, 2, 4, 4, 3), {"output_size": [1, 2, 4, 4, 3]}),
]


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("nd", "args", "kwargs", "shape", "forward_kwargs"), UNPOOL_CASES,
                         ids=[str(c) for c in UNPOOL_CASES])
def test_max_unpool_matches_torch(nd: str, args: tuple[Any, ...], kwargs: dict[str, Any], shape: tuple[int, ...],
                                  forward_kwargs: dict[str, Any], dtype: str) -> None:
    """MaxUnpool inverts the matching MaxPool: its inputs are torch's pooled values and indices."""
    pooled, indices = getattr(torch.nn, f"MaxPool{nd}")(*args, return_indices=True, **kwargs)(
        torch.from_numpy(_input(shape, "")))
    ours, theirs = getattr(agrad.nn, f"MaxUnpool{nd}")(*args, **kwargs), getattr(torch.nn, f"MaxUnpool{nd}")(
        *args, **kwargs)
    assert repr(ours) == repr(theirs).replace("torch", "agrad")
    check_module(ours, theirs, [pooled.numpy(), indices.numpy()], dtype, kwargs=forward_kwargs)


def test_conv_attributes_are_torchs_tuples() -> None:
    conv = agrad.nn.Conv2d(2, 4, 3, padding="same", dilation=(1, 2))
    assert (conv.kernel_size, conv.stride, conv.padding, conv.dilation) == ((3, 3), (1, 1), "same", (1, 2))
    assert (conv.output_padding, conv.transposed, conv.groups, conv.padding_mode) == ((0, 0), False, 1, "zeros")
    assert conv._reversed_padding_repeated_twice == [2, 2, 1, 1]
    up = agrad.nn.ConvTranspose3d(2, 4, 2, output_padding=1)
    assert (up.output_padding, up.transposed, tuple(up.weight.shape)) == ((1, 1, 1), True, (2, 4, 2, 2, 2))


@pytest.mark.parametrize("layer", [lambda: agrad.nn.Conv2d(6, 4, (3, 2), groups=2),
                                   lambda: agrad.nn.ConvTranspose1d(6, 4, 3, groups=2),
                                   lambda: agrad.nn.Conv3d(2, 3, 1)], ids=["conv2d", "transposed", "conv3d"])
def test_default_init_is_within_torchs_bounds(layer: Any) -> None:
    """kaiming_uniform_(a=sqrt(5)) bounds the weight by 1/sqrt(fan_in), and the bias is drawn
    from the same interval, fan_in taken from the weight (in / groups * kernel, or out / groups * kernel
    when transposed); a fixed seed gives the same draw."""
    agrad.manual_seed(0)
    first = layer()
    agrad.manual_seed(0)
    second = layer()
    bound = 1 / math.sqrt(first.weight.shape[1] * math.prod(first.weight.shape[2:]))
    for p, q in zip(first.parameters(), second.parameters()):
        values = p.detach().numpy()
        assert np.abs(values).max() <= bound
        np.testing.assert_array_equal(values, q.detach().numpy())
    assert np.abs(first.weight.detach().numpy()).max() > bound / 2


CONV_MISUSE = [
    lambda nn: nn.Conv2d(4, 4, 3, groups=0),
    lambda nn: nn.Conv2d(3, 4, 3, groups=2),
    lambda nn: nn.Conv1d(4, 3, 3, groups=2),
    lambda nn: nn.Conv1d(2, 2, 3, padding="full"),
    lambda nn: nn.Conv2d(2, 2, 3, stride=2, padding="same"),
    lambda nn: nn.Conv3d(2, 2, 3, padding_mode="mirror"),
    lambda nn: nn.ConvTranspose2d(2, 2, 3, padding_mode="reflect"),
    lambda nn: nn.ConvTranspose1d(2, 2, 3, groups=-1),
]


@requires_torch
@pytest.mark.parametrize("build", CONV_MISUSE, ids=[str(i) for i in range(len(CONV_MISUSE))])
def test_constructor_errors_match_torch(build: Any) -> None:
    _same_error(lambda: build(torch.nn), lambda: build(agrad.nn))


FORWARD_MISUSE = [
    (lambda nn: nn.ConvTranspose1d(2, 2, 3, stride=2), (1, 2, 4), {"output_size": [11]}),
    (lambda nn: nn.ConvTranspose2d(2, 2, 3, stride=2), (1, 2, 4, 4), {"output_size": [9, 11]}),
    (lambda nn: nn.ConvTranspose2d(2, 2, 3, stride=2), (2, 4, 4), {"output_size": [1, 2, 9, 9]}),
    (lambda nn: nn.Conv1d(2, 2, 7, padding=3, padding_mode="reflect"), (1, 2, 3), {}),
    (lambda nn: nn.Conv2d(2, 2, 3, padding=(3, 1), padding_mode="reflect"), (1, 2, 3, 4), {}),
    (lambda nn: nn.Conv1d(2, 2, 9, padding=4, padding_mode="circular"), (1, 2, 3), {}),
]


@requires_torch
@pytest.mark.parametrize(("build", "shape", "forward_kwargs"), FORWARD_MISUSE,
                         ids=[str(i) for i in range(len(FORWARD_MISUSE))])
def test_forward_errors_match_torch(build: Any, shape: tuple[int, ...], forward_kwargs: dict[str, Any]) -> None:
    _same_error(lambda: build(torch.nn)(torch.zeros(*shape), **forward_kwargs),
                lambda: build(agrad.nn)(agrad.zeros(*shape), **forward_kwargs))


def _same_error(theirs: Any, ours: Any) -> None:
    with pytest.raises(Exception) as expected:
        theirs()
    with pytest.raises(Exception) as got:
        ours()
    assert type(got.value) is type(expected.value)
    assert _sorted_sets(str(got.value)) == _sorted_sets(str(expected.value).replace("torch", "agrad"))


def _sorted_sets(message: str) -> str:
    """``message`` with the elements of each printed set sorted: PyTorch prints a set of
    padding modes, whose order changes with the process's string hashing."""
    return re.sub(r"\{([^{}]*)\}", lambda m: "{" + ", ".join(sorted(m.group(1).split(", "))) + "}", message)
