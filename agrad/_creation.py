"""Tensor factories: ``tensor``, ``zeros``, ``ones``, ``full``, ``arange``, ``eye``,
``rand``, ``randn``, the ``*_like`` family and ``from_numpy``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from agrad import _dtype
from agrad._backends import canonical, transfer
from agrad._device import CPU
from agrad._tensor import Tensor

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
    t = Tensor._make(data)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _size(size: Sequence[Any]) -> tuple[int, ...]:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    return tuple(int(s) for s in size)


def _np_dtype(dtype: Any, default: _dtype.dtype | None = None) -> np.dtype:
    if dtype is None:
        return (default or _dtype.get_default_dtype()).np
    return _dtype.to_dtype(dtype).np


def _infer(data: Any) -> np.ndarray:
    if isinstance(data, Tensor):
        return data._data
    if isinstance(data, (np.ndarray, np.generic)):  # numpy arrays and scalars keep their dtype
        _dtype.from_numpy_dtype(data.dtype)
        return np.asarray(data)
    arr = np.asarray(data)
    if arr.dtype.kind == "f":
        return arr.astype(_dtype.get_default_dtype().np)
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64)
    if arr.dtype.kind == "b":
        return arr
    raise TypeError(f"Could not infer dtype of {type(data).__name__}")


def tensor(data: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """Build a tensor by copying ``data`` (nested lists, numbers, arrays or tensors).

    Python floats become the default dtype (``float32``), ints ``int64``,
    bools ``bool``; numpy arrays keep their dtype.

    Example::

        >>> agrad.tensor([1.0, 2.0], requires_grad=True)
        tensor([1., 2.], requires_grad=True)
    """
    if isinstance(data, Tensor) and not data.is_cpu:  # copied where it is, as in PyTorch
        t = data.detach().to(data.dtype if dtype is None else dtype, copy=True)
        t = t if device is None else t.to(device)
        return t.requires_grad_(requires_grad) if requires_grad else t
    arr = np.array(_infer(data), dtype=None if dtype is None else _np_dtype(dtype), copy=True)
    return _finish(arr, requires_grad, device)


def as_tensor(data: Any, dtype: Any = None, device: Any = None) -> Tensor:
    """Like :func:`tensor` but shares memory with ``data`` where it can."""
    if isinstance(data, Tensor):
        return data.to(data.dtype if dtype is None else dtype, device)
    arr = _infer(data)
    return _finish(arr if dtype is None else arr.astype(_np_dtype(dtype), copy=False), False, device)


def from_numpy(ndarray: np.ndarray) -> Tensor:
    """Wrap a numpy array without copying: the tensor and the array share memory."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    _dtype.from_numpy_dtype(ndarray.dtype)
    return Tensor._make(ndarray)


