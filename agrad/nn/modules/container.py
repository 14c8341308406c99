"""Containers: modules that hold other modules or parameters (mirrors ``torch.nn.modules.container``).

``Sequential`` chains its children; ``ModuleList``/``ModuleDict`` register
modules held in a list or dict; ``ParameterList``/``ParameterDict`` do the same
for parameters (plain tensors put in them become Parameters).  Registration
goes through ``Module.__setattr__``, so names, ``state_dict`` keys and their
order are PyTorch's: list entries are named ``"0"``, ``"1"``, ... and renumbered
after a deletion.

    >>> model = agrad.nn.Sequential(agrad.nn.Linear(3, 4), agrad.nn.Dropout(), agrad.nn.Linear(4, 1))
    >>> model(agrad.zeros(2, 3)).shape
    agrad.Size([2, 1])
    >>> list(model.state_dict())
    ['0.weight', '0.bias', '2.weight', '2.bias']
"""

from __future__ import annotations

import operator
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, KeysView, Mapping
from itertools import chain, islice
from typing import Any, TypeVar

from agrad._creation import typename
from agrad._tensor import Tensor
from agrad.nn.modules.module import Module, _addindent
from agrad.nn.parameter import Parameter

__all__ = ["Container", "Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"]

_V = TypeVar("_V")
_S = TypeVar("_S", bound="Sequential")
_L = TypeVar("_L", bound="ModuleList")
_P = TypeVar("_P", bound="ParameterList")
_D = TypeVar("_D", bound="ParameterDict")


def _abs_index(idx: Any, size: int) -> int:
    """``idx`` (anything with ``__index__``) as an index in ``range(size)``; PyTorch's IndexError when out of range."""
    idx = operator.index(idx)
    if not -size <= idx < size:
        raise IndexError(f"index {idx} is out of range")
    return idx % size


def _renumbered(modules: Iterable[Module]) -> dict[str, Module]:
    """``modules`` keyed ``"0"``, ``"1"``, ... (a list container after a deletion keeps its numbering dense)."""
    return {str(i): m for i, m in enumerate(modules)}


def _entry_repr(key: Any, value: Any, type_of: Callable[[Tensor], str]) -> str:
    """One line of ParameterList's/ParameterDict's repr: a tensor's kind, ``type_of`` it (the dtype for the
    list, the tensor type name for the dict, as in PyTorch), size and non-CPU device."""
    if not isinstance(value, Tensor):
        return f"  ({key}): Object of type: {type(value).__name__}"
    size_str = "x".join(str(size) for size in value.size())
    device_str = f" ({value.device})" if value.device.type == "cuda" else ""
    kind = "Parameter" if isinstance(value, Parameter) else "Tensor"
    return f"  ({key}): {kind} containing: [{type_of(value)} of size {size_str}{device_str}]"


def _as_parameter(value: Any) -> Any:
    """A plain tensor put in a ParameterList/ParameterDict becomes a Parameter; anything else is kept as it is."""
    return Parameter(value) if isinstance(value, Tensor) and not isinstance(value, Parameter) else value


def _key_value_pairs(pairs: Iterable[Any], owner: str) -> Iterator[tuple[Any, Any]]:
    """The ``(key, value)`` pairs of an ``update`` argument given as a sequence, with PyTorch's checks."""
    for j, p in enumerate(pairs):
        if not isinstance(p, Iterable):
            raise TypeError(f"{owner} update sequence element #{j} should be Iterable; is{type(p).__name__}")
        p = list(p)
        if len(p) != 2:
            raise ValueError(f"{owner} update sequence element #{j} has length {len(p)}; 2 is required")
        yield p[0], p[1]


class Container(Module):
    """Deprecated: a Module whose keyword arguments become submodules; subclass ``Module`` instead."""

    def __init__(self, **kwargs: Any) -> None:
        warnings.warn("`nn.Container` is deprecated. All of its functionality is now implemented in `nn.Module`. "
                      "Subclass that instead.", FutureWarning, stacklevel=2)
        super().__init__()
        for key, value in kwargs.items():
            self.add_module(key, value)


