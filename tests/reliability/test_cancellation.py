"""Light form of the cancellation soak, sized by AGRAD_SOAK (the full one: ``python -m tests.reliability.run
--full``)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.reliability import cancellation
from tests.reliability.run import PLAN

pytestmark = [pytest.mark.anyio, pytest.mark.soak]


def backend_name(anyio_backend: Any) -> str:
    name, options = anyio_backend
    return "uvloop" if options.get("use_uvloop") else name


async def test_cancelled_backwards_change_no_grad_and_leave_nothing_running(anyio_backend: Any) -> None:
    """Seeded trials, every cancellation mechanism of the loop: a cancelled call changes no ``.grad``,
    one that returned added exactly its gradient, and the engine is quiet and usable afterwards."""
    backend = backend_name(anyio_backend)
    tally = await cancellation.soak(PLAN.cancellations, PLAN.seed, backend)
    assert sum(tally.trials.values()) == PLAN.cancellations
    family = "trio" if backend == "trio" else "asyncio"
    assert set(tally.trials) == {f"{backend}: {name}" for name in cancellation.MECHANISMS[family]}
    assert not tally.violations, tally.report()
