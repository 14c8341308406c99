"""Collation: a list of samples into one batch (mirrors ``torch.utils.data._utils.collate``).

:func:`default_collate` stacks tensors along a new first dimension, turns
numbers and numpy arrays into tensors, and recurses into dicts, named tuples
and sequences, keeping their types as PyTorch does (a tuple of fields becomes
a list of batches, for backwards compatibility).  :func:`default_convert`
is the same without batching, for a loader with ``batch_size=None``.
Element types are looked up in a registry, ``default_collate_fn_map``, which
:func:`collate` takes so a program can add its own.
"""

from __future__ import annotations

import collections.abc
import copy
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from agrad import _dtype
from agrad._creation import as_tensor, tensor
from agrad._ops._shape import stack
from agrad._tensor import Tensor

__all__ = ["default_collate", "default_convert", "collate", "default_collate_fn_map", "collate_tensor_fn",
           "collate_numpy_array_fn", "collate_numpy_scalar_fn", "collate_float_fn", "collate_int_fn",
           "collate_str_fn"]

CollateFnMap = dict[type | tuple[type, ...], Callable[..., Any]]

# numpy dtypes that hold strings or objects, which do not become tensors.
np_str_obj_array_pattern = re.compile(r"[SaUO]")

default_collate_err_msg_format = (
    "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}")


def _rebuild(template: Any, values: dict[Any, Any] | list[Any]) -> Any:
    """``values`` in the container type of ``template`` (a mapping or a sequence):
    a mutable one is copied and filled, so its class and extra state survive;
    an immutable one is rebuilt from them; a type that cannot be either gives a
    plain dict or list (PyTorch's fallbacks)."""
    try:
        if isinstance(template, collections.abc.MutableMapping | collections.abc.MutableSequence):
            clone = copy.copy(template)
            for key, value in (values.items() if isinstance(values, dict) else enumerate(values)):
                clone[key] = value
            return clone
        return type(template)(values)
    except TypeError:
        return values


def default_convert(data: Any) -> Any:
    """``data`` with every numpy array and numpy scalar inside it made a tensor
    (strings and object arrays left as they are); containers keep their types,
    except plain tuples, which become lists, as in PyTorch.

    Example::

        >>> import numpy as np
        >>> agrad.utils.data.default_convert({"x": np.array([1, 2]), "n": 3})
        {'x': tensor([1, 2]), 'n': 3}
    """
    elem_type = type(data)
    if isinstance(data, Tensor):
        return data
    if elem_type.__module__ == "numpy" and elem_type.__name__ not in ("str_", "string_"):
        if isinstance(data, np.ndarray) and np_str_obj_array_pattern.search(data.dtype.str) is not None:
            return data
        return as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return _rebuild(data, {key: default_convert(data[key]) for key in data})
    if isinstance(data, tuple) and hasattr(data, "_fields"):  # a namedtuple
        return elem_type(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuild(data, [default_convert(d) for d in data])
    return data


def collate(batch: Any, *, collate_fn_map: CollateFnMap | None = None) -> Any:
    """Collate ``batch`` (a sequence of samples of one structure): the first
    sample's type picks the function from ``collate_fn_map`` (by exact type,
    then by ``isinstance`` in the map's order); otherwise mappings, named tuples
    and sequences are collated field by field.

    Example::

        >>> from agrad.utils.data._utils.collate import collate
        >>> collate([(1, "a"), (2, "b")], collate_fn_map={int: lambda b, **kw: sum(b), str: lambda b, **kw: "".join(b)})
        [3, 'ab']
    """
    elem = batch[0]
    elem_type = type(elem)
    if collate_fn_map is not None:
        if elem_type in collate_fn_map:
            return collate_fn_map[elem_type](batch, collate_fn_map=collate_fn_map)
        for collate_type in collate_fn_map:
            if isinstance(elem, collate_type):
                return collate_fn_map[collate_type](batch, collate_fn_map=collate_fn_map)
    if isinstance(elem, collections.abc.Mapping):
        return _rebuild(elem, {key: collate([d[key] for d in batch], collate_fn_map=collate_fn_map) for key in elem})
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):  # a namedtuple
        return elem_type(*(collate(samples, collate_fn_map=collate_fn_map) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        elem_size = len(elem)
        if not all(len(e) == elem_size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        fields = [collate(samples, collate_fn_map=collate_fn_map) for samples in zip(*batch)]
        return fields if isinstance(elem, tuple) else _rebuild(elem, fields)
    raise TypeError(default_collate_err_msg_format.format(elem_type))


def collate_tensor_fn(batch: Any, *, collate_fn_map: CollateFnMap | None = None) -> Tensor:
    """Tensors of one shape stacked along a new first dimension."""
    return stack(batch, 0)


def collate_numpy_array_fn(batch: Any, *, collate_fn_map: CollateFnMap | None = None) -> Any:
    """Numpy arrays as tensors, then collated (string and object arrays refused)."""
    elem = batch[0]
    if np_str_obj_array_pattern.search(elem.dtype.str) is not None:
        raise TypeError(default_collate_err_msg_format.format(elem.dtype))
    return collate([as_tensor(b) for b in batch], collate_fn_map=collate_fn_map)


def collate_numpy_scalar_fn(batch: Any, *, collate_fn_map: CollateFnMap | None = None) -> Tensor:
    """Numpy scalars as one tensor of their dtype."""
    return as_tensor(batch)


def collate_float_fn(batch: Any, *, collate_fn_map: CollateFnMap | None = None) -> Tensor:
    """Python floats as a float64 tensor (the precision they have)."""
    return tensor(batch, dtype=_dtype.float64)


def collate_int_fn(batch: Any, *, collate_fn_map: CollateFnMap | None = None) -> Tensor:
    """Python ints (and bools) as an int64 (bool) tensor."""
    return tensor(batch)


def collate_str_fn(batch: Any, *, collate_fn_map: CollateFnMap | None = None) -> Any:
    """Strings and bytes kept as they are: the batch is the sequence of them."""
    return batch


default_collate_fn_map: CollateFnMap = {
    Tensor: collate_tensor_fn,
    np.ndarray: collate_numpy_array_fn,
    (np.bool_, np.number, np.object_): collate_numpy_scalar_fn,
    float: collate_float_fn,
    int: collate_int_fn,
    str: collate_str_fn,
    bytes: collate_str_fn,
}


def default_collate(batch: Any) -> Any:
    """The DataLoader's default ``collate_fn``: tensors stacked along a new
    first dimension; numpy arrays and numbers made tensors (Python floats
    float64, ints int64); strings kept in a list; mappings, named tuples and
    sequences collated field by field (a tuple's fields come back in a list).

    Example::

        >>> samples = [{"x": agrad.tensor([1, 2]), "y": 0.5}, {"x": agrad.tensor([3, 4]), "y": 1.5}]
        >>> agrad.utils.data.default_collate(samples)
        {'x': tensor([[1, 2],
                [3, 4]]), 'y': tensor([0.5000, 1.5000], dtype=agrad.float64)}
    """
    return collate(batch, collate_fn_map=default_collate_fn_map)