class Sequential(Module):
    """A chain of modules: ``forward`` feeds its input to the first and each output to the next.

    Built from modules (named ``"0"``, ``"1"``, ...) or from one ``OrderedDict``
    of named modules.  Indexing with an int gives a module, with a slice a new
    Sequential sharing the modules; ``append``/``insert``/``extend``/``pop``,
    ``+``, ``*`` and ``del`` work as on a list, keeping the numbering dense.

        >>> seq = agrad.nn.Sequential(agrad.nn.Identity(), agrad.nn.Flatten())
        >>> seq.append(agrad.nn.Linear(6, 2))[2]
        Linear(in_features=6, out_features=2, bias=True)
        >>> seq[:2]
        Sequential(
          (0): Identity()
          (1): Flatten(start_dim=1, end_dim=-1)
        )
        >>> seq(agrad.zeros(4, 2, 3)).shape
        agrad.Size([4, 2])
    """

    _modules: dict[str, Module]  # type: ignore[assignment]

    def __init__(self, *args: Any) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)

    def _get_item_by_idx(self, iterator: Iterable[_V], idx: Any) -> _V:
        """The ``idx``-th item of ``iterator`` (over this container's keys or modules)."""
        return next(islice(iterator, _abs_index(idx, len(self)), None))

    def __getitem__(self: _S, idx: slice | int) -> _S | Module:
        if isinstance(idx, slice):
            return self.__class__(OrderedDict(list(self._modules.items())[idx]))
        return self._get_item_by_idx(self._modules.values(), idx)

    def __setitem__(self, idx: int, module: Module) -> None:
        setattr(self, self._get_item_by_idx(self._modules.keys(), idx), module)

    def __delitem__(self, idx: slice | int) -> None:
        if isinstance(idx, slice):
            for key in list(self._modules.keys())[idx]:
                delattr(self, key)
        else:
            delattr(self, self._get_item_by_idx(self._modules.keys(), idx))
        self._modules = _renumbered(self._modules.values())

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def _check_sequential(self, other: Any) -> None:
        if not isinstance(other, Sequential):
            raise ValueError(f"add operator supports only objects of Sequential class, but {type(other)} is given.")

    def __add__(self, other: Sequential) -> Sequential:
        self._check_sequential(other)
        return Sequential().extend(chain(self, other))

    def __iadd__(self: _S, other: Sequential) -> _S:
        self._check_sequential(other)
        return self.extend(other)

    def _check_factor(self, other: Any) -> None:
        if not isinstance(other, int):
            raise TypeError(f"unsupported operand type(s) for *: {type(self)} and {type(other)}")
        if other <= 0:
            raise ValueError(f"Non-positive multiplication factor {other} for {type(self)}")

    def __mul__(self, other: int) -> Sequential:
        """A new Sequential repeating these modules (the same objects) ``other`` times."""
        self._check_factor(other)
        return Sequential().extend(list(self) * other)

    def __rmul__(self, other: int) -> Sequential:
        return self.__mul__(other)

    def __imul__(self: _S, other: int) -> _S:
        self._check_factor(other)
        return self.extend(list(self) * (other - 1))

    def pop(self, key: int | slice) -> Any:
        """Remove and return the module (or Sequential, for a slice) at ``key``."""
        v = self[key]
        del self[key]
        return v

    def forward(self, input: Any) -> Any:
        for module in self:
            input = module(input)
        return input

    def append(self: _S, module: Module) -> _S:
        """Add ``module`` at the end; returns this Sequential."""
        self.add_module(str(len(self)), module)
        return self

    def insert(self: _S, index: int, module: Module) -> _S:
        """Put ``module`` before position ``index`` (``-len <= index <= len``); returns this Sequential."""
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        if index < 0:
            index += n
        for i in range(n, index, -1):
            self._modules[str(i)] = self._modules[str(i - 1)]
        self._modules[str(index)] = module
        return self

    def extend(self: _S, sequential: Iterable[Module]) -> _S:
        """Append every module of ``sequential``; returns this Sequential."""
        for layer in sequential:
            self.append(layer)
        return self


