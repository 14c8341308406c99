"""Structural ops built on the shape family: triangles and diagonals, stacking
and splitting helpers, moved and rotated dims.

Most of these are composites of the shape family's views and copies, as they
are in PyTorch: ``hstack`` is ``cat`` of ``atleast_1d``, ``movedim`` a
``permute``, ``diff`` a ``sub`` of two slices, ``repeat_interleave`` an
``expand`` or an ``index_select``.  Their gradients, and the node a result
records, are their primitives' (Note [Structural composites]).  The entries
here are the ops PyTorch records a node of their own for: ``tril``/``triu``,
``diag_embed``, ``trace``, ``block_diag``, ``rot90``, ``t``, ``Tensor.unfold``
(with its backward, ``unfold_backward``) and the diagonal copy behind ``diag``.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from agrad import _backends, _creation, _dtype
from agrad._device import CPU
from agrad._errors import broadcast_error
from agrad._ops._common import _r
from agrad._ops._elementwise import logical_xor, sub
from agrad._ops._registry import defop
from agrad._ops._shape import (
    _diagonal_backward,
    _diagonal_parse,
    _diagonal_view,
    _slice_along,
    _wrap_dim,
    cat,
    diagonal,
    flip,
    index_select,
    permute,
    reshape,
    stack,
    transpose,
)
from agrad._size import Size
from agrad._tensor import Tensor

# The public names of this family (star-imported by ``agrad/__init__.py``).
__all__ = [
    "tril", "triu", "tril_indices", "triu_indices", "diag", "diag_embed", "diagflat", "trace", "kron", "block_diag",
    "cartesian_prod", "combinations",
    "tensor_split", "hsplit", "vsplit", "dsplit", "hstack", "vstack", "dstack", "column_stack", "row_stack",
    "concat", "concatenate", "atleast_1d", "atleast_2d", "atleast_3d", "broadcast_tensors", "broadcast_shapes",
    "meshgrid",
    "movedim", "moveaxis", "swapaxes", "swapdims", "t", "adjoint", "ravel", "unflatten", "fliplr", "flipud",
    "rot90", "repeat_interleave", "diff",
]

# Note [Structural composites]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A composite records its primitives' nodes, which are PyTorch's wherever
# PyTorch's own implementation is the same composite (``diff`` records
# SubBackward0, ``hstack`` CatBackward0, ``cartesian_prod`` StackBackward0,
# ``movedim`` PermuteBackward0, ``ravel`` ViewBackward0, ``repeat_interleave``
# ViewBackward0 or IndexSelectBackward0), and it returns a view exactly where
# its primitives do (``movedim``, ``swapaxes``, ``adjoint``, ``atleast_*d``,
# ``unflatten``, ``ravel`` of a contiguous tensor, ``meshgrid``); the pieces of
# ``tensor_split``/``hsplit``/``vsplit``/``dsplit`` are slices, as ``split``'s
# are.  One known difference, in the node's name only: ``kron`` ends in
# ViewBackward0 (PyTorch: UnsafeViewBackward0, an op agrad does not have).


def _on_device_of(array: np.ndarray, like: Tensor) -> Tensor:
    """A constant tensor of the host ``array``, moved to ``like``'s device (index arrays)."""
    return Tensor._make(_backends.transfer(array, like.device))


def _int_arg(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


# -- triangles ---------------------------------------------------------------------


def _check_matrices(input: Any, name: str) -> None:
    if input.ndim < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")


def _triangle_samples(rng: np.random.Generator) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    return [((_r(rng, 3, 4),), {}), ((_r(rng, 3, 4), 1), {}), ((_r(rng, 4, 3), -2), {}),
            ((_r(rng, 2, 3, 4),), {"diagonal": -1}), ((_r(rng, 3, 3), 5), {}),
            ((_r(rng, 0, 3), 1), {})]


@defop(ref=lambda torch: torch.tril, vjp=lambda g, diagonal: tril(g, diagonal), node="TrilBackward0",
       methods=("tril",), inplace=("tril_",), samples=_triangle_samples)
def tril(xp, input, *, diagonal=0):
    """The lower triangle of the last two dimensions: the elements on and below
    ``diagonal`` (0 the main diagonal, > 0 above it), zeros elsewhere."""
    _check_matrices(input, "tril")
    return xp.tril(input, diagonal)


@defop(ref=lambda torch: torch.triu, vjp=lambda g, diagonal: triu(g, diagonal), node="TriuBackward0",
       methods=("triu",), inplace=("triu_",), samples=_triangle_samples)
def triu(xp, input, *, diagonal=0):
    """The upper triangle of the last two dimensions: the elements on and above
    ``diagonal`` (0 the main diagonal, < 0 below it), zeros elsewhere."""
    _check_matrices(input, "triu")
    return xp.triu(input, diagonal)


def _triangle_indices(name: str, lower: bool, row: int, col: int, offset: int, dtype: Any, device: Any) -> Tensor:
    for what, n in (("row", row), ("col", col)):
        if n < 0:
            raise RuntimeError(f"{what} must be non-negative, got{n}")  # sic, PyTorch's spacing
    dt = _dtype.int64 if dtype is None else _dtype.to_dtype(dtype)
    if dt not in (_dtype.int64, _dtype.int32):
        raise NotImplementedError(f"\"{name}\" not implemented for '{_dtype.SCALAR_TYPE_NAMES[dt.name]}'")
    rows, cols = (np.tril_indices if lower else np.triu_indices)(row, offset, col)
    return _creation.as_tensor(np.stack([rows, cols]).astype(dt.np), device=device)


def tril_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None,
                 layout: Any = None) -> Tensor:
    """The coordinates of the lower triangle (on and below ``offset``) of a
    ``row`` x ``col`` matrix, as a ``(2, N)`` tensor of rows then columns, in
    row-major order; int64 unless ``dtype`` is int32.

    Example::

        >>> agrad.tril_indices(3, 3)
        tensor([[0, 1, 1, 2, 2, 2],
                [0, 0, 1, 0, 1, 2]])
    """
    return _triangle_indices("tril_indices", True, row, col, offset, dtype, device)


