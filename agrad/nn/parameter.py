"""Parameters and buffers: the tensors a Module registers (mirrors ``torch.nn.parameter``).

A :class:`Parameter` is a Tensor that a :class:`~agrad.nn.Module` registers as
one of its parameters when assigned as an attribute; it requires grad by
default.  Ops on a Parameter return plain Tensors, as in PyTorch.
:class:`Buffer` marks a tensor to register as a buffer.
"""

from __future__ import annotations

from typing import Any

from agrad._creation import empty
from agrad._tensor import Tensor, register_plain_type

__all__ = ["Parameter", "Buffer"]


class Parameter(Tensor):
    """A Tensor to be registered as a module parameter.

    ``Parameter(data, requires_grad=True)`` shares ``data``'s memory and
    version counter (PyTorch's ``_make_subclass``); without ``data`` it is an
    empty float tensor.

        >>> p = agrad.nn.Parameter(agrad.ones(2))
        >>> p
        Parameter containing:
        tensor([1., 1.], requires_grad=True)
        >>> type(p * 2).__name__
        'Tensor'
    """

    __slots__ = ()
    __module__ = "agrad.nn.parameter"

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True) -> "Parameter":
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter(): argument 'data' (position 1) must be Tensor, not {type(data).__name__}")
        p = cls._make(data._data, version_counter=data._version_counter)
        p.requires_grad_(requires_grad)
        return p

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True) -> None:
        pass  # __new__ did the work; Tensor.__init__ refuses direct construction

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo: dict[int, Any]) -> "Parameter":
        if id(self) in memo:
            return memo[id(self)]
        new = Parameter(Tensor._make(self._data.copy()), self._requires_grad)
        memo[id(self)] = new
        if self._grad is not None:
            new._grad = self._grad.__deepcopy__(memo)
        return new

    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return _rebuild_parameter, (self._data, self._requires_grad)


register_plain_type(Parameter)  # Note [Plain tensor types]


def _rebuild_parameter(data: Any, requires_grad: bool) -> Parameter:
    return Parameter(Tensor._make(data), requires_grad)


class _BufferMeta(type):
    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, _MarkedBuffer)


class Buffer(metaclass=_BufferMeta):
    """Marks a tensor as a buffer when assigned to a Module attribute:
    ``self.running_mean = Buffer(t)`` is ``self.register_buffer("running_mean", t)``,
    and ``Buffer(t, persistent=False)`` keeps it out of ``state_dict``.
    ``Buffer(t)`` is a detached alias of ``t`` carrying the mark; the module
    registers a plain tensor."""

    __module__ = "agrad.nn.parameter"

    def __new__(cls, data: Tensor | None = None, *, persistent: bool = True) -> Any:
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Buffer(): argument 'data' must be Tensor, not {type(data).__name__}")
        t = _MarkedBuffer._make(data._data, version_counter=data._version_counter)
        t.requires_grad_(data.requires_grad)
        t._persistent = persistent
        return t


class _MarkedBuffer(Tensor):
    """What ``Buffer(t)`` returns: a Tensor carrying the buffer mark, registered as it is."""

    __slots__ = ("_persistent",)
    _persistent: bool


register_plain_type(_MarkedBuffer)  # Note [Plain tensor types]
