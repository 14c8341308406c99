"""PyTorch's in-place tensor ops that optimizer updates are written in, on arrays.

The updates in ``agrad.optim`` follow PyTorch's single-tensor implementations
(``_single_tensor_adam`` ...) operation for operation, so that float64
trajectories agree to rounding.  These helpers are those operations, each
written to round as ATen's CPU kernel does (up to its fused multiply-adds):
``a.add_(b, alpha=s)`` is ``a + (s * b)``, ``a.addcmul_(t1, t2, value=s)`` is
``a + (s * t1) * t2``, ``a.addcdiv_(t1, t2, value=s)`` is ``a + (s * t1) / t2``,
and ``lerp_`` switches formula at weight 0.5.  A multiplication by a value
of 1 is skipped, which changes nothing.

Each takes the array module ``xp`` first and a scratch array ``tmp`` of the
same shape where it needs one; ``tmp`` may be the first multiplicand when
that is itself scratch, never the second.  Python-float scalars keep a
float32 computation in float32 (numpy's and CuPy's weak scalars).
"""

from __future__ import annotations

from typing import Any

__all__ = ["update_grad", "adam_moments", "add_", "addcmul_", "addcdiv_", "lerp_"]


def update_grad(xp: Any, param: Any, grad: Any, weight_decay: float, maximize: bool, out: Any) -> Any:
    """The gradient an update uses: PyTorch's ``grad = -grad if maximize else grad``
    then, when ``weight_decay != 0``, ``grad = grad.add(param, alpha=weight_decay)``.

    Returns ``grad`` itself (never to be written) when neither applies, else
    ``out`` holding the result (``-g + wd*p`` is computed as ``wd*p - g``: the
    same rounding).
    """
    if weight_decay == 0:
        return xp.negative(grad, out=out) if maximize else grad
    xp.multiply(param, weight_decay, out=out)
    if maximize:
        return xp.subtract(out, grad, out=out)
    return xp.add(out, grad, out=out)


def adam_moments(xp: Any, p: Any, g: Any, exp_avg: Any, exp_avg_sq: Any, t1: Any, t2: Any, *, beta1: float,
                 beta2: float, lr: float, weight_decay: float, maximize: bool, decoupled_weight_decay: bool) -> Any:
    """The start Adam, NAdam and RAdam share (their single-tensor functions'): the gradient
    with L2 weight decay, or the parameter decayed (AdamW-style), then the two moments
    ``exp_avg.lerp_(grad, 1 - beta1)`` and ``exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2)``.
    Returns the gradient used (``g`` or ``t1``); ``t2`` is free again."""
    grad = update_grad(xp, p, g, 0 if decoupled_weight_decay else weight_decay, maximize, t1)
    if weight_decay != 0 and decoupled_weight_decay:
        p *= 1 - lr * weight_decay
    lerp_(xp, exp_avg, grad, 1 - beta1, t2)
    exp_avg_sq *= beta2
    addcmul_(xp, exp_avg_sq, grad, grad, 1 - beta2, t2)
    return grad


def add_(xp: Any, self: Any, other: Any, alpha: float, tmp: Any) -> None:
    """``self.add_(other, alpha=alpha)``: ``self += alpha * other``."""
    if alpha == 1:
        self += other
        return
    xp.multiply(other, alpha, out=tmp)
    self += tmp


def addcmul_(xp: Any, self: Any, t1: Any, t2: Any, value: float, tmp: Any) -> None:
    """``self.addcmul_(t1, t2, value=value)``: ``self += (value * t1) * t2``."""
    if value == 1:
        xp.multiply(t1, t2, out=tmp)
    else:
        xp.multiply(t1, value, out=tmp)
        tmp *= t2
    self += tmp


def addcdiv_(xp: Any, self: Any, t1: Any, t2: Any, value: float, tmp: Any) -> None:
    """``self.addcdiv_(t1, t2, value=value)``: ``self += (value * t1) / t2``."""
    if value == 1:
        xp.divide(t1, t2, out=tmp)
    else:
        xp.multiply(t1, value, out=tmp)
        tmp /= t2
    self += tmp


def lerp_(xp: Any, self: Any, end: Any, weight: float, tmp: Any) -> None:
    """``self.lerp_(end, weight)``: ATen's two formulas, ``self + w * (end - self)``
    for ``|w| < 0.5`` and ``end - (end - self) * (1 - w)`` otherwise."""
    xp.subtract(end, self, out=tmp)
    if abs(weight) < 0.5:
        tmp *= weight
        self += tmp
    else:
        tmp *= 1 - weight
        xp.subtract(end, tmp, out=self)
