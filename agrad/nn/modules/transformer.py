"""Attention and transformer layers (mirrors ``torch.nn.MultiheadAttention`` and ``torch.nn.modules.transformer``).

:class:`MultiheadAttention` owns the projection weights and calls
``agrad.nn.functional.multi_head_attention_forward``;
:class:`TransformerEncoderLayer` and :class:`TransformerDecoderLayer` wrap it
with a feed-forward block, LayerNorms and dropout, :class:`TransformerEncoder`
and :class:`TransformerDecoder` stack deep copies of one layer, and
:class:`Transformer` joins an encoder and a decoder.  Parameter names, their
registration order (hence ``state_dict`` keys), initialisation and errors are
PyTorch's.

PyTorch also has "fast paths" (``torch._native_multi_head_attention``, nested
tensors in ``TransformerEncoder``) that it takes in inference, when nothing
requires grad; they are optimisations of the same computation, so agrad always
runs the composite one and accepts their switches (``enable_nested_tensor``,
``mask_check``) without acting on them.  One visible difference: PyTorch's
nested-tensor path gives 0 at the padded positions of ``src_key_padding_mask``
(before the encoder's final norm), where agrad gives whatever the layers compute
there; those positions carry no information either way.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from agrad._creation import empty, full
from agrad._tensor import Tensor
from agrad.nn import functional as F
from agrad.nn import init
from agrad.nn._attention import _canonical_mask
from agrad.nn.modules.container import ModuleList
from agrad.nn.modules.dropout import Dropout
from agrad.nn.modules.linear import Linear, NonDynamicallyQuantizableLinear
from agrad.nn.modules.module import Module
from agrad.nn.modules.normalization import LayerNorm
from agrad.nn.parameter import Parameter

__all__ = [
    "MultiheadAttention",
    "Transformer",
    "TransformerEncoder",
    "TransformerDecoder",
    "TransformerEncoderLayer",
    "TransformerDecoderLayer",
]

_Activation = Callable[[Tensor], Tensor]


class MultiheadAttention(Module):
    r"""Attention of ``num_heads`` heads, each over ``embed_dim // num_heads`` features (mirrors
    ``torch.nn.MultiheadAttention``).

    ``MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O`` with
    ``head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)``.

    Args:
        embed_dim: total dimension of the model (the query's features).
        num_heads: number of heads; must divide ``embed_dim``.
        dropout: dropout probability on the attention weights (in training).
        bias: add biases to the input and output projections.
        add_bias_kv: learn an extra key and value (``bias_k``, ``bias_v``) appended to the sequences.
        add_zero_attn: append a zero key and value to the sequences.
        kdim: features of key (default ``embed_dim``); when it or ``vdim``
            differs, the projections are three parameters ``q_proj_weight``,
            ``k_proj_weight``, ``v_proj_weight`` instead of one ``in_proj_weight``.
        vdim: features of value (default ``embed_dim``).
        batch_first: inputs and output are ``(N, L, E)`` instead of ``(L, N, E)``.

    Example::

        >>> agrad.manual_seed(0)  # doctest: +ELLIPSIS
        <...>
        >>> mha = agrad.nn.MultiheadAttention(8, 2, batch_first=True)
        >>> x = agrad.randn(3, 5, 8)
        >>> out, weights = mha(x, x, x)
        >>> tuple(out.shape), tuple(weights.shape)
        ((3, 5, 8), (3, 5, 5))
    """

    bias_k: Tensor | None
    bias_v: Tensor | None

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = False, device: Any = None, dtype: Any = None) -> None:
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                             f"num_heads={num_heads} instead")
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != self.embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = Parameter(empty((embed_dim, embed_dim), **factory_kwargs))
            self.k_proj_weight = Parameter(empty((embed_dim, self.kdim), **factory_kwargs))
            self.v_proj_weight = Parameter(empty((embed_dim, self.vdim), **factory_kwargs))
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = Parameter(empty((3 * embed_dim, embed_dim), **factory_kwargs))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(empty(3 * embed_dim, **factory_kwargs))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **factory_kwargs)
        if add_bias_kv:
            self.bias_k = Parameter(empty((1, 1, embed_dim), **factory_kwargs))
            self.bias_v = Parameter(empty((1, 1, embed_dim), **factory_kwargs))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        """PyTorch's initialisation: Glorot-uniform projections, zero biases, Glorot-normal ``bias_k``/``bias_v``."""
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        for bias in (self.in_proj_bias, self.out_proj.bias):  # both present or both None (``bias``)
            if bias is not None:
                init.constant_(bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, key_padding_mask: Tensor | None = None,
                need_weights: bool = True, attn_mask: Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query`` to ``key``/``value``.

        Args:
            query: ``(L, E)`` unbatched, ``(L, N, E)``, or ``(N, L, E)`` with ``batch_first``.
            key: ``(S, kdim)`` unbatched, else batched as ``query``.
            value: ``(S, vdim)`` unbatched, else batched as ``query``.
            key_padding_mask: ``(N, S)`` (``(S,)`` unbatched): True (or a float added
                to the scores) for keys to ignore.
            need_weights: also return the attention weights.
            attn_mask: ``(L, S)`` or ``(N * num_heads, L, S)``: True where a query may
                not attend, or a float bias added to the scores.
            average_attn_weights: average the returned weights over the heads.
            is_causal: a hint that ``attn_mask`` is the causal mask.

        Returns:
            The output, shaped as ``query``; the weights ``(N, L, S)`` (averaged) or
            ``(N, num_heads, L, S)``, without ``N`` unbatched, or None without ``need_weights``.
        """
        is_batched = query.ndim == 3
        if self.batch_first and is_batched:
            # transpose so that the "is" relations (self-attention, key is value) survive
            if key is value:
                if query is key:
                    query = key = value = query.transpose(1, 0)
                else:
                    query, key = (x.transpose(1, 0) for x in (query, key))
                    value = key
            else:
                query, key, value = (x.transpose(1, 0) for x in (query, key, value))
        separate = not self._qkv_same_embed_dim
        attn_output, attn_output_weights = F.multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight, self.in_proj_bias,
            self.bias_k, self.bias_v, self.add_zero_attn, self.dropout, self.out_proj.weight, self.out_proj.bias,
            training=self.training, key_padding_mask=key_padding_mask, need_weights=need_weights,
            attn_mask=attn_mask, use_separate_proj_weight=separate, q_proj_weight=self.q_proj_weight,
            k_proj_weight=self.k_proj_weight, v_proj_weight=self.v_proj_weight,
            average_attn_weights=average_attn_weights, is_causal=is_causal)
        if self.batch_first and is_batched:
            attn_output = attn_output.transpose(1, 0)
        return attn_output, attn_output_weights


# -- helpers shared by the layers ----------------------------------------------------------


def _get_clones(module: Module, n: int) -> ModuleList:
    """``n`` independent deep copies of ``module`` (so the copies start equal but learn apart)."""
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


def _get_activation_fn(activation: str) -> _Activation:
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


def _generate_square_subsequent_mask(sz: int, device: Any = None, dtype: Any = None) -> Tensor:
    """``(sz, sz)``: -inf above the diagonal (later positions), 0 elsewhere."""
    return full((sz, sz), float("-inf"), dtype=dtype, device=device).triu(diagonal=1)


def _get_seq_len(src: Tensor, batch_first: bool) -> int:
    """The sequence length of ``(S, E)``, ``(S, N, E)`` or, with ``batch_first``, ``(N, S, E)``."""
    return src.shape[0] if src.ndim == 2 or not batch_first else src.shape[1]


def _detect_is_causal_mask(mask: Tensor | None, is_causal: bool | None = None, size: int | None = None) -> bool:
    """``is_causal`` when given; else whether ``mask`` equals the causal mask of ``size`` (or of its own size)."""
    if is_causal is not None or mask is None:
        return is_causal is True
    sz = size if size is not None else mask.shape[-2]
    causal = _generate_square_subsequent_mask(sz, device=mask.device, dtype=mask.dtype)
    return tuple(mask.shape) == tuple(causal.shape) and bool((mask == causal).all())


def _canonical_masks(mask: Tensor | None, mask_name: str, key_padding_mask: Tensor | None, padding_name: str,
                     like: Tensor) -> tuple[Tensor | None, Tensor | None]:
    """Both masks as float biases of ``like``'s dtype (a bool True becomes -inf), PyTorch's
    ``F._canonical_mask`` as the encoder calls it: the padding mask first, warning when the two types differ."""
    target = like._data.dtype
    key_padding_mask = _canonical_mask(key_padding_mask, padding_name, mask, mask_name, target)
    return _canonical_mask(mask, mask_name, None, "", target, check_other=False), key_padding_mask


def _sublayer(x: Tensor, norm: Module, block: Callable[[Tensor], Tensor], norm_first: bool) -> Tensor:
    """One residual sub-layer: ``x + block(norm(x))`` (pre-norm) or ``norm(x + block(x))`` (post-norm),
    as in Fig. 1 of https://arxiv.org/pdf/2002.04745v1.pdf."""
    return x + block(norm(x)) if norm_first else norm(x + block(x))


def _attend(attn: MultiheadAttention, dropout: Module, x: Tensor, mem: Tensor, attn_mask: Tensor | None,
            key_padding_mask: Tensor | None, is_causal: bool) -> Tensor:
    """An attention block of a layer: ``x`` attends to ``mem``, without weights, then dropout."""
    out = attn(x, mem, mem, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
               is_causal=is_causal)[0]
    return dropout(out)


class _FeedForward(Module):
    """What the encoder and decoder layers share: the feed-forward network
    (``linear1``, ``dropout``, ``linear2``) and its block.

    Subclasses build their attention first, call :meth:`_init_feed_forward`, add
    their norms and dropouts, and set ``activation`` last, so parameters and
    submodules register in PyTorch's order.
    """

    linear1: Linear
    dropout: Dropout
    linear2: Linear
    activation: _Activation

    def _init_feed_forward(self, d_model: int, dim_feedforward: int, dropout: float, bias: bool,
                           factory_kwargs: dict[str, Any]) -> None:
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **factory_kwargs)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **factory_kwargs)

    def _feed_forward(self, x: Tensor, dropout: Module) -> Tensor:
        return dropout(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoderLayer(_FeedForward):
    """Self-attention and a feed-forward network, each in a residual sub-layer with LayerNorm
    (mirrors ``torch.nn.TransformerEncoderLayer``).

    Args:
        d_model: features of the input.
        nhead: heads of the self-attention.
        dim_feedforward: hidden features of the feed-forward network.
        dropout: dropout probability (attention weights, after each block, inside the feed-forward).
        activation: ``"relu"``, ``"gelu"`` or a unary callable (a Module becomes a submodule).
        layer_norm_eps: ``eps`` of the LayerNorms.
        batch_first: ``(N, S, E)`` instead of ``(S, N, E)``.
        norm_first: LayerNorm before each block (pre-norm) instead of after the residual sum.
        bias: biases in the Linear and LayerNorm layers.

    Example::

        >>> layer = agrad.nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16)
        >>> layer(agrad.rand(5, 3, 8)).shape
        agrad.Size([5, 3, 8])
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | _Activation = F.relu, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first,
                                            **factory_kwargs)
        self._init_feed_forward(d_model, dim_feedforward, dropout, bias, factory_kwargs)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory_kwargs)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory_kwargs)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _get_activation_fn(activation) if isinstance(activation, str) else activation

    def forward(self, src: Tensor, src_mask: Tensor | None = None, src_key_padding_mask: Tensor | None = None,
                is_causal: bool = False) -> Tensor:
        """``src`` through self-attention (with ``src_mask``, ``src_key_padding_mask``;
        ``is_causal`` hints that ``src_mask`` is causal) and the feed-forward block."""
        src_mask, src_key_padding_mask = _canonical_masks(src_mask, "src_mask", src_key_padding_mask,
                                                          "src_key_padding_mask", src)
        x = _sublayer(src, self.norm1, lambda y: self._sa_block(y, src_mask, src_key_padding_mask, is_causal),
                      self.norm_first)
        return _sublayer(x, self.norm2, self._ff_block, self.norm_first)

    def _sa_block(self, x: Tensor, attn_mask: Tensor | None, key_padding_mask: Tensor | None,
                  is_causal: bool = False) -> Tensor:
        return _attend(self.self_attn, self.dropout1, x, x, attn_mask, key_padding_mask, is_causal)

    def _ff_block(self, x: Tensor) -> Tensor:
        return self._feed_forward(x, self.dropout2)


class TransformerDecoderLayer(_FeedForward):
    """Self-attention, attention to the encoder's output (``memory``) and a feed-forward network,
    each in a residual sub-layer with LayerNorm (mirrors ``torch.nn.TransformerDecoderLayer``).

    Arguments as :class:`TransformerEncoderLayer`'s.

    Example::

        >>> layer = agrad.nn.TransformerDecoderLayer(d_model=8, nhead=2, dim_feedforward=16, batch_first=True)
        >>> layer(agrad.rand(3, 4, 8), agrad.rand(3, 6, 8)).shape
        agrad.Size([3, 4, 8])
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | _Activation = F.relu, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first, bias=bias,
                                            **factory_kwargs)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first,
                                                 bias=bias, **factory_kwargs)
        self._init_feed_forward(d_model, dim_feedforward, dropout, bias, factory_kwargs)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory_kwargs)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory_kwargs)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory_kwargs)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _get_activation_fn(activation) if isinstance(activation, str) else activation

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None, tgt_is_causal: bool = False,
                memory_is_causal: bool = False) -> Tensor:
        """``tgt`` through self-attention (``tgt_mask``, ``tgt_key_padding_mask``), attention to
        ``memory`` (``memory_mask``, ``memory_key_padding_mask``) and the feed-forward block."""
        x = _sublayer(tgt, self.norm1, lambda y: self._sa_block(y, tgt_mask, tgt_key_padding_mask, tgt_is_causal),
                      self.norm_first)
        x = _sublayer(x, self.norm2,
                      lambda y: self._mha_block(y, memory, memory_mask, memory_key_padding_mask, memory_is_causal),
                      self.norm_first)
        return _sublayer(x, self.norm3, self._ff_block, self.norm_first)

    def _sa_block(self, x: Tensor, attn_mask: Tensor | None, key_padding_mask: Tensor | None,
                  is_causal: bool = False) -> Tensor:
        return _attend(self.self_attn, self.dropout1, x, x, attn_mask, key_padding_mask, is_causal)

    def _mha_block(self, x: Tensor, mem: Tensor, attn_mask: Tensor | None, key_padding_mask: Tensor | None,
                   is_causal: bool = False) -> Tensor:
        return _attend(self.multihead_attn, self.dropout2, x, mem, attn_mask, key_padding_mask, is_causal)

    def _ff_block(self, x: Tensor) -> Tensor:
        return self._feed_forward(x, self.dropout3)


