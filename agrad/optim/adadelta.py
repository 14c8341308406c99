"""Adadelta: steps scaled by running averages of squared gradients and updates (mirrors ``torch.optim.adadelta``)."""

from __future__ import annotations

from typing import Any

from agrad._tensor import Tensor
from agrad.optim._arrayops import add_, addcmul_, update_grad
from agrad.optim._elementwise import Elementwise, Scratch, next_step, run, zeros_like
from agrad.optim.optimizer import ParamsT, _check_lr, _scalar, _scalar_state

__all__ = ["Adadelta"]


def _adadelta_kernel(xp: Any, p: Any, g: Any, square_avg: Any, acc_delta: Any, t1: Any, t2: Any, t3: Any, *,
                     lr: float, rho: float, eps: float, weight_decay: float, maximize: bool) -> None:
    """PyTorch's ``_single_tensor_adadelta`` for one parameter."""
    grad = update_grad(xp, p, g, weight_decay, maximize, t1)
    square_avg *= rho
    addcmul_(xp, square_avg, grad, grad, 1 - rho, t2)
    std = xp.sqrt(xp.add(square_avg, eps, out=t2), out=t2)
    delta = xp.sqrt(xp.add(acc_delta, eps, out=t3), out=t3)
    delta /= std
    delta *= grad
    acc_delta *= rho
    addcmul_(xp, acc_delta, delta, delta, 1 - rho, t2)
    add_(xp, p, delta, -lr, t2)


class Adadelta(Elementwise):
    """Adadelta (PyTorch's ``torch.optim.Adadelta``).

    Per parameter, with ``g`` the gradient (negated when ``maximize``, plus
    ``weight_decay * p``): ``v = rho * v + (1 - rho) * g * g``, ``delta =
    sqrt(u + eps) / sqrt(v + eps) * g``, ``u = rho * u + (1 - rho) * delta *
    delta`` and ``p -= lr * delta``.  State: ``step``, ``square_avg`` (``v``)
    and ``acc_delta`` (``u``).

        >>> w = agrad.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = agrad.optim.Adadelta([w])
        >>> (w * w).sum().backward_sync()
        >>> opt.step()
        >>> w.shape, sorted(opt.state[w])
        (agrad.Size([2]), ['acc_delta', 'square_avg', 'step'])
    """

    def __init__(self, params: ParamsT, lr: float | Tensor = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0, foreach: bool | None = None, *, capturable: bool = False,
                 maximize: bool = False, differentiable: bool = False) -> None:
        _check_lr(lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = {"lr": lr, "rho": rho, "eps": eps, "weight_decay": weight_decay, "maximize": maximize,
                    "capturable": capturable, "foreach": foreach, "differentiable": differentiable}
        super().__init__(params, defaults)

    def _init_state(self, p: Tensor, state: dict[str, Any], group: dict[str, Any]) -> None:
        state["step"] = _scalar_state()
        state["square_avg"] = zeros_like(p)
        state["acc_delta"] = zeros_like(p)

    def _update(self, p: Tensor, grad: Any, group: dict[str, Any], scratch: Scratch) -> None:
        state = self._state(p, group)
        next_step(state)
        run(_adadelta_kernel, [p._data, grad, state["square_avg"]._data, state["acc_delta"]._data], 3, scratch,
            lr=_scalar(group["lr"]), rho=group["rho"], eps=group["eps"], weight_decay=group["weight_decay"],
            maximize=group["maximize"])
