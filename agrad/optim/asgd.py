"""ASGD: averaged stochastic gradient descent (mirrors ``torch.optim.asgd``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from agrad._tensor import Tensor
from agrad.optim._arrayops import add_, update_grad
from agrad.optim._elementwise import Elementwise, Scratch, next_step, run, zeros_like
from agrad.optim.optimizer import ParamsT, _check_lr, _scalar, _scalar_state

__all__ = ["ASGD"]


def _asgd_kernel(xp: Any, p: Any, g: Any, ax: Any, t1: Any, t2: Any, *, lambd: float, eta: float, mu: float,
                 weight_decay: float, maximize: bool) -> None:
    """PyTorch's ``_single_tensor_asgd`` for one parameter, ``eta`` and ``mu`` the
    values of its float32 scalar state."""
    grad = update_grad(xp, p, g, weight_decay, maximize, t1)
    p *= 1 - lambd * eta
    add_(xp, p, grad, -eta, t2)
    if mu != 1:
        xp.subtract(p, ax, out=t2)
        t2 *= mu
        ax += t2
    else:
        xp.copyto(ax, p)


class ASGD(Elementwise):
    """ASGD (PyTorch's ``torch.optim.ASGD``): SGD with a decaying step ``eta`` and a
    running average ``ax`` of the iterates, which starts averaging after ``t0``
    steps.  State: ``step``, ``eta`` and ``mu`` (float32 0-d tensors, as PyTorch
    keeps them, so their rounding is PyTorch's) and ``ax``.

        >>> w = agrad.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = agrad.optim.ASGD([w], lr=0.25)
        >>> (w * w).sum().backward_sync()
        >>> opt.step()
        >>> sorted(opt.state[w])
        ['ax', 'eta', 'mu', 'step']
    """

    def __init__(self, params: ParamsT, lr: float | Tensor = 1e-2, lambd: float = 1e-4, alpha: float = 0.75,
                 t0: float = 1e6, weight_decay: float = 0, foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False) -> None:
        _check_lr(lr)
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = {"lr": lr, "lambd": lambd, "alpha": alpha, "t0": t0, "weight_decay": weight_decay,
                    "foreach": foreach, "maximize": maximize, "differentiable": differentiable,
                    "capturable": capturable}
        super().__init__(params, defaults)

    def _init_state(self, p: Tensor, state: dict[str, Any], group: dict[str, Any]) -> None:
        state["step"] = _scalar_state()
        state["eta"] = _scalar_state(_scalar(group["lr"]))
        state["mu"] = _scalar_state(1.0)
        state["ax"] = zeros_like(p)

    def _update(self, p: Tensor, grad: Any, group: dict[str, Any], scratch: Scratch) -> None:
        state = self._state(p, group)
        step = next_step(state)
        eta, mu = state["eta"], state["mu"]
        lr, lambd = _scalar(group["lr"]), group["lambd"]
        run(_asgd_kernel, [p._data, grad, state["ax"]._data], 2, scratch, lambd=lambd, eta=float(eta._data),
            mu=float(mu._data), weight_decay=group["weight_decay"], maximize=group["maximize"])
        # PyTorch copies a float32 tensor of each new value in: float32-rounded, even into
        # the float64 state that loading a float64 parameter's state dict makes.
        eta._data[...] = np.float32(lr / ((1 + lambd * lr * step) ** group["alpha"]))
        mu._data[...] = np.float32(1 / max(1, step - group["t0"]))
        eta._bump_version()
        mu._bump_version()
