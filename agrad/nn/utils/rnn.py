"""Batches of variable-length sequences: padded and packed (mirrors ``torch.nn.utils.rnn``).

A *padded* batch is one tensor ``T x B x *`` (``B x T x *`` with
``batch_first``), shorter sequences filled with ``padding_value``.  A
*packed* batch (:class:`PackedSequence`) holds only the real steps, time
step by time step: ``data`` is ``sum(lengths) x *`` and ``batch_sizes[t]``
says how many sequences are still running at step ``t`` (sequences sorted
by decreasing length; ``sorted_indices`` records the sort when the input
was not sorted).

    >>> a, b = agrad.tensor([1, 2, 3]), agrad.tensor([4, 5])
    >>> agrad.nn.utils.rnn.pad_sequence([a, b], batch_first=True)
    tensor([[1, 2, 3],
            [4, 5, 0]])
    >>> packed = agrad.nn.utils.rnn.pack_sequence([b, a], enforce_sorted=False)
    >>> packed.data, packed.batch_sizes
    (tensor([1, 4, 2, 5, 3]), tensor([2, 2, 1]))
    >>> agrad.nn.utils.rnn.unpack_sequence(packed)
    [tensor([4, 5]), tensor([1, 2, 3])]

Note [Padding and packing as one gather]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Every conversion here moves whole rows (the ``*`` part) and computes where
each row goes from the lengths alone, in numpy.  So each is one
differentiable gather: pack indexes the padded tensor at the (step, batch)
pairs of the real steps; pad and ``pad_sequence`` append one row of
``padding_value`` to the concatenated rows and index it with an index array
whose padded places point at that last row.  One op each way, whatever
``B`` and ``T``, and gradients flow through the gather (the padding row's
gradient is dropped), where a loop of slices and copies would record ``T``
or ``B`` nodes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

import numpy as np

from agrad import _dtype
from agrad._creation import arange, as_tensor, empty_like, full
from agrad._ops._shape import cat
from agrad._ops._sorting import sort
from agrad._tensor import Tensor

__all__ = [
    "PackedSequence", "invert_permutation", "pack_padded_sequence", "pad_packed_sequence", "pad_sequence",
    "unpad_sequence", "pack_sequence", "unpack_sequence",
]


class PackedSequence_(NamedTuple):
    """The fields of :class:`PackedSequence` (PyTorch's base class of the same name)."""

    data: Tensor
    batch_sizes: Tensor
    sorted_indices: Tensor | None
    unsorted_indices: Tensor | None


class PackedSequence(PackedSequence_):
    """A packed batch of variable-length sequences: a namedtuple of ``data``,
    ``batch_sizes``, ``sorted_indices`` and ``unsorted_indices``, as PyTorch's.

    Build it with :func:`pack_padded_sequence` or :func:`pack_sequence`, not by
    hand.  ``batch_sizes`` is an int64 CPU tensor; the indices are int64 on
    ``data``'s device, ``unsorted_indices`` the inverse of ``sorted_indices``
    (both None when the batch was sorted already).  ``to``, ``cpu``, ``cuda``
    and the dtype casts convert ``data`` (and move the indices with it).

        >>> p = agrad.nn.utils.rnn.pack_sequence([agrad.tensor([1.0, 2.0]), agrad.tensor([3.0])])
        >>> p
        PackedSequence(data=tensor([1., 3., 2.]), batch_sizes=tensor([2, 1]),
                       sorted_indices=None, unsorted_indices=None)
        >>> p.double().data.dtype
        agrad.float64
    """

    __slots__ = ()

    def __new__(cls, data: Any, batch_sizes: Tensor | None = None, sorted_indices: Tensor | None = None,
                unsorted_indices: Tensor | None = None) -> PackedSequence:
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        if batch_sizes is None:  # PyTorch's older form: PackedSequence((data, batch_sizes), ...)
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise AssertionError("Expected data to be a list or tuple of length 2")
            data, batch_sizes = data
        elif batch_sizes.device.type != "cpu":
            raise ValueError(
                "batch_sizes should always be on CPU. Instances of PackedSequence should never be created manually. "
                "They should be instantiated by functions like pack_sequence and pack_padded_sequences in "
                "nn.utils.rnn. https://pytorch.org/docs/stable/nn.html#torch.nn.utils.rnn.pack_sequence")
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def _with_data(self, data: Tensor) -> PackedSequence:
        """This sequence with ``data`` (a conversion of ``self.data``), its indices on ``data``'s device."""
        if data is self.data:
            return self

        def move(t: Tensor | None) -> Tensor | None:
            return None if t is None else t.to(data.device)

        return type(self)(data, self.batch_sizes, move(self.sorted_indices), move(self.unsorted_indices))

    def to(self, *args: Any, **kwargs: Any) -> PackedSequence:
        """Convert ``data`` as ``Tensor.to`` does; ``self`` if nothing changes."""
        return self._with_data(self.data.to(*args, **kwargs))

    def cuda(self, *args: Any, **kwargs: Any) -> PackedSequence:
        return self._with_data(self.data.cuda(*args, **kwargs))

    def cpu(self, *args: Any, **kwargs: Any) -> PackedSequence:
        return self._with_data(self.data.cpu(*args, **kwargs))

    def double(self) -> PackedSequence:
        return self.to(dtype=_dtype.float64)

    def float(self) -> PackedSequence:
        return self.to(dtype=_dtype.float32)

    def half(self) -> PackedSequence:
        return self.to(dtype=_dtype.float16)

    def long(self) -> PackedSequence:
        return self.to(dtype=_dtype.int64)

    def int(self) -> PackedSequence:
        return self.to(dtype=_dtype.int32)

    def short(self) -> PackedSequence:
        return self.to(dtype=_dtype.int16)

    def char(self) -> PackedSequence:
        return self.to(dtype=_dtype.int8)

    def byte(self) -> PackedSequence:
        return self.to(dtype=_dtype.uint8)

    @property
    def is_cuda(self) -> bool:
        """Whether ``data`` is on a CUDA device."""
        return self.data.is_cuda


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The inverse of the 1-D index permutation ``permutation`` (None for None)."""
    if permutation is None:
        return None
    return empty_like(permutation).scatter_(0, permutation, arange(permutation.numel(), device=permutation.device))


def _steps(lengths: np.ndarray, total: int) -> np.ndarray:
    """``(total, B)`` bool: whether step ``t`` of sequence ``b`` is a real step (``t < lengths[b]``)."""
    return np.arange(total)[:, None] < lengths[None, :]


def _gather_padded(rows: Tensor, where: np.ndarray, padding_value: float) -> Tensor:
    """``rows`` (``N x *``) with one row of ``padding_value`` appended, indexed by ``where``:
    an index of ``N`` is a padded place (Note [Padding and packing as one gather])."""
    pad = full((1, *rows.shape[1:]), padding_value, dtype=rows.dtype, device=rows.device)
    return cat([rows, pad])[as_tensor(where, device=rows.device)]


def pack_padded_sequence(input: Tensor, lengths: Tensor | list[int], batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch (``T x B x *``, or ``B x T x *`` with ``batch_first``) of sequences
    of the given ``lengths``.

    With ``enforce_sorted`` (the default) the lengths must decrease along the
    batch; otherwise the batch is sorted first and the sort is recorded in
    ``sorted_indices``.  Differentiable w.r.t. ``input``.  The inverse of
    :func:`pad_packed_sequence`.
    """
    if isinstance(lengths, Tensor):
        lengths_t = lengths.to(dtype=_dtype.int64)
    else:
        lengths_t = as_tensor(lengths, dtype=_dtype.int64, device="cpu")
    sorted_indices = None
    if not enforce_sorted:
        lengths_t, sorted_indices = sort(lengths_t, descending=True)
        sorted_indices = sorted_indices.to(input.device)
        input = input.index_select(0 if batch_first else 1, sorted_indices)
    if input.dim() < 2:
        raise IndexError(f"Dimension out of range (expected to be in range of [-{input.dim()}, {input.dim() - 1}], "
                         "but got 1)")
    if input.numel() == 0:
        raise RuntimeError("Cannot pack empty tensors.")
    n = lengths_t.cpu().numpy()
    steps, batch = (input.shape[1], input.shape[0]) if batch_first else (input.shape[0], input.shape[1])
    if len(n) != batch:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got {len(n)} "
                           f"(batch_size={batch})")
    if n[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an element in 'lengths' that "
                           "is <= 0")
    if np.any(n[:-1] < n[1:]):
        raise RuntimeError("`lengths` array must be sorted in decreasing order when `enforce_sorted` is True. You can "
                           "pass `enforce_sorted=False` to pack_padded_sequence and/or pack_sequence to sidestep "
                           "this requirement if you do not need ONNX exportability.")
    if n[0] > steps:  # PyTorch reads past the input here; agrad refuses
        raise RuntimeError(f"pack_padded_sequence: a length ({n[0]}) exceeds the padded input's {steps} time steps")
    t, b = np.nonzero(_steps(n, int(n[0])))  # row-major: step by step, the running sequences in batch order
    data = input[as_tensor(b), as_tensor(t)] if batch_first else input[as_tensor(t), as_tensor(b)]
    batch_sizes = as_tensor((n[None, :] > np.arange(n[0])[:, None]).sum(axis=1), dtype=_dtype.int64)
    return PackedSequence(data, batch_sizes, sorted_indices, None)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False, padding_value: float = 0.0,
                        total_length: int | None = None) -> tuple[Tensor, Tensor]:
    """Pad a packed batch: ``(padded, lengths)``, the padded tensor ``T x B x *`` (``B x T x *``
    with ``batch_first``; ``T`` the longest length, or ``total_length``) in the batch's
    original order, and the int64 lengths.  The inverse of :func:`pack_padded_sequence`."""
    batch_sizes = sequence.batch_sizes.numpy()
    max_seq_length = len(batch_sizes)
    if total_length is not None:
        if total_length < max_seq_length:
            raise ValueError("Expected total_length to be at least the length of the longest sequence in input, but "
                             f"got total_length={total_length} and max sequence length being {max_seq_length}")
        max_seq_length = total_length
    lengths = (batch_sizes[None, :] > np.arange(batch_sizes[0])[:, None]).sum(axis=1)
    steps = _steps(lengths, max_seq_length)
    where = np.full(steps.shape, len(sequence.data), dtype=np.int64)
    where[steps] = np.arange(len(sequence.data))  # row-major order is the packed order
    if sequence.unsorted_indices is not None:
        order = sequence.unsorted_indices.cpu().numpy()
        where, lengths = where[:, order], lengths[order]
    padded = _gather_padded(sequence.data, where.T if batch_first else where, padding_value)
    return padded, as_tensor(lengths, dtype=_dtype.int64)


