"""``agrad.nn.functional`` against ``torch.nn.functional``: values and gradients,
plus a float64 ``gradcheck`` of each composite.

Each case is a name, a function of the library's ``functional`` module and
tensor factory, and its inputs (float arrays are differentiated, integer
arrays are class targets).  The same case runs on both libraries.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
from agrad.autograd import gradcheck, gradgradcheck
from tests.helpers import non_contiguous, requires_torch, torch

_rng = np.random.default_rng(7)
LOGITS = _rng.standard_normal((4, 5))
LOGITS_1D = _rng.standard_normal(5)
TARGET = np.array([1, 0, 4, 2])
TARGET_IGNORED = np.array([1, -100, 4, 3])
TARGET_CUSTOM_IGNORE = np.array([1, 2, 4, 2])  # class 2 ignored via ignore_index=2
PROBS = np.exp(_rng.standard_normal((4, 5)))
PROBS /= PROBS.sum(axis=1, keepdims=True)
CLASS_WEIGHT = _rng.uniform(0.5, 2.0, 5)
X = _rng.standard_normal((3, 4))
Y = _rng.standard_normal((3, 4))
W = _rng.standard_normal((2, 4))
B = _rng.standard_normal(2)
V = _rng.standard_normal(4)
LOGITS_KD = _rng.standard_normal((2, 5, 3, 4))  # (N, C, d1, d2)
TARGET_KD = _rng.integers(0, 5, (2, 3, 4))
TARGET_KD[0, 1, 2] = TARGET_KD[1, 0, 0] = -100
LOGITS_3D = _rng.standard_normal((2, 5, 3))  # (N, C, d1)
TARGET_3D = _rng.integers(0, 5, (2, 3))
PROBS_KD = np.exp(_rng.standard_normal((2, 5, 3, 4)))
PROBS_KD /= PROBS_KD.sum(axis=1, keepdims=True)
P_IN = _rng.uniform(0.05, 0.95, (3, 4))  # probabilities for binary_cross_entropy
P_TARGET = _rng.uniform(0.0, 1.0, (3, 4))
P_HARD = _rng.integers(0, 2, (3, 4)).astype(np.float64)
P_EDGE = np.array([0.0, 1.0, 0.3, 1.0])  # log(0) clamped at -100
T_EDGE = np.array([0.0, 1.0, 0.5, 0.0])
BIN_WEIGHT = _rng.uniform(0.5, 2.0, (3, 4))
POS_WEIGHT = _rng.uniform(0.5, 3.0, 4)
EL_WEIGHT = _rng.uniform(0.5, 2.0, (3, 4))  # elementwise weights of mse/l1/huber: differentiable
BIG_LOGITS = np.array([[-800.0, -30.0, 0.5, 40.0], [700.0, 1e-3, -2.0, 3.0]])  # stability
KL_LOGP = np.log(PROBS)
KL_TARGET = np.exp(_rng.standard_normal((4, 5)))
KL_TARGET /= KL_TARGET.sum(axis=1, keepdims=True)
KL_TARGET_ZERO = KL_TARGET.copy()
KL_TARGET_ZERO[1, 2] = 0.0  # xlogy: 0 * log 0 = 0
LN_X = _rng.standard_normal((2, 3, 4)) * 3 + 1
LN_W = _rng.standard_normal((3, 4))
LN_B = _rng.standard_normal((3, 4))
LN_W1 = _rng.standard_normal(4)
LN_B1 = _rng.standard_normal(4)
EMB_WEIGHT = _rng.standard_normal((6, 3))
EMB_IDX = np.array([[1, 4, 1], [0, 5, 1]])  # repeats accumulate
EMB_IDX_PAD = np.array([[2, 4, 2], [0, 2, 1]])


# Class weights are constants: PyTorch's nll_loss is not differentiable w.r.t. them
# (nor the binary cross entropies w.r.t. weight and pos_weight).
# A zero KL target is only a constant: PyTorch's gradient w.r.t. it is not finite there.
CONSTANTS = (CLASS_WEIGHT, BIN_WEIGHT, POS_WEIGHT, KL_TARGET_ZERO)


class Case:
    """A call ``fn(F, *inputs)`` of a ``functional`` module on tensors made from ``inputs``."""

    def __init__(self, fn: Callable[..., Any], *inputs: np.ndarray) -> None:
        self.fn = fn
        self.inputs = inputs


CASES: dict[str, Case] = {}
for _red in ("none", "sum", "mean"):
    CASES[f"cross_entropy-{_red}"] = Case(lambda F, x, t, r=_red: F.cross_entropy(x, t, reduction=r), LOGITS, TARGET)
    CASES[f"cross_entropy-ignore_index-{_red}"] = Case(
        lambda F, x, t, r=_red: F.cross_entropy(x, t, reduction=r), LOGITS, TARGET_IGNORED)
    CASES[f"cross_entropy-weight-{_red}"] = Case(
        lambda F, x, t, w, r=_red: F.cross_entropy(x, t, weight=w, reduction=r), LOGITS, TARGET, CLASS_WEIGHT)
    CASES[f"cross_entropy-label_smoothing-{_red}"] = Case(
        lambda F, x, t, r=_red: F.cross_entropy(x, t, reduction=r, label_smoothing=0.2), LOGITS, TARGET_IGNORED)
    CASES[f"cross_entropy-probs-{_red}"] = Case(
        lambda F, x, p, r=_red: F.cross_entropy(x, p, reduction=r), LOGITS, PROBS)
    CASES[f"nll_loss-{_red}"] = Case(lambda F, x, t, r=_red: F.nll_loss(x, t, reduction=r), LOGITS, TARGET)
    CASES[f"nll_loss-weight-ignore_index-{_red}"] = Case(
        lambda F, x, t, w, r=_red: F.nll_loss(x, t, weight=w, ignore_index=2, reduction=r),
        LOGITS, TARGET_CUSTOM_IGNORE, CLASS_WEIGHT)
    CASES[f"mse_loss-{_red}"] = Case(lambda F, x, y, r=_red: F.mse_loss(x, y, reduction=r), X, Y)
    CASES[f"nll_loss-kd-{_red}"] = Case(lambda F, x, t, r=_red: F.nll_loss(x, t, reduction=r), LOGITS_KD, TARGET_KD)
    CASES[f"nll_loss-3d-weight-{_red}"] = Case(
        lambda F, x, t, w, r=_red: F.nll_loss(x, t, weight=w, reduction=r), LOGITS_3D, TARGET_3D, CLASS_WEIGHT)
    CASES[f"cross_entropy-kd-{_red}"] = Case(
        lambda F, x, t, w, r=_red: F.cross_entropy(x, t, weight=w, reduction=r, label_smoothing=0.1),
        LOGITS_KD, TARGET_KD, CLASS_WEIGHT)
    CASES[f"cross_entropy-kd-probs-{_red}"] = Case(
        lambda F, x, p, w, r=_red: F.cross_entropy(x, p, weight=w, reduction=r), LOGITS_KD, PROBS_KD, CLASS_WEIGHT)
    CASES[f"l1_loss-{_red}"] = Case(lambda F, x, y, r=_red: F.l1_loss(x, y, reduction=r), X, Y)
    CASES[f"smooth_l1_loss-{_red}"] = Case(lambda F, x, y, r=_red: F.smooth_l1_loss(x, y, reduction=r), X, Y)
    CASES[f"smooth_l1_loss-beta-{_red}"] = Case(
        lambda F, x, y, r=_red: F.smooth_l1_loss(x, y, reduction=r, beta=0.7), X, Y)
    CASES[f"mse_loss-weight-{_red}"] = Case(
        lambda F, x, y, w, r=_red: F.mse_loss(x, y, reduction=r, weight=w), X, Y, EL_WEIGHT)
    CASES[f"l1_loss-weight-{_red}"] = Case(
        lambda F, x, y, w, r=_red: F.l1_loss(x, y, reduction=r, weight=w), X, Y, EL_WEIGHT)
    CASES[f"huber_loss-weight-{_red}"] = Case(
        lambda F, x, y, w, r=_red: F.huber_loss(x, y, reduction=r, delta=0.8, weight=w), X, Y, EL_WEIGHT)
    CASES[f"huber_loss-{_red}"] = Case(lambda F, x, y, r=_red: F.huber_loss(x, y, reduction=r), X, Y)
    CASES[f"huber_loss-delta-{_red}"] = Case(lambda F, x, y, r=_red: F.huber_loss(x, y, reduction=r, delta=0.6), X, Y)
    CASES[f"binary_cross_entropy-{_red}"] = Case(
        lambda F, x, t, r=_red: F.binary_cross_entropy(x, t, reduction=r), P_IN, P_TARGET)
    CASES[f"binary_cross_entropy-weight-{_red}"] = Case(
        lambda F, x, t, w, r=_red: F.binary_cross_entropy(x, t, weight=w, reduction=r), P_IN, P_HARD, BIN_WEIGHT)
    CASES[f"bce_with_logits-{_red}"] = Case(
        lambda F, x, t, r=_red: F.binary_cross_entropy_with_logits(x, t, reduction=r), X, P_TARGET)
    CASES[f"bce_with_logits-weights-{_red}"] = Case(
        lambda F, x, t, w, pw, r=_red: F.binary_cross_entropy_with_logits(x, t, w, reduction=r, pos_weight=pw),
        X, P_HARD, BIN_WEIGHT, POS_WEIGHT)
    CASES[f"kl_div-{_red}"] = Case(lambda F, x, t, r=_red: F.kl_div(x, t, reduction=r), KL_LOGP, KL_TARGET) \
        if _red != "mean" else Case(lambda F, x, t: F.kl_div(x, t, reduction="batchmean"), KL_LOGP, KL_TARGET)
    CASES[f"kl_div-log_target-{_red}"] = Case(
        lambda F, x, t, r=_red: F.kl_div(x, t, reduction=r if r != "mean" else "batchmean", log_target=True),
        KL_LOGP, np.log(PROBS[::-1].copy()))
CASES.update({
    "cross_entropy-custom_ignore_index": Case(lambda F, x, t: F.cross_entropy(x, t, ignore_index=2),
                                              LOGITS, TARGET_CUSTOM_IGNORE),
    "cross_entropy-weight-ignore_index": Case(lambda F, x, t, w: F.cross_entropy(x, t, weight=w),
                                              LOGITS, TARGET_IGNORED, CLASS_WEIGHT),
    "cross_entropy-weight-label_smoothing": Case(
        lambda F, x, t, w: F.cross_entropy(x, t, weight=w, label_smoothing=0.1), LOGITS, TARGET, CLASS_WEIGHT),
    "cross_entropy-probs-label_smoothing": Case(lambda F, x, p: F.cross_entropy(x, p, label_smoothing=0.3),
                                                LOGITS, PROBS),
    "cross_entropy-probs-weight": Case(lambda F, x, p, w: F.cross_entropy(x, p, weight=w), LOGITS, PROBS, CLASS_WEIGHT),
    "cross_entropy-unbatched": Case(lambda F, x, t: F.cross_entropy(x, t), LOGITS_1D, np.array(3)),
    "nll_loss-unbatched": Case(lambda F, x, t: F.nll_loss(x, t), LOGITS_1D, np.array(3)),
    "linear-2d-bias": Case(lambda F, x, w, b: F.linear(x, w, b), X, W, B),
    "linear-2d-no_bias": Case(lambda F, x, w: F.linear(x, w), X, W),
    "linear-1d-bias": Case(lambda F, x, w, b: F.linear(x, w, b), V, W, B),
    "linear-1d-no_bias": Case(lambda F, x, w: F.linear(x, w), V, W),
    "softmax-dim1": Case(lambda F, x: F.softmax(x, dim=1), X),
    "softmax-dim0": Case(lambda F, x: F.softmax(x, dim=0), X),
    "softmax-1d": Case(lambda F, x: F.softmax(x, dim=-1), V),
    "log_softmax-dim1": Case(lambda F, x: F.log_softmax(x, dim=1), X),
    "log_softmax-dim0": Case(lambda F, x: F.log_softmax(x, dim=0), X),
    "log_softmax-1d": Case(lambda F, x: F.log_softmax(x, dim=-1), V),
    "relu": Case(lambda F, x: F.relu(x), X),
    "kl_div-zero_target": Case(lambda F, x, t: F.kl_div(x, t, reduction="sum"), KL_LOGP, KL_TARGET_ZERO),
    "bce_with_logits-large_logits": Case(
        lambda F, x, t, pw: F.binary_cross_entropy_with_logits(x, t, pos_weight=pw, reduction="none"),
        BIG_LOGITS, P_HARD[:2], POS_WEIGHT),
    "layer_norm-last_dim": Case(lambda F, x: F.layer_norm(x, (4,)), LN_X),
    "layer_norm-affine-last_dim": Case(lambda F, x, w, b: F.layer_norm(x, (4,), w, b), LN_X, LN_W1, LN_B1),
    "layer_norm-affine-two_dims": Case(lambda F, x, w, b: F.layer_norm(x, (3, 4), w, b, eps=1e-3), LN_X, LN_W, LN_B),
    "layer_norm-weight_only": Case(lambda F, x, w: F.layer_norm(x, [3, 4], weight=w), LN_X, LN_W),
    "layer_norm-1d": Case(lambda F, x, w, b: F.layer_norm(x, (4,), w, b), V, LN_W1, LN_B1),
    "embedding": Case(lambda F, i, w: F.embedding(i, w), EMB_IDX, EMB_WEIGHT),
    "embedding-padding_idx": Case(lambda F, i, w: F.embedding(i, w, padding_idx=2), EMB_IDX_PAD, EMB_WEIGHT),
    "embedding-negative_padding_idx": Case(lambda F, i, w: F.embedding(i, w, padding_idx=-4),
                                           EMB_IDX_PAD, EMB_WEIGHT),
    "embedding-1d": Case(lambda F, i, w: F.embedding(i, w), EMB_IDX[0], EMB_WEIGHT),
})
PARAMS = [pytest.param(case, id=name) for name, case in CASES.items()]
# The padding row feeds the output but gets no gradient (by design, as in PyTorch),
# so finite differences disagree with it.
NO_GRADCHECK = {"embedding-padding_idx", "embedding-negative_padding_idx"}
GRADCHECK_PARAMS = [pytest.param(case, id=name) for name, case in CASES.items() if name not in NO_GRADCHECK]


def _differentiated(a: np.ndarray) -> bool:
    # Class-probability targets are differentiated too, as PyTorch does.
    return a.dtype.kind == "f" and not any(a is c for c in CONSTANTS)


def _agrad_inputs(case: Case, dtype: Any) -> list[agrad.Tensor]:
    return [agrad.tensor(a, dtype=dtype if a.dtype.kind == "f" else None, requires_grad=_differentiated(a))
            for a in case.inputs]


def _torch_inputs(case: Case) -> list[Any]:
    return [torch.tensor(a, dtype=torch.float64 if a.dtype.kind == "f" else None, requires_grad=_differentiated(a))
            for a in case.inputs]


@requires_torch
@pytest.mark.parametrize("case", PARAMS)
def test_matches_torch(case: Case) -> None:
    """Values and gradients w.r.t. every float input equal PyTorch's (float64)."""
    _check_against_torch(case, _agrad_inputs(case, agrad.float64))


