"""Batch normalisation layers (mirrors ``torch.nn.modules.batchnorm``): BatchNorm1d/2d/3d.

Each channel (dimension 1) is normalised by the batch's statistics in
training and by the running statistics in evaluation; the running
statistics are buffers (``running_mean``, ``running_var``, and the int64
counter ``num_batches_tracked``) registered in PyTorch's order, so a
``state_dict`` moves between the two libraries.

    >>> bn = agrad.nn.BatchNorm1d(3)
    >>> list(bn.state_dict())
    ['weight', 'bias', 'running_mean', 'running_var', 'num_batches_tracked']
    >>> _ = bn(agrad.arange(6.0).reshape(2, 3))
    >>> bn.running_mean, bn.num_batches_tracked
    (tensor([0.1500, 0.2500, 0.3500]), tensor(1))
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agrad import _dtype
from agrad._creation import ones, tensor, zeros
from agrad._tensor import Tensor
from agrad.nn import functional as F
from agrad.nn.modules.module import Module
from agrad.nn.modules.normalization import _register_affine, _reset_affine

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d"]


class _NormBase(Module):
    """The parameters and buffers of batch and instance norm (PyTorch's ``_NormBase``):
    ``weight``/``bias`` (with ``affine``), then ``running_mean``, ``running_var`` and
    ``num_batches_tracked`` (with ``track_running_stats``; otherwise registered as None)."""

    _version = 2
    __constants__ = ["track_running_stats", "momentum", "eps", "num_features", "affine"]
    num_features: int
    eps: float
    momentum: float | None
    affine: bool
    track_running_stats: bool

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device: Any = None, dtype: Any = None, *,
                 bias: bool = True) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        _register_affine(self, (num_features,), affine, bias, device, dtype)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=_dtype.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        """Running mean to zeros, running variance to ones and the batch count to 0."""
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        """Reset the running statistics, then the weight to ones and the bias to zeros."""
        self.reset_running_stats()
        _reset_affine(self)

    def _check_input_dim(self, input: Tensor) -> None:
        raise NotImplementedError

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")

    def _load_from_state_dict(self, state_dict: Mapping[str, Any], prefix: str, local_metadata: dict[str, Any],
                              strict: bool, missing_keys: list[str], unexpected_keys: list[str],
                              error_msgs: list[str]) -> None:
        """Checkpoints older than ``num_batches_tracked`` (version < 2, or no version
        recorded) load with the current counter, or 0, in its place, as PyTorch does."""
        version = local_metadata.get("version", None)
        if (version is None or version < 2) and self.track_running_stats:
            key = prefix + "num_batches_tracked"
            if key not in state_dict:
                assert isinstance(state_dict, dict)  # load_state_dict hands each module a fresh dict
                state_dict[key] = (self.num_batches_tracked if self.num_batches_tracked is not None
                                   else tensor(0, dtype=_dtype.int64))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)


class _BatchNorm(_NormBase):
    """Batch norm's forward (PyTorch's ``_BatchNorm``).

    In training the batch's statistics normalise and, with
    ``track_running_stats``, the running statistics move towards them by
    ``momentum`` (``momentum=None``: a cumulative average over the
    ``num_batches_tracked`` batches seen).  In evaluation the running
    statistics normalise, or the batch's when there are none.
    """

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        exponential_average_factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                exponential_average_factor = 1.0 / float(self.num_batches_tracked)
        bn_training = self.training or (self.running_mean is None and self.running_var is None)
        # Buffers are passed only when they are updated (training and tracked) or normalise (evaluation).
        use_buffers = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if use_buffers else None,
                            self.running_var if use_buffers else None, self.weight, self.bias, bn_training,
                            exponential_average_factor, self.eps)


def _check_dims(input: Tensor, allowed: tuple[int, ...]) -> None:
    """PyTorch's ValueError for an input whose number of dimensions is not one of ``allowed``."""
    if input.dim() not in allowed:
        expected = " or ".join(f"{n}D" for n in allowed)
        raise ValueError(f"expected {expected} input (got {input.dim()}D input)")


class BatchNorm1d(_BatchNorm):
    """Batch norm over ``(N, C)`` or ``(N, C, L)`` input (``torch.nn.BatchNorm1d``).

        >>> bn = agrad.nn.BatchNorm1d(4, momentum=None, affine=False)
        >>> bn
        BatchNorm1d(4, eps=1e-05, momentum=None, affine=False, bias=False, track_running_stats=True)
        >>> bn(agrad.ones(3, 4, 2)).shape
        agrad.Size([3, 4, 2])
    """

    def _check_input_dim(self, input: Tensor) -> None:
        _check_dims(input, (2, 3))


class BatchNorm2d(_BatchNorm):
    """Batch norm over ``(N, C, H, W)`` input (``torch.nn.BatchNorm2d``).

        >>> bn = agrad.nn.BatchNorm2d(2).eval()
        >>> bn(agrad.ones(1, 2, 3, 3)).shape
        agrad.Size([1, 2, 3, 3])
    """

    def _check_input_dim(self, input: Tensor) -> None:
        _check_dims(input, (4,))


class BatchNorm3d(_BatchNorm):
    """Batch norm over ``(N, C, D, H, W)`` input (``torch.nn.BatchNorm3d``).

        >>> agrad.nn.BatchNorm3d(2, track_running_stats=False)
        BatchNorm3d(2, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=False)
    """

    def _check_input_dim(self, input: Tensor) -> None:
        _check_dims(input, (5,))
