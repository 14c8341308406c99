"""Hook handles: what ``register_hook``-style calls return.

Tensors and Nodes register their hooks here; the public path of the handle
class is ``agrad.utils.hooks.RemovableHandle`` (mirrors ``torch.utils.hooks``).
"""

from __future__ import annotations

import itertools
from typing import Any

__all__ = ["RemovableHandle"]

_ids = itertools.count()


class RemovableHandle:
    """A handle returned by ``register_hook``-style calls; ``remove()`` unregisters.

    Holds the hooks dict it was registered in and the hook's id, so removing is
    O(1) and removing twice is harmless.  Usable as a context manager.
    """

    __module__ = "agrad.utils.hooks"  # where users import it from, as torch.utils.hooks.RemovableHandle

    __slots__ = ("_hooks", "id")

    def __init__(self, hooks: dict[int, Any]) -> None:
        self._hooks = hooks
        self.id = next(_ids)

    def remove(self) -> None:
        self._hooks.pop(self.id, None)

    def hooks_dict_ref(self) -> dict[int, Any]:
        """The hooks dict this handle's hook is in (PyTorch's is a weak reference to it)."""
        return self._hooks

    def __enter__(self) -> "RemovableHandle":
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


def _add_hook(hooks: dict[int, Any], fn: Any) -> RemovableHandle:
    """Insert ``fn`` into ``hooks`` (an insertion-ordered dict) and return its handle."""
    # Note [Hooks must be callable]
    # ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    # A deliberate difference: PyTorch stores any object and fails only when
    # a backward calls it (its test_inplace_on_view_saved_output registers a
    # non-callable that is never called); agrad refuses it at registration,
    # where the mistake is.
    if not callable(fn):
        raise TypeError(f"hook must be callable, got {type(fn).__name__}")
    handle = RemovableHandle(hooks)
    hooks[handle.id] = fn
    return handle