# The cases with a float input that non-contiguous memory changes.
STRIDED_PARAMS = [pytest.param(case, id=name) for name, case in CASES.items()
                  if any(a.dtype.kind == "f" and not non_contiguous(a).flags.c_contiguous for a in case.inputs)]


@requires_torch
@pytest.mark.parametrize("case", STRIDED_PARAMS)
def test_matches_torch_on_non_contiguous_inputs(case: Case) -> None:
    """The same, every float input a tensor over non-contiguous memory."""
    ours = [agrad.from_numpy(non_contiguous(a.astype(np.float64))).requires_grad_(_differentiated(a))
            if a.dtype.kind == "f" else t for a, t in zip(case.inputs, _agrad_inputs(case, agrad.float64))]
    _check_against_torch(case, ours)


def _check_against_torch(case: Case, ours: list[agrad.Tensor]) -> None:
    theirs = _torch_inputs(case)
    out = case.fn(agrad.nn.functional, *ours)
    expected = case.fn(torch.nn.functional, *theirs)
    assert out.shape == tuple(expected.shape)
    assert out.dtype is agrad.float64
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-10, atol=1e-12)

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
    ours = _agrad_inputs(case, agrad.float32)
    theirs = [t.float() if t.is_floating_point() else t for t in _torch_inputs(case)]
    out = case.fn(agrad.nn.functional, *ours)
    expected = case.fn(torch.nn.functional, *theirs)
    assert out.dtype is agrad.float32
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", GRADCHECK_PARAMS)
def test_gradcheck(case: Case) -> None:
    """The composites' gradients (from their primitives) match finite differences."""
    assert gradcheck(lambda *ts: case.fn(agrad.nn.functional, *ts), _agrad_inputs(case, agrad.float64))


