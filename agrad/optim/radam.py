"""RAdam: Adam with a rectified adaptive learning rate (mirrors ``torch.optim.radam``)."""

from __future__ import annotations

from typing import Any

from agrad._tensor import Tensor
from agrad.optim._arrayops import adam_moments
from agrad.optim._elementwise import Elementwise, Scratch, next_step, run, zeros_like
from agrad.optim.optimizer import ParamsT, _check_betas, _scalar, _scalar_state

__all__ = ["RAdam"]


def _radam_kernel(xp: Any, p: Any, g: Any, exp_avg: Any, exp_avg_sq: Any, t1: Any, t2: Any, *, beta1: float,
                  beta2: float, lr: float, weight_decay: float, eps: float, maximize: bool,
                  decoupled_weight_decay: bool, bias_correction1: float, bias_correction2: float,
                  rect: float | None) -> None:
    """PyTorch's ``_single_tensor_radam`` for one parameter; ``rect`` is the variance
    rectification, None while the variance is intractable (``rho_t <= 5``)."""
    adam_moments(xp, p, g, exp_avg, exp_avg_sq, t1, t2, beta1=beta1, beta2=beta2, lr=lr,
                 weight_decay=weight_decay, maximize=maximize, decoupled_weight_decay=decoupled_weight_decay)
    update = xp.divide(exp_avg, bias_correction1, out=t1)  # grad is no longer needed
    update *= lr
    if rect is not None:
        adaptive = xp.sqrt(exp_avg_sq, out=t2)
        adaptive += eps
        xp.divide(bias_correction2**0.5, adaptive, out=adaptive)
        update *= adaptive
        update *= rect
    p -= update


class RAdam(Elementwise):
    """RAdam (PyTorch's ``torch.optim.RAdam``): Adam whose adaptive step is switched on,
    and scaled by a rectification term, only once the variance of the adaptive
    learning rate is tractable (``rho_t > 5``); before that, SGD with momentum.
    ``decoupled_weight_decay`` gives RAdamW.  State: ``step``, ``exp_avg`` and
    ``exp_avg_sq``.

        >>> w = agrad.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = agrad.optim.RAdam([w], lr=0.1)
        >>> (w * w).sum().backward_sync()
        >>> opt.step()
        >>> w
        tensor([ 0.8000, -1.6000], requires_grad=True)
    """

    def __init__(self, params: ParamsT, lr: float | Tensor = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, decoupled_weight_decay: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False) -> None:
        _check_betas(lr, betas, eps, weight_decay)
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay, "maximize": maximize,
                    "foreach": foreach, "capturable": capturable, "decoupled_weight_decay": decoupled_weight_decay,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    def _init_state(self, p: Tensor, state: dict[str, Any], group: dict[str, Any]) -> None:
        state["step"] = _scalar_state()
        state["exp_avg"] = zeros_like(p)
        state["exp_avg_sq"] = zeros_like(p)

    def _update(self, p: Tensor, grad: Any, group: dict[str, Any], scratch: Scratch) -> None:
        state = self._state(p, group)
        step = next_step(state)
        beta1, beta2 = group["betas"]
        bias_correction2 = 1 - beta2**step
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2**step) / bias_correction2
        rect = (((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
                if rho_t > 5.0 else None)
        run(_radam_kernel, [p._data, grad, state["exp_avg"]._data, state["exp_avg_sq"]._data], 2, scratch,
            beta1=beta1, beta2=beta2, lr=_scalar(group["lr"]), weight_decay=group["weight_decay"], eps=group["eps"],
            maximize=group["maximize"], decoupled_weight_decay=group["decoupled_weight_decay"],
            bias_correction1=1 - beta1**step, bias_correction2=bias_correction2, rect=rect)
