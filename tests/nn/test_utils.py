"""agrad.nn.utils against torch.nn.utils: gradient clipping, parameter vectors, padded and packed sequences."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import agrad
from agrad.nn.utils import rnn
from tests.helpers import requires_torch, torch
from tests.nn.oracle import assert_close

DTYPES = ["float64", "float32"]


def _pair(a: np.ndarray, dtype: str, requires_grad: bool = False) -> tuple[agrad.Tensor, Any]:
    ours = agrad.tensor(a.astype(dtype)).requires_grad_(requires_grad)
    theirs = torch.tensor(a.astype(dtype)).requires_grad_(requires_grad)
    return ours, theirs


def _params_with_grads(dtype: str, scale: float = 1.0) -> tuple[list[agrad.Tensor], list[Any]]:
    """Three parameters, the last without a gradient, in both libraries."""
    rng = np.random.default_rng(0)
    ours, theirs = [], []
    for i, shape in enumerate([(3, 4), (5,), (2, 2)]):
        p, tp = _pair(rng.standard_normal(shape), dtype, requires_grad=True)
        if i < 2:
            g = rng.standard_normal(shape) * scale
            p.grad, tp.grad = _pair(g, dtype)
        ours.append(p)
        theirs.append(tp)
    return ours, theirs


# -- clip_grad ---------------------------------------------------------------------------------------


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("norm_type", [2.0, 1, math.inf, 0.5, 3])
@pytest.mark.parametrize("max_norm", [0.5, 1e3])
@pytest.mark.parametrize("foreach", [None, True, False])
def test_clip_grad_norm_matches_torch(dtype: str, norm_type: float, max_norm: float, foreach: bool | None) -> None:
    ours, theirs = _params_with_grads(dtype)
    total = agrad.nn.utils.clip_grad_norm_(ours, max_norm, norm_type, foreach=foreach)
    expected = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type, foreach=foreach)
    assert isinstance(total, agrad.Tensor) and total.dim() == 0 and total.dtype is getattr(agrad, dtype)
    assert_close(total, expected, dtype, "total norm")
    for i, (p, tp) in enumerate(zip(ours, theirs)):
        assert (p.grad is None) == (tp.grad is None)
        if tp.grad is not None:
            assert_close(p.grad, tp.grad, dtype, f"grad {i}")
            assert p.grad.grad_fn is None


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_get_total_norm_and_clip_grads_with_norm_match_torch(dtype: str) -> None:
    ours, theirs = _params_with_grads(dtype, scale=10.0)
    norm = agrad.nn.utils.get_total_norm([p.grad for p in ours if p.grad is not None], 2.0)
    tnorm = torch.nn.utils.get_total_norm([p.grad for p in theirs if p.grad is not None], 2.0)
    assert_close(norm, tnorm, dtype, "norm")
    agrad.nn.utils.clip_grads_with_norm_(ours, 1.0, norm)
    torch.nn.utils.clip_grads_with_norm_(theirs, 1.0, tnorm)
    for p, tp in zip(ours[:2], theirs[:2]):
        assert_close(p.grad, tp.grad, dtype, "clipped")
    assert_close(agrad.nn.utils.get_total_norm(ours[0]), torch.nn.utils.get_total_norm(theirs[0]), dtype, "one")


def test_clip_grad_norm_takes_one_tensor_and_empty_inputs() -> None:
    p = agrad.nn.Parameter(agrad.zeros(2))
    p.grad = agrad.tensor([3.0, 4.0])
    assert agrad.nn.utils.clip_grad_norm_(p, 10.0).item() == 5.0
    np.testing.assert_array_equal(p.grad.numpy(), [3.0, 4.0])  # under max_norm: unchanged
    empty = agrad.nn.utils.clip_grad_norm_([], 1.0)
    assert empty.item() == 0.0 and empty.dtype is agrad.float32
    with pytest.warns(UserWarning, match="empty generator"):
        agrad.nn.utils.clip_grad_norm_((q for q in []), 1.0)
    with pytest.warns(FutureWarning, match="clip_grad_norm_"):
        agrad.nn.utils.clip_grad_norm(p, 1.0)
    np.testing.assert_allclose(p.grad.numpy(), [0.6, 0.8], rtol=1e-5)


@requires_torch
def test_non_finite_norms() -> None:
    ours, theirs = _params_with_grads("float64")
    ours[0].grad[0, 0] = math.nan
    theirs[0].grad[0, 0] = math.nan
    with pytest.raises(RuntimeError, match="is non-finite, so it cannot be clipped") as ours_err:
        agrad.nn.utils.clip_grad_norm_(ours, 1.0, error_if_nonfinite=True)
    with pytest.raises(RuntimeError) as theirs_err:
        torch.nn.utils.clip_grad_norm_(theirs, 1.0, error_if_nonfinite=True)
    assert str(ours_err.value) == str(theirs_err.value)
    assert math.isnan(agrad.nn.utils.clip_grad_norm_(ours, 1.0).item())  # scaled by nan, as PyTorch
    assert np.isnan(ours[1].grad.numpy()).all()


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_clip_grad_value_matches_torch(dtype: str) -> None:
    ours, theirs = _params_with_grads(dtype)
    assert agrad.nn.utils.clip_grad_value_(ours, 0.5) is None
    torch.nn.utils.clip_grad_value_(theirs, 0.5)
    for p, tp in zip(ours[:2], theirs[:2]):
        assert_close(p.grad, tp.grad, dtype, "clamped")
    agrad.nn.utils.clip_grad_value_(ours[0], 0.1)
    assert float(ours[0].grad.abs().max()) == pytest.approx(0.1)


# -- convert_parameters ------------------------------------------------------------------------------


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_parameters_to_vector_and_back(dtype: str) -> None:
    ours, theirs = _params_with_grads(dtype)
    vec = agrad.nn.utils.parameters_to_vector(ours)
    tvec = torch.nn.utils.parameters_to_vector(theirs)
    assert_close(vec, tvec, dtype, "vector")
    w = np.random.default_rng(1).standard_normal(tuple(tvec.shape)).astype(dtype)
    (vec * agrad.tensor(w)).sum().backward_sync()
    (tvec * torch.tensor(w)).sum().backward()
    for p, tp in zip(ours, theirs):
        assert_close(p.grad, tp.grad, dtype, "gradient through the vector")
    new = np.arange(tvec.numel(), dtype=dtype)
    agrad.nn.utils.vector_to_parameters(agrad.tensor(new), ours)
    torch.nn.utils.vector_to_parameters(torch.tensor(new), theirs)
    for p, tp in zip(ours, theirs):
        assert p.requires_grad and p.grad_fn is None
        assert_close(p, tp, dtype, "copied back")


def test_vector_to_parameters_refuses_non_tensors() -> None:
    with pytest.raises(TypeError, match="expected agrad.Tensor, but got: list"):
        agrad.nn.utils.vector_to_parameters([1.0, 2.0], [agrad.nn.Parameter(agrad.zeros(2))])


# -- rnn: padding --------------------------------------------------------------------------------------

LENGTHS = [3, 5, 1, 4]


def _sequences(dtype: str, trailing: tuple[int, ...] = (2,)) -> tuple[list[agrad.Tensor], list[Any]]:
    rng = np.random.default_rng(2)
    pairs = [_pair(rng.standard_normal((n, *trailing)), dtype, requires_grad=True) for n in LENGTHS]
    return [a for a, _ in pairs], [t for _, t in pairs]


def _backward_both(out: agrad.Tensor, tout: Any, seed: int = 3) -> None:
    w = np.random.default_rng(seed).standard_normal(tuple(tout.shape)).astype(str(tout.dtype).split(".")[1])
    (out * agrad.tensor(w)).sum().backward_sync()
    (tout * torch.tensor(w)).sum().backward()


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
@pytest.mark.parametrize("trailing", [(), (2,), (2, 3)])
def test_pad_sequence_matches_torch(dtype: str, batch_first: bool, padding_side: str,
                                    trailing: tuple[int, ...]) -> None:
    ours, theirs = _sequences(dtype, trailing)
    out = rnn.pad_sequence(ours, batch_first, -1.5, padding_side)
    tout = torch.nn.utils.rnn.pad_sequence(theirs, batch_first, -1.5, padding_side)
    assert_close(out, tout, dtype, "padded")
    _backward_both(out, tout)
    for s, ts in zip(ours, theirs):
        assert_close(s.grad, ts.grad, dtype, "sequence grad")


@requires_torch
def test_pad_sequence_of_a_tensor_and_of_ints() -> None:
    x = np.arange(6).reshape(3, 2)
    assert_close(rnn.pad_sequence(agrad.tensor(x)), torch.nn.utils.rnn.pad_sequence(torch.tensor(x)), "float64")
    ints = [agrad.tensor([1, 2, 3]), agrad.tensor([4])]
    out = rnn.pad_sequence(ints, padding_value=0.5)
    assert out.dtype is agrad.int64
    np.testing.assert_array_equal(out.numpy(), [[1, 4], [2, 0], [3, 0]])


@requires_torch
@pytest.mark.parametrize("batch_first", [False, True])
def test_unpad_sequence_inverts_pad_sequence(batch_first: bool) -> None:
    ours, theirs = _sequences("float64")
    padded = rnn.pad_sequence(ours, batch_first)
    before = padded.detach().numpy().copy()
    pieces = rnn.unpad_sequence(padded, agrad.tensor(LENGTHS), batch_first)
    assert [tuple(p.shape) for p in pieces] == [tuple(t.shape) for t in theirs]
    for p, s in zip(pieces, ours):
        assert_close(p, s.detach(), "float64", "unpadded")
    np.testing.assert_array_equal(padded.detach().numpy(), before)  # not transposed in place
    sum(p.sum() for p in pieces).backward_sync()
    for s in ours:
        np.testing.assert_array_equal(s.grad.numpy(), np.ones(tuple(s.shape)))


# -- rnn: packing ----------------------------------------------------------------------------------


def _same_packed(p: rnn.PackedSequence, tp: Any, dtype: str) -> None:
    assert isinstance(p, rnn.PackedSequence) and isinstance(p, tuple)
    assert p._fields == ("data", "batch_sizes", "sorted_indices", "unsorted_indices")
    assert_close(p.data, tp.data, dtype, "data")
    np.testing.assert_array_equal(p.batch_sizes.numpy(), tp.batch_sizes.numpy())
    assert p.batch_sizes.dtype is agrad.int64
    for mine, theirs in [(p.sorted_indices, tp.sorted_indices), (p.unsorted_indices, tp.unsorted_indices)]:
        assert (mine is None) == (theirs is None)
        if theirs is not None:
            np.testing.assert_array_equal(mine.numpy(), theirs.numpy())
            assert mine.dtype is agrad.int64


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("enforce_sorted", [True, False])
@pytest.mark.parametrize("lengths_as", ["list", "tensor"])
def test_pack_and_pad_round_trip_matches_torch(dtype: str, batch_first: bool, enforce_sorted: bool,
                                               lengths_as: str) -> None:
    lengths = sorted(LENGTHS, reverse=True) if enforce_sorted else LENGTHS
    shape = (len(lengths), 5, 3) if batch_first else (5, len(lengths), 3)
    x, tx = _pair(np.random.default_rng(4).standard_normal(shape), dtype, requires_grad=True)
    lens = lengths if lengths_as == "list" else agrad.tensor(lengths)
    tlens = lengths if lengths_as == "list" else torch.tensor(lengths)
    packed = rnn.pack_padded_sequence(x, lens, batch_first, enforce_sorted)
    tpacked = torch.nn.utils.rnn.pack_padded_sequence(tx, tlens, batch_first, enforce_sorted)
    _same_packed(packed, tpacked, dtype)
    out, out_lengths = rnn.pad_packed_sequence(packed, batch_first, padding_value=2.0, total_length=6)
    tout, tout_lengths = torch.nn.utils.rnn.pad_packed_sequence(tpacked, batch_first, 2.0, total_length=6)
    assert_close(out, tout, dtype, "padded")
    np.testing.assert_array_equal(out_lengths.numpy(), tout_lengths.numpy())
    assert out_lengths.dtype is agrad.int64
    _backward_both(out, tout)
    assert_close(x.grad, tx.grad, dtype, "input grad")


@requires_torch
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_pack_sequence_and_unpack_sequence_match_torch(enforce_sorted: bool) -> None:
    ours, theirs = _sequences("float64", (2,))
    if enforce_sorted:
        order = np.argsort(LENGTHS)[::-1]
        ours, theirs = [ours[i] for i in order], [theirs[i] for i in order]
    packed = rnn.pack_sequence(ours, enforce_sorted)
    tpacked = torch.nn.utils.rnn.pack_sequence(theirs, enforce_sorted)
    _same_packed(packed, tpacked, "float64")
    assert repr(packed.batch_sizes) == repr(tpacked.batch_sizes)
    pieces = rnn.unpack_sequence(packed)
    tpieces = torch.nn.utils.rnn.unpack_sequence(tpacked)
    for p, tp in zip(pieces, tpieces):
        assert_close(p, tp, "float64", "unpacked")
    _backward_both(packed.data, tpacked.data)
    for s, ts in zip(ours, theirs):
        assert_close(s.grad, ts.grad, "float64", "sequence grad")


@requires_torch
def test_packed_sequence_repr_and_conversions() -> None:
    seqs = [[1.0, 2.0, 3.0], [4.0, 5.0]]
    packed = rnn.pack_sequence([agrad.tensor(s) for s in reversed(seqs)], enforce_sorted=False)
    tpacked = torch.nn.utils.rnn.pack_sequence([torch.tensor(s) for s in reversed(seqs)], enforce_sorted=False)
    assert repr(packed) == repr(tpacked).replace("torch", "agrad")
    double = packed.double()
    assert double.data.dtype is agrad.float64 and double.sorted_indices is packed.sorted_indices
    assert packed.to(agrad.float32) is packed and packed.cpu() is packed and not packed.is_cuda
    assert packed.long().data.dtype is agrad.int64
    rebuilt = rnn.PackedSequence(packed.data, packed.batch_sizes, packed.sorted_indices)
    np.testing.assert_array_equal(rebuilt.unsorted_indices.numpy(), tpacked.unsorted_indices.numpy())
    assert rnn.PackedSequence((packed.data, packed.batch_sizes)).batch_sizes is packed.batch_sizes
    np.testing.assert_array_equal(rnn.invert_permutation(agrad.tensor([2, 0, 1])).numpy(), [1, 2, 0])
    assert rnn.invert_permutation(None) is None


def _error(fn: Any) -> BaseException:
    with pytest.raises(Exception) as info:
        fn()
    return info.value


@requires_torch
@pytest.mark.parametrize("call", [
    lambda r, t: r.pad_sequence([]),
    lambda r, t: r.pad_sequence(5),
    lambda r, t: r.pad_sequence([t.ones(2, 3), t.ones(2, 4)]),
    lambda r, t: r.pad_sequence([t.ones(2)], padding_side="middle"),
    lambda r, t: r.pack_padded_sequence(t.ones(3, 2), [3, 2, 1]),
    lambda r, t: r.pack_padded_sequence(t.ones(3, 2), [1, 3]),
    lambda r, t: r.pack_padded_sequence(t.ones(3, 2), [3, 0]),
    lambda r, t: r.pack_padded_sequence(t.ones(0, 2), [0, 0]),
    lambda r, t: r.pack_padded_sequence(t.ones(3), [3]),
    lambda r, t: r.pad_packed_sequence(r.pack_sequence([t.ones(3), t.ones(1)]), total_length=2),
    lambda r, t: r.pack_sequence([]),
], ids=["empty", "not-iterable", "trailing-shapes", "padding-side", "len-lengths", "unsorted", "zero-length",
        "empty-input", "one-dim", "total-length", "pack-empty"])
def test_misuse_raises_torchs_errors(call: Any) -> None:
    ours = _error(lambda: call(rnn, agrad))
    theirs = _error(lambda: call(torch.nn.utils.rnn, torch))
    assert type(ours) is type(theirs)
    assert str(ours) == str(theirs).replace("torch", "agrad")


def test_lengths_beyond_the_input_are_refused() -> None:
    with pytest.raises(RuntimeError, match="exceeds the padded input's 3 time steps"):  # PyTorch reads past it
        rnn.pack_padded_sequence(agrad.ones(3, 2), [4, 2])
