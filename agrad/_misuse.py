"""Loud misuse of the two ways to run a backward: a forgotten ``await``, and a
blocking twin called on an event loop's thread.

Note [A forgotten await]
~~~~~~~~~~~~~~~~~~~~~~~~
``loss.backward()`` is a coroutine function in agrad.  A ported script that
keeps PyTorch's ``loss.backward()`` without ``await`` gets a coroutine back
and drops it: nothing runs, ``.grad`` stays None, and the failure shows up
later and elsewhere (a ``TypeError`` in the optimizer), with only Python's
generic "coroutine ... was never awaited" warning as a hint.

So the awaitable entry points (``Tensor.backward``, ``autograd.backward``,
``autograd.grad``, ``autograd.functional``'s and ``func``'s transforms) are
wrapped by :func:`must_await`: they return an :class:`Awaited`, a coroutine
(``collections.abc.Coroutine``: ``await``, ``asyncio.run``,
``create_task``, anyio's and trio's ``start_soon`` all take it) that
remembers the line that called it.  If it is dropped without ever being
started, it reports :class:`NotAwaitedWarning` at that line, with a message
naming both fixes.  In CPython an expression statement's value is released
as the statement ends, so the report comes from the misuse itself, not from
a later garbage collection.  Using the result as the value it stands for
(``gx, = agrad.autograd.grad(y, x)``, ``grads[0]``) raises a ``TypeError``
with the same advice at once.

A warning raised in ``__del__`` cannot propagate, so a test that forgets an
``await`` would pass with a warning in the summary.  Every report is also
counted here (:func:`report_count`, :func:`reports_since`); agrad's pytest plugin
(``agrad/_pytest_plugin.py``, entry point ``agrad``) fails a test during which one was made.

Note [A blocking call on a loop's thread]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
``backward_sync()`` works from any thread (DESIGN §3), a thread whose event
loop is running included, but there it holds the loop for the whole
backward: every other request on that loop waits.  It warns
(:class:`BlockingCallWarning`) the first time each call site does so, naming
the alternatives.  Not warned: a blocking call inside a node the engine runs
(a reentrant backward of a custom Function, PyTorch's checkpoint pattern: the
engine already holds that thread), and inside ``agrad.cooperative``, which
runs it in time slices.
"""

from __future__ import annotations

import functools
import os
import sys
import warnings
from collections.abc import Callable, Coroutine, Generator
from types import FrameType
from typing import Any, ParamSpec, TypeVar

__all__ = ["Awaited", "BlockingCallWarning", "NotAwaitedWarning", "awaited", "must_await", "report_count",
           "reports_since", "warn_blocking"]

P = ParamSpec("P")
T = TypeVar("T")

_PACKAGE = os.path.dirname(__file__) + os.sep  # agrad/: frames in here are agrad's, not the caller's


class NotAwaitedWarning(RuntimeWarning):
    """An awaitable agrad call (``loss.backward()``, ``agrad.autograd.grad(...)``) was
    dropped without being awaited, so it did nothing (Note [A forgotten await])."""

    __module__ = "agrad"


class BlockingCallWarning(RuntimeWarning):
    """A blocking twin (``backward_sync()``, ``grad_sync()``) ran on a thread whose
    event loop is running, holding that loop until it returned (Note [A blocking call
    on a loop's thread])."""

    __module__ = "agrad"


class _Site:
    """Where a call was made: enough for ``warnings.warn_explicit`` without keeping the frame."""

    __slots__ = ("filename", "lineno", "module_globals")

    def __init__(self, frame: FrameType) -> None:
        self.filename = frame.f_code.co_filename
        self.lineno = frame.f_lineno
        self.module_globals = frame.f_globals

    def warn(self, message: str, category: type[Warning]) -> None:
        g = self.module_globals
        warnings.warn_explicit(message, category, self.filename, self.lineno, module=g.get("__name__") or self.filename,
                               registry=g.setdefault("__warningregistry__", {}))


# Reports of forgotten awaits so far: agrad's pytest plugin reads the count
# before and the messages after each test (Note [A forgotten await]).
_reports: list[str] = []