@pytest.mark.parametrize("name", [
    "nll_loss-kd-mean", "cross_entropy-kd-sum", "smooth_l1_loss-beta-mean", "huber_loss-delta-sum",
    "binary_cross_entropy-mean", "bce_with_logits-weights-mean", "kl_div-sum", "layer_norm-affine-two_dims",
    "embedding",
])
def test_gradgradcheck(name: str) -> None:
    """Second derivatives of the new composites (``create_graph=True``) match finite differences."""
    case = CASES[name]
    assert gradgradcheck(lambda *ts: case.fn(agrad.nn.functional, *ts), _agrad_inputs(case, agrad.float64))


def test_relu_inplace_returns_input() -> None:
    x = agrad.tensor([-1.0, 0.0, 2.0])
    assert agrad.nn.functional.relu(x, inplace=True) is x
    assert x.tolist() == [0.0, 0.0, 2.0]


@pytest.mark.parametrize(("target", "message"), [
    (np.array([1, 0, 5, 2]), "Target 5 is out of bounds."),
    (np.array([1, 0, -3, 2]), "Target -3 is out of bounds."),
])
def test_cross_entropy_rejects_out_of_range_targets(target: np.ndarray, message: str) -> None:
    with pytest.raises(IndexError, match=message):
        agrad.nn.functional.cross_entropy(agrad.tensor(LOGITS), agrad.tensor(target))