def triu_indices(row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None,
                 layout: Any = None) -> Tensor:
    """The coordinates of the upper triangle (on and above ``offset``) of a
    ``row`` x ``col`` matrix, as a ``(2, N)`` tensor; see :func:`tril_indices`."""
    return _triangle_indices("triu_indices", False, row, col, offset, dtype, device)


# -- diagonals ---------------------------------------------------------------------


def _diag_embed_parse(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> tuple[tuple, dict]:
    nd = input.ndim + 1  # the output's dims
    d1, d2 = _wrap_dim(dim1, nd), _wrap_dim(dim2, nd)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return (input,), {"offset": int(offset), "dim1": d1, "dim2": d2}


@defop(ref=lambda torch: torch.diag_embed,
       vjp=lambda g, offset, dim1, dim2: diagonal(g, offset, dim1, dim2), node="DiagEmbedBackward0",
       methods=("diag_embed",), parse=_diag_embed_parse,
       samples=lambda rng: [((_r(rng, 3),), {}), ((_r(rng, 2, 3), 1), {}), ((_r(rng, 2, 3), -2, 0, 2), {}),
                            ((_r(rng, 2, 3),), {"dim1": -1, "dim2": 0}), ((_r(rng, 0, 2),), {}),
                            ((_r(rng, 2),), {"offset": -1})])
def diag_embed(xp, input, *, offset=0, dim1=-2, dim2=-1):
    """Put the last dimension of ``input`` on the diagonal at ``offset`` of new
    planes ``dim1`` x ``dim2`` (square, of side ``n + |offset|``), zeros elsewhere."""
    side = input.shape[-1] + abs(offset)
    batch = iter(input.shape[:-1])  # the output's other dimensions, in order
    out = xp.zeros(tuple(side if i in (dim1, dim2) else next(batch) for i in range(input.ndim + 1)), input.dtype)
    _diagonal_view(xp, out, offset, dim1, dim2)[...] = input
    return out


@defop(ref=lambda torch: torch.diagonal_copy,
       vjp=lambda g, input_shape, offset, dim1, dim2: _diagonal_backward(g, input_shape, offset, dim1, dim2),
       node="DiagonalBackward0_copy", parse=_diagonal_parse,
       samples=lambda rng: [((_r(rng, 3, 4),), {}), ((_r(rng, 3, 4), -1), {}), ((_r(rng, 2, 3, 4), 1, 2, 0), {})])
def _diagonal_copy(xp, input, *, offset=0, dim1=0, dim2=1):
    """``diagonal(input, offset, dim1, dim2)`` copied into its own memory (backs ``diag`` of a matrix)."""
    return xp.diagonal(input, offset, dim1, dim2).copy()


def diag(input: Tensor, diagonal: int = 0) -> Tensor:
    """A vector's elements on the ``diagonal`` of a square matrix (``diag_embed``),
    or a copy of a matrix's ``diagonal`` as a vector.

    Example::

        >>> agrad.diag(agrad.tensor([1, 2]))
        tensor([[1, 0],
                [0, 2]])
        >>> agrad.diag(agrad.tensor([[1, 2], [3, 4]]), 1)
        tensor([2])
    """
    if input.ndim == 1:
        return diag_embed(input, diagonal)
    if input.ndim == 2:
        return _diagonal_copy(input, diagonal)
    raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.ndim}D")


def diagflat(input: Tensor, offset: int = 0) -> Tensor:
    """All elements of ``input`` (flattened) on the ``offset`` diagonal of a square matrix."""
    return diag_embed(reshape(input, -1), offset)


@defop(ref=lambda torch: torch.trace,
       vjp=lambda g, input_shape: _diagonal_backward(g.expand((min(input_shape),)), input_shape, 0, 0, 1),
       node="TraceBackward0", methods=("trace",),
       samples=lambda rng: [((_r(rng, 3, 3),), {}), ((_r(rng, 3, 5),), {}), ((_r(rng, 4, 2),), {}),
                            ((_r(rng, 0, 3),), {})])
def trace(xp, input):
    """The sum of a matrix's main diagonal; integers sum to int64, as in ``sum``
    (bools are refused, as PyTorch does)."""
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    if input.dtype == np.bool_:
        raise NotImplementedError("\"trace\" not implemented for 'Bool'")
    if input.dtype.kind in "iu":
        return xp.trace(input, dtype=np.int64)
    return xp.trace(input)


