"""Backends: one module per device type, behind one small interface.

A :class:`Backend` tells agrad everything device-specific: the array module
op forwards compute with (``xp``: numpy, CuPy), how to recognise its arrays
and say which device holds one, how to move arrays to and from the host, and
how to order and await its asynchronous work (streams and events on CUDA).
Everything above this package (tensors, ops, the engine) asks the registry
here and never imports a device library itself.

* ``cpu`` is numpy (``_numpy.py``), always loaded.
* ``cuda`` is CuPy (``_cupy.py``), known by name from the start, so
  ``agrad.device("cuda")`` parses anywhere, but imported only when a CUDA
  array is first needed, with a clear error where CuPy or a GPU is missing.
* :func:`register_backend` adds a type: the test suite registers a
  CPU-backed one to exercise device routing without a GPU.

Note [Devices come from arrays]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A tensor does not store its device: its array knows (a numpy array is on the
CPU, a CuPy array on ``cuda:<its device id>``), so there is nothing to keep in
sync and ``Tensor._make``, the hot constructor, is unchanged.  The registry
maps array *types* to backends; a plain ``numpy.ndarray`` is tested first, by
identity, so CPU-only code pays one type comparison per lookup.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np

from agrad._backends._base import Backend
from agrad._backends._cupy import CupyBackend
from agrad._backends._numpy import NumpyBackend
from agrad._device import CPU, add_type, device, index_of, remove_type
from agrad._device import known_types as known_types

__all__ = [
    "Backend", "register_backend", "backend", "known_types", "device_of", "array_module", "on", "transfer",
    "canonical", "full", "zeros", "writeable", "is_array",
]

_ndarray = np.ndarray

# Backends by device type, in registration order (error messages list them),
# and by array type once loaded.
_BACKENDS: dict[str, Backend] = {}
_BY_ARRAY_TYPE: dict[type, Backend] = {}
_LOADED: set[str] = set()
# Canonical device objects (Note [Devices come from arrays]): one per (type, index).
_DEVICES: dict[tuple[str, int | None], device] = {("cpu", None): CPU}


def register_backend(b: Backend) -> None:
    """Make device type ``b.type`` known (replacing one of that type); it is loaded on first use."""
    if b.type in _BACKENDS:
        unregister_backend(b.type)
    _BACKENDS[b.type] = b
    add_type(b.type)


def unregister_backend(kind: str) -> None:
    """Forget device type ``kind`` (for tests that register their own)."""
    b = _BACKENDS.pop(kind)
    remove_type(kind)
    for t in b.array_types:
        _BY_ARRAY_TYPE.pop(t, None)
    _LOADED.discard(kind)  # its device objects stay canonical: caches hold them


def backend(kind: str) -> Backend:
    """The loaded backend of device type ``kind``."""
    b = _BACKENDS[kind]
    if kind not in _LOADED:
        b.load()
        for t in b.array_types:
            _BY_ARRAY_TYPE[t] = b
        _LOADED.add(kind)
    return b


def _device(kind: str, index: int | None) -> device:
    d = _DEVICES.get((kind, index))
    if d is None:
        d = _DEVICES[(kind, index)] = device(kind, index)
    return d


def canonical(dev: Any) -> device:
    """The canonical device object for ``dev`` (a device or a string), index filled in.

    Checks that the device exists: ``cuda:3`` on a machine with two GPUs raises.
    """
    d = dev if isinstance(dev, device) else device(dev)
    if d.type == "cpu":
        return CPU
    b = backend(d.type)
    index = b.current_index() if d.index is None else d.index
    count = b.device_count()
    if index >= count:
        raise RuntimeError(
            f"{d.type} device index {index} is out of range: {count} {d.type} device(s) available"
        )
    return _device(d.type, index)


def _backend_of(array: Any) -> Backend:
    b = _BY_ARRAY_TYPE.get(type(array))
    if b is None:
        raise TypeError(f"agrad has no backend for arrays of type {type(array).__module__}.{type(array).__name__}")
    return b


def device_of(array: Any) -> device:
    """The canonical device holding ``array``."""
    if type(array) is _ndarray:
        return CPU
    b = _backend_of(array)
    return _device(b.type, b.index_of(array))


def is_array(x: Any) -> bool:
    """Whether ``x`` is an array of a loaded backend (numpy's included)."""
    return type(x) is _ndarray or type(x) in _BY_ARRAY_TYPE


def array_module(array: Any) -> Any:
    """The array module that computes on ``array`` (numpy for host arrays)."""
    return np if type(array) is _ndarray else _backend_of(array).xp


_NO_CONTEXT = contextlib.nullcontext()


def on(dev: device, engine: bool = False) -> contextlib.AbstractContextManager[Any]:
    """Make ``dev`` current for the kernels launched inside (and, with ``engine``,
    its engine stream: the backward's kernels run there, Note [Engine streams])."""
    if dev is CPU:
        return _NO_CONTEXT
    return backend(dev.type).context(index_of(dev), engine)


def transfer(array: Any, dst: device) -> Any:
    """A copy of ``array`` on ``dst`` (through host memory between device types)."""
    src = device_of(array)
    if src is dst:
        return array
    if src.type == dst.type:
        return backend(dst.type).move(array, index_of(dst))
    host = array if src is CPU else backend(src.type).to_host(array)
    if dst is CPU:
        return host
    return backend(dst.type).from_host(host, index_of(dst))


def writeable(array: Any) -> bool:
    """Whether ``array`` may be written to (CuPy arrays have no read-only flag)."""
    return array.flags.writeable if type(array) is _ndarray else getattr(array.flags, "writeable", True)


def full(shape: tuple[int, ...], value: Any, dtype: Any, dev: device) -> Any:
    """An array of ``shape`` filled with ``value`` on ``dev``."""
    if dev is CPU:
        return np.full(shape, value, dtype)
    with on(dev):
        return backend(dev.type).xp.full(shape, value, dtype)


def zeros(shape: tuple[int, ...], dtype: Any, dev: device) -> Any:
    """An array of zeros on ``dev``."""
    return np.zeros(shape, dtype) if dev is CPU else full(shape, 0, dtype, dev)


register_backend(NumpyBackend())
register_backend(CupyBackend())
