"""Tensor factories: ``tensor``, ``zeros``, ``ones``, ``full``, ``arange``, ``eye``,
``rand``, ``randn``, the ``*_like`` family and ``from_numpy``."""

from __future__ import annotations

import functools
import math
import numbers
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from agrad import _dtype
from agrad._backends import canonical, transfer
from agrad._device import CPU
from agrad._errors import out_of_memory
from agrad._grad_mode import grad_enabled
from agrad._tensor import Tensor, mark_inference

__all__ = [
    "tensor", "as_tensor", "from_numpy", "zeros", "ones", "full", "empty", "arange", "linspace", "eye",
    "rand", "randn", "randint", "zeros_like", "ones_like", "full_like", "empty_like", "rand_like",
    "randn_like", "manual_seed", "Generator",
]


class Generator:
    """A random number generator (mirrors ``torch.Generator``), backed by numpy's PCG64."""

    def __init__(self, device: Any = "cpu") -> None:
        self._rng = np.random.default_rng()

    def manual_seed(self, seed: int) -> "Generator":
        self._rng = np.random.default_rng(seed)
        return self

    def get_state(self) -> Any:
        return self._rng.bit_generator.state

    def set_state(self, state: Any) -> None:
        self._rng.bit_generator.state = state


default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    """Seed the default generator used by ``rand``, ``randn`` and ``randint``."""
    return default_generator.manual_seed(seed)


def _finish(data: np.ndarray, requires_grad: bool, device: Any) -> Tensor:
    """Wrap host data, moved to ``device`` first (made on the host, then copied:
    random tensors are the same on every device for one seed)."""
    if device is not None and (dev := canonical(device)) is not CPU:
        data = transfer(data, dev)
    t = mark_inference(Tensor._make(data))  # Note [Inference tensors]
    if requires_grad:
        if data.dtype.kind != "f":  # the factories' wording; ``requires_grad_()`` has its own
            raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")
        t.requires_grad_(True)
    return t


def _size(size: Sequence[Any], factory: str | None = None) -> tuple[int, ...]:
    """A factory's size argument as a tuple, with PyTorch's error for a negative
    dimension (``zeros`` words it its own way)."""
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    out = tuple(int(s) for s in size)
    if any(s < 0 for s in out):
        if factory == "zeros":
            raise RuntimeError("zeros: Dimension size must be non-negative.")
        raise RuntimeError(f"Trying to create tensor with negative dimension {min(out)}: {list(out)}")
    return out


