"""The op table, checked entry by entry from its own ``samples``.

Every entry of ``agrad._ops._registry.REGISTRY`` that declares ``samples`` is
run on each sample call:

* float64 ``gradcheck`` and ``gradgradcheck`` (differentiable ops only);
* values, dtypes and gradients against PyTorch (the oracle), in float64;
* values and dtypes against PyTorch in float32.

Sample arguments are converted the same way for both libraries: float arrays
become float tensors that require grad, bool/int arrays plain tensors, and
everything else (numbers, shapes, index tuples) is passed literally.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
from agrad._ops._registry import REGISTRY, OpDef
from agrad.autograd import gradcheck, gradgradcheck
from tests.helpers import non_contiguous, requires_torch, torch

# Ops with a backward rule but no samples, each with the reason it is exempt.
EXEMPT_FROM_SAMPLES = {
    # Internal backward of ``index`` (IndexBackward0 calls it); its own vjp is
    # exercised by gradgradcheck of the ``index`` samples.
    "index_put_grad",
    # Internal forward behind ``Tensor.fill_``; its gradient is checked by the
    # in-place tests in tests/api/test_tensor.py.
    "filled",
    # CopySlices and its self-adjoint helper: their attribute is a view
    # function, so they are checked through in-place writes on views in
    # tests/ops/test_views.py (values, gradients vs torch, gradcheck).
    "copy_slices",
    "zero_region",
    # Behind ``Tensor.to(device)``: a move needs a second device, so it is
    # checked in tests/devices (values and gradients moved back).
    "to_device",
    # Random draws (``normal`` with tensor arguments, ``bernoulli``,
    # ``poisson``): agrad's generator is not torch's, and their gradient is
    # zero by definition, so neither values nor finite differences can be
    # compared; tests/api/test_factories.py checks their distributions,
    # shapes, dtypes and zero gradients.
    "normal_tensors",
    "bernoulli_draw",
    "poisson",
    # PyTorch records a NotImplemented node whose backward raises (no
    # gradient to check); values, dtypes and the error are checked in
    # tests/ops/test_pointwise.py.
    "floor_divide",
    "heaviside",
}

def _sample_cases() -> list[Any]:
    cases = []
    for name, op in REGISTRY.items():
        if op.samples is None:
            continue
        for i, (args, kwargs) in enumerate(op.samples(np.random.default_rng(0))):
            cases.append(pytest.param(op, args, kwargs, id=f"{name}-{i}"))
    return cases


SAMPLES = _sample_cases()


def _is_float_array(a: Any) -> bool:
    return isinstance(a, np.ndarray) and a.dtype.kind == "f"


def _to_agrad(args: tuple, dtype: agrad.dtype) -> list[Any]:
    out: list[Any] = []
    for a in args:
        if _is_float_array(a):
            out.append(agrad.tensor(a, dtype=dtype, requires_grad=True))
        elif isinstance(a, np.ndarray):
            out.append(agrad.tensor(a))
        else:
            out.append(a)
    return out


def _torch_value(a: Any, dtype: Any) -> Any:
    """A literal argument as PyTorch takes it: dtypes and arrays mapped, the rest as is."""
    if isinstance(a, agrad.dtype):
        return getattr(torch, a.name)
    if isinstance(a, np.ndarray):
        return torch.from_numpy(a.copy())
    if isinstance(a, tuple):
        return tuple(_torch_value(v, dtype) for v in a)
    return a


def _to_torch(args: tuple, dtype: Any) -> list[Any]:
    out: list[Any] = []
    for a in args:
        if _is_float_array(a):
            out.append(torch.tensor(a, dtype=dtype, requires_grad=True))
        else:
            out.append(_torch_value(a, dtype))
    return out


def _torch_kwargs(kwargs: dict) -> dict:
    return {k: _torch_value(v, None) for k, v in kwargs.items()}


def _differentiable(op: OpDef) -> bool:
    return op.vjps is not None


def _grad_leaves(ts: list[Any]) -> list[Any]:
    return [t for t in ts if getattr(t, "requires_grad", False)]


def _assert_dtype(a: agrad.Tensor, t: Any) -> None:
    assert a.dtype.name == str(t.dtype).removeprefix("torch."), f"dtype {a.dtype} != {t.dtype}"


def _assert_close(a: agrad.Tensor, t: Any, **tol: float) -> None:
    assert a.shape == tuple(t.shape), f"shape {a.shape} != {tuple(t.shape)}"
    np.testing.assert_allclose(a.detach().numpy(), t.detach().numpy(), **tol)


@pytest.mark.parametrize(("op", "args", "kwargs"), SAMPLES)
@pytest.mark.parametrize("check", [gradcheck, gradgradcheck], ids=["grad", "gradgrad"])
def test_gradcheck(op: OpDef, args: tuple, kwargs: dict, check: Callable[..., bool]) -> None:
    """Analytical first and second derivatives match finite differences in float64."""
    if not _differentiable(op):
        pytest.skip(f"{op.name} is not differentiable")
    fn = lambda *ts: op.public(*ts, **kwargs)
    inputs = _to_agrad(args, agrad.float64)
    expect_warning: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
    if check is gradgradcheck and fn(*inputs).dtype is not agrad.float64:
        # The grad_output gradgradcheck differentiates w.r.t. has the output's
        # (lower) precision, which gradcheck rightly warns about, as PyTorch does.
        expect_warning = pytest.warns(UserWarning, match="not a double precision")
    with expect_warning:
        assert check(fn, inputs, **op.check)


def _to_agrad_strided(args: tuple) -> list[Any]:
    """As ``_to_agrad`` in float64, float arrays as leaves over non-contiguous memory."""
    return [agrad.from_numpy(non_contiguous(a.astype(np.float64))).requires_grad_() if _is_float_array(a) else v
            for a, v in zip(args, _to_agrad(args, agrad.float64))]


# The samples with a float input that non-contiguous memory changes.
STRIDED_SAMPLES = [p for p in SAMPLES
                   if any(_is_float_array(a) and not non_contiguous(a).flags.c_contiguous for a in p.values[1])]


@requires_torch
@pytest.mark.parametrize(("op", "args", "kwargs"), SAMPLES)
def test_matches_torch_float64(op: OpDef, args: tuple, kwargs: dict) -> None:
    """Values, dtype and (for differentiable ops) input gradients equal PyTorch's."""
    _check_against_torch(op, args, kwargs, _to_agrad(args, agrad.float64))


