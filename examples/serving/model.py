"""The served model: an MLP 784-1024-1024-1024-10 and the two per-request gradient computations.

The weights are drawn once per process from ``numpy.random.default_rng(0)``
with ``torch.nn.Linear``'s initialisation (weight and bias uniform in
``±1/sqrt(fan_in)``) and shared, read-only, by every request: agrad and
PyTorch get the same numbers, as tensors with ``requires_grad=False``.

Two computations, each written once per library as a plain synchronous
function, plus a numpy reference (forward and hand-written backward) that
checks their answers:

* **saliency** — the gradient of the top logit of each row w.r.t. the input:
  ``x.requires_grad_()``, ``top = mlp(x).max(dim=1).values.sum()``,
  answer ``d top / d x`` (batch, 784) float32.
* **test-time adaptation** (tta) — a private copy of the last layer's weight
  and bias, one SGD step (lr 0.1) on the mean prediction entropy of
  ``softmax(logits)`` over the request's batch, answer the adapted logits
  (batch, 10) float32.  The shared weights are never touched.

For agrad each computation is one synchronous function; the awaited form
runs it with ``agrad.cooperative``, so both share every line of model code.

PyTorch is imported lazily: the agrad functions work without it.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np

import agrad
import agrad.nn.functional as F

if TYPE_CHECKING:
    import torch

__all__ = [
    "IN_FEATURES", "N_CLASSES", "SIZES", "TTA_LR", "Weights", "weights",
    "saliency_agrad_sync", "saliency_agrad", "tta_agrad_sync", "tta_agrad",
    "saliency_torch", "tta_torch", "saliency_reference", "tta_reference", "checkable_inputs",
]

SIZES = (784, 1024, 1024, 1024, 10)
IN_FEATURES, N_CLASSES = SIZES[0], SIZES[-1]
TTA_LR = 0.1

Weights = tuple[tuple[np.ndarray, np.ndarray], ...]
"""``((weight, bias), ...)`` per layer, weight ``(fan_out, fan_in)`` float32 as in ``torch.nn.Linear``."""


@functools.cache
def weights() -> Weights:
    """The shared weights as numpy arrays, built once per process (seed 0).

    The arrays are made read-only: any attempt to change them in place raises.
    """
    rng = np.random.default_rng(0)
    layers = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:]):
        bound = 1.0 / np.sqrt(fan_in)
        weight = rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32)
        bias = rng.uniform(-bound, bound, fan_out).astype(np.float32)
        weight.flags.writeable = bias.flags.writeable = False
        layers.append((weight, bias))
    return tuple(layers)


# -- agrad -------------------------------------------------------------------------------------


@functools.cache
def _agrad_weights() -> tuple[tuple[agrad.Tensor, agrad.Tensor], ...]:
    return tuple((agrad.tensor(w), agrad.tensor(b)) for w, b in weights())


def _features_agrad(x: agrad.Tensor) -> agrad.Tensor:
    """The last hidden layer's activations (every layer but the output one)."""
    for w, b in _agrad_weights()[:-1]:
        x = F.relu(F.linear(x, w, b))
    return x


# Each computation is plain PyTorch-style code, written once: the blocking
# backend calls it in a thread, the awaited backend hands it to
# agrad.cooperative, which runs it on the loop in time slices (its grad_sync
# included, in the same slices), so the handler never blocks the loop.


def saliency_agrad_sync(x: np.ndarray) -> np.ndarray:
    """Saliency with agrad: (batch, 784) float32 -> (batch, 784) float32."""
    xt = agrad.from_numpy(x).requires_grad_()
    w_out, b_out = _agrad_weights()[-1]
    top = F.linear(_features_agrad(xt), w_out, b_out).max(dim=1).values.sum()
    (gx,) = agrad.autograd.grad_sync(top, xt)
    return gx.numpy()


def _mean_entropy_agrad(logits: agrad.Tensor) -> agrad.Tensor:
    log_p = F.log_softmax(logits, dim=1)
    return -(log_p.exp() * log_p).sum(dim=1).mean()


def tta_agrad_sync(x: np.ndarray) -> np.ndarray:
    """Test-time adaptation with agrad: (batch, 784) float32 -> adapted logits (batch, 10)."""
    w_shared, b_shared = _agrad_weights()[-1]
    with agrad.no_grad():  # the shared layers are not adapted: no graph through them
        features = _features_agrad(agrad.from_numpy(x))
    w = w_shared.clone().requires_grad_()
    b = b_shared.clone().requires_grad_()
    loss = _mean_entropy_agrad(F.linear(features, w, b))
    gw, gb = agrad.autograd.grad_sync(loss, (w, b))
    with agrad.no_grad():
        return F.linear(features, w - TTA_LR * gw, b - TTA_LR * gb).numpy()


async def saliency_agrad(x: np.ndarray) -> np.ndarray:
    """Saliency with agrad, awaited: the loop keeps serving other requests meanwhile."""
    return await agrad.cooperative(saliency_agrad_sync, x)


async def tta_agrad(x: np.ndarray) -> np.ndarray:
    """Test-time adaptation with agrad, awaited."""
    return await agrad.cooperative(tta_agrad_sync, x)


# -- PyTorch (imported lazily) -----------------------------------------------------------------


