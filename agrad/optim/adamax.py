"""Adamax: Adam with the infinity norm in place of the second moment (mirrors ``torch.optim.adamax``)."""

from __future__ import annotations

from typing import Any

from agrad._tensor import Tensor
from agrad.optim._arrayops import addcdiv_, lerp_, update_grad
from agrad.optim._elementwise import Elementwise, Scratch, next_step, run, zeros_like
from agrad.optim.optimizer import ParamsT, _check_betas, _scalar, _scalar_state

__all__ = ["Adamax"]


def _adamax_kernel(xp: Any, p: Any, g: Any, exp_avg: Any, exp_inf: Any, t1: Any, t2: Any, *, beta1: float,
                   beta2: float, eps: float, weight_decay: float, maximize: bool, clr: float) -> None:
    """PyTorch's ``_single_tensor_adamax`` for one parameter; ``clr`` is ``lr / (1 - beta1**t)``."""
    grad = update_grad(xp, p, g, weight_decay, maximize, t1)
    lerp_(xp, exp_avg, grad, 1 - beta1, t2)
    exp_inf *= beta2
    norm = xp.abs(grad, out=t2)
    norm += eps
    xp.maximum(exp_inf, norm, out=exp_inf)
    addcdiv_(xp, p, exp_avg, exp_inf, -clr, t1)


class Adamax(Elementwise):
    """Adamax (PyTorch's ``torch.optim.Adamax``): ``m = lerp(m, g, 1 - beta1)``,
    ``u = max(beta2 * u, |g| + eps)``, ``p -= lr / (1 - beta1**t) * m / u``, with ``g``
    the gradient (negated when ``maximize``, plus ``weight_decay * p``).  State:
    ``step``, ``exp_avg`` and ``exp_inf``.

        >>> w = agrad.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = agrad.optim.Adamax([w], lr=0.1)
        >>> (w * w).sum().backward_sync()
        >>> opt.step()
        >>> w
        tensor([ 0.9000, -1.9000], requires_grad=True)
    """

    def __init__(self, params: ParamsT, lr: float | Tensor = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, foreach: bool | None = None, *, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False) -> None:
        _check_betas(lr, betas, eps, weight_decay)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay, "foreach": foreach,
                    "maximize": maximize, "differentiable": differentiable, "capturable": capturable}
        super().__init__(params, defaults)

    def _init_state(self, p: Tensor, state: dict[str, Any], group: dict[str, Any]) -> None:
        state["step"] = _scalar_state()
        state["exp_avg"] = zeros_like(p)
        state["exp_inf"] = zeros_like(p)

    def _update(self, p: Tensor, grad: Any, group: dict[str, Any], scratch: Scratch) -> None:
        state = self._state(p, group)
        step = next_step(state)
        beta1, beta2 = group["betas"]
        run(_adamax_kernel, [p._data, grad, state["exp_avg"]._data, state["exp_inf"]._data], 2, scratch,
            beta1=beta1, beta2=beta2, eps=group["eps"], weight_decay=group["weight_decay"],
            maximize=group["maximize"], clr=_scalar(group["lr"]) / (1 - beta1**step))
