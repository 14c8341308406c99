"""Utilities for training modules (mirrors ``torch.nn.utils``): gradient clipping,
parameters as one vector, and (in :mod:`agrad.nn.utils.rnn`) padded and packed
batches of variable-length sequences.

    >>> p = agrad.nn.Parameter(agrad.ones(4))
    >>> p.grad = agrad.full((4,), 2.0)
    >>> agrad.nn.utils.clip_grad_norm_(p, max_norm=2.0, norm_type=float("inf"))
    tensor(2.)
"""

from __future__ import annotations

from agrad.nn.utils import rnn
from agrad.nn.utils.clip_grad import (
    clip_grad_norm,
    clip_grad_norm_,
    clip_grad_value_,
    clip_grads_with_norm_,
    get_total_norm,
)
from agrad.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters

__all__ = [
    "clip_grad_norm", "clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm",
    "parameters_to_vector", "vector_to_parameters", "rnn",
]
