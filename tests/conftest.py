"""Shared fixtures (every async test runs on asyncio, asyncio+uvloop and trio), and the
timeout of the soaks at their full size."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator

import numpy as np
import pytest

from agrad import _backends
from tests.devices.fake_backend import FakeBackend
from tests.helpers import SOAK


@pytest.fixture(
    params=[
        pytest.param(("asyncio", {}), id="asyncio"),
        pytest.param(("asyncio", {"use_uvloop": True}), id="uvloop"),
        pytest.param(("trio", {}), id="trio"),
    ]
)
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict]:
    return request.param


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


@pytest.fixture
def default_sigint() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt during the test, as in an interactive
    program, even where the test run inherited it ignored (a background job of
    a shell without job control starts with SIGINT ignored)."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


@pytest.fixture
def fake_device() -> Iterator[str]:
    """``fake:1``, a second device (the suite's ``fake`` backend,
    tests/devices/fake_backend.py) whose arrays refuse to mix with host
    arrays or with ``fake:0``'s (the current device)."""
    _backends.register_backend(FakeBackend())
    try:
        yield "fake:1"
    finally:
        _backends.unregister_backend("fake")


# A soak at its full size (AGRAD_SOAK=full, Note [Soak sizes]) runs for minutes, not seconds: its
# per-test timeout grows with it, staying as far above its run time as pyproject.toml's is above the
# slowest test of a CI-sized run.
FULL_SOAK_TIMEOUT_S = 3600


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if SOAK != "full":
        return
    for item in items:
        if item.get_closest_marker("soak") is not None:
            item.add_marker(pytest.mark.timeout(FULL_SOAK_TIMEOUT_S))