# -- block matrices and products -----------------------------------------------------


def _block_shape(shape: tuple[int, ...]) -> tuple[int, int]:
    """The block a ``block_diag`` input makes: a 0-d tensor is 1 x 1, a vector one row."""
    rows, cols = (1,) * (2 - len(shape)) + tuple(shape)
    return rows, cols


def _block_diag_grad(g: Tensor, shapes: tuple[tuple[int, ...], ...]) -> list[Tensor]:
    out = []
    r = c = 0
    for s in shapes:
        h, w = _block_shape(s)
        out.append(g[r:r + h, c:c + w].reshape(s))
        r, c = r + h, c + w
    return out


@defop(ref=lambda torch: torch.block_diag,
       vjp=lambda g, tensors_shape: _block_diag_grad(g, tensors_shape), node="BlockDiagBackward0", promote=True,
       parse=lambda *tensors: (tensors, {}),
       samples=lambda rng: [((_r(rng, 2, 3), _r(rng, 1, 2)), {}), ((_r(rng), _r(rng, 3), _r(rng, 2, 2)), {}),
                            ((_r(rng, 2, 2), np.arange(3)), {}), ((_r(rng, 0, 2), _r(rng, 2, 0), _r(rng, 1, 1)), {}),
                            ((_r(rng, 3, 2),), {})])
def _block_diag(xp, *tensors):
    """The tensors as the diagonal blocks of one matrix, zeros elsewhere (backs ``block_diag``)."""
    for i, a in enumerate(tensors):
        if a.ndim > 2:
            raise RuntimeError(f"torch.block_diag: Input tensors must have 2 or fewer dimensions. Input {i} has "
                               f"{a.ndim} dimensions")
    blocks = [_block_shape(a.shape) for a in tensors]
    out = xp.zeros((sum(h for h, _ in blocks), sum(w for _, w in blocks)), tensors[0].dtype)
    r = c = 0
    for a, (h, w) in zip(tensors, blocks):  # one slice assignment per block
        out[r:r + h, c:c + w] = a.reshape(h, w)
        r, c = r + h, c + w
    return out


def block_diag(*tensors: Tensor) -> Tensor:
    """A block diagonal matrix of ``tensors`` (0-d: 1 x 1 blocks, 1-d: one row), with
    PyTorch's type promotion; no tensors give an empty 1 x 0 matrix."""
    if not tensors:
        return _creation.zeros(1, 0)
    return _block_diag(*tensors)


def kron(input: Tensor, other: Tensor) -> Tensor:
    """The Kronecker product: block ``i`` of the result is ``input[i] * other``
    (the shorter shape padded with leading ones); a broadcast product, reshaped."""
    nd = max(input.ndim, other.ndim)
    a_shape = (1,) * (nd - input.ndim) + tuple(input.shape)
    b_shape = (1,) * (nd - other.ndim) + tuple(other.shape)
    a = input.reshape(tuple(n for s in a_shape for n in (s, 1)))  # (a0, 1, a1, 1, ...)
    b = other.reshape(tuple(n for s in b_shape for n in (1, s)))  # (1, b0, 1, b1, ...)
    return (a * b).reshape(tuple(p * q for p, q in zip(a_shape, b_shape)))


def _check_vector(t: Tensor) -> None:
    if t.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(t.shape)}")


def cartesian_prod(*tensors: Tensor) -> Tensor:
    """Every tuple of one element from each vector, as the rows of a matrix (itertools.product's order)."""
    for t in tensors:
        _check_vector(t)
    if len(tensors) == 1:
        return tensors[0]
    return stack([g.reshape(-1) for g in meshgrid(*tensors, indexing="ij")], dim=1)


def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    """Every ``r``-combination of a vector's elements, as the rows of a matrix
    (itertools.combinations's order, or ``combinations_with_replacement``'s)."""
    _check_vector(input)
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    if r == 0:
        return Tensor._make(_backends.zeros((0,), input._data.dtype, input.device))
    # The index tuples of the r-dimensional grid whose indices increase (or
    # never decrease), in row-major order: PyTorch's meshgrid-and-mask.
    grid = np.indices((input.shape[0],) * r).reshape(r, -1)
    keep = np.all(grid[:-1] <= grid[1:] if with_replacement else grid[:-1] < grid[1:], axis=0)
    chosen = grid[:, keep]
    return stack([index_select(input, 0, _on_device_of(chosen[k], input)) for k in range(r)], dim=1)


# -- splitting ---------------------------------------------------------------------


def _split_points(indices_or_sections: Any, size: int) -> list[int]:
    """The boundaries of ``tensor_split``'s pieces (the ends of all pieces but the last)."""
    if isinstance(indices_or_sections, Tensor):
        ios = indices_or_sections
        if ios.dtype is not _dtype.int64:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to have dtype of long, but got "
                               + _dtype.SCALAR_TYPE_NAMES[ios.dtype.name])
        if ios.ndim > 1:
            raise RuntimeError("tensor_split expected tensor_indices_or_sections to be a zero-dimensional or "
                               f"one-dimensional tensor, but got a tensor with {ios.ndim} dims")
        indices_or_sections = ios.item() if ios.ndim == 0 else ios.tolist()
    if _int_arg(indices_or_sections):
        sections = int(indices_or_sections)
        if sections <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {sections}")
        # The first ``size % sections`` pieces are one longer.
        small, extra = divmod(size, sections)
        return [i * small + min(i, extra) for i in range(1, sections)]
    return [operator.index(i) for i in indices_or_sections]


