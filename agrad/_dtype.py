"""Dtypes and PyTorch's type-promotion rules.

agrad's dtypes are thin named wrappers over numpy dtypes, so that
``agrad.float32`` prints and compares like ``torch.float32`` while the arrays
underneath stay plain numpy (or CuPy) arrays.

Promotion follows PyTorch, not numpy: operands are ranked by *category*
(bool < integer < floating) and by *priority* (dimensioned tensors >
zero-dim tensors > Python scalars).  The result's category is the highest
category present; its dtype is the promotion of the highest-priority operands
of that category, and a Python scalar that raises the category yields the
default dtype (``float32``) or ``int64``.  So ``int32_tensor * 2.5`` is
``float32`` (numpy: ``float64``) and ``float32_tensor + float64_zero_dim`` is
``float32``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = [
    "dtype", "float16", "float32", "float64", "int8", "int16", "int32", "int64",
    "uint8", "bool", "get_default_dtype", "set_default_dtype",
]

_builtin_bool = bool


class dtype:
    """The data type of a :class:`agrad.Tensor` (mirrors ``torch.dtype``)."""

    __slots__ = ("name", "np", "is_floating_point", "itemsize", "_category")

    def __init__(self, name: str, np_dtype: Any, category: int) -> None:
        self.name = name
        self.np = np.dtype(np_dtype)
        self.is_floating_point = category == _FLOAT
        self.itemsize = self.np.itemsize
        self._category = category

    def __repr__(self) -> str:
        return f"agrad.{self.name}"

    def __reduce__(self) -> str:
        return self.name


_BOOL, _INT, _FLOAT = 0, 1, 2

float16 = dtype("float16", np.float16, _FLOAT)
float32 = dtype("float32", np.float32, _FLOAT)
float64 = dtype("float64", np.float64, _FLOAT)
int8 = dtype("int8", np.int8, _INT)
int16 = dtype("int16", np.int16, _INT)
int32 = dtype("int32", np.int32, _INT)
int64 = dtype("int64", np.int64, _INT)
uint8 = dtype("uint8", np.uint8, _INT)
bool = dtype("bool", np.bool_, _BOOL)  # noqa: A001 - mirrors torch.bool

_ALL = (float16, float32, float64, int8, int16, int32, int64, uint8, bool)

# PyTorch's C++ names of the scalar types, as its kernels' messages spell them, by numpy dtype name.
SCALAR_TYPE_NAMES = {"float16": "Half", "float32": "Float", "float64": "Double", "int8": "Char", "int16": "Short",
                     "int32": "Int", "int64": "Long", "uint8": "Byte", "bool": "Bool"}


def legacy_type_name(d: dtype, device_type: str) -> str:
    """PyTorch's legacy type name of a tensor (``torch.FloatTensor``,
    ``torch.cuda.HalfTensor``), spelled for agrad, as its messages show it."""
    prefix = "agrad." if device_type == "cpu" else f"agrad.{device_type}."
    return f"{prefix}{SCALAR_TYPE_NAMES[d.name]}Tensor"


# The C++ element types' names, as PyTorch's ``TypeMeta`` spells them in some messages (``.grad`` assignment).
CPP_TYPE_NAMES = {"float16": "c10::Half", "float32": "float", "float64": "double", "int8": "signed char",
                  "int16": "short int", "int32": "int", "int64": "long int", "uint8": "unsigned char", "bool": "bool"}
_FROM_NP: dict[np.dtype, dtype] = {d.np: d for d in _ALL}
_default_float = float32


def get_default_dtype() -> dtype:
    """Return the default floating dtype (``float32`` unless changed)."""
    return _default_float


def set_default_dtype(d: dtype) -> None:
    """Set the default floating dtype used for Python floats and factories."""
    global _default_float
    if not isinstance(d, dtype) or not d.is_floating_point:
        raise TypeError(f"only floating-point types are supported as the default type, got {d}")
    _default_float = d


# Note [Checked scalar conversion]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Writing a Python number into a tensor (``full``, ``fill_``, ``t[i] = v``,
# ``masked_fill``, a ``where`` or ``clamp`` operand) goes through PyTorch's
# ``checked_convert``: a value outside the dtype's range raises "value cannot
# be converted to type float without overflow" instead of becoming inf or
# wrapping around.  Infinities may go to floating dtypes, NaN and infinities
# never to integers, a negative int may wrap into an unsigned dtype as long as
# its magnitude fits, and bool accepts anything.  ``tensor(data, dtype=...)``
# checks only integer dtypes (and names them ``int8``, not ``int8_t``).
# Arithmetic with a number (``t32 * 1e300``) is not checked: it gives inf, as
# in PyTorch.  (PyTorch skips the check when filling a one-element half tensor;
# agrad checks it.)
_C_NAMES = {"float16": "c10::Half", "float32": "float", "float64": "double", "int8": "int8_t",
            "int16": "int16_t", "int32": "int32_t", "int64": "int64_t", "uint8": "uint8_t"}


def _overflows(value: Any, d: dtype) -> _builtin_bool:
    kind = d.np.kind
    if kind == "b" or isinstance(value, (_builtin_bool, np.bool_)):
        return False
    if kind == "f":
        return (isinstance(value, (float, np.floating)) and math.isfinite(value)
                and abs(float(value)) > float(np.finfo(d.np).max))
    info: Any = np.iinfo(d.np)  # numpy types its bounds as object for a generic dtype
    if isinstance(value, (float, np.floating)):
        return not info.min <= value <= info.max  # NaN fails both comparisons
    value = int(value)
    return value > info.max or (-value > info.max if kind == "u" else value < info.min)


def check_scalar(value: Any, d: dtype) -> None:
    """Raise PyTorch's ``RuntimeError`` if the number ``value`` overflows ``d``.
    See Note [Checked scalar conversion]."""
    if _overflows(value, d):
        raise RuntimeError(f"value cannot be converted to type {_C_NAMES[d.name]} without overflow")


def convert_scalar(value: Any, d: dtype) -> Any:
    """``value`` checked (Note [Checked scalar conversion]) and converted to
    ``d`` as PyTorch's cast does (-1 into uint8 is 255), as a Python number."""
    check_scalar(value, d)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(value).astype(d.np).item()


