"""Matrix products in row blocks: how one product uses several cores.

Note [Products in row blocks]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
BLAS runs one thread per kernel (Note [BLAS threads]), so a lone request's big
product would use one core where PyTorch's intra-op threads use all of them.
A product op declares ``split_rows`` (the input whose rows are the output's
rows: a matrix product's first factor; the inputs before it with as many
rows, addmm's ``input``, are split with it), and such a product may run as
row blocks on several threads, concatenated.  It never oversubscribes: blocks
run only on threads the kernel pool counts as idle (Note [Kernel slots]), and
only while the CPU worker has no other job in line (a busy worker offloads
whole kernels instead, Note [Offloading when busy]).  Two places split:

* a cooperative call's forward (``_cooperative.py``), which can pause: one
  block per idle kernel thread if the product is above the offload threshold;
  below it (a block of it is short), one block on the loop's thread and one
  per idle kernel thread, as many blocks as there are cores;
* a backward's product node (``GraphTask._execute``): a product node big
  enough to go to a kernel thread (Note [Offload threshold]), while the
  worker has nothing else in line, asks for *helpers*: the pool reserves as
  many of its idle slots as it can and borrows a thread for each, as it does
  for its workers (``KernelPool.offload``).  While that thread runs the job,
  its kernel runner is a :class:`RowBlocks`, which runs each big product op
  as one block on that thread and one per helper.  The job's thread waits for its
  helpers synchronously: it holds no loop and no lock, and the helpers only
  compute.  The helpers' threads go back when the job ends, so between
  backwards no thread is held.  A mid-size product node stays on the loop,
  whole: sending it to a thread only to split it cost more than it saved
  (a batch-32 saliency request, 3.8 ms whole on the loop against 5.3 ms in
  row blocks; from batch 128 on, where the node goes to a thread anyway,
  the blocks save 10-26%).

The blocks sum each output element in the order the whole product would, so
the result equals the whole product's (up to BLAS's choice of kernel per
shape).  A block that raises makes the whole product run again, unsplit, so
its error names the whole product's shapes.
"""

from __future__ import annotations

import concurrent.futures
import queue
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import numpy as np

from agrad._ambient import runs_kernels

__all__ = ["RowBlocks", "forward_work", "row_blocks", "splittable"]

# Below this much work (Note [Offload threshold]'s elements) a product runs whole:
# a block's trip to a helper thread would cost more than it saves.
_MIN_SPLIT_WORK = 1 << 18


def forward_work(op: Any, arrays: list[Any]) -> int:
    """A forward kernel's work in Note [Offload threshold]'s elements, from the
    shapes alone: the elements it reads, or for a matrix product what
    ``_product_work`` counts (its multiply-adds, and an eighth of the
    elements); none for a view."""
    if op.view:  # a view costs no kernel
        return 0
    touched = sum(a.size for a in arrays)
    if op.work is not None and len(arrays) >= 2 and arrays[-1].ndim:  # a product of the last two
        return int(arrays[-2].size * arrays[-1].shape[-1] // 48 + touched // 8)
    return int(touched)


def row_blocks(op: Any, arrays: list[Any], attrs: dict[str, Any], parts: int) -> list[Callable[[], Any]]:
    """``op``'s forward as ``parts`` kernels, each computing a block of the output's
    rows (``op.split_rows``'s rows, and those of the inputs before it that have as
    many); their results concatenated along axis 0 are the whole output."""
    k = op.split_rows
    rows = arrays[k].shape[0]
    bounds = [rows * p // parts for p in range(parts + 1)]

    def block(i: int, j: int) -> Callable[[], Any]:
        args = [a[i:j] if n == k or (n < k and a.ndim == 2 and a.shape[0] == rows) else a
                for n, a in enumerate(arrays)]
        return lambda: op.forward(np, *args, **attrs)

    return [block(i, j) for i, j in zip(bounds, bounds[1:])]


def splittable(op: Any, arrays: list[Any]) -> int:
    """How many rows ``op``'s output has if it may run in row blocks, else 0."""
    k = op.split_rows
    if k is None or arrays[k].ndim != 2:
        return 0
    return int(arrays[k].shape[0])


class RowBlocks:
    """The row blocks of one kernel-thread job whose products may use ``helpers``
    more threads (Note [Products in row blocks]).

    The pool borrows the helpers' threads when it queues the job; each runs
    :meth:`help` until the job ends.  The job runs on its own thread through
    :meth:`run`, which makes this its kernel runner: op dispatch calls
    :meth:`forward`, which hands all blocks but the first to the helpers.  A
    block no helper has taken yet (a helper's thread may start late) runs on
    the job's own thread, so the job never waits for a thread that is not
    there."""

    __slots__ = ("helpers", "_blocks")

    def __init__(self, helpers: int) -> None:
        self.helpers = helpers
        self._blocks: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]] | None] = queue.SimpleQueue()

    def run(self, job: Callable[[], None]) -> None:
        """Run ``job`` on this thread with its products in row blocks, then let the helpers go."""
        try:
            with runs_kernels(self):
                job()
        finally:
            for _ in range(self.helpers):
                self._blocks.put(None)

    def help(self) -> None:
        """A helper, on a borrowed thread: run blocks until the job ends."""
        while (block := self._blocks.get()) is not None:
            _run_block(block)

    def forward(self, op: Any, arrays: list[Any], attrs: dict[str, Any]) -> Any:
        rows = splittable(op, arrays)
        if rows < 2 or forward_work(op, arrays) < _MIN_SPLIT_WORK:
            return op.forward(np, *arrays, **attrs)
        first, *rest = row_blocks(op, arrays, attrs, min(rows, self.helpers + 1))
        pending: list[Future[Any]] = []
        for kernel in rest:
            future: Future[Any] = Future()
            pending.append(future)
            self._blocks.put((kernel, future))
        try:
            try:
                results = [first()]
            finally:
                self._run_untaken()
                concurrent.futures.wait(pending)  # never leave a helper computing for nobody
            results += [f.result() for f in pending]
        except Exception:  # a block's error names its own rows: raise the whole product's
            return op.forward(np, *arrays, **attrs)
        return np.concatenate(results, axis=0)

    def _run_untaken(self) -> None:
        """Run here the blocks no helper has taken (only this job's are queued)."""
        while True:
            try:
                block = self._blocks.get_nowait()
            except queue.Empty:
                return
            assert block is not None  # the helpers' ends are queued only once the job ran
            _run_block(block)


def _run_block(block: tuple[Callable[[], Any], Future[Any]]) -> None:
    kernel, future = block
    try:
        future.set_result(kernel())
    except BaseException as exc:  # raised by the job's thread, from the future
        future.set_exception(exc)
