"""Saving and loading tensors and containers of them (mirrors ``torch.serialization``).

``agrad.save(obj, f)`` writes a `safetensors <https://huggingface.co/docs/safetensors>`_
file: every tensor in ``obj`` is one of the file's tensors, and the structure
around them (dicts, lists, tuples, numbers, strings, ``None``, dtypes and
``agrad.Size``) is JSON in the file's metadata.  ``agrad.load(f)`` rebuilds
``obj``.  Nothing is ever unpickled, so loading an untrusted file runs no
code (PyTorch's ``weights_only=True``, always).  A safetensors file written
by another library (``safetensors.torch.save_file(model.state_dict(), f)``)
loads as the flat dict of its tensors.

    >>> import io
    >>> buf = io.BytesIO()
    >>> agrad.save({"w": agrad.ones(2, 3), "step": 7}, buf)
    >>> _ = buf.seek(0)
    >>> state = agrad.load(buf)
    >>> state["w"].shape, state["step"]
    (agrad.Size([2, 3]), 7)

A :class:`~agrad.nn.Parameter` loads as a Parameter (with its
``requires_grad``), an ``OrderedDict`` (what ``state_dict()`` returns) as an
``OrderedDict``, and dict keys keep their types (an optimizer's state is
keyed by int), so a model's and an optimizer's ``state_dict`` round-trip:

    >>> model = agrad.nn.Linear(3, 2)
    >>> buf = io.BytesIO()
    >>> agrad.save(model.state_dict(), buf)
    >>> _ = buf.seek(0)
    >>> model.load_state_dict(agrad.load(buf))
    <All keys matched successfully>

Deliberate differences from ``torch.save``: tensors that share memory (views
of one another) are saved and loaded as separate tensors (one tensor object
saved twice loads as one object); a non-leaf tensor loads as a leaf with its
``requires_grad``; Python objects other than the ones above raise
``TypeError`` instead of being pickled.  The ``safetensors`` package is an
optional extra: ``pip install 'agrad[serialization]'``.

A PyTorch checkpoint (a ``.pt`` file holding a ``state_dict``) converts, with
PyTorch installed, to a safetensors file that ``agrad.load`` reads as its dict
of tensors (``.clone()`` because ``safetensors`` refuses tensors that share
memory, as tied weights do)::

    python -c "
    import sys, torch, safetensors.torch as st
    sd = torch.load(sys.argv[1], map_location='cpu', weights_only=True)
    st.save_file({k: v.detach().clone().contiguous() for k, v in sd.items()}, sys.argv[2])
    " m.pt m.safetensors

then ``model.load_state_dict(agrad.load("m.safetensors"))``.
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections import OrderedDict
from typing import IO, Any

import numpy as np

from agrad import _dtype
from agrad._backends import canonical
from agrad._device import CPU
from agrad._device import device as device_type
from agrad._size import Size
from agrad._tensor import Tensor
from agrad.nn.parameter import Parameter

__all__ = ["save", "load"]

_FORMAT = "agrad/1"  # the metadata key holding agrad's structure, and its version

# safetensors' dtype names (its header's) for agrad's dtypes.
_ST_NAMES = {"float16": "F16", "float32": "F32", "float64": "F64", "bfloat16": "BF16", "int8": "I8",
             "int16": "I16", "int32": "I32", "int64": "I64", "uint8": "U8", "bool": "BOOL"}
_FROM_ST = {v: k for k, v in _ST_NAMES.items()}


def _safetensors() -> Any:
    try:
        import safetensors
    except ImportError:  # pragma: no cover - the test extra installs it
        raise RuntimeError("agrad.save/agrad.load need the safetensors package: "
                           "pip install 'agrad[serialization]'") from None
    return safetensors


class _Writer:
    """Flattens an object into safetensors' tensors and a JSON tree."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}
        self.seen: dict[int, str] = {}  # id(tensor) -> key: a tensor saved twice is stored once

    def node(self, obj: Any) -> Any:
        if isinstance(obj, Tensor):
            key = self.seen.get(id(obj))
            if key is None:
                key = self.seen[id(obj)] = str(len(self.arrays))
                data = obj._data if obj.device is CPU else obj.detach().cpu()._data
                self.arrays[key] = data if data.flags.c_contiguous else data.copy(order="C")  # 0-d stays 0-d
            node = {"tensor": key, "requires_grad": obj.requires_grad}
            return {**node, "parameter": True} if isinstance(obj, Parameter) else node
        if obj is None or isinstance(obj, (bool, int, str)):
            return {"value": obj}
        if isinstance(obj, float):
            return {"value": obj} if math.isfinite(obj) else {"float": repr(obj)}
        if isinstance(obj, _dtype.dtype):
            return {"dtype": obj.name}
        if isinstance(obj, Size):
            return {"size": list(obj)}
        if isinstance(obj, dict):
            items = [[self.node(k), self.node(v)] for k, v in obj.items()]
            return {"ordered_dict": items} if isinstance(obj, OrderedDict) else {"dict": items}
        if isinstance(obj, (list, tuple)):
            return {"list" if isinstance(obj, list) else "tuple": [self.node(v) for v in obj]}
        raise TypeError(f"agrad.save: cannot save an object of type {type(obj).__name__} (agrad saves tensors, "
                        "numbers, strings, None, dtypes, Size, and dicts, lists and tuples of them; it never pickles)")


