"""How the engine schedules a backward: time slice and kernel offload policy.

Two kinds of setting, scoped as what they govern is scoped:

* per backward, read when it starts: the time slice and the offload policy,
  held in a ``ContextVar`` (Note [Ambient state in contextvars]), so one
  request of a server can run with a short slice or all inline without
  changing any other;
* per event loop: how many kernels may run in executor threads at once
  (:func:`set_num_interop_threads`, PyTorch's name for inter-op parallelism),
  shared by every backward on that loop.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Literal

from agrad._ambient import engine_options_override, multithreading
from agrad._grad_mode import F, _GradModeContext

__all__ = ["EngineOptions", "engine_options", "current_options", "get_num_interop_threads",
           "set_num_interop_threads", "set_multithreading_enabled", "is_multithreading_enabled"]

OffloadMode = Literal["auto", "always", "never"]
_OFFLOAD_MODES = ("auto", "always", "never")


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """The scheduling settings a backward runs with (see :func:`engine_options`)."""

    # See Note [Time slices]; 0.5 ms: see Note [The default slice].
    time_slice: float = 0.0005
    # See Note [Offload threshold].
    offload: OffloadMode = "auto"
    offload_threshold: int = 1 << 21
    # See Note [Offloading when busy].
    busy_offload_threshold: int = 1 << 18
    # See Note [Reentrant depth]; PyTorch's engine uses the same default (MAX_DEPTH).
    max_recursion_depth: int = 60


_DEFAULT = EngineOptions()


def current_options() -> EngineOptions:
    """The options a backward started now would run with."""
    options = engine_options_override.get() or _DEFAULT
    if not multithreading.get():  # see set_multithreading_enabled
        return replace(options, offload="never")
    return options


def is_multithreading_enabled() -> bool:
    """Whether backwards started in this context may run kernels in other threads."""
    return multithreading.get()


class set_multithreading_enabled(_GradModeContext):
    """Enable or disable multithreaded backward (mirrors PyTorch's).

    PyTorch's engine runs the backward on per-device worker threads; with
    ``mode=False`` it runs on the calling thread instead.  agrad's equivalent
    of those threads is the executor its engine offloads large kernels to
    (Note [Offload threshold]): with ``mode=False`` every node of a backward
    started in this context runs on the thread that drives the backward (the
    event loop's, or the caller's for the blocking twins), as with
    ``engine_options(offload="never")``; ``mode=True`` restores the default.
    Like grad mode it is set at once when called as a function, undone at
    the end of a ``with`` block, and scoped to the current context (thread or
    asyncio task), and it also decorates functions.

    Args:
        mode: whether backwards may use other threads (``True``, the default).

    Example::

        >>> with agrad.autograd.set_multithreading_enabled(False):
        ...     agrad.autograd.is_multithreading_enabled()
        False
    """

    def __init__(self, mode: bool) -> None:
        super().__init__()
        self.mode = bool(mode)
        self._prev_mode = multithreading.get()
        multithreading.set(self.mode)

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc: object) -> None:
        multithreading.set(self._prev_mode)

    def clone(self) -> "set_multithreading_enabled":
        return self.__class__(self.mode)

    def __call__(self, fn: F) -> F:
        # As a decorator the constructor's immediate effect is undone, as for
        # set_grad_enabled: the mode applies only while the function runs
        # (PyTorch leaves it set, which no decorator means).
        multithreading.set(self._prev_mode)
        return super().__call__(fn)


@contextmanager
def engine_options(*, time_slice: float | None = None, offload: OffloadMode | None = None,
                   offload_threshold: int | None = None, busy_offload_threshold: int | None = None,
                   max_recursion_depth: int | None = None) -> Iterator[EngineOptions]:
    """Set how backwards started inside the block are scheduled (agrad only).

    Args:
        time_slice: seconds of node execution after which an awaited backward
            gives the event loop a turn (default 0.0005).  Shorter keeps other
            tasks more responsive; longer costs fewer loop round trips.
        offload: where node kernels run.  ``"auto"`` (default): a node whose
            arrays hold at least ``offload_threshold`` elements runs in an
            executor thread, smaller ones inline on the loop; ``"never"``:
            every node inline; ``"always"``: every node that may leave the loop
            thread does.  A node class can pin itself either way (its
            ``offload`` attribute).  The blocking twins always run inline.
        offload_threshold: elements (gradients plus saved tensors) from which
            ``"auto"`` offloads a node (default 2097152).
        busy_offload_threshold: the same while other backwards or cooperative
            calls wait for the loop's CPU worker (default 262144): the loop is
            busy, so kernels it can hand to another core go there (Note
            [Offloading when busy]).
        max_recursion_depth: how many reentrant backwards (a backward started
            inside a node's backward) nest on one stack before the next one
            runs on a fresh stack: a new task when awaited, a new thread when
            blocking (default 60, PyTorch's limit).  Nesting deeper than this
            is fine; it is only spread over more stacks.

    Only the arguments given change; the previous options return at the end
    of the block.  The options live in a context variable: each asyncio or
    trio task started inside the block inherits them, and a task beside it
    keeps its own.

    Example::

        >>> with agrad.autograd.graph.engine_options(offload="never"):
        ...     pass  # backwards awaited here run every kernel on the loop
    """
    old = engine_options_override.get() or _DEFAULT
    changes: dict[str, object] = {}
    if time_slice is not None:
        if not time_slice > 0:
            raise ValueError(f"time_slice must be a positive number of seconds, got {time_slice!r}")
        changes["time_slice"] = float(time_slice)
    if offload is not None:
        if offload not in _OFFLOAD_MODES:
            raise ValueError(f"offload must be one of {', '.join(map(repr, _OFFLOAD_MODES))}, got {offload!r}")
        changes["offload"] = offload
    for name, value in (("offload_threshold", offload_threshold), ("busy_offload_threshold", busy_offload_threshold)):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative int, got {value!r}")
            changes[name] = value
    if max_recursion_depth is not None:
        if isinstance(max_recursion_depth, bool) or not isinstance(max_recursion_depth, int) \
                or max_recursion_depth < 1:
            raise ValueError(f"max_recursion_depth must be a positive int, got {max_recursion_depth!r}")
        changes["max_recursion_depth"] = max_recursion_depth
    new = replace(old, **changes)  # type: ignore[arg-type]  # changes: each value checked above for its field
    token = engine_options_override.set(new)
    try:
        yield new
    finally:
        engine_options_override.reset(token)


def _default_interop_threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


_interop_threads = _default_interop_threads()


def get_num_interop_threads() -> int:
    """How many node kernels may run in executor threads at once, per event loop.

    Defaults to the number of CPUs this process may use.
    """
    return _interop_threads


def set_num_interop_threads(num: int) -> None:
    """Bound the node kernels running in executor threads at once, per event loop.

    Mirrors ``torch.set_num_interop_threads`` (PyTorch's pool for running
    independent ops in parallel).  Unlike PyTorch, it may be called at any
    time: kernels already running finish, and new ones start only while fewer
    than ``num`` run.
    """
    global _interop_threads
    if isinstance(num, bool) or not isinstance(num, int) or num < 1:
        raise RuntimeError(f"Expected positive number of threads, got {num!r}")
    _interop_threads = num
