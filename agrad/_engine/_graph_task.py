"""GraphTask: the state of one backward/grad call, and its transitions.

This is a sans-I/O core: :meth:`GraphTask.run` is a generator holding every
state transition of the backward (pop a ready node, run its hooks and
backward, route its gradients, decide what becomes ready) as plain
synchronous code.  It yields only to ask its driver for something it cannot
do itself: await an ``async def backward``, or give the event loop a turn.
The async driver and the blocking twin (``_drivers.py``) answer those requests
differently; the logic exists once.

Mapping to PyTorch's ``engine.cpp``: ``dependencies``, ``not_ready``,
``exec_info``, ``captured``, ``keep_graph`` and ``reentrant_depth`` are
GraphTask's fields of the same names; ``_pre`` + ``node.apply`` + ``_post`` are
``evaluate_function``/``call_function``; ``route`` is the loop at the end of
``evaluate_function`` with ``validate_outputs`` folded in; the input buffers
are plain lists summed in place of ``InputBuffer::add``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Generator, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np

from agrad._engine._ready_queue import ReadyQueue
from agrad._grad_mode import grad_enabled
from agrad._graph._anomaly import anomaly_check_nan, anomaly_enabled
from agrad._graph._node import Edge, Node
from agrad._tensor import Tensor

# Note [Staged gradients]
# ~~~~~~~~~~~~~~~~~~~~~~~
# A backward never writes ``.grad`` while it runs.  AccumulateGrad nodes and
# retain_grad hooks *stage* their gradient on the graph task; when the last
# node has run, ``commit`` applies every staged gradient in one step (under
# ``_COMMIT_LOCK``, so blocking backwards on other threads cannot interleave).
# A backward that raises or is cancelled is simply dropped with its staged
# gradients, so ``.grad`` is exactly what it was before the call, and two
# concurrent backwards into shared leaves sum exactly, as if run one after
# the other.  Post-accumulate-grad hooks, which observe ``.grad``, run at the
# commit.  Tensor hooks (``register_hook``) still run during the backward,
# because they may change the gradient that flows on.
_COMMIT_LOCK = threading.Lock()

# Note [Time slices]
# ~~~~~~~~~~~~~~~~~~
# The async driver runs ready nodes back to back and yields to the event loop
# only when a time slice is spent, never per node: a checkpoint costs a few
# microseconds, as much as a small node, so yielding per node would double the
# cost of a chain of small ops.  A slice of a few milliseconds keeps the loop
# responsive (other requests wait at most one slice) at negligible overhead.
TIME_SLICE = 0.002

_clock = time.perf_counter

# The graph task whose nodes are running in this context: queue_callback
# appends to it, and a backward started from inside a node's backward is a
# reentrant one, one level deeper.  See Note [Ambient state in contextvars].
current_graph_task: ContextVar[GraphTask | None] = ContextVar("agrad_current_graph_task", default=None)


class SliceSpent:
    """Request yielded by :meth:`GraphTask.run`: let the event loop run."""


SLICE_SPENT = SliceSpent()


class ExecInfo:
    """Whether a node must run for this task, and which of its inputs to capture."""

    __slots__ = ("needed", "captures")

    def __init__(self) -> None:
        self.needed = False
        self.captures: list[tuple[int, int]] | None = None  # (input_nr, output index)


class GraphTask:
    """One backward or grad call: dependencies, buffers, captures, staged gradients."""

    __slots__ = (
        "keep_graph", "create_graph", "reentrant_depth", "dependencies", "not_ready", "exec_info",
        "captured", "staged", "ready", "final_callbacks", "_owned", "__weakref__",
    )

    def __init__(self, keep_graph: bool, create_graph: bool, reentrant_depth: int = 0) -> None:
        self.keep_graph = keep_graph
        self.create_graph = create_graph
        self.reentrant_depth = reentrant_depth
        self.dependencies: dict[Node, int] = {}
        self.not_ready: dict[Node, list[Any]] = {}
        self.exec_info: dict[Node, ExecInfo] | None = None
        self.captured: list[Any] = []
        self.staged: dict[int, list[Any]] = {}
        self.ready = ReadyQueue()
        self.final_callbacks: list[Any] = []
        # Ids of arrays the caller handed in (root gradients), and of memory
        # already stored as a .grad: never stored again without a copy.  See commit().
        self._owned: set[int] = set()

    # -- setup ---------------------------------------------------------------
    def start(self, root: Node, root_buffer: list[Any], outputs: Sequence[Edge] | None,
              accumulate_grad: bool) -> None:
        """Count dependencies, mark what must run, and queue the root."""
        min_topo = 0
        if outputs is not None:
            min_topo = min((e.function.topological_nr for e in outputs), default=0)
            self._init_to_execute(root, outputs, accumulate_grad, min_topo)
        self._compute_dependencies(root, min_topo)
        for g in root_buffer:
            if g is not None:
                self._owned.add(id(g._data))
        self.ready.push(root, root_buffer, self.reentrant_depth)

    def _compute_dependencies(self, root: Node, min_topo: int) -> None:
        deps = self.dependencies
        seen = {root}
        stack = [root]
        while stack:
            fn = stack.pop()
            if fn.topological_nr < min_topo:
                continue
            for edge in fn.next_edges:
                if edge is not None:
                    nxt = edge[0]
                    deps[nxt] = deps.get(nxt, 0) + 1
                    if nxt not in seen:
                        seen.add(nxt)
                        stack.append(nxt)

    def _init_to_execute(self, root: Node, outputs: Sequence[Edge], accumulate_grad: bool,
                         min_topo: int) -> None:
        """Mark the nodes on a path from the root to an output (PyTorch's init_to_execute)."""
        info: dict[Node, ExecInfo] = {}
        for idx, (fn, input_nr) in enumerate(outputs):
            entry = info.setdefault(fn, ExecInfo())
            if accumulate_grad:
                entry.needed = True
            else:
                if entry.captures is None:
                    entry.captures = []
                entry.captures.append((input_nr, idx))
        self.captured = [None] * (0 if accumulate_grad else len(outputs))
        self.exec_info = info
        info.setdefault(root, ExecInfo()).needed = True

        def should_execute(fn: Node) -> bool:
            e = info.get(fn)
            return e is not None and (e.needed or e.captures is not None)

        # Iterative post-order walk: a node is needed if any child should run.
        seen: set[Node] = set()
        stack: list[tuple[Node, Any]] = [(root, iter(root.next_edges))]
        while stack:
            fn, children = stack[-1]
            child = None
            for edge in children:
                if edge is None:
                    continue
                if edge[0] in seen:
                    if should_execute(edge[0]):
                        info.setdefault(fn, ExecInfo()).needed = True
                    continue
                seen.add(edge[0])
                if edge[0].topological_nr < min_topo:
                    continue
                child = edge[0]
                break
            if child is not None:
                stack.append((child, iter(child.next_edges)))
            else:
                stack.pop()
                if stack and should_execute(fn):
                    info.setdefault(stack[-1][0], ExecInfo()).needed = True

    def needed(self, fn: Node) -> bool:
        """Whether ``fn`` should run (or capture) in this task."""
        if self.exec_info is None:
            return True
        e = self.exec_info.get(fn)
        return e is not None and (e.needed or e.captures is not None)

    # -- execution -------------------------------------------------------------
    def run(self, time_slice: float | None) -> Generator[Any, Any, None]:
        """Execute the graph, then commit (see Note [Staged gradients]).

        Yields :data:`SLICE_SPENT` when ``time_slice`` seconds have passed
        (never, if ``time_slice`` is None), and the coroutine of an ``async def
        backward``, expecting its result sent back.  A driver that is cancelled
        or fails while waiting throws the exception in; the task then aborts,
        leaving every ``.grad`` as it was.
        """
        try:
            with self._ambient():
                yield from self._execute(time_slice)
                self.finish()
        except BaseException:
            self.abort()
            raise

    @contextmanager
    def _ambient(self) -> Iterator[None]:
        """While nodes run, grad mode is ``create_graph`` (as in PyTorch) and this
        task is the current one (for queue_callback and reentrant depth)."""
        mode = grad_enabled.get()
        outer = current_graph_task.get()
        grad_enabled.set(self.create_graph)
        current_graph_task.set(self)
        try:
            yield
        finally:
            grad_enabled.set(mode)
            current_graph_task.set(outer)

    def _execute(self, time_slice: float | None) -> Generator[Any, Any, None]:
        ready = self.ready
        pop = ready.pop
        keep_graph = self.keep_graph
        check_nan = anomaly_enabled.get() and anomaly_check_nan.get()
        deadline = _clock() + time_slice if time_slice is not None else None
        while ready:
            node, inputs = pop()
            try:
                if (node._tensor_pre_hooks is not None or node._retains_grad is not None
                        or node._pre_hooks is not None or self.exec_info is not None):
                    inputs = self._pre(node, inputs)
                    if inputs is None:
                        continue
                outputs = node.apply(inputs, self)
                if node.is_async:
                    outputs = yield outputs
                if node._post_hooks is not None:
                    outputs = self._post_hooks(node, inputs, outputs)
                if not keep_graph:
                    node.release_variables()
                if check_nan:
                    _check_nan(node, outputs)
                if outputs:
                    self.route(node, outputs)
            except Exception as exc:
                _annotate(exc, node)
                raise
            if deadline is not None and _clock() >= deadline:
                yield SLICE_SPENT
                deadline = _clock() + time_slice  # type: ignore[operator]

    def _pre(self, node: Node, inputs: list[Any]) -> list[Any] | None:
        """Tensor pre-hooks, retain_grad, captures and node pre-hooks; None if
        the node only captures (PyTorch: evaluate_function before call_function)."""
        if node._tensor_pre_hooks is not None:
            for nr, hooks in node._tensor_pre_hooks.items():
                for hook in list(hooks.values()):
                    if inputs[nr] is not None:
                        new = hook(inputs[nr])
                        if new is not None:
                            inputs[nr] = _check_hook_result(new, inputs[nr], node)
        if node._retains_grad is not None:
            for nr, ref in node._retains_grad.items():
                t = ref()
                if t is not None and t._grad_fn is node and inputs[nr] is not None:
                    self.stage(t, inputs[nr], is_leaf=False)
        if self.exec_info is not None:
            info = self.exec_info.get(node)
            if info is not None and info.captures is not None:
                for input_nr, idx in info.captures:
                    self.captured[idx] = inputs[input_nr]
            if info is None or not info.needed:
                return None
        if node._pre_hooks is not None:
            for hook in list(node._pre_hooks.values()):
                new = hook(tuple(inputs))
                if new is not None:
                    inputs = list(new)
        return inputs

    @staticmethod
    def _post_hooks(node: Node, inputs: list[Any], outputs: Sequence[Any]) -> Sequence[Any]:
        for hook in list(node._post_hooks.values()):  # type: ignore[union-attr]
            new = hook(tuple(outputs), tuple(inputs))
            if new is not None:
                outputs = list(new)
        return outputs

    def route(self, node: Node, outputs: Sequence[Any]) -> None:
        """Send each output gradient along its edge; queue nodes that become ready.

        Each gradient is first conformed to the input it flows to: summed down
        to that input's shape (this is where broadcasting is undone, once for
        all ops) and cast to its dtype, as PyTorch's ``validate_outputs`` does.
        """
        edges = node.next_edges
        if len(outputs) != len(edges):
            raise RuntimeError(
                f"function {node.name()} returned an incorrect number of gradients "
                f"(expected {len(edges)}, got {len(outputs)})"
            )
        deps = self.dependencies
        not_ready = self.not_ready
        for i, edge in enumerate(edges):
            if edge is None:
                continue
            fn, input_nr = edge
            g = outputs[i]
            if g is not None:
                shape, dtype = fn._input_meta[input_nr]
                data = g._data
                if data.shape != shape or (data.dtype is not dtype and data.dtype != dtype):
                    g = _conform(g, shape, dtype, node, i)
            remaining = deps[fn] - 1
            buffer = not_ready.get(fn)
            if buffer is None:
                if self.exec_info is not None and not self.needed(fn):
                    if remaining:
                        deps[fn] = remaining
                    else:
                        del deps[fn]
                    continue
                buffer = [None] * len(fn._input_meta)
            if g is not None:
                old = buffer[input_nr]
                buffer[input_nr] = g if old is None else old + g
            if remaining:
                deps[fn] = remaining
                not_ready[fn] = buffer
            else:
                del deps[fn]
                not_ready.pop(fn, None)
                self.ready.push(fn, buffer, self.reentrant_depth)

    # -- staging and completion ----------------------------------------------
    def stage(self, variable: Tensor, grad: Tensor, is_leaf: bool) -> None:
        """Record a gradient for ``variable.grad``; see Note [Staged gradients]."""
        entry = self.staged.get(id(variable))
        if entry is None:
            self.staged[id(variable)] = [variable, grad, is_leaf]
        else:
            entry[1] = entry[1] + grad

    def commit(self) -> None:
        """Apply every staged gradient to ``.grad`` (PyTorch's AccumulateGrad rules)."""
        if not self.staged:
            return
        create_graph = self.create_graph
        seen = self._owned
        with _COMMIT_LOCK:
            for variable, grad, is_leaf in self.staged.values():
                if not create_graph:
                    grad = grad.detach()
                old = variable._grad
                if old is None:
                    # Store a gradient as is only if nothing else can see its memory
                    # (PyTorch's AccumulateGrad steals a gradient only when its use
                    # count is 1).  Copied first: a read-only or broadcast array, the
                    # caller's root gradient, memory already stored on another leaf in
                    # this commit, and any retain_grad value (PyTorch clones those).
                    arr = grad._data
                    owner = arr if arr.base is None else arr.base
                    if not is_leaf or not arr.flags.writeable or id(owner) in seen or id(arr) in seen:
                        grad = grad.clone()
                        arr = owner = grad._data
                    seen.add(id(arr))
                    seen.add(id(owner))
                    variable._grad = grad
                elif not create_graph and not old.requires_grad:
                    np.add(old._data, grad._data, out=old._data, casting="unsafe")
                    old._bump_version()
                else:
                    variable._grad = old + grad
        for variable, _, is_leaf in self.staged.values():
            if is_leaf and variable._post_acc_hooks:
                for hook in list(variable._post_acc_hooks.values()):
                    hook(variable)
        self.staged.clear()

    def finish(self) -> None:
        """Commit staged gradients, then run the final callbacks (queue_callback)."""
        self.commit()
        while self.final_callbacks:
            self.final_callbacks.pop(0)()

    def abort(self) -> None:
        """Drop all pending work and staged gradients: the backward changes nothing."""
        self.ready.clear()
        self.not_ready.clear()
        self.dependencies.clear()
        self.staged.clear()
        self.final_callbacks.clear()
        self.captured = []


def _conform(g: Tensor, shape: tuple[int, ...], dtype: np.dtype, node: Node, index: int) -> Tensor:
    if g._data.shape != shape:
        try:
            ok = np.broadcast_shapes(shape, g._data.shape) == g._data.shape
        except ValueError:
            ok = False
        if not ok:
            raise RuntimeError(
                f"Function {node.name()} returned an invalid gradient at index {index} - got "
                f"{list(g._data.shape)} but expected shape compatible with {list(shape)}"
            )
        g = g.sum_to_size(shape)
    if g._data.dtype != dtype:
        g = g.to(dtype)
    return g


def _check_nan(node: Node, outputs: Sequence[Any]) -> None:
    for i, g in enumerate(outputs):
        if g is not None and np.isnan(g._data).any():
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output.")


def _check_hook_result(new: Any, old: Tensor, node: Node) -> Tensor:
    if not isinstance(new, Tensor):
        raise TypeError(f"hook on {node.name()} returned {type(new).__name__}; expected a Tensor or None")
    if new.shape != old.shape:
        raise RuntimeError(
            f"hook on {node.name()} returned a gradient of shape {list(new.shape)}; "
            f"expected {list(old.shape)}"
        )
    return new


def _annotate(exc: BaseException, node: Node) -> None:
    """Name the failing node on the exception (once, at the innermost node)."""
    if getattr(exc, "_agrad_node", None) is None:
        exc._agrad_node = node.name()  # type: ignore[attr-defined]
        exc.add_note(f"(raised while running the backward of {node.name()})")
        if node._trace:
            exc.add_note("Traceback of the forward call that created the node:\n" + "".join(node._trace))
