"""GraphTask: the state of one backward/grad call, and its run loop.

A sans-I/O core: :meth:`GraphTask.run` is a generator holding every state
transition of the backward as plain synchronous code.  It yields a request
(``_requests.py``) only to ask its driver for what it cannot do itself: await
an ``async def backward``, run a kernel in a thread, give the loop a turn.
The async driver and the blocking twin (``_drivers.py``) answer differently;
the logic exists once.

Mapping to PyTorch's ``engine.cpp``: ``dependencies``, ``not_ready``,
``exec_info``, ``captured``, ``keep_graph`` and ``reentrant_depth`` are
GraphTask's fields of the same names (their traversal in
``_dependencies.py``); ``evaluate_function``'s steps are named in
:meth:`GraphTask._execute` and :meth:`GraphTask._complete`: pre-hooks
(``_hooks.py``), call (inline, in a kernel thread by the offload rule of
``_offload.py``, or on a device worker), post-hooks, release, validate and
route (``_input_buffer.py``).  What the backward will write to ``.grad`` is
staged in ``_staged_grads.py``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Coroutine, Generator, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from agrad._ambient import anomaly_check_nan, anomaly_enabled, current_graph_task, grad_enabled
from agrad._backends import on
from agrad._device import CPU
from agrad._engine._dependencies import ExecInfo, compute_dependencies, init_to_execute, reaches
from agrad._engine._hooks import run_post_hooks, run_pre_hooks
from agrad._engine._input_buffer import accumulate, check_count, check_nan, conform, release
from agrad._engine._offload import (
    Outcome,
    goes_to_thread,
    kernel_job,
    leaves,
    node_device,
    offload_thresholds,
    row_block_helpers,
)
from agrad._engine._options import EngineOptions
from agrad._engine._pool import InFlight
from agrad._engine._ready_queue import ReadyQueue
from agrad._engine._requests import DRAIN, FINISH, SLICE_SPENT, WAIT, DeviceIdle, DeviceJob, Request, RunKernel
from agrad._engine._slices import clock
from agrad._engine._staged_grads import StagedGrads
from agrad._graph._anomaly import run_as_parent, warn_error_detected
from agrad._graph._node import Edge, Node
from agrad._graph._saved_hooks import restore_saved_hooks, saved_hooks_state

if TYPE_CHECKING:
    from agrad._engine._slices import Budget

__all__ = ["GraphTask"]

_ndarray = np.ndarray


class GraphTask:
    """One backward or grad call: dependencies, buffers, captures, staged gradients."""

    __slots__ = (
        "keep_graph", "create_graph", "parent", "reentrant_depth", "stack_depth", "dependencies", "not_ready",
        "exec_info", "captured", "grads", "stage", "ready", "final_callbacks", "in_flight", "deliver",
        "stopped", "_inbox", "_sums", "_devices", "_root", "__weakref__",
    )

    def __init__(self, keep_graph: bool, create_graph: bool, parent: GraphTask | None = None) -> None:
        self.keep_graph = keep_graph
        self.create_graph = create_graph
        # A backward started while ``parent``'s nodes run is reentrant (Note
        # [Reentrant backward]): one level deeper than its parent, and on the
        # same stack unless its driver spills it (Note [Reentrant depth]).
        self.parent = parent
        self.reentrant_depth: int = 0 if parent is None else parent.reentrant_depth + 1
        self.stack_depth: int = 0 if parent is None else parent.stack_depth + 1
        self.dependencies: dict[Node, int] = {}  # only counts above one: Note [Counting dependencies]
        self.not_ready: dict[Node, list[Any]] = {}
        self._sums: set[int] = set()  # the engine's own sums in not_ready (Note [Accumulating in place])
        self.exec_info: dict[Node, ExecInfo] | None = None
        self.captured: list[Any] = []
        self.grads: StagedGrads = StagedGrads(create_graph, None if parent is None else parent.grads)
        # AccumulateGrad nodes and retain_grad stage here (Note [Staged gradients]).
        self.stage = self.grads.stage
        self.ready = ReadyQueue()
        self.final_callbacks: list[Callable[[], None]] = []
        # Kernels away in threads or on device workers (Note [Offloaded kernels]):
        # their outcomes land in the inbox, from any thread, through ``deliver``.
        self.in_flight = InFlight(self.reentrant_depth)
        self._inbox: deque[Outcome] = deque()
        self.deliver: Callable[[Outcome], None] = self._inbox.append
        # Devices other than the CPU this task sent work to; None until a gradient
        # for another device is routed, so CPU graphs never look (Note [Device workers]).
        self._devices: set[Any] | None = None
        self.stopped = False  # aborted: device workers drop its queued jobs
        self._root: Node | None = None

    @property
    def committed(self) -> bool:
        """Whether ``.grad`` changed: the backward has succeeded (Note [After the commit])."""
        return self.grads.committed

    def note_if_committed(self, exc: BaseException) -> None:
        """Tell the caller, on ``exc``, that the gradients of this top-level
        backward stay committed (Note [After the commit])."""
        self.grads.note_if_committed(exc)

    # -- setup ---------------------------------------------------------------
    def start(self, root: Node, root_buffer: list[Any], outputs: Sequence[Edge] | None,
              accumulate_grad: bool) -> None:
        """Count dependencies, mark what must run, and queue the root."""
        self._root = root  # for will_execute
        min_topo = 0
        if outputs is not None:
            min_topo = min((e.function.topological_nr for e in outputs), default=0)
            self.exec_info = init_to_execute(root, outputs, accumulate_grad, min_topo)
            self.captured = [None] * (0 if accumulate_grad else len(outputs))
        compute_dependencies(root, min_topo, self.dependencies)
        for g in root_buffer:
            if g is not None:
                self.grads.not_own(g)
        if node_device(root) is not CPU:
            self._devices = set()  # Note [Device workers]
        self.ready.push(root, root_buffer, self.reentrant_depth)

    def needed(self, fn: Node) -> bool:
        """Whether ``fn`` should run (or capture) in this task."""
        if self.exec_info is None:
            return True
        e = self.exec_info.get(fn)
        return e is not None and e.should_run()

    def will_execute(self, fn: Node) -> bool:
        """Whether ``fn`` runs in this task (PyTorch's ``_will_engine_execute_node``):
        it is on a path to ``inputs``, or, without them, reachable from the root."""
        if self.exec_info is not None:
            return self.needed(fn)
        return self._root is not None and reaches(self._root, fn)

    # -- execution -------------------------------------------------------------
    def run(self, options: EngineOptions | None, budget: Budget | None = None) -> Generator[Request, Any, None]:
        """Execute the graph, then commit (see Note [Staged gradients]).

        ``options`` says how to schedule: the offload policy; None (the
        blocking twin) runs every kernel inline.  ``budget`` is the CPU
        worker's: the task yields :data:`SLICE_SPENT` once the clock passes
        ``budget.deadline`` (Note [Time slices]); None never yields a slice.
        Each request says what its driver answers (``_requests.py``).  A
        driver that is cancelled or fails while waiting throws the exception
        in; the task then aborts, leaving every ``.grad`` as it was.
        """
        try:
            with self._ambient():
                yield from self._execute(options, budget)
                yield FINISH  # Note [The caller commits]
                self._root = None  # the graph is the caller's to keep, not a finished task's
                self.grads.commit()
                self.grads.run_post_accumulate_hooks()
                while self.final_callbacks:
                    self.final_callbacks.pop(0)()
        except BaseException:
            if self.committed:  # Note [After the commit]: nothing to undo
                raise
            self.abort()
            # Note [Kernels of a stopped task]
            # ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
            # A kernel already running in a thread cannot be stopped.  The task
            # waits for it (shielded, so a cancellation cannot cut the wait
            # short), discards its result and only then raises: when a failed or
            # cancelled backward returns, nothing of it runs anywhere and its
            # graph is garbage once the caller lets go (anyio's ``to_thread``
            # makes the same choice by default).  The wait is bounded by the
            # longest single kernel in flight.  Results that reached the inbox
            # unread (a kernel that ended just before the task stopped, or while
            # it waited) are dropped with it: a kernel thread may still hold the
            # task for a moment after the loop heard from it, and must not hold
            # its graph through them.
            while self.in_flight.outstanding:
                yield DRAIN
            self._inbox.clear()
            raise

    @contextmanager
    def _ambient(self) -> Iterator[None]:
        """While nodes run, grad mode is ``create_graph`` (as in PyTorch) and this
        task is the current one (for queue_callback and reentrant depth).

        Afterwards the saved-tensor hooks are as they were before: PyTorch runs
        nodes under the thread-local state captured with the graph task, so an
        unpack hook that enters or leaves ``saved_tensors_hooks`` changes
        nothing for the caller."""
        mode = grad_enabled.get()
        outer = current_graph_task.get()
        hooks = saved_hooks_state()
        grad_enabled.set(self.create_graph)
        current_graph_task.set(self)
        try:
            yield
        finally:
            grad_enabled.set(mode)
            current_graph_task.set(outer)
            restore_saved_hooks(hooks)

    def _execute(self, options: EngineOptions | None, budget: Budget | None) -> Generator[Request, Any, None]:
        """The run loop: drain finished kernels, else run the next ready node."""
        ready = self.ready
        inbox = self._inbox
        in_flight = self.in_flight
        keep_graph = self.keep_graph
        anomaly = anomaly_enabled.get()
        checks_nan = anomaly and anomaly_check_nan.get()
        thresholds = None if options is None else offload_thresholds(options)  # Note [Offload threshold]
        parked: RunKernel | None = None  # a kernel waiting for a slot
        while True:
            if inbox:
                steps, failure, dev = inbox.popleft()
                if failure is not None:
                    _annotate(failure[1], failure[0])
                    raise failure[1]
                last = len(steps) - 1
                with on(dev, engine=True):  # sums into buffers on dev's stream (Note [Engine streams])
                    for i, (node, inputs, outputs) in enumerate(steps):
                        try:
                            self._complete(node, inputs, outputs, keep_graph, checks_nan,
                                           fused=steps[i + 1][0] if i < last else None)
                        except Exception as exc:
                            _annotate(exc, node)
                            raise
            elif parked is not None:
                if (yield parked):
                    parked = None
                else:
                    yield WAIT
                continue
            elif (popped := ready.lone) is not None or (popped := ready.pop()) is not None:
                ready.lone = None  # taken (Note [The lone ready node])
                _, node, inputs = popped
                try:
                    # pre-hooks
                    if (node._tensor_pre_hooks is not None or node._retains_grad is not None
                            or node._pre_hooks is not None or self.exec_info is not None):
                        inputs = run_pre_hooks(self, node, inputs)
                        if inputs is None:
                            continue
                    # call: on the node's device's worker, in a kernel thread, or here
                    if self._devices is not None and not node.is_async:  # Note [Device workers]
                        dev = node_device(node)
                        if dev is not CPU:
                            yield self._device_job(node, inputs, checks_nan, dev)
                            continue
                    # goes_to_thread says no to an unpinned node below both thresholds:
                    # most nodes skip the call (~3% of a chain of small nodes).
                    if thresholds is not None and (node.offload is not None or node._work >= thresholds[1]) and \
                            goes_to_thread(node._work, node.offload, thresholds, busy := bool(budget and budget.busy)):
                        job = RunKernel(kernel_job(self, node, inputs, checks_nan, CPU),
                                        row_block_helpers(node, inputs, busy))
                        if not (yield job):
                            parked = job
                            yield WAIT
                        continue
                    outputs = run_as_parent(node, inputs, self) if anomaly else node.apply(inputs, self)
                    if node.is_async:
                        coroutine = cast(Coroutine[Any, Any, Sequence[Any]], outputs)
                        try:
                            outputs = yield coroutine
                        finally:
                            # A no-op once the driver awaited it; if an interrupt came
                            # first, no "coroutine was never awaited" later.
                            coroutine.close()
                    self._complete(node, inputs, outputs, keep_graph, checks_nan)
                except Exception as exc:
                    _annotate(exc, node)
                    raise
            elif in_flight.outstanding:
                yield WAIT
                continue
            elif self._devices:  # done, once the devices' kernels are (Note [Engine streams])
                for dev in self._devices:
                    yield DeviceIdle(dev)
                self._devices.clear()
                continue
            else:
                return
            if budget is not None and clock() >= budget.deadline:
                yield SLICE_SPENT

    def _complete(self, node: Node, inputs: list[Any] | None, outputs: Sequence[Any], keep_graph: bool,
                  checks_nan: bool, fused: Node | None = None) -> None:
        """After a node's kernel: post-hooks, release its saved tensors, then
        validate each output gradient and route it along its edge, queueing the
        nodes that become ready.

        Validating conforms each gradient to the input it flows to: summed down
        to that input's shape (this is where broadcasting is undone, once for
        all ops) and cast to its dtype, as PyTorch's ``validate_outputs`` does.
        ``fused`` is the successor that already ran after it in the same thread
        (Note [Offloaded chains]): its one dependency is met, there is nothing
        to route.  This is the engine's hottest function: in the common case
        (no hooks, a successor with one input that becomes the only ready
        node) it makes no call at all.
        """
        if node._post_hooks is not None:  # post-hooks
            outputs = run_post_hooks(node, inputs, outputs)  # type: ignore[arg-type]  # None: chained, no post-hooks
        # Release: a read-only check inline, and the call only for a node that
        # holds saved tensors (Note [Saved values]), as release_variables frees.
        if not keep_graph and type(node._saved) is list:
            node.release_variables()
        if checks_nan:
            check_nan(node, outputs)
        if fused is not None:
            self.dependencies.pop(fused, None)  # its last dependency (Note [Counting dependencies])
            return
        edges = node.next_edges
        if len(outputs) != len(edges):
            check_count(node, outputs)
        deps = self.dependencies
        not_ready = self.not_ready
        ready = self.ready
        i = -1
        for edge in edges:
            i += 1
            if edge is None:
                continue
            fn, input_nr = edge
            g = outputs[i]
            if g is not None:  # validate
                shape, dtype, dev = fn._input_meta[input_nr]
                data = g._data
                if (data.shape != shape or (data.dtype is not dtype and data.dtype != dtype)
                        or dev is not CPU or type(data) is not _ndarray):
                    if dev is not CPU and self._devices is None:
                        self._devices = set()  # Note [Device workers]: the task now routes by device
                    g = conform(g, shape, dtype, dev, node, i)
            # route
            remaining = deps.pop(fn, 1) - 1 if deps else 0  # Note [Counting dependencies]
            if remaining:
                deps[fn] = remaining
            buffer = not_ready.get(fn) if not_ready else None
            if buffer is None:
                if self.exec_info is not None and not self.needed(fn):
                    continue
                if not remaining and len(fn._input_meta) == 1:  # a node with one input, complete now
                    if ready.lone is None and not ready.heap:  # Note [The lone ready node]
                        ready.lone = (self.reentrant_depth, fn, [g])
                    else:
                        ready.push(fn, [g], self.reentrant_depth)
                    continue
                buffer = [None] * len(fn._input_meta)
                if remaining:
                    not_ready[fn] = buffer
            elif not remaining:
                del not_ready[fn]
            if g is not None:
                if dev is CPU:
                    accumulate(buffer, input_nr, g, self._sums, self.create_graph, remaining > 0)
                else:  # on the consumer's device and stream, as PyTorch's InputBuffer::add
                    with on(dev, engine=True):
                        accumulate(buffer, input_nr, g, self._sums, self.create_graph, remaining > 0)
            if not remaining:
                if self._sums:
                    release(buffer, self._sums)
                ready.push(fn, buffer, self.reentrant_depth)

    def _device_job(self, node: Node, inputs: list[Any], checks_nan: bool, dev: Any) -> DeviceJob:
        devices = self._devices
        assert devices is not None
        first = dev not in devices
        devices.add(dev)
        return DeviceJob(dev, kernel_job(self, node, inputs, checks_nan, dev), node,
                         self.reentrant_depth, first, leaves(node, dev))

    def abort(self) -> None:
        """Drop all pending work and staged gradients, and undo the commits of
        the reentrant backwards nested in this one: the backward changes nothing."""
        self.stopped = True
        self._root = None
        self.ready.clear()
        self.not_ready.clear()
        self._sums.clear()
        self.dependencies.clear()
        self.final_callbacks.clear()
        self.captured = []
        self.grads.rollback()


def _annotate(exc: BaseException, node: Node) -> None:
    """Name the failing node on the exception (once, at the innermost node)."""
    if getattr(exc, "_agrad_node", None) is None:
        # A documented custom attribute on a foreign object (the exception is not
        # agrad's class), read back by getattr above: mypy cannot know it.
        exc._agrad_node = node.name()  # type: ignore[attr-defined]  # agrad's own mark on a foreign exception
        if anomaly_enabled.get():
            warn_error_detected(node)
        exc.add_note(f"(raised while running the backward of {node.name()})")
        if node._trace:
            exc.add_note("Traceback of the forward call that created the node:\n" + "".join(node._trace))
