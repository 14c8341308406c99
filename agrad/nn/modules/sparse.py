"""Embedding tables: Embedding and EmbeddingBag (mirrors ``torch.nn.modules.sparse``).

A lookup table ``weight`` of shape ``(num_embeddings, embedding_dim)`` indexed
by integer tensors.  Gradients are dense (``sparse=True`` is not supported).

    >>> emb = agrad.nn.Embedding(10, 3, padding_idx=0)
    >>> emb(agrad.tensor([[0, 2], [4, 9]])).shape
    agrad.Size([2, 2, 3])
    >>> emb.weight[0]
    tensor([0., 0., 0.], grad_fn=<SelectBackward0>)
"""

from __future__ import annotations

from typing import Any

from agrad._creation import empty
from agrad._grad_mode import no_grad
from agrad._tensor import Tensor
from agrad.nn import functional as F
from agrad.nn import init
from agrad.nn._layers import _padding_index
from agrad.nn.modules.module import Module
from agrad.nn.parameter import Parameter

__all__ = ["Embedding", "EmbeddingBag"]


def _check_weight(weight: Tensor, num_embeddings: int, embedding_dim: int) -> None:
    if list(weight.shape) != [num_embeddings, embedding_dim]:
        raise AssertionError("Shape of weight does not match num_embeddings and embedding_dim")


def _check_pretrained(embeddings: Tensor) -> tuple[int, int]:
    if embeddings.dim() != 2:
        raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
    rows, cols = embeddings.shape
    return rows, cols


class _EmbeddingTable(Module):
    """The table both layers hold: ``weight`` drawn from N(0, 1) with the ``padding_idx`` row zeroed."""

    weight: Parameter
    padding_idx: int | None

    def reset_parameters(self) -> None:
        """Redraw ``weight`` from N(0, 1), then zero the ``padding_idx`` row."""
        init.normal_(self.weight)
        self._fill_padding_idx_with_zero()

    def _fill_padding_idx_with_zero(self) -> None:
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx].fill_(0)


