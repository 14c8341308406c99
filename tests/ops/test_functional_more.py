"""The rest of ``agrad.nn.functional`` against ``torch.nn.functional``:
activations, normalisation, attention, distances, margin and likelihood
losses, ``bilinear``, ``one_hot`` and the dropout family.

Deterministic functions are checked case by case (the ``CASES`` table): a case
is a call ``fn(F, *tensors)`` of a ``functional`` module on tensors made from
its arrays (float arrays are differentiated unless listed in ``const``;
integer and bool arrays are targets and masks).  Each runs on both libraries:

* values, dtype and gradients equal PyTorch's in float64 and float32;
* float64 ``gradcheck`` and ``gradgradcheck`` pass (exceptions listed, with why).

Random functions (dropout, training rrelu, gumbel-softmax) are checked for
their distribution's support, their gradient (the mask that was drawn) and
reproducibility under ``agrad.manual_seed``.  Integer inputs and misuse are
compared with what PyTorch does for the same call: the same dtype and values,
or the same exception type and message.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
from agrad.autograd import grad_sync, gradcheck, gradgradcheck
from tests.helpers import non_contiguous, requires_torch, torch

_rng = np.random.default_rng(11)


def _away(*shape: int, low: float = -2.0, high: float = 2.0, kinks: tuple[float, ...] = (0.0,)) -> np.ndarray:
    """Uniform samples at least 0.05 from each kink (finite differences straddle no corner)."""
    x = _rng.uniform(low, high, size=shape)
    for k in kinks:
        near = np.abs(x - k) < 0.05
        x = np.where(near, k + 0.1 * np.sign(x - k + 1e-12), x)
    return x


def _signs(*shape: int) -> np.ndarray:
    return np.where(_rng.random(shape) < 0.5, 1.0, -1.0)


X = _away(3, 4)
X_SHRINK = _away(3, 4, kinks=(0.0, 0.5, -0.5, 1.2, -1.2, 0.3))
X_WIDE = _away(3, 5, low=-4.5, high=4.5, kinks=(0.0, 3.0, -3.0))
X3 = _rng.standard_normal((2, 3, 4))
X4 = _rng.standard_normal((2, 3, 2, 2))
X_EXTREME = np.array([-40.0, -21.0, -0.3, 0.0, 0.7, 19.0, 45.0])
W3 = _rng.uniform(0.1, 0.5, 3)
B3 = _rng.standard_normal(3)
RUN_MEAN = _rng.standard_normal(3) * 0.1
RUN_VAR = _rng.uniform(0.5, 1.5, 3)
BN_X = _rng.standard_normal((4, 3, 5)) * 2 + 1
GN_X = _rng.standard_normal((2, 6, 4))
GN_W = _rng.standard_normal(6)
GN_B = _rng.standard_normal(6)
RMS_W = _rng.standard_normal((3, 4))
A = _rng.standard_normal((4, 5))
B = _rng.standard_normal((4, 5))
C = A + _rng.standard_normal((4, 5))
T_PM1 = np.array([1.0, -1.0, 1.0, -1.0])
T_PM1_2D = _signs(4, 5)
T_CLASS = np.array([1, 0, 4, 2])
T_MULTILABEL = np.array([[3, 0, -1, 1, 2], [1, 2, 3, -1, 0], [-1, 0, 0, 0, 0], [0, 1, 2, 3, 4]])
W5 = _rng.uniform(0.5, 2.0, 5)
RATES = np.abs(_rng.standard_normal((4, 5))) + 0.2
COUNTS = _rng.integers(0, 6, (4, 5)).astype(np.float64) + 0.5
VAR = _rng.uniform(0.2, 2.0, (4, 5))
P_TARGET = _rng.uniform(0.0, 1.0, (4, 5))
Q = _rng.standard_normal((2, 2, 3, 4))
K = _rng.standard_normal((2, 2, 5, 4))
V = _rng.standard_normal((2, 2, 5, 3))
SDPA_MASK = _rng.random((3, 5)) < 0.6
SDPA_MASK[:, 0] = True
SDPA_DEAD_ROW = SDPA_MASK.copy()
SDPA_DEAD_ROW[1] = False  # a query with no key to attend to: 0, with 0 gradient
SDPA_BIAS = _rng.standard_normal((2, 1, 3, 5))
E, HEADS, TGT, SRC, BATCH = 4, 2, 3, 2, 2
MHA_Q = _rng.standard_normal((TGT, BATCH, E))
MHA_K = _rng.standard_normal((SRC, BATCH, E))
MHA_V = _rng.standard_normal((SRC, BATCH, E))
MHA_W = _rng.standard_normal((3 * E, E)) * 0.5
MHA_B = _rng.standard_normal(3 * E) * 0.1
MHA_OW = _rng.standard_normal((E, E)) * 0.5
MHA_OB = _rng.standard_normal(E) * 0.1
MHA_BIAS_K = _rng.standard_normal((1, 1, E))
MHA_BIAS_V = _rng.standard_normal((1, 1, E))
MHA_KPM = np.array([[False, True], [False, False]])
MHA_AM = np.array([[False, False], [False, True], [False, False]])  # with MHA_KPM, no query loses every key
MHA_K3 = _rng.standard_normal((SRC, BATCH, 3))
MHA_V5 = _rng.standard_normal((SRC, BATCH, 5))
MHA_KW = _rng.standard_normal((E, 3)) * 0.5
MHA_VW = _rng.standard_normal((E, 5)) * 0.5
BIL_X1 = _rng.standard_normal((3, 4))
BIL_X2 = _rng.standard_normal((3, 2))
BIL_W = _rng.standard_normal((5, 4, 2))
BIL_B = _rng.standard_normal(5)
PD_X = _rng.standard_normal((4, 3))
EB_W = _rng.standard_normal((6, 3))
EB_IDX = np.array([1, 2, 4, 5, 4, 3, 2, 0])
EB_OFF = np.array([0, 3, 3, 6])  # the second bag is empty
EB_PSW = _rng.uniform(0.5, 1.5, 8)
CTC_LOGITS = _rng.standard_normal((6, 3, 5))  # (T, N, C), through log_softmax: see Note [CTC in log space]
CTC_TARGETS = np.array([[1, 2, 2], [3, 1, 0], [4, 4, 1]])
CTC_FLAT = np.array([1, 2, 2, 3, 1, 4, 4, 1])
CTC_IN = np.array([6, 5, 6])
CTC_TGT = np.array([3, 2, 3])
CTC_SHORT = np.array([3, 5, 4])  # samples 0 and 2 have too few steps for their targets


class Case:
    """A call ``fn(F, *inputs)``; the float inputs at ``const`` are not differentiated.
    ``grad_rtol`` loosens the float64 gradient comparison where PyTorch's kernel is
    less precise than float64 (and says why)."""

    def __init__(self, fn: Callable[..., Any], *inputs: np.ndarray, const: tuple[int, ...] = (),
                 grad_rtol: float = 1e-10) -> None:
        self.fn = fn
        self.inputs = inputs
        self.const = const
        self.grad_rtol = grad_rtol


CASES: dict[str, Case] = {
    # -- activations
    "glu": Case(lambda F, x: F.glu(x), X),
    "glu-dim0": Case(lambda F, x: F.glu(x, 0), X.T.copy()),
    "glu-3d": Case(lambda F, x: F.glu(x, dim=-3), _rng.standard_normal((4, 3, 2))),
    "mish": Case(lambda F, x: F.mish(x), X),
    "mish-extreme": Case(lambda F, x: F.mish(x), X_EXTREME),
    "hardswish": Case(lambda F, x: F.hardswish(x), X_WIDE),
    # PyTorch's hardsigmoid_backward multiplies by 1/6 rounded to float32, in double too.
    "hardsigmoid": Case(lambda F, x: F.hardsigmoid(x), X_WIDE, grad_rtol=1e-7),
    "softsign": Case(lambda F, x: F.softsign(x), X),
    "softsign-0d": Case(lambda F, x: F.softsign(x), np.array(0.7)),
    "logsigmoid": Case(lambda F, x: F.logsigmoid(x), X),
    "logsigmoid-extreme": Case(lambda F, x: F.logsigmoid(x), X_EXTREME),
    "tanhshrink": Case(lambda F, x: F.tanhshrink(x), X),
    "softshrink": Case(lambda F, x: F.softshrink(x), X_SHRINK),
    "softshrink-lambd": Case(lambda F, x: F.softshrink(x, 1.2), X_SHRINK),
    "hardshrink": Case(lambda F, x: F.hardshrink(x), X_SHRINK),
    "hardshrink-lambd": Case(lambda F, x: F.hardshrink(x, lambd=1.2), X_SHRINK),
    "threshold": Case(lambda F, x: F.threshold(x, 0.3, -2.0), X_SHRINK),
    "celu": Case(lambda F, x: F.celu(x), X),
    "celu-alpha": Case(lambda F, x: F.celu(x, alpha=0.5), X),
    # (alpha a power of 2: PyTorch's CeluBackward0 rounds 1 / alpha to float32, in double too)
    "celu-extreme": Case(lambda F, x: F.celu(x, 0.25), X_EXTREME),
    "selu": Case(lambda F, x: F.selu(x), X),
    "prelu-shared": Case(lambda F, x, w: F.prelu(x, w), X3, np.array([0.25])),
    "prelu-channels": Case(lambda F, x, w: F.prelu(x, w), X3, W3),
    "prelu-2d": Case(lambda F, x, w: F.prelu(x, w), X3[0].T.copy(), W3),
    "prelu-1d": Case(lambda F, x, w: F.prelu(x, w), X[0], np.array([0.3])),
    "prelu-0d": Case(lambda F, x, w: F.prelu(x, w), np.array(-0.8), np.array([0.3])),
    "rrelu-eval": Case(lambda F, x: F.rrelu(x), X),
    "rrelu-eval-bounds": Case(lambda F, x: F.rrelu(x, 0.1, 0.6, training=False), X),
    "softmin": Case(lambda F, x: F.softmin(x, dim=1), X),
    "softmin-dim0": Case(lambda F, x: F.softmin(x, 0), X3),
    "gelu-tanh": Case(lambda F, x: F.gelu(x, approximate="tanh"), X),
    "empty-mish": Case(lambda F, x: F.mish(x), np.zeros((0, 3))),
    "empty-hardswish": Case(lambda F, x: F.hardswish(x), np.zeros((2, 0))),
    # -- normalisation
    "batch_norm-train": Case(lambda F, x, w, b, m, v: F.batch_norm(x, m, v, w, b, training=True, momentum=0.2),
                             BN_X, W3, B3, RUN_MEAN, RUN_VAR, const=(3, 4)),
    "batch_norm-train-no_stats": Case(lambda F, x: F.batch_norm(x, None, None, training=True), BN_X[:, :, 0].copy()),
    "batch_norm-train-4d": Case(lambda F, x, w: F.batch_norm(x, None, None, w, training=True, eps=1e-3), X4, W3),
    "batch_norm-eval": Case(lambda F, x, w, b, m, v: F.batch_norm(x, m, v, w, b), BN_X, W3, B3, RUN_MEAN, RUN_VAR,
                            const=(3, 4)),
    "batch_norm-eval-bias_only": Case(lambda F, x, b, m, v: F.batch_norm(x, m, v, bias=b), X4, B3, RUN_MEAN, RUN_VAR,
                                      const=(2, 3)),
    "instance_norm": Case(lambda F, x: F.instance_norm(x), X3),
    "instance_norm-affine-stats": Case(lambda F, x, w, b, m, v: F.instance_norm(x, m, v, w, b, momentum=0.3),
                                       BN_X, W3, B3, RUN_MEAN, RUN_VAR, const=(3, 4)),
    "instance_norm-eval": Case(lambda F, x, w, m, v: F.instance_norm(x, m, v, w, use_input_stats=False),
                               X4, W3, RUN_MEAN, RUN_VAR, const=(2, 3)),
    "group_norm": Case(lambda F, x, w, b: F.group_norm(x, 3, w, b), GN_X, GN_W, GN_B),
    "group_norm-2d": Case(lambda F, x: F.group_norm(x, 2), GN_X[:, :, 0].copy()),
    "group_norm-one_group-4d": Case(lambda F, x, w: F.group_norm(x, 1, w, eps=1e-3), X4, W3),
    "rms_norm": Case(lambda F, x, w: F.rms_norm(x, (3, 4), w), X3, RMS_W),
    "rms_norm-default_eps": Case(lambda F, x: F.rms_norm(x, [4]), X3),
    "rms_norm-eps": Case(lambda F, x, w: F.rms_norm(x, (4,), w, eps=0.5), X3, RMS_W[0]),
    "layer_norm-bias_only": Case(lambda F, x, b: F.layer_norm(x, (4,), None, b), X3, RMS_W[0]),
    "local_response_norm": Case(lambda F, x: F.local_response_norm(x, 3, alpha=0.5), GN_X),
    "local_response_norm-4d": Case(lambda F, x: F.local_response_norm(x, 4, alpha=0.3, beta=0.5, k=2.0),
                                   _rng.standard_normal((2, 5, 2, 3))),
    "local_response_norm-5d-wide": Case(lambda F, x: F.local_response_norm(x, 7, alpha=0.2),
                                        _rng.standard_normal((1, 3, 2, 2, 2))),
    "normalize": Case(lambda F, x: F.normalize(x), X),
    "normalize-p1-dim0": Case(lambda F, x: F.normalize(x, p=1, dim=0), X),
    "normalize-p3": Case(lambda F, x: F.normalize(x, 3.0, -1), X3),
    "normalize-inf": Case(lambda F, x: F.normalize(x, float("inf")), X),
    "normalize-dims": Case(lambda F, x: F.normalize(x, dim=(1, 2)), X3),
    "normalize-1d": Case(lambda F, x: F.normalize(x, dim=0, eps=0.5), X[0]),
    # -- distances
    "cosine_similarity": Case(lambda F, a, b: F.cosine_similarity(a, b), A, B),
    "cosine_similarity-broadcast": Case(lambda F, a, b: F.cosine_similarity(a, b, dim=-1), A, B[0]),
    "cosine_similarity-dim0-3d": Case(lambda F, a, b: F.cosine_similarity(a, b, 0, 1e-6), X3, X3[::-1].copy()),
    "cosine_similarity-1d": Case(lambda F, a, b: F.cosine_similarity(a, b, dim=0), A[0], B[0]),
    "cosine_similarity-tiny_norm": Case(lambda F, a, b: F.cosine_similarity(a, b, eps=1e-2),
                                        np.array([[1e-3, 2e-3], [3.0, 4.0]]), np.array([[1.0, 1.0], [1.0, 2.0]])),
    "pairwise_distance": Case(lambda F, a, b: F.pairwise_distance(a, b), A, B),
    "pairwise_distance-p1-keepdim": Case(lambda F, a, b: F.pairwise_distance(a, b, 1, keepdim=True), A, B),
    "pairwise_distance-p3": Case(lambda F, a, b: F.pairwise_distance(a, b, p=3.0), A, B),
    "pairwise_distance-p_half": Case(lambda F, a, b: F.pairwise_distance(a, b, p=0.5), A, B),
    "pairwise_distance-inf": Case(lambda F, a, b: F.pairwise_distance(a, b, p=float("inf")), A, B),
    "pairwise_distance-broadcast-3d": Case(lambda F, a, b: F.pairwise_distance(a, b, eps=1e-3), X3, X3[0]),
    "pairwise_distance-1d": Case(lambda F, a, b: F.pairwise_distance(a, b), A[0], B[0]),
    "pdist": Case(lambda F, x: F.pdist(x), PD_X),
    "pdist-p1": Case(lambda F, x: F.pdist(x, 1), PD_X),
    "pdist-p3": Case(lambda F, x: F.pdist(x, 3), PD_X),
    "pdist-p_half": Case(lambda F, x: F.pdist(x, 0.5), PD_X),
    "pdist-inf": Case(lambda F, x: F.pdist(x, float("inf")), PD_X),
    "pdist-repeated_rows": Case(lambda F, x: F.pdist(x, 2), np.array([[1.0, 2.0], [1.0, 2.0], [0.0, 1.5]])),
    # -- attention
    "sdpa": Case(lambda F, q, k, v: F.scaled_dot_product_attention(q, k, v), Q, K, V),
    "sdpa-causal": Case(lambda F, q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), Q, K, V),
    "sdpa-bool_mask": Case(lambda F, q, k, v, m: F.scaled_dot_product_attention(q, k, v, m), Q, K, V, SDPA_MASK),
    "sdpa-dead_row": Case(lambda F, q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                          Q, K, V, SDPA_DEAD_ROW),
    "sdpa-float_mask": Case(lambda F, q, k, v, m: F.scaled_dot_product_attention(q, k, v, m), Q, K, V, SDPA_BIAS),
    "sdpa-scale": Case(lambda F, q, k, v: F.scaled_dot_product_attention(q, k, v, scale=0.3), Q, K, V),
    "sdpa-negative_scale": Case(lambda F, q, k, v: F.scaled_dot_product_attention(q, k, v, scale=-0.5), Q, K, V),
    "sdpa-gqa": Case(lambda F, q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
                     _rng.standard_normal((1, 4, 3, 4)), K[:1], V[:1, :1]),
    "sdpa-2d": Case(lambda F, q, k, v: F.scaled_dot_product_attention(q, k, v), Q[0, 0], K[0, 0], V[0, 0]),
    "sdpa-broadcast": Case(lambda F, q, k, v: F.scaled_dot_product_attention(q, k, v), Q, K[:1], V[0]),
    # -- multi-head attention (sequence first), output and averaged or per-head weights
    **{f"mha-{part}-{name}": Case(
        lambda F, *ts, kw=kw, i=i: _mha(F, *ts, **kw)[i], *arrays, const=const)
       for i, part in enumerate(("out", "weights"))
       for name, (kw, arrays, const) in {
           "cross": ({}, (MHA_Q, MHA_K, MHA_V, MHA_W, MHA_B, MHA_OW, MHA_OB), ()),
           "self": ({"self_attention": True}, (MHA_Q, MHA_W, MHA_B, MHA_OW, MHA_OB), ()),
           "masks-per_head": ({"average_attn_weights": False, "masks": True},
                              (MHA_Q, MHA_K, MHA_V, MHA_W, MHA_B, MHA_OW, MHA_OB, MHA_KPM, MHA_AM), ()),
           "unbatched": ({}, (MHA_Q[:, 0], MHA_K[:, 0], MHA_V[:, 0], MHA_W, MHA_B, MHA_OW, MHA_OB), ()),
       }.items()},
    "mha-out-no_weights-masks": Case(lambda F, *ts: _mha(F, *ts, masks=True, need_weights=False)[0],
                                     MHA_Q, MHA_K, MHA_V, MHA_W, MHA_B, MHA_OW, MHA_OB, MHA_KPM, MHA_AM),
    "mha-out-separate-bias_kv-zero_attn": Case(
        lambda F, *ts: _mha_separate(F, *ts)[0], MHA_Q, MHA_K3, MHA_V5, MHA_W[:E], MHA_KW, MHA_VW, MHA_B,
        MHA_BIAS_K, MHA_BIAS_V, MHA_OW, MHA_OB),
    "mha-weights-separate-bias_kv-zero_attn": Case(
        lambda F, *ts: _mha_separate(F, *ts)[1], MHA_Q, MHA_K3, MHA_V5, MHA_W[:E], MHA_KW, MHA_VW, MHA_B,
        MHA_BIAS_K, MHA_BIAS_V, MHA_OW, MHA_OB),
    "mha-out-causal": Case(lambda F, q, *ts: _mha(F, q, *ts, self_attention=True, need_weights=False,
                                                 attn_mask=np.triu(np.full((TGT, TGT), -np.inf), 1), is_causal=True)[0],
                           MHA_Q, MHA_W, MHA_B, MHA_OW, MHA_OB),
    # -- embedding_bag
    "embedding_bag-mean": Case(lambda F, i, w, o: F.embedding_bag(i, w, o), EB_IDX, EB_W, EB_OFF),
    "embedding_bag-sum-weights": Case(lambda F, i, w, o, p: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p),
                                      EB_IDX, EB_W, EB_OFF, EB_PSW),
    "embedding_bag-max": Case(lambda F, i, w, o: F.embedding_bag(i, w, o, mode="max"), EB_IDX, EB_W, EB_OFF),
    "embedding_bag-max-padding": Case(lambda F, i, w, o: F.embedding_bag(i, w, o, mode="max", padding_idx=4),
                                      EB_IDX, EB_W, EB_OFF),
    "embedding_bag-mean-padding": Case(lambda F, i, w, o: F.embedding_bag(i, w, o, padding_idx=-4),
                                       EB_IDX, EB_W, EB_OFF),
    "embedding_bag-last_offset": Case(lambda F, i, w, o: F.embedding_bag(i, w, o, include_last_offset=True),
                                      EB_IDX, EB_W, np.array([0, 3, 3, 8])),
    "embedding_bag-2d": Case(lambda F, i, w: F.embedding_bag(i, w, mode="sum"), EB_IDX.reshape(2, 4), EB_W),
    "embedding_bag-int32": Case(lambda F, i, w, o: F.embedding_bag(i, w, o), EB_IDX.astype(np.int32), EB_W,
                                EB_OFF.astype(np.int32)),
    # -- bilinear
    "bilinear": Case(lambda F, a, b, w, c: F.bilinear(a, b, w, c), BIL_X1, BIL_X2, BIL_W, BIL_B),
    "bilinear-no_bias": Case(lambda F, a, b, w: F.bilinear(a, b, w), BIL_X1, BIL_X2, BIL_W),
    "bilinear-1d": Case(lambda F, a, b, w, c: F.bilinear(a, b, w, c), BIL_X1[0], BIL_X2[0], BIL_W, BIL_B),
    "bilinear-3d": Case(lambda F, a, b, w: F.bilinear(a, b, w), BIL_X1.reshape(3, 1, 4), BIL_X2.reshape(3, 1, 2),
                        BIL_W),
}

for _red in ("none", "mean", "sum"):
    CASES.update({
        f"margin_ranking_loss-{_red}": Case(
            lambda F, a, b, t, r=_red: F.margin_ranking_loss(a, b, t, 0.3, reduction=r), A[:, 0], B[:, 0], T_PM1),
        f"hinge_embedding_loss-{_red}": Case(
            lambda F, x, t, r=_red: F.hinge_embedding_loss(x, t, 0.7, reduction=r), A, T_PM1_2D),
        f"soft_margin_loss-{_red}": Case(
            lambda F, x, t, r=_red: F.soft_margin_loss(x, t, reduction=r), A, T_PM1_2D, const=(1,)),
        f"cosine_embedding_loss-{_red}": Case(
            lambda F, a, b, t, r=_red: F.cosine_embedding_loss(a, b, t, 0.2, reduction=r), A, B, T_PM1),
        f"poisson_nll_loss-{_red}": Case(
            lambda F, x, t, r=_red: F.poisson_nll_loss(x, t, reduction=r), A, COUNTS),
        f"poisson_nll_loss-rates-full-{_red}": Case(
            lambda F, x, t, r=_red: F.poisson_nll_loss(x, t, log_input=False, full=True, reduction=r), RATES, COUNTS),
        f"gaussian_nll_loss-{_red}": Case(
            lambda F, x, t, v, r=_red: F.gaussian_nll_loss(x, t, v, reduction=r), A, B, VAR),
        f"gaussian_nll_loss-var_short-full-{_red}": Case(
            lambda F, x, t, v, r=_red: F.gaussian_nll_loss(x, t, v, full=True, reduction=r), A, B, VAR[:, 0]),
        f"gaussian_nll_loss-var_one-{_red}": Case(
            lambda F, x, t, v, r=_red: F.gaussian_nll_loss(x, t, v, reduction=r), A, B, VAR[:1]),
        f"gaussian_nll_loss-var_float-{_red}": Case(
            lambda F, x, t, r=_red: F.gaussian_nll_loss(x, t, 0.7, reduction=r), A, B),
        f"multi_margin_loss-{_red}": Case(
            lambda F, x, t, r=_red: F.multi_margin_loss(x, t, reduction=r), A, T_CLASS),
        f"multi_margin_loss-p2-weight-{_red}": Case(
            lambda F, x, t, w, r=_red: F.multi_margin_loss(x, t, 2, 0.7, w, reduction=r), A, T_CLASS, W5,
            const=(2,)),
        f"multilabel_margin_loss-{_red}": Case(
            lambda F, x, t, r=_red: F.multilabel_margin_loss(x, t, reduction=r), A, T_MULTILABEL),
        f"multilabel_soft_margin_loss-{_red}": Case(
            lambda F, x, t, w, r=_red: F.multilabel_soft_margin_loss(x, t, w, reduction=r), A, P_TARGET, W5),
        f"triplet_margin_loss-{_red}": Case(
            lambda F, a, p, n, r=_red: F.triplet_margin_loss(a, p, n, reduction=r), A, B, C),
        f"triplet_margin_loss-swap-p1-{_red}": Case(
            lambda F, a, p, n, r=_red: F.triplet_margin_loss(a, p, n, 2.0, 1, swap=True, reduction=r), A, B, C),
        f"triplet_margin_with_distance_loss-{_red}": Case(
            lambda F, a, p, n, r=_red: F.triplet_margin_with_distance_loss(a, p, n, reduction=r), A, B, C),
        f"triplet_margin_with_distance_loss-cosine-swap-{_red}": Case(
            lambda F, a, p, n, r=_red: F.triplet_margin_with_distance_loss(
                a, p, n, distance_function=lambda u, v: 1 - F.cosine_similarity(u, v), margin=0.5, swap=True,
                reduction=r), A, B, C),
    })
    CASES[f"ctc_loss-{_red}"] = Case(
        lambda F, x, t, i, n, r=_red: F.ctc_loss(F.log_softmax(x, 2), t, i, n, reduction=r), CTC_LOGITS, CTC_TARGETS,
        CTC_IN, CTC_TGT)
    CASES[f"ctc_loss-concatenated-blank-{_red}"] = Case(
        lambda F, x, t, r=_red: F.ctc_loss(F.log_softmax(x, 2), t, (6, 4, 5), (3, 2, 3), blank=3, reduction=r),
        CTC_LOGITS, np.array([1, 2, 2, 4, 1, 4, 4, 1]))
    CASES[f"ctc_loss-zero_infinity-{_red}"] = Case(
        lambda F, x, t, i, n, r=_red: F.ctc_loss(F.log_softmax(x, 2), t, i, n, reduction=r, zero_infinity=True),
        CTC_LOGITS, CTC_TARGETS, CTC_SHORT, CTC_TGT)
CASES.update({
    "ctc_loss-empty_target": Case(lambda F, x, t, i, n: F.ctc_loss(F.log_softmax(x, 2), t, i, n, reduction="none"),
                                  CTC_LOGITS, CTC_TARGETS, CTC_IN, np.array([0, 2, 3])),
    "ctc_loss-unbatched": Case(lambda F, x, t: F.ctc_loss(F.log_softmax(x, 1), t, (6,), (3,), reduction="none"),
                               CTC_LOGITS[:, 0], CTC_TARGETS[0]),
    "multi_margin_loss-1d-0d_target": Case(lambda F, x, t: F.multi_margin_loss(x, t, reduction="none"), A[0],
                                           np.array(3)),
    "multi_margin_loss-1d-1_target": Case(lambda F, x, t: F.multi_margin_loss(x, t, reduction="none"), A[0],
                                          np.array([3])),
    "multilabel_margin_loss-1d": Case(lambda F, x, t: F.multilabel_margin_loss(x, t, reduction="none"), A[0],
                                      T_MULTILABEL[1]),
    "multilabel_soft_margin_loss-1d": Case(lambda F, x, t: F.multilabel_soft_margin_loss(x, t, reduction="none"),
                                           A[0], P_TARGET[0]),
    "cosine_embedding_loss-0d_target": Case(lambda F, a, b, t: F.cosine_embedding_loss(a, b, t), A[0], B[0],
                                            np.array(-1.0)),
    "hinge_embedding_loss-broadcast": Case(lambda F, x, t: F.hinge_embedding_loss(x, t), A, T_PM1_2D[:, :1]),
    "triplet_margin_loss-1d": Case(lambda F, a, p, n: F.triplet_margin_loss(a, p, n, reduction="none"), A[0], B[0],
                                   C[0]),
})


def _mha(F: Any, query: Any, *ts: Any, self_attention: bool = False, masks: bool = False,
         **kwargs: Any) -> tuple[Any, Any]:
    """``multi_head_attention_forward`` with packed projections; ``self_attention``
    passes ``query`` as key and value (one projection), ``masks`` the last two
    tensors as key padding and attention masks."""
    if self_attention:
        key = value = query
        w, b, ow, ob = ts
    else:
        key, value, w, b, ow, ob, *rest = ts
        if masks:
            kwargs.update(key_padding_mask=rest[0], attn_mask=rest[1])
    if isinstance(kwargs.get("attn_mask"), np.ndarray):
        mask = kwargs["attn_mask"]
        kwargs["attn_mask"] = agrad.tensor(mask) if F is agrad.nn.functional else torch.tensor(mask)
    return F.multi_head_attention_forward(query, key, value, E, HEADS, w, b, None, None, False, 0.0, ow, ob,
                                          **kwargs)


def _mha_separate(F: Any, q: Any, k: Any, v: Any, qw: Any, kw: Any, vw: Any, b: Any, bias_k: Any, bias_v: Any,
                  ow: Any, ob: Any) -> tuple[Any, Any]:
    return F.multi_head_attention_forward(q, k, v, E, HEADS, None, b, bias_k, bias_v, True, 0.0, ow, ob,
                                          use_separate_proj_weight=True, q_proj_weight=qw, k_proj_weight=kw,
                                          v_proj_weight=vw)


# Cases whose gradient is PyTorch's by design but not the derivative finite
# differences measure, with why.
NO_GRADCHECK = {
    # PyTorch clamps the norms in place without recording: where a norm is
    # below eps the gradient flows as if it were not clamped.
    "cosine_similarity-tiny_norm",
    # Empty outputs: nothing to difference.
    "empty-mish", "empty-hardswish",
}
# Second derivatives that are too costly for the suite, with why: the
# multi-head cases differentiate ~100 parameters twice; their first
# derivatives are checked, and gradgradcheck runs on the smaller ones.
NO_GRADGRADCHECK = {name for name in CASES if name.startswith("mha-") and "cross" not in name
                    and "unbatched" not in name} | {
    # The second derivative jumps at 0 (1 / alpha on the left, 0 on the right): the
    # analytical one takes PyTorch's left branch, finite differences the average.
    "celu-extreme",
    # The norm of a zero difference has the subgradient 0 (PyTorch's), where the
    # gradient itself jumps: its derivative there is not a finite difference.
    "pdist-repeated_rows",
}


def _is_float(a: np.ndarray) -> bool:
    return a.dtype.kind == "f"


def _agrad_inputs(case: Case, dtype: Any) -> list[agrad.Tensor]:
    return [agrad.tensor(a, dtype=dtype, requires_grad=i not in case.const) if _is_float(a) else agrad.tensor(a)
            for i, a in enumerate(case.inputs)]


def _torch_inputs(case: Case, dtype: Any) -> list[Any]:
    return [torch.tensor(a, dtype=dtype, requires_grad=i not in case.const) if _is_float(a) else torch.tensor(a)
            for i, a in enumerate(case.inputs)]


def _strided_inputs(case: Case) -> list[agrad.Tensor]:
    """As ``_agrad_inputs`` in float64, the float inputs over non-contiguous memory."""
    return [agrad.from_numpy(non_contiguous(a.astype(np.float64))).requires_grad_(i not in case.const)
            if _is_float(a) else t for i, (a, t) in enumerate(zip(case.inputs, _agrad_inputs(case, agrad.float64)))]


def _compare(case: Case, ours_dtype: Any, torch_dtype: Any, tol: dict[str, float], grad_tol: dict[str, float],
             strided: bool = False) -> None:
    ours = _strided_inputs(case) if strided else _agrad_inputs(case, ours_dtype)
    theirs = _torch_inputs(case, torch_dtype)
    out = case.fn(agrad.nn.functional, *ours)
    expected = case.fn(torch.nn.functional, *theirs)
    assert out.shape == tuple(expected.shape)
    assert out.dtype.name == str(expected.dtype).removeprefix("torch.")
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), **tol)
    if not expected.requires_grad:
        assert not out.requires_grad
        return
    grad_output = np.random.default_rng(3).standard_normal(out.shape)
    out.backward_sync(agrad.tensor(grad_output, dtype=ours_dtype))
    expected.backward(torch.tensor(grad_output, dtype=torch_dtype))
    for mine, ref in zip(ours, theirs, strict=True):
        if getattr(ref, "requires_grad", False):
            assert (mine.grad is None) == (ref.grad is None)
            if ref.grad is not None:
                assert mine.grad.dtype is ours_dtype
                np.testing.assert_allclose(mine.grad.numpy(), ref.grad.numpy(), **grad_tol)


@requires_torch
@pytest.mark.parametrize("name", list(CASES))
def test_matches_torch_float64(name: str) -> None:
    """Values, dtype and the gradient of every differentiated input equal PyTorch's."""
    case = CASES[name]
    _compare(case, agrad.float64, torch.float64, {"rtol": 1e-10, "atol": 1e-12},
             {"rtol": case.grad_rtol, "atol": 1e-12})