@functools.cache
def _torch_weights() -> tuple[tuple[torch.Tensor, torch.Tensor], ...]:
    import torch

    return tuple((torch.tensor(w), torch.tensor(b)) for w, b in weights())


def _features_torch(x: torch.Tensor) -> torch.Tensor:
    import torch.nn.functional as tF

    for w, b in _torch_weights()[:-1]:
        x = tF.relu(tF.linear(x, w, b))
    return x


def saliency_torch(x: np.ndarray) -> np.ndarray:
    """Saliency with PyTorch: the same computation as ``saliency_agrad_sync``."""
    import torch
    import torch.nn.functional as tF

    w_out, b_out = _torch_weights()[-1]
    xt = torch.from_numpy(x).requires_grad_()
    top = tF.linear(_features_torch(xt), w_out, b_out).max(dim=1).values.sum()
    (gx,) = torch.autograd.grad(top, xt)
    return gx.numpy()


def tta_torch(x: np.ndarray) -> np.ndarray:
    """Test-time adaptation with PyTorch: the same computation as ``tta_agrad_sync``."""
    import torch
    import torch.nn.functional as tF

    w_shared, b_shared = _torch_weights()[-1]
    with torch.no_grad():
        features = _features_torch(torch.from_numpy(x))
    w = w_shared.clone().requires_grad_()
    b = b_shared.clone().requires_grad_()
    log_p = tF.log_softmax(tF.linear(features, w, b), dim=1)
    loss = -(log_p.exp() * log_p).sum(dim=1).mean()
    gw, gb = torch.autograd.grad(loss, (w, b))
    with torch.no_grad():
        return tF.linear(features, w - TTA_LR * gw, b - TTA_LR * gb).numpy()


# -- numpy reference (float64, hand-written backward) ------------------------------------------


def _features_reference(x: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """The last hidden activations and each hidden layer's pre-activation, in float64."""
    h = x.astype(np.float64)
    pre_activations = []
    for w, b in weights()[:-1]:
        z = h @ w.T.astype(np.float64) + b
        pre_activations.append(z)
        h = np.maximum(z, 0.0)
    return h, pre_activations


def saliency_reference(x: np.ndarray) -> np.ndarray:
    """Saliency in numpy float64 with the backward written by hand; returned as float32."""
    h, pre_activations = _features_reference(x)
    w_out, b_out = weights()[-1]
    logits = h @ w_out.T.astype(np.float64) + b_out
    g = np.zeros_like(logits)
    g[np.arange(len(x)), logits.argmax(axis=1)] = 1.0  # d sum(max) / d logits: one-hot at each row's max
    g = g @ w_out.astype(np.float64)
    for (w, _), z in zip(reversed(weights()[:-1]), reversed(pre_activations)):
        g = (g * (z > 0)) @ w.astype(np.float64)
    return g.astype(np.float32)


def tta_reference(x: np.ndarray) -> np.ndarray:
    """Test-time adaptation in numpy float64 with the entropy gradient written by hand; float32 out."""
    h, _ = _features_reference(x)
    w, b = (a.astype(np.float64) for a in weights()[-1])
    z = h @ w.T + b
    log_p = z - z.max(axis=1, keepdims=True)
    log_p -= np.log(np.exp(log_p).sum(axis=1, keepdims=True))
    p = np.exp(log_p)
    entropy = -(p * log_p).sum(axis=1, keepdims=True)
    g = -p * (log_p + entropy) / len(x)  # d mean(H) / d z, H = -sum p log p
    w_new, b_new = w - TTA_LR * (g.T @ h), b - TTA_LR * g.sum(axis=0)
    return (h @ w_new.T + b_new).astype(np.float32)


# Note [Checkable inputs]
# ~~~~~~~~~~~~~~~~~~~~~~~
# A float32 answer agrees with the float64 reference to rtol 1e-4 only where the
# computation is smooth at x: a hidden pre-activation within float32 rounding
# (about 1e-7 here) of 0 may take the other side of the ReLU, and a near-tie of
# the top two logits may pick the other row maximum; either changes the
# saliency by about 1e-4, a correct float32 answer that fails the check.  Among
# uniform [0, 1) rows about 1 in 50 has a pre-activation below 1e-6; such rows
# are drawn again, so every mismatch the check reports is a real one.
_MIN_PRE_ACTIVATION = 1e-6
_MIN_TOP_GAP = 1e-4


def checkable_inputs(batch: int, rng: np.random.Generator) -> np.ndarray:
    """Rows uniform in [0, 1), (batch, 784) float32, each at least a margin away from every kink of the
    model (Note [Checkable inputs]), so that answers can be checked against the references."""
    rows = np.empty((0, IN_FEATURES), np.float32)
    while len(rows) < batch:
        x = rng.random((batch - len(rows), IN_FEATURES), dtype=np.float32)
        h, pre_activations = _features_reference(x)
        w_out, b_out = weights()[-1]
        logits = np.sort(h @ w_out.T.astype(np.float64) + b_out, axis=1)
        keep = (logits[:, -1] - logits[:, -2] >= _MIN_TOP_GAP) & np.all(
            [np.abs(z).min(axis=1) >= _MIN_PRE_ACTIVATION for z in pre_activations], axis=0)
        rows = np.concatenate([rows, x[keep]])
    return rows
