"""Light form of the interrupt injection (the full one: ``python -m tests.reliability.run --full``)."""

from __future__ import annotations

from tests.reliability import interrupts
from tests.reliability.run import LIGHT


def test_interrupted_blocking_backwards_change_no_grad_and_leave_nothing_running() -> None:
    """SIGINT at a random moment of ``backward_sync``, and BaseExceptions raised by a node: an
    interrupted call changes no ``.grad``, now or later, and leaves no thread or provisional gradient."""
    tally = interrupts.soak(LIGHT.interrupts, LIGHT.seed + 10_000)
    assert sum(tally.trials.values()) == 2 * LIGHT.interrupts
    assert not tally.violations, tally.report()
