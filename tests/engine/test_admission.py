"""Note [Admission]: a bound on the cooperative calls in flight per loop."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest

import agrad
from agrad.autograd.graph import get_admission_limit, set_admission_limit

pytestmark = pytest.mark.anyio
pytest.importorskip("greenlet")


@pytest.fixture
def limit() -> Iterator[None]:
    old = get_admission_limit()
    yield
    set_admission_limit(old)


def test_the_limit_is_checked(limit: None) -> None:
    for bad in (0, -1, 1.5, True, None):
        with pytest.raises(ValueError, match="admission limit must be a positive int"):
            set_admission_limit(bad)  # type: ignore[arg-type]
    set_admission_limit(3)
    assert get_admission_limit() == 3


async def test_a_burst_waits_its_turn_and_nested_backwards_never_wait(limit: None) -> None:
    set_admission_limit(2)
    w = agrad.tensor([1.0, -2.0], requires_grad=True)
    inflight, peak = [0], [0]

    def step(x: agrad.Tensor) -> float:
        inflight[0] += 1
        peak[0] = max(peak[0], inflight[0])
        y = x
        for _ in range(300):  # long enough to pause: the others are admitted meanwhile if allowed
            y = y * 1.0
        loss = (w * y).sum()
        loss.backward_sync()  # a nested backward: never waits for admission
        inflight[0] -= 1
        return loss.item()

    results: list[float] = []

    async def one() -> None:
        results.append(await agrad.cooperative(step, agrad.tensor([3.0, 4.0])))

    async def plain() -> None:
        await (w * 2).sum().backward()

    with agrad.autograd.graph.engine_options(time_slice=1e-9):  # pause after every op
        async with anyio.create_task_group() as tg:
            for _ in range(8):
                tg.start_soon(one)
            for _ in range(4):
                tg.start_soon(plain)
    assert results == [-5.0] * 8
    assert peak[0] <= 2
    assert w.grad.tolist() == [8 * 3.0 + 4 * 2.0, 8 * 4.0 + 4 * 2.0]


async def test_a_cancelled_waiter_gives_its_place_back(limit: None) -> None:
    set_admission_limit(1)
    release = anyio.Event()
    started: list[int] = []

    def hold(i: int) -> int:
        started.append(i)
        return i

    async def slow() -> None:
        # Holds the one admission while it awaits: a cooperative call whose fn
        # waits for an awaitable the caller awaits.
        from agrad import _ambient

        def fn() -> None:
            _ambient.cooperative_call().wait_for(release.wait())

        await agrad.cooperative(fn)

    async with anyio.create_task_group() as tg:
        tg.start_soon(slow)
        await anyio.wait_all_tasks_blocked()
        with anyio.move_on_after(0.01):
            await agrad.cooperative(hold, 1)  # waits for admission, then is cancelled
        assert started == []
        release.set()
    assert await agrad.cooperative(hold, 2) == 2
    assert started == [2]