class ModuleList(Module):
    """Holds submodules in a list, registered so that ``parameters()``, ``to()`` and ``state_dict`` see them.

    It has no ``forward``: the owner decides how to call its modules.  Its
    repr folds runs of identical entries, as PyTorch's does.

        >>> layers = agrad.nn.ModuleList([agrad.nn.Linear(2, 2) for _ in range(3)])
        >>> layers.append(agrad.nn.Identity())
        ModuleList(
          (0-2): 3 x Linear(in_features=2, out_features=2, bias=True)
          (3): Identity()
        )
        >>> len(layers[1:])
        3
    """

    _modules: dict[str, Module]  # type: ignore[assignment]

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self += modules

    def _get_abs_string_index(self, idx: Any) -> str:
        return str(_abs_index(idx, len(self)))

    def __getitem__(self: _L, idx: int | slice) -> Module | _L:
        if isinstance(idx, slice):
            return self.__class__(list(self._modules.values())[idx])
        return self._modules[self._get_abs_string_index(idx)]

    def __setitem__(self, idx: int, module: Module) -> None:
        setattr(self, self._get_abs_string_index(idx), module)

    def __delitem__(self, idx: int | slice) -> None:
        if isinstance(idx, slice):
            for k in range(len(self._modules))[idx]:
                delattr(self, str(k))
        else:
            delattr(self, self._get_abs_string_index(idx))
        self._modules = _renumbered(self._modules.values())

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def __iadd__(self: _L, modules: Iterable[Module]) -> _L:
        return self.extend(modules)

    def __add__(self, other: Iterable[Module]) -> ModuleList:
        return ModuleList(chain(self, other))

    def __repr__(self) -> str:
        """Like Module's, but a run of entries with equal reprs prints once as ``(i-j): n x repr``."""
        reprs = [repr(item) for item in self]
        if not reprs:
            return self._get_name() + "()"
        runs: list[list[Any]] = []  # [start, end, repr]
        for i, r in enumerate(reprs):
            if runs and runs[-1][2] == r:
                runs[-1][1] = i
            else:
                runs.append([i, i, r])
        lines = [_addindent(f"({start}): {r}" if start == end else f"({start}-{end}): {end - start + 1} x {r}", 2)
                 for start, end, r in runs]
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"

    def insert(self, index: int, module: Module) -> None:
        """Put ``module`` before position ``index``."""
        for i in range(len(self._modules), index, -1):
            self._modules[str(i)] = self._modules[str(i - 1)]
        self._modules[str(index)] = module

    def append(self: _L, module: Module) -> _L:
        """Add ``module`` at the end; returns this list."""
        self.add_module(str(len(self)), module)
        return self

    def pop(self, key: int | slice) -> Any:
        """Remove and return the module (or ModuleList, for a slice) at ``key``."""
        v = self[key]
        del self[key]
        return v

    def extend(self: _L, modules: Iterable[Module]) -> _L:
        """Append every module of the iterable ``modules``; returns this list."""
        if not isinstance(modules, Iterable):
            raise TypeError("ModuleList.extend should be called with an iterable, but got " + type(modules).__name__)
        offset = len(self)
        for i, module in enumerate(modules):
            self.add_module(str(offset + i), module)
        return self


