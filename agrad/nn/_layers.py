"""``dropout``, ``layer_norm`` and ``embedding`` of ``agrad.nn.functional``.

Composites of table ops (``agrad/_ops/``): their gradients come from the
primitives', so they need no backward rule of their own.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from agrad import _backends, _creation
from agrad._ops._elementwise import where
from agrad._tensor import Tensor

__all__ = ["dropout", "layer_norm", "embedding"]


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False,
            generator: _creation.Generator | None = None) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``.

    The mask comes from ``generator`` (agrad's default generator when ``None``,
    so ``agrad.manual_seed`` makes it reproducible), drawn on the host and
    copied to ``input``'s device as ``agrad.rand`` is: the same on every device.
    Identity when ``training=False`` or ``p == 0``; all zeros when ``p == 1``.
    """
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    dt, dev = input._data.dtype, input.device
    if p == 1.0:
        scale = _backends.zeros(input.shape, dt, dev)
    else:
        rng = (generator if generator is not None else _creation.default_generator)._rng
        keep = rng.random(input.shape) >= p
        scale = _backends.transfer(keep.astype(dt) * np.asarray(1.0 / (1.0 - p), dt), dev)
    mask = Tensor._make(scale)
    return input.mul_(mask) if inplace else input * mask


def layer_norm(input: Tensor, normalized_shape: int | Sequence[int], weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise over the trailing ``normalized_shape`` dimensions (biased variance), then scale and shift."""
    shape = (int(normalized_shape),) if isinstance(normalized_shape, (int, np.integer)) else tuple(
        int(s) for s in normalized_shape)
    k = len(shape)
    if k == 0 or input.ndim < k or tuple(input.shape[input.ndim - k:]) != shape:
        raise RuntimeError(f"Given normalized_shape={list(shape)}, expected input with shape "
                           f"[*, {', '.join(str(s) for s in shape)}], but got input of size{list(input.shape)}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != shape:
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but got {name} of "
                               f"shape {list(t.shape)} and normalized_shape = {list(shape)}")
    dims = tuple(range(input.ndim - k, input.ndim))
    centred = input - input.mean(dim=dims, keepdim=True)
    var = (centred * centred).mean(dim=dims, keepdim=True)
    out = centred * (var + eps) ** -0.5
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None, max_norm: float | None = None,
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of ``weight`` picked by the integer ``input``.

    Gradients of repeated indices accumulate; the ``padding_idx`` row gets none.
    """
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: max_norm, scale_grad_by_freq and sparse are not supported")
    idx = input._data if isinstance(input, Tensor) else _backends.transfer(np.asarray(input), weight.device)
    if idx.dtype.kind not in "iu":
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                           f"Long, Int; but got {idx.dtype} instead (while checking arguments for embedding)")
    n = weight.shape[0]
    with _backends.on(weight.device):
        if bool(_backends.array_module(idx).any((idx < 0) | (idx >= n))):
            raise IndexError("index out of range in self")
    out = weight[idx]
    if padding_idx is None:
        return out
    if padding_idx > 0:
        assert padding_idx < n, "Padding_idx must be within num_embeddings"
    elif padding_idx < 0:
        assert padding_idx >= -n, "Padding_idx must be within num_embeddings"
        padding_idx += n
    with _backends.on(weight.device):
        pad = Tensor._make((idx == padding_idx)[..., None])
    # Same values either way; the padding positions read a detached weight, so its row gets no gradient.
    return where(pad, weight.detach()[idx], out)
