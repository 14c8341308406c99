"""Writing into memory that a tensor shares: expanded tensors and their views.

Note [Writing into expanded tensors]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
``expand`` gives a read-only numpy view (stride 0 along expanded dims), and
stays read-only: the engine and the in-place accumulation into ``.grad`` rely
on a read-only array never being stolen or summed into (Note [Accumulating in
place]).  PyTorch writes through an expanded tensor, with one rule
(``assert_no_internal_overlap``): an op may not write a tensor in which two
elements share one memory location (a stride-0 dim of size > 1), except
``fill_``/``zero_`` (every element gets the same value) and, with a
deprecation warning, ``index_put_`` and ``masked_fill_``.  So the in-place path
(``_inplace.inplace_method``) asks :func:`writable_target` for a writable alias of
a read-only view's memory, built on the array that owns it, after checking
that rule; a failing check raises before anything is computed or written.
Where elements overlap, :func:`write_through` writes only the elements the op
changed, so a masked write is not undone by the untouched aliases of the
elements it wrote.  Memory that is read-only at its root (a constant, a
read-only numpy array given to ``from_numpy``) gets no alias.

Note [Read-only numpy memory]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
PyTorch's ``from_numpy`` of a non-writable array warns and then writes into
it anyway ("undefined behavior"); the memory may be a read-only mapping of a
file, where the write would crash the process.  agrad refuses the in-place
op instead with PyTorch's exception type, ``RuntimeError`` (numpy's
``ValueError`` leaked before), before anything is computed or written: a
deliberate difference, listed in docs/differences.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from agrad._tensor import Tensor

__all__: list[str] = []

_OVERLAP = ("unsupported operation: more than one element of the written-to tensor refers to a single memory "
            "location. Please clone() the tensor before performing the operation.")

# In-place methods PyTorch lets write into overlapping memory: name -> its
# deprecation warning (None: no warning).
_WRITES_THROUGH: dict[str, str | None] = {
    "fill_": None,
    "_index_put_": "Use of index_put_ on expanded tensors is deprecated. Please clone() the tensor before "
                   "performing this operation. This also applies to advanced indexing e.g. tensor[indices] = tensor",
    "masked_fill_": "Use of masked_fill_ on expanded tensors is deprecated. Please clone() the tensor before "
                    "performing this operation. This also applies to advanced indexing e.g. tensor[mask] = scalar",
}


def has_internal_overlap(array: Any) -> bool:
    """Whether two elements of ``array`` share memory (PyTorch's ``has_internal_overlap``
    answering Yes: a stride-0 dimension of size > 1)."""
    return any(st == 0 and n > 1 for n, st in zip(array.shape, array.strides))


def writable_alias(array: np.ndarray) -> np.ndarray | None:
    """A writable array with ``array``'s shape, strides and memory, built on the array
    owning that memory; None if that owner is read-only or exposes no buffer."""
    root = array
    while isinstance(root.base, np.ndarray):
        root = root.base
    if not root.flags.writeable:
        return None
    offset = array.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    try:
        return np.ndarray(array.shape, array.dtype, root, offset, array.strides)
    except (TypeError, ValueError):  # a root that is not one contiguous buffer
        return None


def writable_target(t: Tensor, op: str) -> Any:
    """Where the in-place ``op`` writes ``t``'s values: ``t``'s array, or a writable
    alias of it if it is a read-only view; raises PyTorch's error if ``op`` may not
    write overlapping memory.  See Note [Writing into expanded tensors]."""
    data = t._data
    if type(data) is not np.ndarray:
        return data
    if t._base is not None:
        if has_internal_overlap(data):
            if op not in _WRITES_THROUGH:
                raise RuntimeError(_OVERLAP)
            message = _WRITES_THROUGH[op]
            if message is not None:
                warnings.warn(message, UserWarning, stacklevel=3)
        alias = writable_alias(data)
        if alias is not None:
            return alias
    raise RuntimeError(f"{op}(): the tensor's memory is a read-only numpy array (from_numpy of a non-writable "
                       "array, or a view of one), which agrad does not write; copy the array or make it writable "
                       "first")  # Note [Read-only numpy memory]


def write_through(target: Any, values: Any) -> None:
    """``target[...] = values``; where ``target``'s elements overlap, only the changed ones."""
    if has_internal_overlap(target):
        changed = values != target
        target[changed] = values[changed]
    else:
        target[...] = values
