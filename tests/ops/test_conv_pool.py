"""Convolution, pooling, resampling, unfold/fold and shuffles against PyTorch.

The op table (``tests/ops/test_op_table.py``) checks each entry on its small
samples; this file checks the functions users call (``agrad.conv2d``,
``agrad.nn.functional.max_pool2d``, ``interpolate``…) over the combinations
of arguments that take different paths through the kernels: stride, padding,
dilation and groups, ``'same'`` padding with even kernels, transposed output
padding, ceil mode, count_include_pad, every interpolation mode, unbatched
inputs.  Each case is run by both libraries: values in float64 and float32,
gradients of every float input, the node PyTorch records, and a float64
``gradcheck`` / ``gradgradcheck`` of the composite.  Then PyTorch's errors,
integer inputs, ties and NaNs, indices, and the deprecated spellings.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
from agrad.autograd import gradcheck, gradgradcheck
from tests.helpers import requires_torch, torch

_rng = np.random.default_rng(11)


def _r(*shape: int) -> np.ndarray:
    return _rng.standard_normal(shape)


X2 = _r(2, 3, 7, 6)  # (N, C, H, W)
X1 = _r(2, 3, 9)
X3 = _r(1, 2, 4, 5, 6)
W3x3 = _r(4, 3, 3, 3)
B4 = _r(4)


class Case:
    """``fn(F, *tensors)`` on tensors made from ``inputs`` (float arrays are differentiated)."""

    def __init__(self, fn: Callable[..., Any], *inputs: np.ndarray, gradgrad: bool = False) -> None:
        self.fn = fn
        self.inputs = inputs
        self.gradgrad = gradgrad


CASES: dict[str, Case] = {
    # convolutions
    "conv2d": Case(lambda F, x, w, b: F.conv2d(x, w, b), X2, W3x3, B4, gradgrad=True),
    "conv2d-stride-padding-dilation": Case(lambda F, x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=(1, 2),
                                                                       dilation=(2, 1)), X2, W3x3, B4),
    "conv2d-groups": Case(lambda F, x, w: F.conv2d(x, w, groups=3, padding=1), X2, _r(6, 1, 3, 2), gradgrad=True),
    "conv2d-depthwise-stride": Case(lambda F, x, w, b: F.conv2d(x, w, b, stride=2, groups=3), X2, _r(3, 1, 2, 2),
                                    _r(3)),
    "conv2d-same-odd": Case(lambda F, x, w, b: F.conv2d(x, w, b, padding="same"), X2, W3x3, B4),
    "conv2d-same-even": Case(lambda F, x, w: F.conv2d(x, w, padding="same"), X2, _r(2, 3, 2, 4), gradgrad=True),
    "conv2d-same-dilated-even": Case(lambda F, x, w: F.conv2d(x, w, padding="same", dilation=(1, 3)), X2,
                                     _r(2, 3, 2, 2)),
    "conv2d-valid": Case(lambda F, x, w: F.conv2d(x, w, padding="valid", stride=2), X2, W3x3),
    "conv2d-unbatched": Case(lambda F, x, w, b: F.conv2d(x, w, b, padding=1), X2[0], W3x3, B4),
    "conv2d-1x1": Case(lambda F, x, w: F.conv2d(x, w), X2, _r(5, 3, 1, 1)),
    "conv2d-kernel-equals-input": Case(lambda F, x, w: F.conv2d(x, w), X2, _r(2, 3, 7, 6)),
    "conv1d": Case(lambda F, x, w, b: F.conv1d(x, w, b, stride=2, padding=2, dilation=2), X1, _r(4, 3, 3), B4,
                   gradgrad=True),
    "conv1d-same-even": Case(lambda F, x, w: F.conv1d(x, w, padding="same"), X1, _r(2, 3, 4)),
    "conv1d-unbatched-groups": Case(lambda F, x, w: F.conv1d(x, w, groups=3), X1[0], _r(3, 1, 2)),
    "conv3d": Case(lambda F, x, w, b: F.conv3d(x, w, b, padding=(1, 0, 1), stride=(1, 2, 2)), X3, _r(3, 2, 2, 3, 3),
                   _r(3)),
    "conv_transpose2d": Case(lambda F, x, w, b: F.conv_transpose2d(x, w, b, padding=1), X2, _r(3, 2, 3, 3), _r(2),
                             gradgrad=True),
    "conv_transpose2d-stride-output_padding": Case(
        lambda F, x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1), X2, _r(3, 2, 3, 3),
        _r(2), gradgrad=True),
    "conv_transpose2d-groups-dilation": Case(
        lambda F, x, w: F.conv_transpose2d(x, w, stride=(2, 3), padding=(0, 1), output_padding=(1, 2), groups=3,
                                           dilation=(1, 2)), X2, _r(3, 2, 3, 3)),
    "conv_transpose2d-output_padding-dilation": Case(
        lambda F, x, w: F.conv_transpose2d(x, w, output_padding=1, dilation=2), X2, _r(3, 2, 2, 2), gradgrad=True),
    "conv_transpose2d-unbatched": Case(lambda F, x, w: F.conv_transpose2d(x, w, stride=2), X2[0], _r(3, 4, 2, 2)),
    "conv_transpose1d": Case(lambda F, x, w, b: F.conv_transpose1d(x, w, b, stride=3, padding=1, output_padding=2),
                             X1, _r(3, 2, 4), _r(2)),
    "conv_transpose3d": Case(lambda F, x, w: F.conv_transpose3d(x, w, stride=2, padding=(1, 0, 0)), X3,
                             _r(2, 3, 2, 2, 3)),
    "convolution": Case(lambda F, x, w, b: (agrad if F is agrad.nn.functional else torch).convolution(
        x, w, b, [1, 2], [1, 0], [1, 1], False, [0, 0], 1), X2, W3x3, B4),
    # max pooling
    "max_pool2d": Case(lambda F, x: F.max_pool2d(x, 2), X2, gradgrad=True),
    "max_pool2d-overlap-padding-ceil": Case(lambda F, x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True), X2,
                                            gradgrad=True),
    "max_pool2d-dilation": Case(lambda F, x: F.max_pool2d(x, (2, 3), (1, 2), (1, 1), dilation=(2, 1)), X2),
    "max_pool2d-unbatched": Case(lambda F, x: F.max_pool2d(x, (3, 2), stride=1), X2[0]),
    "max_pool2d-indices": Case(lambda F, x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True)[1], X2),
    "max_pool1d": Case(lambda F, x: F.max_pool1d(x, 3, 2, 1, ceil_mode=True), X1, gradgrad=True),
    "max_pool1d-indices": Case(lambda F, x: F.max_pool1d(x, 2, return_indices=True)[1], X1),
    "max_pool3d": Case(lambda F, x: F.max_pool3d(x, 2, (1, 2, 2), padding=1), X3),
    "max_pool3d-indices": Case(lambda F, x: F.max_pool3d_with_indices(x, 2, ceil_mode=True)[1], X3),
    # average pooling
    "avg_pool2d": Case(lambda F, x: F.avg_pool2d(x, 2), X2, gradgrad=True),
    "avg_pool2d-ceil-padding": Case(lambda F, x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True), X2, gradgrad=True),
    "avg_pool2d-exclude-pad": Case(lambda F, x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
                                   X2),
    "avg_pool2d-divisor": Case(lambda F, x: F.avg_pool2d(x, (2, 3), (1, 2), divisor_override=4), X2),
    "avg_pool2d-unbatched": Case(lambda F, x: F.avg_pool2d(x, 2, 1), X2[0]),
    "avg_pool1d": Case(lambda F, x: F.avg_pool1d(x, 4, 3, 2, ceil_mode=True, count_include_pad=False), X1),
    "avg_pool3d": Case(lambda F, x: F.avg_pool3d(x, (2, 2, 3), 2, 1, ceil_mode=True), X3),
    # adaptive pooling
    "adaptive_avg_pool2d": Case(lambda F, x: F.adaptive_avg_pool2d(x, (3, 4)), X2, gradgrad=True),
    "adaptive_avg_pool2d-larger": Case(lambda F, x: F.adaptive_avg_pool2d(x, (9, None)), X2),
    "adaptive_avg_pool2d-one": Case(lambda F, x: F.adaptive_avg_pool2d(x, 1), X2),
    "adaptive_avg_pool1d": Case(lambda F, x: F.adaptive_avg_pool1d(x, 4), X1),
    "adaptive_avg_pool3d": Case(lambda F, x: F.adaptive_avg_pool3d(x, (2, 3, 4)), X3),
    "adaptive_max_pool2d": Case(lambda F, x: F.adaptive_max_pool2d(x, (3, 4)), X2, gradgrad=True),
    "adaptive_max_pool2d-larger": Case(lambda F, x: F.adaptive_max_pool2d(x, (9, 5)), X2),
    "adaptive_max_pool2d-indices": Case(lambda F, x: F.adaptive_max_pool2d(x, (4, 5), return_indices=True)[1], X2),
    "adaptive_max_pool1d": Case(lambda F, x: F.adaptive_max_pool1d(x, 4), X1),
    "adaptive_max_pool3d": Case(lambda F, x: F.adaptive_max_pool3d_with_indices(x, (3, 3, 4))[0], X3),
    # power-average pooling (composites)
    "lp_pool2d": Case(lambda F, x: F.lp_pool2d(x.abs() + 0.1, 2, 3, 2), X2, gradgrad=True),
    "lp_pool1d": Case(lambda F, x: F.lp_pool1d(x.abs() + 0.1, 1.5, 3, ceil_mode=True), X1),
    "lp_pool3d-inf": Case(lambda F, x: F.lp_pool3d(x, float("inf"), 2), X3),
    # unfold / fold
    "unfold": Case(lambda F, x: F.unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=2), X2, gradgrad=True),
    "unfold-unbatched": Case(lambda F, x: F.unfold(x, 2), X2[0]),
    "fold": Case(lambda F, x: F.fold(x, (5, 6), 2, padding=(1, 0), stride=(2, 1)), _r(2, 12, 15), gradgrad=True),
    "fold-unbatched": Case(lambda F, x: F.fold(x, (4, 4), 2, stride=2), _r(8, 4)),
    # interpolation
    "interpolate-nearest": Case(lambda F, x: F.interpolate(x, scale_factor=1.7), X2, gradgrad=True),
    "interpolate-nearest-size": Case(lambda F, x: F.interpolate(x, size=(3, 11)), X2),
    "interpolate-nearest-twice": Case(lambda F, x: F.interpolate(x, scale_factor=2), X2),
    "interpolate-nearest-1d": Case(lambda F, x: F.interpolate(x, scale_factor=0.6), X1),
    "interpolate-nearest-3d": Case(lambda F, x: F.interpolate(x, scale_factor=(1.5, 2, 0.7)), X3),
    "interpolate-nearest-exact": Case(lambda F, x: F.interpolate(x, size=(10, 4), mode="nearest-exact"), X2),
    "interpolate-linear": Case(lambda F, x: F.interpolate(x, scale_factor=2.5, mode="linear"), X1, gradgrad=True),
    "interpolate-linear-corners": Case(lambda F, x: F.interpolate(x, size=5, mode="linear", align_corners=True), X1),
    "interpolate-bilinear": Case(lambda F, x: F.interpolate(x, scale_factor=(1.5, 0.8), mode="bilinear"), X2,
                                 gradgrad=True),
    "interpolate-bilinear-corners": Case(lambda F, x: F.interpolate(x, size=(11, 3), mode="bilinear",
                                                                     align_corners=True), X2),
    "interpolate-bilinear-recompute": Case(lambda F, x: F.interpolate(x, scale_factor=1.3, mode="bilinear",
                                                                       recompute_scale_factor=True), X2),
    "interpolate-bilinear-same-size": Case(lambda F, x: F.interpolate(x, size=(7, 6), mode="bilinear"), X2),
    "interpolate-bicubic": Case(lambda F, x: F.interpolate(x, scale_factor=1.6, mode="bicubic"), X2, gradgrad=True),
    "interpolate-bicubic-corners": Case(lambda F, x: F.interpolate(x, size=(4, 9), mode="bicubic",
                                                                    align_corners=True), X2),
    "interpolate-trilinear": Case(lambda F, x: F.interpolate(x, size=(6, 4, 9), mode="trilinear"), X3),
    "interpolate-area": Case(lambda F, x: F.interpolate(x, scale_factor=0.5, mode="area"), X2),
    "interpolate-area-1d": Case(lambda F, x: F.interpolate(x, size=4, mode="area"), X1),
    # shuffles and unpooling
    "pixel_shuffle": Case(lambda F, x: F.pixel_shuffle(x, 2), _r(2, 8, 3, 2), gradgrad=True),
    "pixel_shuffle-5d": Case(lambda F, x: F.pixel_shuffle(x, 3), _r(2, 1, 9, 2, 2)),
    "pixel_unshuffle": Case(lambda F, x: F.pixel_unshuffle(x, 2), _r(2, 2, 4, 6)),
    "channel_shuffle": Case(lambda F, x: F.channel_shuffle(x, 3), _r(2, 6, 3, 2), gradgrad=True),
}


def _pool_indices(shape: tuple[int, ...], kernel: int) -> np.ndarray:
    """Indices as a max pool over (kernel,)*2 windows of ``shape`` would give (distinct per plane)."""
    out = np.empty(shape, dtype=np.int64)
    n_h, n_w = shape[-2:]
    w = n_w * kernel
    for i in range(n_h):
        for j in range(n_w):
            out[..., i, j] = (i * kernel + (i + j) % kernel) * w + j * kernel + (i * j) % kernel
    return out


UNPOOL_INDICES = _pool_indices((2, 3, 3, 3), 2)
CASES.update({
    "max_unpool2d": Case(lambda F, x, i: F.max_unpool2d(x, i, 2), _r(2, 3, 3, 3), UNPOOL_INDICES, gradgrad=True),
    "max_unpool2d-output_size": Case(lambda F, x, i: F.max_unpool2d(x, i, 2, output_size=(7, 7)), _r(2, 3, 3, 3),
                                     UNPOOL_INDICES),
    "max_unpool1d": Case(lambda F, x, i: F.max_unpool1d(x, i, 2), _r(2, 3, 4), np.array([[[0, 3, 4, 7]] * 3] * 2)),
    "max_unpool3d": Case(lambda F, x, i: F.max_unpool3d(x, i, 2), _r(1, 2, 1, 2, 2),
                         np.array([[[[[0, 3], [12, 15]]]] * 2])),
})
PARAMS = [pytest.param(case, id=name) for name, case in CASES.items()]
GRADGRAD = [pytest.param(case, id=name) for name, case in CASES.items() if case.gradgrad]


def _is_float(a: np.ndarray) -> bool:
    return a.dtype.kind == "f"


def _agrad_inputs(case: Case, dtype: Any = agrad.float64) -> list[agrad.Tensor]:
    return [agrad.tensor(a, dtype=dtype, requires_grad=True) if _is_float(a) else agrad.tensor(a)
            for a in case.inputs]


def _torch_inputs(case: Case, dtype: Any = None) -> list[Any]:
    dtype = dtype or torch.float64
    return [torch.tensor(a, dtype=dtype, requires_grad=True) if _is_float(a) else torch.tensor(a)
            for a in case.inputs]


def _run(case: Case, F: Any, inputs: list[Any]) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # 'same' padding with an even kernel warns, in both
        return case.fn(F, *inputs)


@requires_torch
@pytest.mark.parametrize("case", PARAMS)
def test_matches_torch_float64(case: Case) -> None:
    """Values, dtype, node name and the gradient of every float input equal PyTorch's."""
    ours, theirs = _agrad_inputs(case), _torch_inputs(case)
    out = _run(case, agrad.nn.functional, ours)
    expected = _run(case, torch.nn.functional, theirs)
    assert out.shape == tuple(expected.shape)
    assert out.dtype.name == str(expected.dtype).removeprefix("torch.")
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-10, atol=1e-12)
    if not expected.requires_grad:
        assert not out.requires_grad
        return
    assert out.grad_fn.name() == expected.grad_fn.name()
    grad_output = np.random.default_rng(3).standard_normal(out.shape)
    out.backward_sync(agrad.tensor(grad_output))
    expected.backward(torch.from_numpy(grad_output))
    for mine, ref in zip(ours, theirs, strict=True):
        if ref.requires_grad:
            np.testing.assert_allclose(mine.grad.numpy(), ref.grad.numpy(), rtol=1e-10, atol=1e-12)


