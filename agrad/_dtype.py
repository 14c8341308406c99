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

Note [bfloat16 through ml_dtypes]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
numpy has no bfloat16; the ``ml_dtypes`` package registers one (an optional
extra: ``pip install ml_dtypes``).  ``agrad.bfloat16`` always exists,
so code that names it imports everywhere, but without the package its ``np``
is None and :func:`to_dtype` refuses it with an error naming the package: every
factory and cast goes through :func:`to_dtype`.  ml_dtypes' dtype is a numpy
*void* kind (``dtype.kind == "V"``), not ``"f"``: code that asks whether an
array is floating must ask :func:`is_floating_np` (or the agrad dtype's
``is_floating_point``), never ``kind == "f"``.  numpy cannot promote bfloat16
with float16 (PyTorch gives float32), so :func:`_promote_pair` does.
ml_dtypes' ufunc loops convert each element to float32, compute and round
once, as PyTorch's CPU kernels do for elementwise ops; reductions accumulate in
bfloat16 (PyTorch: float32) and ``matmul`` returns float32.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

try:  # Note [bfloat16 through ml_dtypes]
    import ml_dtypes as _ml_dtypes
except ImportError:  # pragma: no cover - exercised in a subprocess by tests/ops/test_bfloat16.py
    _ml_dtypes = None  # type: ignore[assignment]  # the module, or None where it is not installed

__all__ = [
    "dtype", "float16", "float32", "float64", "bfloat16", "int8", "int16", "int32", "int64",
    "uint8", "bool", "get_default_dtype", "set_default_dtype", "finfo", "iinfo", "promote_types", "can_cast",
]

_builtin_bool = bool
_builtin_float = float
_builtin_int = int


class dtype:
    """The data type of a :class:`agrad.Tensor` (mirrors ``torch.dtype``)."""

    __slots__ = ("name", "np", "is_floating_point", "is_complex", "is_signed", "itemsize", "_category")
    np: Any  # a numpy dtype; None for bfloat16 without ml_dtypes (Note [bfloat16 through ml_dtypes])

    def __init__(self, name: str, np_dtype: Any, category: int, itemsize: int | None = None) -> None:
        self.name = name
        self.np = None if np_dtype is None else np.dtype(np_dtype)
        self.is_floating_point = category == _FLOAT
        self.is_complex = False
        self.is_signed = category == _FLOAT or (category == _INT and name != "uint8")
        self.itemsize = self.np.itemsize if itemsize is None else itemsize
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
bfloat16 = dtype("bfloat16", None if _ml_dtypes is None else _ml_dtypes.bfloat16, _FLOAT, itemsize=2)

# Every dtype agrad has; bfloat16 only where ml_dtypes is installed.
_ALL = tuple(d for d in (float16, float32, float64, bfloat16, int8, int16, int32, int64, uint8, bool)
             if d.np is not None)

# PyTorch's C++ names of the scalar types, as its kernels' messages spell them, by numpy dtype name.
SCALAR_TYPE_NAMES = {"float16": "Half", "float32": "Float", "float64": "Double", "bfloat16": "BFloat16",
                     "int8": "Char", "int16": "Short", "int32": "Int", "int64": "Long", "uint8": "Byte",
                     "bool": "Bool"}


def is_floating_np(np_dtype: Any) -> _builtin_bool:
    """Whether a numpy dtype is one of agrad's floating dtypes: kind ``"f"``, or
    ml_dtypes' bfloat16, whose kind is ``"V"`` (Note [bfloat16 through ml_dtypes])."""
    return np_dtype.kind == "f" or (np_dtype.kind == "V" and np_dtype == bfloat16.np)


def legacy_type_name(d: dtype, device_type: str) -> str:
    """PyTorch's legacy type name of a tensor (``torch.FloatTensor``,
    ``torch.cuda.HalfTensor``), spelled for agrad, as its messages show it."""
    prefix = "agrad." if device_type == "cpu" else f"agrad.{device_type}."
    return f"{prefix}{SCALAR_TYPE_NAMES[d.name]}Tensor"


