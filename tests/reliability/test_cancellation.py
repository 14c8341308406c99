"""Light form of the cancellation soak (the full one: ``python -m tests.reliability.run --full``)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.reliability import cancellation
from tests.reliability.run import LIGHT

pytestmark = pytest.mark.anyio


def backend_name(anyio_backend: Any) -> str:
    name, options = anyio_backend
    return "uvloop" if options.get("use_uvloop") else name


async def test_cancelled_backwards_change_no_grad_and_leave_nothing_running(anyio_backend: Any) -> None:
    """Seeded trials, every cancellation mechanism of the loop: a cancelled call changes no ``.grad``,
    one that returned added exactly its gradient, and the engine is quiet and usable afterwards."""
    tally = await cancellation.soak(LIGHT.cancellations, LIGHT.seed, backend_name(anyio_backend))
    assert sum(tally.trials.values()) == LIGHT.cancellations
    assert not tally.violations, tally.report()