def test_invalid_reduction() -> None:
    with pytest.raises(ValueError, match="bogus is not a valid value for reduction"):
        agrad.nn.functional.mse_loss(agrad.tensor(X), agrad.tensor(Y), reduction="bogus")


NEW_LOSSES = [
    lambda F, x, y, r: F.l1_loss(x, y, reduction=r),
    lambda F, x, y, r: F.smooth_l1_loss(x, y, reduction=r),
    lambda F, x, y, r: F.huber_loss(x, y, reduction=r),
    lambda F, x, y, r: F.binary_cross_entropy(x.sigmoid(), y.sigmoid(), reduction=r),
    lambda F, x, y, r: F.binary_cross_entropy_with_logits(x, y.sigmoid(), reduction=r),
    lambda F, x, y, r: F.kl_div(x, y, reduction=r),
]


@pytest.mark.parametrize("loss", NEW_LOSSES)
def test_new_losses_reject_invalid_reduction(loss: Callable[..., Any]) -> None:
    with pytest.raises(ValueError, match="bogus is not a valid value for reduction"):
        loss(agrad.nn.functional, agrad.tensor(X), agrad.tensor(Y), "bogus")


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"])
def test_pointwise_losses_warn_when_broadcasting(name: str) -> None:
    loss = getattr(agrad.nn.functional, name)
    with pytest.warns(UserWarning, match="different to the input size"):
        out = loss(agrad.tensor(X), agrad.tensor(Y[:1]))
    np.testing.assert_allclose(out.item(), loss(agrad.tensor(X), agrad.tensor(np.broadcast_to(Y[:1], X.shape))).item())