def tensor_split(input: Tensor, indices_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """Views of ``input`` split along ``dim``: into ``sections`` pieces of as equal
    sizes as can be (the first ones longer), or at the given indices (which slice
    as Python's slices do: out-of-range ends are clamped, a decreasing pair is empty).

    Example::

        >>> [p.tolist() for p in agrad.tensor_split(agrad.arange(5), 3)]
        [[0, 1], [2, 3], [4]]
        >>> [p.tolist() for p in agrad.tensor_split(agrad.arange(5), [1, 4])]
        [[0], [1, 2, 3], [4]]
    """
    if input.ndim == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims")
    d = _wrap_dim(dim, input.ndim)
    size = input.shape[d]
    points = _split_points(indices_or_sections, size)
    starts, stops = [0, *points], [*points, size]
    return tuple(_slice_along(input, d, a, b) for a, b in zip(starts, stops))


def _split_along(name: str, input: Tensor, indices_or_sections: Any, dim: int, min_dims: int) -> tuple[Tensor, ...]:
    """``hsplit``, ``vsplit`` and ``dsplit``: ``tensor_split`` along ``dim`` into equal pieces or at indices."""
    if input.ndim < min_dims:
        raise RuntimeError(f"torch.{name} requires a tensor with at least {min_dims} dimension, but got a tensor "
                           f"with {input.ndim} dimensions!")
    if _int_arg(indices_or_sections):
        size, sections = input.shape[dim], int(indices_or_sections)
        if sections == 0 or size % sections:
            raise RuntimeError(f"torch.{name} attempted to split along dimension {dim}, but the size of the "
                               f"dimension {size} is not divisible by the split_size {sections}!")
    return tensor_split(input, indices_or_sections, dim)


def hsplit(input: Tensor, indices_or_sections: Any) -> tuple[Tensor, ...]:
    """Split columns (dimension 1; a vector's only dimension) into equal pieces or at indices."""
    return _split_along("hsplit", input, indices_or_sections, 0 if input.ndim == 1 else 1, 1)


def vsplit(input: Tensor, indices_or_sections: Any) -> tuple[Tensor, ...]:
    """Split rows (dimension 0) of a tensor of 2 or more dimensions into equal pieces or at indices."""
    return _split_along("vsplit", input, indices_or_sections, 0, 2)


def dsplit(input: Tensor, indices_or_sections: Any) -> tuple[Tensor, ...]:
    """Split depth (dimension 2) of a tensor of 3 or more dimensions into equal pieces or at indices."""
    return _split_along("dsplit", input, indices_or_sections, 2, 3)


# -- stacking ------------------------------------------------------------------------


def _at_least(n: int, t: Tensor) -> Tensor:
    """``t`` with at least ``n`` (<= 3) dimensions, new ones of size 1, as PyTorch's ``atleast_nd`` places them."""
    if t.ndim >= n:
        return t
    if t.ndim == 0:
        return reshape(t, (1,) * n)
    if n == 2 or t.ndim == 2:  # a row; a matrix gets a trailing depth
        return t.unsqueeze(0 if n == 2 else -1)
    return t.unsqueeze(0).unsqueeze(-1)  # a vector as a 1 x n x 1 block


def _at_least_all(n: int, tensors: tuple[Any, ...]) -> Any:
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        return tuple(_at_least(n, t) for t in tensors[0])
    if len(tensors) == 1:
        return _at_least(n, tensors[0])
    return tuple(_at_least(n, t) for t in tensors)


def atleast_1d(*tensors: Any) -> Any:
    """Each tensor with at least one dimension (a 0-d tensor becomes a 1-element
    vector, others are returned as they are): one tensor for one, a tuple for several or a sequence."""
    return _at_least_all(1, tensors)


def atleast_2d(*tensors: Any) -> Any:
    """Each tensor with at least two dimensions (a vector becomes a row); see :func:`atleast_1d`."""
    return _at_least_all(2, tensors)


def atleast_3d(*tensors: Any) -> Any:
    """Each tensor with at least three dimensions (a vector ``(n,)`` becomes
    ``(1, n, 1)``, a matrix ``(m, n, 1)``); see :func:`atleast_1d`."""
    return _at_least_all(3, tensors)


def _stack_inputs(name: str, tensors: Any) -> tuple[Tensor, ...]:
    if isinstance(tensors, Tensor):
        raise TypeError(f"{name}(): argument 'tensors' (position 1) must be tuple of Tensors, not Tensor")
    if not len(tensors):
        raise RuntimeError(f"{name} expects a non-empty TensorList")
    return tuple(tensors)


def hstack(tensors: Sequence[Tensor]) -> Tensor:
    """Concatenate horizontally: vectors end to end, others along dimension 1."""
    ts = _at_least_all(1, (_stack_inputs("hstack", tensors),))
    return cat(ts, 0 if ts[0].ndim == 1 else 1)


def vstack(tensors: Sequence[Tensor]) -> Tensor:
    """Concatenate vertically, along dimension 0, vectors taken as rows."""
    return cat(_at_least_all(2, (_stack_inputs("vstack", tensors),)), 0)


row_stack = vstack


def dstack(tensors: Sequence[Tensor]) -> Tensor:
    """Concatenate in depth, along dimension 2, after :func:`atleast_3d`."""
    return cat(_at_least_all(3, (_stack_inputs("dstack", tensors),)), 2)


def column_stack(tensors: Sequence[Tensor]) -> Tensor:
    """Concatenate as columns: 0-d tensors and vectors become columns, the rest go along dimension 1."""
    ts = _stack_inputs("column_stack", tensors)
    return hstack([reshape(t, (t.numel(), 1)) if t.ndim <= 1 else t for t in ts])


concat = cat


def concatenate(tensors: Sequence[Tensor], axis: int = 0, *, dim: int | None = None) -> Tensor:
    """``cat`` under numpy's name, whose dimension is ``axis`` (PyTorch takes ``dim`` too)."""
    return cat(tensors, axis if dim is None else dim)


# -- broadcasting --------------------------------------------------------------------


def broadcast_shapes(*shapes: Any) -> Size:
    """The shape that tensors of ``shapes`` broadcast to (an int is a 1-d shape),
    with PyTorch's errors; no tensor is made.

    Example::

        >>> agrad.broadcast_shapes((2,), (3, 1), (1, 1, 1))
        agrad.Size([1, 3, 2])
    """
    given = [(s,) if _int_arg(s) else s for s in shapes if s is not None]
    for s in given:
        if not isinstance(s, Sequence):
            raise RuntimeError(f"Input shapes should be of type ints, a tuple of ints, or a list of ints, got {s}")
    common = [1] * max((len(s) for s in given), default=0)
    for k, s in enumerate(given):  # PyTorch's torch._refs._broadcast_shapes, minus symbolic sizes
        for i in range(-1, -1 - len(s), -1):
            if s[i] == common[i]:
                continue
            if common[i] == 1:
                if s[i] < 0:
                    raise ValueError("Attempting to broadcast a dimension with negative length!")
                common[i] = s[i]
            elif s[i] != 1:
                raise RuntimeError(f"Attempting to broadcast a dimension of length {s[i]} at {i}! Mismatching "
                                   f"argument at index {k} had {s}; but expected shape should be broadcastable to "
                                   f"{common}")
    return Size(common)


def broadcast_tensors(*tensors: Tensor) -> tuple[Tensor, ...]:
    """The tensors expanded to their common broadcast shape (views; a tensor
    already of that shape is returned as it is, as PyTorch does)."""
    shapes = [tuple(t.shape) for t in tensors]
    err = broadcast_error(shapes)
    if err is not None:
        raise err
    shape = np.broadcast_shapes(*shapes)
    return tuple(t if t.shape == shape else t.expand(shape) for t in tensors)


_MESHGRID_INDEXING = "torch.meshgrid: in an upcoming release, it will be required to pass the indexing argument."


def meshgrid(*tensors: Any, indexing: str | None = None) -> tuple[Tensor, ...]:
    """Coordinate grids of N vectors (0-d tensors count as 1-element vectors):
    output ``i`` is vector ``i`` expanded along every other dimension.  With
    ``indexing='ij'`` grid dimension ``i`` follows vector ``i``; ``'xy'`` swaps the
    first two (Cartesian, numpy's default).  Omitting ``indexing`` means ``'ij'``
    and warns, as PyTorch does.  The grids are expanded views.

    Example::

        >>> xs, ys = agrad.meshgrid(agrad.tensor([1, 2, 3]), agrad.tensor([4, 5]), indexing="xy")
        >>> xs.shape, ys.tolist()
        (agrad.Size([2, 3]), [[4, 4, 4], [5, 5, 5]])
    """
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])  # the older call, with one sequence
    if indexing is None:
        warnings.warn(_MESHGRID_INDEXING, UserWarning, stacklevel=2)
        indexing = "ij"
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'torch.meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}')
    refs = list(tensors)
    swap = indexing == "xy" and len(refs) >= 2
    if swap:
        refs[0], refs[1] = refs[1], refs[0]
    for t in refs:
        if t.ndim > 1:
            raise RuntimeError(f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {t}")
    for a, b in zip(refs, refs[1:]):
        if a.dtype is not b.dtype:
            raise RuntimeError("meshgrid expects all tensors to have the same dtype")
        if a.device is not b.device:
            raise RuntimeError("meshgrid expects all tensors to have the same device")
    shape = tuple(t.numel() for t in refs)
    n = len(refs)
    grids = [reshape(t, tuple(-1 if j == i else 1 for j in range(n))).expand(shape) for i, t in enumerate(refs)]
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


# -- moved, swapped and rotated dims -----------------------------------------------------


def _dims_of(dims: Any) -> tuple[int, ...]:
    return (int(dims),) if _int_arg(dims) else tuple(operator.index(d) for d in dims)


def movedim(input: Tensor, source: int | Sequence[int], destination: int | Sequence[int]) -> Tensor:
    """``input`` with dimensions ``source`` moved to positions ``destination``, the
    others keeping their order (a ``permute`` view).

    Example::

        >>> agrad.zeros(2, 3, 4).movedim(0, -1).shape
        agrad.Size([3, 4, 2])
    """
    if _int_arg(source) != _int_arg(destination):
        raise TypeError(f"movedim() received an invalid combination of arguments - got ({type(source).__name__}, "
                        f"{type(destination).__name__}), but expected one of: (int source, int destination) or "
                        "(tuple of ints source, tuple of ints destination)")
    src, dst = _dims_of(source), _dims_of(destination)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({list(src)} dims) should contain "
                           f"the same number of dims as destination ({list(dst)} dims)")
    nd = input.ndim
    moved, placed = [_wrap_dim(d, nd) for d in src], [_wrap_dim(d, nd) for d in dst]
    for what, given, wrapped in (("source", src, moved), ("destination", dst, placed)):
        if len(set(wrapped)) != len(wrapped):
            raise RuntimeError(f"movedim: repeated dim in `{what}` ({list(given)})")
    if nd == 0:
        return input[...]  # PyTorch's alias of a 0-d tensor
    order = [d for d in range(nd) if d not in moved]
    for to, frm in sorted(zip(placed, moved)):
        order.insert(to, frm)
    return permute(input, tuple(order))