class ModuleDict(Module):
    """Holds submodules in an ordered dict, registered under their keys.

    ``update`` keeps the order of a mapping (or of an iterable of pairs); it has
    no ``forward``.

        >>> heads = agrad.nn.ModuleDict({"drop": agrad.nn.Dropout(0.1), "id": agrad.nn.Identity()})
        >>> list(heads), heads["drop"]
        (['drop', 'id'], Dropout(p=0.1, inplace=False))
    """

    _modules: dict[str, Module]  # type: ignore[assignment]

    def __init__(self, modules: Mapping[str, Module] | Iterable[Any] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: str) -> bool:
        return key in self._modules

    def clear(self) -> None:
        """Remove every module."""
        self._modules.clear()

    def pop(self, key: str) -> Module:
        """Remove ``key`` and return its module."""
        v = self[key]
        del self[key]
        return v

    def keys(self) -> KeysView[str]:
        return self._modules.keys()

    def items(self) -> Any:
        return self._modules.items()

    def values(self) -> Any:
        return self._modules.values()

    def update(self, modules: Mapping[str, Module] | Iterable[Any]) -> None:
        """Add (or overwrite) the entries of a mapping or of an iterable of ``(key, module)`` pairs, in order."""
        if not isinstance(modules, Iterable):
            raise TypeError("ModuleDict.update should be called with an iterable of key/value pairs, but got "
                            + type(modules).__name__)
        pairs = (modules.items() if isinstance(modules, (Mapping, ModuleDict))
                 else _key_value_pairs(modules, "ModuleDict"))
        for key, module in pairs:
            self[key] = module


class ParameterList(Module):
    """Holds parameters in a list, registered as ``"0"``, ``"1"``, ...; tensors put in become Parameters.

    Other objects may be stored too (kept as plain attributes).  It cannot be
    called.

        >>> params = agrad.nn.ParameterList([agrad.zeros(2, 3), agrad.nn.Parameter(agrad.ones(2))])
        >>> params
        ParameterList(
            (0): Parameter containing: [agrad.float32 of size 2x3]
            (1): Parameter containing: [agrad.float32 of size 2]
        )
        >>> [name for name, _ in params.named_parameters()]
        ['0', '1']
    """

    def __init__(self, values: Iterable[Any] | None = None) -> None:
        super().__init__()
        self._size = 0
        if values is not None:
            self += values

    def _get_abs_string_index(self, idx: Any) -> str:
        return str(_abs_index(idx, len(self)))

    def __getitem__(self, idx: int | slice) -> Any:
        if isinstance(idx, slice):
            out = self.__class__()
            for i in range(*idx.indices(len(self))):
                out.append(self[i])
            return out
        return getattr(self, self._get_abs_string_index(idx))

    def __setitem__(self, idx: int, param: Any) -> None:
        # Every way of adding an entry (constructor, append, extend) ends here: the one place tensors become
        # Parameters.
        setattr(self, self._get_abs_string_index(idx), _as_parameter(param))

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[Any]:
        return iter(self[i] for i in range(len(self)))

    def __iadd__(self: _P, parameters: Iterable[Any]) -> _P:
        return self.extend(parameters)

    def append(self: _P, value: Any) -> _P:
        """Add ``value`` at the end (a tensor becomes a Parameter); returns this list."""
        new_idx = len(self)
        self._size += 1
        self[new_idx] = value
        return self

    def extend(self: _P, values: Iterable[Any]) -> _P:
        """Append every element of the iterable ``values`` (a tensor is not unpacked: it is refused)."""
        if not isinstance(values, Iterable) or isinstance(values, Tensor):
            raise TypeError("ParameterList.extend should be called with an iterable, but got " + type(values).__name__)
        for value in values:
            self.append(value)
        return self

    def extra_repr(self) -> str:
        return "\n".join(_entry_repr(k, p, lambda t: str(t.dtype)) for k, p in enumerate(self))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("ParameterList should not be called.")