# The C++ element types' names, as PyTorch's ``TypeMeta`` spells them in some messages (``.grad`` assignment).
CPP_TYPE_NAMES = {"float16": "c10::Half", "float32": "float", "float64": "double", "bfloat16": "c10::BFloat16",
                  "int8": "signed char", "int16": "short int", "int32": "int", "int64": "long int",
                  "uint8": "unsigned char", "bool": "bool"}
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
    _default_float = to_dtype(d)  # refuses bfloat16 without ml_dtypes


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
_C_NAMES = {"float16": "c10::Half", "float32": "float", "float64": "double", "bfloat16": "c10::BFloat16",
            "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t", "uint8": "uint8_t"}


def _np_finfo(d: dtype) -> Any:
    """numpy's ``finfo`` of a floating dtype (ml_dtypes' for bfloat16, which numpy's refuses)."""
    return _ml_dtypes.finfo(d.np) if d is bfloat16 else np.finfo(d.np)


def _overflows(value: Any, d: dtype) -> _builtin_bool:
    if d._category == _BOOL or isinstance(value, (_builtin_bool, np.bool_)):
        return False
    if d._category == _FLOAT:
        return (isinstance(value, (float, np.floating)) and math.isfinite(value)
                and abs(float(value)) > float(_np_finfo(d).max))
    info: Any = np.iinfo(d.np)  # numpy types its bounds as object for a generic dtype
    if isinstance(value, (float, np.floating)):
        return not info.min <= value <= info.max  # NaN fails both comparisons
    value = int(value)
    return value > info.max or (-value > info.max if d.np.kind == "u" else value < info.min)


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
            "are: float64, float32, float16, int64, int32, int16, int8, uint8, and bool"
            + (" (and ml_dtypes' bfloat16)." if bfloat16.np is not None else ".")
        ) from None


def _unavailable(d: dtype) -> RuntimeError:
    return RuntimeError(f"agrad.{d.name} needs the ml_dtypes package, which is not installed: "
                        "pip install ml_dtypes")


def to_dtype(d: Any, op: str | None = None) -> dtype:
    """Accept an agrad dtype, a numpy dtype or a Python type and return agrad's; a string, which
    numpy would read as a dtype's name, is PyTorch's ``TypeError`` naming ``op``."""
    if isinstance(d, dtype):
        if d.np is None:  # Note [bfloat16 through ml_dtypes]
            raise _unavailable(d)
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
    if a is bfloat16 or b is bfloat16:  # numpy has no common type of bfloat16 and float16; PyTorch's is float32
        other = b if a is bfloat16 else a
        return float32 if other is float16 else other
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


# -- dtype helpers of the public API ----------------------------------------------


def _dtype_arg(d: Any, fn: str, arg: str, position: int) -> dtype:
    """``d`` as a dtype argument of ``fn``: an agrad dtype or a Python type, as
    PyTorch's parser accepts (``float`` is float64 there, not the default dtype)."""
    if d is _builtin_float:
        return float64
    if d is _builtin_int:
        return int64
    if d is _builtin_bool:
        return bool
    if not isinstance(d, dtype):
        raise TypeError(f"{fn}(): argument '{arg}' (position {position}) must be agrad.dtype, "
                        f"not {type(d).__name__}")
    return to_dtype(d)


def promote_types(type1: dtype, type2: dtype) -> dtype:
    """The smallest dtype that both ``type1`` and ``type2`` convert to without
    changing category (PyTorch's rules, so bfloat16 with float16 is float32).

    Example::

        >>> agrad.promote_types(agrad.int32, agrad.float16)
        agrad.float16
        >>> agrad.promote_types(agrad.uint8, agrad.int8)
        agrad.int16
    """
    return _promote_pair(_dtype_arg(type1, "promote_types", "type1", 1),
                         _dtype_arg(type2, "promote_types", "type2", 2))


