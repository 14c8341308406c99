"""Tensor factories: ``tensor``, ``asarray``, ``zeros``, ``ones``, ``full``,
``empty``, ``empty_strided``, ``arange``, ``range``, ``linspace``, ``logspace``,
``eye``, ``scalar_tensor``, the windows, the random factories (``rand``,
``randn``, ``randint``, ``randperm``, ``multinomial``...), the ``*_like`` and
``Tensor.new_*`` families and ``from_numpy``; the random generators and their
seeds; the default device; and the small utilities of ``torch.*`` that ask a
tensor about itself (``numel``, ``is_floating_point``, ``typename``...).

The random draws that PyTorch records in the graph (``normal`` of tensors,
``bernoulli``, ``poisson`` and the in-place fills) are op-table entries in
``agrad/_ops/_methods.py``; they draw from the generators here.
"""

from __future__ import annotations

import builtins
import functools
import math
import numbers
import secrets
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from agrad import _device, _dtype
from agrad._backends import canonical, transfer
from agrad._device import CPU
from agrad._errors import out_of_memory
from agrad._grad_mode import grad_enabled
from agrad._tensor import Tensor, mark_inference

__all__ = [
    "tensor", "as_tensor", "asarray", "from_numpy", "zeros", "ones", "full", "empty", "empty_strided", "arange",
    "range", "linspace", "logspace", "eye", "scalar_tensor", "rand", "randn", "randint", "randperm",
    "multinomial", "zeros_like", "ones_like", "full_like", "empty_like", "rand_like", "randn_like",
    "randint_like", "hann_window", "hamming_window", "blackman_window", "bartlett_window", "kaiser_window",
    "manual_seed", "seed", "initial_seed", "Generator", "set_default_device", "get_default_device",
    "numel", "is_floating_point", "is_complex", "is_nonzero", "is_same_size", "result_type", "typename",
    "is_storage",
]

# -- generators -----------------------------------------------------------------------


def _seed_value(seed: Any) -> int:
    """A seed as PyTorch takes it: an integer in ``[-2**63, 2**64)``, a negative one
    read as its unsigned 64-bit twin (-1 is ``2**64 - 1``)."""
    value = int(seed)
    if not -(1 << 63) <= value < (1 << 64):
        raise ValueError("Overflow when unpacking long long")
    return value + (1 << 64) if value < 0 else value


class Generator:
    """A random number generator (mirrors ``torch.Generator``), backed by numpy's PCG64.

    A new generator is seeded from the operating system's entropy; its seed is
    kept, so :meth:`initial_seed` can reproduce its draws.

    Example::

        >>> g = agrad.Generator().manual_seed(3)
        >>> g.initial_seed()
        3
        >>> agrad.rand(2, generator=g).tolist() == agrad.rand(2, generator=g.manual_seed(3)).tolist()
        True
    """

    def __init__(self, device: Any = "cpu") -> None:
        self.device = canonical(device)
        self._seed = secrets.randbits(63)
        self._rng = np.random.default_rng(self._seed)

    def manual_seed(self, seed: int) -> "Generator":
        """Seed this generator (see :func:`agrad.manual_seed`); returns it."""
        self._seed = _seed_value(seed)
        self._rng = np.random.default_rng(self._seed)
        return self

    def seed(self) -> int:
        """Seed this generator from the operating system's entropy; return the seed."""
        self.manual_seed(secrets.randbits(63))
        return self._seed

    def initial_seed(self) -> int:
        """The seed this generator was last seeded with."""
        return self._seed

    def get_state(self) -> Any:
        return self._rng.bit_generator.state

    def set_state(self, state: Any) -> None:
        self._rng.bit_generator.state = state


default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    """Seed the default generator, which every random factory and op draws from
    unless given a ``generator``; returns it.  ``seed`` is an integer in
    ``[-2**63, 2**64)`` (a negative one counts from ``2**64``), as in PyTorch."""
    return default_generator.manual_seed(seed)


def seed() -> int:
    """Seed the default generator from the operating system's entropy; return the seed."""
    return default_generator.seed()


def initial_seed() -> int:
    """The seed the default generator was last seeded with.

    Example::

        >>> _ = agrad.manual_seed(7)
        >>> agrad.initial_seed()
        7
    """
    return default_generator.initial_seed()