moveaxis = movedim


def swapaxes(input: Tensor, axis0: int, axis1: int) -> Tensor:
    """``transpose`` under numpy's name (a view with ``axis0`` and ``axis1`` swapped)."""
    return transpose(input, axis0, axis1)


swapdims = transpose


@defop(view=True, ref=lambda torch: torch.t, vjp=lambda g: t(g), node="TBackward0", methods=("t",),
       samples=lambda rng: [((_r(rng, 3, 4),), {}), ((_r(rng, 3),), {}), ((_r(rng),), {}), ((_r(rng, 0, 2),), {})])
def t(xp, input):
    """A matrix transposed, a vector or 0-d tensor as it is (a view either way)."""
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return xp.swapaxes(input, 0, 1) if input.ndim == 2 else input[...]


def adjoint(input: Tensor) -> Tensor:
    """The conjugate transpose of (a batch of) matrices: for real tensors, the
    last two dimensions swapped (a view).  A 0-d tensor is returned as it is, with
    PyTorch's deprecation warning."""
    if input.ndim == 0:
        warnings.warn("adjoint() is deprecated on 0-D tensors. Consider using x.conj().", UserWarning, stacklevel=2)
        return input
    if input.ndim == 1:
        raise RuntimeError("tensor.adjoint() is only supported on matrices or batches of matrices. Got 1-D tensor.")
    return transpose(input, -2, -1)


