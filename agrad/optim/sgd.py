"""Stochastic gradient descent, with momentum and Nesterov momentum (mirrors ``torch.optim.sgd``)."""

from __future__ import annotations

from typing import Any

from agrad._backends import array_module
from agrad._tensor import Tensor
from agrad.optim._arrayops import add_, update_grad
from agrad.optim._elementwise import Elementwise, Scratch, run
from agrad.optim.optimizer import ParamsT, _check_fused, _check_lr, _scalar

__all__ = ["SGD"]


def _sgd_kernel(xp: Any, p: Any, g: Any, buf: Any, t1: Any, t2: Any, *, lr: float, weight_decay: float,
                momentum: float, dampening: float, nesterov: bool, maximize: bool, first: bool) -> None:
    """PyTorch's ``_single_tensor_sgd`` for one parameter; ``buf`` is the momentum
    buffer (None without momentum), ``first`` says it is new (it takes the gradient)."""
    grad = update_grad(xp, p, g, weight_decay, maximize, t1)
    if momentum != 0:
        if first:
            xp.copyto(buf, grad)
        else:
            buf *= momentum
            add_(xp, buf, grad, 1 - dampening, t2)
        if nesterov:
            xp.multiply(buf, momentum, out=t2)
            grad = xp.add(grad, t2, out=t2)
        else:
            grad = buf
    add_(xp, p, grad, -lr, t2)


class SGD(Elementwise):
    """Stochastic gradient descent, optionally with momentum (PyTorch's ``torch.optim.SGD``).

    Each step, with ``g`` the gradient (negated when ``maximize``, plus
    ``weight_decay * p``): ``buf = momentum * buf + (1 - dampening) * g`` (``buf = g``
    on the first step), ``g = g + momentum * buf`` with ``nesterov`` or ``buf``
    without, and ``p -= lr * g``.  The momentum buffer is the state
    (``momentum_buffer``), kept only when ``momentum != 0``.

    ``foreach`` and ``fused`` select PyTorch's implementations and are kept in
    the groups for its state dicts; agrad has one (Note [Blocked updates]).

        >>> w = agrad.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = agrad.optim.SGD([w], lr=0.1, momentum=0.9)
        >>> for _ in range(2):
        ...     opt.zero_grad()
        ...     (w * w).sum().backward_sync()
        ...     opt.step()
        >>> w
        tensor([ 0.4600, -0.9200], requires_grad=True)
    """

    def __init__(self, params: ParamsT, lr: float | Tensor = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float | Tensor = 0, nesterov: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, differentiable: bool = False, fused: bool | None = None) -> None:
        _check_lr(lr)
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = {"lr": lr, "momentum": momentum, "dampening": dampening, "weight_decay": weight_decay,
                    "nesterov": nesterov, "maximize": maximize, "foreach": foreach, "differentiable": differentiable,
                    "fused": fused}
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)
        _check_fused(fused, foreach, differentiable)

    def _update(self, p: Tensor, grad: Any, group: dict[str, Any], scratch: Scratch) -> None:
        momentum = group["momentum"]
        buf, first = None, False
        if momentum != 0:
            state = self.state[p]
            buf = state.get("momentum_buffer")
            first = buf is None
            if buf is None:  # the kernel copies the gradient into it
                buf = state["momentum_buffer"] = Tensor._make(array_module(p._data).empty_like(p._data))
        run(_sgd_kernel, [p._data, grad, None if buf is None else buf._data], 2, scratch,
            lr=_scalar(group["lr"]), weight_decay=_scalar(group["weight_decay"]), momentum=momentum,
            dampening=group["dampening"], nesterov=group["nesterov"], maximize=group["maximize"], first=first)