@requires_torch
@pytest.mark.parametrize("name", [n for n, c in CASES.items()
                                  if any(_is_float(a) and not non_contiguous(a).flags.c_contiguous for a in c.inputs)])
def test_matches_torch_on_non_contiguous_inputs(name: str) -> None:
    """The same in float64, every float input a tensor over non-contiguous memory."""
    case = CASES[name]
    _compare(case, agrad.float64, torch.float64, {"rtol": 1e-10, "atol": 1e-12},
             {"rtol": case.grad_rtol, "atol": 1e-12}, strided=True)


@requires_torch
@pytest.mark.parametrize("name", list(CASES))
def test_matches_torch_float32(name: str) -> None:
    """The same calls in float32 keep float32 and PyTorch's values and gradients."""
    _compare(CASES[name], agrad.float32, torch.float32, {"rtol": 1e-5, "atol": 1e-6}, {"rtol": 1e-4, "atol": 1e-5})


@pytest.mark.parametrize("name", [n for n in CASES if n not in NO_GRADCHECK])
def test_gradcheck(name: str) -> None:
    case = CASES[name]
    assert gradcheck(lambda *ts: case.fn(agrad.nn.functional, *ts), _agrad_inputs(case, agrad.float64))


@pytest.mark.parametrize("name", [n for n in CASES if n not in NO_GRADCHECK | NO_GRADGRADCHECK])
def test_gradgradcheck(name: str) -> None:
    """Second derivatives (``create_graph=True`` through the composites) match finite differences."""
    case = CASES[name]
    assert gradgradcheck(lambda *ts: case.fn(agrad.nn.functional, *ts), _agrad_inputs(case, agrad.float64))




