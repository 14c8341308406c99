"""AdamW: Adam with decoupled weight decay (mirrors ``torch.optim.adamw``)."""

from __future__ import annotations

from typing import Any

from agrad._tensor import Tensor
from agrad.optim.adam import Adam
from agrad.optim.optimizer import ParamsT

__all__ = ["AdamW"]


class AdamW(Adam):
    """AdamW (PyTorch's ``torch.optim.AdamW``): :class:`Adam` whose weight decay shrinks
    the parameter (``p *= 1 - lr * weight_decay``) instead of entering the moments,
    with ``weight_decay=1e-2`` by default.  Its groups always have
    ``decoupled_weight_decay=True``, loaded ones included.

        >>> w = agrad.tensor([1.0, -2.0], requires_grad=True)
        >>> opt = agrad.optim.AdamW([w], lr=0.1, weight_decay=0.5)
        >>> (w * w).sum().backward_sync()
        >>> opt.step()
        >>> w
        tensor([ 0.8500, -1.8000], requires_grad=True)
    """

    def __init__(self, params: ParamsT, lr: float | Tensor = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
