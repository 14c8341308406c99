"""``agrad.cuda``: what CUDA devices this process can use (mirrors ``torch.cuda``).

Nothing here imports CuPy until asked: :func:`is_available` answers False,
without raising, where CuPy or a GPU is missing.
"""

from __future__ import annotations

from typing import Any

from agrad import _backends

__all__ = ["is_available", "device_count", "current_device", "synchronize"]


def is_available() -> bool:
    """Whether a CUDA device can be used (CuPy installed and a GPU present)."""
    try:
        return _backends.backend("cuda").device_count() > 0
    except RuntimeError:
        return False


def device_count() -> int:
    """The number of CUDA devices (0 where none can be used)."""
    return _backends.backend("cuda").device_count() if is_available() else 0


def current_device() -> int:
    """The index of the current CUDA device."""
    return _backends.backend("cuda").current_index()


def synchronize(device: Any = None) -> None:
    """Wait for every kernel on every stream of ``device`` (the current one by default).

    Blocking: from async code, awaiting a backward already waits for its
    kernels without blocking the loop (Note [Engine streams]).
    """
    dev = _backends.canonical("cuda" if device is None else device)
    _backends.backend("cuda").xp.cuda.Device(dev.index).synchronize()
