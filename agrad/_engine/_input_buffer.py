"""Input buffers: a node's incoming gradients, validated and summed.

PyTorch's ``validate_outputs`` (:func:`conform`) and ``InputBuffer::add``
(:func:`accumulate`).  A buffer is a plain list, one slot per input of the
node; the graph task keeps the buffers of nodes not ready yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from agrad._backends import device_of
from agrad._device import CPU
from agrad._graph._node import Node
from agrad._tensor import Tensor

__all__ = ["accumulate", "check_count", "check_nan", "conform", "release"]

_ndarray = np.ndarray


# Note [Accumulating in place]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch's ``InputBuffer::add`` sums a second gradient into the buffered one
# in place when nothing else can see the buffered one (its use count is 1).
# Here ownership is explicit.  A gradient that arrives in a buffer may be
# seen by anyone (the caller passed it, a hook kept it, a vjp returned it for
# another input too, it is a saved tensor or a view), so the first sum into
# a slot goes to a new array.  That array is the engine's own (nothing
# recorded it: under ``create_graph`` the sum is a recorded op, never done in
# place), and while its buffer waits for more gradients its id is in the
# task's ``owned`` set, so every later sum into that slot is in place.  When
# the buffer is complete, the node's backward may hand its gradients on
# anywhere: they leave the set (:func:`release`), which therefore names only
# tensors alive in a buffer (no id is reused while in it).  A node with many
# inputs (a leaf used 500 times) thus sums them with one numpy call each and
# allocates once.  (An earlier version read reference counts to find a
# buffered gradient nothing else held, which depended on how many references
# CPython's frames kept.)
def accumulate(buffer: list[Any], index: int, g: Tensor, owned: set[int], create_graph: bool, more: bool) -> None:
    """``buffer[index] += g`` (Note [Accumulating in place]); ``more``: the
    buffer still waits for other gradients after this one."""
    old = buffer[index]
    if old is None:
        buffer[index] = g
    elif id(old) in owned:
        np.add(old._data, g._data, out=old._data)
    elif create_graph:
        buffer[index] = old + g
    else:
        data = old._data + g._data
        if isinstance(data, np.generic):  # numpy's sum of 0-d arrays
            data = np.asarray(data)
        buffer[index] = new = Tensor._make(data)
        if more:
            owned.add(id(new))


def release(buffer: list[Any], owned: set[int]) -> None:
    """The buffer is complete: its sums are no longer the engine's alone (Note [Accumulating in place])."""
    for g in buffer:
        owned.discard(id(g))


def check_count(node: Node, outputs: Sequence[Any]) -> None:
    """A node's backward returned one gradient per input."""
    if len(outputs) != len(node.next_edges):
        raise RuntimeError(
            f"function {node.name()} returned an incorrect number of gradients "
            f"(expected {len(node.next_edges)}, got {len(outputs)})"
        )


def conform(g: Tensor, shape: tuple[int, ...], dtype: np.dtype[Any], dev: Any, node: Node, index: int) -> Tensor:
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


def check_nan(node: Node, outputs: Sequence[Any]) -> None:
    """Anomaly mode's check of a node's gradients."""
    for i, g in enumerate(outputs):
        if g is not None and np.isnan(g._data).any():
            raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th output.")
