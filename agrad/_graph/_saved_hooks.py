"""Saved-tensor hooks (PyTorch's ``saved_tensors_hooks``): how the tensors a
backward node saves are packed when recorded and unpacked when the node runs.

Note [Saved tensor hooks]
~~~~~~~~~~~~~~~~~~~~~~~~~
The innermost ``(pack_hook, unpack_hook)`` pair lives in one ContextVar
(``saved_hooks``; None when no hooks are active), so two asyncio tasks
recording at once never see each other's hooks (Note [Ambient state in
contextvars]).  Every tensor saved for backward is a ``SavedTensor``, whose
constructor reads the ContextVar once: without hooks it keeps the tensor, as
always; with hooks it keeps only what ``pack_hook`` returned, plus the
tensor's place in the graph (its ``grad_fn`` and ``output_nr``, or the
AccumulateGrad node of a leaf), so that the tensor ``unpack_hook`` returns is
re-attached to the graph when a ``create_graph`` backward differentiates
through it, as PyTorch's ``SavedVariable`` does.  As in PyTorch, the version
check against in-place modification is skipped for hooked tensors (the hooks
may store anything), ``pack_hook`` runs with grad mode off and must not modify
its input in place, and ``unpack_hook`` runs in the backward's grad mode.
Python numbers made constant tensors (Note [Scalar constants]) are saved as
they are, never packed, as PyTorch does with wrapped numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from agrad._ambient import outer_saved_hooks, saved_hooks, saved_hooks_disabled

if TYPE_CHECKING:
    from agrad._tensor import Tensor

__all__ = ["saved_tensors_hooks", "save_on_cpu", "disable_saved_tensors_hooks", "saved_hooks_state",
           "restore_saved_hooks"]

Hooks = tuple[Callable[["Tensor"], Any], Callable[[Any], "Tensor"]]


class saved_tensors_hooks:
    """Context manager that sets a pair of pack / unpack hooks for saved tensors.

    In its context, ``pack_hook`` is called every time an operation saves a
    tensor for backward (the saves of built-in ops and of
    ``ctx.save_for_backward`` alike), and what it returns is stored in the
    graph instead of the tensor.  ``unpack_hook`` is called with that object
    when the backward needs the tensor, and must return a tensor with the same
    content as the one passed to ``pack_hook``::

        pack_hook(tensor: Tensor) -> Any
        unpack_hook(Any) -> Tensor

    Only the innermost pair of nested contexts applies.  The hooks belong to
    the current context (Note [Saved tensor hooks]): other asyncio tasks are
    unaffected.  As in PyTorch, a tensor saved with hooks is not checked for
    in-place modification when unpacked, and ``pack_hook`` must not modify its
    input in place.  agrad passes a saved *output* of an op to ``pack_hook``
    as a tensor without ``grad_fn`` (sharing its data), so that a
    ``pack_hook`` returning its argument makes no reference cycle.

    Args:
        pack_hook: called with each tensor saved for backward.
        unpack_hook: called with what ``pack_hook`` returned; returns a Tensor.

    Example::

        >>> packed = []
        >>> def pack(x):
        ...     packed.append(x.shape)
        ...     return x.detach()
        >>> a = agrad.ones(3, requires_grad=True)
        >>> with agrad.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
        ...     y = (a * a).sum()
        >>> packed
        [agrad.Size([3]), agrad.Size([3])]
        >>> y.backward_sync()
        >>> a.grad
        tensor([2., 2., 2.])
    """

    def __init__(self, pack_hook: Callable[["Tensor"], Any], unpack_hook: Callable[[Any], "Tensor"]) -> None:
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    # The pairs replaced are kept in the context, not on the instance: one
    # instance entered again in another context (its own unpack hook running
    # in a backward's kernel thread, another task) pushes and pops there, so
    # leaving this ``with`` always restores what was active when it was entered
    # here.  As PyTorch's push/pop of default hooks, ``__exit__`` pops the
    # innermost pair of the current context.
    def __enter__(self) -> None:
        message = saved_hooks_disabled.get()
        if message is not None:
            raise RuntimeError(message)
        outer_saved_hooks.set((*outer_saved_hooks.get(), saved_hooks.get()))
        saved_hooks.set((self.pack_hook, self.unpack_hook))

    def __exit__(self, *exc: object) -> None:
        outer = outer_saved_hooks.get()
        if not outer:
            raise RuntimeError("saved_tensors_hooks.__exit__ called without a matching __enter__ in this context")
        saved_hooks.set(outer[-1])
        outer_saved_hooks.set(outer[:-1])


class save_on_cpu(saved_tensors_hooks):
    """Context manager under which tensors saved for backward are kept in host
    memory (a copy), and moved back to their device when the backward needs
    them: device memory traded for transfers, as PyTorch's.

    ``pin_memory`` is accepted for PyTorch's signature; agrad's host copies
    are plain numpy arrays (CuPy's transfers need no pinned staging here).

        >>> a = agrad.ones(3, requires_grad=True)
        >>> with agrad.autograd.graph.save_on_cpu():
        ...     y = (a * a).sum()
        >>> y.backward_sync()
        >>> a.grad
        tensor([2., 2., 2.])
    """

    def __init__(self, pin_memory: bool = False, device_type: str = "cuda") -> None:
        def pack(tensor: "Tensor") -> tuple[Any, "Tensor"]:
            return tensor.device, tensor.detach().cpu().clone()

        def unpack(packed: tuple[Any, "Tensor"]) -> "Tensor":
            device, host = packed
            return host.to(device)

        super().__init__(pack, unpack)


@contextmanager
def disable_saved_tensors_hooks(error_message: str) -> Iterator[None]:
    """Context manager that disables saved tensors hooks.

    For features that do not work with saved tensors hooks: entering a
    :class:`saved_tensors_hooks` in this context, or entering this context
    while hooks are active, raises ``RuntimeError(error_message)``.

    Args:
        error_message: the message of the RuntimeError raised.

    Example::

        >>> with agrad.autograd.graph.disable_saved_tensors_hooks("no hooks here"):
        ...     with agrad.autograd.graph.saved_tensors_hooks(lambda x: x, lambda x: x):
        ...         pass
        Traceback (most recent call last):
        ...
        RuntimeError: no hooks here
    """
    if saved_hooks.get() is not None:
        raise RuntimeError(error_message)
    prev = saved_hooks_disabled.get()
    saved_hooks_disabled.set(error_message)
    try:
        yield
    finally:
        saved_hooks_disabled.set(prev)


def saved_hooks_state() -> tuple[Hooks | None, tuple[Hooks | None, ...]]:
    """The current context's hooks and the stack of those they replaced."""
    return saved_hooks.get(), outer_saved_hooks.get()


def restore_saved_hooks(state: tuple[Hooks | None, tuple[Hooks | None, ...]]) -> None:
    """Put back what :func:`saved_hooks_state` returned (a backward does so when
    it ends, whatever its hooks entered or left meanwhile)."""
    saved_hooks.set(state[0])
    outer_saved_hooks.set(state[1])