def ravel(input: Tensor) -> Tensor:
    """All elements in one dimension (a view when the memory allows, as ``reshape``)."""
    return reshape(input, -1)


def unflatten(input: Tensor, dim: int, sizes: Sequence[int]) -> Tensor:
    """Dimension ``dim`` split into ``sizes`` (one of which may be -1, inferred); a view when ``reshape`` is.

    Example::

        >>> agrad.zeros(2, 6).unflatten(1, (3, -1)).shape
        agrad.Size([2, 3, 2])
    """
    if input.ndim == 0:
        raise RuntimeError(f"unflatten: Dimension specified as {dim} but tensor has no dimensions")
    d = _wrap_dim(dim, input.ndim)
    parts = tuple(operator.index(s) for s in sizes)
    if not parts:
        raise RuntimeError("unflatten: sizes must be non-empty")
    if parts.count(-1) > 1:
        raise RuntimeError("unflatten: only one dimension can be inferred")
    n, known = input.shape[d], int(np.prod([s for s in parts if s != -1], dtype=np.int64))
    inferred = -1 in parts
    # (A size below -1 is left to reshape, which words its own error.)
    if min(parts) >= -1 and ((known == 0 or n % known != 0) if inferred else known != n):
        raise RuntimeError(f"unflatten: Provided sizes {list(parts)} don't multiply up to the size of dim {d} ({n}) "
                           "in the input tensor")
    return reshape(input, tuple(input.shape[:d]) + parts + tuple(input.shape[d + 1:]))


def fliplr(input: Tensor) -> Tensor:
    """Columns (dimension 1) in reverse order; a copy, as ``flip``."""
    if input.ndim < 2:
        raise RuntimeError("Input must be >= 2-d.")
    return flip(input, (1,))


def flipud(input: Tensor) -> Tensor:
    """Rows (dimension 0) in reverse order; a copy, as ``flip``."""
    if input.ndim < 1:
        raise RuntimeError("Input must be >= 1-d.")
    return flip(input, (0,))


def _rot90_parse(input: Tensor, k: int = 1, dims: Sequence[int] = (0, 1)) -> tuple[tuple, dict]:
    dims = tuple(dims)
    if len(dims) != 2:
        raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
    if input.ndim < 2:
        raise RuntimeError(f"expected total dims >= 2, but got total dims = {input.ndim}")
    d0, d1 = dims
    if d0 == d1 or abs(d0 - d1) == input.ndim:
        raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {d0} and dim1 = {d1}")
    return (input,), {"k": operator.index(k), "dims": (_wrap_dim(d0, input.ndim), _wrap_dim(d1, input.ndim))}


