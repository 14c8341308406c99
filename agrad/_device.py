"""Devices.  Only ``cpu`` (numpy) exists today; the engine routes work by
device so that a CUDA backend (CuPy) slots in as one more backend module."""

from __future__ import annotations

from typing import Any

__all__ = ["device"]


class device:
    """Where a tensor's data lives (mirrors ``torch.device``).

    Example::

        >>> agrad.device("cpu")
        device(type='cpu')
    """

    __slots__ = ("type", "index")

    def __init__(self, spec: Any, index: int | None = None) -> None:
        if isinstance(spec, device):
            spec, index = spec.type, spec.index
        if not isinstance(spec, str):
            raise TypeError(f"device() expected a string or a device, got {type(spec).__name__}")
        kind, _, idx = spec.partition(":")
        if idx:
            index = int(idx)
        if kind != "cpu":
            raise RuntimeError(
                f"Expected one of cpu device type at start of device string: {spec!r} "
                "(CUDA support arrives with the CuPy backend)"
            )
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


CPU = device("cpu")
