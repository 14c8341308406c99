"""Backward node names against PyTorch's, where users see them: ``grad_fn``
reprs (``grad_fn=<MmBackward0>``), ``grad_fn.name()`` and graph pictures.

Two tables are run in both libraries on the same float64 inputs that require
grad, and each output's ``grad_fn`` name is compared (with its ``output_nr``
when that is not 0, as graph pictures show multi-output nodes):

* every op-table entry with ``samples`` and a PyTorch ``ref``, on its samples;
* :data:`COMPOSITES`, the calls users write that are not one table op
  (``matmul`` in each shape case, ``F.linear``, the losses, indexing, views).

What is not PyTorch's yet is listed in :data:`KNOWN_DIFFERENCES` with the
reason, and the test asserts each entry is still accurate: a change that
makes a name PyTorch's fails until its entry is removed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
from agrad._ops._registry import REGISTRY
from tests.helpers import requires_torch, torch
from tests.ops.test_op_table import _to_agrad, _to_torch, _torch_kwargs

pytestmark = requires_torch

_INTERNAL = "an internal op; its ref spells it with other ops, and the public call is compared in COMPOSITES"
_FUSED = "a composite here, one fused op with its own backward in PyTorch (docs/differences.md)"

# Case -> (agrad's name(s), PyTorch's name(s), why): the case's outputs pair
# each of agrad's names with each of PyTorch's, and no others differ.  A case
# is an op-table entry (by name) or a COMPOSITES entry (by id).
Names = str | None | tuple[str | None, ...]
KNOWN_DIFFERENCES: dict[str, tuple[Names, Names, str]] = {
    # -- op-table entries that users do not call as such ----------------------------------------------------------
    "index": ("IndexBackward0", ("SelectBackward0", "SliceBackward0"),
              "the advanced-index op: Tensor.__getitem__ builds PyTorch's chain of select/slice views for a basic "
              "index and calls it for tensors only (its samples call it with basic indices too)"),
    "contiguous_copy": ("CloneBackward0", None,
                        "Tensor.contiguous calls it for non-contiguous inputs only, as PyTorch copies only those "
                        "(CloneBackward0 in both); its samples are contiguous, which PyTorch returns as they are"),
    "nll_loss_backward": ("NllLossBackwardBackward0", "ViewBackward0", _INTERNAL),
    "index_zeroed": ("IndexZeroedBackward0", "IndexPutBackward0", _INTERNAL),
    "sort_values": (("SortBackward0", "SortBackward1"), "GatherBackward0", _INTERNAL),
    "topk_values": ("TopkBackward0", "GatherBackward0", _INTERNAL),
    "selected_values": ("KthvalueBackward0", ("GatherBackward0", "SqueezeBackward1"), _INTERNAL),
    "cummax_values": ("CummaxBackward0", "GatherBackward0", _INTERNAL),
    "cummin_values": ("CumminBackward0", "GatherBackward0", _INTERNAL),
    "convolution_backward_weight": ("ConvolutionBackwardBackward0", "ConvolutionBackwardBackward0:1",
                                    "the weight's gradient of a convolution's backward, one node of its own here; "
                                    "PyTorch's node gives it as its second output"),
    # -- user-visible ---------------------------------------------------------------------------------------------
    "einsum": ("EinsumBackward0", ("MulBackward0", "PermuteBackward0", "SumBackward1", "ViewBackward0"),
               "one node here; PyTorch decomposes each equation into permutes, products and sums, ending in "
               "whichever op the equation needs last"),
    "torch.einsum('ij,jk->ik')": ("EinsumBackward0", "ViewBackward0", "as the einsum entry"),
    "torch.einsum('ii')": ("EinsumBackward0", "SumBackward1", "as the einsum entry"),
    "unique": (None, ("Unique2Backward0", "UniqueConsecutiveBackward0", "UniqueDimBackward0"),
               "agrad's outputs do not require grad; PyTorch's have a node whose backward raises that the "
               "derivative is not implemented"),
    "bincount_weighted": (None, "NotImplemented", "as unique"),
    "aminmax": ("AminmaxBackward0", "AminmaxBackward0:1",
                "each output has its own node here (values of two reductions); PyTorch's share one"),
    "x.reshape (a copy)": ("ViewBackward0", "UnsafeViewBackward0",
                           "one op here, which copies when numpy must; PyTorch clones, then views the copy "
                           "(CloneBackward0 -> UnsafeViewBackward0), and only numpy's reshape knows which it did"),
    "x.sum_to_size (its own shape)": ("SumBackward1", None,
                                      "PyTorch returns the input itself; agrad's op records a node that passes the "
                                      "gradient through"),
    "2 / x": ("DivBackward0", "MulBackward0",
              "one div here; PyTorch's Tensor.__rtruediv__ is reciprocal() * 2, two kernels and two nodes"),
    "F.cross_entropy (probabilities)": ("MeanBackward0", "DivBackward1",
                                        "agrad averages with mean(); PyTorch divides the sum by a C++ number "
                                        "(div.Scalar), an overload agrad's div has no node for"),
    "F.embedding (padding_idx)": ("WhereBackward0", "EmbeddingBackward0",
                                  "the padding row's gradient is cut by a where() after the EmbeddingBackward0 "
                                  "lookup; PyTorch's embedding backward skips it itself"),
    "F.mse_loss": ("MeanBackward0", "MseLossBackward0", _FUSED),
    "F.mse_loss (none)": ("PowBackward0", "MseLossBackward0", _FUSED),
    "F.mse_loss (sum)": ("SumBackward0", "MseLossBackward0", _FUSED),
    "F.binary_cross_entropy": ("MeanBackward0", "BinaryCrossEntropyBackward0", _FUSED),
    "F.binary_cross_entropy_with_logits": ("MeanBackward0", "BinaryCrossEntropyWithLogitsBackward0", _FUSED),
    "F.layer_norm": ("AddBackward0", "NativeLayerNormBackward0", _FUSED),
    "F.layer_norm (no affine)": ("MulBackward0", "NativeLayerNormBackward0", _FUSED),
    "F.group_norm": ("AddBackward0", "NativeGroupNormBackward0", _FUSED),
    "F.batch_norm (training)": ("AddBackward0", "NativeBatchNormBackward0", _FUSED),
}


def _x(*shape: int) -> np.ndarray:
    return np.random.default_rng(sum(shape) + len(shape)).standard_normal(shape)


def _i(values: Any) -> np.ndarray:
    return np.array(values)


def F(L: Any) -> Any:
    """``L.nn.functional`` of either library."""
    return L.nn.functional


def _dropout(L: Any, x: Any) -> Any:
    L.manual_seed(0)
    return F(L).dropout(x, 0.5, training=True)


def _constant(L: Any, x: Any) -> Any:
    return x.detach()


# id -> (call on the library ``L`` and its tensors, the arrays: float ones
# become float64 tensors that require grad, the others plain tensors).
COMPOSITES: dict[str, tuple[Callable[..., Any], tuple[np.ndarray, ...]]] = {
    # matmul in each of PyTorch's dispatch cases (Note [matmul's node names])
    "matmul(1-D, 1-D)": (lambda L, a, b: a @ b, (_x(3), _x(3))),
    "matmul(2-D, 1-D)": (lambda L, a, b: a @ b, (_x(2, 3), _x(3))),
    "matmul(1-D, 2-D)": (lambda L, a, b: a @ b, (_x(3), _x(3, 4))),
    "matmul(2-D, 2-D)": (lambda L, a, b: L.matmul(a, b), (_x(2, 3), _x(3, 4))),
    "matmul(3-D, 2-D)": (lambda L, a, b: a @ b, (_x(5, 2, 3), _x(3, 4))),
    "matmul(3-D, 1-D)": (lambda L, a, b: a @ b, (_x(5, 2, 3), _x(3))),
    "matmul(1-D, 3-D)": (lambda L, a, b: a @ b, (_x(3), _x(5, 3, 4))),
    "matmul(2-D, 3-D)": (lambda L, a, b: a @ b, (_x(2, 3), _x(5, 3, 4))),
    "matmul(2-D constant, 3-D)": (lambda L, a, b: _constant(L, a) @ b, (_x(2, 3), _x(5, 3, 4))),
    "matmul(1-row 2-D, 3-D)": (lambda L, a, b: a @ b, (_x(1, 3), _x(5, 3, 4))),
    "matmul(2-D, 3-D of columns)": (lambda L, a, b: a @ b, (_x(2, 3), _x(5, 3, 1))),
    "matmul(3-D, 3-D)": (lambda L, a, b: a @ b, (_x(5, 2, 3), _x(5, 3, 4))),
    "matmul(3-D of batch 1, 3-D)": (lambda L, a, b: a @ b, (_x(1, 2, 3), _x(5, 3, 4))),
    "matmul(3-D, 3-D of batch 1)": (lambda L, a, b: a @ b, (_x(5, 2, 3), _x(1, 3, 4))),
    "matmul(4-D, 3-D)": (lambda L, a, b: a @ b, (_x(5, 1, 2, 3), _x(4, 3, 2))),
    "matmul(4-D, 4-D)": (lambda L, a, b: a.matmul(b), (_x(2, 5, 2, 3), _x(2, 5, 3, 2))),
    "torch.einsum('ij,jk->ik')": (lambda L, a, b: L.einsum("ij,jk->ik", a, b), (_x(2, 3), _x(3, 4))),
    "torch.einsum('ii')": (lambda L, a: L.einsum("ii", a), (_x(3, 3),)),
    # F.linear: addmm for a matrix, flattened around an addmm for other contiguous inputs
    "F.linear (bias)": (lambda L, x, w, b: F(L).linear(x, w, b), (_x(2, 3), _x(4, 3), _x(4))),
    "F.linear (no bias)": (lambda L, x, w: F(L).linear(x, w), (_x(2, 3), _x(4, 3))),
    "F.linear (1-D, bias)": (lambda L, x, w, b: F(L).linear(x, w, b), (_x(3), _x(4, 3), _x(4))),
    "F.linear (1-D, no bias)": (lambda L, x, w: F(L).linear(x, w), (_x(3), _x(4, 3))),
    "F.linear (3-D, bias)": (lambda L, x, w, b: F(L).linear(x, w, b), (_x(5, 2, 3), _x(4, 3), _x(4))),
    "F.linear (3-D, no bias)": (lambda L, x, w: F(L).linear(x, w), (_x(5, 2, 3), _x(4, 3))),
    "F.linear (non-contiguous 3-D, bias)": (lambda L, x, w, b: F(L).linear(x.transpose(0, 1), w, b),
                                            (_x(2, 5, 3), _x(4, 3), _x(4))),
    "F.linear (3-D, bias of a batch)": (lambda L, x, w, b: F(L).linear(x, w, b), (_x(5, 2, 3), _x(4, 3), _x(5, 1, 4))),
    "nn.Linear": (lambda L, x: L.nn.Linear(3, 4, dtype=L.float64)(x), (_x(2, 3),)),
    # losses
    "F.cross_entropy": (lambda L, x, t: F(L).cross_entropy(x, t), (_x(3, 5), _i([0, 4, 2]))),
    "F.cross_entropy (none)": (lambda L, x, t: F(L).cross_entropy(x, t, reduction="none"), (_x(3, 5), _i([0, 4, 2]))),
    "F.cross_entropy (3-D)": (lambda L, x, t: F(L).cross_entropy(x, t), (_x(3, 5, 2), _i([[0, 4], [2, 1], [1, 1]]))),
    "F.cross_entropy (3-D, none)": (lambda L, x, t: F(L).cross_entropy(x, t, reduction="none"),
                                    (_x(3, 5, 2), _i([[0, 4], [2, 1], [1, 1]]))),
    "F.cross_entropy (4-D)": (lambda L, x, t: F(L).cross_entropy(x, t), (_x(2, 5, 2, 2), _i([[[0, 4], [1, 1]]] * 2))),
    "F.cross_entropy (label smoothing)": (lambda L, x, t: F(L).cross_entropy(x, t, label_smoothing=0.1),
                                          (_x(3, 5), _i([0, 4, 2]))),
    "F.cross_entropy (probabilities)": (lambda L, x, t: F(L).cross_entropy(x, t.softmax(1)), (_x(3, 5), _x(3, 5))),
    "F.nll_loss": (lambda L, x, t: F(L).nll_loss(x, t), (_x(3, 5), _i([0, 4, 2]))),
    "F.nll_loss (1-D)": (lambda L, x, t: F(L).nll_loss(x, t), (_x(5), _i(2))),
    "F.nll_loss (4-D, none)": (lambda L, x, t: F(L).nll_loss(x, t, reduction="none"),
                               (_x(2, 5, 2, 2), _i([[[0, 4], [1, 1]]] * 2))),
    "F.nll_loss (5-D, sum)": (lambda L, x, t: F(L).nll_loss(x, t, reduction="sum"),
                              (_x(2, 3, 2, 1, 2), _i([[[[0, 2]], [[1, 1]]]] * 2))),
    "F.nll_loss (5-D, none)": (lambda L, x, t: F(L).nll_loss(x, t, reduction="none"),
                               (_x(2, 3, 2, 1, 2), _i([[[[0, 2]], [[1, 1]]]] * 2))),
    "F.mse_loss": (lambda L, x, y: F(L).mse_loss(x, y), (_x(3, 4), _x(4, 3).T.copy())),
    "F.mse_loss (none)": (lambda L, x, y: F(L).mse_loss(x, y, reduction="none"), (_x(3, 4), _x(4, 3).T.copy())),
    "F.mse_loss (sum)": (lambda L, x, y: F(L).mse_loss(x, y, reduction="sum"), (_x(3, 4), _x(4, 3).T.copy())),
    "F.l1_loss": (lambda L, x, y: F(L).l1_loss(x, y), (_x(3, 4), _x(4, 3).T.copy())),
    "F.binary_cross_entropy": (lambda L, x, y: F(L).binary_cross_entropy(x.sigmoid(), y.sigmoid()),
                               (_x(3, 4), _x(4, 3).T.copy())),
    "F.binary_cross_entropy_with_logits": (lambda L, x, y: F(L).binary_cross_entropy_with_logits(x, y.sigmoid()),
                                           (_x(3, 4), _x(4, 3).T.copy())),
    # activations, normalisation, convolution, dropout, embedding
    "F.softmax": (lambda L, x: F(L).softmax(x, dim=-1), (_x(3, 4),)),
    "x.softmax": (lambda L, x: x.softmax(0), (_x(3, 4),)),
    "F.log_softmax": (lambda L, x: F(L).log_softmax(x, dim=1), (_x(3, 4),)),
    "F.relu": (lambda L, x: F(L).relu(x), (_x(3, 4),)),
    "x.relu": (lambda L, x: x.relu(), (_x(3, 4),)),
    "F.gelu": (lambda L, x: F(L).gelu(x), (_x(3, 4),)),
    "F.silu": (lambda L, x: F(L).silu(x), (_x(3, 4),)),
    "F.leaky_relu": (lambda L, x: F(L).leaky_relu(x, 0.1), (_x(3, 4),)),
    "torch.tanh": (lambda L, x: L.tanh(x), (_x(3, 4),)),
    "torch.sigmoid": (lambda L, x: L.sigmoid(x), (_x(3, 4),)),
    "F.layer_norm": (lambda L, x, w, b: F(L).layer_norm(x, (4,), w, b), (_x(3, 4), _x(4), _x(4))),
    "F.layer_norm (no affine)": (lambda L, x: F(L).layer_norm(x, (4,)), (_x(3, 4),)),
    "F.group_norm": (lambda L, x, w, b: F(L).group_norm(x, 2, w, b), (_x(2, 4, 3), _x(4), _x(4))),
    "F.batch_norm (training)": (lambda L, x, w, b: F(L).batch_norm(x, None, None, w, b, training=True),
                                (_x(4, 3), _x(3), _x(3))),
    "F.conv1d": (lambda L, x, w, b: F(L).conv1d(x, w, b), (_x(2, 3, 7), _x(4, 3, 3), _x(4))),
    "F.conv2d": (lambda L, x, w, b: F(L).conv2d(x, w, b), (_x(2, 3, 5, 5), _x(4, 3, 3, 3), _x(4))),
    "F.conv2d (no bias, padding, stride)": (lambda L, x, w: F(L).conv2d(x, w, padding=1, stride=2),
                                            (_x(2, 3, 5, 5), _x(4, 3, 3, 3))),
    "F.max_pool2d": (lambda L, x: F(L).max_pool2d(x, 2), (_x(2, 3, 4, 4),)),
    "F.avg_pool2d": (lambda L, x: F(L).avg_pool2d(x, 2), (_x(2, 3, 4, 4),)),
    "F.dropout (training)": (_dropout, (_x(3, 4),)),
    "F.dropout (eval)": (lambda L, x: F(L).dropout(x, 0.5, training=False), (_x(3, 4),)),
    "F.embedding": (lambda L, i, w: F(L).embedding(i, w), (_i([0, 2, 1]), _x(4, 3))),
    "F.embedding (2-D indices)": (lambda L, i, w: F(L).embedding(i, w), (_i([[0, 2], [1, 1]]), _x(4, 3))),
    "F.embedding (padding_idx)": (lambda L, i, w: F(L).embedding(i, w, padding_idx=1), (_i([0, 2, 1]), _x(4, 3))),
    "torch.embedding": (lambda L, i, w: L.embedding(w, i), (_i([0, 2, 1]), _x(4, 3))),
    # reductions
    "x.sum()": (lambda L, x: x.sum(), (_x(3, 4),)),
    "x.sum(dim)": (lambda L, x: x.sum(1), (_x(3, 4),)),
    "x.sum(dims)": (lambda L, x: x.sum((0, 1)), (_x(3, 4),)),
    "torch.sum(keepdim)": (lambda L, x: L.sum(x, dim=0, keepdim=True), (_x(3, 4),)),
    "x.mean()": (lambda L, x: x.mean(), (_x(3, 4),)),
    "x.mean(dim)": (lambda L, x: x.mean(-1), (_x(3, 4),)),
    "x.mean(dims)": (lambda L, x: x.mean((0, 1)), (_x(3, 4),)),
    "x.var(dim)": (lambda L, x: x.var(1), (_x(3, 4),)),
    "x.max()": (lambda L, x: x.max(), (_x(3, 4),)),
    "x.max(dim)": (lambda L, x: x.max(1), (_x(3, 4),)),
    "x.min(dim)": (lambda L, x: x.min(0), (_x(3, 4),)),
    "x.sort": (lambda L, x: x.sort(1), (_x(3, 4),)),
    "torch.sort(stable)": (lambda L, x: L.sort(x, stable=True), (_x(3, 4),)),
    "x.topk": (lambda L, x: x.topk(2), (_x(3, 4),)),
    "x.kthvalue": (lambda L, x: x.kthvalue(2, 1), (_x(3, 4),)),
    "x.median(dim)": (lambda L, x: x.median(1), (_x(3, 4),)),
    "x.cummax": (lambda L, x: x.cummax(1), (_x(3, 4),)),
    "x.cummin": (lambda L, x: x.cummin(1), (_x(3, 4),)),
    # indexing (Note [Basic indexing as PyTorch's chain])
    "x[1]": (lambda L, x: x[1], (_x(3, 4),)),
    "x.select": (lambda L, x: x.select(1, 2), (_x(3, 4),)),
    "x[1, 2]": (lambda L, x: x[1, 2], (_x(3, 4),)),
    "x[1:]": (lambda L, x: x[1:], (_x(3, 4),)),
    "x[:]": (lambda L, x: x[:], (_x(3, 4),)),
    "x[:, :]": (lambda L, x: x[:, :], (_x(3, 4),)),
    "x[:, 1:3]": (lambda L, x: x[:, 1:3], (_x(3, 4),)),
    "x[0, 1:3]": (lambda L, x: x[0, 1:3], (_x(3, 4),)),
    "x[1:3, 0]": (lambda L, x: x[1:3, 0], (_x(3, 4),)),
    "x[...]": (lambda L, x: x[...], (_x(3, 4),)),
    "x[None]": (lambda L, x: x[None], (_x(3, 4),)),
    "x[..., None]": (lambda L, x: x[..., None], (_x(3, 4),)),
    "x[tensor]": (lambda L, x, i: x[i], (_x(3, 4), _i([0, 2, 0]))),
    "x[list]": (lambda L, x: x[[0, 2]], (_x(3, 4),)),
    "x[mask]": (lambda L, x, m: x[m], (_x(3, 4), _x(3, 4) > 0)),
    "x[1:, tensor]": (lambda L, x, i: x[1:, i], (_x(3, 4), _i([0, 2]))),
    "x.narrow": (lambda L, x: x.narrow(1, 1, 2), (_x(3, 4),)),
    "x.gather": (lambda L, x, i: x.gather(1, i), (_x(3, 4), _i([[0], [1], [2]]))),
    # views and shapes
    "x.reshape": (lambda L, x: x.reshape(4, 3), (_x(3, 4),)),
    "x.reshape (a copy)": (lambda L, x: x.t().reshape(12), (_x(3, 4),)),
    "x.view": (lambda L, x: x.view(12), (_x(3, 4),)),
    "x.view_as": (lambda L, x, y: x.view_as(y), (_x(3, 4), _x(12))),
    "x.flatten()": (lambda L, x: x.flatten(), (_x(3, 4),)),
    "x.flatten(1)": (lambda L, x: x.flatten(1), (_x(2, 3, 4),)),
    "x.flatten() of 1-D": (lambda L, x: x.flatten(), (_x(3),)),
    "x.unflatten": (lambda L, x: x.unflatten(1, (2, 2)), (_x(3, 4),)),
    "x.squeeze()": (lambda L, x: x.squeeze(), (_x(3, 1, 4),)),
    "x.squeeze(dim)": (lambda L, x: x.squeeze(1), (_x(3, 1, 4),)),
    "x.squeeze(dims)": (lambda L, x: x.squeeze((0, 1)), (_x(3, 1, 4),)),
    "x.unsqueeze": (lambda L, x: x.unsqueeze(0), (_x(3, 4),)),
    "x.t()": (lambda L, x: x.t(), (_x(3, 4),)),
    "x.T": (lambda L, x: x.T, (_x(3, 4),)),
    "x.mT": (lambda L, x: x.mT, (_x(2, 3, 4),)),
    "x.transpose": (lambda L, x: x.transpose(0, 1), (_x(3, 4),)),
    "x.permute": (lambda L, x: x.permute(2, 0, 1), (_x(2, 3, 4),)),
    "x.movedim": (lambda L, x: x.movedim(0, 2), (_x(2, 3, 4),)),
    "x.expand": (lambda L, x: x.expand(3, 4), (_x(1, 4),)),
    "x.expand_as": (lambda L, x, y: x.expand_as(y), (_x(4), _x(3, 4))),
    "torch.broadcast_to": (lambda L, x: L.broadcast_to(x, (3, 4)), (_x(4),)),
    "x.repeat": (lambda L, x: x.repeat(2, 1), (_x(3, 4),)),
    "x.contiguous (a copy)": (lambda L, x: x.t().contiguous(), (_x(3, 4),)),
    "x.clone": (lambda L, x: x.clone(), (_x(3, 4),)),
    "x.sum_to_size": (lambda L, x: x.sum_to_size(3, 1), (_x(2, 3, 4),)),
    "x.sum_to_size (leading dims)": (lambda L, x: x.sum_to_size(4), (_x(2, 3, 4),)),
    "x.sum_to_size (inner dims)": (lambda L, x: x.sum_to_size(1, 4), (_x(3, 4),)),
    "x.sum_to_size (its own shape)": (lambda L, x: x.sum_to_size(3, 4), (_x(3, 4),)),
    "x.sum_to_size(())": (lambda L, x: x.sum_to_size(()), (_x(3, 4),)),
    "torch.cat": (lambda L, x, y: L.cat([x, y]), (_x(3, 4), _x(2, 4))),
    "torch.stack": (lambda L, x, y: L.stack([x, y]), (_x(3, 4), _x(3, 4))),
    "torch.hstack": (lambda L, x, y: L.hstack([x, y]), (_x(3, 4), _x(3, 4))),
    "x.split": (lambda L, x: x.split(2), (_x(5, 4),)),
    "x.chunk": (lambda L, x: x.chunk(2, 1), (_x(3, 4),)),
    "x.unbind": (lambda L, x: x.unbind(), (_x(3, 4),)),
    # operators and casts
    "x + y": (lambda L, x, y: x + y, (_x(3, 4), _x(4))),
    "x + 1": (lambda L, x: x + 1, (_x(3, 4),)),
    "1 + x": (lambda L, x: 1 + x, (_x(3, 4),)),
    "x - y": (lambda L, x, y: x - y, (_x(3, 4), _x(4))),
    "1 - x": (lambda L, x: 1 - x, (_x(3, 4),)),
    "x * 2": (lambda L, x: x * 2, (_x(3, 4),)),
    "x / y": (lambda L, x, y: x / y, (_x(3, 4), _x(4))),
    "x / 2": (lambda L, x: x / 2, (_x(3, 4),)),
    "2 / x": (lambda L, x: 2 / x, (_x(3, 4),)),
    "x ** 2": (lambda L, x: x**2, (_x(3, 4),)),
    "2 ** x": (lambda L, x: 2**x, (_x(3, 4),)),
    "-x": (lambda L, x: -x, (_x(3, 4),)),
    "abs(x)": (lambda L, x: abs(x), (_x(3, 4),)),
    "x.to(float32)": (lambda L, x: x.to(L.float32), (_x(3, 4),)),
    "torch.where": (lambda L, c, x, y: L.where(c, x, y), (_x(3, 4) > 0, _x(3, 4), _x(3, 4))),
    "x.masked_fill": (lambda L, x, m: x.masked_fill(m, 0.0), (_x(3, 4), _x(3, 4) > 0)),
    "x.clamp": (lambda L, x: x.clamp(-0.5, 0.5), (_x(3, 4),)),
    "x.clamp(min)": (lambda L, x: x.clamp(min=0), (_x(3, 4),)),
    "F.scaled_dot_product_attention": (lambda L, q, k, v: F(L).scaled_dot_product_attention(q, k, v),
                                       (_x(2, 3, 4), _x(2, 3, 4), _x(2, 3, 4))),
}


def _name(t: Any) -> str | None:
    """What a user sees of one output: its ``grad_fn``'s class name, as the repr
    shows it (``grad_fn.name()`` adds C++ namespaces to some of PyTorch's), with
    ``:output_nr`` when that is not 0; None without a ``grad_fn``."""
    fn = t.grad_fn
    if fn is None:
        return None
    name = type(fn).__name__
    return name if t.output_nr == 0 else f"{name}:{t.output_nr}"


def _names(result: Any) -> list[str | None]:
    """``_name`` of each tensor output of a call (one, or a tuple/named tuple of them)."""
    outputs = result if isinstance(result, tuple | list) else (result,)
    return [_name(o) for o in outputs if hasattr(o, "grad_fn")]


def _differences(ours: Any, theirs: Any) -> set[tuple[str | None, str | None]]:
    """The (agrad's, PyTorch's) name pairs of the outputs whose names differ."""
    mine, ref = _names(ours), _names(theirs)
    assert len(mine) == len(ref), f"{len(mine)} outputs, PyTorch's call has {len(ref)}"
    return {(a, t) for a, t in zip(mine, ref, strict=True) if a != t}


def _as_tuple(names: Names) -> tuple[str | None, ...]:
    return names if isinstance(names, tuple) else (names,)


def _assert_as_known(case: str, differences: set[tuple[str | None, str | None]]) -> None:
    """No difference, or exactly the case's entry in KNOWN_DIFFERENCES."""
    if case not in KNOWN_DIFFERENCES:
        assert differences == set(), f"names differ from PyTorch's (agrad's, PyTorch's): {sorted(differences, key=str)}"
        return
    ours, theirs, _ = KNOWN_DIFFERENCES[case]
    expected = set(itertools.product(_as_tuple(ours), _as_tuple(theirs)))
    assert differences == expected, (f"KNOWN_DIFFERENCES[{case!r}] is out of date: the names that differ now are "
                                     f"{sorted(differences, key=str)} (remove the entry when there are none)")


def _tensors(L: Any, arrays: tuple[np.ndarray, ...]) -> list[Any]:
    return [L.tensor(a, dtype=L.float64, requires_grad=True) if a.dtype.kind == "f" else L.tensor(a) for a in arrays]


TABLE_OPS = [name for name, op in REGISTRY.items() if op.samples is not None and op.ref is not None]


@pytest.mark.parametrize("name", TABLE_OPS)
def test_table_op_names_are_torchs(name: str) -> None:
    """Each sample call of the entry records PyTorch's node names."""
    op = REGISTRY[name]
    assert op.samples is not None and op.ref is not None  # as TABLE_OPS picks them
    differences: set[tuple[str | None, str | None]] = set()
    for args, kwargs in op.samples(np.random.default_rng(0)):
        ours = op.public(*_to_agrad(args, agrad.float64), **kwargs)
        theirs = op.ref(torch)(*_to_torch(args, torch.float64), **_torch_kwargs(kwargs))
        differences |= _differences(ours, theirs)
    _assert_as_known(name, differences)


@pytest.mark.parametrize("case", COMPOSITES)
def test_composite_names_are_torchs(case: str) -> None:
    """Each call users write records PyTorch's node names on its outputs."""
    fn, arrays = COMPOSITES[case]
    _assert_as_known(case, _differences(fn(agrad, *_tensors(agrad, arrays)), fn(torch, *_tensors(torch, arrays))))


def test_known_differences_name_cases() -> None:
    """Every KNOWN_DIFFERENCES key is a case of one of the two tables (none left behind by a rename)."""
    assert set(KNOWN_DIFFERENCES) - set(TABLE_OPS) - set(COMPOSITES) == set()
    assert set(TABLE_OPS) & set(COMPOSITES) == set()