def _allocating(factory: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """``factory`` with numpy's ``MemoryError`` raised as PyTorch's RuntimeError
    (Note [Translating numpy's errors])."""

    @functools.wraps(factory)
    def allocate(*args: Any, **kwargs: Any) -> Tensor:
        try:
            return factory(*args, **kwargs)
        except MemoryError as exc:
            raise out_of_memory(exc, factory.__name__) from None

    return allocate


def _np_dtype(dtype: Any, default: _dtype.dtype | None = None) -> np.dtype:
    if dtype is None:
        return (default or _dtype.get_default_dtype()).np
    return _dtype.to_dtype(dtype).np


# Note [One cast from Python numbers]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A Python float is a double.  ``tensor([0.1], dtype=float64)`` must hold the
# double 0.1, so Python data is read at full precision (floats as float64,
# ints as int64) and cast once, to the requested dtype or else to the one
# PyTorch infers (the default dtype for floats).  Casting to the default dtype
# first would round 0.1 to float32 and turn 1e300 into inf on the way.  A
# float too large for a floating dtype becomes inf silently, as in PyTorch;
# integer dtypes are range-checked (Note [Checked scalar conversion]).
def _tensors_as_scalars(data: Any) -> Any:
    """Nested lists with every tensor in them replaced by its one value, as
    PyTorch reads ``tensor([a, b])``: a tensor of more than one element is
    refused, values that require grad are copied with one warning when grad
    mode is on (numpy would instead stack multi-element tensors and refuse the
    others).  Their dtypes count in the inferred one (``_scalar_type``)."""
    grads: list[bool] = []

    def scalars(x: Any) -> Any:
        if isinstance(x, Tensor):
            if x._data.size != 1:
                raise ValueError("only one element tensors can be converted to Python scalars")
            grads.append(x.requires_grad)
            return x.item()
        if isinstance(x, (list, tuple)) and any(isinstance(e, (Tensor, list, tuple)) for e in x):
            return [scalars(e) for e in x]
        return x

    out = scalars(data)
    if any(grads) and grad_enabled.get():
        warnings.warn(
            "Converting a tensor with requires_grad=True to a scalar may lead to unexpected behavior.\n"
            "Consider using tensor.detach() first.",
            UserWarning,
            stacklevel=4,
        )
    return out


def _infer(data: Any) -> tuple[np.ndarray, np.dtype]:
    """``data`` as an array holding its values exactly, and the dtype PyTorch
    infers for it.  See Note [One cast from Python numbers]."""
    if isinstance(data, Tensor):
        return data._data, data._data.dtype
    if isinstance(data, (np.ndarray, np.generic)):  # numpy arrays and scalars keep their dtype
        _dtype.from_numpy_dtype(data.dtype)
        arr = np.asarray(data)
        return arr, arr.dtype
    try:
        inferred, has_tensors = _scalar_type(data)  # first: numpy would not name a bad element
    except (TypeError, RuntimeError) as exc:
        raise _too_many_dims(data) or exc from None
    try:
        return np.asarray(_tensors_as_scalars(data) if has_tensors else data), inferred.np
    except ValueError as exc:
        raise _ragged(data, _first_sizes(data)) or exc from None


# Note [Misshapen tensor data]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch reads nested data in three passes, and its error names the first
# that fails: the sizes, from the first element at each depth (a string
# there is a sequence without end: "too many dimensions 'str'"); the dtype,
# from every element (a string elsewhere: "new(): invalid data type 'str'");
# then the values, depth first ("expected sequence of length 2 at dim 1 (got
# 1)").  agrad infers the dtype and lets numpy copy the values, and only when
# one of them fails walks the data again to name PyTorch's error.
def _first_sizes(data: Any) -> list[int]:
    sizes = []
    while isinstance(data, (list, tuple)):
        sizes.append(len(data))
        if not data:
            break
        data = data[0]
    return sizes


def _too_many_dims(data: Any) -> ValueError | None:
    first = data
    while isinstance(first, (list, tuple)) and first:
        first = first[0]
    if first is not data and isinstance(first, (str, bytes)):
        return ValueError(f"too many dimensions '{type(first).__name__}'")
    return None


def _ragged(data: Any, sizes: list[int], dim: int = 0) -> ValueError | None:
    """PyTorch's error for the first sequence, depth first, whose length differs from ``sizes``."""
    if dim == len(sizes) or not isinstance(data, (list, tuple)):
        return None
    if len(data) != sizes[dim]:
        return ValueError(f"expected sequence of length {sizes[dim]} at dim {dim} (got {len(data)})")
    return next((e for e in (_ragged(x, sizes, dim + 1) for x in data) if e is not None), None)


_PY_SCALARS = (bool, int, float)  # bool first: it is an int too


def _python_scalar_type(kind: type) -> _dtype.dtype:
    return _dtype.bool if kind is bool else _dtype.int64 if kind is int else _dtype.get_default_dtype()


def _scalar_type(data: Any) -> tuple[_dtype.dtype, bool]:
    """PyTorch's ``infer_scalar_type``, and whether ``data`` holds a tensor.

    A Python float is the default dtype, an int int64, a bool bool; tensors
    and numpy scalars or arrays keep their dtype; a sequence promotes its
    elements' (so ``[float64 tensor, 1.0]`` is float64); an empty one is the
    default dtype.  Elements of one Python type are classed in one C-speed
    pass (``set(map(type, ...))``); only the others are visited one by one."""
    if isinstance(data, Tensor):
        return data.dtype, True
    if isinstance(data, (np.ndarray, np.generic)):
        return _dtype.from_numpy_dtype(data.dtype), False
    for kind in _PY_SCALARS:
        if isinstance(data, kind):
            return _python_scalar_type(kind), False
    if not isinstance(data, (list, tuple)):
        if isinstance(data, (str, bytes)):
            raise TypeError(f"new(): invalid data type '{type(data).__name__}'")
        raise RuntimeError(f"Could not infer dtype of {type(data).__name__}")
    types = set(map(type, data))
    out: _dtype.dtype | None = None
    for kind in _PY_SCALARS:
        if kind in types:
            dt = _python_scalar_type(kind)
            out = dt if out is None else _dtype._promote_pair(out, dt)
    has_tensors = False
    if not types.issubset(_PY_SCALARS):
        for element in data:
            if type(element) not in _PY_SCALARS:
                dt, tensors = _scalar_type(element)
                out = dt if out is None else _dtype._promote_pair(out, dt)
                has_tensors = has_tensors or tensors
    return (_dtype.get_default_dtype() if out is None else out), has_tensors


def _cast(arr: np.ndarray, np_dtype: np.dtype, copy: bool) -> np.ndarray:
    """``arr`` as ``np_dtype``; an overflowing float is inf, silently, as in PyTorch."""
    with np.errstate(over="ignore", invalid="ignore"):
        return arr.astype(np_dtype, copy=copy)


def tensor(data: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """Build a tensor by copying ``data`` (nested lists, numbers, arrays or tensors).

    Python floats become the default dtype (``float32``), ints ``int64``,
    bools ``bool``; numpy arrays keep their dtype.  With ``dtype``, Python
    numbers are converted to it directly, at full precision.

    Example::

        >>> agrad.tensor([1.0, 2.0], requires_grad=True)
        tensor([1., 2.], requires_grad=True)
        >>> agrad.tensor([0.1], dtype=agrad.float64).item()
        0.1
    """
    if isinstance(data, Tensor) and not data.is_cpu:  # copied where it is, as in PyTorch
        t = data.detach().to(data.dtype if dtype is None else dtype, copy=True)
        t = t if device is None else t.to(device)
        return t.requires_grad_(requires_grad) if requires_grad else t
    arr, inferred = _infer(data)
    if dtype is None:
        return _finish(_cast(arr, inferred, copy=True), requires_grad, device)
    dt = _dtype.to_dtype(dtype, "tensor")
    if not isinstance(data, (Tensor, np.ndarray, np.generic)):  # Python numbers are range-checked
        _dtype.check_values(arr, dt)
    return _finish(_cast(arr, dt.np, copy=True), requires_grad, device)


def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """Like :func:`tensor` but shares memory with ``data`` where it can."""
    if isinstance(data, Tensor):
        return data.to(data.dtype if dtype is None else dtype, device)
    arr, inferred = _infer(data)
    return _finish(_cast(arr, inferred if dtype is None else _np_dtype(dtype), copy=False), False, device)


def from_numpy(ndarray: np.ndarray) -> Tensor:
    """Wrap a numpy array without copying: the tensor and the array share memory."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    _dtype.from_numpy_dtype(ndarray.dtype)
    return mark_inference(Tensor._make(ndarray))


@_allocating
def zeros(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros of the given size."""
    return _finish(np.zeros(_size(size, "zeros"), _np_dtype(dtype)), requires_grad, device)


@_allocating
def ones(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A tensor of ones of the given size."""
    return _finish(np.ones(_size(size), _np_dtype(dtype)), requires_grad, device)


@_allocating
def empty(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """An uninitialised tensor of the given size."""
    return _finish(np.empty(_size(size), _np_dtype(dtype)), requires_grad, device)


@_allocating
def full(size: Sequence[int], fill_value: Any, *, dtype: Any = None, device: Any = None,
         requires_grad: bool = False) -> Tensor:
    """A tensor of ``size`` filled with ``fill_value`` (dtype inferred from it)."""
    _check_fill(fill_value, "full")
    if dtype is None:
        dtype = _dtype.result_type([], [], [fill_value])
    return _finish(_filled(_size((size,)), fill_value, _dtype.to_dtype(dtype)), requires_grad, device)


def _check_fill(fill_value: Any, op: str) -> None:
    if not isinstance(fill_value, (numbers.Number, np.generic, Tensor)):
        raise TypeError(f"{op}(): argument 'fill_value' (position 2) must be Number, not {type(fill_value).__name__}")


def _filled(shape: tuple[int, ...], fill_value: Any, dt: _dtype.dtype) -> np.ndarray:
    """An array of ``fill_value`` converted straight to ``dt``, overflow checked
    as PyTorch does (Note [Checked scalar conversion])."""
    return np.full(shape, _dtype.convert_scalar(fill_value, dt), dt.np)


@_allocating
def arange(start: Any, end: Any = None, step: Any = 1, *, dtype: Any = None, device: Any = None,
           requires_grad: bool = False) -> Tensor:
    """Values from ``start`` to ``end`` (exclusive) by ``step``; int64 for integer arguments."""
    if end is None:
        start, end = 0, start
    if dtype is None:
        dtype = _dtype.result_type([], [], [start, end, step])
        if dtype is _dtype.bool:
            dtype = _dtype.int64
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if not (math.isfinite(start) and math.isfinite(end)):
        raise RuntimeError(f"unsupported range: {start} -> {end}")
    if (step > 0 and end < start) or (step < 0 and end > start):
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    return _finish(np.arange(start, end, step, dtype=_np_dtype(dtype)), requires_grad, device)


@_allocating
def linspace(start: float, end: float, steps: int, *, dtype: Any = None, device: Any = None,
             requires_grad: bool = False) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive."""
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    return _finish(np.linspace(start, end, steps, dtype=_np_dtype(dtype)), requires_grad, device)


@_allocating
def eye(n: int, m: int | None = None, *, dtype: Any = None, device: Any = None,
        requires_grad: bool = False) -> Tensor:
    """A 2-D tensor with ones on the diagonal."""
    for name, k in (("n", n), ("m", m)):
        if k is not None and k < 0:
            raise RuntimeError(f"{name} must be greater or equal to 0, got {k}")
    return _finish(np.eye(n, m, dtype=_np_dtype(dtype)), requires_grad, device)


_TORCH_TYPE_NAMES = {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def _floating(np_dtype: np.dtype, kernel: str) -> np.dtype:
    """Random floats only in floating dtypes, as PyTorch's kernels insist."""
    if np_dtype.kind != "f":
        raise NotImplementedError(f'"{kernel}" not implemented for \'{_TORCH_TYPE_NAMES[np_dtype.name]}\'')
    return np_dtype


def _rng(generator: Generator | None) -> np.random.Generator:
    return (generator or default_generator)._rng


@_allocating
def rand(*size: Any, generator: Generator | None = None, dtype: Any = None, device: Any = None,
         requires_grad: bool = False) -> Tensor:
    """Uniform samples on ``[0, 1)``."""
    data = _rng(generator).random(_size(size)).astype(_floating(_np_dtype(dtype), "check_uniform_bounds"))
    return _finish(data, requires_grad, device)


@_allocating
def randn(*size: Any, generator: Generator | None = None, dtype: Any = None, device: Any = None,
          requires_grad: bool = False) -> Tensor:
    """Standard normal samples."""
    data = _rng(generator).standard_normal(_size(size)).astype(_floating(_np_dtype(dtype), "normal_kernel_cpu"))
    return _finish(data, requires_grad, device)


@_allocating
def randint(low: int, high: int | None = None, size: Sequence[int] = (), *, generator: Generator | None = None,
            dtype: Any = None, device: Any = None) -> Tensor:
    """Integers uniform on ``[low, high)``; int64 by default."""
    if high is None or isinstance(high, (tuple, list)):  # randint(high, size)
        low, high, size = 0, low, size if high is None else high  # type: ignore[assignment]  # high is the size
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    data = _rng(generator).integers(low, high, size=_size((size,))).astype(_np_dtype(dtype, _dtype.int64))
    return _finish(data, False, device)


def _where(t: Tensor, device: Any) -> Any:
    """A ``*_like`` factory's device: ``t``'s unless one is given, as in PyTorch."""
    return t.device if device is None else device


def _of_tensor(factory: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """``factory(input, ...)`` refusing a non-tensor ``input`` with PyTorch's ``TypeError``."""

    @functools.wraps(factory)
    def like(input: Any, *args: Any, **kwargs: Any) -> Tensor:
        if not isinstance(input, Tensor):
            raise TypeError(f"{factory.__name__}(): argument 'input' (position 1) must be Tensor, "
                            f"not {type(input).__name__}")
        return factory(input, *args, **kwargs)

    return like


def _like(t: Tensor, dtype: Any) -> np.dtype:
    return t._data.dtype if dtype is None else _np_dtype(dtype)


@_allocating
@_of_tensor
def zeros_like(input: Tensor, *, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """Zeros with ``input``'s shape and dtype."""
    return _finish(np.zeros(input.shape, _like(input, dtype)), requires_grad, _where(input, device))


@_allocating
@_of_tensor
def ones_like(input: Tensor, *, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """Ones with ``input``'s shape and dtype."""
    return _finish(np.ones(input.shape, _like(input, dtype)), requires_grad, _where(input, device))


@_allocating
@_of_tensor
def empty_like(input: Tensor, *, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """Uninitialised, with ``input``'s shape and dtype."""
    return _finish(np.empty(input.shape, _like(input, dtype)), requires_grad, _where(input, device))


@_allocating
@_of_tensor
def full_like(input: Tensor, fill_value: Any, *, dtype: Any = None, device: Any = None,
              requires_grad: bool = False) -> Tensor:
    """``fill_value`` with ``input``'s shape and dtype."""
    _check_fill(fill_value, "full_like")
    dt = input.dtype if dtype is None else _dtype.to_dtype(dtype)
    return _finish(_filled(input.shape, fill_value, dt), requires_grad, _where(input, device))


@_allocating
@_of_tensor
def rand_like(input: Tensor, *, generator: Generator | None = None, dtype: Any = None, device: Any = None,
              requires_grad: bool = False) -> Tensor:
    """Uniform samples with ``input``'s shape and dtype."""
    data = _rng(generator).random(input.shape).astype(_floating(_like(input, dtype), "check_uniform_bounds"))
    return _finish(data, requires_grad, _where(input, device))


@_allocating
@_of_tensor
def randn_like(input: Tensor, *, generator: Generator | None = None, dtype: Any = None, device: Any = None,
               requires_grad: bool = False) -> Tensor:
    """Normal samples with ``input``'s shape and dtype."""
    data = _rng(generator).standard_normal(input.shape).astype(_floating(_like(input, dtype), "normal_kernel_cpu"))
    return _finish(data, requires_grad, _where(input, device))