def _on(t: agrad.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


@pytest.mark.parametrize("name", [n for n in CASES if not n.startswith("empty-")])
def test_on_another_device(fake_device: str, name: str) -> None:
    """Each case on a device other than the CPU (and the current one): output and
    gradients stay there and equal the CPU's, so no helper makes a host array
    where a device one belongs (masks, indices, noise, running statistics)."""
    case = CASES[name]

    def inputs(device: str) -> list[agrad.Tensor]:
        return [agrad.tensor(a, dtype=agrad.float64 if _is_float(a) else None, device=device,
                             requires_grad=_is_float(a) and i not in case.const) for i, a in enumerate(case.inputs)]

    cpu_in, dev_in = inputs("cpu"), inputs(fake_device)
    expected, out = case.fn(agrad.nn.functional, *cpu_in), case.fn(agrad.nn.functional, *dev_in)
    assert str(out.device) == fake_device and out.dtype is expected.dtype and out.shape == expected.shape
    np.testing.assert_allclose(_on(out), _on(expected), rtol=1e-10, atol=1e-12)
    leaves = [i for i, t in enumerate(cpu_in) if t.requires_grad]
    if not leaves or not expected.requires_grad:
        return
    g = np.random.default_rng(1).standard_normal(expected.shape)
    want = grad_sync(expected, [cpu_in[i] for i in leaves], agrad.tensor(g), allow_unused=True)
    got = grad_sync(out, [dev_in[i] for i in leaves], agrad.tensor(g, device=fake_device), allow_unused=True)
    for mine, ref in zip(got, want, strict=True):
        assert (mine is None) == (ref is None)
        if ref is not None:
            assert str(mine.device) == fake_device
            np.testing.assert_allclose(_on(mine), _on(ref), rtol=1e-10, atol=1e-12)


RANDOM_ON_DEVICE = {
    "dropout1d": lambda F, x: F.dropout1d(x, 0.4),
    "dropout2d": lambda F, x: F.dropout2d(x.reshape(2, 3, 2, 2), 0.4),
    "alpha_dropout": lambda F, x: F.alpha_dropout(x, 0.4, True),
    "feature_alpha_dropout": lambda F, x: F.feature_alpha_dropout(x, 0.4, True),
    "rrelu": lambda F, x: F.rrelu(x, training=True),
    "gumbel_softmax": lambda F, x: F.gumbel_softmax(x, hard=True),
    "sdpa-dropout": lambda F, x: F.scaled_dot_product_attention(x, x, x, dropout_p=0.3, is_causal=True),
    "batch_norm-running": lambda F, x: F.batch_norm(x, agrad.zeros(3, dtype=x.dtype, device=x.device),
                                                    agrad.ones(3, dtype=x.dtype, device=x.device), training=True),
    "one_hot": lambda F, x: F.one_hot((x > 0).long(), 3) * x.unsqueeze(-1),
}


@pytest.mark.parametrize("name", list(RANDOM_ON_DEVICE))
def test_random_functions_on_another_device(fake_device: str, name: str) -> None:
    """Noise drawn on the host reaches the input's device; the same seed gives the CPU's values."""
    x_cpu = agrad.tensor(X3, requires_grad=True)
    x_dev = agrad.tensor(X3, device=fake_device, requires_grad=True)
    agrad.manual_seed(4)
    expected = RANDOM_ON_DEVICE[name](agrad.nn.functional, x_cpu)
    agrad.manual_seed(4)
    out = RANDOM_ON_DEVICE[name](agrad.nn.functional, x_dev)
    assert str(out.device) == fake_device
    np.testing.assert_allclose(_on(out), _on(expected), rtol=1e-10, atol=1e-12)
    (grad,) = grad_sync(out.sum(), [x_dev])
    assert str(grad.device) == fake_device
    np.testing.assert_allclose(_on(grad), _on(grad_sync(expected.sum(), [x_cpu])[0]), rtol=1e-10, atol=1e-12)


# -- in-place forms ----------------------------------------------------------------------

INPLACE = {
    "relu_": (lambda F, x: F.relu_(x), lambda F, x: F.relu(x)),
    "elu_": (lambda F, x: F.elu_(x, 0.7), lambda F, x: F.elu(x, 0.7)),
    "elu-inplace": (lambda F, x: F.elu(x, inplace=True), lambda F, x: F.elu(x)),
    "leaky_relu_": (lambda F, x: F.leaky_relu_(x, 0.2), lambda F, x: F.leaky_relu(x, 0.2)),
    "hardtanh_": (lambda F, x: F.hardtanh_(x, -0.5, 0.8), lambda F, x: F.hardtanh(x, -0.5, 0.8)),
    "celu_": (lambda F, x: F.celu_(x, 0.5), lambda F, x: F.celu(x, 0.5)),
    "celu-inplace": (lambda F, x: F.celu(x, inplace=True), lambda F, x: F.celu(x)),
    "selu_": (lambda F, x: F.selu_(x), lambda F, x: F.selu(x)),
    "selu-inplace": (lambda F, x: F.selu(x, inplace=True), lambda F, x: F.selu(x)),
    "rrelu_": (lambda F, x: F.rrelu_(x, 0.1, 0.3), lambda F, x: F.rrelu(x, 0.1, 0.3)),
    "threshold_": (lambda F, x: F.threshold_(x, 0.2, -1.0), lambda F, x: F.threshold(x, 0.2, -1.0)),
    "threshold-inplace": (lambda F, x: F.threshold(x, 0.2, 5.0, True), lambda F, x: F.threshold(x, 0.2, 5.0)),
    "mish-inplace": (lambda F, x: F.mish(x, inplace=True), lambda F, x: F.mish(x)),
    "hardswish-inplace": (lambda F, x: F.hardswish(x, True), lambda F, x: F.hardswish(x)),
    "hardsigmoid-inplace": (lambda F, x: F.hardsigmoid(x, inplace=True), lambda F, x: F.hardsigmoid(x)),
    "silu-inplace": (lambda F, x: F.silu(x, inplace=True), lambda F, x: F.silu(x)),
    "relu6-inplace": (lambda F, x: F.relu6(x, inplace=True), lambda F, x: F.relu6(x)),
}


@pytest.mark.parametrize("name", list(INPLACE))
def test_inplace_forms(name: str) -> None:
    """Written into (and returning) their input, with the out-of-place values and
    gradients; a leaf that requires grad is refused, as in PyTorch."""
    inplace, outofplace = INPLACE[name]
    F = agrad.nn.functional
    leaf = agrad.tensor(X_SHRINK, requires_grad=True)
    y = leaf * 1.0
    assert inplace(F, y) is y
    expected = outofplace(F, agrad.tensor(X_SHRINK))
    np.testing.assert_allclose(y.detach().numpy(), expected.numpy(), rtol=1e-6)
    y.backward_sync(agrad.tensor(np.ones_like(X_SHRINK, dtype=np.float32)))
    ref = agrad.tensor(X_SHRINK, requires_grad=True)
    outofplace(F, ref).backward_sync(agrad.tensor(np.ones_like(X_SHRINK, dtype=np.float32)))
    np.testing.assert_allclose(leaf.grad.numpy(), ref.grad.numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        inplace(F, agrad.tensor(X_SHRINK, requires_grad=True))


def test_inplace_threshold_keeps_integer_dtype() -> None:
    x = agrad.tensor([1, 2, 3])
    assert agrad.nn.functional.threshold_(x, 1.5, 7.5) is x
    assert x.tolist() == [7, 2, 3] and x.dtype is agrad.int64


# -- integer inputs and misuse, against PyTorch ----------------------------------------------

_INTS = np.array([[-3, 0, 2, 5]])
_LONG = np.array([[1, 2], [0, 3]])

SAME_AS_TORCH = {
    # integer inputs: PyTorch's dtype and values, or its NotImplementedError
    **{f"int-{n}": (lambda F, t, n=n: getattr(F, n)(t(_INTS)))
       for n in ("glu", "mish", "hardswish", "hardsigmoid", "softsign", "logsigmoid", "tanhshrink", "softshrink",
                 "hardshrink", "selu", "celu", "rrelu", "silu", "gelu", "elu", "leaky_relu", "hardtanh", "relu6",
                 "softplus")},
    "int-threshold": lambda F, t: F.threshold(t(_INTS), 1, 7),
    "int-threshold-float": lambda F, t: F.threshold(t(_INTS), 1.5, 7.5),
    "int-prelu": lambda F, t: F.prelu(t(_INTS), t(np.array([0.2]))),
    "int-softmin": lambda F, t: F.softmin(t(_INTS), 1),
    "int-batch_norm": lambda F, t: F.batch_norm(t(_LONG), None, None, training=True),
    "int-group_norm": lambda F, t: F.group_norm(t(_LONG[None]), 2),
    "int-layer_norm": lambda F, t: F.layer_norm(t(_LONG), (2,)),
    "int-rms_norm": lambda F, t: F.rms_norm(t(_LONG), (2,)),
    "int-normalize": lambda F, t: F.normalize(t(_LONG)),
    "int-cosine_similarity": lambda F, t: F.cosine_similarity(t(_LONG), t(_LONG)),
    "int-cosine_similarity-mixed": lambda F, t: F.cosine_similarity(t(_LONG), t(_LONG.astype(np.float32))),
    "int-pairwise_distance": lambda F, t: F.pairwise_distance(t(_LONG), t(_LONG[::-1].copy())),
    "int-pdist": lambda F, t: F.pdist(t(_LONG)),
    "int-bilinear": lambda F, t: F.bilinear(t(_LONG), t(_LONG), t(np.ones((3, 2, 2), np.int64))),
    "int-poisson_nll_loss": lambda F, t: F.poisson_nll_loss(t(_LONG), t(_LONG)),
    "int-margin_ranking_loss-target": lambda F, t: F.margin_ranking_loss(t(A[:, 0]), t(B[:, 0]), t(np.array(
        [1, -1, 1, -1]))),
    "int-hinge_embedding_loss-target": lambda F, t: F.hinge_embedding_loss(t(A), t(T_PM1_2D.astype(np.int64))),
    "int-multi_margin_loss": lambda F, t: F.multi_margin_loss(t(_LONG), t(np.array([0, 1]))),
    "int-multilabel_margin_loss": lambda F, t: F.multilabel_margin_loss(t(_LONG), t(np.array([[0, -1], [1, 0]]))),
    "int-sdpa": lambda F, t: F.scaled_dot_product_attention(t(_LONG), t(_LONG), t(_LONG)),
    # misuse: PyTorch's exception type and message
    "glu-odd": lambda F, t: F.glu(t(A)),
    "glu-0d": lambda F, t: F.glu(t(np.array(1.0))),
    "glu-dim": lambda F, t: F.glu(t(X), 2),
    "prelu-channels": lambda F, t: F.prelu(t(X3), t(np.ones(4))),
    "prelu-2d_weight": lambda F, t: F.prelu(t(X3), t(np.ones((3, 1)))),
    "prelu-1d_input": lambda F, t: F.prelu(t(A[0]), t(np.ones(5))),
    "prelu-dtypes": lambda F, t: F.prelu(t(X3), t(np.ones(3, np.float32))),
    "softshrink-negative": lambda F, t: F.softshrink(t(X), -1.0),
    "rrelu-bounds": lambda F, t: F.rrelu(t(X), 0.5, 0.1),
    "rrelu-bounds-training": lambda F, t: F.rrelu(t(X), 0.5, 0.1, True),
    "celu-alpha0": lambda F, t: F.celu(t(X), 0.0),
    "hardtanh-bounds": lambda F, t: F.hardtanh(t(X), 1.0, 0.0),
    "batch_norm-1d": lambda F, t: F.batch_norm(t(A[0]), None, None, training=True),
    "batch_norm-running_mean": lambda F, t: F.batch_norm(t(BN_X), t(np.zeros(4)), t(np.ones(4)), training=True),
    "batch_norm-weight": lambda F, t: F.batch_norm(t(BN_X), t(RUN_MEAN), t(RUN_VAR), t(np.ones(4))),
    "batch_norm-bias": lambda F, t: F.batch_norm(t(BN_X), t(RUN_MEAN), t(RUN_VAR), None, t(np.ones(2))),
    "batch_norm-eval_no_stats": lambda F, t: F.batch_norm(t(BN_X), None, None),
    "batch_norm-one_stat": lambda F, t: F.batch_norm(t(BN_X), t(RUN_MEAN), None, training=True),
    "batch_norm-one_value": lambda F, t: F.batch_norm(t(A[:1]), None, None, training=True),
    "batch_norm-eps": lambda F, t: F.batch_norm(t(BN_X), None, None, training=True, eps=0.0),
    "batch_norm-negative_eps": lambda F, t: F.batch_norm(t(BN_X), t(RUN_MEAN), t(RUN_VAR), eps=-1.0),
    "batch_norm-mixed_dtype": lambda F, t: F.batch_norm(t(BN_X.astype(np.float32)), t(RUN_MEAN), t(RUN_VAR),
                                                        training=True),
    "instance_norm-one_spatial": lambda F, t: F.instance_norm(t(BN_X[:, :, :1])),
    "instance_norm-no_stats": lambda F, t: F.instance_norm(t(BN_X), use_input_stats=False),
    "instance_norm-weight": lambda F, t: F.instance_norm(t(BN_X), weight=t(np.ones(4))),
    "group_norm-divisible": lambda F, t: F.group_norm(t(GN_X), 4),
    "group_norm-1d": lambda F, t: F.group_norm(t(GN_W), 3),
    "group_norm-weight": lambda F, t: F.group_norm(t(GN_X), 3, t(np.ones(5))),
    "group_norm-one_value": lambda F, t: F.group_norm(t(np.ones((1, 3))), 3),
    "rms_norm-shape": lambda F, t: F.rms_norm(t(X3), (3,)),
    "rms_norm-weight": lambda F, t: F.rms_norm(t(X3), (4,), t(np.ones(3))),
    "rms_norm-int_shape": lambda F, t: F.rms_norm(t(X3), 4),
    "local_response_norm-2d": lambda F, t: F.local_response_norm(t(X), 2),
    "normalize-dim": lambda F, t: F.normalize(t(A[0])),
    "cosine_similarity-shapes": lambda F, t: F.cosine_similarity(t(A), t(B[:3])),
    "cosine_similarity-dim": lambda F, t: F.cosine_similarity(t(A[0]), t(B[0])),
    "pdist-3d": lambda F, t: F.pdist(t(X3)),
    "pdist-negative_p": lambda F, t: F.pdist(t(A), -1),
    "sdpa-1d": lambda F, t: F.scaled_dot_product_attention(t(A[0]), t(A[0]), t(A[0])),
    "sdpa-dtypes": lambda F, t: F.scaled_dot_product_attention(t(Q), t(K.astype(np.float32)), t(V)),
    "sdpa-int_mask": lambda F, t: F.scaled_dot_product_attention(t(Q), t(K), t(V), t(SDPA_MASK.astype(np.int64))),
    "sdpa-causal_and_mask": lambda F, t: F.scaled_dot_product_attention(t(Q), t(K), t(V), t(SDPA_MASK),
                                                                         is_causal=True),
    "sdpa-gqa_heads": lambda F, t: F.scaled_dot_product_attention(t(np.ones((1, 3, 2, 2))), t(np.ones((1, 2, 2, 2))),
                                                                   t(np.ones((1, 2, 2, 2))), enable_gqa=True),
    "mha-4d_query": lambda F, t: F.multi_head_attention_forward(t(Q), t(K), t(V), E, HEADS, t(MHA_W), None, None,
                                                                None, False, 0.0, t(MHA_OW), None),
    "mha-embed_dim": lambda F, t: F.multi_head_attention_forward(
        t(MHA_Q), t(MHA_K), t(MHA_V), E + 1, HEADS, t(MHA_W), None, None, None, False, 0.0, t(MHA_OW), None),
    "mha-heads": lambda F, t: F.multi_head_attention_forward(t(MHA_Q), t(MHA_K), t(MHA_V), E, 3, t(MHA_W), None,
                                                             None, None, False, 0.0, t(MHA_OW), None),
    "mha-attn_mask_shape": lambda F, t: F.multi_head_attention_forward(
        t(MHA_Q), t(MHA_K), t(MHA_V), E, HEADS, t(MHA_W), None, None, None, False, 0.0, t(MHA_OW), None,
        attn_mask=t(np.zeros((2, 2)))),
    "mha-causal_without_mask": lambda F, t: F.multi_head_attention_forward(
        t(MHA_Q), t(MHA_K), t(MHA_V), E, HEADS, t(MHA_W), None, None, None, False, 0.0, t(MHA_OW), None,
        is_causal=True),
    "mha-int_mask": lambda F, t: F.multi_head_attention_forward(
        t(MHA_Q), t(MHA_K), t(MHA_V), E, HEADS, t(MHA_W), None, None, None, False, 0.0, t(MHA_OW), None,
        key_padding_mask=t(MHA_KPM.astype(np.int64))),
    "bilinear-dims": lambda F, t: F.bilinear(t(BIL_X1), t(BIL_X2[None]), t(BIL_W)),
    "bilinear-batch": lambda F, t: F.bilinear(t(BIL_X1), t(BIL_X2[:2]), t(BIL_W)),
    "bilinear-in1": lambda F, t: F.bilinear(t(BIL_X1[:, :3]), t(BIL_X2), t(BIL_W)),
    "bilinear-in2": lambda F, t: F.bilinear(t(BIL_X1), t(BIL_X2[:, :1]), t(BIL_W)),
    "bilinear-bias": lambda F, t: F.bilinear(t(BIL_X1), t(BIL_X2), t(BIL_W), t(BIL_B[:3])),
    "one_hot": lambda F, t: F.one_hot(t(np.array([[0, 2], [1, 1]]))),
    "one_hot-classes": lambda F, t: F.one_hot(t(np.array([0, 2, 1])), 5),
    "one_hot-0d": lambda F, t: F.one_hot(t(np.array(2)), 3),
    "one_hot-empty": lambda F, t: F.one_hot(t(np.zeros(0, np.int64)), 4),
    "one_hot-empty-infer": lambda F, t: F.one_hot(t(np.zeros(0, np.int64))),
    "one_hot-small": lambda F, t: F.one_hot(t(np.array([0, 2, 1])), 2),
    "one_hot-negative": lambda F, t: F.one_hot(t(np.array([0, -1, 1]))),
    "one_hot-float": lambda F, t: F.one_hot(t(np.array([0.0, 1.0]))),
    "one_hot-int32": lambda F, t: F.one_hot(t(np.array([0, 1], np.int32))),
    "embedding_bag-offsets_2d": lambda F, t: F.embedding_bag(t(EB_IDX.reshape(2, 4)), t(EB_W), t(EB_OFF)),
    "embedding_bag-no_offsets": lambda F, t: F.embedding_bag(t(EB_IDX), t(EB_W)),
    "embedding_bag-3d": lambda F, t: F.embedding_bag(t(EB_IDX.reshape(2, 2, 2)), t(EB_W)),
    "embedding_bag-mode": lambda F, t: F.embedding_bag(t(EB_IDX), t(EB_W), t(EB_OFF), mode="median"),
    "embedding_bag-weights_mode": lambda F, t: F.embedding_bag(t(EB_IDX), t(EB_W), t(EB_OFF),
                                                               per_sample_weights=t(EB_PSW)),
    "embedding_bag-weights_shape": lambda F, t: F.embedding_bag(t(EB_IDX), t(EB_W), t(EB_OFF), mode="sum",
                                                                per_sample_weights=t(EB_PSW[:7])),
    "embedding_bag-weight_1d": lambda F, t: F.embedding_bag(t(EB_IDX), t(EB_W[0]), t(EB_OFF)),
    "embedding_bag-float_indices": lambda F, t: F.embedding_bag(t(EB_IDX.astype(np.float32)), t(EB_W), t(EB_OFF)),
    "embedding_bag-first_offset": lambda F, t: F.embedding_bag(t(EB_IDX), t(EB_W), t(EB_OFF + 1)),
    "embedding_bag-last_offset_range": lambda F, t: F.embedding_bag(t(EB_IDX), t(EB_W), t(np.array([0, 3, 9]))),
    "dropout1d-4d": lambda F, t: F.dropout1d(t(X4)),
    "feature_alpha_dropout-1d": lambda F, t: F.feature_alpha_dropout(t(A[0]), 0.5, True),
    "dropout-p": lambda F, t: F.alpha_dropout(t(A), 1.5),
    "margin_ranking_loss-dims": lambda F, t: F.margin_ranking_loss(t(A), t(B[:, 0]), t(T_PM1)),
    "cosine_embedding_loss-2d_target": lambda F, t: F.cosine_embedding_loss(t(A), t(B), t(T_PM1[None])),
    "cosine_embedding_loss-1d_inputs": lambda F, t: F.cosine_embedding_loss(t(A[0]), t(B[0]), t(T_PM1)),
    "cosine_embedding_loss-2d_inputs": lambda F, t: F.cosine_embedding_loss(t(A), t(B), t(T_PM1[0])),
    "soft_margin_loss-target_grad": lambda F, t: F.soft_margin_loss(t(A), t(T_PM1_2D).requires_grad_()),
    "gaussian_nll_loss-negative": lambda F, t: F.gaussian_nll_loss(t(A), t(B), t(-VAR)),
    "gaussian_nll_loss-negative_float": lambda F, t: F.gaussian_nll_loss(t(A), t(B), -1.0),
    "gaussian_nll_loss-var_size": lambda F, t: F.gaussian_nll_loss(t(A), t(B), t(VAR[:3])),
    "gaussian_nll_loss-reduction": lambda F, t: F.gaussian_nll_loss(t(A), t(B), t(VAR), reduction="bogus"),
    "multi_margin_loss-p": lambda F, t: F.multi_margin_loss(t(A), t(T_CLASS), p=3),
    "multi_margin_loss-weight_dims": lambda F, t: F.multi_margin_loss(t(A), t(T_CLASS), weight=t(W5[:, None])),
    "multi_margin_loss-weight_size": lambda F, t: F.multi_margin_loss(t(A), t(T_CLASS), weight=t(W5[:4])),
    "multi_margin_loss-weight_grad": lambda F, t: F.multi_margin_loss(t(A), t(T_CLASS),
                                                                      weight=t(W5).requires_grad_()),
    "multi_margin_loss-target_range": lambda F, t: F.multi_margin_loss(t(A), t(np.array([1, 0, 5, 2]))),
    "multi_margin_loss-target_size": lambda F, t: F.multi_margin_loss(t(A), t(T_CLASS[:3])),
    "multi_margin_loss-target_dtype": lambda F, t: F.multi_margin_loss(t(A), t(T_CLASS.astype(np.float32))),
    "multi_margin_loss-3d": lambda F, t: F.multi_margin_loss(t(X3), t(T_CLASS[:2])),
    "multilabel_margin_loss-size": lambda F, t: F.multilabel_margin_loss(t(A), t(T_MULTILABEL[:3])),
    "multilabel_margin_loss-range": lambda F, t: F.multilabel_margin_loss(t(A), t(T_MULTILABEL + 1)),
    "multilabel_margin_loss-dtype": lambda F, t: F.multilabel_margin_loss(t(A), t(T_MULTILABEL.astype(np.float32))),
    "multilabel_soft_margin_loss-0d": lambda F, t: F.multilabel_soft_margin_loss(t(A[0, 0]), t(B[0, 0])),
    "triplet_margin_loss-margin": lambda F, t: F.triplet_margin_loss(t(A), t(B), t(C), margin=0.0),
    "triplet_margin_loss-dims": lambda F, t: F.triplet_margin_loss(t(A), t(B[0]), t(C)),
    "triplet_margin_with_distance_loss-dims": lambda F, t: F.triplet_margin_with_distance_loss(t(A), t(B[0]), t(C)),
    "ctc_loss-infinite": lambda F, t: F.ctc_loss(F.log_softmax(t(CTC_LOGITS), 2), t(CTC_TARGETS), t(CTC_SHORT),
                                                 t(CTC_TGT), reduction="none"),
    "ctc_loss-blank": lambda F, t: F.ctc_loss(t(CTC_LOGITS), t(CTC_TARGETS), t(CTC_IN), t(CTC_TGT), blank=5),
    "ctc_loss-input_length": lambda F, t: F.ctc_loss(t(CTC_LOGITS), t(CTC_TARGETS), t(CTC_IN + 1), t(CTC_TGT)),
    "ctc_loss-negative_length": lambda F, t: F.ctc_loss(t(CTC_LOGITS), t(CTC_TARGETS), t(CTC_IN), t(-CTC_TGT)),
    "ctc_loss-target_length": lambda F, t: F.ctc_loss(t(CTC_LOGITS), t(CTC_TARGETS), t(CTC_IN), t(CTC_TGT + 1)),
    "ctc_loss-batch": lambda F, t: F.ctc_loss(t(CTC_LOGITS), t(CTC_TARGETS), t(CTC_IN[:2]), t(CTC_TGT)),
    "ctc_loss-target_batch": lambda F, t: F.ctc_loss(t(CTC_LOGITS), t(CTC_TARGETS), t(CTC_IN), t(CTC_TGT[:2])),
    "ctc_loss-4d": lambda F, t: F.ctc_loss(t(CTC_LOGITS[None]), t(CTC_TARGETS), t(CTC_IN), t(CTC_TGT)),
    "ctc_loss-int": lambda F, t: F.ctc_loss(t(CTC_TARGETS[None]), t(CTC_TARGETS), t(CTC_IN), t(CTC_TGT)),
    "ctc_loss-reduction": lambda F, t: F.ctc_loss(t(CTC_LOGITS), t(CTC_TARGETS), t(CTC_IN), t(CTC_TGT),
                                                  reduction="bogus"),
    **{f"{n}-reduction": (lambda F, t, n=n: getattr(F, n)(t(A), t(B), reduction="bogus"))
       for n in ("hinge_embedding_loss", "soft_margin_loss", "poisson_nll_loss", "multilabel_soft_margin_loss")},
    "margin_ranking_loss-reduction": lambda F, t: F.margin_ranking_loss(t(A), t(B), t(C), reduction="bogus"),
    "cosine_embedding_loss-reduction": lambda F, t: F.cosine_embedding_loss(t(A), t(B), t(T_PM1), reduction="x"),
    "multi_margin_loss-reduction": lambda F, t: F.multi_margin_loss(t(A), t(T_CLASS), reduction="bogus"),
    "multilabel_margin_loss-reduction": lambda F, t: F.multilabel_margin_loss(t(A), t(T_MULTILABEL), reduction="x"),
    "triplet_margin_loss-reduction": lambda F, t: F.triplet_margin_loss(t(A), t(B), t(C), reduction="bogus"),
    "triplet_margin_with_distance_loss-reduction": lambda F, t: F.triplet_margin_with_distance_loss(
        t(A), t(B), t(C), reduction="bogus"),
}
# Same exception type, another wording: an error raised by a primitive (broadcasting), and
# one that names the offending argument's class (agrad's, not torch.Tensor).
TYPE_ONLY = {"cosine_similarity-shapes", "embedding_bag-offsets_2d"}


def _run(call: Callable[..., Any], lib: Any) -> Any:
    F = lib.nn.functional
    t = agrad.tensor if lib is agrad else torch.tensor
    try:
        return call(F, t)
    except Exception as exc:  # noqa: BLE001 - the exception is the result compared
        return exc


@requires_torch
@pytest.mark.parametrize("name", list(SAME_AS_TORCH))
def test_same_result_or_error_as_torch(name: str) -> None:
    """PyTorch's dtype and values, or its exception type and message, for the same call."""
    ours, theirs = _run(SAME_AS_TORCH[name], agrad), _run(SAME_AS_TORCH[name], torch)
    if isinstance(theirs, BaseException):
        assert isinstance(ours, BaseException), f"PyTorch raised {theirs!r}; agrad returned {ours!r}"
        assert type(ours) is type(theirs), f"{ours!r} vs PyTorch's {theirs!r}"
        if name not in TYPE_ONLY:
            assert str(ours).splitlines()[0] == str(theirs).splitlines()[0]
        return
    assert not isinstance(ours, BaseException), f"PyTorch returned a value; agrad raised {ours!r}"
    assert ours.dtype.name == str(theirs.dtype).removeprefix("torch.")
    assert ours.shape == tuple(theirs.shape)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-5, atol=1e-6)


@requires_torch
def test_implicit_softmin_dim_warns_like_torch() -> None:
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmin has been deprecated"):
        out = agrad.nn.functional.softmin(agrad.tensor(X))
    with pytest.warns(UserWarning):
        expected = torch.nn.functional.softmin(torch.tensor(X))
    np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=1e-6)


