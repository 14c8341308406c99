"""Module backward hooks: ``register_full_backward_hook`` and ``..._pre_hook`` (PyTorch's ``BackwardHook``).

A module call with backward hooks passes its tensor inputs, and then its
tensor outputs, through an identity Function (``BackwardHookFunction``).
The output identity's node sees the gradients of the module's outputs
(``grad_output``), runs the pre-hooks (which may replace them) and keeps
them; the input identity's node then sees the gradients of the module's
inputs (``grad_input``) and calls the hooks with both, a hook's result
replacing ``grad_input``.  When no input requires grad, the hooks fire from
the output node with ``grad_input`` all None, as in PyTorch.  Saliency maps
and Grad-CAM read a layer's gradients this way.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

from agrad._grad_mode import grad_enabled
from agrad._tensor import Tensor
from agrad.autograd.function import Function

__all__: list[str] = []


class BackwardHookFunction(Function):
    """The identity, recorded, so that a node stands where the module's inputs (or outputs) are."""

    @staticmethod
    def forward(ctx: Any, *args: Tensor) -> tuple[Tensor, ...]:
        ctx.mark_non_differentiable(*[a for a in args if not a.requires_grad])
        return args

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> tuple[Any, ...]:
        return grads


def _pack_with_none(indices: Sequence[int], values: Sequence[Any], size: int) -> tuple[Any, ...]:
    res: list[Any] = [None] * size
    for idx, val in zip(indices, values):
        res[idx] = val
    return tuple(res)


class BackwardHook:
    """One module call's backward hooks: wraps its inputs (``setup_input_hook``) and outputs
    (``setup_output_hook``) and calls the user's hooks when both gradients are known."""

    def __init__(self, module: Any, user_hooks: list[Callable[..., Any]],
                 user_pre_hooks: list[Callable[..., Any]]) -> None:
        self.module = module
        self.user_hooks = user_hooks
        self.user_pre_hooks = user_pre_hooks
        self.grad_outputs: tuple[Any, ...] | None = None
        self.n_inputs = self.n_outputs = -1
        self.input_tensors_index: list[int] | None = None
        self.output_tensors_index: list[int] | None = None

    def _apply_on_tensors(self, register: Callable[[Any], None],
                          args: tuple[Any, ...]) -> tuple[tuple[Any, ...], list[int] | None]:
        index = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        tensors = [args[i] for i in index]
        if not (any(t.requires_grad for t in tensors) and grad_enabled.get()):
            return args, None
        wrapped = BackwardHookFunction.apply(*tensors)
        register(next(t.grad_fn for t in wrapped if t.grad_fn is not None))
        out = list(args)
        for i, t in zip(index, wrapped):
            out[i] = t
        return (tuple(out) if type(args) is tuple else type(args)(*out)), index  # a namedtuple stays one

    def setup_input_hook(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        def hook(grad_input: tuple[Any, ...], _: Any) -> tuple[Any, ...] | None:
            if self.grad_outputs is None:  # the gradient reached the inputs without passing the outputs
                return None
            assert self.input_tensors_index is not None
            res = _pack_with_none(self.input_tensors_index, grad_input, self.n_inputs)
            for user_hook in self.user_hooks:
                out = user_hook(self.module, res, self.grad_outputs)
                if out is None:
                    continue
                if len(out) != len(res):
                    raise RuntimeError("Backward hook returned an invalid number of grad_input, "
                                       f"got {len(out)}, but expected {len(res)}")
                res = out
            self.grad_outputs = None
            return tuple(res[i] for i in self.input_tensors_index)

        res, self.input_tensors_index = self._apply_on_tensors(lambda node: node.register_hook(hook), args)
        self.n_inputs = len(args)
        return res

    def setup_output_hook(self, result: Any) -> Any:
        def hook(_: Any, grad_output: tuple[Any, ...]) -> tuple[Any, ...] | None:
            assert self.output_tensors_index is not None
            grad_outputs = _pack_with_none(self.output_tensors_index, grad_output, self.n_outputs)
            for pre_hook in self.user_pre_hooks:
                new = pre_hook(self.module, grad_outputs)
                if new is None:
                    continue
                if len(new) != len(grad_outputs):
                    raise RuntimeError("Backward pre hook returned an invalid number of grad_output, "
                                       f"got {len(new)}, but expected {len(grad_outputs)}")
                grad_outputs = new
            self.grad_outputs = grad_outputs
            if self.input_tensors_index is None:
                warnings.warn("Full backward hook is firing when gradients are computed with respect to module "
                              "outputs since no inputs require gradients. See "
                              "https://docs.pytorch.org/docs/main/generated/torch.nn.Module.html"
                              "#torch.nn.Module.register_full_backward_hook for more details.", stacklevel=2)
                grad_inputs = (None,) * self.n_inputs
                for user_hook in self.user_hooks:
                    res = user_hook(self.module, grad_inputs, grad_outputs)
                    if res is not None and not (isinstance(res, tuple) and all(el is None for el in res)):
                        raise RuntimeError("Backward hook for Modules where no input requires gradient should "
                                           "always return None or None for all gradients.")
                self.grad_outputs = None
            return tuple(grad_outputs[i] for i in self.output_tensors_index)

        single = not isinstance(result, tuple)
        outputs = (result,) if single else result
        res, self.output_tensors_index = self._apply_on_tensors(lambda node: node.register_hook(hook), outputs)
        self.n_outputs = len(outputs)
        return res[0] if single else res
