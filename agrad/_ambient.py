"""Ambient state: every ``ContextVar`` of agrad, and what runs this thread's kernels.

The bottom of the package (it imports nothing of agrad at run time), so that
any layer can read the state without importing the layer that manages it: op
dispatch reads the current graph task and the thread's kernel runner without
importing the engine.  Each variable's meaning and its context managers stay
with the module that manages it (named beside it below).

Note [Ambient state in contextvars]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
PyTorch keeps grad mode in a thread-local.  In asyncio many tasks interleave on
one thread, so a thread-local would leak ``no_grad`` from one request into
another.  Every piece of ambient state in agrad is a ``ContextVar``: each
asyncio task (and each trio task) runs in its own copy of the context, so a
task under ``no_grad`` never changes what a task beside it records.  The
context managers save and restore the previous *value* (not a token), so one
instance may be entered again, nested, or used as a decorator.  The one
thread-local is the kernel runner below: it says which code is running on
this very thread (a greenlet switched in, a kernel thread's job), which no
context copy may carry elsewhere.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agrad._engine._graph_task import GraphTask
    from agrad._engine._options import EngineOptions
    from agrad._graph._saved_hooks import Hooks
    from agrad._tensor import Tensor
    from agrad.autograd.graph import _AllowMutationOnSavedContext

__all__ = [
    "anomaly_check_nan", "anomaly_enabled", "before_in_place", "checkpoint_early_stop", "cooperative_call",
    "current_graph_task", "engine_options_override", "grad_enabled", "inference_enabled", "inside_job", "kernel_runner",
    "kernels_inline", "multithreading", "mutation_on_saved", "outer_saved_hooks", "running_node", "runs_kernels",
    "saved_hooks", "saved_hooks_disabled", "staged_state_dict_copies",
]

# -- recording (agrad/_grad_mode.py, agrad/_graph/) ----------------------------------------
grad_enabled: ContextVar[bool] = ContextVar("agrad_grad_enabled", default=True)
# See Note [Inference tensors] in agrad/_tensor.py.
inference_enabled: ContextVar[bool] = ContextVar("agrad_inference_mode", default=False)
anomaly_enabled: ContextVar[bool] = ContextVar("agrad_anomaly_enabled", default=False)
anomaly_check_nan: ContextVar[bool] = ContextVar("agrad_anomaly_check_nan", default=True)
# The node whose backward runs here, in anomaly mode (Note [Anomaly parents], _graph/_anomaly.py).
running_node: ContextVar[Any] = ContextVar("agrad_running_node", default=None)
# Called with a tensor about to be written in place (Note [Mutating saved tensors], _graph/_node.py).
before_in_place: ContextVar[Callable[[Tensor], None] | None] = ContextVar("agrad_before_in_place", default=None)
# Saved-tensor hooks (_graph/_saved_hooks.py): the pair in force, the pairs that
# entered contexts replaced (innermost last), and the message of the innermost
# disable_saved_tensors_hooks (None while enabled).
saved_hooks: ContextVar[Hooks | None] = ContextVar("agrad_saved_tensors_hooks", default=None)
outer_saved_hooks: ContextVar[tuple[Hooks | None, ...]] = ContextVar("agrad_outer_saved_tensors_hooks", default=())
saved_hooks_disabled: ContextVar[str | None] = ContextVar("agrad_saved_tensors_hooks_disabled", default=None)

# -- the engine (agrad/_engine/) -------------------------------------------------------------
# The graph task whose nodes are running in this context: queue_callback
# appends to it, and a backward started from inside a node's backward is a
# reentrant one, one level deeper (Note [Reentrant backward]).
current_graph_task: ContextVar[GraphTask | None] = ContextVar("agrad_current_graph_task", default=None)
# engine_options()'s value; None: the defaults (_engine/_options.py).
engine_options_override: ContextVar[EngineOptions | None] = ContextVar("agrad_engine_options", default=None)
multithreading: ContextVar[bool] = ContextVar("agrad_multithreading_enabled", default=True)
# True in the context a cooperative call runs in: calls started there are part of it (Note [Admission]).
inside_job: ContextVar[bool] = ContextVar("agrad_inside_job", default=False)

# -- the public API's modes -------------------------------------------------------------------
mutation_on_saved: ContextVar[_AllowMutationOnSavedContext | None] = ContextVar(
    "agrad_allow_mutation_on_saved_tensors", default=None)
# The innermost set_checkpoint_early_stop's value, None outside any (agrad/utils/checkpoint.py).
checkpoint_early_stop: ContextVar[bool | None] = ContextVar("agrad_checkpoint_early_stop", default=None)
# The copies a running Module.load_state_dict has checked and not yet made
# (Note [Loading is all or nothing], agrad/nn/modules/module.py).
staged_state_dict_copies: ContextVar[list[Callable[[], None]] | None] = ContextVar(
    "agrad_staged_state_dict_copies", default=None)


# -- what runs this thread's kernels ------------------------------------------------------------
# Op dispatch hands a CPU kernel to this thread's *runner*, if it has one, and
# the blocking twins ask :func:`cooperative_call` whether they run inside an
# ``agrad.cooperative`` call.  A runner is a cooperative call while its
# greenlet is switched in (Note [Cooperative calls] in
# ``_engine/_cooperative.py``), or a ``RowBlocks`` while a kernel thread runs
# a job that may split its products (Note [Products in row blocks] in
# ``_engine/_row_blocks.py``).
class _Local(threading.local):
    # The running cooperative call (a ``_cooperative._Cooperative``): set only
    # while its greenlet runs, so kernel threads and the worker itself see None.
    job: Any = None
    # What runs this thread's CPU kernels (``forward(op, arrays, attrs)``): the
    # cooperative call, or a kernel thread's ``RowBlocks``; None: the op itself.
    runner: Any = None


_local = _Local()

# How many threads have a runner now.  Op dispatch reads the thread-local
# runner (a few hundred instructions) only when this is non-zero, so ops
# outside cooperative calls and split kernels pay one global read.  Kernel
# threads and loops' threads change it, so under a lock: a lost update could
# leave it at 0 while a runner is set, and that runner would be skipped.
running = 0
_lock = threading.Lock()


@contextmanager
def runs_kernels(runner: Any, job: Any = None) -> Iterator[None]:
    """Make ``runner`` run this thread's CPU kernels inside the block (and ``job``
    the cooperative call running here, if it is one)."""
    global running
    with _lock:
        running += 1
    _local.runner, _local.job = runner, job
    try:
        yield
    finally:
        _local.runner = _local.job = None
        with _lock:
            running -= 1


@contextmanager
def kernels_inline() -> Iterator[None]:
    """Run this thread's CPU kernels in the ops themselves inside the block, whatever
    runner it has: for code that must not pause, as a cooperative call's kernels may
    (Note [A commit never pauses] in ``_engine/_staged_grads.py``)."""
    runner = _local.runner
    _local.runner = None
    try:
        yield
    finally:
        _local.runner = runner


def kernel_runner() -> Any:
    """What runs this thread's CPU kernels, if not the op itself (read ``running`` first)."""
    return _local.runner


def cooperative_call() -> Any:
    """The cooperative call whose greenlet runs on this thread now, if any."""
    return _local.job if running else None