@requires_torch
@pytest.mark.parametrize(("op", "args", "kwargs"), STRIDED_SAMPLES)
def test_matches_torch_on_non_contiguous_inputs(op: OpDef, args: tuple, kwargs: dict) -> None:
    """The same, with every float input a tensor over non-contiguous memory
    (``view`` refuses such memory, as PyTorch's does)."""
    if op.name == "view":
        with pytest.raises(RuntimeError, match="view size is not compatible with input tensor's size and stride"):
            op.public(*_to_agrad_strided(args), **kwargs)
        return
    _check_against_torch(op, args, kwargs, _to_agrad_strided(args))


def _check_against_torch(op: OpDef, args: tuple, kwargs: dict, ours: list[Any]) -> None:
    theirs = _to_torch(args, torch.float64)
    out = op.public(*ours, **kwargs)
    expected = op.ref(torch)(*theirs, **_torch_kwargs(kwargs))
    _assert_dtype(out, expected)
    _assert_close(out, expected, rtol=1e-10, atol=1e-12)
    if not _differentiable(op):
        assert not out.requires_grad
        return

    grad_output = np.random.default_rng(1).standard_normal(out.shape).astype(out._data.dtype)
    out.backward_sync(agrad.tensor(grad_output))
    expected.backward(torch.from_numpy(grad_output))
    for mine, ref in zip(_grad_leaves(ours), _grad_leaves(theirs), strict=True):
        assert mine.grad is not None
        _assert_dtype(mine.grad, ref.grad)
        _assert_close(mine.grad, ref.grad, rtol=1e-10, atol=1e-12)


@requires_torch
@pytest.mark.parametrize(("op", "args", "kwargs"), SAMPLES)
def test_matches_torch_float32(op: OpDef, args: tuple, kwargs: dict) -> None:
    """The same samples computed in float32 give PyTorch's float32 values and dtype."""
    out = op.public(*_to_agrad(args, agrad.float32), **kwargs)
    expected = op.ref(torch)(*_to_torch(args, torch.float32), **_torch_kwargs(kwargs))
    _assert_dtype(out, expected)
    _assert_close(out, expected, rtol=1e-5, atol=1e-6)


def test_every_differentiable_op_has_samples() -> None:
    """A new op with a backward rule must bring samples (or be exempted above, with a reason)."""
    missing = [name for name, op in REGISTRY.items()
               if _differentiable(op) and op.samples is None and name not in EXEMPT_FROM_SAMPLES]
    assert missing == []


def test_exemptions_are_current() -> None:
    """Every exemption names a registered differentiable op that still lacks samples."""
    stale = [name for name in EXEMPT_FROM_SAMPLES
             if name not in REGISTRY or REGISTRY[name].samples is not None or not _differentiable(REGISTRY[name])]
    assert stale == []


@requires_torch
def test_every_sampled_op_has_a_torch_oracle() -> None:
    """Each op checked on samples declares its PyTorch spelling (``ref=``) in its entry."""
    assert [name for name, op in REGISTRY.items() if op.samples is not None and op.ref is None] == []
