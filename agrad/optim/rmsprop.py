"""RMSprop: steps scaled by a running root mean square of the gradient (mirrors ``torch.optim.rmsprop``)."""

from __future__ import annotations

from typing import Any

from agrad._tensor import Tensor
from agrad.optim._arrayops import add_, addcdiv_, addcmul_, lerp_, update_grad
from agrad.optim._elementwise import Elementwise, Scratch, next_step, run, zeros_like
from agrad.optim.optimizer import ParamsT, _check_lr, _scalar, _scalar_state

__all__ = ["RMSprop"]


def _rmsprop_kernel(xp: Any, p: Any, g: Any, square_avg: Any, grad_avg: Any, momentum_buffer: Any, t1: Any,
                    t2: Any, *, lr: float, alpha: float, eps: float, weight_decay: float, momentum: float,
                    maximize: bool) -> None:
    """PyTorch's ``_single_tensor_rmsprop`` for one parameter (``grad_avg`` is None unless
    centered, ``momentum_buffer`` None without momentum)."""
    grad = update_grad(xp, p, g, weight_decay, maximize, t1)
    square_avg *= alpha
    addcmul_(xp, square_avg, grad, grad, 1 - alpha, t2)
    if grad_avg is not None:
        lerp_(xp, grad_avg, grad, 1 - alpha, t2)
        xp.multiply(grad_avg, grad_avg, out=t2)  # square_avg.addcmul(grad_avg, grad_avg, value=-1): exact
        avg = xp.sqrt(xp.subtract(square_avg, t2, out=t2), out=t2)
    else:
        avg = xp.sqrt(square_avg, out=t2)
    avg += eps
    if momentum > 0:
        momentum_buffer *= momentum
        addcdiv_(xp, momentum_buffer, grad, avg, 1, t1)
        add_(xp, p, momentum_buffer, -lr, t1)
    else:
        addcdiv_(xp, p, grad, avg, -lr, t1)


class RMSprop(Elementwise):
    """RMSprop (PyTorch's ``torch.optim.RMSprop``).

    Per parameter, with ``g`` the gradient (negated when ``maximize``, plus
    ``weight_decay * p``): ``v = alpha * v + (1 - alpha) * g * g``; with
    ``centered``, the running mean ``ga = lerp(ga, g, 1 - alpha)`` is taken out
    of ``v``; ``avg = sqrt(v) + eps``; then ``p -= lr * g / avg``, or with
    ``momentum``, ``buf = momentum * buf + g / avg`` and ``p -= lr * buf``.
    State: ``step``, ``square_avg``, ``momentum_buffer`` (when ``momentum > 0``)
    and ``grad_avg`` (when ``centered``).

        >>> w = agrad.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = agrad.optim.RMSprop([w], lr=0.01)
        >>> (w * w).sum().backward_sync()
        >>> opt.step()
        >>> w
        tensor([ 0.9000, -1.9000], requires_grad=True)
    """

    def __init__(self, params: ParamsT, lr: float | Tensor = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False, differentiable: bool = False) -> None:
        _check_lr(lr)
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        defaults = {"lr": lr, "momentum": momentum, "alpha": alpha, "eps": eps, "centered": centered,
                    "weight_decay": weight_decay, "capturable": capturable, "foreach": foreach,
                    "maximize": maximize, "differentiable": differentiable}
        super().__init__(params, defaults)

    def _init_state(self, p: Tensor, state: dict[str, Any], group: dict[str, Any]) -> None:
        state["step"] = _scalar_state()
        state["square_avg"] = zeros_like(p)
        if group["momentum"] > 0:
            state["momentum_buffer"] = zeros_like(p)
        if group["centered"]:
            state["grad_avg"] = zeros_like(p)

    def _update(self, p: Tensor, grad: Any, group: dict[str, Any], scratch: Scratch) -> None:
        state = self._state(p, group)
        next_step(state)
        grad_avg = state["grad_avg"]._data if group["centered"] else None
        buf = state["momentum_buffer"]._data if group["momentum"] > 0 else None
        run(_rmsprop_kernel, [p._data, grad, state["square_avg"]._data, grad_avg, buf], 2, scratch,
            lr=_scalar(group["lr"]), alpha=group["alpha"], eps=group["eps"], weight_decay=group["weight_decay"],
            momentum=group["momentum"], maximize=group["maximize"])