class TransformerEncoder(Module):
    """A stack of ``num_layers`` deep copies of ``encoder_layer``, then ``norm``
    (mirrors ``torch.nn.TransformerEncoder``).

    The copies start with equal parameters, as in PyTorch.  ``enable_nested_tensor``
    and ``mask_check`` steer PyTorch's nested-tensor fast path; they are kept as
    attributes and otherwise ignored (module docstring).

    Example::

        >>> layer = agrad.nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16)
        >>> encoder = agrad.nn.TransformerEncoder(layer, num_layers=2)
        >>> encoder(agrad.rand(5, 3, 8)).shape
        agrad.Size([5, 3, 8])
    """

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int, norm: Module | None = None,
                 enable_nested_tensor: bool = True, mask_check: bool = True) -> None:
        super().__init__()
        self.layers = _get_clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor = enable_nested_tensor
        self.mask_check = mask_check

    def forward(self, src: Tensor, mask: Tensor | None = None, src_key_padding_mask: Tensor | None = None,
                is_causal: bool | None = None) -> Tensor:
        """``src`` through each layer with ``mask`` and ``src_key_padding_mask``; ``is_causal``
        None detects whether ``mask`` is the causal mask."""
        mask, src_key_padding_mask = _canonical_masks(mask, "mask", src_key_padding_mask, "src_key_padding_mask",
                                                      src)
        first_layer: Any = self.layers[0]
        seq_len = _get_seq_len(src, first_layer.self_attn.batch_first)
        causal = _detect_is_causal_mask(mask, is_causal, seq_len)
        output = src
        for mod in self.layers:
            output = mod(output, src_mask=mask, is_causal=causal, src_key_padding_mask=src_key_padding_mask)
        return output if self.norm is None else self.norm(output)


