"""The backward graph's public types and saved-tensor hooks (mirrors
``torch.autograd.graph``), and how the engine schedules a backward over it
(agrad only: ``engine_options``, ``get_admission_limit``/``set_admission_limit``)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal
from weakref import WeakKeyDictionary, WeakSet

from agrad._ambient import current_graph_task, mutation_on_saved
from agrad._engine._admission import get_admission_limit, set_admission_limit
from agrad._engine._graph_task import GraphTask
from agrad._engine._options import engine_options
from agrad._graph._hooks import RemovableHandle
from agrad._graph._node import GradientEdge, Node, before_in_place
from agrad._graph._saved_hooks import disable_saved_tensors_hooks, save_on_cpu, saved_tensors_hooks
from agrad._tensor import Tensor

__all__ = ["Node", "GradientEdge", "get_gradient_edge", "increment_version", "register_multi_grad_hook",
           "allow_mutation_on_saved_tensors", "engine_options", "saved_tensors_hooks", "save_on_cpu",
           "disable_saved_tensors_hooks", "get_admission_limit", "set_admission_limit"]


def get_gradient_edge(tensor: Tensor) -> GradientEdge:
    """The edge the gradient of ``tensor`` flows along: its ``grad_fn`` (or a
    leaf's AccumulateGrad node) and ``output_nr``.

    ``agrad.autograd.grad`` and ``backward(inputs=)`` take it in place of the
    tensor, to differentiate w.r.t. a tensor that no longer exists.

    Example::

        >>> x = agrad.ones(2, requires_grad=True)
        >>> y = x * 2
        >>> edge = agrad.autograd.graph.get_gradient_edge(y)
        >>> agrad.autograd.grad_sync((y * y).sum(), edge)
        (tensor([4., 4.]),)
    """
    if not tensor.requires_grad:
        raise RuntimeError("It is not possible to get the gradient edge for a Tensor that does not require gradients")
    node, output_nr = tensor._gradient_edge()
    return GradientEdge(node, output_nr)


def increment_version(tensor: Tensor | Iterable[Tensor]) -> None:
    """Mark ``tensor`` (or each of several) as modified in place, for writes
    autograd cannot see (through ``numpy()`` or ``data_ptr()``): a backward
    that saved it then raises instead of using the new values."""
    for t in (tensor,) if isinstance(tensor, Tensor) else tensor:
        t._bump_version()


class _MultiHandle(RemovableHandle):
    """One handle for the hooks ``register_multi_grad_hook`` put on each tensor."""

    __slots__ = ("handles",)

    def __init__(self, handles: tuple[RemovableHandle, ...]) -> None:
        super().__init__({})
        self.handles = handles

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def _running_task() -> GraphTask:
    task = current_graph_task.get()
    if task is None:
        raise AssertionError("expected this hook to be called inside a backward call")
    return task


def register_multi_grad_hook(tensors: Sequence[Tensor], fn: Callable[..., None], *,
                             mode: Literal["all", "any"] = "all") -> RemovableHandle:
    """Register a hook called once the gradients of several tensors are computed.

    With ``mode="all"``, ``fn(grads)`` is called, in each backward, after the
    gradient of every tensor of ``tensors`` that the backward computes is
    known, with ``None`` for those it does not compute (not in the graph, or
    not needed for its ``inputs``).  With ``mode="any"``, ``fn(grad)`` is
    called with the first gradient computed among ``tensors``, once per backward.
    The hook must not modify its arguments.  Returns a handle whose
    ``remove()`` removes it.

    Example::

        >>> a = agrad.ones(2, requires_grad=True)
        >>> b = agrad.ones(2, requires_grad=True)
        >>> c = a * b
        >>> h = agrad.autograd.graph.register_multi_grad_hook(
        ...     (a, b, c), lambda grads: print([g is not None for g in grads]))
        >>> c.sum().backward_sync(inputs=(a,))
        [True, False, True]
    """
    if mode not in ("all", "any"):
        raise ValueError(f"Expects mode to be one of ('all', 'any') but got {mode}")
    lock = threading.Lock()
    if mode == "all":
        nodes = [t._gradient_edge()[0] for t in tensors]
        # Per running backward: (gradients so far, how many calls are still to come).
        pending: WeakKeyDictionary[GraphTask, tuple[list[Any], list[int]]] = WeakKeyDictionary()

        def inner_hook(idx: int) -> Callable[[Tensor], None]:
            def hook(grad: Tensor) -> None:
                task = _running_task()
                with lock:
                    if task not in pending:
                        pending[task] = ([None] * len(tensors), [sum(map(task.will_execute, nodes))])
                    grads, left = pending[task]
                    grads[idx] = grad
                    left[0] -= 1
                    done = left[0] == 0
                    if done:
                        del pending[task]
                if done:
                    fn(grads)

            return hook

        handles = tuple(t.register_hook(inner_hook(i)) for i, t in enumerate(tensors))
    else:
        ran: WeakSet[GraphTask] = WeakSet()

        def any_hook(grad: Tensor) -> None:
            task = _running_task()
            with lock:
                if task in ran:
                    return
                ran.add(task)
            fn(grad)

        handles = tuple(t.register_hook(any_hook) for t in tensors if t.requires_grad)
    return _MultiHandle(handles)


# -- allow_mutation_on_saved_tensors ------------------------------------------------


class _Handle:
    """What the graph keeps for a tensor saved under the context (weakly keyed)."""

    __slots__ = ("__weakref__",)


class _AllowMutationOnSavedContext:
    """State of one ``allow_mutation_on_saved_tensors`` context (PyTorch's name).

    ``original`` maps the handle the graph keeps to the saved tensor, until an
    in-place write into its memory moves a copy of its old value to ``cloned``.
    ``saved_by_memory`` finds the handles of a memory by its version counter,
    which a tensor shares with its views (the counter is held so its id stays
    unique while the context lives).
    """

    def __init__(self) -> None:
        self.original: WeakKeyDictionary[_Handle, Tensor] = WeakKeyDictionary()
        self.cloned: WeakKeyDictionary[_Handle, Tensor] = WeakKeyDictionary()
        self.saved_by_memory: dict[int, tuple[list[int], WeakSet[_Handle]]] = {}
        self.active = True

    def clear(self) -> None:
        self.original.clear()
        self.cloned.clear()
        self.saved_by_memory.clear()
        self.active = False

    def pack(self, tensor: Tensor) -> _Handle:
        handle = _Handle()
        self.original[handle] = tensor
        vc = tensor._version_counter
        self.saved_by_memory.setdefault(id(vc), (vc, WeakSet()))[1].add(handle)
        return handle

    def unpack(self, handle: _Handle) -> Tensor:
        if not self.active or (handle not in self.cloned and handle not in self.original):
            raise AssertionError(
                "Trying to backward outside of the 'allow_mutation_on_saved_tensors' context in which the graph "
                "was originally recorded."
            )
        return self.cloned[handle] if handle in self.cloned else self.original[handle]

    def before_in_place(self, tensor: Tensor) -> None:
        """Copy each saved tensor sharing ``tensor``'s memory before it is overwritten."""
        entry = self.saved_by_memory.get(id(tensor._version_counter))
        for handle in () if entry is None else list(entry[1]):
            if handle not in self.cloned and handle in self.original:
                self.cloned[handle] = self.original.pop(handle).clone().detach()


@contextmanager
def allow_mutation_on_saved_tensors() -> Iterator[_AllowMutationOnSavedContext]:
    """Context manager under which tensors saved for backward may be modified in place.

    A tensor saved for backward (by the forward run in this context) is copied
    when an in-place op is about to write into its memory, and the backward
    uses the copy, so it still computes the gradient of the original values
    instead of raising.  Run both the forward and the backward in the context:
    a backward after it exits raises.  Contexts cannot be nested.

    Example::

        >>> with agrad.autograd.graph.allow_mutation_on_saved_tensors():
        ...     a = agrad.ones(2, 3, requires_grad=True)
        ...     b = a.clone()
        ...     out = (b ** 2).sum()
        ...     _ = b.sin_()
        ...     out.backward_sync()
        >>> a.grad
        tensor([[2., 2., 2.],
                [2., 2., 2.]])
    """
    if mutation_on_saved.get() is not None:
        raise RuntimeError("allow_mutation_on_saved_tensors contexts cannot be nested")
    ctx = _AllowMutationOnSavedContext()
    token = mutation_on_saved.set(ctx)
    hook_token = before_in_place.set(ctx.before_in_place)
    try:
        with saved_tensors_hooks(ctx.pack, ctx.unpack):
            yield ctx
    finally:
        before_in_place.reset(hook_token)
        mutation_on_saved.reset(token)
        ctx.clear()
