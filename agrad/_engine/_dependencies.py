"""What a backward must run: dependency counts and ``exec_info``, by walking the graph once.

PyTorch's ``compute_dependencies`` and ``init_to_execute``, and its
``_will_engine_execute_node``.  Walks only: the graph task owns the results.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

from agrad._graph._node import Edge, Node

__all__ = ["ExecInfo", "compute_dependencies", "init_to_execute", "reaches"]

_TRAVERSAL_LOCK = threading.Lock()  # See Note [Counting dependencies]


class ExecInfo:
    """Whether a node must run for this task, and which of its inputs to capture."""

    __slots__ = ("needed", "captures")

    def __init__(self) -> None:
        self.needed = False
        self.captures: list[tuple[int, int]] | None = None  # (input_nr, output index)

    def should_run(self) -> bool:
        """Whether the node runs, or at least captures its inputs."""
        return self.needed or self.captures is not None


# Note [Counting dependencies]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch counts every node's dependencies in a map.  Most nodes have
# exactly one (chains, trees), so here ``dependencies`` holds only the
# nodes with more than one, counting down; a node routed to that is not
# in it is complete.  The traversal marks the nodes it reaches with a
# token of its own (``Node.walk_mark``) instead of keeping a seen set.  So a
# 200,000-node chain's backward allocates no per-node bookkeeping before
# it starts freeing saved tensors (its peak is the forward's plus a few
# KiB per call, whatever the length), and routing along a chain costs no
# dict operation.  Traversals hold a lock, so that two blocking backwards of
# one graph on different threads cannot mix their marks.  The mark is a
# public field of Node, written here once per edge walked: a method call
# there would cost ~60 ns an edge on a walk that is otherwise a few loads and
# compares, so the field is public and documented on Node as the traversals'
# own (nothing else writes it).
def compute_dependencies(root: Node, min_topo: int, deps: dict[Node, int]) -> None:
    """Count into ``deps`` the dependencies of the nodes below ``root`` that have
    more than one (Note [Counting dependencies]); nodes numbered below
    ``min_topo`` cannot lead to an output and are not walked."""
    token = object()
    stack = [root]
    pop, push = stack.pop, stack.append
    with _TRAVERSAL_LOCK:
        root.walk_mark = token
        while stack:
            fn = pop()
            if fn.topological_nr < min_topo:
                continue
            for edge in fn.next_edges:
                if edge is not None:
                    nxt = edge[0]
                    if nxt.walk_mark is token:
                        deps[nxt] = deps.get(nxt, 1) + 1
                    else:
                        nxt.walk_mark = token
                        push(nxt)


def init_to_execute(root: Node, outputs: Sequence[Edge], accumulate_grad: bool,
                    min_topo: int) -> dict[Node, ExecInfo]:
    """Mark the nodes on a path from ``root`` to an output (PyTorch's init_to_execute).

    With ``accumulate_grad`` the outputs' nodes run (``backward(inputs=...)``);
    without, the gradient flowing into output ``i`` is captured as the ``i``-th
    result (``grad``).
    """
    info: dict[Node, ExecInfo] = {}
    for idx, (fn, input_nr) in enumerate(outputs):
        entry = info.setdefault(fn, ExecInfo())
        if accumulate_grad:
            entry.needed = True
        else:
            if entry.captures is None:
                entry.captures = []
            entry.captures.append((input_nr, idx))
    # The root runs only if it leads to an output, as any other node: a
    # lone root unrelated to ``inputs`` (``grad(f(a), [b], allow_unused=True)``)
    # is pruned too, as in PyTorch's init_to_execute.
    info.setdefault(root, ExecInfo())

    def should_execute(fn: Node) -> bool:
        e = info.get(fn)
        return e is not None and e.should_run()

    # Iterative post-order walk: a node is needed if any child should run.
    seen: set[Node] = set()
    stack: list[tuple[Node, Iterator[Edge | None]]] = [(root, iter(root.next_edges))]
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
    return info


def reaches(root: Node, fn: Node) -> bool:
    """Whether ``fn`` is reachable from ``root``.  A fresh walk (marks may belong
    to a later traversal): for hooks, not the hot path."""
    seen = {root}
    stack = [root]
    while stack:
        node = stack.pop()
        if node is fn:
            return True
        for edge in node.next_edges:
            if edge is not None and edge[0] not in seen and edge[0].topological_nr >= fn.topological_nr:
                seen.add(edge[0])
                stack.append(edge[0])
    return False