@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "huber_loss"])
def test_pointwise_loss_weight_must_match_input(name: str) -> None:
    with pytest.raises(ValueError, match="Weights and input must have the same size."):
        getattr(agrad.nn.functional, name)(agrad.tensor(X), agrad.tensor(Y), weight=agrad.tensor(V))


def test_kl_div_mean_warns_like_torch() -> None:
    with pytest.warns(UserWarning, match="reduction: 'mean' divides the total loss"):
        out = agrad.nn.functional.kl_div(agrad.tensor(KL_LOGP), agrad.tensor(KL_TARGET))
    np.testing.assert_allclose(out.item(), (KL_TARGET * (np.log(KL_TARGET) - KL_LOGP)).mean(), rtol=1e-6)


@pytest.mark.parametrize(("call", "name"), [
    (lambda F, w: F.nll_loss(agrad.tensor(LOGITS), agrad.tensor(TARGET), weight=w), "nll_loss_forward"),
    (lambda F, w: F.cross_entropy(agrad.tensor(LOGITS), agrad.tensor(TARGET), weight=w), "nll_loss_forward"),
    (lambda F, w: F.binary_cross_entropy(agrad.tensor(P_IN), agrad.tensor(P_TARGET), weight=w[:4]),
     "binary_cross_entropy"),
    (lambda F, w: F.binary_cross_entropy_with_logits(agrad.tensor(X), agrad.tensor(P_TARGET), weight=w[:4]),
     "binary_cross_entropy_with_logits"),
    (lambda F, w: F.binary_cross_entropy_with_logits(agrad.tensor(X), agrad.tensor(P_TARGET), pos_weight=w[:4]),
     "binary_cross_entropy_with_logits"),
])
def test_weight_requiring_grad_is_rejected(call: Callable[..., Any], name: str) -> None:
    """Like PyTorch, these losses are not differentiable w.r.t. their weights and say so."""
    w = agrad.tensor(CLASS_WEIGHT, requires_grad=True)
    with pytest.raises(RuntimeError, match=f"'{name}' is not differentiable with respect to argument"):
        call(agrad.nn.functional, w)