def report_count() -> int:
    """How many forgotten awaits have been reported so far."""
    return len(_reports)


def reports_since(count: int) -> list[str]:
    """The forgotten-await messages reported after the first ``count``."""
    return _reports[count:]


def _not_awaited_message(call: str, fix: str, twin: str, site: _Site) -> str:
    return (f"{call} was never awaited (at {site.filename}:{site.lineno}), so it did nothing: no gradient "
            f"was computed. Write `{fix}` in async code, or call `{twin}` in synchronous code.")


class Awaited(Coroutine[Any, Any, T]):
    """The coroutine of an awaitable agrad call, which reports being dropped
    unawaited at the line that made it (Note [A forgotten await])."""

    __slots__ = ("_coro", "_site", "_call", "_fix", "_twin", "_used")

    def __init__(self, coro: Coroutine[Any, Any, T], site: _Site, call: str, fix: str, twin: str) -> None:
        self._coro = coro
        self._site = site
        self._call, self._fix, self._twin = call, fix, twin
        self._used = False

    def __await__(self) -> Generator[Any, None, T]:
        self._used = True
        return self._coro.__await__()

    def send(self, value: Any) -> Any:
        self._used = True
        return self._coro.send(value)

    def throw(self, *args: Any) -> Any:
        self._used = True
        return self._coro.throw(*args)

    def close(self) -> None:
        self._used = True
        self._coro.close()

    def _advice(self) -> str:
        return _not_awaited_message(self._call, self._fix, self._twin, self._site)

    def _misused(self) -> TypeError:
        self.close()  # reported here: not again when dropped
        return TypeError(self._advice())

    def __iter__(self) -> Any:  # ``gx, = agrad.autograd.grad(y, x)`` without await
        raise self._misused()

    def __getitem__(self, index: Any) -> Any:
        raise self._misused()

    def __repr__(self) -> str:
        return f"<agrad awaitable {self._call}>"

    def __del__(self) -> None:
        if self._used:
            return
        self._coro.close()  # never started: no "coroutine was never awaited" from Python as well
        message = self._advice()
        _reports.append(message)
        self._site.warn(message, NotAwaitedWarning)


def awaited(coro: Coroutine[Any, Any, T], call: str, fix: str, twin: str, depth: int = 1) -> Awaited[T]:
    """``coro`` as an :class:`Awaited` that reports a forgotten ``await`` as ``call``, with
    the fixes ``fix`` (awaited) and ``twin`` (blocking), at the line ``depth`` frames
    above this function's caller (1: the caller's caller)."""
    return Awaited(coro, _Site(sys._getframe(depth + 1)), call, fix, twin)


def must_await(call: str, fix: str, twin: str
               ) -> Callable[[Callable[P, Coroutine[Any, Any, T]]], Callable[P, Coroutine[Any, Any, T]]]:
    """Make a coroutine function return an :class:`Awaited` (see :func:`awaited`) that
    reports a forgotten ``await`` at the line that called it."""
    def wrap(fn: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
        @functools.wraps(fn)
        def call_it(*args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, T]:
            return awaited(fn(*args, **kwargs), call, fix, twin)
        return call_it
    return wrap


_warned_sites: set[tuple[str, int]] = set()


def warn_blocking() -> None:
    """Warn, once per call site, that a blocking twin holds the running loop of this
    thread (Note [A blocking call on a loop's thread]); the caller checked that one runs."""
    frame: FrameType | None = sys._getframe(1)
    name = "a blocking call"
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        name = frame.f_code.co_name  # the outermost agrad function: the one the user called
        frame = frame.f_back
    if frame is None:
        return
    site = _Site(frame)
    if (site.filename, site.lineno) in _warned_sites:
        return
    _warned_sites.add((site.filename, site.lineno))
    site.warn(f"{name}() blocks the event loop running on this thread until it returns: every other task "
              f"on the loop waits. In async code await the awaitable form instead (`await loss.backward()`, "
              f"`await agrad.autograd.grad(...)`), or run the blocking call off the loop "
              f"(`await anyio.to_thread.run_sync(...)`, `await agrad.cooperative(fn, ...)`).", BlockingCallWarning)
