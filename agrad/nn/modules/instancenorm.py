"""Instance normalisation layers (mirrors ``torch.nn.modules.instancenorm``): InstanceNorm1d/2d/3d.

Each channel of each sample is normalised over its spatial dimensions.
Unlike batch norm, the defaults are ``affine=False`` and
``track_running_stats=False``; with tracking, the running statistics move
towards the batch's average of the per-instance statistics, and evaluation
normalises by them.  An input without the batch dimension is one sample.

    >>> m = agrad.nn.InstanceNorm1d(3)
    >>> m
    InstanceNorm1d(3, eps=1e-05, momentum=0.1, affine=False, bias=False, track_running_stats=False)
    >>> list(m.state_dict())
    []
    >>> m(agrad.arange(6.0).reshape(3, 2))
    tensor([[-1.0000,  1.0000],
            [-1.0000,  1.0000],
            [-1.0000,  1.0000]])
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from agrad._tensor import Tensor
from agrad.nn import functional as F
from agrad.nn.modules.batchnorm import _check_dims, _NormBase

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]


class _InstanceNorm(_NormBase):
    """Instance norm's forward (PyTorch's ``_InstanceNorm``) for inputs of
    ``_no_batch_dim`` dimensions without a batch or one more with it."""

    _no_batch_dim: int  # the number of dimensions of one sample: channels and the spatial ones

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = False,
                 track_running_stats: bool = False, device: Any = None, dtype: Any = None, *,
                 bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def _get_no_batch_dim(self) -> int:
        return self._no_batch_dim

    def _check_input_dim(self, input: Tensor) -> None:
        _check_dims(input, (self._no_batch_dim, self._no_batch_dim + 1))

    def _handle_no_batch_input(self, input: Tensor) -> Tensor:
        return self._apply_instance_norm(input.unsqueeze(0)).squeeze(0)

    def _apply_instance_norm(self, input: Tensor) -> Tensor:
        return F.instance_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                               self.training or not self.track_running_stats,
                               self.momentum if self.momentum is not None else 0.0, self.eps)

    def _load_from_state_dict(self, state_dict: Mapping[str, Any], prefix: str, local_metadata: dict[str, Any],
                              strict: bool, missing_keys: list[str], unexpected_keys: list[str],
                              error_msgs: list[str]) -> None:
        """Running statistics in a checkpoint without a version, loaded into a layer that does
        not track them, are PyTorch's error (old checkpoints had them by default); they are dropped."""
        version = local_metadata.get("version", None)
        if version is None and not self.track_running_stats:
            running_stats_keys = [prefix + name for name in ("running_mean", "running_var")
                                  if prefix + name in state_dict]
            if running_stats_keys:
                klass = type(self).__name__
                names = " and ".join(f'"{k}"' for k in running_stats_keys)
                error_msgs.append(
                    f"Unexpected running stats buffer(s) {names} for {klass} with track_running_stats=False. If "
                    "state_dict is a checkpoint saved before 0.4.0, this may be expected because "
                    f"{klass} does not track running stats by default since 0.4.0. Please remove these keys from "
                    "state_dict. If the running stats are actually needed, instead set track_running_stats=True "
                    f"in {klass} to enable them. See the documentation of {klass} for details.")
                assert isinstance(state_dict, dict)  # load_state_dict hands each module a fresh dict
                for key in running_stats_keys:
                    state_dict.pop(key)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        feature_dim = input.dim() - self._get_no_batch_dim()
        if input.size(feature_dim) != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={feature_dim} to match num_features "
                                 f"({self.num_features}), but got: {input.size(feature_dim)}.")
            warnings.warn(f"input's size at dim={feature_dim} does not match num_features. You can silence this "
                          "warning by not passing in num_features, which is not used because affine=False",
                          stacklevel=2)
        if input.dim() == self._get_no_batch_dim():
            return self._handle_no_batch_input(input)
        return self._apply_instance_norm(input)


class InstanceNorm1d(_InstanceNorm):
    """Instance norm over ``(N, C, L)`` or ``(C, L)`` input (``torch.nn.InstanceNorm1d``).

        >>> m = agrad.nn.InstanceNorm1d(4, affine=True, track_running_stats=True)
        >>> list(m.state_dict())
        ['weight', 'bias', 'running_mean', 'running_var', 'num_batches_tracked']
    """

    _no_batch_dim = 2


class InstanceNorm2d(_InstanceNorm):
    """Instance norm over ``(N, C, H, W)`` or ``(C, H, W)`` input (``torch.nn.InstanceNorm2d``).

        >>> agrad.nn.InstanceNorm2d(2)(agrad.ones(2, 3, 3)).shape
        agrad.Size([2, 3, 3])
    """

    _no_batch_dim = 3


class InstanceNorm3d(_InstanceNorm):
    """Instance norm over ``(N, C, D, H, W)`` or ``(C, D, H, W)`` input (``torch.nn.InstanceNorm3d``).

        >>> agrad.nn.InstanceNorm3d(2)(agrad.ones(1, 2, 2, 2, 2)).shape
        agrad.Size([1, 2, 2, 2, 2])
    """

    _no_batch_dim = 4