@requires_torch
@pytest.mark.parametrize("case", PARAMS)
def test_matches_torch_float32(case: Case) -> None:
    """The same calls in float32 keep float32 and PyTorch's values."""
    out = _run(case, agrad.nn.functional, _agrad_inputs(case, agrad.float32))
    expected = _run(case, torch.nn.functional, _torch_inputs(case, torch.float32))
    assert out.dtype.name == str(expected.dtype).removeprefix("torch.")
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", PARAMS)
def test_gradcheck(case: Case) -> None:
    """First derivatives of every function match finite differences (float64)."""
    inputs = _agrad_inputs(case)
    if not any(t.requires_grad for t in inputs) or not _run(case, agrad.nn.functional, inputs).dtype.is_floating_point:
        pytest.skip("an integer output: nothing to differentiate")
    assert gradcheck(lambda *ts: _run(case, agrad.nn.functional, list(ts)), inputs)


@pytest.mark.parametrize("case", GRADGRAD)
def test_gradgradcheck(case: Case) -> None:
    """Second derivatives (``create_graph=True``) match finite differences (float64)."""
    assert gradgradcheck(lambda *ts: _run(case, agrad.nn.functional, list(ts)), _agrad_inputs(case))


@requires_torch
def test_conv_second_derivatives_match_torch() -> None:
    """A conv's double backward (ConvolutionBackwardBackward0 in PyTorch) gives PyTorch's
    gradients of the input gradient w.r.t. input, weight and the output's gradient."""
    x, w, v, u = _r(2, 3, 6, 5), _r(4, 3, 3, 2), _r(2, 4, 2, 6), _r(2, 3, 6, 5)
    results = []
    for lib in (agrad, torch):
        grad = agrad.autograd.grad_sync if lib is agrad else torch.autograd.grad
        xs = [lib.tensor(a, requires_grad=True) for a in (x, w, v)]
        y = lib.nn.functional.conv2d(xs[0], xs[1], stride=(2, 1), padding=(0, 1))
        gx, gw = grad(y, (xs[0], xs[1]), xs[2], create_graph=True)
        total = (gx * lib.tensor(u)).sum() + (gw * gw).sum()
        results.append([g.detach().numpy() for g in grad(total, xs)])
    for mine, ref in zip(*results):
        np.testing.assert_allclose(mine, ref, rtol=1e-10, atol=1e-12)