def _rng(generator: Generator | None) -> np.random.Generator:
    return (generator or default_generator)._rng


# -- the default device ---------------------------------------------------------------

# Note [The default device]
# ~~~~~~~~~~~~~~~~~~~~~~~~~
# ``set_default_device`` names where factories called without ``device=`` put
# their tensors (``tensor``, ``zeros``, ``rand``... and ``as_tensor`` of host
# data; not ``from_numpy``, the ``*_like`` factories or ``Tensor.new_*``,
# which follow their input, as in PyTorch).  It is process-wide, as PyTorch's
# is in practice, and kept as given: "cuda" follows the current CUDA device at
# each call.  Like PyTorch's, it does not change how tensors print.  Factories
# still make their data on the host and copy it (``_finish``), so random
# factories draw the same numbers on every device for one seed.
_default_device: _device.device | None = None  # None: the CPU


def set_default_device(device: Any) -> None:
    """Make ``device`` the default of factories called without ``device=``
    (``None`` or "cpu" restores the CPU).  See Note [The default device].

    Raises RuntimeError if the device cannot be used here (CUDA without CuPy
    or a GPU), at once rather than at the next factory call.

    Example::

        >>> agrad.set_default_device("cpu")
        >>> agrad.get_default_device()
        device(type='cpu')
    """
    global _default_device
    if device is None:
        _default_device = None
        return
    dev = _device.device(device)
    canonical(dev)  # raises where the device is unavailable
    _default_device = None if dev.type == "cpu" and dev.index is None else dev


def get_default_device() -> _device.device:
    """The device factories use when given none (the CPU unless
    :func:`set_default_device` changed it); "cuda" is reported with its current index."""
    if _default_device is None:
        return CPU
    return _default_device if _default_device.type == "cpu" else canonical(_default_device)


def _finish(data: np.ndarray, requires_grad: bool, device: Any) -> Tensor:
    """Wrap host data, moved to ``device`` (the default device when None, Note
    [The default device]) first: made on the host, then copied, so random
    tensors are the same on every device for one seed."""
    if device is None:
        device = _default_device
    if device is not None and (dev := canonical(device)) is not CPU:
        data = transfer(data, dev)
    t = mark_inference(Tensor._make(data))  # Note [Inference tensors]
    if requires_grad:
        if not _dtype.is_floating_np(data.dtype):  # the factories' wording; ``requires_grad_()`` has its own
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


def _check_range(start: Any, end: Any, step: Any) -> None:
    """PyTorch's checks of ``arange``'s and ``range``'s bounds and step."""
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if not (math.isfinite(start) and math.isfinite(end)):
        raise RuntimeError(f"unsupported range: {start} -> {end}")
    if (step > 0 and end < start) or (step < 0 and end > start):
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")


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
    _check_range(start, end, step)
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


def _floating(np_dtype: np.dtype, kernel: str) -> np.dtype:
    """Random floats only in floating dtypes, as PyTorch's kernels insist."""
    if not _dtype.is_floating_np(np_dtype):
        raise NotImplementedError(f'"{kernel}" not implemented for \'{_dtype.SCALAR_TYPE_NAMES[np_dtype.name]}\'')
    return np_dtype


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


# -- more factories ---------------------------------------------------------------------


def _warn_requires_grad_default() -> None:
    warnings.warn(
        "agrad.asarray: unspecified requires_grad now defaults to obj.requires_grad instead of False. Pass "
        "requires_grad=False explicitly to get the old behavior and silence this warning.",
        UserWarning, stacklevel=3,
    )


def _alias_error(src: Any, dst: Any) -> ValueError:
    return ValueError(f"can't alias tensor with dtype '{_dtype.SCALAR_TYPE_NAMES[src.name]}' into dtype "
                      f"'{_dtype.SCALAR_TYPE_NAMES[dst.name]}'.")


