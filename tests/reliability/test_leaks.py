"""Light form of the leak check (the full one: ``python -m tests.reliability.run --full``)."""

from __future__ import annotations

from tests.reliability import leaks
from tests.reliability.run import LIGHT


def test_backwards_in_every_mode_leak_no_thread_object_task_or_memory() -> None:
    """Awaited (asyncio, uvloop, trio; plain, offloaded, cancelled, failed, reentrant, concurrent) and
    blocking backwards: round B ends with no more threads, agrad objects or event loops than round A,
    its traced memory grows far less, and no agrad task outlives its loop."""
    tally = leaks.soak(LIGHT.leak_steps, LIGHT.seed + 20_000)
    assert not tally.violations, tally.report()
