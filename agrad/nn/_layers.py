"""Dropout (elementwise, per channel, alpha), ``layer_norm``, ``embedding``,
``embedding_bag``, ``one_hot`` and ``bilinear`` of ``agrad.nn.functional``.

Composites of table ops (``agrad/_ops/``): their gradients come from the
primitives', so they need no backward rule of their own.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np

from agrad import _backends, _creation, _dtype
from agrad._grad_mode import no_grad
from agrad._ops._elementwise import where
from agrad._ops._linalg import matmul
from agrad._ops._shape import _index
from agrad._ops._sorting import unique
from agrad._tensor import Tensor

__all__ = ["dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout", "layer_norm",
           "embedding", "embedding_bag", "one_hot", "bilinear"]


def _check_p(p: float) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False,
            generator: _creation.Generator | None = None) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``.

    The mask comes from ``generator`` (agrad's default generator when ``None``,
    so ``agrad.manual_seed`` makes it reproducible), drawn on the host and
    copied to ``input``'s device as ``agrad.rand`` is: the same on every device.
    Identity when ``training=False`` or ``p == 0``; all zeros when ``p == 1``.
    """
    _check_p(p)
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


# -- dropout of whole channels, and alpha dropout ------------------------------------

_SELU_ALPHA = 1.7580993408473766  # SELU's negative saturation value, scale * alpha


def _keep_mask(shape: tuple[int, ...], p: float, dt: np.dtype) -> np.ndarray:
    """1 with probability ``1 - p``, else 0, from agrad's default generator on the host
    (so ``agrad.manual_seed`` repeats it on every device)."""
    return (_creation._rng(None).random(shape) >= p).astype(dt)


def _noise_dropout(input: Tensor, p: float, training: bool, inplace: bool, alpha: bool,
                   noise_shape: tuple[int, ...] | None) -> Tensor:
    """PyTorch's ``_dropout_impl``: elementwise (``noise_shape`` None) or with one
    draw per entry of ``noise_shape`` (broadcast over the rest: feature dropout).

    Dropout scales what it keeps by ``1 / (1 - p)``; alpha dropout sets what it
    drops to SELU's saturation value and then scales and shifts everything so
    that a standardised input keeps mean 0 and variance 1.
    """
    _check_p(p)
    if p == 0.0 or not training or input.numel() == 0:
        return input
    dt, dev = input._data.dtype, input.device
    if p == 1.0:
        zero = Tensor._make(_backends.zeros((), dt, dev))
        return input.mul_(zero) if inplace else input * zero
    keep = _keep_mask(input.shape if noise_shape is None else noise_shape, p, dt)
    if not alpha:
        noise = Tensor._make(_backends.transfer(keep * np.asarray(1.0 / (1.0 - p), dt), dev))
        return input.mul_(noise) if inplace else input * noise
    a = 1.0 / math.sqrt((_SELU_ALPHA ** 2 * p + 1) * (1 - p))
    shift = Tensor._make(_backends.transfer(((keep - 1) * (_SELU_ALPHA * a) + _SELU_ALPHA * a * p).astype(dt), dev))
    noise = Tensor._make(_backends.transfer((keep * a).astype(dt), dev))
    return input.mul_(noise).add_(shift) if inplace else input * noise + shift


