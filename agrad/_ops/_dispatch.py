"""Running an op: its arguments made tensors of one dtype on one device, its
forward run there, and its result made a view where the op returns one.

:func:`apply` is the hot path of every op call: it coerces the arguments
(Python numbers become constant tensors, PyTorch's type promotion applies),
places the computation (Note [Mixed devices]), runs the forward (on the
cooperative runner when one is active), translates numpy's errors, and hands
the result to ``record`` (``_record``) when grad mode is on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from agrad import _ambient, _backends, _dtype, _errors
from agrad._device import CPU
from agrad._grad_mode import grad_enabled
from agrad._ops._record import record
from agrad._ops._schema import OpDef
from agrad._tensor import PLAIN_TYPES, InferenceCounter, Tensor, mark_inference

__all__ = ["apply"]

_ndarray = np.ndarray
_FROM_NP = _dtype._FROM_NP
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


def _as_constant(value: Any, dt: _dtype.dtype | None) -> Tensor:
    if isinstance(value, Tensor):
        return value
    if isinstance(value, _ndarray):
        return Tensor._make(value if dt is None else value.astype(dt.np, copy=False))
    if isinstance(value, (bool, int, float, np.generic)):
        d = dt if dt is not None else _dtype.result_type([], [], [value])
        return _constant(value, d.np)
    raise TypeError(f"expected a Tensor or a number, got {type(value).__name__}")


# Note [Scalar constants]
# ~~~~~~~~~~~~~~~~~~~~~~~
# A Python number in an op (``y * 1.0001``) becomes a 0-d constant tensor of
# the op's dtype, so forward kernels and backward rules only ever see tensors.
# Constants never require grad and nothing can write to them (no user code
# holds them), so they are cached by (type, value, dtype): a loop of scalar
# ops allocates no new constant per step.  The cache is bounded by clearing.
_CONSTANTS: dict[tuple[type, Any, np.dtype], Tensor] = {}


def _constant(value: Any, np_dtype: np.dtype) -> Tensor:
    key = (type(value), value, np_dtype)
    t = _CONSTANTS.get(key)
    if t is None:
        if len(_CONSTANTS) >= 4096:
            _CONSTANTS.clear()
        with np.errstate(over="ignore", invalid="ignore"):  # 1e300 in float32 is inf, silently, as in PyTorch
            arr = np.asarray(value, dtype=np_dtype)
        arr.flags.writeable = False
        t = _CONSTANTS[key] = Tensor._make(arr)
    return t


_PY_NUMBERS = (float, int)


# Note [Half precision computes in float32]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch's CPU kernels compute float16 and bfloat16 in float32 ("opmath")
# and round each result once; Python numbers in the op stay float32.  numpy
# and ml_dtypes round after every ufunc (a forward of several rounds several
# times), accumulate reductions in the half type, and ml_dtypes' matmul
# returns float32.  So an op on half-precision tensors runs its forward on
# float32 copies, with its numbers as float32 constants, and ``apply``
# rounds a float32 result back to the half type: PyTorch's values, bit for
# bit where its kernel is one float32 computation.  View ops are exempt (they
# compute nothing and must share memory), and so are ops told their result's
# dtype (``dtype=``: ``to``, ``sum(dtype=...)``) and ops whose result depends
# on the input's dtype itself (``opmath=False``: ``nan_to_num``, ``nextafter``,
# ``fill_``, the random fills).  The fast paths of
# ``apply`` and ``_coerce`` take float32/float64 by identity, so half
# tensors fall through to here and full-precision calls pay nothing.
_HALF = {np.dtype(np.float16)} | ({_dtype.bfloat16.np} if _dtype.bfloat16.np is not None else set())


def _in_float32(op: OpDef, attrs: dict[str, Any]) -> bool:
    """Whether this call of ``op`` computes half-precision inputs in float32
    (Note [Half precision computes in float32])."""
    return op.opmath and not op.view and attrs.get("dtype") is None


def _opmath(op: OpDef, arrays: list[Any], attrs: dict[str, Any], dev: Any) -> Any:
    """The half dtype a call computes in float32 (Note [Half precision computes
    in float32]), or None; ``arrays`` are then cast to float32 in place."""
    half = next((a.dtype for a in arrays if a.dtype in _HALF), None)
    if half is None or not _in_float32(op, attrs):
        return None
    with _backends.on(dev):
        arrays[:] = [a.astype(_F32) if a.dtype in _HALF else a for a in arrays]
    return half


def _coerce(op: OpDef, args: Sequence[Any], attrs: dict[str, Any]) -> tuple[tuple[Tensor, ...], list[Any], Any, Any]:
    """Turn numbers into constant tensors and apply PyTorch's type promotion.

    Returns the tensors (what the graph records and the node saves), the
    arrays the forward computes on, cast to the common dtype and all on one
    device, and that device (Note [Mixed devices]).  The casts are not
    recorded: the engine casts each gradient back to its input's dtype when
    routing it, as PyTorch's ``validate_outputs`` does.
    """
    if not (op.promote or op.to_float):
        tensors = tuple(a if isinstance(a, Tensor) else _as_constant(a, None) for a in args)
        arrays = [t._data for t in tensors]
        dev = _placement(arrays)
        return tensors, arrays, dev, _opmath(op, arrays, attrs, dev)
    if len(args) == 2:
        # Fast path: a tensor and a Python number of no higher category (float
        # tensor * 2.5, int tensor + 1); ``apply`` takes the tensors-only ones.
        a, b = args
        ta, tb = type(a), type(b)
        if ta in PLAIN_TYPES and tb in _PY_NUMBERS or tb in PLAIN_TYPES and ta in _PY_NUMBERS:
            t, num = (a, b) if ta in PLAIN_TYPES else (b, a)
            dt = t._data.dtype
            if dt is _F32 or dt is _F64 or (type(num) is int and dt.kind in "iu" and not op.to_float):
                c = _constant(num, dt)
                if t is a:
                    arrays = [a._data, c._data]
                    return (a, c), arrays, CPU if type(arrays[0]) is _ndarray else _placement(arrays), None
                arrays = [c._data, b._data]
                return (c, b), arrays, CPU if type(arrays[1]) is _ndarray else _placement(arrays), None
    dims: list[_dtype.dtype] = []
    zero_dims: list[_dtype.dtype] = []
    scalars: list[Any] = []
    for a in args:
        if isinstance(a, Tensor):
            (dims if a._data.ndim else zero_dims).append(_FROM_NP[a._data.dtype])
        elif isinstance(a, _ndarray):
            (dims if a.ndim else zero_dims).append(_dtype.from_numpy_dtype(a.dtype))
        else:
            scalars.append(a)
    target = _dtype.result_type(dims, zero_dims, scalars)
    if op.to_float and not target.is_floating_point:
        target = _dtype.get_default_dtype()
    half = target.np if target.np in _HALF and _in_float32(op, attrs) else None
    compute = _dtype.float32 if half is not None else target
    tensors = tuple(a if isinstance(a, Tensor) else _as_constant(a, compute) for a in args)
    arrays = [t._data for t in tensors]
    dev = _placement(arrays)
    if any(a.dtype != compute.np for a in arrays):
        with _backends.on(dev):
            arrays = [a if a.dtype == compute.np else a.astype(compute.np) for a in arrays]
    return tensors, arrays, dev, half


# Note [Mixed devices]
# ~~~~~~~~~~~~~~~~~~~~
# An op runs on its inputs' device, and all of them must be on one device, as
# PyTorch requires, with one exception: a 0-d CPU tensor (a Python number made
# a tensor, Note [Scalar constants], or a user's scalar) goes along with
# tensors on another device.  Only the array the forward computes on is
# copied; the graph records the CPU tensor itself, so its gradient, computed
# on the device, is moved back to the CPU when the engine routes it (the
# gradient is conformed to the input's device as to its shape and dtype).
def _placement(arrays: list[Any]) -> Any:
    """The device ``arrays`` compute on, 0-d CPU arrays moved there in place."""
    for a in arrays:
        if type(a) is not _ndarray:
            break
    else:
        return CPU
    dev = CPU
    for a in arrays:
        if type(a) is not _ndarray:
            d = _backends.device_of(a)
            if dev is not CPU and d is not dev:
                raise RuntimeError(
                    f"Expected all tensors to be on the same device, but found at least two devices, {dev} and {d}!"
                )
            dev = d
    for i, a in enumerate(arrays):
        if type(a) is _ndarray:
            if a.ndim:
                raise RuntimeError(
                    f"Expected all tensors to be on the same device, but found at least two devices, {dev} and cpu!"
                )
            arrays[i] = _backends.transfer(a, dev)
    return dev


def _as_array(out: Any, xp: Any) -> Any:
    """A forward's result as an array: numpy scalars (full reductions) become
    0-d arrays; an array of any backend (``.to()`` returns one) stays as it is."""
    if isinstance(out, np.generic) or not _backends.is_array(out):
        return xp.asarray(out)
    return out


def apply(op: OpDef, args: Sequence[Any], attrs: dict[str, Any]) -> Tensor:
    """Run ``op`` forward on ``args`` and, if grad mode is on and any input
    requires grad, record its backward Node (``record``).  The hot path of every op."""
    # The commonest calls need no promotion: one tensor, or two of one dtype
    # (float unless the op computes integers in float).  Everything else,
    # numbers included, goes through ``_coerce``.
    # Half-precision tensors take ``_coerce`` (Note [Half precision computes in float32]).
    n = len(args)
    half = None
    if (n == 1 and type(a := args[0]) in PLAIN_TYPES and type(ad := a._data) is _ndarray
            and ((dt := ad.dtype) is _F32 or dt is _F64 or (not op.to_float and dt.kind in "biu"))):
        tensors, arrays = args, [ad]
        dev = CPU
    elif (n == 2 and type(a := args[0]) in PLAIN_TYPES and type(b := args[1]) in PLAIN_TYPES
          and type(ad := a._data) is _ndarray and type(bd := b._data) is _ndarray
          and (dt := ad.dtype) is bd.dtype and (dt is _F32 or dt is _F64 or (not op.to_float and dt.kind in "biu"))):
        tensors, arrays = args, [ad, bd]
        dev = CPU
    else:
        tensors, arrays, dev, half = _coerce(op, args, attrs)
    try:
        if dev is CPU:
            xp = np
            if not _ambient.running or (runner := _ambient.kernel_runner()) is None:
                out = op.forward(np, *arrays, **attrs) if attrs else op.forward(np, *arrays)
            else:  # Notes [Cooperative calls], [Products in row blocks]: may pause, or split
                out = runner.forward(op, arrays, attrs)
            if type(out) is not _ndarray:
                out = _as_array(out, np)
        else:
            xp = _backends.backend(dev.type).xp
            with _backends.on(dev):
                out = op.forward(xp, *arrays, **attrs)
                if type(out) is not _ndarray:
                    out = _as_array(out, xp)
    except (ValueError, IndexError, TypeError, ZeroDivisionError, MemoryError) as exc:
        # Note [Translating numpy's errors]: free unless the kernel raised.
        err = _errors.translate(exc, op.name, [a.shape for a in arrays], attrs)
        if err is None:
            raise
        raise err from None
    if half is not None and out.dtype == _F32:
        out = out.astype(half)
    if op.view and out.base is not None and arrays[0] is tensors[0]._data and xp.may_share_memory(out, arrays[0]):
        if type(counter := tensors[0]._version_counter) is InferenceCounter:
            # A view of an inference tensor is an inference tensor, in any mode,
            # which autograd does not track (PyTorch: not _is_view(), no grad_fn).
            return Tensor._make(out, version_counter=counter)
        result = Tensor._make(out)
        _make_view(op, attrs, tensors[0], result, xp)
    else:
        result = Tensor._make(out)
    if not grad_enabled.get():
        if result._base is None:
            mark_inference(result)  # Note [Inference tensors]
        return result
    # Integer and bool results never require grad; kind "V" is bfloat16 (Note [bfloat16 through ml_dtypes]).
    if op.vjps is not None and out.dtype.kind in "fcV":
        record(op, tensors, attrs, result)
    return result


def _make_view(op: OpDef, attrs: dict[str, Any], src: Tensor, view: Tensor, xp: Any) -> None:
    """Mark ``view`` (whose array is a view of ``src``'s) as a view of
    ``src``'s base: shared memory and version counter, and a replay of the view
    op(s) from the base, as an array function and as a recorded agrad op."""
    parent = src._view_fn if src._base is not None else None
    forward = op.forward
    if parent is None:
        view_np = lambda arr: forward(xp, arr, **attrs)  # noqa: E731
        view_t = lambda base: apply(op, (base,), attrs)  # noqa: E731
    else:
        parent_np, parent_t = parent
        view_np = lambda arr: forward(xp, parent_np(arr), **attrs)  # noqa: E731
        view_t = lambda base: apply(op, (parent_t(base),), attrs)  # noqa: E731
    view._become_view(src, (view_np, view_t))