def test_nll_loss_kd_rejects_mismatched_target() -> None:
    with pytest.raises(RuntimeError, match=r"Expected target size \[2, 3, 4\], got \[2, 4, 3\]"):
        agrad.nn.functional.nll_loss(agrad.tensor(LOGITS_KD), agrad.tensor(TARGET_KD.transpose(0, 2, 1).copy()))


def test_binary_cross_entropy_checks_input() -> None:
    F = agrad.nn.functional
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        F.binary_cross_entropy(agrad.tensor([0.5, 1.5]), agrad.tensor([1.0, 0.0]))
    with pytest.raises(ValueError, match="different to the input size"):
        F.binary_cross_entropy(agrad.tensor([0.5, 0.5]), agrad.tensor([1.0]))
    with pytest.raises(ValueError, match="must be the same as input size"):
        F.binary_cross_entropy_with_logits(agrad.tensor([0.5, 0.5]), agrad.tensor([1.0]))


def test_binary_cross_entropy_clamps_log_at_minus_100() -> None:
    """Probabilities of exactly 0 and 1 give PyTorch's finite losses and finite gradients.

    Where the log is clamped the gradient of that term is 0 (the clamped function's
    derivative); PyTorch's kernel instead divides by ``max(x (1 - x), 1e-12)`` there.
    """
    x = agrad.tensor(P_EDGE, dtype=agrad.float64, requires_grad=True)
    out = agrad.nn.functional.binary_cross_entropy(x, agrad.tensor(T_EDGE, dtype=agrad.float64), reduction="none")
    np.testing.assert_allclose(out.detach().numpy(), [0.0, 0.0, -np.log(0.3) / 2 - np.log(0.7) / 2, 100.0])
    if torch is not None:
        expected = torch.nn.functional.binary_cross_entropy(torch.tensor(P_EDGE), torch.tensor(T_EDGE),
                                                            reduction="none")
        np.testing.assert_allclose(out.detach().numpy(), expected.numpy(), rtol=1e-12)
    out.sum().backward_sync()
    assert np.all(np.isfinite(x.grad.numpy()))
    np.testing.assert_allclose(x.grad.numpy()[2], (0.3 - 0.5) / (0.3 * 0.7))


