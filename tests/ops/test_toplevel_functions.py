"""The ``torch.*`` spellings of ``nn.functional`` functions (agrad/nn/_toplevel.py):
PyTorch's top-level signatures, values and gradients."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
from tests.helpers import requires_torch, torch

_rng = np.random.default_rng(3)
X = _rng.standard_normal((2, 3, 4))
W = _rng.uniform(0.5, 1.5, 4)
B = _rng.standard_normal(4)
C = _rng.uniform(0.5, 1.5, 3)
LOGP = np.log(_rng.dirichlet(np.ones(4), size=3))
P = _rng.dirichlet(np.ones(4), size=3)
Y = _rng.standard_normal((3, 4))
SIGN = np.array([1.0, -1.0, 1.0])
TABLE = _rng.standard_normal((5, 3))

# name -> (call(lib, *tensors), arrays)
CASES: dict[str, tuple[Callable[..., Any], tuple[np.ndarray, ...]]] = {
    "dropout-eval": (lambda lib, x: lib.dropout(x, 0.5, False), (X,)),
    "alpha_dropout-eval": (lambda lib, x: lib.alpha_dropout(x, 0.5, False), (X,)),
    "feature_alpha_dropout-eval": (lambda lib, x: lib.feature_alpha_dropout(x, 0.5, False), (X,)),
    "feature_dropout-eval": (lambda lib, x: lib.feature_dropout(x, 0.5, False), (X,)),
    "layer_norm": (lambda lib, x, w, b: lib.layer_norm(x, [4], w, b, 1e-5, True), (X, W, B)),
    "group_norm": (lambda lib, x, c: lib.group_norm(x, 1, c, None, 1e-5, True), (X, C)),
    "batch_norm": (lambda lib, x, c: lib.batch_norm(x, c, None, None, None, True, 0.1, 1e-5, True), (X, C)),
    "instance_norm": (lambda lib, x: lib.instance_norm(x, None, None, None, None, True, 0.1, 1e-5, True), (X,)),
    "rms_norm": (lambda lib, x, w: lib.rms_norm(x, [4], w), (X, W)),
    "embedding": (lambda lib, t: lib.embedding(t, lib.tensor([[0, 2], [4, 4]])), (TABLE,)),
    "embedding-padding": (lambda lib, t: lib.embedding(t, lib.tensor([0, 2, 2]), 2), (TABLE,)),
    "kl_div-none": (lambda lib, a, b: lib.kl_div(a, b, 0), (LOGP, P)),
    "kl_div-mean": (lambda lib, a, b: lib.kl_div(a, b, 1), (LOGP, P)),
    "kl_div-sum-log-target": (lambda lib, a, b: lib.kl_div(a, b, 2, log_target=True), (LOGP, np.log(P))),
    "bce_with_logits": (lambda lib, a, b: lib.binary_cross_entropy_with_logits(a, b, None, None, 1), (Y, P)),
    "margin_ranking": (lambda lib, a, b: lib.margin_ranking_loss(a[:, 0], b[:, 0], lib.tensor(SIGN), 0.1, 2),
                       (Y, P)),
    "hinge_embedding": (lambda lib, a: lib.hinge_embedding_loss(a[:, 0], lib.tensor(SIGN), 1.0, 1), (Y,)),
    "cosine_embedding": (lambda lib, a, b: lib.cosine_embedding_loss(a, b, lib.tensor(SIGN), 0.0, 0), (Y, P)),
    "poisson_nll": (lambda lib, a, b: lib.poisson_nll_loss(a, b, True, False, 1e-8, 1), (Y, P)),
    "triplet_margin": (lambda lib, a, b, c: lib.triplet_margin_loss(a, b, c, 1.0, 2, 1e-6, False, 1), (Y, P, -Y)),
}


def _tensors(lib: Any, arrays: tuple[np.ndarray, ...]) -> list[Any]:
    return [lib.tensor(a, requires_grad=True) for a in arrays]


@requires_torch
@pytest.mark.parametrize("name", list(CASES))
def test_matches_torch(name: str) -> None:
    call, arrays = CASES[name]
    ours, theirs = _tensors(agrad, arrays), _tensors(torch, arrays)
    a, t = call(agrad, *ours), call(torch, *theirs)
    np.testing.assert_allclose(a.detach().numpy(), t.detach().numpy(), rtol=1e-10, atol=1e-12)
    a.sum().backward_sync()
    t.sum().backward()
    for x, tx in zip(ours, theirs):
        if tx.grad is not None:
            np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_in_place_dropout_in_eval_returns_its_input() -> None:
    x = agrad.randn(3, 4)
    assert agrad.dropout_(x, 0.5, False) is x