def pad_sequence(sequences: Tensor | Iterable[Tensor], batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """Stack sequences ``L_i x *`` into one ``T x B x *`` tensor (``B x T x *`` with
    ``batch_first``), ``T`` the longest ``L_i``, filling with ``padding_value`` on the
    ``padding_side`` (``"right"`` or ``"left"``).  The result has the first sequence's
    dtype; differentiable w.r.t. every sequence."""
    if not isinstance(sequences, Iterable):
        raise RuntimeError(f"pad_sequence: Expected iterable for input sequences, but got arg of type: "
                           f"{type(sequences)}")
    seqs = tuple(sequences)
    if not seqs:
        raise RuntimeError("received an empty list of sequences")
    if padding_side not in ("left", "right"):
        raise RuntimeError(f"Expected padding_side to be one of left or right, but got {padding_side}.")
    first = seqs[0]
    if first.dim() == 0:
        raise RuntimeError("pad_sequence: the sequences must have at least one dimension (their length)")
    for s in seqs:
        if s.shape[1:] != first.shape[1:]:
            d = next(i for i, (x, y) in enumerate(zip(first.shape[1:], s.shape[1:])) if x != y) + 1
            raise RuntimeError(f"The size of tensor a ({first.shape[d]}) must match the size of tensor b "
                               f"({s.shape[d]}) at non-singleton dimension {d}")
    lengths = np.array([len(s) for s in seqs])
    longest = int(lengths.max())
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    position = np.arange(longest)[None, :] - (longest - lengths[:, None] if padding_side == "left" else 0)
    real = (position >= 0) & (position < lengths[:, None])
    where = np.where(real, starts[:, None] + position, lengths.sum())  # (B, T)
    rows = cat([s.to(dtype=first.dtype) for s in seqs])
    return _gather_padded(rows, where if batch_first else where.T, padding_value)


def unpad_sequence(padded_sequences: Tensor, lengths: Tensor, batch_first: bool = False) -> list[Tensor]:
    """Split a padded batch back into its sequences (views of it): the inverse of
    :func:`pad_sequence` with right padding.  Unlike PyTorch's, the input is not
    transposed in place."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [seq[:int(length)] for seq, length in zip(padded_sequences, lengths, strict=True)]


def pack_sequence(sequences: list[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of sequences ``L_i x *``: :func:`pad_sequence` then :func:`pack_padded_sequence`."""
    lengths = as_tensor([v.size(0) for v in sequences])
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """The list of sequences in a packed batch, in their original order: the inverse of :func:`pack_sequence`."""
    padded_sequences, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded_sequences, lengths, batch_first=True)
