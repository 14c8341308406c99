"""A second device type for the tests: ``fake``, CPU memory behind the backend interface.

``fake:0`` and ``fake:1`` hold :class:`FakeArray` s, numpy arrays tagged with
their device index.  They behave as CuPy arrays do where that matters to
agrad: numpy functions and ufuncs applied to them return fake arrays on the
same device, and mixing them with host arrays or arrays of the other fake
device raises, so any place agrad forgets a transfer fails loudly.  The
backend records what the engine asked of it (engine-stream contexts, caller
joins, idle callbacks) and calls its idle callbacks from another thread, as
CUDA calls host functions, so the tests check routing, transfers, per-device
workers and the thread-safe hand-over without a GPU.
"""

from __future__ import annotations

import contextlib
import threading
import types
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from agrad import _backends


class _State(threading.local):
    """Per-thread current device and engine-stream flag, as CuPy keeps them."""

    index = 0
    engine = False


_state = _State()


def in_engine_context() -> bool:
    """Whether this thread is inside an engine-stream context of the fake backend."""
    return _state.engine


class FakeArray(np.ndarray):
    """A numpy array that lives on ``fake:<device_index>``."""

    device_index: int

    def __array_finalize__(self, obj: Any) -> None:
        self.device_index = getattr(obj, "device_index", _state.index)

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, out: Any = None, **kw: Any) -> Any:
        index = _check((*inputs, *(out or ())), f"{ufunc.__name__}.{method}")
        if out is not None:
            kw["out"] = tuple(_host(o) for o in out)
        result = getattr(ufunc, method)(*map(_host, inputs), **kw)
        if out is not None:
            return out[0] if len(out) == 1 else out
        return _wrap(result, index)

    def copy(self, order: str = "C") -> "FakeArray":  # type: ignore[override]
        _check((self,), "copy")  # CuPy copies onto the current device
        return super().copy(order)

    def astype(self, *args: Any, **kwargs: Any) -> "FakeArray":  # type: ignore[override]
        _check((self,), "astype")
        return super().astype(*args, **kwargs)

    def __getitem__(self, key: Any) -> Any:
        if any(isinstance(k, np.ndarray) for k in _leaves(key)):  # advanced indexing: a gather kernel
            _check((self,), "__getitem__")
        return super().__getitem__(key)

    def __setitem__(self, key: Any, value: Any) -> None:
        # A copy kernel on the current device, as in CuPy (which also takes host values).
        _check((self, value if isinstance(value, FakeArray) else None), "__setitem__")
        super().__setitem__(key, _host(value))

    def __array_function__(self, func: Any, types_: Any, args: Any, kwargs: Any) -> Any:
        index = _check((*args, *kwargs.values()), func.__name__, kernel=func.__name__ not in _METADATA)
        result = func(*_unwrap(args), **_unwrap(kwargs))
        return _wrap(result, index)


def _leaves(x: Any) -> Iterator[Any]:
    if isinstance(x, (list, tuple)):
        for y in x:
            yield from _leaves(y)
    else:
        yield x


# Functions that only read or rearrange metadata (no kernel), which CuPy runs
# whatever the current device.
_METADATA = {"may_share_memory", "shares_memory", "broadcast_to", "broadcast_arrays", "reshape", "transpose",
             "squeeze", "expand_dims", "moveaxis", "swapaxes", "ravel", "ndim", "shape", "size"}


def _check(values: Any, what: str, kernel: bool = True) -> int:
    index = None
    for v in _leaves(values):
        if type(v) is np.ndarray:
            raise TypeError(f"fake device: {what} got a host array of shape {v.shape}; move it first")
        if isinstance(v, FakeArray):
            if index is not None and v.device_index != index:
                raise ValueError(f"fake device: {what} mixes fake:{index} and fake:{v.device_index}")
            index = v.device_index
    if index is None:
        return _state.index
    if kernel and index != _state.index:  # CuPy launches kernels on the current device only
        raise ValueError(f"fake device: {what} on arrays of fake:{index} while the current device is "
                         f"fake:{_state.index}")
    return index


def _host(x: Any) -> Any:
    return x.view(np.ndarray) if isinstance(x, FakeArray) else x


def _unwrap(x: Any) -> Any:
    if isinstance(x, tuple):
        return tuple(_unwrap(y) for y in x)
    if isinstance(x, list):
        return [_unwrap(y) for y in x]
    if isinstance(x, dict):
        return {k: _unwrap(v) for k, v in x.items()}
    return _host(x)


def _wrap(x: Any, index: int) -> Any:
    if isinstance(x, np.ndarray):
        if x.base is None:  # a new array owns its memory, as CuPy's results do (Note [Accumulating in place])
            order = "F" if x.flags.f_contiguous and not x.flags.c_contiguous else "C"
            out = np.ndarray.__new__(FakeArray, x.shape, x.dtype, order=order)
            np.copyto(out.view(np.ndarray), x)
        else:
            out = x.view(FakeArray)
        out.device_index = index
        return out
    if isinstance(x, np.generic):  # as CuPy: reductions give 0-d arrays
        return _wrap(np.asarray(x), index)
    if isinstance(x, tuple):
        return tuple(_wrap(y, index) for y in x)
    if isinstance(x, list):
        return [_wrap(y, index) for y in x]
    return x


class _Namespace:
    """numpy as an array module for fake arrays: functions that create arrays
    create them on the current fake device (``xp.zeros``...)."""

    def __init__(self, module: types.ModuleType) -> None:
        self._module = module

    def __getattr__(self, name: str) -> Any:
        if name == "ndarray":
            return FakeArray
        attr = getattr(self._module, name)
        if isinstance(attr, types.ModuleType):
            return _Namespace(attr)
        if isinstance(attr, (type, np.ufunc)) or not callable(attr):
            return attr  # dtypes, ufuncs (dispatch to FakeArray themselves), constants

        def call(*args: Any, **kwargs: Any) -> Any:
            index = _check((*args, *kwargs.values()), name, kernel=name not in _METADATA)
            return _wrap(attr(*_unwrap(args), **_unwrap(kwargs)), index)

        return call


class FakeBackend(_backends.Backend):
    type = "fake"

    def __init__(self, count: int = 2) -> None:
        self.count = count
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()

    def load(self) -> None:
        self.xp = _Namespace(np)
        self.array_types = (FakeArray,)

    def device_count(self) -> int:
        return self.count

    def index_of(self, array: FakeArray) -> int:
        return array.device_index

    @contextlib.contextmanager
    def context(self, index: int, engine: bool) -> Iterator[None]:
        if engine:
            self._note("engine_context")
        saved = _state.index, _state.engine
        _state.index, _state.engine = index, engine or _state.engine
        try:
            yield
        finally:
            _state.index, _state.engine = saved

    def from_host(self, array: np.ndarray, index: int) -> FakeArray:
        self._note("from_host")
        return _wrap(np.array(array, copy=True), index)

    def to_host(self, array: FakeArray) -> np.ndarray:
        self._note("to_host")
        return np.array(array.view(np.ndarray), copy=True)

    def move(self, array: FakeArray, index: int) -> FakeArray:
        self._note("move")
        return _wrap(np.array(array.view(np.ndarray), copy=True), index)

    def join_caller(self, index: int) -> None:
        self._note("join_caller")

    def when_idle(self, index: int, callback: Callable[[], None]) -> None:
        self._note("when_idle")
        threading.Thread(target=callback, name="fake stream callback").start()  # as CUDA's host functions

    def synchronize(self, index: int) -> None:
        self._note("synchronize")

    def _note(self, what: str) -> None:
        with self._lock:
            self.calls[what] += 1