def _feature_shape(input: Tensor, batched: bool = True) -> tuple[int, ...]:
    """One draw per (sample, channel): the shape of PyTorch's feature noise, for
    ``input`` batched ``(N, C, *)`` or, if not, ``(C, *)`` (noise ``(C, 1, ...)``)."""
    if input.ndim + (0 if batched else 1) < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    lead = 2 if batched else 1
    return tuple(input.shape[:lead]) + (1,) * (input.ndim - lead)


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """Dropout for SELU networks: dropped elements take SELU's negative saturation
    value, and the result is scaled and shifted to keep zero mean and unit variance."""
    return _noise_dropout(input, p, training, inplace, True, None)


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """:func:`alpha_dropout` of whole channels (dimension 1 of ``(N, C, *)``)."""
    _check_p(p)
    if p == 0.0 or not training or input.numel() == 0:
        return input
    return _noise_dropout(input, p, training, inplace, True, _feature_shape(input))


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of ``(N, C, L)`` or ``(C, L)`` with probability ``p``;
    scale the rest by ``1 / (1 - p)``."""
    _check_p(p)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that "
                           "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial dimension, a "
                           "channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    return _channel_dropout(input, p, training, inplace, batched=input.ndim == 3)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of ``(N, C, H, W)`` with probability ``p``; scale the rest
    by ``1 / (1 - p)``.  A 3-D input is taken as ``(N, C, L)``, as PyTorch does (with its warning)."""
    _check_p(p)
    if input.ndim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is deprecated and will result "
                      "in an error in a future release. To retain the behavior and silence this warning, please use "
                      "dropout instead. Note that dropout2d exists to provide channel-wise dropout on inputs with 2 "
                      "spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 3D or 4D "
                      "inputs).", UserWarning, stacklevel=2)
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel dim. "
                      "This behavior will change in a future release to interpret the input as one without a batch "
                      "dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise dropout behavior, please "
                      "switch to using dropout1d instead.", UserWarning, stacklevel=2)
    return _channel_dropout(input, p, training, inplace, batched=True)


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` with probability
    ``p``; scale the rest by ``1 / (1 - p)``."""
    _check_p(p)
    if input.ndim not in (4, 5):
        warnings.warn(f"dropout3d: Received a {input.ndim}-D input to dropout3d, which is deprecated and will result "
                      "in an error in a future release. To retain the behavior and silence this warning, please use "
                      "dropout instead. Note that dropout3d exists to provide channel-wise dropout on inputs with 3 "
                      "spatial dimensions, a channel dimension, and an optional batch dimension (i.e. 4D or 5D "
                      "inputs).", UserWarning, stacklevel=2)
    return _channel_dropout(input, p, training, inplace, batched=input.ndim == 5)


def _channel_dropout(input: Tensor, p: float, training: bool, inplace: bool, batched: bool) -> Tensor:
    if p == 0.0 or not training or input.numel() == 0:
        return input
    return _noise_dropout(input, p, training, inplace, False, _feature_shape(input, batched))


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
    if not input.is_floating_point():
        raise NotImplementedError(
            f'"LayerNormKernelImpl" not implemented for \'{_dtype.SCALAR_TYPE_NAMES[input.dtype.name]}\'')
    dims = tuple(range(input.ndim - k, input.ndim))
    centred = input - input.mean(dim=dims, keepdim=True)
    var = (centred * centred).mean(dim=dims, keepdim=True)
    out = centred * (var + eps) ** -0.5
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


def _embedding_renorm_(weight: Tensor, input: Tensor, max_norm: float, norm_type: float) -> None:
    """Rescale in place, without recording a graph, each row of ``weight`` that ``input`` picks and whose
    ``norm_type``-norm exceeds ``max_norm``, to norm ``max_norm`` (PyTorch's ``embedding_renorm_``, which
    ``nn.functional.embedding`` runs first when given ``max_norm``)."""
    with no_grad():
        rows = unique(input.reshape(-1))
        picked = weight[rows]
        norms = picked.norm(norm_type, dim=1, keepdim=True)
        weight[rows] = picked * where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)


def _scale_grad_by_freq(out: Tensor, input: Tensor) -> None:
    """Divide the gradient reaching each looked-up row of ``out`` by how often its index occurs in ``input``
    (``scale_grad_by_freq``: frequent words get no larger steps than rare ones)."""
    if out.requires_grad:
        _, inverse, counts = unique(input, return_inverse=True, return_counts=True)
        scale = (1.0 / counts.to(out.dtype))[inverse].unsqueeze(-1)
        out.register_hook(lambda grad: grad * scale)


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None, max_norm: float | None = None,
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of ``weight`` picked by the integer ``input``.

    Gradients of repeated indices accumulate; the ``padding_idx`` row gets none.
    With ``max_norm``, the picked rows of ``weight`` whose norm exceeds it are
    first rescaled in place; with ``scale_grad_by_freq``, each row's gradient is
    divided by how often its index occurs in ``input``.
    """
    if sparse:
        raise NotImplementedError("embedding: sparse gradients are not supported (agrad has no sparse tensors)")
    idx = input._data if isinstance(input, Tensor) else _backends.transfer(np.asarray(input), weight.device)
    if idx.dtype.kind not in "iu":
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                           f"Long, Int; but got {_creation.typename(input)} instead (while checking arguments for "
                           "embedding)")
    n = weight.shape[0]
    with _backends.on(weight.device):
        if bool(_backends.array_module(idx).any((idx < 0) | (idx >= n))):
            raise IndexError("index out of range in self")
    if max_norm is not None:
        _embedding_renorm_(weight, input, max_norm, norm_type)
    out = _index(weight, idx, node="EmbeddingBackward0")  # weight[idx], named as PyTorch's embedding
    padding_idx = _padding_index(padding_idx, n, "Padding_idx")
    if padding_idx is not None:
        with _backends.on(weight.device):
            pad = Tensor._make((idx == padding_idx)[..., None])
        # Same values either way; the padding positions read a detached weight, so its row gets no gradient.
        out = where(pad, weight.detach()[idx], out)
    if scale_grad_by_freq:
        _scale_grad_by_freq(out, input)
    return out


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """The int64 one-hot encoding of the class indices ``tensor``: shape ``(*, num_classes)``,
    ``num_classes`` being ``max + 1`` when -1.

    Example::

        >>> import agrad
        >>> agrad.nn.functional.one_hot(agrad.tensor([0, 2]))
        tensor([[1, 0, 0],
                [0, 0, 1]])
    """
    if tensor.dtype is not _dtype.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    idx = tensor._data
    with _backends.on(tensor.device):
        xp = _backends.array_module(idx)
        if idx.size == 0:
            if num_classes <= 0:
                raise RuntimeError("Can not infer total number of classes from empty tensor.")
            return Tensor._make(xp.zeros(idx.shape + (num_classes,), np.int64))
        if int(idx.min()) < 0:
            raise RuntimeError("Class values must be non-negative.")
        top = int(idx.max())
        if num_classes == -1:
            num_classes = top + 1
        elif num_classes <= top:
            raise RuntimeError("Class values must be smaller than num_classes.")
        return Tensor._make((idx[..., None] == xp.arange(num_classes)).astype(np.int64))


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``y[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j] + bias[o]``.

    One matrix product against ``weight`` laid out as ``(in1, out * in2)``, then a
    product with ``input2`` summed over ``in2``: the batch is never looped over.
    """
    if input1.ndim != input2.ndim:
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {input1.ndim} and {input2.ndim}")
    for i in range(input1.ndim - 1):
        if input1.shape[i] != input2.shape[i]:
            raise RuntimeError(f"bilinear(): input batch dimensions do not match at dim {i}: got {input1.shape[i]} "
                               f"and {input2.shape[i]}")
    if input1.shape[-1] != weight.shape[1]:
        raise RuntimeError(f"bilinear(): input1 size does not match weight size: got {input1.shape[-1]} but "
                           f"expected {weight.shape[1]}")
    if input2.shape[-1] != weight.shape[2]:
        raise RuntimeError(f"bilinear(): input2 size does not match weight size: got {input2.shape[-1]} but "
                           f"expected {weight.shape[2]}")
    if bias is not None and bias.shape[0] != weight.shape[0]:
        raise RuntimeError(f"bilinear(): bias size does not match weight size: got {bias.shape[0]} but expected "
                           f"{weight.shape[0]}")
    n_out, n1, n2 = weight.shape
    batch = tuple(input1.shape[:-1])
    rows = int(np.prod(batch))
    left = matmul(input1.reshape(rows, n1), weight.permute(1, 0, 2).reshape(n1, n_out * n2))
    out = (left.reshape(rows, n_out, n2) * input2.reshape(rows, 1, n2)).sum(dim=2)
    if bias is not None:
        out = out + bias
    return out.reshape(batch + (n_out,))


def _padding_index(padding_idx: int | None, n: int, name: str = "padding_idx") -> int | None:
    """``padding_idx`` as a row number (negative counts from the end), with PyTorch's
    assertion (``embedding`` spells the argument ``Padding_idx`` in it)."""
    if padding_idx is None:
        return None
    if not -n <= padding_idx < n:  # PyTorch asserts; checked here under ``python -O`` too
        raise AssertionError(f"{name} must be within num_embeddings")
    if padding_idx < 0:
        padding_idx += n
    return padding_idx


def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None, max_norm: float | None = None,
                  norm_type: float = 2, scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Tensor | None = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Tensor:
    """The sum, mean or max of the rows of ``weight`` picked by each bag of ``input``.

    Bags are the rows of a 2-D ``input``, or the slices of a 1-D ``input`` that
    start at ``offsets`` (with ``include_last_offset`` the last offset ends the
    last bag).  ``per_sample_weights`` scale the rows (``mode='sum'`` only);
    entries equal to ``padding_idx`` are left out (and not counted by the
    mean); an empty bag gives zeros.  Every bag is reduced at once: a scatter-add
    of the rows by bag, or for ``'max'`` a maximum over the bags padded to the
    longest one.
    """
    if per_sample_weights is not None and tuple(input.shape) != tuple(per_sample_weights.shape):
        raise ValueError(f"embedding_bag: If per_sample_weights (torch.Size({list(per_sample_weights.shape)})) is not "
                         f"None, then it must have the same shape as the input (torch.Size({list(input.shape)}))")
    if weight.ndim != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.ndim}")
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             f"fixed length sequences. However, found offsets of type {type(offsets)}")
        starts = np.arange(0, input.numel(), max(input.shape[1], 1), dtype=np.int64)[: input.shape[0]]
        input = input.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.ndim != 1:
            raise ValueError("offsets has to be a 1D Tensor")
        starts = np.asarray(offsets.tolist(), dtype=np.int64)
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")
    if mode == "max" and scale_grad_by_freq:
        raise ValueError("max mode does not support scaling the gradient by the frequency")
    if mode == "max" and sparse:
        raise ValueError("max mode does not support sparse weights")
    if sparse:
        raise NotImplementedError("embedding_bag: sparse gradients are not supported (agrad has no sparse tensors)")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError("embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  f"supported for mode='sum' (got mode='{mode}'). Please open a feature request on "
                                  "GitHub.")
    if input.dtype not in (_dtype.int64, _dtype.int32):
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                           f"Long, Int; but got torch.{_dtype.SCALAR_TYPE_NAMES[input.dtype.name]}Tensor instead "
                           "(while checking arguments for embedding_bag)")
    idx = np.asarray(input.tolist(), dtype=np.int64).reshape(-1)
    n, rows_total = idx.size, weight.shape[0]
    if starts.size and starts[0] != 0:
        raise RuntimeError("offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from "
                           f"position 0. However, got {starts[0]}")
    if starts.size and starts[-1] > n:
        raise RuntimeError(f"offsets[-1] can not be greater than input's length {n} but got offsets[-1] of "
                           f"{starts[-1]}")
    if np.any(np.diff(starts) < 0) or np.any((idx < 0) | (idx >= rows_total)):
        raise RuntimeError("embedding_bag: offsets must not decrease and indices must be within num_embeddings")
    pad = _padding_index(padding_idx, rows_total)
    ends = np.append(starts[1:], n)
    if include_last_offset:
        starts, ends = starts[:-1], starts[1:]
    bags = starts.size
    bag_of = np.clip(np.searchsorted(starts, np.arange(n), side="right") - 1, 0, max(bags - 1, 0))
    kept = (np.arange(n) < (ends[bag_of] if bags else 0)) & (idx != pad)
    dev = weight.device

    def const(a: np.ndarray) -> Tensor:
        return Tensor._make(_backends.transfer(np.ascontiguousarray(a), dev))

    if max_norm is not None:
        _embedding_renorm_(weight, input, max_norm, norm_type)
    rows = weight[const(idx)]
    if scale_grad_by_freq:
        _scale_grad_by_freq(rows, input.reshape(-1))
    lengths = ends - starts
    if mode == "max" and bags and lengths.max() > 0:
        slots = np.arange(lengths.max())
        in_bag = slots < lengths[:, None]
        where_from = np.where(in_bag, starts[:, None] + slots, 0)
        live = in_bag & (idx[where_from] != pad) if n else in_bag
        best = where(const(live[..., None]), rows[const(where_from)], -math.inf).max(dim=1).values
        return where(const(np.any(live, axis=1, keepdims=True)), best, 0.0)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.reshape(-1, 1)
    rows = where(const(kept[:, None]), rows, 0.0)
    zeros = Tensor._make(_backends.zeros((bags, weight.shape[1]), weight._data.dtype, dev))
    total = zeros.scatter_add(0, const(np.broadcast_to(bag_of[:, None], (n, weight.shape[1]))), rows)
    if mode == "mean":
        counts = np.bincount(bag_of[kept], minlength=bags)
        total = total / const(np.maximum(counts, 1).astype(weight._data.dtype)[:, None])
    return total
