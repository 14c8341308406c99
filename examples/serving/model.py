"""The served model: an MLP 784-1024-1024-1024-10 and the two per-request gradient computations.

The weights are drawn once per process from ``numpy.random.default_rng(0)``
with ``torch.nn.Linear``'s initialisation (weight and bias uniform in
``±1/sqrt(fan_in)``) and shared, read-only, by every request: agrad and
PyTorch get the same numbers, as tensors with ``requires_grad=False``.
agrad's model is an ``agrad.nn.Sequential`` of ``Linear`` and ``ReLU``
layers (:func:`mlp`) whose weights come from a checkpoint, as a served
model's do: the weights are written once per process to a safetensors file
in a temporary directory (a plain ``state_dict``-keyed file, as PyTorch or
any other library writes one) and loaded with ``agrad.load`` and
``load_state_dict``.

Two computations, each written once per library as a plain synchronous
function, plus a numpy reference (forward and hand-written backward) that
checks their answers:

* **saliency** — the gradient of the top logit of each row w.r.t. the input:
  ``x.requires_grad_()``, ``top = mlp(x).max(dim=1).values.sum()``,
  answer ``d top / d x`` (batch, 784) float32.
* **test-time adaptation** (tta) — one SGD step (lr 0.1) on the last layer's
  weight and bias for the mean prediction entropy of ``softmax(logits)`` over
  the request's batch, answer the adapted logits (batch, 10) float32.  The
  shared weights are never touched: agrad runs the last layer with the
  request's own tensors through ``agrad.func.functional_call`` (on a private
  copy of the layer, so concurrent requests never see each other's weights)
  and differentiates it with ``agrad.func.grad_sync``; PyTorch uses a private
  copy of the last layer's weight and bias.

For agrad each computation is one synchronous function; the awaited form
runs it with ``agrad.cooperative``, so both share every line of model code.

PyTorch is imported lazily: the agrad functions work without it.
"""

from __future__ import annotations

import functools
import os
import tempfile
from typing import TYPE_CHECKING

import numpy as np

import agrad
import agrad.nn.functional as F

if TYPE_CHECKING:
    import torch

__all__ = [
    "IN_FEATURES", "N_CLASSES", "SIZES", "TTA_LR", "Weights", "weights", "mlp",
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
def _checkpoint_dir() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="agrad-serving-")  # removed when the process exits


@functools.cache
def _checkpoint() -> str:
    """A safetensors file of the shared weights keyed as :func:`mlp`'s ``state_dict``
    (``0.weight``, ``0.bias``, ``2.weight``, ...), written once per process."""
    from safetensors.numpy import save_file

    path = os.path.join(_checkpoint_dir().name, "mlp.safetensors")
    save_file({f"{2 * i}.{name}": array for i, (w, b) in enumerate(weights())
               for name, array in (("weight", w), ("bias", b))}, path)
    return path


@functools.cache
def mlp() -> agrad.nn.Sequential:
    """agrad's model, built once per process: ``Sequential(Linear, ReLU, ..., Linear)`` with
    the weights loaded from the checkpoint; its parameters do not require grad (they are
    shared by every request and never trained)."""
    layers: list[agrad.nn.Module] = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:]):
        layers += [agrad.nn.Linear(fan_in, fan_out), agrad.nn.ReLU()]
    model = agrad.nn.Sequential(*layers[:-1])
    model.load_state_dict(agrad.load(_checkpoint()))
    return model.requires_grad_(False).eval()


@functools.cache
def _hidden_layers() -> agrad.nn.Sequential:
    """Every layer of :func:`mlp` but the output one (the same modules, sliced once)."""
    return mlp()[:-1]


# Each computation is plain PyTorch-style code, written once: the blocking
# backend calls it in a thread, the awaited backend hands it to
# agrad.cooperative, which runs it on the loop in time slices (its grad_sync
# included, in the same slices), so the handler never blocks the loop.


def saliency_agrad_sync(x: np.ndarray) -> np.ndarray:
    """Saliency with agrad: (batch, 784) float32 -> (batch, 784) float32."""
    xt = agrad.from_numpy(x).requires_grad_()
    top = mlp()(xt).max(dim=1).values.sum()
    (gx,) = agrad.autograd.grad_sync(top, xt)
    return gx.numpy()


def _mean_entropy_agrad(logits: agrad.Tensor) -> agrad.Tensor:
    log_p = F.log_softmax(logits, dim=1)
    return -(log_p.exp() * log_p).sum(dim=1).mean()


def _head_entropy_agrad(params: dict[str, agrad.Tensor], features: agrad.Tensor) -> agrad.Tensor:
    """The mean prediction entropy of the output layer run with ``params`` in place of its own."""
    return _mean_entropy_agrad(agrad.func.functional_call(mlp()[-1], params, (features,)))


def tta_agrad_sync(x: np.ndarray) -> np.ndarray:
    """Test-time adaptation with agrad: (batch, 784) float32 -> adapted logits (batch, 10)."""
    head = mlp()[-1]
    with agrad.no_grad():  # the shared layers are not adapted: no graph through them
        features = _hidden_layers()(agrad.from_numpy(x))
    shared = dict(head.named_parameters())  # read, never written
    grads = agrad.func.grad_sync(_head_entropy_agrad)(shared, features)
    adapted = {name: p - TTA_LR * grads[name] for name, p in shared.items()}
    with agrad.no_grad():
        return agrad.func.functional_call(head, adapted, (features,)).numpy()


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