class ParameterDict(Module):
    """Holds parameters in an ordered dict, registered under their (string) keys; tensors put in become Parameters.

    ``update`` from an ``OrderedDict``, a ParameterDict or an iterable of pairs
    keeps their order; from another mapping it goes in sorted key order (as in
    PyTorch).  It cannot be called.

        >>> pd = agrad.nn.ParameterDict({"w": agrad.zeros(2, 2), "b": agrad.zeros(2)})
        >>> pd
        ParameterDict(
            (b): Parameter containing: [agrad.FloatTensor of size 2]
            (w): Parameter containing: [agrad.FloatTensor of size 2x2]
        )
        >>> "w" in pd, len(pd)
        (True, 2)
    """

    def __init__(self, parameters: Any = None) -> None:
        super().__init__()
        self._keys: dict[str, None] = {}
        if parameters is not None:
            self.update(parameters)

    def _key_to_attr(self, key: Any) -> str:
        if not isinstance(key, str):
            raise TypeError("Index given to ParameterDict cannot be used as a key as it is not a string (type is "
                            f"'{type(key).__name__}'). Open an issue on github if you need non-string keys.")
        return key

    def __getitem__(self, key: str) -> Any:
        return getattr(self, self._key_to_attr(key))

    def __setitem__(self, key: str, value: Any) -> None:
        # Every way of adding an entry ends here: the one place tensors become Parameters.
        self._keys[key] = None
        setattr(self, self._key_to_attr(key), _as_parameter(value))

    def __delitem__(self, key: str) -> None:
        del self._keys[key]
        delattr(self, self._key_to_attr(key))

    def __len__(self) -> int:
        return len(self._keys)

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __reversed__(self) -> Iterator[str]:
        return reversed(self._keys)

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def copy(self) -> ParameterDict:
        """A new ParameterDict holding the same entries, in the same order."""
        return ParameterDict(OrderedDict((k, self[k]) for k in self._keys))

    def setdefault(self, key: str, default: Any = None) -> Any:
        """``self[key]``, after setting it to ``default`` if absent."""
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self) -> None:
        """Remove every entry."""
        for k in self._keys.copy():
            del self[k]

    def pop(self, key: str) -> Any:
        """Remove ``key`` and return its value."""
        v = self[key]
        del self[key]
        return v

    def popitem(self) -> tuple[str, Any]:
        """Remove and return the last inserted ``(key, value)`` pair."""
        if not self._keys:
            raise KeyError("popitem(): dictionary is empty")
        k = next(reversed(self._keys))
        return k, self.pop(k)

    def get(self, key: str, default: Any = None) -> Any:
        """``self[key]`` if present, else ``default``."""
        return self[key] if key in self else default

    def fromkeys(self, keys: Iterable[str], default: Any = None) -> ParameterDict:
        """A new ParameterDict with ``keys``, each set to ``default``."""
        return ParameterDict((k, default) for k in keys)

    def keys(self) -> KeysView[str]:
        return self._keys.keys()

    def items(self) -> Iterator[tuple[str, Any]]:
        return ((k, self[k]) for k in self._keys)

    def values(self) -> Iterator[Any]:
        return (self[k] for k in self._keys)

    def update(self, parameters: Any) -> None:
        """Add (or overwrite) the entries of a mapping or of an iterable of ``(key, value)`` pairs."""
        if not isinstance(parameters, Iterable):
            raise TypeError("ParametersDict.update should be called with an iterable of key/value pairs, but got "
                            + type(parameters).__name__)
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            pairs: Iterable[tuple[Any, Any]] = parameters.items()
        elif isinstance(parameters, Mapping):
            pairs = sorted(parameters.items())
        else:
            pairs = _key_value_pairs(parameters, "ParameterDict")
        for key, parameter in pairs:
            self[key] = parameter

    def extra_repr(self) -> str:
        return "\n".join(_entry_repr(k, p, typename) for k, p in self.items())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("ParameterDict should not be called.")

    def __or__(self, other: ParameterDict) -> ParameterDict:
        copy = self.copy()
        copy.update(other)
        return copy

    def __ror__(self, other: ParameterDict) -> ParameterDict:
        copy = other.copy()
        copy.update(self)
        return copy

    def __ior__(self: _D, other: ParameterDict) -> _D:
        self.update(other)
        return self
