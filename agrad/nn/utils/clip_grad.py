"""Gradient clipping (mirrors ``torch.nn.utils.clip_grad``).

``clip_grad_norm_`` is :func:`get_total_norm` of the gradients followed by
:func:`clip_grads_with_norm_` with that norm; ``clip_grad_value_`` clamps
each gradient element.  All of them change ``.grad`` in place, record no
graph, and skip parameters whose ``.grad`` is None.

    >>> w = agrad.nn.Parameter(agrad.zeros(2))
    >>> w.grad = agrad.tensor([3.0, 4.0])
    >>> agrad.nn.utils.clip_grad_norm_([w], max_norm=1.0)
    tensor(5.)
    >>> w.grad
    tensor([0.6000, 0.8000])

``foreach`` is accepted for PyTorch's signature: agrad has one implementation
(a norm per gradient, then the norm of those norms), used either way.
"""

from __future__ import annotations

import types
import warnings
from collections.abc import Iterable

from agrad._creation import tensor
from agrad._grad_mode import no_grad
from agrad._ops._shape import stack
from agrad._tensor import Tensor
from agrad.linalg import vector_norm

__all__ = ["clip_grad_norm", "clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm"]

_TensorOrTensors = Tensor | Iterable[Tensor]


def _as_list(tensors: _TensorOrTensors) -> list[Tensor]:
    return [tensors] if isinstance(tensors, Tensor) else list(tensors)


def _grads(parameters: Iterable[Tensor]) -> list[Tensor]:
    return [p.grad for p in parameters if p.grad is not None]


def get_total_norm(tensors: _TensorOrTensors, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach: bool | None = None) -> Tensor:
    """The ``norm_type``-norm of ``tensors`` taken together, as if concatenated into one
    vector (``inf`` for the largest absolute value); ``tensor(0.)`` for no tensors.

    Raises ``RuntimeError`` if ``error_if_nonfinite`` and the norm is nan or infinite.

        >>> agrad.nn.utils.get_total_norm([agrad.tensor([3.0]), agrad.tensor([4.0])])
        tensor(5.)
    """
    tensors = _as_list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return tensor(0.0)
    with no_grad():
        first_device = tensors[0].device
        norms = [vector_norm(t, norm_type).to(first_device) for t in tensors]
        total_norm = vector_norm(stack(norms), norm_type)
    if error_if_nonfinite and bool(total_norm.isnan() | total_norm.isinf()):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, so it cannot be "
            "clipped. To disable this error and scale the gradients by the non-finite norm anyway, set "
            "`error_if_nonfinite=False`")
    return total_norm


def clip_grads_with_norm_(parameters: _TensorOrTensors, max_norm: float, total_norm: Tensor,
                          foreach: bool | None = None) -> None:
    """Scale the parameters' gradients in place by ``min(max_norm / (total_norm + 1e-6), 1)``:
    :func:`clip_grad_norm_` with a norm computed beforehand."""
    grads = _grads(_as_list(parameters))
    if not grads:
        return
    with no_grad():
        clip_coef = (float(max_norm) / (total_norm + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(clip_coef.to(g.device))


def clip_grad_norm_(parameters: _TensorOrTensors, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """Scale the gradients of ``parameters`` in place so that their total ``norm_type``-norm
    (as one vector) is at most ``max_norm``; returns the norm before clipping.

    Args:
        parameters: a tensor or an iterable of tensors whose ``.grad`` is clipped.
        max_norm: the largest norm allowed.
        norm_type: the p of the p-norm; ``float('inf')`` for the largest absolute value.
        error_if_nonfinite: raise ``RuntimeError`` if the total norm is nan or infinite
            (otherwise the gradients are scaled by it anyway).
        foreach: accepted for PyTorch's signature; agrad has one implementation.
    """
    if isinstance(parameters, Tensor):
        params = [parameters]
    else:
        is_generator = isinstance(parameters, types.GeneratorType)
        params = list(parameters)
        if is_generator and not params:
            warnings.warn("`parameters` is an empty generator, no gradient clipping will occur.", stacklevel=2)
    total_norm = get_total_norm(_grads(params), norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(params, max_norm, total_norm, foreach)
    return total_norm


def clip_grad_norm(parameters: _TensorOrTensors, max_norm: float, norm_type: float = 2.0,
                   error_if_nonfinite: bool = False, foreach: bool | None = None) -> Tensor:
    """Deprecated alias of :func:`clip_grad_norm_` (as in PyTorch): warns ``FutureWarning``."""
    warnings.warn("`agrad.nn.utils.clip_grad_norm` is now deprecated in favor of `agrad.nn.utils.clip_grad_norm_`.",
                  FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters: _TensorOrTensors, clip_value: float, foreach: bool | None = None) -> None:
    """Clamp every gradient element of ``parameters`` in place to ``[-clip_value, clip_value]``.

        >>> w = agrad.nn.Parameter(agrad.zeros(3))
        >>> w.grad = agrad.tensor([-2.0, 0.5, 3.0])
        >>> agrad.nn.utils.clip_grad_value_(w, 1.0)
        >>> w.grad
        tensor([-1.0000,  0.5000,  1.0000])
    """
    clip_value = float(clip_value)
    with no_grad():
        for g in _grads(_as_list(parameters)):
            g.clamp_(min=-clip_value, max=clip_value)