def test_legacy_size_average_overrides_reduction() -> None:
    F = agrad.nn.functional
    a, b, t = agrad.tensor(A[:, 0]), agrad.tensor(B[:, 0]), agrad.tensor(T_PM1)
    with pytest.warns(UserWarning, match="please use reduction='sum' instead"):
        out = F.margin_ranking_loss(a, b, t, size_average=False)
    np.testing.assert_allclose(out.item(), F.margin_ranking_loss(a, b, t, reduction="sum").item())
    with pytest.warns(UserWarning, match="please use reduction='none' instead"):
        assert F.mse_loss(agrad.tensor(A), agrad.tensor(B), reduce=False).shape == A.shape


# -- running statistics ----------------------------------------------------------------------


@requires_torch
@pytest.mark.parametrize("norm", ["batch_norm", "instance_norm"])
def test_running_statistics_follow_torch(norm: str) -> None:
    """Training moves the running mean and (unbiased) variance as PyTorch does, in
    place and unrecorded; batch norm's kernel leaves their version alone, instance
    norm's copy bumps it, as in PyTorch."""
    ours = [agrad.tensor(RUN_MEAN), agrad.tensor(RUN_VAR)]
    theirs = [torch.tensor(RUN_MEAN), torch.tensor(RUN_VAR)]
    x = agrad.tensor(BN_X, requires_grad=True)
    for step in range(3):
        kwargs = {"momentum": 0.25}
        if norm == "batch_norm":
            getattr(agrad.nn.functional, norm)(x * (step + 1), *ours, training=True, **kwargs)
            getattr(torch.nn.functional, norm)(torch.tensor(BN_X) * (step + 1), *theirs, training=True, **kwargs)
        else:
            getattr(agrad.nn.functional, norm)(x * (step + 1), *ours, **kwargs)
            getattr(torch.nn.functional, norm)(torch.tensor(BN_X) * (step + 1), *theirs, **kwargs)
    for mine, ref in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(mine.numpy(), ref.numpy(), rtol=1e-12)
        assert mine._version == ref._version == (0 if norm == "batch_norm" else 3)
        assert not mine.requires_grad


