"""``agrad.device``: where a tensor's data lives (mirrors ``torch.device``).

A device is a type (``"cpu"``, ``"cuda"``, or one a backend registered, see
``agrad/_backends``) and an optional index.  This module knows the types by
name only (``agrad._backends`` adds each one it registers, see
:func:`add_type`), so it imports nothing of agrad.  Tensors report canonical
devices, with the index filled in (``cuda:0``), and the same object each time,
so the engine compares devices by identity on its hot paths.
"""

from __future__ import annotations

from typing import Any

__all__ = ["device"]

# The device types a backend is registered for, in registration order (error
# messages list them).  Only agrad._backends changes it, through add_type and
# remove_type, as it registers and unregisters backends.
_types: dict[str, None] = {}


def known_types() -> tuple[str, ...]:
    """The device types ``device()`` accepts, in registration order."""
    return tuple(_types)


def add_type(kind: str) -> None:
    """Make ``kind`` a device type (called by ``agrad._backends.register_backend``)."""
    _types[kind] = None


def remove_type(kind: str) -> None:
    """Forget the device type ``kind`` (called by ``agrad._backends.unregister_backend``)."""
    _types.pop(kind, None)


class device:
    """Where a tensor's data lives (mirrors ``torch.device``).

    Example::

        >>> agrad.device("cpu")
        device(type='cpu')
        >>> agrad.device("cuda:1")
        device(type='cuda', index=1)
    """

    __slots__ = ("type", "index")
    type: str
    index: int | None

    def __init__(self, spec: Any, index: int | None = None) -> None:
        if isinstance(spec, device):
            spec, index = spec.type, spec.index
        elif isinstance(spec, int) and not isinstance(spec, bool):  # torch.device(1) is cuda:1
            spec, index = "cuda", spec
        if not isinstance(spec, str):
            raise TypeError(f"device() expected a string, an int or a device, got {type(spec).__name__}")
        kind, colon, idx = spec.partition(":")
        if colon:
            if index is not None:
                raise RuntimeError(
                    f"type (string) must not include an index because index was passed explicitly: {spec}"
                )
            if not idx.isdigit():
                raise RuntimeError(f"Invalid device string: '{spec}'")
            index = int(idx)
        if kind not in _types:
            raise RuntimeError(
                f"Expected one of {', '.join(known_types())} device type at start of device string: {spec}"
            )
        if index is not None and (not isinstance(index, int) or index < 0):
            raise RuntimeError(f"Device index must not be negative, got {index}")
        self.type = kind
        self.index = index

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __repr__(self) -> str:
        idx = "" if self.index is None else f", index={self.index}"
        return f"device(type='{self.type}'{idx})"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"


CPU = object.__new__(device)
CPU.type, CPU.index = "cpu", None


def index_of(dev: device) -> int:
    """The index of ``dev``, a device other than the CPU as tensors carry it (with
    its index filled in, above)."""
    assert dev.index is not None, dev
    return dev.index
