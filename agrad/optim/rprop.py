"""Rprop: resilient backpropagation, per-element step sizes driven by gradient signs (mirrors ``torch.optim.rprop``)."""

from __future__ import annotations

from typing import Any

from agrad._tensor import Tensor
from agrad.optim._arrayops import addcmul_, update_grad
from agrad.optim._elementwise import Elementwise, Scratch, full_like, next_step, run, zeros_like
from agrad.optim.optimizer import ParamsT, _check_lr, _scalar, _scalar_state

__all__ = ["Rprop"]


def _rprop_kernel(xp: Any, p: Any, g: Any, prev: Any, step_size: Any, t1: Any, t2: Any, *, etaminus: float,
                  etaplus: float, step_size_min: float, step_size_max: float, maximize: bool) -> None:
    """PyTorch's ``_single_tensor_rprop`` for one parameter."""
    grad = update_grad(xp, p, g, 0, maximize, t1)
    sign = xp.sign(xp.multiply(grad, prev, out=t2), out=t2)
    sign[sign > 0] = etaplus  # masked writes, in PyTorch's order: a NaN sign stays NaN
    sign[sign < 0] = etaminus
    sign[sign == 0] = 1
    step_size *= sign
    xp.clip(step_size, step_size_min, step_size_max, out=step_size)
    flipped = sign == etaminus
    kept = t2  # the sign is no longer needed once ``flipped`` holds where it flipped
    xp.copyto(kept, grad)
    kept[flipped] = 0
    xp.copyto(prev, kept)
    addcmul_(xp, p, xp.sign(kept, out=t1), step_size, -1, t1)


class Rprop(Elementwise):
    """Rprop (PyTorch's ``torch.optim.Rprop``): each element has its own step size,
    multiplied by ``etaplus`` while its gradient keeps its sign and by ``etaminus``
    when it flips (then that element does not move, and its gradient is forgotten),
    within ``step_sizes``; the parameter moves by the step size against the
    gradient's sign.  State: ``step``, ``prev`` and ``step_size`` (starting at ``lr``).

        >>> w = agrad.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = agrad.optim.Rprop([w], lr=0.1)
        >>> (w * w).sum().backward_sync()
        >>> opt.step()
        >>> w
        tensor([ 0.9000, -1.9000], requires_grad=True)
    """

    def __init__(self, params: ParamsT, lr: float | Tensor = 1e-2, etas: tuple[float, float] = (0.5, 1.2),
                 step_sizes: tuple[float, float] = (1e-6, 50), *, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False, differentiable: bool = False) -> None:
        _check_lr(lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = {"lr": lr, "etas": etas, "step_sizes": step_sizes, "foreach": foreach, "maximize": maximize,
                    "differentiable": differentiable, "capturable": capturable}
        super().__init__(params, defaults)

    def _init_state(self, p: Tensor, state: dict[str, Any], group: dict[str, Any]) -> None:
        state["step"] = _scalar_state()
        state["prev"] = zeros_like(p)
        state["step_size"] = full_like(p, _scalar(group["lr"]))

    def _update(self, p: Tensor, grad: Any, group: dict[str, Any], scratch: Scratch) -> None:
        state = self._state(p, group)
        next_step(state)
        etaminus, etaplus = group["etas"]
        step_size_min, step_size_max = group["step_sizes"]
        run(_rprop_kernel, [p._data, grad, state["prev"]._data, state["step_size"]._data], 2, scratch,
            etaminus=etaminus, etaplus=etaplus, step_size_min=step_size_min, step_size_max=step_size_max,
            maximize=group["maximize"])
