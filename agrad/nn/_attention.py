"""Attention functions of nn.functional: scaled_dot_product_attention, multi_head_attention_forward.

Composites of table ops (matrix products, softmax, masks), written as PyTorch's
math implementation computes them, so values, gradients and errors are
PyTorch's; their nodes are the last primitive's.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from agrad import _backends, _dtype
from agrad._ops._elementwise import where
from agrad._ops._linalg import bmm, matmul
from agrad._ops._reductions import softmax
from agrad._ops._shape import cat, constant_pad_nd
from agrad._tensor import Tensor
from agrad.nn._layers import dropout
from agrad.nn._losses import linear

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward"]


def _cpp_name(t: Tensor) -> str:
    return _dtype.CPP_TYPE_NAMES[t.dtype.name]


def _check_sdpa(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None, is_causal: bool,
                enable_gqa: bool) -> None:
    """PyTorch's checks of scaled_dot_product_attention's arguments."""
    if min(query.ndim, key.ndim, value.ndim) < 2:
        raise RuntimeError(f"Expected query, key, and value to all be  at least 2 dimensional, but got query.dim: "
                           f"{query.ndim} key.dim: {key.ndim} and value.dim: {value.ndim} instead.")
    if not query.dtype is key.dtype is value.dtype:
        raise RuntimeError(f"Expected query, key, and value to have the same dtype, but got query.dtype: "
                           f"{_cpp_name(query)} key.dtype: {_cpp_name(key)} and value.dtype: {_cpp_name(value)} "
                           "instead.")
    if attn_mask is not None and not (attn_mask.dtype is _dtype.bool or attn_mask.is_floating_point()
                                      or attn_mask.dtype is query.dtype):
        raise RuntimeError(f"Expected attn_mask dtype to be bool or float or to match query dtype, but got "
                           f"attn_mask.dtype: {_cpp_name(attn_mask)} and  query.dtype: {_cpp_name(query)} instead.")
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    if not query.is_floating_point():
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: float != {_cpp_name(query)}")
    if enable_gqa:
        heads = query.shape[-3] if query.ndim >= 3 else None
        if heads is None:
            raise IndexError("Dimension out of range (expected to be in range of [-2, 1], but got -3)")
        if heads % key.shape[-3] or heads % value.shape[-3]:
            raise RuntimeError("Number of heads in key and value must divide the number of heads in ")


def _repeat_heads(t: Tensor, heads: int) -> Tensor:
    """``t.repeat_interleave(heads // t.size(-3), -3)``: each key/value head serves
    a group of query heads (grouped-query attention)."""
    n = t.shape[-3]
    if n == heads:
        return t
    lead, rest = tuple(t.shape[:-3]), tuple(t.shape[-2:])
    return t.unsqueeze(-3).expand(*lead, n, heads // n, *rest).reshape(*lead, heads, *rest)


def _causal_bias(length: int, source: int, like: Tensor) -> Tensor:
    """0 where query ``i`` may attend key ``j <= i`` (top-left aligned), else -inf."""
    with _backends.on(like.device):
        xp = _backends.array_module(like._data)
        allowed = xp.tril(xp.ones((length, source), dtype=bool))
        return Tensor._make(xp.where(allowed, xp.zeros((), like._data.dtype), -xp.inf).astype(like._data.dtype))


def _bool_bias(mask: Tensor, dtype: np.dtype) -> Tensor:
    """A boolean mask (True: attend) as the additive bias 0 / -inf."""
    with _backends.on(mask.device):
        xp = _backends.array_module(mask._data)
        return Tensor._make(xp.where(mask._data, xp.zeros((), dtype), -xp.inf).astype(dtype))


# Note [Safe softmax]
# ~~~~~~~~~~~~~~~~~~~
# A query whose keys are all masked (its scores all -inf) has no distribution
# to attend with: plain softmax gives NaN.  PyTorch's attention uses
# ``_safe_softmax``, which gives 0 for such rows, and their gradient is 0 too.
# Here the scores of those rows are replaced by 0 *before* the softmax, so the
# softmax never sees a row of -inf and the discarded values are finite: the
# ``where`` after it then sends those rows zero gradient, never NaN.
def _safe_softmax(scores: Tensor) -> Tensor:
    """Softmax over the last dimension, 0 for rows that are all -inf (Note [Safe softmax])."""
    with _backends.on(scores.device):
        data = scores._data
        xp = _backends.array_module(data)
        dead = Tensor._make(xp.all(data == -xp.inf, axis=-1, keepdims=True))
    return where(dead, 0.0, softmax(where(dead, 0.0, scores), -1))


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """``softmax(query @ key.T * scale + bias) @ value`` over the last two dimensions.

    Args:
        query: ``(..., L, E)``; key: ``(..., S, E)``; value: ``(..., S, Ev)`` (the
            leading dimensions broadcast).
        attn_mask: a boolean mask (True: may attend) or an additive float bias,
            broadcastable to ``(..., L, S)``.
        dropout_p: dropout of the attention weights (always applied when > 0,
            from agrad's default generator).
        is_causal: query ``i`` attends keys ``j <= i`` only (no ``attn_mask`` then).
        scale: the scores' factor, ``1 / sqrt(E)`` when None.
        enable_gqa: key and value may have fewer heads (dimension -3) than query,
            each serving a group of query heads.

    Returns:
        ``(..., L, Ev)``.  A query whose keys are all masked gets 0 (Note [Safe softmax]).
    """
    _check_sdpa(query, key, value, attn_mask, is_causal, enable_gqa)
    length, source = query.shape[-2], key.shape[-2]
    # PyTorch's math kernel scales query and key each by sqrt(scale), for stability.
    factor = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    root = math.sqrt(abs(factor))
    q = query * (-root if factor < 0 else root)
    bias = None
    if is_causal:
        bias = _causal_bias(length, source, query)
    elif attn_mask is not None:
        bias = _bool_bias(attn_mask, query._data.dtype) if attn_mask.dtype is _dtype.bool else attn_mask
    if enable_gqa:
        key, value = _repeat_heads(key, query.shape[-3]), _repeat_heads(value, query.shape[-3])
    scores = matmul(q, key.transpose(-2, -1) * root)
    if bias is not None:
        scores = scores + bias
    weights = _safe_softmax(scores)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p)
    return matmul(weights, value)


# -- multi-head attention ------------------------------------------------------------------


def _mha_shape_check(query: Tensor, key: Tensor, value: Tensor, key_padding_mask: Tensor | None,
                     attn_mask: Tensor | None, num_heads: int) -> bool:
    """PyTorch's checks of the inputs' dimensions; whether the input is batched."""
    if query.ndim == 3:
        if key.ndim != 3 or value.ndim != 3:
            raise AssertionError("For batched (3-D) `query`, expected `key` and `value` to be 3-D but found "
                                 f"{key.ndim}-D and {value.ndim}-D tensors respectively")
        if key_padding_mask is not None and key_padding_mask.ndim != 2:
            raise AssertionError("For batched (3-D) `query`, expected `key_padding_mask` to be `None` or 2-D but "
                                 f"found {key_padding_mask.ndim}-D tensor instead")
        if attn_mask is not None and attn_mask.ndim not in (2, 3):
            raise AssertionError("For batched (3-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D but "
                                 f"found {attn_mask.ndim}-D tensor instead")
        return True
    if query.ndim == 2:
        if key.ndim != 2 or value.ndim != 2:
            raise AssertionError("For unbatched (2-D) `query`, expected `key` and `value` to be 2-D but found "
                                 f"{key.ndim}-D and {value.ndim}-D tensors respectively")
        if key_padding_mask is not None and key_padding_mask.ndim != 1:
            raise AssertionError("For unbatched (2-D) `query`, expected `key_padding_mask` to be `None` or 1-D but "
                                 f"found {key_padding_mask.ndim}-D tensor instead")
        if attn_mask is not None:
            if attn_mask.ndim not in (2, 3):
                raise AssertionError("For unbatched (2-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D "
                                     f"but found {attn_mask.ndim}-D tensor instead")
            expected = (num_heads, query.shape[0], key.shape[0])
            if attn_mask.ndim == 3 and tuple(attn_mask.shape) != expected:
                raise AssertionError(f"Expected `attn_mask` shape to be {expected} but got {_size(attn_mask)}")
        return False
    raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received {query.ndim}-D query "
                         "tensor")


def _size(t: Tensor) -> str:
    return f"torch.Size({list(t.shape)})"


def _canonical_mask(mask: Tensor | None, mask_name: str, other: Tensor | None, other_name: str,
                    target: np.dtype, check_other: bool = True) -> Tensor | None:
    """A boolean mask (True: masked out) as the additive float bias 0 / -inf; a float mask as is."""
    if mask is None:
        return None
    if mask.dtype is not _dtype.bool and not mask.is_floating_point():
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    if check_other and other is not None and other.dtype is not mask.dtype:
        warnings.warn(f"Support for mismatched {mask_name} and {other_name} is deprecated. Use same type for both "
                      "instead.", UserWarning, stacklevel=3)
    if mask.is_floating_point():
        return mask
    with _backends.on(mask.device):
        xp = _backends.array_module(mask._data)
        return Tensor._make(xp.where(mask._data, -xp.inf, xp.zeros((), target)).astype(target))


def _in_projection_packed(q: Tensor, k: Tensor, v: Tensor, w: Tensor, b: Tensor | None) -> tuple[Tensor, ...]:
    """Query, key and value projected by the three blocks of ``w`` (and ``b``): one
    product for self-attention (``q is k is v``), two when ``k is v``."""
    e = q.shape[-1]
    if k is v:
        if q is k:
            proj = linear(q, w, b)
            proj = proj.reshape(*proj.shape[:-1], 3, e)
            return tuple(proj.select(-2, i) for i in range(3))
        w_q, w_kv = w.split([e, 2 * e])
        b_q, b_kv = (None, None) if b is None else b.split([e, 2 * e])
        kv = linear(k, w_kv, b_kv)
        kv = kv.reshape(*kv.shape[:-1], 2, e)
        return linear(q, w_q, b_q), kv.select(-2, 0), kv.select(-2, 1)
    w_q, w_k, w_v = w.chunk(3)
    b_q, b_k, b_v = (None, None, None) if b is None else b.chunk(3)
    return linear(q, w_q, b_q), linear(k, w_k, b_k), linear(v, w_v, b_v)


def _in_projection(q: Tensor, k: Tensor, v: Tensor, w_q: Tensor, w_k: Tensor, w_v: Tensor, b_q: Tensor | None,
                   b_k: Tensor | None, b_v: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """Query, key and value projected by their own weights, with PyTorch's shape checks."""
    eq, ek, ev = q.shape[-1], k.shape[-1], v.shape[-1]
    for name, w, shape in (("query", w_q, (eq, eq)), ("key", w_k, (eq, ek)), ("value", w_v, (eq, ev))):
        if tuple(w.shape) != shape:
            raise AssertionError(f"expecting {name} weights shape of {shape}, but got {_size(w)}")
    for name, bias in (("query", b_q), ("key", b_k), ("value", b_v)):
        if bias is not None and tuple(bias.shape) != (eq,):
            raise AssertionError(f"expecting {name} bias shape of {(eq,)}, but got {_size(bias)}")
    return linear(q, w_q, b_q), linear(k, w_k, b_k), linear(v, w_v, b_v)


def _static(t: Tensor, name: str, heads: int, head_dim: int) -> Tensor:
    if t.shape[0] != heads:
        raise AssertionError(f"expecting {name}.size(0) of {heads}, but got {t.shape[0]}")
    if t.shape[2] != head_dim:
        raise AssertionError(f"expecting {name}.size(2) of {head_dim}, but got {t.shape[2]}")
    return t


def multi_head_attention_forward(
    query: Tensor, key: Tensor, value: Tensor, embed_dim_to_check: int, num_heads: int,
    in_proj_weight: Tensor | None, in_proj_bias: Tensor | None, bias_k: Tensor | None, bias_v: Tensor | None,
    add_zero_attn: bool, dropout_p: float, out_proj_weight: Tensor, out_proj_bias: Tensor | None,
    training: bool = True, key_padding_mask: Tensor | None = None, need_weights: bool = True,
    attn_mask: Tensor | None = None, use_separate_proj_weight: bool = False, q_proj_weight: Tensor | None = None,
    k_proj_weight: Tensor | None = None, v_proj_weight: Tensor | None = None, static_k: Tensor | None = None,
    static_v: Tensor | None = None, average_attn_weights: bool = True, is_causal: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """The forward of ``nn.MultiheadAttention``, step for step as PyTorch's.

    ``query`` is ``(L, N, E)`` (or ``(L, E)`` unbatched), ``key`` and ``value``
    ``(S, N, E_k)`` and ``(S, N, E_v)``: sequence first (the module transposes
    ``batch_first`` inputs).  The inputs are projected (``in_proj_weight``, or
    ``q/k/v_proj_weight`` with ``use_separate_proj_weight``), split into
    ``num_heads`` heads, optionally extended by ``bias_k``/``bias_v`` and a
    zero key (``add_zero_attn``) or replaced by ``static_k``/``static_v``; then
    attention with ``attn_mask`` and ``key_padding_mask`` (True or -inf: masked
    out), dropout in training, and the output projection.

    Returns:
        The output ``(L, N, E)``, and with ``need_weights`` the attention weights
        ``(N, L, S)`` (averaged over heads) or ``(N, num_heads, L, S)``, else None.
    """
    is_batched = _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not is_batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    target = query._data.dtype
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask", attn_mask, "attn_mask", target)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                           "method `generate_square_subsequent_mask` to create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None  # the hint alone goes to scaled_dot_product_attention
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", target, check_other=False)
        if key_padding_mask is not None:
            is_causal = False  # the merged mask is no longer causal
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(f"key's sequence and batch dims torch.Size({list(key.shape[:2])}) do not match "
                                 f"value's torch.Size({list(value.shape[:2])})")
    elif tuple(key.shape) != tuple(value.shape):
        raise AssertionError(f"key shape {_size(key)} does not match value shape {_size(value)}")

    # in-projection
    if not use_separate_proj_weight:
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        q, k, v = _in_projection_packed(query, key, value, in_proj_weight, in_proj_bias)
    else:
        for name, w in (("q", q_proj_weight), ("k", k_proj_weight), ("v", v_proj_weight)):
            if w is None:
                raise AssertionError(f"use_separate_proj_weight is True but {name}_proj_weight is None")
        assert q_proj_weight is not None and k_proj_weight is not None and v_proj_weight is not None
        b_q, b_k, b_v = (None, None, None) if in_proj_bias is None else in_proj_bias.chunk(3)
        q, k, v = _in_projection(query, key, value, q_proj_weight, k_proj_weight, v_proj_weight, b_q, b_k, b_v)

    # the attention mask as (1 or N * heads, L, S)
    if attn_mask is not None:
        if attn_mask.ndim == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise RuntimeError(f"The shape of the 2D attn_mask is {_size(attn_mask)}, but should be "
                                   f"{(tgt_len, src_len)}.")
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.ndim == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError(f"The shape of the 3D attn_mask is {_size(attn_mask)}, but should be "
                                   f"{(bsz * num_heads, tgt_len, src_len)}.")
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.ndim} is not supported")

    # the learnt extra key and value
    if bias_k is not None and bias_v is not None:
        if static_k is not None:
            raise AssertionError("bias cannot be added to static key.")
        if static_v is not None:
            raise AssertionError("bias cannot be added to static value.")
        k = cat([k, bias_k.repeat(1, bsz, 1)])
        v = cat([v, bias_v.repeat(1, bsz, 1)])
        if attn_mask is not None:
            attn_mask = constant_pad_nd(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = constant_pad_nd(key_padding_mask, (0, 1))
    elif bias_k is not None:
        raise AssertionError("bias_k is set but bias_v is None")
    elif bias_v is not None:
        raise AssertionError("bias_v is set but bias_k is None")

    # heads into the batch: (N * heads, L or S, head_dim)
    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = (k.reshape(k.shape[0], bsz * num_heads, head_dim).transpose(0, 1) if static_k is None
         else _static(static_k, "static_k", bsz * num_heads, head_dim))
    v = (v.reshape(v.shape[0], bsz * num_heads, head_dim).transpose(0, 1) if static_v is None
         else _static(static_v, "static_v", bsz * num_heads, head_dim))

    if add_zero_attn:
        zeros = Tensor._make(_backends.zeros((bsz * num_heads, 1, head_dim), k._data.dtype, k.device))
        k = cat([k, zeros], dim=1)
        v = cat([v, zeros.to(v.dtype)], dim=1)
        if attn_mask is not None:
            attn_mask = constant_pad_nd(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = constant_pad_nd(key_padding_mask, (0, 1))
    src_len = k.shape[1]

    # merge the key padding mask into the attention mask
    if key_padding_mask is not None:
        if key_padding_mask.shape[0] != bsz:
            raise AssertionError(f"Expected key_padded_mask.shape[0] to be {bsz}, but got {key_padding_mask.shape[0]}")
        if key_padding_mask.shape[1] != src_len:
            raise AssertionError(f"Expected key_padded_mask.shape[1] to be {src_len}, but got "
                                 f"{key_padding_mask.shape[1]}")
        key_padding_mask = (key_padding_mask.reshape(bsz, 1, 1, src_len).expand(-1, num_heads, -1, -1)
                            .reshape(bsz * num_heads, 1, src_len))
        attn_mask = key_padding_mask if attn_mask is None else attn_mask + key_padding_mask

    if not training:
        dropout_p = 0.0

    if need_weights:
        if is_causal and attn_mask is None:
            raise AssertionError("FIXME: is_causal not implemented for need_weights")
        scores = bmm(q * math.sqrt(1.0 / float(head_dim)), k.transpose(-2, -1))
        if attn_mask is not None:
            scores = attn_mask + scores  # baddbmm
        weights = softmax(scores, -1)
        if dropout_p > 0.0:
            weights = dropout(weights, p=dropout_p)
        out = bmm(weights, v).transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
        out = linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, -1)
        weights = weights.reshape(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            weights = weights.mean(dim=1)
        if not is_batched:
            out, weights = out.squeeze(1), weights.squeeze(0)
        return out, weights

    if attn_mask is not None:
        if attn_mask.shape[0] == 1 and attn_mask.ndim == 3:
            attn_mask = attn_mask.unsqueeze(0)
        else:
            attn_mask = attn_mask.reshape(bsz, num_heads, -1, src_len)
    q = q.reshape(bsz, num_heads, tgt_len, head_dim)
    k = k.reshape(bsz, num_heads, src_len, head_dim)
    v = v.reshape(bsz, num_heads, src_len, head_dim)
    out = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
    out = linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, -1)
    if not is_batched:
        out = out.squeeze(1)
    return out, None