def test_running_statistics_untouched_in_eval() -> None:
    mean, var = agrad.tensor(RUN_MEAN), agrad.tensor(RUN_VAR)
    agrad.nn.functional.batch_norm(agrad.tensor(BN_X), mean, var)
    np.testing.assert_array_equal(mean.numpy(), RUN_MEAN)
    np.testing.assert_array_equal(var.numpy(), RUN_VAR)


def test_empty_batch_norm_is_torchs_special_case() -> None:
    """An empty input is returned scaled by the first weight and shifted by the first bias."""
    w, b = np.array([2.0, 3.0, 4.0]), np.array([1.0, 1.0, 1.0])
    out = agrad.nn.functional.batch_norm(agrad.zeros(0, 3, dtype=agrad.float64), None, None, agrad.tensor(w),
                                         agrad.tensor(b), training=True)
    assert out.shape == (0, 3)


# -- random functions ------------------------------------------------------------------------

_SELU_ALPHA = 1.7580993408473766


def _alpha_values(p: float, x: float) -> tuple[float, float]:
    """(dropped, kept) values of alpha dropout at ``x``: PyTorch's affine correction."""
    a = 1 / math.sqrt((_SELU_ALPHA ** 2 * p + 1) * (1 - p))
    return -_SELU_ALPHA * a + _SELU_ALPHA * a * p, x * a + _SELU_ALPHA * a * p


