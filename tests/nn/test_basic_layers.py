"""The basic layers against torch.nn's: Identity, Linear, Bilinear, Flatten, Unflatten, Embedding, EmbeddingBag,
Fold, Unfold, PixelShuffle, PixelUnshuffle, ChannelShuffle, the Upsample family, the padding family and the
dropout family.

Every layer runs through ``check_module`` (values, input and parameter
gradients, state after the forward) in float64 and float32 for a few
configurations; reprs, default initialisation, train/eval behaviour and the
errors of misuse are checked beside.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
from agrad import nn
from tests.helpers import requires_torch, torch
from tests.nn.oracle import check_module

DTYPES = ["float64", "float32"]


def _randn(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


def _pair(build: Callable[[Any], Any]) -> tuple[Any, Any]:
    """The same layer built by agrad and by torch."""
    return build(agrad), build(torch)


def _same_repr(ours: Any, theirs: Any) -> None:
    assert repr(ours) == repr(theirs).replace("torch", "agrad")


def _raises_like(ours: Callable[[], Any], theirs: Callable[[], Any]) -> None:
    """Both calls raise the same exception type with the same message ('torch' read as 'agrad')."""
    with pytest.raises(Exception) as t:
        theirs()
    with pytest.raises(type(t.value)) as a:
        ours()
    assert type(a.value) is type(t.value)
    assert str(a.value) == str(t.value).replace("torch", "agrad")


# Each case: (layer built from a library, inputs).  The float inputs get gradients.
CASES: dict[str, tuple[Callable[[Any], Any], list[Any]]] = {
    "identity": (lambda L: L.nn.Identity(3, unused=True), [_randn(2, 3)]),
    "linear": (lambda L: L.nn.Linear(4, 3), [_randn(5, 4)]),
    "linear_no_bias_3d": (lambda L: L.nn.Linear(4, 2, bias=False), [_randn(2, 3, 4)]),
    "linear_1d_input": (lambda L: L.nn.Linear(4, 3), [_randn(4)]),
    "bilinear": (lambda L: L.nn.Bilinear(3, 2, 4), [_randn(5, 3), _randn(5, 2, seed=1)]),
    "bilinear_no_bias_3d": (lambda L: L.nn.Bilinear(2, 3, 2, bias=False), [_randn(2, 3, 2), _randn(2, 3, 3, seed=1)]),
    "flatten": (lambda L: L.nn.Flatten(), [_randn(2, 3, 2, 2)]),
    "flatten_range": (lambda L: L.nn.Flatten(0, -2), [_randn(2, 3, 4)]),
    "unflatten": (lambda L: L.nn.Unflatten(1, (2, -1)), [_randn(3, 6)]),
    "unflatten_list": (lambda L: L.nn.Unflatten(-1, [2, 2]), [_randn(3, 4)]),
    "embedding": (lambda L: L.nn.Embedding(6, 3), [np.array([[0, 5, 2], [2, 2, 1]])]),
    "embedding_padding": (lambda L: L.nn.Embedding(6, 3, padding_idx=-2), [np.array([4, 0, 4, 1])]),
    "embedding_max_norm": (lambda L: L.nn.Embedding(6, 4, max_norm=1.0), [np.array([[1, 3], [3, 5]])]),
    "embedding_max_norm_l1": (lambda L: L.nn.Embedding(5, 3, max_norm=0.5, norm_type=1.0), [np.array([0, 4, 4])]),
    "embedding_max_norm_inf": (lambda L: L.nn.Embedding(5, 3, max_norm=0.5, norm_type=math.inf),
                               [np.array([2, 0])]),
    "embedding_scale_grad_by_freq": (lambda L: L.nn.Embedding(5, 2, scale_grad_by_freq=True, padding_idx=1),
                                     [np.array([[1, 3, 3], [3, 0, 1]])]),
    "embedding_bag_mean_2d": (lambda L: L.nn.EmbeddingBag(6, 3), [np.array([[0, 2, 2], [5, 1, 0]])]),
    "embedding_bag_sum_offsets": (lambda L: L.nn.EmbeddingBag(6, 3, mode="sum"),
                                  [np.array([1, 2, 4, 5, 4, 3]), np.array([0, 2, 2])]),
    "embedding_bag_max": (lambda L: L.nn.EmbeddingBag(6, 3, mode="max"),
                          [np.array([1, 2, 4, 5, 4, 3]), np.array([0, 3])]),
    "embedding_bag_last_offset": (lambda L: L.nn.EmbeddingBag(6, 2, mode="mean", include_last_offset=True),
                                  [np.array([1, 2, 4, 5]), np.array([0, 1, 4])]),
    "embedding_bag_padding": (lambda L: L.nn.EmbeddingBag(6, 2, mode="mean", padding_idx=2),
                              [np.array([[2, 2, 1], [0, 2, 3]])]),
    "embedding_bag_max_norm": (lambda L: L.nn.EmbeddingBag(6, 4, mode="sum", max_norm=1.0),
                               [np.array([[0, 2], [2, 5]])]),
    "fold": (lambda L: L.nn.Fold(output_size=(4, 5), kernel_size=2), [_randn(2, 12, 12)]),
    "fold_strided": (lambda L: L.nn.Fold((5, 5), kernel_size=(2, 3), stride=(2, 1), padding=1, dilation=(1, 2)),
                     [_randn(1, 12, 9)]),
    "unfold": (lambda L: L.nn.Unfold(kernel_size=2), [_randn(2, 3, 3, 4)]),
    "unfold_strided": (lambda L: L.nn.Unfold((2, 3), dilation=(2, 1), padding=1, stride=2), [_randn(1, 2, 5, 5)]),
    "pixel_shuffle": (lambda L: L.nn.PixelShuffle(2), [_randn(2, 8, 2, 3)]),
    "pixel_shuffle_unbatched": (lambda L: L.nn.PixelShuffle(3), [_randn(9, 1, 2)]),
    "channel_shuffle": (lambda L: L.nn.ChannelShuffle(3), [_randn(2, 6, 2, 3)]),
    "pixel_unshuffle": (lambda L: L.nn.PixelUnshuffle(2), [_randn(1, 2, 4, 6)]),
    "upsample_nearest": (lambda L: L.nn.Upsample(scale_factor=2), [_randn(1, 2, 2, 3)]),
    "upsample_nearest_size_1d": (lambda L: L.nn.Upsample(size=5), [_randn(2, 1, 3)]),
    "upsample_nearest_exact": (lambda L: L.nn.Upsample(size=(3, 5), mode="nearest-exact"), [_randn(1, 1, 2, 3)]),
    "upsample_linear": (lambda L: L.nn.Upsample(scale_factor=1.5, mode="linear"), [_randn(1, 2, 4)]),
    "upsample_bilinear": (lambda L: L.nn.Upsample(size=(3, 5), mode="bilinear"), [_randn(1, 2, 2, 3)]),
    "upsample_bilinear_corners": (lambda L: L.nn.Upsample(scale_factor=(2, 1.5), mode="bilinear",
                                                          align_corners=True), [_randn(1, 1, 3, 2)]),
    "upsample_bicubic": (lambda L: L.nn.Upsample(scale_factor=2, mode="bicubic"), [_randn(1, 1, 3, 3)]),
    "upsample_trilinear": (lambda L: L.nn.Upsample(scale_factor=2, mode="trilinear"), [_randn(1, 1, 2, 2, 2)]),
    "upsample_recompute": (lambda L: L.nn.Upsample(scale_factor=1.7, mode="bilinear", recompute_scale_factor=True),
                           [_randn(1, 1, 3, 3)]),
    "upsampling_nearest2d": (lambda L: L.nn.UpsamplingNearest2d(scale_factor=2), [_randn(1, 1, 2, 3)]),
    "upsampling_bilinear2d": (lambda L: L.nn.UpsamplingBilinear2d(size=(4, 5)), [_randn(1, 2, 2, 3)]),
}

PADS: dict[str, tuple[Any, tuple[int, ...]]] = {
    # (padding, input shape) for each number of padded dimensions
    "1d": (2, (2, 3, 4)),
    "1d_asym_unbatched": ((3, 1), (2, 4)),
    "1d_negative": ((-1, 2), (1, 2, 4)),
    "2d": (1, (1, 2, 3, 3)),
    "2d_asym_unbatched": ((2, 0, 1, 2), (2, 3, 4)),
    "2d_negative": ((1, -1, -1, 2), (1, 1, 3, 4)),
    "3d": (1, (1, 1, 2, 3, 2)),
    "3d_asym_unbatched": ((0, 1, 1, 0, 1, 1), (2, 2, 3, 3)),
}
PAD_KINDS = ["ReflectionPad", "ReplicationPad", "CircularPad", "ZeroPad", "ConstantPad"]


def _pad_layer(lib: Any, kind: str, dims: str, padding: Any) -> Any:
    cls = getattr(lib.nn, f"{kind}{dims[:2]}")
    return cls(padding, 1.5) if kind == "ConstantPad" else cls(padding)


for _kind in PAD_KINDS:
    for _name, (_padding, _shape) in PADS.items():
        CASES[f"{_kind}_{_name}"] = ((lambda L, k=_kind, n=_name, p=_padding: _pad_layer(L, k, n, p)),
                                     [_randn(*_shape)])


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", list(CASES))
def test_layer_matches_torch(case: str, dtype: str) -> None:
    build, inputs = CASES[case]
    ours, theirs = _pair(build)
    _same_repr(ours, theirs)
    check_module(ours, theirs, inputs, dtype)


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding_bag_per_sample_weights_match_torch(dtype: str) -> None:
    ours, theirs = _pair(lambda L: L.nn.EmbeddingBag(5, 3, mode="sum"))
    check_module(ours, theirs, [np.array([0, 4, 4, 2, 1]), np.array([0, 2]), _randn(5)], dtype)


DROPOUT_SHAPES = {"Dropout": (2, 3), "Dropout1d": (2, 3, 4), "Dropout2d": (2, 3, 2, 2), "Dropout3d": (1, 2, 2, 2, 2),
                  "AlphaDropout": (2, 3), "FeatureAlphaDropout": (2, 3, 2)}


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(DROPOUT_SHAPES))
def test_dropout_in_eval_matches_torch(name: str, dtype: str) -> None:
    ours, theirs = _pair(lambda L: getattr(L.nn, name)(0.4).eval())
    _same_repr(ours, theirs)
    check_module(ours, theirs, [_randn(*DROPOUT_SHAPES[name])], dtype)


# -- repr, construction and initialisation ---------------------------------------------


@requires_torch
@pytest.mark.parametrize("build", [
    lambda L: L.nn.Embedding(5, 2, padding_idx=1, max_norm=2.0, norm_type=1.0, scale_grad_by_freq=True),
    lambda L: L.nn.Embedding(5, 2, sparse=True),
    lambda L: L.nn.EmbeddingBag(5, 2, max_norm=1.0, norm_type=3.0, scale_grad_by_freq=True, mode="max",
                                padding_idx=-1),
    lambda L: L.nn.Dropout(0.1, inplace=True),
    lambda L: L.nn.Upsample(size=(2, 3), mode="bilinear"),
    lambda L: L.nn.Upsample(scale_factor=(2, 3)),
    lambda L: L.nn.UpsamplingNearest2d(size=3),
    lambda L: L.nn.PixelUnshuffle(4),
    lambda L: L.nn.ChannelShuffle(4),
    lambda L: L.nn.Unfold(3, 2, 1, 2),
    lambda L: L.nn.ZeroPad3d((1, 2, 3, 4, 5, 6)),
    lambda L: L.nn.ConstantPad3d([1, 2, 3, 4, 5, 6], 2),
    lambda L: L.nn.ReflectionPad2d([1, 2, 3, 4]),
])
def test_repr_matches_torch(build: Callable[[Any], Any]) -> None:
    _same_repr(*_pair(build))


def test_linear_default_init_bounds() -> None:
    agrad.manual_seed(0)
    fc = nn.Linear(16, 400)
    bound = 1 / math.sqrt(16)
    for p in (fc.weight, fc.bias):
        values = p.detach().numpy()
        assert np.abs(values).max() <= bound
        assert np.abs(values).max() > 0.9 * bound  # spread over the whole interval, not a narrower one
    assert abs(float(fc.weight.detach().numpy().std()) - bound / math.sqrt(3)) < 0.01


def test_bilinear_and_embedding_default_init() -> None:
    agrad.manual_seed(0)
    bl = nn.Bilinear(9, 4, 50)
    assert np.abs(bl.weight.detach().numpy()).max() <= 1 / 3 and np.abs(bl.bias.detach().numpy()).max() <= 1 / 3
    emb = nn.Embedding(300, 20, padding_idx=3)
    w = emb.weight.detach().numpy()
    assert (w[3] == 0).all() and abs(w.std() - 1) < 0.05 and abs(w.mean()) < 0.05
    bag = nn.EmbeddingBag(10, 4, padding_idx=-1)
    assert bag.padding_idx == 9 and (bag.weight.detach().numpy()[9] == 0).all()


def test_factory_kwargs_and_reset_parameters() -> None:
    fc = nn.Linear(3, 2, dtype=agrad.float64, device="cpu")
    assert fc.weight.dtype is agrad.float64 and fc.bias is not None and fc.bias.dtype is agrad.float64
    assert nn.Embedding(3, 2, dtype=agrad.float64).weight.dtype is agrad.float64
    assert nn.Bilinear(1, 2, 3, bias=False).bias is None
    before = fc.weight.detach().clone()
    fc.reset_parameters()
    assert not bool((fc.weight == before).all())
    assert [n for n, _ in nn.Linear(2, 2, bias=False).named_parameters()] == ["weight"]
    assert "bias" in nn.Linear(2, 2, bias=False)._parameters


def test_embedding_from_pretrained_shares_and_freezes() -> None:
    table = agrad.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    emb = nn.Embedding.from_pretrained(table)
    assert not emb.weight.requires_grad and emb(agrad.tensor([2])).tolist() == [[5.0, 6.0]]
    with agrad.no_grad():
        emb.weight.mul_(2)
    assert table.tolist()[0] == [2.0, 4.0]
    assert nn.Embedding.from_pretrained(table, freeze=False).weight.requires_grad
    bag = nn.EmbeddingBag.from_pretrained(table, mode="max")
    assert not bag.weight.requires_grad and bag(agrad.tensor([[0, 2]])).tolist() == [[10.0, 12.0]]
    assert nn.EmbeddingBag.from_pretrained(table, freeze=False).weight.requires_grad


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding_max_norm_renormalises_weight_in_place_like_torch(dtype: str) -> None:
    ours, theirs = _pair(lambda L: L.nn.Embedding(4, 3, max_norm=0.5))
    with torch.no_grad():  # every row's norm above max_norm, whatever the draw
        theirs.weight.copy_(torch.tensor([[1.0, 0, 0], [0, 2.0, 0], [0, 0, -3.0], [1.0, 1.0, 1.0]]))
    check_module(ours, theirs, [np.array([0, 2])], dtype)
    norms = np.linalg.norm(ours.weight.detach().numpy(), axis=1)
    assert (norms[[0, 2]] <= 0.5 + 1e-6).all() and (norms[[1, 3]] > 0.5).all()


# -- misuse ----------------------------------------------------------------------------


@requires_torch
@pytest.mark.parametrize("call", [
    lambda L: L.nn.Linear(3, 4)(L.ones(2, 5)),
    lambda L: L.nn.Linear(3, 4)(L.ones(5)),
    lambda L: L.nn.Bilinear(2, 3, 4)(L.ones(5, 2), L.ones(4, 3)),
    lambda L: L.nn.Bilinear(2, 3, 4)(L.ones(5, 2), L.ones(5, 2)),
    lambda L: L.nn.Bilinear(0, 3, 4),
    lambda L: L.nn.Dropout(1.5),
    lambda L: L.nn.Dropout2d(-0.1),
    lambda L: L.nn.AlphaDropout(2),
    lambda L: L.nn.Dropout1d()(L.ones(2, 3, 4, 5)),
    lambda L: L.nn.Unflatten(1, 6),
    lambda L: L.nn.Unflatten(1, (2, 3.0)),
    lambda L: L.nn.Unflatten(1, (4, 4))(L.ones(2, 6)),
    lambda L: L.nn.Embedding(5, 2, padding_idx=5),
    lambda L: L.nn.Embedding(5, 2, padding_idx=-6),
    lambda L: L.nn.Embedding(5, 2, _weight=L.ones(5, 3)),
    lambda L: L.nn.Embedding.from_pretrained(L.ones(4)),
    lambda L: L.nn.Embedding(5, 2)(L.tensor([5])),
    lambda L: L.nn.EmbeddingBag(5, 2, padding_idx=7),
    lambda L: L.nn.EmbeddingBag.from_pretrained(L.ones(2, 2, 2)),
    lambda L: L.nn.EmbeddingBag(5, 2)(L.tensor([1, 2])),
    lambda L: L.nn.EmbeddingBag(5, 2, mode="median")(L.tensor([[1, 2]])),
    lambda L: L.nn.EmbeddingBag(5, 2, mode="mean")(L.tensor([[1, 2]]), None, L.ones(1, 2)),
    lambda L: L.nn.PixelShuffle(2)(L.ones(1, 3, 2, 2)),
    lambda L: L.nn.ReflectionPad1d(3)(L.ones(1, 2, 3)),
    lambda L: L.nn.ReflectionPad2d((0, 0, 3, 3))(L.ones(1, 1, 3, 4)),
    lambda L: L.nn.ReflectionPad3d((0, 0, 0, 0, 2, 2))(L.ones(1, 1, 2, 3, 4)),
    lambda L: L.nn.ReflectionPad1d(1)(L.ones(3)),
    lambda L: L.nn.ReplicationPad2d(1)(L.ones(2, 1, 1, 1, 3)),
    lambda L: L.nn.ReplicationPad1d(1)(L.ones(2, 0, 3)),
    lambda L: L.nn.ReplicationPad1d((1, 2, 3))(L.ones(1, 2, 3)),
    lambda L: L.nn.ReplicationPad1d((-2, -2))(L.ones(1, 2, 3)),
    lambda L: L.nn.CircularPad1d(4)(L.ones(1, 2, 3)),
    lambda L: L.nn.CircularPad2d(1)(L.ones(3, 3)),
    lambda L: L.nn.CircularPad1d((-2, -2))(L.ones(1, 2, 3)),
])
def test_misuse_raises_like_torch(call: Callable[[Any], Any]) -> None:
    _raises_like(lambda: call(agrad), lambda: call(torch))


# -- dropout in training -------------------------------------------------------------------


def _drop_pattern(layer: nn.Module, x: agrad.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """The output of ``layer(x)`` and the gradient of its sum with respect to ``x``."""
    x = x.detach().requires_grad_()
    y = layer(x)
    y.sum().backward_sync()
    assert x.grad is not None
    return y.detach().numpy(), x.grad.numpy()


@pytest.mark.parametrize("p", [0.2, 0.5, 0.8])
def test_dropout_zeroes_and_scales(p: float) -> None:
    agrad.manual_seed(0)
    x = agrad.tensor(np.random.default_rng(0).uniform(1, 2, (200, 50)))
    y, grad = _drop_pattern(nn.Dropout(p), x)
    kept = y != 0
    np.testing.assert_allclose(y[kept], x.numpy()[kept] / (1 - p), rtol=1e-12)
    np.testing.assert_allclose(grad, kept / (1 - p), rtol=1e-12)  # the gradient is the same mask and scale
    assert abs((1 - kept.mean()) - p) < 0.02


@pytest.mark.parametrize("name,shape,channel_axes", [
    ("Dropout1d", (40, 30, 4), 2), ("Dropout1d", (300, 4), 1),
    ("Dropout2d", (40, 30, 3, 2), 2), ("Dropout3d", (40, 30, 2, 2, 2), 2), ("Dropout3d", (300, 2, 2, 2), 1),
])
def test_channel_dropout_drops_whole_channels(name: str, shape: tuple[int, ...], channel_axes: int) -> None:
    agrad.manual_seed(1)
    p = 0.3
    y, grad = _drop_pattern(getattr(nn, name)(p), agrad.ones(*shape, dtype=agrad.float64))
    per_channel = y.reshape(shape[:channel_axes] + (-1,))
    assert (per_channel == per_channel[..., :1]).all()  # one draw per channel
    assert set(np.unique(per_channel)) <= {0.0, 1 / (1 - p)}
    assert abs((per_channel[..., 0] == 0).mean() - p) < 0.05
    np.testing.assert_allclose(grad, y)


@pytest.mark.parametrize("name", ["AlphaDropout", "FeatureAlphaDropout"])
def test_alpha_dropout_keeps_mean_and_variance(name: str) -> None:
    agrad.manual_seed(2)
    x = agrad.tensor(np.random.default_rng(2).standard_normal((400, 200, 2)))
    y = getattr(nn, name)(0.3)(x).numpy()
    assert abs(y.mean()) < 0.05 and abs(y.std() - 1) < 0.05
    assert len(np.unique(y[np.isclose(y, y.min())])) == 1  # the dropped value is one constant


@pytest.mark.parametrize("name", list(DROPOUT_SHAPES))
def test_dropout_eval_and_p_zero_are_identity(name: str) -> None:
    x = agrad.ones(*DROPOUT_SHAPES[name])
    assert getattr(nn, name)(0.5).eval()(x) is x
    assert getattr(nn, name)(0.0)(x) is x


def test_dropout_p_one_zeroes_everything_and_inplace_mutates() -> None:
    assert not nn.Dropout(1.0)(agrad.ones(3, 3)).numpy().any()
    x = agrad.ones(50, 50)
    y = nn.Dropout(0.5, inplace=True)(x)
    assert y is x and set(np.unique(x.numpy())) == {0.0, 2.0}


def test_dropout_follows_manual_seed() -> None:
    x = agrad.ones(20, 20)
    agrad.manual_seed(5)
    first = nn.Dropout()(x).numpy()
    agrad.manual_seed(5)
    assert (nn.Dropout()(x).numpy() == first).all()