@defop(ref=lambda torch: torch.rot90, vjp=lambda g, k, dims: rot90(g, -k, dims), node="Rot90Backward0",
       methods=("rot90",), parse=_rot90_parse,
       samples=lambda rng: [((_r(rng, 3, 4),), {}), ((_r(rng, 3, 4), 2), {}), ((_r(rng, 3, 4), -1), {}),
                            ((_r(rng, 3, 4), 0), {}), ((_r(rng, 2, 3, 4), 5, (2, 0)), {}),
                            ((_r(rng, 3, 4),), {"k": 3, "dims": [1, 0]}), ((_r(rng, 0, 2), 1), {})])
def rot90(xp, input, *, k=1, dims=(0, 1)):
    """Rotate by 90 degrees ``k`` times in the plane ``dims``, from the first dim's
    direction towards the second's (a copy)."""
    return xp.rot90(input, k, axes=dims).copy()


# -- repeats and differences ---------------------------------------------------------


def _repeated_indices(repeats: Tensor, output_size: int | None) -> Tensor:
    """``arange(len(repeats))`` with element ``i`` repeated ``repeats[i]`` times, in repeats' dtype and
    on its device (``torch.repeat_interleave(repeats)``, and the index behind the tensor form)."""
    if repeats.ndim != 1:
        raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
    if repeats.dtype not in (_dtype.int64, _dtype.int32):
        raise NotImplementedError(
            f"\"repeat_interleave_cpu\" not implemented for '{_dtype.SCALAR_TYPE_NAMES[repeats.dtype.name]}'")
    counts = _backends.transfer(repeats._data, CPU)
    if (counts < 0).any():
        raise RuntimeError("repeats can not be negative")
    index = np.repeat(np.arange(counts.shape[0], dtype=counts.dtype), counts)
    if output_size is not None and output_size != index.shape[0]:
        raise RuntimeError("allocated size does not match required size")
    return _on_device_of(index, repeats)


def repeat_interleave(input: Tensor, repeats: int | Tensor | None = None, dim: int | None = None, *,
                      output_size: int | None = None) -> Tensor:
    """Each element of ``input`` repeated ``repeats`` times along ``dim`` (over the
    flattened tensor when ``dim`` is None); ``repeats`` a number or one count per
    element.  ``repeat_interleave(counts)`` alone gives the indices ``0, 1, ...``
    each repeated ``counts[i]`` times.

    Example::

        >>> agrad.tensor([[1, 2], [3, 4]]).repeat_interleave(2, dim=0).tolist()
        [[1, 2], [1, 2], [3, 4], [3, 4]]
        >>> agrad.repeat_interleave(agrad.tensor([1, 0, 2])).tolist()
        [0, 2, 2]
    """
    if repeats is None:
        return _repeated_indices(input, output_size)
    x = reshape(input, -1) if dim is None else input
    d = _wrap_dim(0 if dim is None else dim, input.ndim)
    if isinstance(repeats, Tensor):  # an index_select of repeated indices: IndexSelectBackward0
        size = x.shape[d] if x.ndim else 1
        if repeats.ndim == 0 or (repeats.ndim == 1 and repeats.shape[0] == 1):
            repeats = repeats.reshape(1).expand(size)
        elif repeats.ndim == 1 and repeats.shape[0] != size:
            raise RuntimeError(f"repeats must have the same size as input along dim, but got repeats.size(0) = "
                               f"{repeats.shape[0]} and input.size({d}) = {size}")
        return index_select(x, d, _repeated_indices(repeats, output_size))
    count = operator.index(repeats)
    if count < 0:
        raise RuntimeError("Repeats must be non-negative")
    # PyTorch's composite: a new dimension after ``d``, expanded and merged into it.
    wide = x.unsqueeze(d + 1)
    shape = tuple(x.shape)
    if output_size is not None and output_size != shape[d] * count:
        raise RuntimeError(f"repeat_interleave: Invalid output_size, expected {shape[d] * count} but got {output_size}")
    wide = wide.expand(shape[:d + 1] + (count,) + shape[d + 1:])
    return reshape(wide, shape[:d] + (shape[d] * count,) + shape[d + 1:])


def diff(input: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None,
         append: Tensor | None = None) -> Tensor:
    """The ``n``-th forward difference along ``dim`` (``out[i] = x[i + 1] - x[i]``,
    ``!=`` for bools), after concatenating ``prepend`` and ``append`` there.

    Example::

        >>> agrad.diff(agrad.tensor([1, 3, 7, 6])).tolist()
        [2, 4, -1]
    """
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    d = _wrap_dim(dim, input.ndim)
    parts = [p for p in (prepend, input, append) if p is not None]
    for p in parts:
        if p.ndim != input.ndim:
            raise RuntimeError("diff expects prepend or append to be the same dimension as input")
        for k in range(input.ndim):
            if k != d and p.shape[k] != input.shape[k]:
                raise RuntimeError("diff expects the shape of tensor to prepend or append to match that of input "
                                   f"except along the differencing dimension; input.size({k}) = {input.shape[k]}, "
                                   f"but got tensor.size({k}) = {p.shape[k]}")
    x = cat(parts, d) if len(parts) > 1 else input.clone()
    step = logical_xor if x.dtype is _dtype.bool else sub
    for _ in range(n):  # one difference per order: n ops, each on whole tensors
        m = x.shape[d]
        if m == 0:
            break
        x = step(_slice_along(x, d, 1, m), _slice_along(x, d, 0, m - 1))
    return x


