"""NAdam: Adam with Nesterov momentum (mirrors ``torch.optim.nadam``)."""

from __future__ import annotations

from typing import Any

from agrad._tensor import Tensor
from agrad.optim._arrayops import adam_moments, addcdiv_
from agrad.optim._elementwise import Elementwise, Scratch, next_step, run, zeros_like
from agrad.optim.optimizer import ParamsT, _check_betas, _scalar, _scalar_state

__all__ = ["NAdam"]


def _nadam_kernel(xp: Any, p: Any, g: Any, exp_avg: Any, exp_avg_sq: Any, t1: Any, t2: Any, *, beta1: float,
                  beta2: float, lr: float, weight_decay: float, eps: float, maximize: bool,
                  decoupled_weight_decay: bool, bias_correction2: float, grad_value: float,
                  exp_avg_value: float) -> None:
    """PyTorch's ``_single_tensor_nadam`` for one parameter; ``grad_value`` and
    ``exp_avg_value`` are the step's coefficients of the two ``addcdiv_`` calls."""
    grad = adam_moments(xp, p, g, exp_avg, exp_avg_sq, t1, t2, beta1=beta1, beta2=beta2, lr=lr,
                        weight_decay=weight_decay, maximize=maximize, decoupled_weight_decay=decoupled_weight_decay)
    denom = xp.sqrt(xp.divide(exp_avg_sq, bias_correction2, out=t2), out=t2)
    denom += eps
    addcdiv_(xp, p, grad, denom, grad_value, t1)  # grad's last use: t1 may hold it
    addcdiv_(xp, p, exp_avg, denom, exp_avg_value, t1)


class NAdam(Elementwise):
    """NAdam (PyTorch's ``torch.optim.NAdam``): Adam's moments with a momentum schedule
    ``mu_t = beta1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))`` and a Nesterov
    look-ahead in the update.  ``decoupled_weight_decay`` gives NAdamW.  State:
    ``step``, ``mu_product`` (the product of the ``mu_t``, a float32 0-d tensor, as
    PyTorch keeps it), ``exp_avg`` and ``exp_avg_sq``.

        >>> w = agrad.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = agrad.optim.NAdam([w], lr=0.1)
        >>> (w * w).sum().backward_sync()
        >>> opt.step()
        >>> sorted(opt.state[w])
        ['exp_avg', 'exp_avg_sq', 'mu_product', 'step']
    """

    def __init__(self, params: ParamsT, lr: float | Tensor = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False) -> None:
        _check_betas(lr, betas, eps, weight_decay)
        if not 0.0 <= momentum_decay:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay,
                    "momentum_decay": momentum_decay, "decoupled_weight_decay": decoupled_weight_decay,
                    "maximize": maximize, "foreach": foreach, "capturable": capturable,
                    "differentiable": differentiable}
        super().__init__(params, defaults)

    def _init_state(self, p: Tensor, state: dict[str, Any], group: dict[str, Any]) -> None:
        state["step"] = _scalar_state()
        state["mu_product"] = _scalar_state(1.0)
        state["exp_avg"] = zeros_like(p)
        state["exp_avg_sq"] = zeros_like(p)

    def _update(self, p: Tensor, grad: Any, group: dict[str, Any], scratch: Scratch) -> None:
        state = self._state(p, group)
        step = next_step(state)
        beta1, beta2 = group["betas"]
        lr, decay = _scalar(group["lr"]), group["momentum_decay"]
        mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * decay)))
        mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * decay)))
        mu_product = state["mu_product"]
        product_array = mu_product._data
        product_array *= mu  # in place, in the state's dtype (float32 unless loaded), as PyTorch's tensor
        mu_product._bump_version()
        product = float(product_array)
        run(_nadam_kernel, [p._data, grad, state["exp_avg"]._data, state["exp_avg_sq"]._data], 2, scratch,
            beta1=beta1, beta2=beta2, lr=lr, weight_decay=group["weight_decay"], eps=group["eps"],
            maximize=group["maximize"], decoupled_weight_decay=group["decoupled_weight_decay"],
            bias_correction2=1 - beta2**step, grad_value=-lr * (1.0 - mu) / (1.0 - product),
            exp_avg_value=(-lr * mu_next) / (1.0 - product * mu_next))