class TransformerDecoder(Module):
    """A stack of ``num_layers`` deep copies of ``decoder_layer``, then ``norm``
    (mirrors ``torch.nn.TransformerDecoder``).

    Example::

        >>> layer = agrad.nn.TransformerDecoderLayer(d_model=8, nhead=2, dim_feedforward=16)
        >>> decoder = agrad.nn.TransformerDecoder(layer, num_layers=2)
        >>> decoder(agrad.rand(4, 3, 8), agrad.rand(6, 3, 8)).shape
        agrad.Size([4, 3, 8])
    """

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int, norm: Module | None = None) -> None:
        super().__init__()
        self.layers = _get_clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None, tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False) -> Tensor:
        """``tgt`` through each layer, attending to ``memory``; ``tgt_is_causal`` None detects
        whether ``tgt_mask`` is the causal mask."""
        first_layer: Any = self.layers[0]
        seq_len = _get_seq_len(tgt, first_layer.self_attn.batch_first)
        causal = _detect_is_causal_mask(tgt_mask, tgt_is_causal, seq_len)
        output = tgt
        for mod in self.layers:
            output = mod(output, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                         tgt_key_padding_mask=tgt_key_padding_mask, memory_key_padding_mask=memory_key_padding_mask,
                         tgt_is_causal=causal, memory_is_causal=memory_is_causal)
        return output if self.norm is None else self.norm(output)