# -- top-level names -------------------------------------------------------------------------------


@requires_torch
@pytest.mark.parametrize(("name", "args"), [
    ("conv2d", (X2, W3x3, B4, 1, 1)), ("conv1d", (X1, _r(4, 3, 2))), ("conv3d", (X3, _r(2, 2, 1, 2, 2))),
    ("conv_transpose2d", (X2, _r(3, 2, 2, 2), None, 2)), ("conv_transpose1d", (X1, _r(3, 2, 2))),
    ("conv_transpose3d", (X3, _r(2, 2, 2, 1, 2))),
    ("max_pool1d", (X1, 2)), ("max_pool2d", (X2, 2, 1, 1)), ("max_pool3d", (X3, 2)),
    ("avg_pool1d", (X1, 3, 2, 1, True, False)), ("adaptive_avg_pool1d", (X1, 4)),
    ("pixel_shuffle", (_r(1, 4, 2, 3), 2)), ("pixel_unshuffle", (_r(1, 1, 4, 4), 2)),
    ("channel_shuffle", (_r(1, 4, 2, 3), 2)),
])
def test_torch_level_functions(name: str, args: tuple[Any, ...]) -> None:
    """``agrad.<name>`` is ``torch.<name>``: the same positional signature and values."""
    ours = getattr(agrad, name)(*(agrad.tensor(a) if isinstance(a, np.ndarray) else a for a in args))
    theirs = getattr(torch, name)(*(torch.tensor(a) if isinstance(a, np.ndarray) else a for a in args))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-12)