def test_bce_with_logits_is_stable_for_huge_logits() -> None:
    x = agrad.tensor([-1000.0, 1000.0, -1000.0, 1000.0], dtype=agrad.float64, requires_grad=True)
    t = agrad.tensor([0.0, 1.0, 1.0, 0.0], dtype=agrad.float64)
    out = agrad.nn.functional.binary_cross_entropy_with_logits(x, t, reduction="none")
    np.testing.assert_allclose(out.detach().numpy(), [0.0, 0.0, 1000.0, 1000.0])
    out.sum().backward_sync()
    np.testing.assert_allclose(x.grad.numpy(), [0.0, 0.0, -1.0, 1.0])


# -- layers --------------------------------------------------------------------------


def test_layer_norm_rejects_mismatched_shape() -> None:
    with pytest.raises(RuntimeError, match=r"Given normalized_shape=\[4\], expected input with shape \[\*, 4\]"):
        agrad.nn.functional.layer_norm(agrad.tensor(np.zeros((3, 5))), (4,))


def test_layer_norm_normalises() -> None:
    out = agrad.nn.functional.layer_norm(agrad.tensor(LN_X), (3, 4), eps=0.0).numpy().reshape(2, -1)
    np.testing.assert_allclose(out.mean(axis=1), 0.0, atol=1e-12)
    np.testing.assert_allclose(out.var(axis=1), 1.0, rtol=1e-12)


def test_embedding_gradient_accumulates_and_skips_padding() -> None:
    w = agrad.tensor(EMB_WEIGHT, requires_grad=True)
    idx = agrad.tensor(np.array([[2, 4, 2], [0, 4, 1]]))
    agrad.nn.functional.embedding(idx, w, padding_idx=2).sum().backward_sync()
    np.testing.assert_array_equal(w.grad.numpy()[:, 0], [1.0, 1.0, 0.0, 0.0, 2.0, 0.0])


@pytest.mark.parametrize(("idx", "kwargs", "error", "message"), [
    (np.array([6]), {}, IndexError, "index out of range in self"),
    (np.array([-1]), {}, IndexError, "index out of range in self"),
    (np.array([1]), {"padding_idx": 6}, AssertionError, "Padding_idx must be within num_embeddings"),
    (np.array([1]), {"padding_idx": -7}, AssertionError, "Padding_idx must be within num_embeddings"),
    (np.array([1.0]), {}, RuntimeError, "Expected tensor for argument #1 'indices'"),
])
def test_embedding_errors(idx: np.ndarray, kwargs: dict[str, Any], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        agrad.nn.functional.embedding(agrad.tensor(idx), agrad.tensor(EMB_WEIGHT), **kwargs)


def test_dropout_seeded_generator_is_reproducible() -> None:
    x = agrad.ones(50, 40, dtype=agrad.float64)
    a = agrad.nn.functional.dropout(x, 0.3, generator=agrad.Generator().manual_seed(11))
    b = agrad.nn.functional.dropout(x, 0.3, generator=agrad.Generator().manual_seed(11))
    c = agrad.nn.functional.dropout(x, 0.3, generator=agrad.Generator().manual_seed(12))
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not np.array_equal(a.numpy(), c.numpy())
    agrad.manual_seed(5)
    d = agrad.nn.functional.dropout(x, 0.3)
    agrad.manual_seed(5)
    np.testing.assert_array_equal(d.numpy(), agrad.nn.functional.dropout(x, 0.3).numpy())


@pytest.mark.parametrize("p", [0.2, 0.5, 0.8])
def test_dropout_values_and_expectation(p: float) -> None:
    x = agrad.ones(200, 500, dtype=agrad.float64)
    out = agrad.nn.functional.dropout(x, p, generator=agrad.Generator().manual_seed(0)).numpy()
    kept = out != 0
    np.testing.assert_allclose(out[kept], 1 / (1 - p))
    assert abs(kept.mean() - (1 - p)) < 0.01
    assert abs(out.mean() - 1.0) < 0.05  # the expectation is preserved


@pytest.mark.parametrize("p", [0.0, 0.4, 1.0])
def test_dropout_gradient_is_the_scaled_mask(p: float) -> None:
    x = agrad.tensor(X, requires_grad=True)
    out = agrad.nn.functional.dropout(x, p, generator=agrad.Generator().manual_seed(3))
    g = np.random.default_rng(1).standard_normal(X.shape)
    out.backward_sync(agrad.tensor(g))
    mask = np.zeros_like(X) if p == 1 else (out.detach().numpy() != 0) / (1 - p)
    np.testing.assert_allclose(out.detach().numpy(), X * mask)
    np.testing.assert_allclose(x.grad.numpy(), g * mask)


def test_dropout_identity_and_edge_cases() -> None:
    F = agrad.nn.functional
    x = agrad.tensor(X, requires_grad=True)
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 0.0) is x
    zeros = F.dropout(x, 1.0)
    assert zeros.requires_grad and not zeros.detach().numpy().any()
    for p in (-0.1, 1.5):
        with pytest.raises(ValueError, match=f"dropout probability has to be between 0 and 1, but got {p}"):
            F.dropout(x, p)


