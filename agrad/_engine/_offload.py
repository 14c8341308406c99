"""The offload rule: which kernels leave the loop's thread, and what goes with them.

Everything that decides where a kernel runs is here: the thresholds an
``EngineOptions`` implies, the one decision (:func:`goes_to_thread`) that a
backward's nodes and a cooperative call's forward ops both take, how many
row-block helpers a product node asks for, and which straight chain of nodes
a kernel takes along (:func:`kernel_job`).  The inputs to the rule live with
what they measure: each op's work estimate (``Node._work``, an op's ``work=``
in the op table, ``Function.offload`` and a custom Function's ``ctx``) and
the pool's free slots (``_pool.py``).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias

from agrad._ambient import anomaly_enabled
from agrad._device import CPU
from agrad._engine._input_buffer import check_count, conform
from agrad._engine._options import EngineOptions, get_num_interop_threads
from agrad._graph._anomaly import run_as_parent
from agrad._graph._node import Node

if TYPE_CHECKING:
    from agrad._engine._dependencies import ExecInfo
    from agrad._engine._graph_task import GraphTask

__all__ = ["Outcome", "goes_to_thread", "kernel_job", "leaves", "node_device", "offload_thresholds",
           "row_block_helpers"]

# What a kernel job hands back (Note [Offloaded kernels]): ``(node, inputs,
# outputs)`` per node it ran, the node that raised and its exception if one
# did, and the device it ran on.
Outcome: TypeAlias = "tuple[list[tuple[Node, Any, Any]], tuple[Node, BaseException] | None, Any]"

# Note [Offloaded kernels]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# A node's *kernel* is its ``apply`` plus conforming the gradients it
# returns (``_kernel``): pure computation on arrays.  Everything else, the
# hooks, staging, routing and dependency counts, is bookkeeping and stays on
# the loop's thread.  A kernel large enough (Note [Offload threshold]) is
# handed to a thread (``RunKernel``); the loop goes on with other ready nodes
# of this task, and the other tasks get the loop whenever this one waits.
# The thread delivers ``(steps, failure)`` to the task's inbox: ``(node,
# inputs, outputs)`` per node it ran, and the node that raised, if one did.
# The loop drains the inbox before it pops the next ready node, so finished
# kernels unlock their successors first.  Kernels run in a copy of the
# context taken when they are handed over, so they record under this task's
# grad mode (``create_graph``) and see this task as the current one.

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


def offload_thresholds(options: EngineOptions) -> tuple[int, int] | None:
    """``(threshold, when busy)`` of work from which a kernel runs in a thread, or
    None if none may (Notes [Offload threshold], [Offloading when busy])."""
    if options.offload == "never":
        return None
    if options.offload == "always":
        return 0, 0
    return options.offload_threshold, min(options.offload_threshold, options.busy_offload_threshold)


def goes_to_thread(work: int, pinned: bool | None, thresholds: tuple[int, int], busy: bool) -> bool:
    """Whether a kernel of ``work`` elements runs in a kernel thread, given the
    ``thresholds`` of :func:`offload_thresholds` (not None) and whether the
    worker is ``busy``; ``pinned`` (a node class's ``offload``) overrides
    the size (Notes [Offload threshold], [Offloading when busy])."""
    if pinned is not None:
        return pinned
    return work >= thresholds[1 if busy else 0]


def row_block_helpers(node: Node, inputs: list[Any], busy: bool) -> int:
    """How many idle kernel threads an offloaded node's kernel may ask for, to
    run its products in row blocks (Note [Products in row blocks]): one per
    other core if it is a product node whose gradient is a matrix of several
    rows and the worker has nothing else to do, else none."""
    op = getattr(node, "op", None)
    g = inputs[0]
    if busy or op is None or op.split_rows is None or g is None or g.ndim != 2 or g.shape[0] < 2:
        return 0
    return get_num_interop_threads() - 1


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
_CHAIN_NODES = 64
_CHAIN_WORK = 1 << 24


def _chain(head: Node, dev: Any, deps: dict[Node, int], not_ready: dict[Node, list[Any]],
           exec_info: dict[Node, ExecInfo] | None) -> list[Node]:
    """``head`` and the nodes that can run after it in the same job, on ``dev``."""
    chain = [head]
    if exec_info is not None:
        return chain
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
                or dev is not CPU and (nxt.is_async or leaves(nxt, dev))):
            break
        chain.append(nxt)
        node = nxt
    return chain


def kernel_job(task: GraphTask, node: Node, inputs: list[Any], check_nan: bool, dev: Any) -> Callable[[], None]:
    """The job running ``node``'s kernel and its chain on ``dev``: in a thread
    for the CPU, on the device's worker otherwise (Notes [Offloaded kernels],
    [Offloaded chains], [Device workers]); it hands its outcome to ``task.deliver``.

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
    chain = _chain(node, dev, task.dependencies, task.not_ready, task.exec_info)
    last = chain[-1]
    release = not task.keep_graph
    deliver = task.deliver
    ctx = contextvars.copy_context()

    def job() -> None:
        steps: list[tuple[Node, list[Any] | None, list[Any] | None]] = []
        grads = inputs
        for n in chain:
            try:
                outputs = ctx.run(_kernel, n, grads, task)
            except BaseException as exc:  # handed to the loop, raised there
                deliver((steps, (n, exc), dev))
                return
            if release:
                n.release_variables()
            steps.append((n, grads, outputs) if check_nan or n is last else (n, None, None))
            for g, edge in zip(outputs, n.next_edges):  # the one edge, to the next in the chain
                if edge is not None:
                    grads = [None] * len(edge[0]._input_meta)
                    grads[edge[1]] = g
        deliver((steps, None, dev))

    return job


def _kernel(node: Node, inputs: list[Any], task: GraphTask) -> list[Any]:
    """A node's kernel, run in a thread (Note [Offloaded kernels]): its gradients,
    already conformed to the inputs they flow to, so routing them costs the loop
    no array work."""
    outputs = list(run_as_parent(node, inputs, task) if anomaly_enabled.get() else node.apply(inputs, task))
    check_count(node, outputs)
    for i, (g, edge) in enumerate(zip(outputs, node.next_edges)):
        if g is not None and edge is not None:
            shape, dtype, dev = edge[0]._input_meta[edge[1]]
            outputs[i] = conform(g, shape, dtype, dev, node, i)
    return outputs


def node_device(node: Node) -> Any:
    """The device a node runs on: its InputBuffer's, the first of its inputs'
    devices that is not the CPU (PyTorch's ``InputBuffer::device``)."""
    for meta in node._input_meta:
        if meta[2] is not CPU:
            return meta[2]
    return CPU


def leaves(node: Node, dev: Any) -> bool:
    """Whether some gradient of ``node`` goes to an input on another device than ``dev``."""
    for edge in node.next_edges:
        if edge is not None and edge[0]._input_meta[edge[1]][2] is not dev:
            return True
    return False
