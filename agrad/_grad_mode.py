"""Grad mode: whether forward ops record a graph.

Note [Ambient state in contextvars]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
PyTorch keeps grad mode in a thread-local.  In asyncio many tasks interleave on
one thread, so a thread-local would leak ``no_grad`` from one request into
another.  Every piece of ambient state in agrad is a ``ContextVar``: each
asyncio task (and each trio task) runs in its own copy of the context, so a
task under ``no_grad`` never changes what a task beside it records.  The
context managers save and restore the previous *value* (not a token), so one
instance may be entered again, nested, or used as a decorator.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, TypeVar

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode"]

F = TypeVar("F", bound=Callable[..., Any])

grad_enabled: ContextVar[bool] = ContextVar("agrad_grad_enabled", default=True)


def is_grad_enabled() -> bool:
    """Return whether gradient recording is enabled in the current context."""
    return grad_enabled.get()


class _GradModeContext:
    """Base for the grad-mode context managers; also decorates sync and async functions."""

    _mode: bool

    def __init__(self) -> None:
        self._prev: list[bool] = []

    def __enter__(self) -> None:
        self._prev.append(grad_enabled.get())
        grad_enabled.set(self._mode)

    def __exit__(self, *exc: object) -> None:
        grad_enabled.set(self._prev.pop())

    def clone(self) -> "_GradModeContext":
        return self.__class__()

    def __call__(self, fn: F) -> F:
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                with self.clone():
                    return await fn(*args, **kwargs)
            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self.clone():
                return fn(*args, **kwargs)
        return wrapper  # type: ignore[return-value]


class _BareDecoratorContext(_GradModeContext):
    """Also usable as a bare decorator, ``@no_grad`` without parentheses (PyTorch ≥ 2.1)."""

    def __new__(cls, orig_func: Callable[..., Any] | None = None) -> Any:
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)

    def __init__(self, orig_func: Callable[..., Any] | None = None) -> None:
        super().__init__()


class no_grad(_BareDecoratorContext):
    """Context manager and decorator that disables gradient recording.

    Only the current task's context is affected (see Note [Ambient state in
    contextvars]).  Works on plain and ``async def`` functions.

    Example::

        >>> x = agrad.ones(2, requires_grad=True)
        >>> with agrad.no_grad():
        ...     y = x * 2
        >>> y.requires_grad
        False
    """

    _mode = False


class enable_grad(_BareDecoratorContext):
    """Context manager and decorator that enables gradient recording."""

    _mode = True


class set_grad_enabled(_GradModeContext):
    """Set grad mode on or off.

    Called as a function it sets the mode at once in the current context;
    used as a context manager it restores the previous mode on exit.
    """

    def __init__(self, mode: bool) -> None:
        super().__init__()
        self._mode = bool(mode)
        self._prev.append(grad_enabled.get())
        grad_enabled.set(self._mode)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: object) -> None:
        grad_enabled.set(self._prev.pop())

    def clone(self) -> "set_grad_enabled":
        return set_grad_enabled(self._mode)

    def __call__(self, fn: F) -> F:
        # As a decorator the constructor's immediate effect is undone: the
        # mode applies only while the decorated function runs.
        grad_enabled.set(self._prev.pop())
        return super().__call__(fn)


class inference_mode(_GradModeContext):
    """Like :class:`no_grad` (``mode=True``) or :class:`enable_grad` (``mode=False``).

    agrad has no separate inference-tensor kind; inference mode disables
    recording exactly as ``no_grad`` does.
    """

    def __new__(cls, mode: Any = True) -> Any:
        if isinstance(mode, bool):
            return super().__new__(cls)
        return cls()(mode)  # bare @inference_mode

    def __init__(self, mode: bool = True) -> None:
        super().__init__()
        self._mode = not mode

    def clone(self) -> "inference_mode":
        return inference_mode(not self._mode)
