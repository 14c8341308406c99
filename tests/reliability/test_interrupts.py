"""Light form of the interrupt injection, sized by AGRAD_SOAK (the full one: ``python -m tests.reliability.run
--full``)."""

from __future__ import annotations

import pytest

from tests.reliability import interrupts
from tests.reliability.run import PLAN


@pytest.mark.soak
def test_interrupted_blocking_backwards_change_no_grad_and_leave_nothing_running() -> None:
    """SIGINT at a random moment of ``backward_sync``, and BaseExceptions raised by a node: an
    interrupted call changes no ``.grad``, now or later, and leaves no thread or provisional gradient."""
    tally = interrupts.soak(PLAN.interrupts, PLAN.seed + 10_000)
    assert sum(tally.trials.values()) == 2 * PLAN.interrupts
    raised = {f"{exc.__name__} from a {place}" for exc in interrupts.RAISERS for place in interrupts.PLACES}
    assert raised <= set(tally.trials)
    assert not tally.violations, tally.report()