@requires_torch
@pytest.mark.parametrize("name", ["max_pool1d_with_indices", "adaptive_max_pool1d"])
def test_torch_level_pairs(name: str) -> None:
    """``torch.max_pool1d_with_indices`` and ``torch.adaptive_max_pool1d`` return (values, indices)."""
    args = (3,) if name == "adaptive_max_pool1d" else (3, 2, 1)
    ours = getattr(agrad, name)(agrad.tensor(X1), *args)
    theirs = getattr(torch, name)(torch.tensor(X1), *args)
    for a, t in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a.numpy(), t.numpy())


# -- PyTorch's errors ----------------------------------------------------------------------------

X4F = np.zeros((2, 4, 6, 6))
ERRORS: dict[str, Callable[[Any, Any, Any], Any]] = {
    "conv2d-5d-input": lambda lib, F, t: F.conv2d(t(np.zeros((1, 2, 4, 6, 6))), t(np.zeros((8, 4, 3, 3)))),
    "conv2d-channels": lambda lib, F, t: F.conv2d(t(X4F), t(np.zeros((8, 3, 3, 3)))),
    "conv2d-groups": lambda lib, F, t: F.conv2d(t(X4F), t(np.zeros((8, 4, 3, 3))), groups=3),
    "conv2d-groups-output": lambda lib, F, t: F.conv2d(t(X4F), t(np.zeros((7, 2, 3, 3))), groups=2),
    "conv2d-kernel-too-big": lambda lib, F, t: F.conv2d(t(X4F), t(np.zeros((8, 4, 7, 7)))),
    "conv2d-dilated-kernel-too-big": lambda lib, F, t: F.conv2d(t(X4F), t(np.zeros((8, 4, 3, 3))), dilation=3),
    "conv2d-weight-dims": lambda lib, F, t: F.conv2d(t(X4F), t(np.zeros((8, 4, 3)))),
    "conv2d-bias-size": lambda lib, F, t: F.conv2d(t(X4F), t(np.zeros((8, 4, 3, 3))), t(np.zeros(7))),
    "conv2d-dtypes": lambda lib, F, t: F.conv2d(t(X4F), t(np.zeros((8, 4, 3, 3))).float()),
    "conv2d-bias-dtype": lambda lib, F, t: F.conv2d(t(X4F).float(), t(np.zeros((8, 4, 3, 3))).float(),
                                                    t(np.zeros(8))),
    "conv2d-stride-zero": lambda lib, F, t: F.conv2d(t(X4F), t(np.zeros((8, 4, 3, 3))), stride=0),
    "conv2d-negative-padding": lambda lib, F, t: F.conv2d(t(X4F), t(np.zeros((8, 4, 3, 3))), padding=-1),
    "conv2d-dilation-zero": lambda lib, F, t: F.conv2d(t(X4F), t(np.zeros((8, 4, 3, 3))), dilation=0),
    "conv2d-groups-zero": lambda lib, F, t: F.conv2d(t(X4F), t(np.zeros((8, 4, 3, 3))), groups=0),
    "conv2d-same-strided": lambda lib, F, t: F.conv2d(t(X4F), t(np.zeros((8, 4, 3, 3))), padding="same", stride=2),
    "conv2d-padding-string": lambda lib, F, t: F.conv2d(t(X4F), t(np.zeros((8, 4, 3, 3))), padding="full"),
    "conv2d-stride-length": lambda lib, F, t: F.conv2d(t(X4F), t(np.zeros((8, 4, 3, 3))), stride=(1, 1, 1)),
    "conv1d-4d-input": lambda lib, F, t: F.conv1d(t(X4F), t(np.zeros((8, 4, 3)))),
    "conv_transpose2d-channels": lambda lib, F, t: F.conv_transpose2d(t(X4F), t(np.zeros((3, 4, 3, 3)))),
    "conv_transpose2d-output_padding": lambda lib, F, t: F.conv_transpose2d(
        t(X4F), t(np.zeros((4, 4, 3, 3))), stride=2, output_padding=2),
    "conv_transpose3d-output_padding": lambda lib, F, t: F.conv_transpose3d(
        t(np.zeros((1, 4, 2, 2, 2))), t(np.zeros((4, 2, 3, 3, 3))), stride=2, output_padding=2),
    "conv_transpose2d-bias": lambda lib, F, t: F.conv_transpose2d(t(X4F), t(np.zeros((4, 4, 3, 3))),
                                                                  t(np.zeros(3))),
    "conv_transpose2d-too-small": lambda lib, F, t: F.conv_transpose2d(t(np.zeros((1, 4, 1, 1))),
                                                                       t(np.zeros((4, 4, 1, 1))), padding=2),
    "convolution-unbatched": lambda lib, F, t: lib.convolution(t(X4F[0]), t(np.zeros((8, 4, 3, 3))), None, [1, 1],
                                                               [0, 0], [1, 1], False, [0, 0], 1),
    "conv2d-bool": lambda lib, F, t: F.conv2d(t(X4F) > 0, t(np.zeros((8, 4, 3, 3))) > 0),
    "max_pool2d-dims": lambda lib, F, t: F.max_pool2d(t(np.zeros(6)), 2),
    "max_pool2d-pad": lambda lib, F, t: F.max_pool2d(t(X4F), 2, padding=2),
    "max_pool2d-kernel-zero": lambda lib, F, t: F.max_pool2d(t(X4F), 0, 1),
    "max_pool2d-stride-zero": lambda lib, F, t: F.max_pool2d(t(X4F), 2, 0),
    "max_pool2d-negative-pad": lambda lib, F, t: F.max_pool2d(t(X4F), 2, 1, -1),
    "max_pool2d-dilation-zero": lambda lib, F, t: F.max_pool2d(t(X4F), 2, 1, 0, 0),
    "max_pool2d-too-small": lambda lib, F, t: F.max_pool2d(t(np.zeros((1, 1, 2, 2))), 3),
    "max_pool2d-kernel-length": lambda lib, F, t: F.max_pool2d(t(X4F), (2, 2, 2)),
    "max_pool2d-stride-length": lambda lib, F, t: F.max_pool2d(t(X4F), 2, (1, 1, 1)),
    "max_pool2d-empty-channels": lambda lib, F, t: F.max_pool2d(t(np.zeros((2, 0, 6, 6))), 2),
    "max_pool2d-bool": lambda lib, F, t: F.max_pool2d(t(X4F) > 0, 2),
    "max_pool3d-dims": lambda lib, F, t: F.max_pool3d(t(X4F[0, 0]), 2),
    "max_pool3d-kernel-length": lambda lib, F, t: F.max_pool3d(t(np.zeros((1, 2, 4, 4, 4))), (2, 2)),
    "max_pool1d-dims": lambda lib, F, t: F.max_pool1d(t(X4F), 2),
    "max_pool1d-padding": lambda lib, F, t: F.max_pool1d(t(X4F[0]), 2, padding=2),
    "max_pool1d-kernel-length": lambda lib, F, t: F.max_pool1d(t(X4F[0]), (2, 2)),
    "avg_pool2d-pad": lambda lib, F, t: F.avg_pool2d(t(X4F), 2, padding=2),
    "avg_pool2d-divisor-zero": lambda lib, F, t: F.avg_pool2d(t(X4F), 2, divisor_override=0),
    "avg_pool2d-too-small": lambda lib, F, t: F.avg_pool2d(t(np.zeros((1, 1, 2, 2))), 3),
    "avg_pool2d-dims": lambda lib, F, t: F.avg_pool2d(t(np.zeros((1, 1, 1, 4, 4))), 2),
    "avg_pool1d-dims": lambda lib, F, t: F.avg_pool1d(t(X4F), 2),
    "adaptive_avg_pool2d-dims": lambda lib, F, t: F.adaptive_avg_pool2d(t(np.zeros(6)), 2),
    "adaptive_avg_pool2d-size": lambda lib, F, t: F.adaptive_avg_pool2d(t(X4F), (2, 2, 2)),
    "adaptive_avg_pool2d-empty": lambda lib, F, t: F.adaptive_avg_pool2d(t(np.zeros((2, 4, 0, 6))), 2),
    "adaptive_avg_pool2d-long": lambda lib, F, t: F.adaptive_avg_pool2d(t(X4F).long(), 2),
    "adaptive_avg_pool1d-size": lambda lib, F, t: F.adaptive_avg_pool1d(t(X4F[0]), (2, 2)),
    "adaptive_max_pool2d-dims": lambda lib, F, t: F.adaptive_max_pool2d(t(np.zeros(6)), 2),
    "adaptive_max_pool3d-dims": lambda lib, F, t: F.adaptive_max_pool3d(t(X4F[0, 0]), 2),
    "adaptive_max_pool1d-dims": lambda lib, F, t: F.adaptive_max_pool1d(t(X4F), 2),
    "unfold-5d": lambda lib, F, t: F.unfold(t(np.zeros((1, 1, 4, 6, 6))), 2),
    "unfold-kernel-too-big": lambda lib, F, t: F.unfold(t(X4F), 7),
    "fold-channels": lambda lib, F, t: F.fold(t(np.zeros((2, 7, 9))), (4, 4), 2),
    "fold-blocks": lambda lib, F, t: F.fold(t(np.zeros((2, 16, 8))), (4, 4), 2),
    "fold-dims": lambda lib, F, t: F.fold(t(np.zeros((2, 16, 9, 1))), (4, 4), 2),
    "pixel_shuffle-channels": lambda lib, F, t: F.pixel_shuffle(t(np.zeros((1, 3, 2, 2))), 2),
    "pixel_shuffle-dims": lambda lib, F, t: F.pixel_shuffle(t(np.zeros((4, 2))), 2),
    "pixel_unshuffle-height": lambda lib, F, t: F.pixel_unshuffle(t(np.zeros((1, 1, 3, 3))), 2),
    "channel_shuffle-channels": lambda lib, F, t: F.channel_shuffle(t(np.zeros((1, 3, 2, 2))), 2),
    "channel_shuffle-dims": lambda lib, F, t: F.channel_shuffle(t(np.zeros(3)), 2),
    "interpolate-dims": lambda lib, F, t: F.interpolate(t(np.zeros((4, 6))), scale_factor=2),
    "interpolate-bilinear-3d": lambda lib, F, t: F.interpolate(t(np.zeros((1, 4, 6))), scale_factor=2,
                                                               mode="bilinear"),
    "interpolate-linear-4d": lambda lib, F, t: F.interpolate(t(X4F), scale_factor=2, mode="linear"),
    "interpolate-size-and-scale": lambda lib, F, t: F.interpolate(t(X4F), size=3, scale_factor=2),
    "interpolate-neither": lambda lib, F, t: F.interpolate(t(X4F)),
    "interpolate-mode": lambda lib, F, t: F.interpolate(t(X4F), size=3, mode="foo"),
    "interpolate-align-nearest": lambda lib, F, t: F.interpolate(t(X4F), size=3, align_corners=True),
    "interpolate-size-length": lambda lib, F, t: F.interpolate(t(X4F), size=(3, 3, 3)),
    "interpolate-recompute-size": lambda lib, F, t: F.interpolate(t(X4F), size=3, recompute_scale_factor=True),
    "conv2d-no-filters": lambda lib, F, t: F.conv2d(t(X4F), t(np.zeros((0, 4, 3, 3)))),
    "conv2d-dtypes-float32": lambda lib, F, t: F.conv2d(t(X4F).float(), t(np.zeros((8, 4, 3, 3)))),
    "conv2d-dtypes-long": lambda lib, F, t: F.conv2d(t(X4F).long(), t(np.zeros((8, 4, 3, 3)))),
    "conv2d-dilation-zero-float32": lambda lib, F, t: F.conv2d(t(X4F).float(), t(np.zeros((8, 4, 3, 3))).float(),
                                                               dilation=0),
    "conv_transpose2d-dilation-zero": lambda lib, F, t: F.conv_transpose2d(t(X4F), t(np.zeros((4, 4, 3, 3))),
                                                                           dilation=0),
    "max_pool1d-long": lambda lib, F, t: F.max_pool1d(t(X4F[0]).long(), 2),
    "unfold-long": lambda lib, F, t: F.unfold(t(X4F).long(), 2),
    "fold-long": lambda lib, F, t: F.fold(t(np.zeros((2, 8, 9))).long(), (4, 4), 2),
    "max_unpool2d-long": lambda lib, F, t: F.max_unpool2d(t(X4F).long(), t(np.zeros((2, 4, 6, 6), np.int64)), 2),
    "max_unpool2d-indices-dtype": lambda lib, F, t: F.max_unpool2d(t(X4F), t(X4F), 2),
    "max_unpool2d-indices-shape": lambda lib, F, t: F.max_unpool2d(t(X4F), t(np.zeros((2, 4, 6, 5), np.int64)), 2),
    "max_unpool2d-index-range": lambda lib, F, t: F.max_unpool2d(t(X4F), t(np.full((2, 4, 6, 6), 200)), 2),
    "max_unpool2d-output_size": lambda lib, F, t: F.max_unpool2d(t(X4F), t(np.zeros((2, 4, 6, 6), np.int64)), 2,
                                                                 output_size=(3, 3)),
}


