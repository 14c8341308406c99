"""PyTorch's exceptions for the misuse errors numpy raises inside agrad's kernels.

Note [Translating numpy's errors]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Forward kernels run on numpy (or CuPy), whose errors for a misused op differ
from PyTorch's in type and text: ``ValueError`` for shapes that do not
broadcast, ``AxisError`` for a dim out of range, ``ZeroDivisionError``,
``MemoryError``.  Checking every call up front would cost on every ``a + b``;
instead the op dispatch (``_dispatch.apply``) and the factories catch them in
an ``except`` clause, free when nothing fails, and :func:`translate` raises
PyTorch's type with the op's name and the input shapes, and PyTorch's text
where it is specific (broadcasting, dims, allocation).  Errors agrad raises on
purpose are of PyTorch's type already and pass through unchanged.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__: list[str] = []

_AxisError = np.exceptions.AxisError


def dim_out_of_range(dim: int, ndim: int) -> IndexError:
    """PyTorch's error for ``dim`` outside ``[-ndim, ndim)`` (a 0-d tensor takes -1 and 0)."""
    n = max(ndim, 1)
    return IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], but got {dim})")


def broadcast_error(shapes: Sequence[tuple[int, ...]]) -> RuntimeError | None:
    """PyTorch's error for ``shapes`` that do not broadcast together (``infer_size``,
    folded left to right as TensorIterator does), or None if they do."""
    a = tuple(shapes[0]) if shapes else ()
    for b in shapes[1:]:
        n = max(len(a), len(b))
        out = []
        for i in range(n - 1, -1, -1):  # the rightmost mismatch is the one reported
            sa = a[i - n + len(a)] if i - n + len(a) >= 0 else 1
            sb = b[i - n + len(b)] if i - n + len(b) >= 0 else 1
            if sa != sb and sa != 1 and sb != 1:
                return RuntimeError(
                    f"The size of tensor a ({sa}) must match the size of tensor b ({sb}) at non-singleton dimension {i}"
                )
            out.append(sb if sa == 1 else sa)
        a = tuple(reversed(out))
    return None


def out_of_memory(exc: MemoryError, name: str) -> RuntimeError:
    """PyTorch's allocator error for numpy's ``MemoryError`` in ``name``."""
    size = getattr(exc, "_total_size", None)
    what = f"you tried to allocate {size} bytes" if size is not None else str(exc)
    return RuntimeError(f"{name}: DefaultCPUAllocator: can't allocate memory: {what} (not enough memory)")


def _shapes(shapes: Sequence[tuple[int, ...]]) -> str:
    return ", ".join(str(list(s)) for s in shapes)


def _duplicate_dim(attrs: dict[str, Any], ndim: int) -> RuntimeError | None:
    dims = attrs.get("dim", attrs.get("dims"))  # flip names it dims
    if not isinstance(dims, (tuple, list)):
        return None
    seen = set()
    for d in dims:
        w = d % max(ndim, 1)
        if w in seen:
            return RuntimeError(f"dim {w} appears multiple times in the list of dims")
        seen.add(w)
    return None


_NEGATION = ("Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, "
             "use the `~` or `logical_not()` operator instead.")


def _is_int(x: Any) -> bool:
    try:
        operator.index(x)
    except TypeError:
        return False
    return True


def _not_ints(name: str, attrs: dict[str, Any]) -> TypeError | None:
    """PyTorch's argument-parser error for sizes or dims that are not ints (numpy's TypeError
    in the kernel: a size sequence is passed through unchecked, so the common path pays nothing)."""
    for key in ("shape", "size"):
        sizes = attrs.get(key)
        if isinstance(sizes, tuple):
            for i, s in enumerate(sizes):
                if not _is_int(s):
                    return TypeError(f"{name}(): argument '{key}' (position 1) must be tuple of ints, but found "
                                     f"element of type {type(s).__name__} at pos {i}")
    dim = attrs.get("dim")
    if dim is not None and not _is_int(dim) and not (isinstance(dim, (tuple, list)) and all(map(_is_int, dim))):
        return TypeError(f"{name}() received an invalid combination of arguments - got (dim={type(dim).__name__}, "
                         "), but expected an int or a tuple of ints as dim")
    return None


def translate(exc: BaseException, name: str, shapes: Sequence[tuple[int, ...]],
              attrs: dict[str, Any]) -> BaseException | None:
    """PyTorch's exception for ``exc``, raised by numpy in op ``name`` on inputs of
    ``shapes``; None when ``exc`` is agrad's own and should pass unchanged.
    See Note [Translating numpy's errors]."""
    msg = str(exc)
    if isinstance(exc, _AxisError):  # both an IndexError and a ValueError
        if exc.axis is not None and exc.ndim is not None:
            return dim_out_of_range(exc.axis, exc.ndim)
        return IndexError(f"{name}(): {msg}")
    if isinstance(exc, IndexError):  # numpy's indexing words for PyTorch's
        if " for axis " in msg:
            return IndexError(msg.replace(" for axis ", " for dimension "))
        if msg.startswith("arrays used as indices must be of integer"):
            return IndexError("tensors used as indices must be long, int, byte or bool tensors")
        if msg.startswith("too many indices for array"):
            return IndexError(f"too many indices for tensor of dimension {len(shapes[0]) if shapes else 0}")
        return None
    if isinstance(exc, MemoryError):
        return out_of_memory(exc, name)
    if isinstance(exc, TypeError):
        return RuntimeError(_NEGATION) if "boolean negative" in msg else _not_ints(name, attrs)
    if isinstance(exc, ValueError):
        err: BaseException | None = None
        if "broadcast" in msg:
            err = broadcast_error(shapes)
        elif "duplicate value in 'axis'" in msg or "repeated axis" in msg:
            err = _duplicate_dim(attrs, len(shapes[0]) if shapes else 0)
        return err or RuntimeError(f"{name}(): {msg} (input shapes: {_shapes(shapes)})")
    if isinstance(exc, ZeroDivisionError):
        return RuntimeError(f"{name}(): {msg} (input shapes: {_shapes(shapes)})")
    return None