class Embedding(_EmbeddingTable):
    """Rows of ``weight`` looked up by an integer tensor: input ``(*)`` gives output ``(*, embedding_dim)``.

    The ``padding_idx`` row starts at zero and gets no gradient; with
    ``max_norm`` each looked-up row whose ``norm_type``-norm exceeds it is
    rescaled in place before the lookup; with ``scale_grad_by_freq`` a row's
    gradient is divided by how often its index occurs in the batch.

        >>> emb = agrad.nn.Embedding.from_pretrained(agrad.tensor([[1.0, 2.0], [3.0, 4.0]]))
        >>> emb(agrad.tensor([1, 1]))
        tensor([[3., 4.],
                [3., 4.]])
        >>> agrad.nn.Embedding(5, 2, padding_idx=-1, max_norm=1.0)
        Embedding(5, 2, padding_idx=4, max_norm=1.0)
    """

    __constants__ = ["num_embeddings", "embedding_dim", "padding_idx", "max_norm", "norm_type",
                     "scale_grad_by_freq", "sparse"]
    num_embeddings: int
    embedding_dim: int
    max_norm: float | None
    norm_type: float
    scale_grad_by_freq: bool
    sparse: bool

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                 sparse: bool = False, _weight: Tensor | None = None, _freeze: bool = False, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.padding_idx = _padding_index(padding_idx, num_embeddings, "Padding_idx")
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        if _weight is None:
            self.weight = Parameter(empty((num_embeddings, embedding_dim), device=device, dtype=dtype),
                                    requires_grad=not _freeze)
            self.reset_parameters()
        else:
            _check_weight(_weight, num_embeddings, embedding_dim)
            self.weight = Parameter(_weight, requires_grad=not _freeze)
        self.sparse = sparse

    def forward(self, input: Tensor) -> Tensor:
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    def extra_repr(self) -> str:
        s = "{num_embeddings}, {embedding_dim}"
        if self.padding_idx is not None:
            s += ", padding_idx={padding_idx}"
        if self.max_norm is not None:
            s += ", max_norm={max_norm}"
        if self.norm_type != 2:
            s += ", norm_type={norm_type}"
        if self.scale_grad_by_freq is not False:
            s += ", scale_grad_by_freq={scale_grad_by_freq}"
        if self.sparse is not False:
            s += ", sparse=True"
        return s.format(**self.__dict__)

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True, padding_idx: int | None = None,
                        max_norm: float | None = None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                        sparse: bool = False) -> Embedding:
        """An Embedding whose ``weight`` is the 2-D ``embeddings`` (sharing its memory), frozen unless
        ``freeze=False``."""
        rows, cols = _check_pretrained(embeddings)
        return cls(num_embeddings=rows, embedding_dim=cols, _weight=embeddings, _freeze=freeze,
                   padding_idx=padding_idx, max_norm=max_norm, norm_type=norm_type,
                   scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


class EmbeddingBag(_EmbeddingTable):
    """The sum, mean or max of the embeddings of each bag of indices, without materialising the lookups' rows
    per bag.

    Bags are the rows of a 2-D input, or the slices of a 1-D input starting at
    ``offsets`` (with ``include_last_offset`` the last offset closes the last
    bag).  ``per_sample_weights`` (``mode='sum'`` only) scale each looked-up
    row; entries equal to ``padding_idx`` are left out; an empty bag gives
    zeros.  ``max_norm`` renormalises looked-up rows as :class:`Embedding`
    does.

        >>> bag = agrad.nn.EmbeddingBag.from_pretrained(agrad.tensor([[1.0, 2.0], [3.0, 4.0]]), mode="sum")
        >>> bag(agrad.tensor([0, 1, 1]), agrad.tensor([0, 1]))
        tensor([[1., 2.],
                [6., 8.]])
        >>> bag
        EmbeddingBag(2, 2, mode='sum')
    """

    __constants__ = ["num_embeddings", "embedding_dim", "max_norm", "norm_type", "scale_grad_by_freq", "mode",
                     "sparse", "include_last_offset", "padding_idx"]
    num_embeddings: int
    embedding_dim: int
    max_norm: float | None
    norm_type: float
    scale_grad_by_freq: bool
    mode: str
    sparse: bool
    include_last_offset: bool

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm: float | None = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                 _weight: Tensor | None = None, include_last_offset: bool = False, padding_idx: int | None = None,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.max_norm = max_norm
        self.norm_type = norm_type
        self.scale_grad_by_freq = scale_grad_by_freq
        self.padding_idx = _padding_index(padding_idx, num_embeddings)
        if _weight is None:
            self.weight = Parameter(empty((num_embeddings, embedding_dim), device=device, dtype=dtype))
            self.reset_parameters()
        else:
            _check_weight(_weight, num_embeddings, embedding_dim)
            self.weight = Parameter(_weight)
        self.mode = mode
        self.sparse = sparse
        self.include_last_offset = include_last_offset

    def forward(self, input: Tensor, offsets: Tensor | None = None,
                per_sample_weights: Tensor | None = None) -> Tensor:
        """One row per bag: ``(B, embedding_dim)``."""
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type, self.scale_grad_by_freq,
                               self.mode, self.sparse, per_sample_weights, self.include_last_offset,
                               self.padding_idx)

    def extra_repr(self) -> str:
        s = "{num_embeddings}, {embedding_dim}"
        if self.max_norm is not None:
            s += ", max_norm={max_norm}"
        if self.norm_type != 2:
            s += ", norm_type={norm_type}"
        if self.scale_grad_by_freq is not False:
            s += ", scale_grad_by_freq={scale_grad_by_freq}"
        s += ", mode={mode}"
        if self.padding_idx is not None:
            s += ", padding_idx={padding_idx}"
        return s.format(**{k: repr(v) for k, v in self.__dict__.items()})

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True, max_norm: float | None = None,
                        norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean",
                        sparse: bool = False, include_last_offset: bool = False,
                        padding_idx: int | None = None) -> EmbeddingBag:
        """An EmbeddingBag whose ``weight`` is the 2-D ``embeddings`` (sharing its memory), frozen unless
        ``freeze=False``."""
        rows, cols = _check_pretrained(embeddings)
        bag = cls(num_embeddings=rows, embedding_dim=cols, _weight=embeddings, max_norm=max_norm,
                  norm_type=norm_type, scale_grad_by_freq=scale_grad_by_freq, mode=mode, sparse=sparse,
                  include_last_offset=include_last_offset, padding_idx=padding_idx)
        bag.weight.requires_grad_(not freeze)
        return bag