def can_cast(from_: dtype, to: dtype) -> _builtin_bool:
    """Whether PyTorch's casting rules allow ``from_`` to ``to``: any cast that does
    not lower the category (floating > integer > bool).

    Example::

        >>> agrad.can_cast(agrad.float64, agrad.float16), agrad.can_cast(agrad.float32, agrad.int64)
        (True, False)
    """
    src = _dtype_arg(from_, "can_cast", "from_", 1)
    dst = _dtype_arg(to, "can_cast", "to", 2)
    return src._category <= dst._category


class finfo:
    """The numerical properties of a floating dtype (mirrors ``torch.finfo``).

    Attributes are Python numbers: ``bits``, ``eps`` (the gap between 1 and the
    next value), ``max``, ``min``, ``tiny`` and ``smallest_normal`` (the smallest
    positive normal number), ``resolution`` (``10 ** -precision`` for the decimal
    digits the type holds) and ``dtype`` (its name).

    Example::

        >>> agrad.finfo(agrad.float16).eps
        0.0009765625
        >>> agrad.finfo()  # the default dtype's
        finfo(resolution=1e-06, min=-3.40282e+38, max=3.40282e+38, eps=1.19209e-07, smallest_normal=1.17549e-38, tiny=1.17549e-38, dtype=float32)
    """  # noqa: E501 - a repr is one line

    bits: int
    eps: float
    max: float
    min: float
    tiny: float
    smallest_normal: float
    resolution: float
    dtype: str

    def __init__(self, type: Any = None) -> None:  # noqa: A002 - PyTorch's argument name
        d = get_default_dtype() if type is None else _dtype_arg(type, "finfo", "type", 1)
        if not d.is_floating_point:
            raise TypeError("agrad.finfo() requires a floating point input type. Use agrad.iinfo to handle "
                            "'agrad.finfo'")
        info = _np_finfo(d)
        self.bits = d.itemsize * 8
        self.eps = _builtin_float(info.eps)
        self.max = _builtin_float(info.max)
        self.min = -self.max
        self.tiny = self.smallest_normal = _builtin_float(info.smallest_normal)
        self.resolution = 10.0 ** -math.floor(-math.log10(self.eps))
        self.dtype = d.name

    def __eq__(self, other: object) -> _builtin_bool:
        return isinstance(other, finfo) and other.dtype == self.dtype

    def __hash__(self) -> int:
        return hash(("finfo", self.dtype))

    def __repr__(self) -> str:
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.smallest_normal:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """The range of an integer dtype (mirrors ``torch.iinfo``): ``bits``, ``min``,
    ``max`` (Python ints) and ``dtype`` (its name).

    Example::

        >>> agrad.iinfo(agrad.int8)
        iinfo(min=-128, max=127, dtype=int8)
    """

    bits: int
    min: int
    max: int
    dtype: str

    def __init__(self, type: Any) -> None:  # noqa: A002 - PyTorch's argument name
        d = _dtype_arg(type, "iinfo", "type", 1)
        if d is bool:
            raise TypeError("agrad.bool is not supported by agrad.iinfo")
        if d._category != _INT:
            raise TypeError("agrad.iinfo() requires an integer input type. Use agrad.finfo to handle "
                            "'agrad.iinfo'")
        info = np.iinfo(d.np)
        self.bits = d.itemsize * 8
        self.min = _builtin_int(info.min)
        self.max = _builtin_int(info.max)
        self.dtype = d.name

    def __eq__(self, other: object) -> _builtin_bool:
        return isinstance(other, iinfo) and other.dtype == self.dtype

    def __hash__(self) -> int:
        return hash(("iinfo", self.dtype))

    def __repr__(self) -> str:
        return f"iinfo(min={_builtin_float(self.min):g}, max={_builtin_float(self.max):g}, dtype={self.dtype})"