def asarray(obj: Any, *, dtype: Any = None, device: Any = None, copy: bool | None = None,
            requires_grad: bool | None = None) -> Tensor:
    """``obj`` as a tensor, sharing memory with it where it can (PyTorch's ``asarray``).

    A tensor is returned as itself when its dtype and device already fit (and
    ``copy`` is not True); otherwise it is converted, the conversion recorded
    as ``Tensor.to`` records it.  A numpy array or scalar is shared unless a
    cast or a move is needed; Python data is copied, its dtype inferred as
    :func:`tensor` infers it.  ``copy=True`` always copies; ``copy=False``
    raises ``ValueError`` where a copy is needed.  ``requires_grad`` left out
    follows a tensor ``obj`` (with PyTorch's warning when that means True).

    Example::

        >>> a = np.zeros(2)
        >>> t = agrad.asarray(a)
        >>> t[0] = 5.0
        >>> a
        array([5., 0.])
    """
    if isinstance(obj, Tensor):
        if requires_grad is None and obj.requires_grad:
            _warn_requires_grad_default()
        t = obj
        target = obj.dtype if dtype is None else _dtype.to_dtype(dtype)
        dev = obj.device if device is None else canonical(device)
        if copy is False and target is not obj.dtype:
            raise _alias_error(obj.dtype, target)
        if copy is False and dev is not obj.device:
            raise ValueError(f"can't alias tensor from device '{obj.device}' to '{dev}'.")
        if target is not obj.dtype or dev is not obj.device:
            t = t.to(target, dev)
        elif copy:
            t = t.clone()
        if requires_grad is False and t.requires_grad:
            t = t.detach()
        elif requires_grad:
            t.requires_grad_(True)
        return t
    if isinstance(obj, (np.ndarray, np.generic)):
        arr = np.asarray(obj)
        src = _dtype.from_numpy_dtype(arr.dtype)
        target = src if dtype is None else _dtype.to_dtype(dtype)
        if copy is False and target is not src:
            raise _alias_error(src, target)
        return _finish(_cast(arr, target.np, copy=bool(copy)), bool(requires_grad), device)
    if copy is False:
        raise ValueError("can't alias arbitrary sequence into a tensor.")
    return tensor(obj, dtype=dtype, device=device, requires_grad=bool(requires_grad))


@_allocating
def empty_strided(size: Sequence[int], stride: Sequence[int], *, dtype: Any = None, device: Any = None,
                  requires_grad: bool = False) -> Tensor:
    """An uninitialised tensor of ``size`` whose elements lie ``stride`` elements
    apart (``Tensor.stride()`` reports them), in a buffer just large enough.

    Strides are honoured on the CPU; on another device the tensor is
    contiguous (made on the host, then copied, as every factory's data is).
    """
    shape = _size((size,))
    strides = tuple(int(s) for s in stride)
    if len(strides) != len(shape):
        raise RuntimeError(f"dimensionality of sizes ({len(shape)}) must match dimensionality of strides "
                           f"({len(strides)})")
    if any(s < 0 for s in strides):
        raise RuntimeError(f"Storage size calculation overflowed with sizes={list(shape)} and strides={list(strides)}")
    np_dtype = _np_dtype(dtype)
    extent = 0 if 0 in shape else 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    data = np.lib.stride_tricks.as_strided(np.empty(extent, np_dtype), shape,
                                           tuple(s * np_dtype.itemsize for s in strides))
    return _finish(data, requires_grad, device)


