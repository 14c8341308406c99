"""Adam: adaptive moment estimation (mirrors ``torch.optim.adam``)."""

from __future__ import annotations

from typing import Any

from agrad._tensor import Tensor
from agrad.optim._arrayops import adam_moments, addcdiv_
from agrad.optim._elementwise import Elementwise, Scratch, next_step, run, zeros_like
from agrad.optim.optimizer import ParamsT, _check_betas, _check_fused, _scalar, _scalar_state

__all__ = ["Adam"]


def _adam_kernel(xp: Any, p: Any, g: Any, exp_avg: Any, exp_avg_sq: Any, max_exp_avg_sq: Any, t1: Any, t2: Any, *,
                 beta1: float, beta2: float, lr: float, weight_decay: float, eps: float, maximize: bool,
                 decoupled_weight_decay: bool, step_size: float, bias_correction2_sqrt: float) -> None:
    """PyTorch's ``_single_tensor_adam`` for one parameter (``max_exp_avg_sq`` is None
    without amsgrad); the step's bias corrections come computed."""
    adam_moments(xp, p, g, exp_avg, exp_avg_sq, t1, t2, beta1=beta1, beta2=beta2, lr=lr,
                 weight_decay=weight_decay, maximize=maximize, decoupled_weight_decay=decoupled_weight_decay)
    if max_exp_avg_sq is not None:
        xp.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
    denom = xp.sqrt(exp_avg_sq if max_exp_avg_sq is None else max_exp_avg_sq, out=t2)
    denom /= bias_correction2_sqrt
    denom += eps
    addcdiv_(xp, p, exp_avg, denom, -step_size, t1)


class Adam(Elementwise):
    """Adam (PyTorch's ``torch.optim.Adam``): steps scaled by running estimates of the
    gradient's first and second moments.

    Per parameter, with ``g`` the gradient (negated when ``maximize``, plus
    ``weight_decay * p`` unless ``decoupled_weight_decay``, which instead
    shrinks ``p`` by ``1 - lr * weight_decay``, as AdamW): ``m = lerp(m, g,
    1 - beta1)``, ``v = beta2 * v + (1 - beta2) * g * g`` (``amsgrad`` keeps the
    running maximum of ``v``), ``p -= lr / (1 - beta1**t) * m / (sqrt(v) /
    sqrt(1 - beta2**t) + eps)``.  State: ``step`` (a float32 0-d tensor),
    ``exp_avg``, ``exp_avg_sq`` and, with ``amsgrad``, ``max_exp_avg_sq``.

    ``foreach``, ``capturable`` and ``fused`` select PyTorch's implementations
    and are kept in the groups for its state dicts; agrad has one.

        >>> w = agrad.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = agrad.optim.Adam([w], lr=0.1)
        >>> (w * w).sum().backward_sync()
        >>> opt.step()
        >>> w
        tensor([ 0.9000, -1.9000], requires_grad=True)
        >>> sorted(opt.state[w])
        ['exp_avg', 'exp_avg_sq', 'step']
    """

    def __init__(self, params: ParamsT, lr: float | Tensor = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, amsgrad: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None, decoupled_weight_decay: bool = False) -> None:
        _check_betas(lr, betas, eps, weight_decay)
        if not ((isinstance(betas[0], float) and isinstance(betas[1], float))
                or (isinstance(betas[0], Tensor) and isinstance(betas[1], Tensor))):
            raise ValueError("betas must be either both floats or both Tensors")
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay, "amsgrad": amsgrad,
                    "maximize": maximize, "foreach": foreach, "capturable": capturable,
                    "differentiable": differentiable, "fused": fused,
                    "decoupled_weight_decay": decoupled_weight_decay}
        super().__init__(params, defaults)
        _check_fused(fused, foreach, differentiable)

    def _init_state(self, p: Tensor, state: dict[str, Any], group: dict[str, Any]) -> None:
        state["step"] = _scalar_state()
        state["exp_avg"] = zeros_like(p)
        state["exp_avg_sq"] = zeros_like(p)
        if group["amsgrad"]:
            state["max_exp_avg_sq"] = zeros_like(p)

    def _update(self, p: Tensor, grad: Any, group: dict[str, Any], scratch: Scratch) -> None:
        state = self._state(p, group)
        step = next_step(state)
        beta1, beta2 = (_scalar(b) for b in group["betas"])
        lr = _scalar(group["lr"])
        max_exp_avg_sq = state["max_exp_avg_sq"]._data if group["amsgrad"] else None
        run(_adam_kernel, [p._data, grad, state["exp_avg"]._data, state["exp_avg_sq"]._data, max_exp_avg_sq], 2,
            scratch, beta1=beta1, beta2=beta2, lr=lr, weight_decay=group["weight_decay"], eps=group["eps"],
            maximize=group["maximize"], decoupled_weight_decay=group["decoupled_weight_decay"],
            step_size=lr / (1 - beta1**step), bias_correction2_sqrt=(1 - beta2**step) ** 0.5)