@pytest.mark.parametrize(("name", "shape", "per"), [
    ("dropout1d", (4, 6, 5), (4, 6, 1)), ("dropout1d", (6, 5), (6, 1)),
    ("dropout2d", (4, 6, 3, 2), (4, 6, 1, 1)), ("dropout3d", (2, 6, 2, 2, 2), (2, 6, 1, 1, 1)),
    ("dropout3d", (6, 2, 2, 2), (6, 1, 1, 1)), ("feature_alpha_dropout", (4, 6, 3), (4, 6, 1)),
    ("alpha_dropout", (4, 6), (4, 6)),
])
def test_channel_dropout_draws_one_value_per_channel(name: str, shape: tuple[int, ...], per: tuple[int, ...]) -> None:
    """Each channel is kept or dropped whole; kept ones are scaled (or, for alpha dropout,
    scaled and shifted) as PyTorch does, dropped ones are 0 (or SELU's saturation value);
    the gradient is the scale where kept, 0 where dropped; ``agrad.manual_seed`` repeats it."""
    F = agrad.nn.functional
    p = 0.4
    x = agrad.full(shape, 2.0, dtype=agrad.float64, requires_grad=True)
    agrad.manual_seed(7)
    out = getattr(F, name)(x, p, True)
    agrad.manual_seed(7)
    np.testing.assert_array_equal(getattr(F, name)(x, p, True).detach().numpy(), out.detach().numpy())
    values = out.detach().numpy()
    if "alpha" in name:
        dropped, kept = _alpha_values(p, 2.0)
        scale = 1 / math.sqrt((_SELU_ALPHA ** 2 * p + 1) * (1 - p))
    else:
        dropped, kept, scale = 0.0, 2.0 / (1 - p), 1 / (1 - p)
    is_kept = np.isclose(values, kept)
    assert np.all(is_kept | np.isclose(values, dropped))
    assert 0 < is_kept.mean() < 1
    within = tuple(i for i, n in enumerate(per) if n == 1 and shape[i] != 1)  # the dimensions of one channel
    assert np.array_equal(is_kept.all(axis=within), is_kept.any(axis=within))
    out.sum().backward_sync()
    np.testing.assert_allclose(x.grad.numpy(), np.where(is_kept, scale, 0.0))


