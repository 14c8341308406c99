"""Grad mode: whether forward ops record a graph.

The flags live with the rest of agrad's ambient state in ``_ambient.py``
(Note [Ambient state in contextvars]); the context managers that set them are
here.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import AsyncGenerator, Callable, Generator
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from agrad._ambient import grad_enabled, inference_enabled

__all__ = [
    "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode",
    "is_inference_mode_enabled",
]

F = TypeVar("F", bound=Callable[..., Any])



def is_grad_enabled() -> bool:
    """Return whether gradient recording is enabled in the current context."""
    return grad_enabled.get()


def is_inference_mode_enabled() -> bool:
    """Return whether inference mode is enabled in the current context."""
    return inference_enabled.get()


# Note [Decorated generators]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A generator's body runs a piece at a time, each time its caller resumes it,
# in the caller's context.  Entering the mode around the call that *creates*
# the generator would do nothing for the body.  As PyTorch's _wrap_generator,
# the wrapper enters a fresh mode around each resumption (send, throw, close)
# and leaves it before handing the value out, so the mode holds exactly while
# the body runs and the caller's own mode is untouched between items.  agrad
# does the same for async generators and, for coroutine functions, holds the
# mode for the whole coroutine (PyTorch only creates the coroutine under it).
def _wrap_generator(factory: Callable[[], AbstractContextManager[Any]], fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def generator_context(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        gen = fn(*args, **kwargs)
        try:
            with factory():
                response = gen.send(None)
            while True:
                try:
                    request = yield response
                except GeneratorExit:
                    with factory():
                        gen.close()
                    raise
                except BaseException as exc:
                    with factory():
                        response = gen.throw(exc)
                else:
                    with factory():
                        response = gen.send(request)
        except StopIteration as stop:
            return stop.value

    return generator_context


def _wrap_async_generator(factory: Callable[[], AbstractContextManager[Any]],
                          fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def async_generator_context(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
        gen = fn(*args, **kwargs)
        try:
            with factory():
                response = await gen.asend(None)
            while True:
                try:
                    request = yield response
                except GeneratorExit:
                    with factory():
                        await gen.aclose()
                    raise
                except BaseException as exc:
                    with factory():
                        response = await gen.athrow(exc)
                else:
                    with factory():
                        response = await gen.asend(request)
        except StopAsyncIteration:
            return

    return async_generator_context


def _decorate(factory: Callable[[], AbstractContextManager[Any]], fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` run under a fresh ``factory()`` context (Note [Decorated generators])."""
    if inspect.isgeneratorfunction(fn):
        return _wrap_generator(factory, fn)
    if inspect.isasyncgenfunction(fn):
        return _wrap_async_generator(factory, fn)
    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            with factory():
                return await fn(*args, **kwargs)
        return async_wrapper

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with factory():
            return fn(*args, **kwargs)
    return wrapper


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
        if inspect.isclass(fn):
            warnings.warn(
                "Decorating classes is deprecated and will be disabled in future versions. You should only "
                "decorate functions or methods. To preserve the current behavior of class decoration, you can "
                "directly decorate the `__init__` method and nothing else.",
                FutureWarning,
                stacklevel=2,
            )
            cls = fn
            fn = lambda *args, **kwargs: cls(*args, **kwargs)  # type: ignore[assignment]  # noqa: E731
        return _decorate(self.clone, fn)  # type: ignore[return-value]  # a class was wrapped in a function


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
    contextvars]).  Works on plain and ``async def`` functions and on
    generators (Note [Decorated generators]).

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
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled(): argument 'enabled' (position 1) must be bool, "
                            f"not {type(mode).__name__}")
        super().__init__()
        self._mode = mode
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
    """Context manager and decorator for inference mode.

    ``inference_mode()`` (``mode=True``) disables recording as :class:`no_grad`
    does and, besides, makes every tensor created inside an *inference
    tensor* (see Note [Inference tensors] in ``agrad/_tensor.py``);
    ``inference_mode(False)`` leaves inference mode and enables recording, as
    PyTorch's ``InferenceMode(false)`` guard does.

    Example::

        >>> with agrad.inference_mode():
        ...     y = agrad.ones(2) * 2
        >>> y.is_inference(), agrad.is_inference_mode_enabled()
        (True, False)
    """

    def __new__(cls, mode: Any = True) -> Any:
        if isinstance(mode, bool):
            return super().__new__(cls)
        return cls()(mode)  # bare @inference_mode

    def __init__(self, mode: bool = True) -> None:
        super().__init__()
        self.mode = mode
        self._mode = not mode
        self._prev_inference: list[bool] = []

    def __enter__(self) -> None:
        self._prev_inference.append(inference_enabled.get())
        inference_enabled.set(self.mode)
        super().__enter__()

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        inference_enabled.set(self._prev_inference.pop())

    def clone(self) -> "inference_mode":
        return inference_mode(self.mode)
