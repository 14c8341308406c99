"""The default random number generator's state (mirrors ``torch.random``).

The default generator (used by every random factory and op: ``rand``,
``randn``, ``randint``, ``normal``, the in-place fills, ``nn.functional.dropout``...)
is process-wide, as PyTorch's CPU generator is: it
is the one piece of state agrad does not keep per task, so concurrent tasks or
threads that draw random numbers interleave their draws.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from agrad._creation import default_generator, initial_seed, manual_seed, seed

__all__ = ["get_rng_state", "set_rng_state", "manual_seed", "seed", "initial_seed", "fork_rng"]


def get_rng_state() -> Any:
    """Return the default generator's state (numpy's bit-generator state: a dict).

    Example::

        >>> state = agrad.get_rng_state()
        >>> a = agrad.rand(2)
        >>> agrad.set_rng_state(state)
        >>> agrad.rand(2).tolist() == a.tolist()
        True
    """
    return default_generator.get_state()


def set_rng_state(new_state: Any) -> None:
    """Restore the default generator's state from :func:`get_rng_state`."""
    default_generator.set_state(new_state)


@contextmanager
def fork_rng(devices: Any = None, enabled: bool = True, _caller: str = "fork_rng",
             _devices_kw: str = "devices", device_type: str | None = None) -> Iterator[None]:
    """Restore the default generator's state on exit, so draws made inside do not
    change the draws made after.

    Args:
        devices: accepted for PyTorch compatibility (agrad's generator is one
            for all devices).
        enabled: if ``False``, do nothing.

    Example::

        >>> with agrad.random.fork_rng():
        ...     a = agrad.rand(2)
        >>> agrad.rand(2).tolist() == a.tolist()  # the draw inside did not advance it
        True
    """
    if not enabled:
        yield
        return
    state = get_rng_state()
    try:
        yield
    finally:
        set_rng_state(state)
