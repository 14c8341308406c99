"""ReadyQueue: nodes whose every input gradient has arrived (PyTorch's ReadyQueue)."""

from __future__ import annotations

import heapq
import itertools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agrad._graph._node import Node


class ReadyQueue:
    """A priority queue of NodeTasks ``(node, input_buffer)``.

    Ordered as PyTorch orders its ready queues: deeper reentrant graph tasks
    first, then higher ``sequence_nr`` first (see Note [Sequence numbers]); a
    counter breaks ties so equal keys pop in FIFO order and nodes are never
    compared.  Each graph task's CPU queue is driven by the coroutine (or
    thread) that awaits the backward, as PyTorch's caller thread drives its
    local ready queue, so popping never has to wait: an empty queue with no
    work in flight means the graph task is done.
    """

    __slots__ = ("_heap", "_count")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, int, Node, list[Any]]] = []
        self._count = itertools.count().__next__

    def push(self, node: "Node", buffer: list[Any], reentrant_depth: int = 0) -> None:
        heapq.heappush(self._heap, (-reentrant_depth, -node.sequence_nr, self._count(), node, buffer))

    def pop(self) -> tuple["Node", list[Any]]:
        entry = heapq.heappop(self._heap)
        return entry[3], entry[4]

    def clear(self) -> None:
        self._heap.clear()

    def __len__(self) -> int:
        return len(self._heap)