@requires_torch
@pytest.mark.parametrize("make", [pytest.param(f, id=k) for k, f in ERRORS.items()])
def test_errors_match_torch(make: Callable[[Any, Any, Any], Any]) -> None:
    """Bad arguments raise PyTorch's exception type with PyTorch's message."""
    with pytest.raises(Exception) as theirs:
        make(torch, torch.nn.functional, torch.tensor)
    with pytest.raises(theirs.type) as ours:
        make(agrad, agrad.nn.functional, agrad.tensor)
    assert str(ours.value) == str(theirs.value)


# -- dtypes, ties, empty inputs --------------------------------------------------------------------

INTS = np.random.default_rng(5).integers(-9, 9, (2, 4, 6, 5))


@requires_torch
@pytest.mark.parametrize("call", [
    pytest.param(lambda F, x: F.conv2d(x, x[:3, :, :3, :2], padding=1), id="conv2d"),
    pytest.param(lambda F, x: F.conv_transpose2d(x, x.permute(1, 0, 2, 3)[:, :, :2, :3], stride=2),
                 id="conv_transpose2d"),
    pytest.param(lambda F, x: F.conv_transpose2d(x, x.permute(1, 0, 2, 3)[:, :, :3, :2], padding=1),
                 id="conv_transpose2d-stride-1"),
    pytest.param(lambda F, x: F.max_pool2d(x, 2, 1, 1), id="max_pool2d"),
    pytest.param(lambda F, x: F.max_pool2d(x, 2, return_indices=True)[1], id="max_pool2d-indices"),
    pytest.param(lambda F, x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True), id="avg_pool2d"),
    pytest.param(lambda F, x: F.avg_pool2d(x, 2, divisor_override=3), id="avg_pool2d-divisor"),
    pytest.param(lambda F, x: F.pixel_shuffle(x, 2), id="pixel_shuffle"),
    pytest.param(lambda F, x: F.pixel_unshuffle(x[..., :4], 2), id="pixel_unshuffle"),
    pytest.param(lambda F, x: F.channel_shuffle(x, 2), id="channel_shuffle"),
    pytest.param(lambda F, x: F.max_pool1d(x[0], 2, return_indices=True)[0], id="max_pool1d-indices"),
])
def test_integer_inputs_match_torch(call: Callable[..., Any]) -> None:
    """Integer tensors: PyTorch's values and int64 dtype (avg pools divide truncating)."""
    ours = call(agrad.nn.functional, agrad.tensor(INTS))
    theirs = call(torch.nn.functional, torch.tensor(INTS))
    assert ours.dtype is agrad.int64
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@requires_torch
@pytest.mark.parametrize("fn", [
    pytest.param(lambda F, x: F.max_pool2d(x, 3, 1, 1, return_indices=True), id="max_pool2d"),
    pytest.param(lambda F, x: F.max_pool2d(x, 2, 2, 1, ceil_mode=True, return_indices=True), id="max_pool2d-ceil"),
    pytest.param(lambda F, x: F.adaptive_max_pool2d(x, (2, 3), return_indices=True), id="adaptive_max_pool2d"),
])
def test_max_pool_ties_nan_and_inf_follow_torch(fn: Callable[..., Any]) -> None:
    """Ties go to the first maximum, a NaN wins (the last one), an all -inf window
    points at its first element inside the input: PyTorch's indices exactly, and
    the gradient goes where the index points."""
    x = np.array([[[[1.0, 1.0, 0.0, 2.0, 2.0], [1.0, np.nan, 3.0, np.nan, 0.0],
                    [-np.inf, -np.inf, 5.0, 5.0, 1.0], [-np.inf, -np.inf, 0.0, 1.0, 1.0]]]])
    ours_x = agrad.tensor(x, requires_grad=True)
    theirs_x = torch.tensor(x, requires_grad=True)
    (ov, oi), (tv, ti) = fn(agrad.nn.functional, ours_x), fn(torch.nn.functional, theirs_x)
    np.testing.assert_array_equal(ov.detach().numpy(), tv.detach().numpy())
    np.testing.assert_array_equal(oi.numpy(), ti.numpy())
    ov.sum().backward_sync()
    tv.sum().backward()
    np.testing.assert_array_equal(ours_x.grad.numpy(), theirs_x.grad.numpy())