def zeros(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros of the given size."""
    return _finish(np.zeros(_size(size), _np_dtype(dtype)), requires_grad, device)


def ones(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A tensor of ones of the given size."""
    return _finish(np.ones(_size(size), _np_dtype(dtype)), requires_grad, device)


def empty(*size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """An uninitialised tensor of the given size."""
    return _finish(np.empty(_size(size), _np_dtype(dtype)), requires_grad, device)


def full(size: Sequence[int], fill_value: Any, *, dtype: Any = None, device: Any = None,
         requires_grad: bool = False) -> Tensor:
    """A tensor of ``size`` filled with ``fill_value`` (dtype inferred from it)."""
    if dtype is None:
        dtype = _dtype.result_type([], [], [fill_value])
    return _finish(np.full(_size((size,)), fill_value, _np_dtype(dtype)), requires_grad, device)


def arange(start: Any, end: Any = None, step: Any = 1, *, dtype: Any = None, device: Any = None,
           requires_grad: bool = False) -> Tensor:
    """Values from ``start`` to ``end`` (exclusive) by ``step``; int64 for integer arguments."""
    if end is None:
        start, end = 0, start
    if dtype is None:
        dtype = _dtype.result_type([], [], [start, end, step])
        if dtype is _dtype.bool:
            dtype = _dtype.int64
    return _finish(np.arange(start, end, step, dtype=_np_dtype(dtype)), requires_grad, device)


def linspace(start: float, end: float, steps: int, *, dtype: Any = None, device: Any = None,
             requires_grad: bool = False) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive."""
    return _finish(np.linspace(start, end, steps, dtype=_np_dtype(dtype)), requires_grad, device)


def eye(n: int, m: int | None = None, *, dtype: Any = None, device: Any = None,
        requires_grad: bool = False) -> Tensor:
    """A 2-D tensor with ones on the diagonal."""
    return _finish(np.eye(n, m, dtype=_np_dtype(dtype)), requires_grad, device)


_TORCH_TYPE_NAMES = {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def _floating(np_dtype: np.dtype, kernel: str) -> np.dtype:
    """Random floats only in floating dtypes, as PyTorch's kernels insist."""
    if np_dtype.kind != "f":
        raise NotImplementedError(f'"{kernel}" not implemented for \'{_TORCH_TYPE_NAMES[np_dtype.name]}\'')
    return np_dtype


def _rng(generator: Generator | None) -> np.random.Generator:
    return (generator or default_generator)._rng


def rand(*size: Any, generator: Generator | None = None, dtype: Any = None, device: Any = None,
         requires_grad: bool = False) -> Tensor:
    """Uniform samples on ``[0, 1)``."""
    data = _rng(generator).random(_size(size)).astype(_floating(_np_dtype(dtype), "check_uniform_bounds"))
    return _finish(data, requires_grad, device)


def randn(*size: Any, generator: Generator | None = None, dtype: Any = None, device: Any = None,
          requires_grad: bool = False) -> Tensor:
    """Standard normal samples."""
    data = _rng(generator).standard_normal(_size(size)).astype(_floating(_np_dtype(dtype), "normal_kernel_cpu"))
    return _finish(data, requires_grad, device)


def randint(low: int, high: int | None = None, size: Sequence[int] = (), *, generator: Generator | None = None,
            dtype: Any = None, device: Any = None) -> Tensor:
    """Integers uniform on ``[low, high)``; int64 by default."""
    if high is None:
        low, high = 0, low
    data = _rng(generator).integers(low, high, size=tuple(size)).astype(_np_dtype(dtype, _dtype.int64))
    return _finish(data, False, device)


def _where(t: Tensor, device: Any) -> Any:
    """A ``*_like`` factory's device: ``t``'s unless one is given, as in PyTorch."""
    return t.device if device is None else device


def _like(t: Tensor, dtype: Any) -> np.dtype:
    return t._data.dtype if dtype is None else _np_dtype(dtype)


def zeros_like(input: Tensor, *, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """Zeros with ``input``'s shape and dtype."""
    return _finish(np.zeros(input.shape, _like(input, dtype)), requires_grad, _where(input, device))


def ones_like(input: Tensor, *, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """Ones with ``input``'s shape and dtype."""
    return _finish(np.ones(input.shape, _like(input, dtype)), requires_grad, _where(input, device))


def empty_like(input: Tensor, *, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """Uninitialised, with ``input``'s shape and dtype."""
    return _finish(np.empty(input.shape, _like(input, dtype)), requires_grad, _where(input, device))


def full_like(input: Tensor, fill_value: Any, *, dtype: Any = None, device: Any = None,
              requires_grad: bool = False) -> Tensor:
    """``fill_value`` with ``input``'s shape and dtype."""
    return _finish(np.full(input.shape, fill_value, _like(input, dtype)), requires_grad, _where(input, device))


def rand_like(input: Tensor, *, generator: Generator | None = None, dtype: Any = None, device: Any = None,
              requires_grad: bool = False) -> Tensor:
    """Uniform samples with ``input``'s shape and dtype."""
    data = _rng(generator).random(input.shape).astype(_floating(_like(input, dtype), "check_uniform_bounds"))
    return _finish(data, requires_grad, _where(input, device))


def randn_like(input: Tensor, *, generator: Generator | None = None, dtype: Any = None, device: Any = None,
               requires_grad: bool = False) -> Tensor:
    """Normal samples with ``input``'s shape and dtype."""
    data = _rng(generator).standard_normal(input.shape).astype(_floating(_like(input, dtype), "normal_kernel_cpu"))
    return _finish(data, requires_grad, _where(input, device))