@_allocating
def scalar_tensor(s: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """A 0-d tensor holding ``s``, of the default dtype unless ``dtype`` is given
    (whatever the type of ``s``: ``scalar_tensor(1)`` is ``tensor(1.)``)."""
    if isinstance(s, Tensor):
        s = s.item()
    dt = _dtype.get_default_dtype() if dtype is None else _dtype.to_dtype(dtype)
    return _finish(_cast(np.asarray(s), dt.np, copy=True), requires_grad, device)


@_allocating
def logspace(start: float, end: float, steps: int, base: float = 10.0, *, dtype: Any = None, device: Any = None,
             requires_grad: bool = False) -> Tensor:
    """``steps`` values from ``base ** start`` to ``base ** end``, evenly spaced
    in the exponent.  For an integer dtype, ``start`` and ``end`` are read as
    integers and the powers truncated, as in PyTorch."""
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    np_dtype = _np_dtype(dtype)
    if np_dtype.kind in "iub":
        start, end = int(start), int(end)
    step = (end - start) / (steps - 1) if steps > 1 else 0.0
    # PyTorch's kernel counts the second half back from ``end``, so that it ends exactly there.
    idx = np.arange(steps, dtype=np.float64)
    exponents = np.where(idx < steps // 2, start + step * idx, end - step * (steps - 1 - idx)) if steps > 1 \
        else np.full(steps, float(start))
    with np.errstate(over="ignore"):
        values = np.power(np.float64(base), exponents)
    return _finish(_cast(values, np_dtype, copy=False), requires_grad, device)


@_allocating
def randperm(n: int, *, generator: Generator | None = None, dtype: Any = None, device: Any = None,
             requires_grad: bool = False) -> Tensor:
    """A random permutation of ``0 .. n-1`` (int64 unless ``dtype`` says otherwise)."""
    dt = _dtype.int64 if dtype is None else _dtype.to_dtype(dtype)
    size = _size((n,))
    if dt is _dtype.bool:
        raise NotImplementedError('"randperm" not implemented for \'Bool\'')
    if size[0] > 0:
        _dtype.check_scalar(size[0] - 1, dt)
    return _finish(_rng(generator).permutation(size[0]).astype(dt.np), requires_grad, device)


_CPP_NAMES = {"int8": "signed char", "int16": "short", "int32": "int", "int64": "long", "uint8": "unsigned char",
              "bool": "bool"}


def _check_random_bounds(low: int, high: int, dt: _dtype.dtype) -> None:
    """PyTorch's checks of ``random_(from, to)``: a non-empty range within an integer dtype."""
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    if dt._category != _dtype._FLOAT:
        lo, hi = (0, 1) if dt is _dtype.bool else (int(np.iinfo(dt.np).min), int(np.iinfo(dt.np).max))
        if not lo <= low <= hi:
            raise RuntimeError(f"from is out of bounds for {_CPP_NAMES[dt.name]}")
        if not lo <= high - 1 <= hi:
            raise RuntimeError(f"to - 1 is out of bounds for {_CPP_NAMES[dt.name]}")


@_allocating
@_of_tensor
def randint_like(input: Tensor, low: int = 0, high: int | None = None, *, generator: Generator | None = None,
                 dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """Integers uniform on ``[low, high)`` with ``input``'s shape and dtype
    (``randint_like(input, high)`` starts at 0)."""
    if high is None:
        low, high = 0, low
    dt = input.dtype if dtype is None else _dtype.to_dtype(dtype)
    low, high = int(low), int(high)
    _check_random_bounds(low, high, dt)
    data = _rng(generator).integers(low, high, size=input.shape).astype(dt.np)
    return _finish(data, requires_grad, _where(input, device))


@_allocating
def _normal_sized(mean: float, std: float, size: Sequence[int], *, generator: Generator | None = None,
                  dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """``normal(mean, std, size)``, the factory overload of ``agrad.normal`` (which
    checks ``std``; the others are ops in ``agrad/_ops/_methods.py``)."""
    np_dtype = _floating(_np_dtype(dtype), "normal_kernel_cpu")
    z = _rng(generator).standard_normal(_size((size,))).astype(np_dtype)
    data = np.asarray(z * np_dtype.type(std) + np_dtype.type(mean), np_dtype)
    return _finish(data, requires_grad, device)


# Note [Sampling categories]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``multinomial`` draws every row at once.  With replacement: each row's
# cumulative weights, divided by the row's total (so the last is exactly 1),
# are shifted by the row's index, which makes the whole table one sorted
# array; a uniform draw ``u`` in row ``r`` is ``r + u``, and one
# ``searchsorted`` finds every sample's category (a category of weight 0
# adds an empty interval and is never found).  Without replacement: PyTorch's
# own method, exponential races: each category's key is its weight divided by
# an exponential draw, and the ``k`` largest keys are a sample of ``k``
# categories without replacement, proportional to the weights.
def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *,
                generator: Generator | None = None) -> Tensor:
    """``num_samples`` category indices per row of ``input`` (1-D or 2-D, non-negative
    weights, not necessarily normalised), with or without replacement; int64.
    See Note [Sampling categories]."""
    if not isinstance(input, Tensor):
        raise TypeError(f"multinomial(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: "
                           f"{_dtype.SCALAR_TYPE_NAMES[input.dtype.name]}")
    if input.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    k = int(num_samples)
    if k <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    categories = input.shape[-1]
    if not replacement and k > categories:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    weights = transfer(input._data, CPU).astype(np.float64).reshape(-1, categories)
    if not np.all(np.isfinite(weights) & (weights >= 0)):
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if weights.shape[0] and np.any(weights.sum(axis=1) <= 0):
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    rows = weights.shape[0]
    rng = _rng(generator)
    if replacement:
        cdf = np.cumsum(weights, axis=1)
        cdf = cdf / cdf[:, -1:] + np.arange(rows)[:, None]
        draws = rng.random((rows, k)) + np.arange(rows)[:, None]
        found = np.searchsorted(cdf.reshape(-1), draws.reshape(-1), side="right").reshape(rows, k)
        samples = np.minimum(found - np.arange(rows)[:, None] * categories, categories - 1)
    else:
        with np.errstate(divide="ignore"):
            keys = weights / rng.standard_exponential((rows, categories))
        samples = np.argsort(-keys, axis=1, kind="stable")[:, :k]
    out = samples.astype(np.int64).reshape(input.shape[:-1] + (k,))
    return _finish(out, False, input.device)


# -- windows ----------------------------------------------------------------------------


def _window(name: str, window_length: int, periodic: bool, dtype: Any, device: Any, requires_grad: bool,
            values: Callable[[int, np.dtype], np.ndarray]) -> Tensor:
    """A window of ``window_length`` (one more point, the last dropped, if ``periodic``),
    its points ``values(n, dtype)`` computed in the window's dtype as PyTorch does."""
    if window_length < 0:
        raise RuntimeError(f"{name} requires non-negative window_length, got window_length={window_length}")
    dt = _dtype.get_default_dtype() if dtype is None else _dtype.to_dtype(dtype)
    if not dt.is_floating_point:
        raise RuntimeError(
            f"{name} expects floating point dtypes, got: TensorOptions(dtype={_dtype.CPP_TYPE_NAMES[dt.name]}, "
            f"device=cpu, layout=Strided (default), requires_grad={str(bool(requires_grad)).lower()}"
            f"{' (default)' if not requires_grad else ''}, pinned_memory=false, memory_format=(nullopt))")
    compute = np.dtype(np.float32) if dt is _dtype.bfloat16 else dt.np  # numpy's trig has no bfloat16 loops
    if window_length <= 1:
        data = np.ones(window_length, compute)
    else:
        n = window_length + 1 if periodic else window_length
        data = values(n, compute)[:window_length]
    return _finish(data.astype(dt.np, copy=False), requires_grad, device)


def _cosine_terms(n: int, dt: np.dtype, scale: float) -> np.ndarray:
    return np.arange(n, dtype=dt) * dt.type(scale / (n - 1))


@_allocating
def hamming_window(window_length: int, periodic: bool = True, alpha: float = 0.54, beta: float = 0.46, *,
                   dtype: Any = None, device: Any = None, requires_grad: bool = False) -> Tensor:
    """The Hamming window ``alpha - beta * cos(2 pi n / (N - 1))``."""
    return _window("hamming_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n, dt: np.cos(_cosine_terms(n, dt, 2 * math.pi)) * dt.type(-beta) + dt.type(alpha))


@_allocating
def hann_window(window_length: int, periodic: bool = True, *, dtype: Any = None, device: Any = None,
                requires_grad: bool = False) -> Tensor:
    """The Hann window ``0.5 - 0.5 * cos(2 pi n / (N - 1))``.

    Example::

        >>> agrad.hann_window(4)
        tensor([0.0000, 0.5000, 1.0000, 0.5000])
    """
    return _window("hann_window", window_length, periodic, dtype, device, requires_grad,
                   lambda n, dt: np.cos(_cosine_terms(n, dt, 2 * math.pi)) * dt.type(-0.5) + dt.type(0.5))


@_allocating
def blackman_window(window_length: int, periodic: bool = True, *, dtype: Any = None, device: Any = None,
                    requires_grad: bool = False) -> Tensor:
    """The Blackman window ``0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1))``."""
    def values(n: int, dt: np.dtype) -> np.ndarray:
        w = _cosine_terms(n, dt, math.pi)
        return np.cos(w * dt.type(4)) * dt.type(0.08) - np.cos(w * dt.type(2)) * dt.type(0.5) + dt.type(0.42)

    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad, values)


@_allocating
def bartlett_window(window_length: int, periodic: bool = True, *, dtype: Any = None, device: Any = None,
                    requires_grad: bool = False) -> Tensor:
    """The Bartlett (triangular) window, 0 at the ends and 1 in the middle."""
    def values(n: int, dt: np.dtype) -> np.ndarray:
        w = _cosine_terms(n, dt, 2.0)
        half = ((n - 1) >> 1) + 1
        w[half:] = dt.type(2) - w[half:]
        return w

    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad, values)


@_allocating
def kaiser_window(window_length: int, periodic: bool = True, beta: float = 12.0, *, dtype: Any = None,
                  device: Any = None, requires_grad: bool = False) -> Tensor:
    """The Kaiser window ``I0(beta sqrt(1 - ((n - a) / a)^2)) / I0(beta)``, ``a = (N - 1) / 2``."""
    def values(n: int, dt: np.dtype) -> np.ndarray:
        alpha = (n - 1) / 2.0
        ratio = (np.arange(n, dtype=np.float64) - alpha) / alpha
        return (np.i0(beta * np.sqrt(np.maximum(1 - ratio * ratio, 0.0))) / np.i0(beta)).astype(dt)

    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad, values)


# -- Tensor.new_*: factories with a tensor's dtype and device ----------------------------


def _new_options(self: Tensor, dtype: Any, device: Any) -> tuple[_dtype.dtype, Any]:
    return (self.dtype if dtype is None else _dtype.to_dtype(dtype)), (self.device if device is None else device)


def _new_filled(fill: Callable[..., np.ndarray], what: str) -> Callable[..., Tensor]:
    """``Tensor.new_zeros``/``new_ones``/``new_empty``: ``fill(size, dtype)`` of
    ``size``, with this tensor's dtype and device unless given."""

    def new(self: Tensor, *size: Any, dtype: Any = None, device: Any = None, requires_grad: bool = False,
            layout: Any = None, pin_memory: bool = False) -> Tensor:
        dt, dev = _new_options(self, dtype, device)
        return _finish(fill(_size(size), dt.np), requires_grad, dev)

    new.__name__ = new.__qualname__ = f"_new_{what}"  # as out-of-memory errors name it
    new.__doc__ = f"``Tensor.new_{what}``: {what} of ``size``, with this tensor's dtype and device unless given."
    return _allocating(new)


_new_zeros = _new_filled(np.zeros, "zeros")
_new_ones = _new_filled(np.ones, "ones")
_new_empty = _new_filled(np.empty, "empty")


@_allocating
def _new_full(self: Tensor, size: Sequence[int], fill_value: Any, *, dtype: Any = None, device: Any = None,
              requires_grad: bool = False, layout: Any = None, pin_memory: bool = False) -> Tensor:
    """``Tensor.new_full``: ``fill_value`` in a tensor of ``size`` (a sequence), with this
    tensor's dtype and device unless given."""
    if not isinstance(size, (tuple, list)):
        raise TypeError(f"new_full(): argument 'size' (position 1) must be tuple of ints, not {type(size).__name__}")
    _check_fill(fill_value, "new_full")
    dt, dev = _new_options(self, dtype, device)
    return _finish(_filled(_size((size,)), fill_value, dt), requires_grad, dev)


def _new_tensor(self: Tensor, data: Any, *, dtype: Any = None, device: Any = None,
                requires_grad: bool = False) -> Tensor:
    """``Tensor.new_tensor``: a copy of ``data`` (as :func:`tensor` reads it), with this
    tensor's dtype and device unless given."""
    if isinstance(data, Tensor):
        warnings.warn(
            "To copy construct from a tensor, it is recommended to use sourceTensor.detach().clone() or "
            "sourceTensor.detach().clone().requires_grad_(True), rather than tensor.new_tensor(sourceTensor).",
            UserWarning, stacklevel=2,
        )
        data = data.detach()
    dt, dev = _new_options(self, dtype, device)
    return tensor(data, dtype=dt, device=dev, requires_grad=requires_grad)


# -- utilities: what a tensor is --------------------------------------------------------


def _tensor_arg(fn: str, value: Any, arg: str = "input", position: int = 1) -> Tensor:
    if not isinstance(value, Tensor):
        raise TypeError(f"{fn}(): argument '{arg}' (position {position}) must be Tensor, not {type(value).__name__}")
    return value


def numel(input: Tensor) -> int:
    """The number of elements of ``input``."""
    return int(_tensor_arg("numel", input)._data.size)


def is_floating_point(input: Tensor) -> builtins.bool:
    """Whether ``input``'s dtype is a floating one (bfloat16 included)."""
    return _tensor_arg("is_floating_point", input).dtype.is_floating_point


def is_complex(input: Tensor) -> builtins.bool:
    """Whether ``input``'s dtype is complex: never, agrad has no complex dtypes."""
    return _tensor_arg("is_complex", input).dtype.is_complex


def is_nonzero(input: Tensor) -> builtins.bool:
    """Whether the one element of ``input`` is non-zero; more or fewer elements raise, as in PyTorch."""
    t = _tensor_arg("is_nonzero", input)
    if t._data.size == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if t._data.size > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return builtins.bool(t.item())


def is_same_size(input: Tensor, other: Tensor) -> builtins.bool:
    """Whether ``input`` and ``other`` have the same shape."""
    _tensor_arg("is_same_size", input)
    return tuple(input.shape) == tuple(_tensor_arg("is_same_size", other, "other", 2).shape)


def result_type(tensor: Any, other: Any) -> _dtype.dtype:
    """The dtype an arithmetic op on ``tensor`` and ``other`` (tensors or numbers)
    computes in, by PyTorch's promotion rules (see ``agrad/_dtype.py``).

    Example::

        >>> agrad.result_type(agrad.tensor([1, 2], dtype=agrad.int32), 2.5)
        agrad.float32
    """
    dims: list[_dtype.dtype] = []
    zero_dims: list[_dtype.dtype] = []
    scalars: list[Any] = []
    for value in (tensor, other):
        if isinstance(value, Tensor):
            (dims if value.ndim else zero_dims).append(value.dtype)
        elif isinstance(value, (numbers.Number, np.generic)) and not isinstance(value, complex):
            scalars.append(value)
        else:
            names = ", ".join(type(v).__name__ for v in (tensor, other))
            raise TypeError(
                f"result_type() received an invalid combination of arguments - got ({names}), but expected one "
                "of: (Tensor tensor, Tensor other), (Number scalar, Tensor tensor), (Tensor tensor, Number other), "
                "(Number scalar1, Number scalar2)")
    return _dtype.result_type(dims, zero_dims, scalars)


def typename(obj: Any) -> str:
    """The type of ``obj`` as a string: a tensor's legacy type name
    (``agrad.FloatTensor``), otherwise its class's module and qualified name.

    Example::

        >>> agrad.typename(agrad.zeros(2)), agrad.typename(3)
        ('agrad.FloatTensor', 'int')
    """
    if isinstance(obj, Tensor):
        return _dtype.legacy_type_name(obj.dtype, obj.device.type)
    module = getattr(obj, "__module__", "") or ""
    if hasattr(obj, "__qualname__"):
        qualname = obj.__qualname__
    elif hasattr(obj, "__name__"):
        qualname = obj.__name__
    else:
        module = obj.__class__.__module__ or ""
        qualname = obj.__class__.__qualname__
    return qualname if module in ("", "builtins") else f"{module}.{qualname}"


def is_storage(obj: Any) -> builtins.bool:
    """Whether ``obj`` is a storage object: always False, agrad's tensors have no separate storage."""
    return False


# Note: defined last, as it shadows the builtin ``range`` in every function of this
# module (a global is looked up when a function runs): none of them calls the builtin.
@_allocating
def range(start: Any, end: Any, step: Any = 1, *, dtype: Any = None, device: Any = None,  # noqa: A001
          requires_grad: bool = False) -> Tensor:
    """Deprecated (as in PyTorch): values from ``start`` to ``end`` *inclusive* by
    ``step``, in the default dtype unless ``dtype`` is given.  Use :func:`arange`."""
    warnings.warn(
        "agrad.range is deprecated and will be removed in a future release because its behavior is inconsistent "
        "with Python's range builtin. Instead, use agrad.arange, which produces values in [start, end).",
        UserWarning, stacklevel=3,
    )
    _check_range(start, end, step)
    n = int(math.floor((end - start) / step)) + 1
    values = start + step * np.arange(n, dtype=np.float64)
    return _finish(_cast(values, _np_dtype(dtype), copy=False), requires_grad, device)

