"""Adagrad: steps scaled by the accumulated squared gradients (mirrors ``torch.optim.adagrad``)."""

from __future__ import annotations

from typing import Any

from agrad._tensor import Tensor
from agrad.optim._arrayops import addcdiv_, addcmul_, update_grad
from agrad.optim._elementwise import Elementwise, Scratch, full_like, next_step, run
from agrad.optim.optimizer import ParamsT, _check_fused, _check_lr, _scalar, _scalar_state

__all__ = ["Adagrad"]


def _adagrad_kernel(xp: Any, p: Any, g: Any, state_sum: Any, t1: Any, t2: Any, *, clr: float, weight_decay: float,
                    eps: float, maximize: bool) -> None:
    """PyTorch's ``_single_tensor_adagrad`` (dense) for one parameter, ``clr`` the
    step's decayed learning rate."""
    grad = update_grad(xp, p, g, weight_decay, maximize, t1)
    addcmul_(xp, state_sum, grad, grad, 1, t2)
    std = xp.sqrt(state_sum, out=t2)
    std += eps
    addcdiv_(xp, p, grad, std, -clr, t1)


class Adagrad(Elementwise):
    """Adagrad (PyTorch's ``torch.optim.Adagrad``).

    Per parameter, with ``g`` the gradient (negated when ``maximize``, plus
    ``weight_decay * p``): ``sum += g * g`` and ``p -= clr * g / (sqrt(sum) +
    eps)`` with ``clr = lr / (1 + (t - 1) * lr_decay)`` at step ``t``.  State
    (made for every parameter at construction, as PyTorch does): ``step`` and
    ``sum``, which starts at ``initial_accumulator_value``.

        >>> w = agrad.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = agrad.optim.Adagrad([w], lr=0.5)
        >>> (w * w).sum().backward_sync()
        >>> opt.step()
        >>> w
        tensor([ 0.5000, -1.5000], requires_grad=True)
    """

    def __init__(self, params: ParamsT, lr: float | Tensor = 1e-2, lr_decay: float = 0, weight_decay: float = 0,
                 initial_accumulator_value: float = 0, eps: float = 1e-10, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False, fused: bool | None = None) -> None:
        _check_lr(lr)
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        defaults = {"lr": lr, "lr_decay": lr_decay, "eps": eps, "weight_decay": weight_decay,
                    "initial_accumulator_value": initial_accumulator_value, "foreach": foreach,
                    "maximize": maximize, "differentiable": differentiable, "fused": fused}
        super().__init__(params, defaults)
        _check_fused(fused, foreach, differentiable)
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, self.state[p], group)

    def _init_state(self, p: Tensor, state: dict[str, Any], group: dict[str, Any]) -> None:
        state["step"] = _scalar_state()
        state["sum"] = full_like(p, self.defaults["initial_accumulator_value"])

    def _update(self, p: Tensor, grad: Any, group: dict[str, Any], scratch: Scratch) -> None:
        state = self._state(p, group)
        step = next_step(state)
        lr = _scalar(group["lr"])
        run(_adagrad_kernel, [p._data, grad, state["sum"]._data], 2, scratch,
            clr=lr / (1 + (step - 1) * group["lr_decay"]), weight_decay=group["weight_decay"], eps=group["eps"],
            maximize=group["maximize"])
