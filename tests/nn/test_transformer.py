"""MultiheadAttention and the Transformer layers against torch.nn's: values, gradients,
state_dict keys, repr, masks, train/eval and misuse errors."""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import pytest

import agrad
from tests.helpers import requires_torch, torch
from tests.nn.oracle import check_module

pytestmark = requires_torch
DTYPES = ["float64", "float32"]
E, H, L, S, N = 8, 2, 3, 4, 2  # embed dim, heads, target and source lengths, batch


def _pair(name: str, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
    return getattr(agrad.nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)


def _rng() -> np.random.Generator:
    return np.random.default_rng(0)


def _seq(rng: np.random.Generator, length: int, features: int = E, batch_first: bool = False,
         batched: bool = True) -> np.ndarray:
    if not batched:
        return rng.standard_normal((length, features))
    return rng.standard_normal((N, length, features) if batch_first else (length, N, features))


def _bool_mask(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """True (masked) at random, never a whole row: the first key stays visible."""
    mask = rng.random(shape) < 0.4
    mask[..., 0] = False
    return mask


def _float_mask(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return np.where(_bool_mask(rng, shape), -np.inf, 0.5 * rng.standard_normal(shape))


def _repr_matches(ours: Any, theirs: Any) -> None:
    assert repr(ours) == repr(theirs).replace("torch", "agrad")


# -- MultiheadAttention --------------------------------------------------------------------

MHA_CONFIGS = [
    {},
    {"batch_first": True},
    {"bias": False},
    {"add_bias_kv": True},
    {"add_zero_attn": True},
    {"add_bias_kv": True, "add_zero_attn": True, "batch_first": True},
    {"kdim": 5, "vdim": 6},
    {"kdim": 5, "vdim": 6, "batch_first": True, "bias": False},
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", MHA_CONFIGS, ids=str)
def test_mha_matches_torch(config: dict[str, Any], dtype: str) -> None:
    ours, theirs = _pair("MultiheadAttention", E, H, **config)
    rng, bf = _rng(), config.get("batch_first", False)
    q = _seq(rng, L, E, bf)
    k, v = _seq(rng, S, config.get("kdim", E), bf), _seq(rng, S, config.get("vdim", E), bf)
    check_module(ours, theirs, [q, k, v], dtype)
    _repr_matches(ours, theirs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("need_weights, average", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("masks", ["bool", "float", "bool3d", "padding", "both_bool", "both_float"])
def test_mha_masks(masks: str, need_weights: bool, average: bool, dtype: str) -> None:
    ours, theirs = _pair("MultiheadAttention", E, H, add_bias_kv=masks == "both_bool")
    rng = _rng()
    attn_mask: np.ndarray | None = None
    padding: np.ndarray | None = None
    if masks in ("bool", "both_bool"):
        attn_mask = _bool_mask(rng, (L, S))
    elif masks in ("float", "both_float"):
        attn_mask = _float_mask(rng, (L, S))
    elif masks == "bool3d":
        attn_mask = _bool_mask(rng, (N * H, L, S))
    if masks in ("padding", "both_bool"):
        padding = _bool_mask(rng, (N, S))
    elif masks == "both_float":
        padding = _float_mask(rng, (N, S))
    inputs = [_seq(rng, L), _seq(rng, S), _seq(rng, S), padding, need_weights, attn_mask, average]
    check_module(ours, theirs, inputs, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("config", [{}, {"kdim": 5, "vdim": 6, "add_zero_attn": True}], ids=str)
def test_mha_unbatched(config: dict[str, Any], need_weights: bool, dtype: str) -> None:
    ours, theirs = _pair("MultiheadAttention", E, H, batch_first=True, **config)  # batch_first ignored
    rng = _rng()
    q = _seq(rng, L, batched=False)
    k, v = _seq(rng, S, config.get("kdim", E), batched=False), _seq(rng, S, config.get("vdim", E), batched=False)
    check_module(ours, theirs, [q, k, v, _bool_mask(rng, (S,)), need_weights, _bool_mask(rng, (L, S))], dtype)


def test_mha_causal_hint_matches_torch() -> None:
    ours, theirs = _pair("MultiheadAttention", E, H)
    causal = np.triu(np.ones((L, L), dtype=bool), 1)
    rng = _rng()
    qkv = [_seq(rng, L) for _ in range(3)]
    for need_weights in (True, False):  # without weights the hint alone reaches scaled_dot_product_attention
        check_module(ours, theirs, [*qkv, None, need_weights, causal, True, True])


def test_mha_eval_disables_dropout_and_train_applies_it() -> None:
    ours, theirs = _pair("MultiheadAttention", E, H, dropout=0.5)
    theirs.eval()
    rng = _rng()
    check_module(ours, theirs, [_seq(rng, L), _seq(rng, S), _seq(rng, S)], "float64")
    ours.train()
    x = agrad.from_numpy(_seq(rng, L))
    agrad.manual_seed(0)
    _, weights = ours(x, x, x, average_attn_weights=False)
    dropped = weights.detach().numpy()
    assert (dropped == 0).any()  # some weights dropped, the others scaled by 1 / (1 - p)
    ours.eval()
    _, kept = ours(x, x, x, average_attn_weights=False)
    assert (kept.detach().numpy() > 0).all()


def test_mha_initialisation() -> None:
    agrad.manual_seed(0)
    m = agrad.nn.MultiheadAttention(E, H, add_bias_kv=True)
    bound = math.sqrt(6.0 / (E + 3 * E))  # xavier_uniform_ of (3E, E)
    w = m.in_proj_weight.detach().numpy()
    assert np.abs(w).max() <= bound and w.std() > bound / 4
    assert not m.in_proj_bias.detach().numpy().any() and not m.out_proj.bias.detach().numpy().any()
    assert m.bias_k.detach().numpy().any() and m.bias_v.detach().numpy().any()
    assert m.bias_k.shape == (1, 1, E)
    sep = agrad.nn.MultiheadAttention(E, H, kdim=5, vdim=6, bias=False)
    assert sep.in_proj_weight is None and sep.in_proj_bias is None and sep.out_proj.bias is None
    assert [tuple(p.shape) for p in sep.parameters()] == [(E, E), (E, 5), (E, 6), (E, E)]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_mha_factory_kwargs(dtype: str) -> None:
    m = agrad.nn.MultiheadAttention(E, H, add_bias_kv=True, dtype=getattr(agrad, dtype))
    assert {p.dtype for p in m.parameters()} == {getattr(agrad, dtype)}


def _raises_like_torch(make: Any, exc: type[BaseException], match: str) -> None:
    with pytest.raises(exc, match=match):
        make(agrad)
    with pytest.raises(exc, match=match):
        make(torch)


def test_mha_misuse() -> None:
    _raises_like_torch(lambda lib: lib.nn.MultiheadAttention(10, 3), AssertionError,
                       "embed_dim must be divisible by num_heads")
    _raises_like_torch(lambda lib: lib.nn.MultiheadAttention(0, 2), ValueError,
                       "embed_dim and num_heads must be greater than 0")

    def call(lib: Any, q_shape: tuple[int, ...], kv_shape: tuple[int, ...], **kwargs: Any) -> Any:
        m = lib.nn.MultiheadAttention(E, H)
        return m(lib.zeros(q_shape), lib.zeros(kv_shape), lib.zeros(kv_shape), **kwargs)

    _raises_like_torch(lambda lib: call(lib, (1, L, N, E), (S, N, E)), AssertionError,
                       "query should be unbatched 2D or batched 3D tensor but received 4-D query tensor")
    _raises_like_torch(lambda lib: call(lib, (L, N, E), (S, E)), AssertionError,
                       r"For batched \(3-D\) `query`, expected `key` and `value` to be 3-D")
    _raises_like_torch(lambda lib: call(lib, (L, N, E + 1), (S, N, E)), AssertionError,
                       "was expecting embedding dimension of 8, but got 9")
    _raises_like_torch(lambda lib: call(lib, (L, N, E), (S, N, E), is_causal=True), RuntimeError,
                       "Need attn_mask if specifying the is_causal hint")
    _raises_like_torch(lambda lib: call(lib, (L, N, E), (S, N, E), attn_mask=lib.zeros((L, S), dtype=lib.int64)),
                       AssertionError, "only bool and floating types of attn_mask are supported")
    _raises_like_torch(lambda lib: call(lib, (L, N, E), (S, N, E), attn_mask=lib.zeros((L, L))), RuntimeError,
                       "The shape of the 2D attn_mask is")


def test_mha_mismatched_mask_types_warn() -> None:
    m = agrad.nn.MultiheadAttention(E, H)
    x = agrad.zeros(L, N, E)
    with pytest.warns(UserWarning, match="Support for mismatched key_padding_mask and attn_mask is deprecated"):
        m(x, x, x, key_padding_mask=agrad.zeros(N, L, dtype=agrad.bool), attn_mask=agrad.zeros(L, L))


# -- encoder and decoder layers -----------------------------------------------------------

LAYER_CONFIGS = [
    {},
    {"batch_first": True},
    {"norm_first": True},
    {"activation": "gelu", "layer_norm_eps": 1e-3},
    {"bias": False, "norm_first": True, "batch_first": True},
]


def _layer_pair(name: str, config: dict[str, Any], dropout: float = 0.0) -> tuple[Any, Any]:
    return _pair(name, E, H, dim_feedforward=12, dropout=dropout, **config)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", LAYER_CONFIGS, ids=str)
def test_encoder_layer_matches_torch(config: dict[str, Any], dtype: str) -> None:
    ours, theirs = _layer_pair("TransformerEncoderLayer", config)
    rng = _rng()
    bf = config.get("batch_first", False)
    check_module(ours, theirs, [_seq(rng, S, batch_first=bf), _bool_mask(rng, (S, S)), _bool_mask(rng, (N, S))],
                 dtype)
    _repr_matches(ours, theirs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", LAYER_CONFIGS, ids=str)
def test_decoder_layer_matches_torch(config: dict[str, Any], dtype: str) -> None:
    ours, theirs = _layer_pair("TransformerDecoderLayer", config)
    rng = _rng()
    bf = config.get("batch_first", False)
    inputs = [_seq(rng, L, batch_first=bf), _seq(rng, S, batch_first=bf), _float_mask(rng, (L, L)),
              _bool_mask(rng, (L, S)), _float_mask(rng, (N, L)), _bool_mask(rng, (N, S))]
    check_module(ours, theirs, inputs, dtype)
    _repr_matches(ours, theirs)


def test_layers_unbatched_and_eval_dropout() -> None:
    enc, tenc = _layer_pair("TransformerEncoderLayer", {}, dropout=0.3)
    dec, tdec = _layer_pair("TransformerDecoderLayer", {"norm_first": True}, dropout=0.3)
    tenc.eval()
    tdec.eval()
    rng = _rng()
    check_module(enc, tenc, [_seq(rng, S, batched=False), None, _bool_mask(rng, (S,))])
    check_module(dec, tdec, [_seq(rng, L, batched=False), _seq(rng, S, batched=False)])


def test_layer_training_dropout_is_random() -> None:
    agrad.manual_seed(0)
    layer = agrad.nn.TransformerEncoderLayer(E, H, dim_feedforward=12, dropout=0.5)
    x = agrad.randn(S, N, E)
    first, second = layer(x).detach().numpy(), layer(x).detach().numpy()
    assert not np.allclose(first, second)
    layer.eval()
    np.testing.assert_array_equal(layer(x).detach().numpy(), layer(x).detach().numpy())


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_callable_activation(dtype: str) -> None:
    ours = agrad.nn.TransformerEncoderLayer(E, H, 12, 0.0, activation=agrad.nn.functional.gelu)
    theirs = torch.nn.TransformerEncoderLayer(E, H, 12, 0.0, activation=torch.nn.functional.gelu)
    check_module(ours, theirs, [_seq(_rng(), S)], dtype)
    ours = agrad.nn.TransformerDecoderLayer(E, H, 12, 0.0, activation=agrad.nn.GELU(approximate="tanh"))
    theirs = torch.nn.TransformerDecoderLayer(E, H, 12, 0.0, activation=torch.nn.GELU(approximate="tanh"))
    rng = _rng()
    check_module(ours, theirs, [_seq(rng, L), _seq(rng, S)], dtype)
    _repr_matches(ours, theirs)  # a Module activation is a submodule, listed last


def test_layer_causal_hint_matches_torch() -> None:
    enc, tenc = _layer_pair("TransformerEncoderLayer", {})
    causal = agrad.nn.Transformer.generate_square_subsequent_mask(S).numpy()
    check_module(enc, tenc, [_seq(_rng(), S), causal, None, True])


def test_bad_activation() -> None:
    _raises_like_torch(lambda lib: lib.nn.TransformerEncoderLayer(E, H, activation="tanh"), RuntimeError,
                       "activation should be relu/gelu, not tanh")
    _raises_like_torch(lambda lib: lib.nn.TransformerDecoderLayer(E, H, activation="swish"), RuntimeError,
                       "activation should be relu/gelu, not swish")


# -- stacks and the full Transformer ------------------------------------------------------


def _stack_pair(kind: str, config: dict[str, Any], norm: bool) -> tuple[Any, Any]:
    layer, tlayer = _layer_pair(f"Transformer{kind}Layer", config)
    extra = {"enable_nested_tensor": False} if kind == "Encoder" else {}
    ours = getattr(agrad.nn, f"Transformer{kind}")(layer, 2, agrad.nn.LayerNorm(E) if norm else None)
    theirs = getattr(torch.nn, f"Transformer{kind}")(tlayer, 2, torch.nn.LayerNorm(E) if norm else None, **extra)
    return ours, theirs


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config, norm", [({}, True), ({"batch_first": True, "norm_first": True}, False)], ids=str)
def test_encoder_matches_torch(config: dict[str, Any], norm: bool, dtype: str) -> None:
    ours, theirs = _stack_pair("Encoder", config, norm)
    theirs.layers[1].linear1.weight.data.mul_(-1.5)  # the two layers differ once loaded
    rng = _rng()
    bf = config.get("batch_first", False)
    check_module(ours, theirs, [_seq(rng, S, batch_first=bf), _float_mask(rng, (S, S)), _float_mask(rng, (N, S))],
                 dtype)
    _repr_matches(ours, theirs)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config, norm", [({}, True), ({"batch_first": True, "norm_first": True}, False)], ids=str)
def test_decoder_matches_torch(config: dict[str, Any], norm: bool, dtype: str) -> None:
    ours, theirs = _stack_pair("Decoder", config, norm)
    rng = _rng()
    bf = config.get("batch_first", False)
    inputs = [_seq(rng, L, batch_first=bf), _seq(rng, S, batch_first=bf), None, _bool_mask(rng, (L, S)),
              None, _bool_mask(rng, (N, S))]
    check_module(ours, theirs, inputs, dtype)
    _repr_matches(ours, theirs)


@pytest.mark.parametrize("mask_dtype", ["float", "bool"])
def test_stacks_detect_causal_masks(mask_dtype: str) -> None:
    """A causal mask given without ``is_causal`` is recognised (PyTorch then takes the causal kernel):
    the results are the same."""
    enc, tenc = _stack_pair("Encoder", {}, True)
    dec, tdec = _stack_pair("Decoder", {}, True)
    causal = np.triu(np.full((S, S), -np.inf), 1) if mask_dtype == "float" else np.triu(np.ones((S, S), bool), 1)
    rng = _rng()
    src = _seq(rng, S)
    check_module(enc, tenc, [src, causal])
    check_module(dec, tdec, [src, _seq(rng, L), causal])
    from agrad.nn.modules.transformer import _detect_is_causal_mask

    mask = agrad.from_numpy(causal)
    assert _detect_is_causal_mask(mask) and _detect_is_causal_mask(mask, size=S)
    assert not _detect_is_causal_mask(mask, size=S + 1) and not _detect_is_causal_mask(mask, is_causal=False)
    assert not _detect_is_causal_mask(mask.transpose(0, 1)) and _detect_is_causal_mask(None, is_causal=True)


def test_stack_layers_are_deep_copies() -> None:
    layer = agrad.nn.TransformerEncoderLayer(E, H, 12)
    encoder = agrad.nn.TransformerEncoder(layer, 2, enable_nested_tensor=True, mask_check=False)
    first, second = encoder.layers
    assert first is not layer and first is not second
    assert first.linear1.weight is not second.linear1.weight
    np.testing.assert_array_equal(first.linear1.weight.detach().numpy(), second.linear1.weight.detach().numpy())
    with agrad.no_grad():
        first.linear1.weight.mul_(2.0)
    assert not np.array_equal(first.linear1.weight.detach().numpy(), second.linear1.weight.detach().numpy())
    assert encoder.num_layers == 2 and encoder.norm is None
    assert encoder.enable_nested_tensor is True and encoder.mask_check is False
    assert len(list(encoder.parameters())) == 2 * len(list(layer.parameters()))


TRANSFORMER_CONFIGS = [
    {},
    {"batch_first": True, "norm_first": True, "activation": "gelu"},
    {"bias": False, "layer_norm_eps": 1e-4},
]


def _transformer_pair(**config: Any) -> tuple[Any, Any]:
    return _pair("Transformer", E, H, 2, 1, 12, 0.0, **config)


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", TRANSFORMER_CONFIGS, ids=str)
def test_transformer_matches_torch(config: dict[str, Any], dtype: str) -> None:
    ours, theirs = _transformer_pair(**config)
    rng = _rng()
    bf = config.get("batch_first", False)
    tgt_mask = agrad.nn.Transformer.generate_square_subsequent_mask(L, dtype=getattr(agrad, dtype)).numpy()
    inputs = [_seq(rng, S, batch_first=bf), _seq(rng, L, batch_first=bf), None, tgt_mask, None,
              _bool_mask(rng, (N, S)), None, _bool_mask(rng, (N, S))]
    check_module(ours, theirs, inputs, dtype)
    _repr_matches(ours, theirs)
    assert (ours.d_model, ours.nhead, ours.batch_first) == (E, H, bf)


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
def test_transformer_unbatched_and_custom_parts() -> None:
    ours, theirs = _transformer_pair()
    rng = _rng()
    check_module(ours, theirs, [_seq(rng, S, batched=False), _seq(rng, L, batched=False)])
    encoder = agrad.nn.TransformerEncoder(agrad.nn.TransformerEncoderLayer(E, H, 12), 1)
    model = agrad.nn.Transformer(E, H, dim_feedforward=12, num_decoder_layers=1, custom_encoder=encoder)
    assert model.encoder is encoder and len(model.decoder.layers) == 1


def test_transformer_reinitialises_matrices() -> None:
    agrad.manual_seed(0)
    model = agrad.nn.Transformer(E, H, 1, 1, 12)
    for name, p in model.named_parameters():
        values = p.detach().numpy()
        if p.ndim > 1:
            fan_out, fan_in = p.shape[0], int(np.prod(p.shape[1:]))
            assert np.abs(values).max() <= math.sqrt(6.0 / (fan_in + fan_out)), name
        elif name.endswith("norm1.weight"):
            np.testing.assert_array_equal(values, 1.0)


def test_generate_square_subsequent_mask() -> None:
    for dtype in ("float32", "float64"):
        mask = agrad.nn.Transformer.generate_square_subsequent_mask(4, dtype=getattr(agrad, dtype))
        expected = torch.nn.Transformer.generate_square_subsequent_mask(4, dtype=getattr(torch, dtype))
        assert mask.dtype is getattr(agrad, dtype)
        np.testing.assert_array_equal(mask.numpy(), expected.numpy())


@pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")
def test_transformer_misuse() -> None:
    def call(lib: Any, src: tuple[int, ...], tgt: tuple[int, ...], **config: Any) -> Any:
        return lib.nn.Transformer(E, H, 1, 1, 12, **config)(lib.zeros(src), lib.zeros(tgt))

    _raises_like_torch(lambda lib: call(lib, (S, N, E), (L, N + 1, E)), RuntimeError,
                       "the batch number of src and tgt must be equal")
    _raises_like_torch(lambda lib: call(lib, (N, S, E), (N + 1, L, E), batch_first=True), RuntimeError,
                       "the batch number of src and tgt must be equal")
    _raises_like_torch(lambda lib: call(lib, (S, N, E), (L, N, E + 1)), RuntimeError,
                       "the feature number of src and tgt must be equal to d_model")


def test_state_dict_round_trip_and_deepcopy() -> None:
    agrad.manual_seed(0)
    model = agrad.nn.Transformer(E, H, 1, 1, 12, dropout=0.0)
    clone = copy.deepcopy(model)
    agrad.manual_seed(1)
    fresh = agrad.nn.Transformer(E, H, 1, 1, 12, dropout=0.0)
    fresh.load_state_dict(model.state_dict())
    src, tgt = agrad.randn(S, N, E), agrad.randn(L, N, E)
    expected = model(src, tgt).detach().numpy()
    np.testing.assert_array_equal(fresh(src, tgt).detach().numpy(), expected)
    np.testing.assert_array_equal(clone(src, tgt).detach().numpy(), expected)
