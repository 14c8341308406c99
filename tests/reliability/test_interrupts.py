"""Light form of the interrupt injection (the full one: ``python -m tests.reliability.run --full``)."""

from __future__ import annotations

from tests.reliability import interrupts

TRIALS = 60
SEED = 30_000


def test_interrupted_blocking_backwards_change_no_grad_and_leave_nothing_running() -> None:
    """SIGINT at a random moment of ``backward_sync``, and BaseExceptions raised by a node: an
    interrupted call changes no ``.grad``, now or later, and leaves no thread or provisional gradient."""
    tally = interrupts.soak(TRIALS, SEED)
    assert tally.trials
    assert not tally.violations, tally.report()