@requires_torch
@pytest.mark.parametrize("fn", [
    pytest.param(lambda F, x: F.max_pool2d(x, 2), id="max_pool2d"),
    pytest.param(lambda F, x: F.avg_pool2d(x, 2), id="avg_pool2d"),
    pytest.param(lambda F, x: F.adaptive_avg_pool2d(x, 2), id="adaptive_avg_pool2d"),
    pytest.param(lambda F, x: F.adaptive_max_pool2d(x, 2), id="adaptive_max_pool2d"),
    pytest.param(lambda F, x: F.interpolate(x, scale_factor=2), id="interpolate"),
    pytest.param(lambda F, x: F.unfold(x, 2), id="unfold"),
    pytest.param(lambda F, x: F.conv2d(x, (agrad if F is agrad.nn.functional else torch).ones(
        3, 2, 2, 2, dtype=x.dtype)), id="conv2d"),
])
def test_empty_batch(fn: Callable[..., Any]) -> None:
    """A batch of zero samples gives PyTorch's empty shape and an empty gradient."""
    x = agrad.zeros(0, 2, 4, 4, dtype=agrad.float64, requires_grad=True)
    out = fn(agrad.nn.functional, x)
    assert out.shape == tuple(fn(torch.nn.functional, torch.zeros(0, 2, 4, 4, dtype=torch.float64)).shape)
    out.sum().backward_sync()
    assert x.grad.shape == (0, 2, 4, 4)


