"""ReadyQueue: nodes whose every input gradient has arrived (PyTorch's ReadyQueue)."""

from __future__ import annotations

import heapq
import itertools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agrad._graph._node import Node

_heappush, _heappop = heapq.heappush, heapq.heappop


class ReadyQueue:
    """A priority queue of NodeTasks ``(node, input_buffer)``.

    Ordered as PyTorch orders its ready queues: deeper reentrant graph tasks
    first, then higher ``sequence_nr`` first (see Note [Sequence numbers]); a
    counter breaks ties so equal keys pop in FIFO order and nodes are never
    compared.  Each graph task's CPU queue is driven by its loop's CPU worker
    (an awaited backward, Note [One worker per loop]) or by the thread that
    called a blocking twin, as PyTorch's caller thread drives its local ready
    queue, so popping never has to wait: an empty queue with no work in
    flight means the graph task is done.
    """

    __slots__ = ("heap", "_count", "lone")

    # Note [The lone ready node]
    # ~~~~~~~~~~~~~~~~~~~~~~~~~~
    # Along a chain, each node makes exactly one successor ready, into an
    # empty queue, and that successor is popped next.  A node pushed into an
    # empty queue is therefore held aside in ``lone`` instead of the heap;
    # the next push moves it into the heap first, so the order is exactly the
    # heap's.  A chain node then costs no heap operation and no key tuple.
    # ``heap`` and ``lone`` are read by the engine's loop itself, which takes
    # ``lone`` and fills an empty queue's ``lone`` without a call per node.
    def __init__(self) -> None:
        self.heap: list[tuple[int, int, int, Node, list[Any]]] = []
        self._count = itertools.count().__next__
        self.lone: tuple[int, Node, list[Any]] | None = None

    def push(self, node: Node, buffer: list[Any], reentrant_depth: int = 0) -> None:
        heap = self.heap
        lone = self.lone
        if lone is None:
            if not heap:
                self.lone = (reentrant_depth, node, buffer)
                return
        else:
            self.lone = None
            _heappush(heap, (-lone[0], -lone[1].sequence_nr, self._count(), lone[1], lone[2]))
        _heappush(heap, (-reentrant_depth, -node.sequence_nr, self._count(), node, buffer))

    def pop(self) -> tuple[int, Node, list[Any]] | None:
        """The next NodeTask as ``(reentrant_depth, node, buffer)``, or None if the queue is empty."""
        lone = self.lone
        if lone is not None:
            self.lone = None
            return lone
        if self.heap:
            entry = _heappop(self.heap)
            return -entry[0], entry[3], entry[4]
        return None

    def clear(self) -> None:
        self.heap.clear()
        self.lone = None
