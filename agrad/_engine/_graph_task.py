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
GraphTask's fields of the same names; ``_pre`` + ``node.apply`` +
``_complete`` are ``evaluate_function``/``call_function``, ``_complete``
ending with the loop at the end of ``evaluate_function`` with
``validate_outputs`` folded in; the input buffers are plain lists summed in
place of ``InputBuffer::add``.
"""

from __future__ import annotations

import contextvars
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import numpy as np

from agrad._backends import device_of, on, writeable
from agrad._device import CPU
from agrad._dtype import SCALAR_TYPE_NAMES
from agrad._engine._interrupts import deferred_interrupts
from agrad._engine._options import EngineOptions, get_num_interop_threads, offload_thresholds

if TYPE_CHECKING:
    from agrad._engine._cpu_worker import Budget
from agrad._engine._ready_queue import ReadyQueue
from agrad._grad_mode import grad_enabled
from agrad._graph._anomaly import anomaly_check_nan, anomaly_enabled, run_as_parent, warn_error_detected
from agrad._graph._node import Edge, Node
from agrad._graph._saved_hooks import restore_saved_hooks, saved_hooks_state
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
# the other.  The commit is all or nothing (Note [Atomic commit]).
# Post-accumulate-grad hooks, which observe ``.grad``, run right after it
# (Note [After the commit]).  Tensor hooks (``register_hook``) still run
# during the backward, because they may change the gradient that flows on.
_COMMIT_LOCK = threading.Lock()
_TRAVERSAL_LOCK = threading.Lock()  # See Note [Counting dependencies]
# Ids of pending provisional .grad tensors (Note [Commits of reentrant backwards]); under _COMMIT_LOCK.
_PROVISIONAL: set[int] = set()
# Added to an exception raised after a top-level backward committed (Note [After the commit]).
COMMITTED_NOTE = "(raised after the backward committed its gradients: every .grad holds its result)"

# Note [Reentrant backward]
# ~~~~~~~~~~~~~~~~~~~~~~~~~
# A backward started while a node of another backward runs (a custom
# Function's backward that recomputes and differentiates, as reentrant
# checkpointing does) is *reentrant*: its GraphTask's ``parent`` is the task
# whose node is running (``current_graph_task``), and it is one
# ``reentrant_depth`` deeper.  In PyTorch the worker thread that runs the
# node drives the nested task on its own stack and prefers deeper tasks in
# the ready queues.  Here the parent's node *awaits* the nested backward (or
# calls its blocking twin, which drives it inline): the parent's worker is
# suspended in that node until the nested task is done, so the nested task's
# nodes run first as a matter of course; where tasks compete for kernel
# slots, deeper ones are served first (Note [Kernel slots]).  A reentrant
# backward's errors, cancellation and commits belong to its parent: they
# unwind through the node that started it, and its parent's failure undoes
# its commits (Note [Commits of reentrant backwards]).

# Note [Commits of reentrant backwards]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A reentrant backward must make its gradients visible when it returns: the
# node that started it reads them (reentrant checkpointing returns
# ``detached_input.grad``).  But its parent may still fail, and then no
# ``.grad`` may have changed (Note [Staged gradients]).  So a reentrant
# backward commits *provisionally*: never in place (``.grad`` gets a new
# tensor, the old one stays intact) and journaled on its own task as
# ``(variable, old, new, version of new)``.  When it finishes, its journal
# passes to its parent, which answers for it from then on; the top-level task
# drops the journal when it succeeds, and any task that fails restores
# ``old`` for each entry, newest first.  While an entry is pending, its
# ``new`` tensor is in ``_PROVISIONAL`` and no commit accumulates into it in
# place, so ``new - old`` stays the nested backward's contribution: if
# ``.grad`` was replaced after the provisional commit (another backward
# accumulated into it, or the caller assigned it), only that contribution is
# subtracted, which is exact up to rounding.  The journal holds no array the
# backward would not hold anyway: ``old`` and ``new`` are ``.grad`` values.

# Note [Time slices]
# ~~~~~~~~~~~~~~~~~~
# The CPU worker (``_cpu_worker.py``) runs ready nodes back to back and yields
# to the event loop only when a time slice is spent, never per node: a
# checkpoint costs a few microseconds, as much as a small node, so yielding per
# node would double the cost of a chain of small ops.  The slice belongs to the
# worker, not to a graph task: every awaited backward on the loop spends the
# same ``Budget``, so other coroutines wait about one slice per loop pass
# however many backwards are in flight (Note [One worker per loop]).  A task
# reads ``budget.deadline`` after each node and yields ``SLICE_SPENT`` once it
# has passed; the worker then puts it at the back of its line.  The slice is an
# engine option (``EngineOptions.time_slice``).

# Note [The default slice]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# 0.5 ms.  Measured in one run on the 2-core VM (uvloop, the serving example's
# saliency, 8 concurrent cooperative calls, a 5 ms ticker beside them): batch 1
# 1,596 req/s and ticker lag p99 2.1 ms at 2 ms slices, 1,631 and 0.29 ms at
# 0.5 ms; batch 32 419 and 2.4 ms, 476 and 0.88 ms; 0.2 ms gained no more.  A
# yield costs two loop passes, some 10-20 µs, so shorter slices cost little
# throughput and give back the loop sooner; the 4,000-node W1 chain's awaited
# backward took 6.8-7.0 ms at 2 ms slices and 6.8-7.1 ms at 0.5 ms.

# Note [The caller commits]
# ~~~~~~~~~~~~~~~~~~~~~~~~~
# Nodes run on the CPU worker, but the commit runs in the awaiting caller's own
# turn: once every node has run the task yields ``FINISH``, the worker hands
# the task to its caller, and the caller resumes it, which commits and runs the
# post-accumulate-grad hooks and final callbacks with no await after them
# (Note [After the commit]).  Had the worker committed, a cancellation of the
# caller arriving before it woke would be reported for a backward whose
# gradients were already in ``.grad``; now a caller cancelled while it waits
# for its turn aborts the task, uncommitted.

_clock = time.perf_counter
_ndarray = np.ndarray

# The graph task whose nodes are running in this context: queue_callback
# appends to it, and a backward started from inside a node's backward is a
# reentrant one, one level deeper.  See Note [Ambient state in contextvars].
current_graph_task: ContextVar[GraphTask | None] = ContextVar("agrad_current_graph_task", default=None)


# Requests :meth:`GraphTask.run` yields to its driver (besides the coroutine of
# an ``async def backward``, whose result it expects back).
class SliceSpent:
    """Let the event loop run: the time slice is spent."""


class WaitKernels:
    """Wait until woken: a kernel of this task finished, or a slot was handed to it."""

    def __init__(self, shielded: bool) -> None:
        # Shielded while an aborting task waits for its last kernels (Note
        # [Kernels of a stopped task]): a cancellation must not cut that short.
        self.shielded = shielded


class Offload:
    """Run ``job`` in a thread if a kernel slot is free, with up to ``helpers``
    idle slots for its products' row blocks (Note [Products in row blocks]); the
    driver answers True if it started it, False if the task is now in line for
    a slot."""

    __slots__ = ("job", "helpers")

    def __init__(self, job: Callable[[], None], helpers: int = 0) -> None:
        self.job = job
        self.helpers = helpers


class DeviceJob:
    """Run ``job`` (``node``'s kernel and its chain) on ``device``'s worker
    (Note [Device workers]).  ``first``: the task's first job there, so the
    device's engine stream must first wait for the caller's work; ``leaves``:
    its gradients leave the device, so the worker waits for the device to be
    idle before running it (Note [Engine streams])."""

    __slots__ = ("device", "job", "node", "depth", "first", "leaves")

    def __init__(self, device: Any, job: Callable[[], None], node: Node, depth: int, first: bool,
                 leaves: bool) -> None:
        self.device = device
        self.job = job
        self.node = node
        self.depth = depth
        self.first = first
        self.leaves = leaves


class DeviceIdle:
    """Wake the task once every kernel queued so far on ``device`` has finished."""

    __slots__ = ("device",)

    def __init__(self, device: Any) -> None:
        self.device = device


class Finish:
    """The graph has run: commit in the caller's own turn (Note [The caller commits])."""


SLICE_SPENT = SliceSpent()
FINISH = Finish()
WAIT = WaitKernels(shielded=False)
DRAIN = WaitKernels(shielded=True)


class ExecInfo:
    """Whether a node must run for this task, and which of its inputs to capture."""

    __slots__ = ("needed", "captures")

    def __init__(self) -> None:
        self.needed = False
        self.captures: list[tuple[int, int]] | None = None  # (input_nr, output index)


class GraphTask:
    """One backward or grad call: dependencies, buffers, captures, staged gradients."""

    __slots__ = (
        "keep_graph", "create_graph", "parent", "reentrant_depth", "stack_depth", "dependencies", "not_ready",
        "exec_info", "captured", "staged", "ready", "final_callbacks", "committed", "_owned", "_journal",
        "_inbox", "_outstanding", "_slot_granted", "_in_line", "_wake", "_devices", "_stopped", "_root",
        "__weakref__",
    )

    def __init__(self, keep_graph: bool, create_graph: bool, parent: GraphTask | None = None) -> None:
        self.keep_graph = keep_graph
        self.create_graph = create_graph
        # A backward started while ``parent``'s nodes run is reentrant (Note
        # [Reentrant backward]): one level deeper than its parent, and on the
        # same stack unless its driver spills it (Note [Reentrant depth]).
        self.parent = parent
        self.reentrant_depth = 0 if parent is None else parent.reentrant_depth + 1
        self.stack_depth = 0 if parent is None else parent.stack_depth + 1
        self.dependencies: dict[Node, int] = {}  # only counts above one: Note [Counting dependencies]
        self.not_ready: dict[Node, list[Any]] = {}
        self.exec_info: dict[Node, ExecInfo] | None = None
        self.captured: list[Any] = []
        self.staged: dict[int, list[Any]] = {}
        self.ready = ReadyQueue()
        self.final_callbacks: list[Any] = []
        # Ids of arrays the caller handed in (root gradients), and of memory
        # already stored as a .grad: never stored again without a copy.  See commit().
        self._owned: set[int] = set()
        # Commits of reentrant backwards nested in this one, to undo if this one
        # fails (Note [Commits of reentrant backwards]).
        self._journal: list[tuple[Tensor, Tensor | None, Tensor, int]] = []
        # Kernels in threads (Note [Offloaded kernels]): results land in the inbox
        # (appended by the kernel's thread); the rest belongs to the KernelPool and
        # is touched on the loop's thread only.
        self._inbox: deque[tuple[list[tuple[Node, Any, Any]], tuple[Node, BaseException] | None, Any]] = deque()
        self._outstanding = 0  # kernels started whose end the loop has not yet heard of
        self._slot_granted = False  # See Note [Kernel slots]
        self._in_line = False
        self._wake: Callable[[], None] = _nothing  # set by the CPU worker
        # Devices other than the CPU this task sent work to; None until a gradient
        # for another device is routed, so CPU graphs never look (Note [Device workers]).
        self._devices: set[Any] | None = None
        self._stopped = False  # aborted: device workers drop its queued jobs
        self.committed = False  # .grad changed: the backward has succeeded (Note [After the commit])

    # -- setup ---------------------------------------------------------------
    def start(self, root: Node, root_buffer: list[Any], outputs: Sequence[Edge] | None,
              accumulate_grad: bool) -> None:
        """Count dependencies, mark what must run, and queue the root."""
        self._root = root  # for will_execute
        min_topo = 0
        if outputs is not None:
            min_topo = min((e.function.topological_nr for e in outputs), default=0)
            self._init_to_execute(root, outputs, accumulate_grad, min_topo)
        self._compute_dependencies(root, min_topo)
        for g in root_buffer:
            if g is not None:
                self._owned.add(id(g._data))
        if node_device(root) is not CPU:
            self._devices = set()  # Note [Device workers]
        self.ready.push(root, root_buffer, self.reentrant_depth)

    # Note [Counting dependencies]
    # ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    # PyTorch counts every node's dependencies in a map.  Most nodes have
    # exactly one (chains, trees), so here ``dependencies`` holds only the
    # nodes with more than one, counting down; a node routed to that is not
    # in it is complete.  The traversal marks the nodes it reaches with a
    # token of its own (``Node._mark``) instead of keeping a seen set.  So a
    # 200,000-node chain's backward allocates no per-node bookkeeping before
    # it starts freeing saved tensors (its peak is the forward's plus a few
    # KiB per call, whatever the length), and routing along a chain costs no
    # dict operation.  Traversals hold a lock,
    # so that two blocking backwards of one graph on different threads cannot
    # mix their marks.
    def _compute_dependencies(self, root: Node, min_topo: int) -> None:
        deps = self.dependencies
        token = object()
        stack = [root]
        pop, push = stack.pop, stack.append
        with _TRAVERSAL_LOCK:
            root._mark = token
            while stack:
                fn = pop()
                if fn.topological_nr < min_topo:
                    continue
                for edge in fn.next_edges:
                    if edge is not None:
                        nxt = edge[0]
                        if nxt._mark is token:
                            deps[nxt] = deps.get(nxt, 1) + 1
                        else:
                            nxt._mark = token
                            push(nxt)

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
        # The root runs only if it leads to an output, as any other node: a
        # lone root unrelated to ``inputs`` (``grad(f(a), [b], allow_unused=True)``)
        # is pruned too, as in PyTorch's init_to_execute.
        info.setdefault(root, ExecInfo())

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

    def will_execute(self, fn: Node) -> bool:
        """Whether ``fn`` runs in this task (PyTorch's ``_will_engine_execute_node``):
        it is on a path to ``inputs``, or, without them, reachable from the root.
        A fresh walk (marks may belong to a later traversal): for hooks, not the hot path."""
        if self.exec_info is not None:
            return self.needed(fn)
        seen = {self._root}
        stack = [self._root]
        while stack:
            node = stack.pop()
            if node is fn:
                return True
            for edge in node.next_edges:
                if edge is not None and edge[0] not in seen and edge[0].topological_nr >= fn.topological_nr:
                    seen.add(edge[0])
                    stack.append(edge[0])
        return False

    # -- execution -------------------------------------------------------------
    def run(self, options: EngineOptions | None, budget: Budget | None = None) -> Generator[Any, Any, None]:
        """Execute the graph, then commit (see Note [Staged gradients]).

        ``options`` says how to schedule: the offload policy; None (the
        blocking twin) runs every kernel inline.  ``budget`` is the CPU
        worker's: the task yields :data:`SLICE_SPENT` once the clock passes
        ``budget.deadline`` (Note [Time slices]); None never yields a slice.
        Requests yielded to the driver: :data:`SLICE_SPENT`; an
        :class:`Offload` (answer True if the job started in a thread);
        :data:`WAIT` (wake when ``_wake`` is called); :data:`DRAIN` (the same,
        shielded from cancellation); the coroutine of an ``async def
        backward`` (answer its result); :data:`FINISH` once every node has
        run (answer None to commit).  A driver that is cancelled or fails
        while waiting throws the exception in; the task then aborts, leaving
        every ``.grad`` as it was.
        """
        try:
            with self._ambient():
                yield from self._execute(options, budget)
                yield FINISH  # Note [The caller commits]
                self._root = None  # the graph is the caller's to keep, not a finished task's
                self.commit()
                self._after_commit()
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
            while self._outstanding:
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

    # Note [Offloaded kernels]
    # ~~~~~~~~~~~~~~~~~~~~~~~~
    # A node's *kernel* is its ``apply`` plus conforming the gradients it
    # returns (``_kernel``): pure computation on arrays.  Everything else, the
    # hooks, staging, routing and dependency counts, is bookkeeping and stays on
    # the loop's thread.  A kernel large enough (Note [Offload threshold]) is
    # handed to a thread (``Offload``); the loop goes on with other ready nodes
    # of this task, and the other tasks get the loop whenever this one waits.
    # The thread appends ``(steps, failure)`` to ``_inbox``: ``(node, inputs,
    # outputs)`` per node it ran, and the node that raised, if one did.  The
    # loop drains the inbox before it pops the next ready node, so finished
    # kernels unlock their successors first.  Kernels run in a copy of the
    # context taken when they are handed over, so they record under this
    # task's grad mode (``create_graph``) and see this task as the current one.
    # Note [Offload threshold]
    # ~~~~~~~~~~~~~~~~~~~~~~~~
    # Sending a kernel to a thread and hearing back costs a round trip: the
    # worker's wake-up, the loop's wake-up, and two loop passes, about 100-300
    # µs per node on the 2-core VM this was measured on (``bench_engine.py``,
    # section "offload threshold": a chain of 30 unary nodes, inline vs always
    # offloaded).  A node is worth offloading when its kernel is long enough
    # that the round trip is small beside it, and long enough that running it
    # inline would hold the loop noticeably.  ``Node._work`` estimates the
    # kernel in elements touched (gradient plus saved tensors, set when the
    # node is recorded; matrix products count FLOPs, see ``_product_work``),
    # at roughly 0.1-0.3 ns per element here.  The default threshold, 2**21
    # elements (0.3-0.6 ms of kernel), is where an offloaded chain of unary
    # nodes costs at most ~1.4x its inline time and two independent branches
    # break even; it offloads a 512x512x512 matmul backward (2.8M) and keeps
    # smaller products and elementwise ops under ~1M elements on the loop,
    # whose own slices stay short.  A node class can pin either way
    # (``Node.offload``), and ``engine_options`` changes the threshold.
    # Note [Offloading when busy]
    # ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    # The threshold above is for a loop with nothing else to do: a kernel run
    # inline then costs nobody anything, and a round trip to a thread only adds
    # latency.  A loop serving many requests is never idle: every kernel it runs
    # inline is time its other jobs and coroutines (parsing the next request,
    # answering a health check) wait, while the kernel pool's threads, on the
    # other cores, may have nothing to do.  So while other jobs wait in the CPU
    # worker's line (``Budget.busy``, set by the worker before each turn),
    # kernels from ``busy_offload_threshold`` elements (default 2**18, some
    # 50-100 µs of work) go to the pool too; the loop keeps the bookkeeping.
    # Cooperative calls decide their forward kernels the same way.
    def _execute(self, options: EngineOptions | None, budget: Budget | None) -> Generator[Any, Any, None]:
        ready = self.ready
        inbox = self._inbox
        keep_graph = self.keep_graph
        anomaly = anomaly_enabled.get()
        check_nan = anomaly and anomaly_check_nan.get()
        # Offload nodes whose _work reaches ``threshold``, or ``busy_threshold`` while the
        # worker is busy (None: never); see Notes [Offload threshold], [Offloading when busy].
        threshold = busy_threshold = None
        if options is not None and (thresholds := offload_thresholds(options)) is not None:
            threshold, busy_threshold = thresholds
        parked: Offload | None = None  # a kernel waiting for a slot
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
                            self._complete(node, inputs, outputs, keep_graph, check_nan,
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
                    if (node._tensor_pre_hooks is not None or node._retains_grad is not None
                            or node._pre_hooks is not None or self.exec_info is not None):
                        inputs = self._pre(node, inputs)
                        if inputs is None:
                            continue
                    if self._devices is not None and not node.is_async:  # Note [Device workers]
                        dev = node_device(node)
                        if dev is not CPU:
                            yield self._device_job(node, inputs, check_nan, dev)
                            continue
                    if threshold is not None and (
                            node._work >= (busy_threshold if budget.busy else threshold)  # type: ignore[union-attr,operator]
                            if node.offload is None else node.offload):
                        job = Offload(self._job(node, inputs, check_nan, CPU),
                                      0 if budget.busy else _row_block_helpers(node, inputs))  # type: ignore[union-attr]
                        if not (yield job):
                            parked = job
                            yield WAIT
                        continue
                    outputs = run_as_parent(node, inputs, self) if anomaly else node.apply(inputs, self)
                    if node.is_async:
                        coroutine = outputs
                        try:
                            outputs = yield coroutine
                        finally:
                            # A no-op once the driver awaited it; if an interrupt came
                            # first, no "coroutine was never awaited" later.
                            coroutine.close()
                    self._complete(node, inputs, outputs, keep_graph, check_nan)
                except Exception as exc:
                    _annotate(exc, node)
                    raise
            elif self._outstanding:
                yield WAIT
                continue
            elif self._devices:  # done, once the devices' kernels are (Note [Engine streams])
                for dev in self._devices:
                    yield DeviceIdle(dev)
                self._devices.clear()
                continue
            else:
                return
            if budget is not None and _clock() >= budget.deadline:
                yield SLICE_SPENT

    def _complete(self, node: Node, inputs: list[Any], outputs: Sequence[Any], keep_graph: bool,
                  check_nan: bool, fused: Node | None = None) -> None:
        """After a node's kernel: post hooks, release saved tensors, then send each
        output gradient along its edge and queue the nodes that become ready.

        Each gradient is first conformed to the input it flows to: summed down
        to that input's shape (this is where broadcasting is undone, once for
        all ops) and cast to its dtype, as PyTorch's ``validate_outputs`` does.
        ``fused`` is the successor that already ran after it in the same thread
        (Note [Offloaded chains]): its one dependency is met, there is nothing
        to route.  This is the engine's hottest function: in the common case
        (no hooks, a successor with one input that becomes the only ready
        node) it makes no call at all.
        """
        if node._post_hooks is not None:
            outputs = self._post_hooks(node, inputs, outputs)
        if not keep_graph and type(node._saved) is list:  # node.release_variables(), inline
            node._saved = None
        if check_nan:
            _check_nan(node, outputs)
        if fused is not None:
            self.dependencies.pop(fused, None)  # its last dependency (Note [Counting dependencies])
            return
        edges = node.next_edges
        if len(outputs) != len(edges):
            _check_count(node, outputs)
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
            if g is not None:
                shape, dtype, dev = fn._input_meta[input_nr]
                data = g._data
                if (data.shape != shape or (data.dtype is not dtype and data.dtype != dtype)
                        or dev is not CPU or type(data) is not _ndarray):
                    if dev is not CPU and self._devices is None:
                        self._devices = set()  # Note [Device workers]: the task now routes by device
                    g = _conform(g, shape, dtype, dev, node, i)
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
                old = buffer[input_nr]
                if old is None:
                    buffer[input_nr] = g
                elif dev is CPU:
                    buffer[input_nr] = _accumulate(old, g, self.create_graph)
                else:  # on the consumer's device and stream, as PyTorch's InputBuffer::add
                    with on(dev, engine=True):
                        buffer[input_nr] = _accumulate(old, g, self.create_graph)
            if not remaining:
                ready.push(fn, buffer, self.reentrant_depth)

    # Note [Offloaded chains]
    # ~~~~~~~~~~~~~~~~~~~~~~~
    # Each trip to a thread and back costs a round trip (Note [Offload
    # threshold]) and wakes the loop, whose bookkeeping then holds the GIL while
    # the workers wait for it to run the Python between their numpy calls.  So
    # a kernel handed to a thread takes along the straight chain below it: as
    # long as the node just added has exactly one outgoing edge, to a node that
    # nothing else feeds (its dependency count is 1 and no gradient waits in its
    # buffer), and neither has hooks, retains grad or is pinned to the loop, the
    # successor's kernel runs right after, in the same thread, on the gradient
    # just computed.  The loop later does each node's bookkeeping in order, as
    # if it had run them one by one; only the order relative to other ready
    # nodes changes (a chain runs as soon as its head does), which PyTorch's
    # ordering uses for memory, not for results.  Independent branches of a
    # graph become one job each, and a deep chain one job per ``_CHAIN_WORK``
    # elements, which also bounds how long a cancelled task waits for its last
    # job.  A task restricted by ``inputs=``/``grad()`` (``exec_info``) runs its
    # kernels one by one.  A chain stays on one device; on a device worker,
    # which runs on the loop's thread, it may take in nodes pinned to the loop
    # (a leaf's AccumulateGrad), but it stops before a node whose gradients
    # leave the device: that node runs as a job of its own, after the worker
    # waited for the device (Note [Engine streams]).
    def _chain(self, head: Node, dev: Any) -> list[Node]:
        """``head`` and the nodes that can run after it in the same job, on ``dev``."""
        chain = [head]
        if self.exec_info is not None:
            return chain
        deps, not_ready = self.dependencies, self.not_ready
        node, work = head, head._work
        while node._post_hooks is None and len(chain) < _CHAIN_NODES:
            edges = [e for e in node.next_edges if e is not None]
            if len(edges) != 1:
                break
            nxt = edges[0][0]
            work += nxt._work
            if (deps.get(nxt, 1) != 1 or nxt in not_ready or (nxt.offload is False and dev is CPU)
                    or work > _CHAIN_WORK
                    or nxt._tensor_pre_hooks is not None or nxt._pre_hooks is not None
                    or nxt._retains_grad is not None or node_device(nxt) is not dev
                    or dev is not CPU and (nxt.is_async or _leaves(nxt, dev))):
                break
            chain.append(nxt)
            node = nxt
        return chain

    def _job(self, node: Node, inputs: list[Any], check_nan: bool, dev: Any) -> Callable[[], None]:
        """The job running ``node``'s kernel and its chain on ``dev``: in a thread
        for the CPU, on the device's worker otherwise (Notes [Offloaded kernels],
        [Offloaded chains], [Device workers]).

        Memory is freed as the chain goes, as it is when nodes run inline: a
        node's saved tensors right after its kernel unless the graph is kept
        (nothing else reads them: its kernel was their only use), and the
        gradients passed along the chain once the next node has used them (the
        loop needs them only for the last node, to route them, or for all when
        anomaly mode checks them for NaN; nodes inside a chain have no post
        hooks, see ``_chain``).  Holding both until the job ended kept a whole
        branch alive per job in flight: the parallel-branches benchmark's
        backward peaked at 124-140 MiB above its start instead of 44-48 MiB
        (17 MiB inline; tracemalloc).
        """
        chain = self._chain(node, dev)
        last = chain[-1]
        release = not self.keep_graph
        ctx = contextvars.copy_context()
        inbox = self._inbox

        def job() -> None:
            steps: list[tuple[Node, list[Any] | None, list[Any] | None]] = []
            grads = inputs
            for n in chain:
                try:
                    outputs = ctx.run(_kernel, n, grads, self)
                except BaseException as exc:  # handed to the loop, raised there
                    inbox.append((steps, (n, exc), dev))
                    return
                if release:
                    n.release_variables()
                steps.append((n, grads, outputs) if check_nan or n is last else (n, None, None))
                for g, edge in zip(outputs, n.next_edges):  # the one edge, to the next in the chain
                    if edge is not None:
                        grads = [None] * len(edge[0]._input_meta)
                        grads[edge[1]] = g
            inbox.append((steps, None, dev))

        return job

    # Note [Device workers]
    # ~~~~~~~~~~~~~~~~~~~~~
    # As in PyTorch, a NodeTask runs on the device of its InputBuffer: the
    # first device other than the CPU among its inputs' (``node_device``;
    # the engine moves every gradient to its input's device when it routes
    # it, so the buffer's device is known from the node's metadata).  CPU
    # nodes run here, in the coroutine (or thread) that awaits the backward,
    # as PyTorch's caller thread drives its CPU queue.  A node on another
    # device becomes a job (its kernel and the straight chain below it on the
    # same device, Note [Offloaded chains]) for that device's worker: one
    # asyncio task per device and event loop, shared by every graph task on
    # the loop, whose ready queue orders jobs as PyTorch's device queues do
    # (deeper reentrant tasks first, then higher sequence numbers).  The
    # worker runs the job on the loop's thread with the device's engine
    # stream current, so on CUDA it only *launches* kernels, and hands the
    # results back through the inbox like a kernel thread does; the graph
    # task does all bookkeeping.  Jobs run in a copy of the task's context.
    # The blocking twin runs device jobs inline.  ``async def`` backwards run
    # in the awaiting coroutine on every device, since only it can await them.
    # A task looks at devices only once a gradient for another device than the
    # CPU was routed (``_devices`` stops being None): a CPU graph pays nothing
    # per node for devices it does not use.
    def _device_job(self, node: Node, inputs: list[Any], check_nan: bool, dev: Any) -> DeviceJob:
        first = dev not in self._devices
        self._devices.add(dev)
        return DeviceJob(dev, self._job(node, inputs, check_nan, dev), node, self.reentrant_depth, first,
                         _leaves(node, dev))

    def _pre(self, node: Node, inputs: list[Any]) -> list[Any] | None:
        """Tensor pre-hooks, retain_grad, captures and node pre-hooks; None if
        the node only captures (PyTorch: evaluate_function before call_function)."""
        if node._tensor_pre_hooks is not None:
            # Note [Hooks see undefined gradients]
            # ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
            # As in PyTorch, a tensor's hooks run whenever its grad_fn runs,
            # with None for an output whose gradient is undefined (a sibling
            # output of a multi-output node, or a backward that returned
            # None); gradcheck's undefined-gradient check relies on it.  A
            # hook may not turn None into a gradient.
            for nr, hooks in node._tensor_pre_hooks.items():
                for hook in list(hooks.values()):
                    new = hook(inputs[nr])
                    if new is not None:
                        inputs[nr] = _check_hook_result(new, inputs[nr], hook)
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
                    inputs = _check_hook_results(new, inputs, hook)
        return inputs

    @staticmethod
    def _post_hooks(node: Node, inputs: list[Any], outputs: Sequence[Any]) -> Sequence[Any]:
        for hook in list(node._post_hooks.values()):  # type: ignore[union-attr]
            new = hook(tuple(outputs), tuple(inputs))
            if new is not None:
                outputs = _check_hook_results(new, outputs, hook)
        return outputs

    # -- staging and completion ----------------------------------------------
    def stage(self, variable: Tensor, grad: Tensor, is_leaf: bool) -> None:
        """Record a gradient for ``variable.grad``; see Note [Staged gradients]."""
        entry = self.staged.get(id(variable))
        if entry is None:
            self.staged[id(variable)] = [variable, grad, is_leaf]
        else:
            entry[1] = entry[1] + grad

    # Note [Atomic commit]
    # ~~~~~~~~~~~~~~~~~~~~
    # ``commit`` applies every staged gradient, or none.  It works in two
    # phases under ``_COMMIT_LOCK``.  The first computes each leaf's new
    # ``.grad`` and checks every in-place sum before anything changes: it may
    # raise (an out-of-place sum that fails, PyTorch's error for a ``.grad``
    # with overlapping memory) or be interrupted, and the backward then
    # aborts with every ``.grad`` as it was.  The second only applies what
    # the first decided: reference assignments and in-place sums already
    # known to succeed, the journal of provisional commits, and ``committed``
    # last.  It runs with SIGINT held back (``deferred_interrupts``), so a
    # KeyboardInterrupt cannot land between two leaves; one that arrives
    # during it is raised right after, with the commit whole.  A read-only
    # ``.grad`` array is summed out of place (PyTorch writes through it).
    def commit(self) -> None:
        """Apply every staged gradient to ``.grad`` with PyTorch's AccumulateGrad
        rules, all or nothing (Note [Atomic commit]), and pass the journal of
        provisional commits on.  From here on the backward has succeeded
        (Note [After the commit]).

        A reentrant backward's commit is provisional: journaled, so that its
        parent can undo it (Note [Commits of reentrant backwards]).
        """
        if not self.staged and not self._journal:
            self.committed = True
            return
        with _COMMIT_LOCK:
            plan = self._plan_commit()
            with deferred_interrupts():
                self._apply_commit(plan)

    def _plan_commit(self) -> list[_Change]:
        """Phase one of the commit: ``(variable, old, grad, in_place)`` per staged
        gradient, where ``grad`` is the new ``.grad`` or, in place, what to add
        to ``old``.  Changes no ``.grad``."""
        create_graph = self.create_graph
        seen = self._owned
        provisional = self.parent is not None
        plan: list[_Change] = []
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
                if not is_leaf or not writeable(arr) or id(owner) in seen or id(arr) in seen:
                    grad = grad.clone()
                    arr = owner = grad._data
                seen.add(id(arr))
                seen.add(id(owner))
                plan.append((variable, None, grad, False))
            elif (not create_graph and not old.requires_grad and not provisional and id(old) not in _PROVISIONAL
                    and old._data.shape == grad._data.shape):
                if 0 in old._data.strides and old._data.size > 1:
                    raise RuntimeError(
                        "unsupported operation: more than one element of the written-to tensor refers to a "
                        "single memory location. Please clone() the tensor before performing the operation."
                    )
                if writeable(old._data):
                    plan.append((variable, old, grad, True))
                else:
                    plan.append((variable, old, old + grad, False))
            else:
                plan.append((variable, old, old + grad, False))
        return plan

    def _apply_commit(self, plan: list[_Change]) -> None:
        """Phase two of the commit: apply ``plan``; nothing here can fail."""
        provisional = self.parent is not None
        for variable, old, grad, in_place in plan:
            new = grad
            if in_place and old is not None:
                with on(variable.device):
                    np.add(old._data, grad._data, out=old._data, casting="unsafe")
                old._bump_version()
                new = old
            else:
                variable._grad = grad
            if provisional:
                _PROVISIONAL.add(id(new))
                self._journal.append((variable, old, new, new._version))
        if provisional:  # the parent answers for every commit below it now
            self.parent._journal.extend(self._journal)  # type: ignore[union-attr]
        else:  # final now
            for entry in self._journal:
                _PROVISIONAL.discard(id(entry[2]))
        self._journal.clear()
        self.committed = True

    # Note [After the commit]
    # ~~~~~~~~~~~~~~~~~~~~~~~
    # The commit is the point where a backward succeeds: before it, whatever
    # stops the backward (an exception, a cancellation, a KeyboardInterrupt)
    # leaves every ``.grad`` as it was; after it, nothing is undone.  So
    # nothing after it may look like a failed backward.  The async driver has
    # no await after the commit, so no cancellation can be reported once
    # ``.grad`` changed (a cancellation requested meanwhile reaches the caller
    # at its next await, as for any other synchronous step).  What does run
    # after it is user code that observes the committed ``.grad``: the
    # post-accumulate-grad hooks (an optimizer step in a hook needs the
    # accumulated value) and the final callbacks of ``queue_callback``, as in
    # PyTorch.  If one of them raises (or a KeyboardInterrupt lands while the
    # call unwinds), the exception propagates as in PyTorch, the hooks after
    # it do not run, and the driver adds a note to the exception saying that
    # the gradients are committed (``COMMITTED_NOTE``): a caller that would
    # retry a failed backward can tell that this one must not be retried.  A
    # reentrant backward's commit is provisional: if something raises after
    # it, its parent fails and undoes it, so no note is added there.
    def _after_commit(self) -> None:
        """Post-accumulate-grad hooks, then final callbacks (Note [After the commit])."""
        for variable, _, is_leaf in self.staged.values():
            if is_leaf and variable._post_acc_hooks:
                for hook in list(variable._post_acc_hooks.values()):
                    if (result := hook(variable)) is not None:  # PyTorch checks the type first
                        raise (RuntimeError("Tensor post accumulate grad hooks should return None.")
                               if isinstance(result, Tensor) else
                               TypeError(f"expected Variable, but hook returned '{type(result).__name__}'"))
        self.staged.clear()
        while self.final_callbacks:
            self.final_callbacks.pop(0)()

    def note_if_committed(self, exc: BaseException) -> None:
        """Tell the caller, on ``exc``, that the gradients of this top-level
        backward stay committed (Note [After the commit])."""
        if self.committed and self.parent is None and COMMITTED_NOTE not in getattr(exc, "__notes__", ()):
            exc.add_note(COMMITTED_NOTE)

    def abort(self) -> None:
        """Drop all pending work and staged gradients, and undo the commits of
        the reentrant backwards nested in this one: the backward changes nothing."""
        self._stopped = True
        self._root = None
        self.ready.clear()
        self.not_ready.clear()
        self.dependencies.clear()
        self.staged.clear()
        self.final_callbacks.clear()
        self.captured = []
        with _COMMIT_LOCK, deferred_interrupts():  # all undone, or none (Note [Atomic commit])
            for variable, old, new, version in reversed(self._journal):
                _PROVISIONAL.discard(id(new))
                current = variable._grad
                if current is new and new._version == version:
                    variable._grad = old
                elif current is not None and current.shape == new.shape:
                    # Replaced since (another backward accumulated into it, or the
                    # caller assigned it): take out only this backward's part.
                    variable._grad = (current - (new if old is None else new - old)).detach()
        self._journal.clear()


def _nothing() -> None:
    pass


# One leaf's change in a commit's plan: (variable, old .grad, new .grad or what
# to add to old in place, in place?); see Note [Atomic commit].
_Change = tuple[Tensor, "Tensor | None", Tensor, bool]


# A job's chain ends after this many nodes or elements of work (Note [Offloaded chains]).
_CHAIN_NODES = 64
_CHAIN_WORK = 1 << 24


def _kernel(node: Node, inputs: list[Any], task: GraphTask) -> list[Any]:
    """A node's kernel, run in a thread (Note [Offloaded kernels]): its gradients,
    already conformed to the inputs they flow to, so routing them costs the loop
    no array work."""
    outputs = list(run_as_parent(node, inputs, task) if anomaly_enabled.get() else node.apply(inputs, task))
    _check_count(node, outputs)
    for i, (g, edge) in enumerate(zip(outputs, node.next_edges)):
        if g is not None and edge is not None:
            shape, dtype, dev = edge[0]._input_meta[edge[1]]
            outputs[i] = _conform(g, shape, dtype, dev, node, i)
    return outputs


def _row_block_helpers(node: Node, inputs: list[Any]) -> int:
    """How many idle kernel threads an offloaded product node's kernel may ask
    for, to run its products in row blocks (Note [Products in row blocks]): one
    per other core if its gradient is a matrix of several rows, else none."""
    op = getattr(node, "op", None)
    g = inputs[0]
    if op is None or op.split_rows is None or g is None or g.ndim != 2 or g.shape[0] < 2:
        return 0
    return get_num_interop_threads() - 1


def node_device(node: Node) -> Any:
    """The device a node runs on: its InputBuffer's, the first of its inputs'
    devices that is not the CPU (PyTorch's ``InputBuffer::device``)."""
    for meta in node._input_meta:
        if meta[2] is not CPU:
            return meta[2]
    return CPU


def _leaves(node: Node, dev: Any) -> bool:
    """Whether some gradient of ``node`` goes to an input on another device than ``dev``."""
    for edge in node.next_edges:
        if edge is not None and edge[0]._input_meta[edge[1]][2] is not dev:
            return True
    return False


# Note [Accumulating in place]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch's ``InputBuffer::add`` sums a second gradient into the buffered one
# in place when nothing else can see the buffered one (its use count is 1).
# The same test here uses reference counts: the buffered Tensor is held only
# by the buffer (and by ``_complete`` and this call), its array only by that
# Tensor, owns its memory and is writeable.  A gradient the caller passed, one
# a hook kept, one a vjp also returned for another input, a saved tensor, a
# view, a broadcast: each has another reference or fails the flags, and is
# summed out of place.  Under ``create_graph`` the sum is recorded, so it is
# never in place.  A node with many inputs (a leaf used 500 times) then sums
# them with one numpy call each, allocating nothing.
_getrefcount = sys.getrefcount


def _accumulate(old: Tensor, g: Tensor, create_graph: bool) -> Tensor:
    """``old + g`` for an input buffer: in ``old``'s memory when only the buffer holds it."""
    data = old._data
    # References to ``old``: the buffer, _complete's local, this parameter, getrefcount's
    # argument; to ``data``: old._data, this local, getrefcount's argument.
    if not create_graph and _getrefcount(old) == 4 and _getrefcount(data) == 3 and data.base is None \
            and writeable(data):
        np.add(data, g._data, out=data)
        return old
    return old + g


def _check_count(node: Node, outputs: Sequence[Any]) -> None:
    if len(outputs) != len(node.next_edges):
        raise RuntimeError(
            f"function {node.name()} returned an incorrect number of gradients "
            f"(expected {len(node.next_edges)}, got {len(outputs)})"
        )


def _conform(g: Tensor, shape: tuple[int, ...], dtype: np.dtype, dev: Any, node: Node, index: int) -> Tensor:
    """``g`` summed down to ``shape``, cast to ``dtype`` and moved to ``dev`` (``g``
    itself if it matches).  As PyTorch's ``validate_outputs``, only a 0-d
    gradient is moved (a CPU scalar's, Note [Mixed devices]); any other on the
    wrong device is an error."""
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
    if (dev is not CPU or type(g._data) is not _ndarray) and device_of(g._data) is not dev:
        if g._data.ndim:
            raise RuntimeError(
                f"Function {node.name()} returned an invalid gradient at index {index} - expected device "
                f"{dev} but got {device_of(g._data)}"
            )
        g = g.to(dev)
    return g


def _check_nan(node: Node, outputs: Sequence[Any]) -> None:
    for i, g in enumerate(outputs):
        if g is not None and np.isnan(g._data).any():
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output.")


def _check_hook_result(new: Any, old: Tensor | None, hook: Any) -> Tensor:
    """What a hook returned in place of the gradient ``old``, checked as PyTorch's
    ``check_single_result`` does (``new`` is not None)."""
    if old is None:
        raise RuntimeError("can't replace a None gradient with a non-None value")
    if not isinstance(new, Tensor):
        raise TypeError(f"expected Variable, but hook returned '{type(new).__name__}'")
    if new._data.dtype != old._data.dtype or new.device != old.device:
        raise RuntimeError(f"hook '{_hook_name(hook)}' has changed the type of value (was {_type_name(old)} "
                           f"got {_type_name(new)})")
    if new.shape != old.shape:
        raise RuntimeError(f"hook '{_hook_name(hook)}' has changed the size of value")
    return new


def _check_hook_results(new: Any, old: Sequence[Any], hook: Any) -> list[Any]:
    """What a node's pre- or post-hook returned in place of the gradients
    ``old``, checked as PyTorch's ``check_result`` does; None entries stand."""
    if not isinstance(new, tuple):
        raise TypeError(f"expected tuple, but hook returned '{type(new).__name__}'")
    if len(new) != len(old):
        raise RuntimeError(f"hook '{_hook_name(hook)}' has returned an incorrect number of values "
                           f"(got {len(new)}, but expected {len(old)})")
    return [n if n is None else _check_hook_result(n, o, hook) for n, o in zip(new, old)]


def _hook_name(hook: Any) -> str:
    return getattr(hook, "__name__", "<unknown>")


def _type_name(t: Tensor) -> str:
    """PyTorch's legacy type name of ``t`` (``torch.FloatTensor``), for agrad."""
    prefix = "agrad." if t.device is CPU else f"agrad.{t.device.type}."
    return f"{prefix}{SCALAR_TYPE_NAMES[t.dtype.name]}Tensor"


def _annotate(exc: BaseException, node: Node) -> None:
    """Name the failing node on the exception (once, at the innermost node)."""
    if getattr(exc, "_agrad_node", None) is None:
        exc._agrad_node = node.name()  # type: ignore[attr-defined]
        if anomaly_enabled.get():
            warn_error_detected(node)
        exc.add_note(f"(raised while running the backward of {node.name()})")
        if node._trace:
            exc.add_note("Traceback of the forward call that created the node:\n" + "".join(node._trace))