# -- unfold ----------------------------------------------------------------------------

# Note [Unfold windows]
# ~~~~~~~~~~~~~~~~~~~~~
# ``t.unfold(dim, size, step)`` is a strided view: window ``j`` along ``dim``
# starts at element ``j * step``, and the window's ``size`` elements become a
# new last dimension.  No memory is copied, so windows that overlap
# (``step < size``) share elements, and a write through one is seen by the
# others, as in PyTorch.  The backward (``unfold_backward``) therefore *adds*
# each window's gradient at its positions, ``add.at`` summing the overlaps,
# and is itself linear: its own gradient is the unfold of the incoming one.


def _unfold_parse(input: Tensor, dimension: int, size: int, step: int) -> tuple[tuple, dict]:
    d = _wrap_dim(dimension, input.ndim)
    size, step = operator.index(size), operator.index(step)
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    largest = input.shape[d] if input.ndim else 1
    if size > largest:
        raise RuntimeError(f"maximum size for tensor at dimension {d} is {largest} but size is {size}")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    return (input,), {"dimension": d, "size": size, "step": step}


@defop(view=True, ref=lambda torch: lambda x, *args: x.unfold(*args),
       vjp=lambda g, input_shape, dimension, size, step: _unfold_backward(g, input_shape, dimension, size, step),
       node="UnfoldBackward0", methods=("unfold",), parse=_unfold_parse,
       samples=lambda rng: [((_r(rng, 3, 7), 1, 3, 2), {}), ((_r(rng, 5, 2), 0, 2, 1), {}),
                            ((_r(rng, 2, 5, 3), -2, 5, 1), {}), ((_r(rng, 4, 6), 1, 2, 3), {}),
                            ((_r(rng), 0, 1, 1), {}), ((_r(rng, 0, 3), 0, 0, 1), {})])
def _unfold(xp, input, *, dimension, size, step):
    """Windows of ``size`` elements every ``step`` along ``dimension``, as a new
    last dimension (a strided view; Note [Unfold windows])."""
    if input.ndim == 0:
        return input.reshape(1)[:size]
    windows = (input.shape[dimension] - size) // step + 1
    st = input.strides
    shape = input.shape[:dimension] + (windows,) + input.shape[dimension + 1:] + (size,)
    strides = st[:dimension] + (st[dimension] * step,) + st[dimension + 1:] + (st[dimension],)
    return xp.lib.stride_tricks.as_strided(input, shape, strides)


@defop(ref=lambda torch: torch.ops.aten.unfold_backward,
       vjp=lambda g, dim, size, step: _unfold(g, dim, size, step), node="UnfoldBackwardBackward0",
       parse=lambda grad, input_sizes, dim, size, step: (
           (grad,), {"input_sizes": tuple(input_sizes), "dim": dim, "size": size, "step": step}),
       samples=lambda rng: [((_r(rng, 3, 3, 3), (3, 7), 1, 3, 2), {}), ((_r(rng, 4, 2, 2), (5, 2), 0, 2, 1), {}),
                            ((_r(rng, 4, 2, 2), (4, 6), 1, 2, 3), {}), ((_r(rng, 1), (), 0, 1, 1), {})])
def _unfold_backward(xp, grad, *, input_sizes, dim, size, step):
    """Zeros of ``input_sizes`` with each window's gradient added at its positions
    (``unfold``'s backward; Note [Unfold windows])."""
    out = xp.zeros(input_sizes, dtype=grad.dtype)
    if not input_sizes:  # a 0-d input has one window of at most one element
        out[...] = grad.sum()
        return out
    windows = grad.shape[dim]
    index = (xp.arange(windows) * step)[:, None] + xp.arange(size)  # (windows, size): positions along dim
    xp.add.at(xp.moveaxis(out, dim, 0), index, xp.moveaxis(grad, (dim, grad.ndim - 1), (0, 1)))
    return out


def _reshape_as(self: Tensor, other: Tensor) -> Tensor:
    """This tensor reshaped to ``other``'s shape (a view when ``reshape`` is)."""
    return reshape(self, tuple(other.shape))


# Tensor methods of this family that are not one entry's ``methods=``
# (composites, aliases with another signature); bound by ``_methods.bind``.
METHODS: dict[str, Any] = {
    "diag": diag,
    "diagflat": diagflat,
    "kron": kron,
    "tensor_split": tensor_split,
    "hsplit": hsplit,
    "vsplit": vsplit,
    "dsplit": dsplit,
    "movedim": movedim,
    "moveaxis": moveaxis,
    "swapaxes": swapaxes,
    "swapdims": swapdims,
    "adjoint": adjoint,
    "ravel": ravel,
    "unflatten": unflatten,
    "fliplr": fliplr,
    "flipud": flipud,
    "repeat_interleave": repeat_interleave,
    "diff": diff,
    "reshape_as": _reshape_as,
}
