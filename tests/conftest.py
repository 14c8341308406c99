"""Shared fixtures: every async test runs on asyncio, asyncio+uvloop and trio."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator

import numpy as np
import pytest

from agrad import _backends
from tests.devices.fake_backend import FakeBackend


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
