"""Light form of the leak check, sized by AGRAD_SOAK (the full one: ``python -m tests.reliability.run --full``)."""

from __future__ import annotations

import pytest

from tests.reliability import leaks
from tests.reliability.run import PLAN


@pytest.mark.soak
def test_backwards_in_every_mode_leak_no_thread_object_task_or_memory() -> None:
    """Awaited (asyncio, uvloop, trio; plain, offloaded, cancelled, failed, reentrant, concurrent) and
    blocking backwards: round B ends with no more threads, agrad objects or event loops than round A,
    its traced memory grows far less, and no agrad task outlives its loop."""
    tally = leaks.soak(PLAN.leak_steps, PLAN.seed + 20_000)
    modes = {f"{b}: {m}" for b in (*leaks.BACKENDS, "blocking")
             for m in (leaks.SYNC_MODES if b == "blocking" else leaks.ASYNC_MODES)}
    assert set(tally.trials) == modes
    assert not tally.violations, tally.report()
