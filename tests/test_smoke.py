"""A fast end-to-end smoke test: record, await backward, compare with the blocking twin."""

import pytest

import agrad

pytestmark = pytest.mark.anyio


@pytest.mark.filterwarnings("ignore::agrad.BlockingCallWarning")  # a blocking twin on the loop, on purpose
async def test_await_backward_matches_blocking_twin() -> None:
    x = agrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    await (x * x).sum().backward()
    awaited = x.grad.tolist()
    x.grad = None
    (x * x).sum().backward_sync()
    assert awaited == x.grad.tolist() == [2.0, 4.0, 6.0]
