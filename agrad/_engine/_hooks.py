"""Running a node's hooks during a backward, and checking what they return.

PyTorch's ``call_tensor_pre_hooks``, ``call_pre_hooks`` and
``call_post_hooks`` with their ``check_result`` rules, and the first half of
``evaluate_function`` around them (retain_grad, captures).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agrad._dtype import legacy_type_name
from agrad._graph._node import Node
from agrad._tensor import Tensor

if TYPE_CHECKING:
    from agrad._engine._graph_task import GraphTask

__all__ = ["run_post_hooks", "run_pre_hooks"]


def run_pre_hooks(task: GraphTask, node: Node, inputs: list[Any]) -> list[Any] | None:
    """Before ``node`` runs in ``task``: tensor pre-hooks, retain_grad, captures and
    node pre-hooks; the gradients it gets, or None if it only captures (PyTorch:
    ``evaluate_function`` before ``call_function``)."""
    if node._tensor_pre_hooks is not None:
        _run_tensor_pre_hooks(node, inputs)
    if node._retains_grad is not None:
        for nr, ref in node._retains_grad.items():
            t = ref()
            if t is not None and t._grad_fn is node and inputs[nr] is not None:
                task.stage(t, inputs[nr], False)
    if task.exec_info is not None:
        info = task.exec_info.get(node)
        if info is not None and info.captures is not None:
            for input_nr, idx in info.captures:
                task.captured[idx] = inputs[input_nr]
        if info is None or not info.needed:
            return None
    if node._pre_hooks is not None:
        inputs = _run_node_pre_hooks(node, inputs)
    return inputs


def _run_tensor_pre_hooks(node: Node, inputs: list[Any]) -> None:
    """The hooks registered on ``node``'s outputs (``Tensor.register_hook``), in place on ``inputs``."""
    # Note [Hooks see undefined gradients]
    # ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    # As in PyTorch, a tensor's hooks run whenever its grad_fn runs, with
    # None for an output whose gradient is undefined (a sibling output of a
    # multi-output node, or a backward that returned None); gradcheck's
    # undefined-gradient check relies on it.  A hook may not turn None into a
    # gradient.
    assert node._tensor_pre_hooks is not None  # the caller checked
    for nr, hooks in node._tensor_pre_hooks.items():
        for hook in list(hooks.values()):
            new = hook(inputs[nr])
            if new is not None:
                inputs[nr] = _check_result(new, inputs[nr], hook)


def _run_node_pre_hooks(node: Node, inputs: list[Any]) -> list[Any]:
    """``node``'s pre-hooks (``Node.register_prehook``): the gradients its backward gets."""
    assert node._pre_hooks is not None  # the caller checked
    for hook in list(node._pre_hooks.values()):
        new = hook(tuple(inputs))
        if new is not None:
            inputs = _check_results(new, inputs, hook)
    return inputs


def run_post_hooks(node: Node, inputs: list[Any], outputs: Sequence[Any]) -> Sequence[Any]:
    """``node``'s post-hooks (``Node.register_hook``): the gradients it passes on."""
    assert node._post_hooks is not None  # the caller checked
    for hook in list(node._post_hooks.values()):
        new = hook(tuple(outputs), tuple(inputs))
        if new is not None:
            outputs = _check_results(new, outputs, hook)
    return outputs


def _check_result(new: Any, old: Tensor | None, hook: Any) -> Tensor:
    """What a hook returned in place of the gradient ``old``, checked as PyTorch's
    ``check_single_result`` does (``new`` is not None)."""
    if old is None:
        raise RuntimeError("can't replace a None gradient with a non-None value")
    if not isinstance(new, Tensor):
        raise TypeError(f"expected Variable, but hook returned '{type(new).__name__}'")
    if new._data.dtype != old._data.dtype or new.device != old.device:
        raise RuntimeError(f"hook '{_hook_name(hook)}' has changed the type of value (was {_type_name(old)} "
                           f"got {_type_name(new)})")
    if new.shape != old.shape:
        raise RuntimeError(f"hook '{_hook_name(hook)}' has changed the size of value")
    return new


def _check_results(new: Any, old: Sequence[Any], hook: Any) -> list[Any]:
    """What a node's pre- or post-hook returned in place of the gradients
    ``old``, checked as PyTorch's ``check_result`` does; None entries stand."""
    if not isinstance(new, tuple):
        raise TypeError(f"expected tuple, but hook returned '{type(new).__name__}'")
    if len(new) != len(old):
        raise RuntimeError(f"hook '{_hook_name(hook)}' has returned an incorrect number of values "
                           f"(got {len(new)}, but expected {len(old)})")
    return [n if n is None else _check_result(n, o, hook) for n, o in zip(new, old)]


def _hook_name(hook: Any) -> str:
    return getattr(hook, "__name__", "<unknown>")


def _type_name(t: Tensor) -> str:
    return legacy_type_name(t.dtype, t.device.type)