class Transformer(Module):
    """The encoder-decoder Transformer of "Attention Is All You Need" (mirrors ``torch.nn.Transformer``).

    ``d_model``, ``nhead``, ``dim_feedforward``, ``dropout``, ``activation``,
    ``layer_norm_eps``, ``batch_first``, ``norm_first`` and ``bias`` are
    :class:`TransformerEncoderLayer`'s, for every layer.

    Args:
        num_encoder_layers: depth of the encoder stack (it ends in a LayerNorm).
        num_decoder_layers: depth of the decoder stack (it ends in a LayerNorm).
        custom_encoder: a module used instead of the default encoder stack.
        custom_decoder: a module used instead of the default decoder stack.

    Every parameter of more than one dimension is then re-initialised Glorot-uniform.

    Example::

        >>> model = agrad.nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
        ...                              dim_feedforward=16)
        >>> model(agrad.rand(5, 3, 8), agrad.rand(4, 3, 8)).shape
        agrad.Size([4, 3, 8])
        >>> Transformer.generate_square_subsequent_mask(3)
        tensor([[0., -inf, -inf],
                [0., 0., -inf],
                [0., 0., 0.]])
    """

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: str | _Activation = F.relu, custom_encoder: Any | None = None,
                 custom_decoder: Any | None = None, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device: Any = None, dtype: Any = None) -> None:
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        layer_args = (d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first,
                      norm_first, bias)
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            self.encoder = TransformerEncoder(TransformerEncoderLayer(*layer_args, **factory_kwargs),
                                              num_encoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory_kwargs))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            self.decoder = TransformerDecoder(TransformerDecoderLayer(*layer_args, **factory_kwargs),
                                              num_decoder_layers,
                                              LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **factory_kwargs))
        self._reset_parameters()
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Tensor | None = None, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, src_key_padding_mask: Tensor | None = None,
                tgt_key_padding_mask: Tensor | None = None, memory_key_padding_mask: Tensor | None = None,
                src_is_causal: bool | None = None, tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False) -> Tensor:
        """Encode ``src``, then decode ``tgt`` attending to it.

        ``src`` is ``(S, E)``, ``(S, N, E)`` or ``(N, S, E)`` with ``batch_first``; ``tgt``
        likewise with ``T``; the output is shaped as ``tgt``.  Boolean masks are True
        where attention is not allowed; float masks are added to the scores.
        """
        is_batched = src.ndim == 3
        batch_dim = 0 if self.batch_first else 1
        if is_batched and src.shape[batch_dim] != tgt.shape[batch_dim]:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask, is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device: Any = None, dtype: Any = None) -> Tensor:
        """The causal mask ``(sz, sz)``: -inf above the diagonal, 0 elsewhere."""
        return _generate_square_subsequent_mask(sz, device=device, dtype=dtype)

    def _reset_parameters(self) -> None:
        """Glorot-uniform for every parameter of more than one dimension, as PyTorch."""
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)