def save(obj: Any, f: str | os.PathLike[str] | IO[bytes], pickle_module: Any = None, pickle_protocol: int = 2,
         _use_new_zipfile_serialization: bool = True) -> None:
    """Save ``obj`` (a tensor or Parameter, or dicts, OrderedDicts, lists and tuples
    of tensors and plain values) to ``f``, a path or a binary file, as a safetensors file; see the
    module docstring.  ``pickle_module`` and friends are accepted for PyTorch's
    signature and ignored: agrad never pickles."""
    st = _safetensors()
    writer = _Writer()
    tree = writer.node(obj)
    specs = {k: st.TensorSpec(dtype=a.dtype.name, shape=a.shape, data_ptr=a.ctypes.data, data_len=a.nbytes)
             for k, a in writer.arrays.items()}
    data = bytes(st.serialize(specs, metadata={_FORMAT: json.dumps(tree)}))
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as out:
            out.write(data)
    else:
        f.write(data)


def _metadata(data: bytes) -> dict[str, str]:
    """The ``__metadata__`` of a safetensors file: its header is 8 bytes of
    little-endian length, then that many bytes of JSON."""
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n]).get("__metadata__") or {}


def _array(spec: dict[str, Any]) -> np.ndarray:
    name = _FROM_ST.get(spec["dtype"])
    if name is None:
        raise RuntimeError(f"agrad.load: agrad has no dtype for the file's {spec['dtype']} tensors")
    np_dtype = _dtype.to_dtype(getattr(_dtype, name)).np  # refuses bfloat16 without ml_dtypes
    return np.frombuffer(bytearray(spec["data"]), dtype=np_dtype).reshape(spec["shape"])


def load(f: str | os.PathLike[str] | IO[bytes], map_location: Any = None, pickle_module: Any = None, *,
         weights_only: bool | None = None, mmap: bool | None = None, **pickle_load_args: Any) -> Any:
    """Load what :func:`save` wrote to ``f`` (a path or a binary file), its
    tensors on ``map_location`` (a device or its name; where they were saved
    from, the CPU, by default).  A safetensors file without agrad's structure
    loads as a dict of its tensors.  Never unpickles (``weights_only`` is
    always true in effect; ``mmap`` reads the whole file)."""
    st = _safetensors()
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as src:
            data = src.read()
    else:
        data = f.read()
    arrays = {name: _array(spec) for name, spec in st.deserialize(data)}
    if map_location is not None and not isinstance(map_location, (str, device_type)):
        raise TypeError("agrad.load: map_location must be a device or a device's name (agrad does not take "
                        f"PyTorch's storage functions or dicts), not {type(map_location).__name__}")
    device = None if map_location is None else canonical(map_location)
    tensors: dict[str, Tensor] = {}

    def tensor(key: str, requires_grad: bool, parameter: bool = False) -> Tensor:
        t = tensors.get(key)
        if t is None:
            t = Tensor._make(arrays[key])
            if device is not None and device is not CPU:
                t = t.to(device)
            t = Parameter(t, requires_grad) if parameter else t.requires_grad_(requires_grad)
            tensors[key] = t
        return t

    def build(node: dict[str, Any]) -> Any:
        kind = next(iter(node))  # each node is {kind: value, ...}
        value = node[kind]
        if kind == "tensor":
            return tensor(value, node["requires_grad"], node.get("parameter", False))
        if kind == "value":
            return value
        if kind == "float":
            return float(value)
        if kind == "dtype":
            return getattr(_dtype, value)
        if kind == "size":
            return Size(value)
        if kind == "dict":
            return {build(k): build(v) for k, v in value}
        if kind == "ordered_dict":
            return OrderedDict((build(k), build(v)) for k, v in value)
        items = [build(v) for v in value]
        return items if kind == "list" else tuple(items)

    tree = _metadata(data).get(_FORMAT)
    if tree is None:  # a safetensors file of another library: its tensors by name
        return {name: tensor(name, False) for name in arrays}
    return build(json.loads(tree))