def test_pixel_shuffle_empty_batch_has_a_gradient() -> None:
    """An empty batch differentiates (PyTorch 2.13's PixelShuffleBackward0 fails here)."""
    x = agrad.zeros(0, 4, 2, 2, requires_grad=True)
    y = agrad.pixel_shuffle(x, 2)
    assert y.shape == (0, 1, 4, 4)
    y.sum().backward_sync()
    assert x.grad.shape == (0, 4, 2, 2)


def test_max_unpool_inverts_max_pool() -> None:
    """``max_unpool2d(max_pool2d(x))`` keeps each window's maximum in place, zeros elsewhere."""
    x = agrad.tensor(np.random.default_rng(2).standard_normal((2, 3, 6, 6)))
    out, idx = agrad.nn.functional.max_pool2d(x, 2, return_indices=True)
    back = agrad.nn.functional.max_unpool2d(out, idx, 2).numpy()
    windows = x.numpy().reshape(2, 3, 3, 2, 3, 2)
    keep = windows == windows.max(axis=(3, 5), keepdims=True)
    np.testing.assert_array_equal(back, np.where(keep, windows, 0).reshape(2, 3, 6, 6))


@pytest.mark.parametrize("name", ["upsample", "upsample_nearest", "upsample_bilinear"])
def test_deprecated_upsample_warns_and_interpolates(name: str) -> None:
    F = agrad.nn.functional
    x = agrad.tensor(X2)
    with pytest.warns(UserWarning, match=f"nn.functional.{name}` is deprecated"):
        out = getattr(F, name)(x, scale_factor=2)
    mode = {"upsample_bilinear": "bilinear"}.get(name, "nearest")
    expected = F.interpolate(x, scale_factor=2, mode=mode, align_corners=True if mode == "bilinear" else None)
    np.testing.assert_array_equal(out.numpy(), expected.numpy())