def test_dropout_inplace_returns_input() -> None:
    x = agrad.ones(10, 10)
    out = agrad.nn.functional.dropout(x, 0.5, inplace=True, generator=agrad.Generator().manual_seed(2))
    assert out is x
    assert set(np.unique(x.numpy()).tolist()) <= {0.0, 2.0}


def test_relu_backward_selects_rather_than_multiplies() -> None:
    """As PyTorch's threshold_backward: a masked-out gradient is 0 even when inf or nan."""
    x = agrad.tensor([-1.0, 2.0, -3.0, 4.0], dtype=agrad.float64, requires_grad=True)
    y = agrad.relu(x)
    y.backward_sync(agrad.tensor([np.inf, 1.0, np.nan, np.inf], dtype=agrad.float64))
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 1.0, 0.0, np.inf])


def test_expand_of_a_0d_tensor_is_a_read_only_view() -> None:
    """The 0-d fast path of ``expand`` (every full reduction's gradient takes it)."""
    base = agrad.tensor(2.5, dtype=agrad.float64, requires_grad=True)
    out = base.expand(3, 2)
    assert out.shape == (3, 2) and out._base is base
    assert not out._data.flags.writeable and np.shares_memory(out._data, base._data)
    np.testing.assert_array_equal(out.detach().numpy(), np.full((3, 2), 2.5))
    (out * agrad.tensor(np.arange(6.0).reshape(3, 2))).sum().backward_sync()
    assert base.grad.item() == 15.0
    assert agrad.tensor(1.0).expand(0, 4).shape == (0, 4)


@requires_torch
@pytest.mark.parametrize("shapes", [((3, 4), (5, 4), (5,)), ((3, 4), (5, 4), None)], ids=["bias", "no_bias"])
def test_linear_records_pytorchs_nodes(shapes: tuple) -> None:
    # Note [Linear as one node]: a matrix input with a bias is one AddmmBackward0,
    # its inputs in PyTorch's order (bias, input, weight's transpose).
    def names(lib: Any) -> tuple[str, list[str]]:
        x_shape, w_shape, b_shape = shapes
        args = [lib.ones(*s, dtype=lib.float64, requires_grad=True) for s in (x_shape, w_shape)]
        if b_shape is not None:
            args.append(lib.ones(*b_shape, dtype=lib.float64, requires_grad=True))
        fn = lib.nn.functional.linear(*args).grad_fn
        return fn.name(), [f[0].name().split("::")[-1] for f in fn.next_functions if f[0] is not None]

    name, inputs = names(agrad)
    torch_name, torch_inputs = names(torch)
    assert name == torch_name
    assert len(inputs) == len(torch_inputs)