@pytest.mark.parametrize("name", ["dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"])
def test_dropout_family_edge_cases(name: str) -> None:
    F = agrad.nn.functional
    shape = (2, 3, 2, 2, 2) if name == "dropout3d" else (2, 3, 4) if name != "dropout2d" else (2, 3, 2, 2)
    x = agrad.tensor(np.ones(shape), requires_grad=True)
    assert getattr(F, name)(x, 0.5, False) is x
    assert getattr(F, name)(x, 0.0, True) is x
    zeros = getattr(F, name)(x, 1.0, True)
    assert zeros.requires_grad and not zeros.detach().numpy().any()
    y = x * 1.0
    assert getattr(F, name)(y, 0.5, True, True) is y


@pytest.mark.parametrize(("shape", "message"), [((2, 3), "Received a 2-D input to dropout2d"),
                                                ((2, 3, 4), "Received a 3D input to dropout2d")])
def test_dropout2d_warns_like_torch(shape: tuple[int, ...], message: str) -> None:
    with pytest.warns(UserWarning, match=message):
        agrad.nn.functional.dropout2d(agrad.ones(*shape), 0.5)


def test_rrelu_training_draws_slopes() -> None:
    """Non-positive elements get slopes uniform on [lower, upper], which are also
    their gradient; positive ones pass unchanged."""
    x = agrad.tensor(np.concatenate([-np.ones(4000), np.ones(10)]), requires_grad=True)
    agrad.manual_seed(3)
    out = agrad.nn.functional.rrelu(x, 0.1, 0.3, training=True)
    out.sum().backward_sync()
    slopes = -out.detach().numpy()[:4000]
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3
    assert abs(slopes.mean() - 0.2) < 0.01
    np.testing.assert_array_equal(out.detach().numpy()[4000:], 1.0)
    np.testing.assert_allclose(x.grad.numpy()[:4000], slopes)
    np.testing.assert_array_equal(x.grad.numpy()[4000:], 1.0)
    agrad.manual_seed(3)
    np.testing.assert_array_equal(agrad.nn.functional.rrelu(x, 0.1, 0.3, training=True).detach().numpy(),
                                  out.detach().numpy())