def test_same_padding_with_even_kernel_warns_as_torch() -> None:
    with pytest.warns(UserWarning, match="padding='same' with even kernel lengths"):
        agrad.conv2d(agrad.tensor(X2), agrad.tensor(_r(2, 3, 2, 2)), padding="same")


def test_interpolate_antialias_is_not_supported() -> None:
    with pytest.raises(NotImplementedError, match="antialias"):
        agrad.nn.functional.interpolate(agrad.tensor(X2), scale_factor=2, mode="bilinear", antialias=True)


@requires_torch
def test_conv_node_saves_torch_names() -> None:
    """ConvolutionBackward0 exposes the saved input and weight under PyTorch's names, and
    has PyTorch's three edges (the absent bias's None)."""
    x = agrad.tensor(X2, requires_grad=True)
    w = agrad.tensor(W3x3, requires_grad=True)
    y = agrad.conv2d(x, w, padding=1)
    assert y.grad_fn._saved_input is x
    assert y.grad_fn._saved_weight is w
    assert len(y.grad_fn.next_functions) == 3 and y.grad_fn.next_functions[2][0] is None


def test_conv_runs_in_a_backward_on_the_event_loop() -> None:
    """The awaited backward (kernels possibly in the engine's pool) gives the blocking one's gradients."""
    import asyncio

    def grads(awaited: bool) -> list[np.ndarray]:
        x = agrad.tensor(X2, requires_grad=True)
        w = agrad.tensor(W3x3, requires_grad=True)
        loss = agrad.nn.functional.max_pool2d(agrad.relu(agrad.conv2d(x, w, padding=1)), 2).sum()
        if awaited:
            asyncio.run(loss.backward())
        else:
            loss.backward_sync()
        return [x.grad.numpy(), w.grad.numpy()]

    for a, b in zip(grads(True), grads(False), strict=True):
        np.testing.assert_array_equal(a, b)


@requires_torch
@pytest.mark.parametrize("stride", [2, 1], ids=["disjoint", "overlapping"])
def test_max_pool_backward_with_ties_and_infinite_gradient(stride: int) -> None:
    """Tied maxima (relu's zeros) take the gradient at the first one only, and an
    infinite or NaN incoming gradient lands only there, as in PyTorch."""
    x = np.zeros((1, 2, 4, 4))
    x[0, 1, 1:3, 1:3] = 2.0
    grad_shape = (1, 2, 2, 2) if stride == 2 else (1, 2, 3, 3)
    g = np.ones(grad_shape)
    g[0, 0, 0, 0], g[0, 1, -1, -1] = np.inf, np.nan
    for grad in (np.ones(grad_shape), g):
        ours = agrad.tensor(x, requires_grad=True)
        theirs = torch.tensor(x, requires_grad=True)
        agrad.nn.functional.max_pool2d(ours, 2, stride).backward_sync(agrad.tensor(grad))
        torch.nn.functional.max_pool2d(theirs, 2, stride).backward(torch.tensor(grad))
        np.testing.assert_array_equal(ours.grad.numpy(), theirs.grad.numpy())


def test_weight_gradient_reuses_the_input_gradients_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Note [Shared columns]: a stride-1 backward copies columns once (for the input's
    gradient) and the weight's gradient reuses them; nothing is kept afterwards."""
    from agrad._ops import _conv

    calls = []
    columns = _conv._columns
    monkeypatch.setattr(_conv, "_columns", lambda *a, **k: calls.append(a[1].shape) or columns(*a, **k))
    x = agrad.tensor(X2, requires_grad=True)
    w = agrad.tensor(W3x3, requires_grad=True)
    y = agrad.conv2d(x, w, padding=1, dilation=(1, 2))
    assert len(calls) == 1
    y.backward_sync(agrad.tensor(np.ones(y.shape)))
    assert len(calls) == 2  # the input gradient's only
    assert _conv._SHARED == {}
    if torch is not None:
        tx, tw = torch.tensor(X2, requires_grad=True), torch.tensor(W3x3, requires_grad=True)
        torch.conv2d(tx, tw, padding=1, dilation=(1, 2)).backward(torch.ones(y.shape, dtype=torch.float64))
        np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_no_columns_are_kept_when_only_some_gradients_are_asked_for() -> None:
    """``grad(y, [x])`` skips the weight's vjp, so the input's keeps no columns for it."""
    from agrad._ops import _conv

    x = agrad.tensor(X2, requires_grad=True)
    w = agrad.tensor(W3x3, requires_grad=True)
    g = agrad.tensor(np.ones((2, 4, 7, 6)))
    (gx,) = agrad.autograd.grad_sync(agrad.conv2d(x, w, padding=1), [x], g)
    assert gx.shape == x.shape
    assert _conv._SHARED == {}