def check_values(arr: np.ndarray, d: dtype) -> None:
    """``tensor(data, dtype=d)``'s check of the numbers read from ``data``
    (Note [Checked scalar conversion]): integer dtypes only."""
    if d.np.kind in "iu" and arr.dtype.kind in "fiu" and arr.size:
        if _overflows(arr.min().item(), d) or _overflows(arr.max().item(), d):
            raise RuntimeError(f"value cannot be converted to type {d.name} without overflow")


def from_numpy_dtype(np_dtype: Any) -> dtype:
    """Map a numpy dtype to agrad's, raising ``TypeError`` for unsupported ones."""
    try:
        return _FROM_NP[np.dtype(np_dtype)]
    except KeyError:
        raise TypeError(
            f"can't convert np.ndarray of type {np.dtype(np_dtype)}. The only supported types "
            "are: float64, float32, float16, int64, int32, int16, int8, uint8, and bool."
        ) from None


def to_dtype(d: Any, op: str | None = None) -> dtype:
    """Accept an agrad dtype, a numpy dtype or a Python type and return agrad's; a string, which
    numpy would read as a dtype's name, is PyTorch's ``TypeError`` naming ``op``."""
    if isinstance(d, dtype):
        return d
    if d is float:
        return _default_float
    if d is int:
        return int64
    if d is _builtin_bool:
        return bool
    if isinstance(d, str):
        where = f"{op}(): argument" if op else "argument"
        raise TypeError(f"{where} 'dtype' must be agrad.dtype, not {type(d).__name__}")
    return from_numpy_dtype(d)


def _promote_pair(a: dtype, b: dtype) -> dtype:
    if a is b:
        return a
    if a._category != b._category:
        return a if a._category > b._category else b
    return _FROM_NP[np.promote_types(a.np, b.np)]


def scalar_category(value: Any) -> int:
    if isinstance(value, _builtin_bool):
        return _BOOL
    if isinstance(value, int):
        return _INT
    return _FLOAT


def result_type(dims: list[dtype], zero_dims: list[dtype], scalars: list[Any]) -> dtype:
    """PyTorch's ``result_type`` over dimensioned, zero-dim and scalar operands."""
    cats = [d._category for d in dims] + [d._category for d in zero_dims]
    cats += [scalar_category(s) for s in scalars]
    top = max(cats)
    for group in (dims, zero_dims):
        hits = [d for d in group if d._category == top]
        if hits:
            out = hits[0]
            for d in hits[1:]:
                out = _promote_pair(out, d)
            return out
    return (bool, int64, _default_float)[top]