@pytest.mark.parametrize("hard", [False, True])
def test_gumbel_softmax(hard: bool) -> None:
    """Samples are distributions over ``dim`` (one-hot with ``hard``), whose gradient
    is the soft sample's, and they follow ``softmax(logits)`` in frequency."""
    F = agrad.nn.functional
    logits = agrad.tensor(np.log([[0.7, 0.2, 0.1]] * 3000), requires_grad=True)
    agrad.manual_seed(5)
    y = F.gumbel_softmax(logits, tau=0.5, hard=hard)
    values = y.detach().numpy()
    np.testing.assert_allclose(values.sum(axis=-1), 1.0)
    if hard:
        assert set(np.unique(values)) <= {0.0, 1.0}
        assert abs(values.mean(axis=0)[0] - 0.7) < 0.03
    agrad.manual_seed(5)
    soft = F.gumbel_softmax(logits, tau=0.5)
    w = agrad.tensor(np.random.default_rng(0).standard_normal(values.shape))
    (y * w).sum().backward_sync()
    grad = logits.grad.numpy().copy()
    logits.grad = None
    (soft * w).sum().backward_sync()
    np.testing.assert_allclose(grad, logits.grad.numpy(), rtol=1e-10, atol=1e-12)
    out0 = F.gumbel_softmax(agrad.tensor(X), dim=0, hard=True).numpy()
    np.testing.assert_array_equal(out0.sum(axis=0), 1.0)


def test_gumbel_softmax_eps_is_deprecated() -> None:
    with pytest.warns(UserWarning, match="`eps` parameter is deprecated"):
        agrad.nn.functional.gumbel_softmax(agrad.tensor(X), eps=1e-5)


def test_sdpa_dropout_keeps_rows_scaled() -> None:
    """Dropout of the attention weights: each weight is kept scaled by 1 / (1 - p) or dropped."""
    F = agrad.nn.functional
    q, k = agrad.tensor(Q), agrad.tensor(K)
    v = agrad.eye(5, dtype=agrad.float64).expand(2, 2, 5, 5)  # the output is the weights themselves
    full = F.scaled_dot_product_attention(q, k, v).numpy()
    agrad.manual_seed(1)
    dropped = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5).numpy()
    kept = dropped != 0
    assert 0 < kept.mean() < 1
    np.testing.assert_allclose(dropped[kept], full[kept] * 2)


# -- composites record the nodes of their last primitive ------------------------------------


def test_composite_nodes_are_their_last_primitives() -> None:
    F = agrad.nn.functional
    x = agrad.tensor(X, requires_grad=True)
    assert F.softsign(x).grad_fn.name() == "DivBackward0"  # as PyTorch's (a composite there too)
    assert F.tanhshrink(x).grad_fn.name() == "SubBackward0"
    assert F.cosine_similarity(x, x + 1).grad_fn.name() == "SumBackward1"
    assert F.rrelu(x).grad_fn.name() == "LeakyReluBackward0"


def test_warnings_do_not_leak() -> None:
    """The composites raise no numpy warnings on their edge values (the suite turns warnings into errors)."""
    F = agrad.nn.functional
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        F.logsigmoid(agrad.tensor(X_EXTREME * 30))
        F.celu(agrad.tensor(X_EXTREME * 30), 0.1)
        F.pdist(agrad.tensor(np.zeros((3, 2))), 0.5)
        F.scaled_dot_product_attention(agrad.tensor(Q), agrad.tensor(K), agrad.tensor(V),
                                       agrad.tensor(np.zeros((3, 5), bool)))
        F.gaussian_nll_loss(agrad.tensor(A), agrad.tensor(B), agrad.tensor(np.zeros((4, 5))))  # var clamped to eps
        F.ctc_loss(agrad.tensor(np.log(np.full((2, 1, 3), 1 / 3))), agrad.tensor([[1, 1]]), (2,), (2,))  # impossible


@requires_torch
def test_ctc_gradient_is_the_derivative_of_log_probs() -> None:
    """Note [CTC in log space]: PyTorch's CtcLossBackward0 returns the gradient for
    the logits of a log_softmax, ``exp(log_probs) - posterior``; agrad's is the
    derivative with respect to ``log_probs``, ``-posterior`` (gradcheck agrees), so
    the two differ by ``exp(log_probs)`` on each sample's valid steps."""
    lp = np.log(np.exp(CTC_LOGITS) / np.exp(CTC_LOGITS).sum(axis=2, keepdims=True))
    ours = agrad.tensor(lp, requires_grad=True)
    agrad.nn.functional.ctc_loss(ours, agrad.tensor(CTC_TARGETS), agrad.tensor(CTC_IN), agrad.tensor(CTC_TGT),
                                 reduction="sum").backward_sync()
    theirs = torch.tensor(lp, requires_grad=True)
    torch.nn.functional.ctc_loss(theirs, torch.tensor(CTC_TARGETS), torch.tensor(CTC_IN), torch.tensor(CTC_TGT),
                                 reduction="sum").backward()
    valid = np.arange(lp.shape[0])[:, None, None] < CTC_IN[None, :, None]
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy() - np.exp(lp) * valid, atol=1e-12)
    assert gradcheck(lambda x: agrad.nn.functional.ctc_loss(x, agrad.tensor(CTC_TARGETS), (6, 5, 6), (3, 2, 3)),
                     [agrad.tensor(lp, requires_grad=True)])
