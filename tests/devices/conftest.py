"""The ``fake`` device type (``fake_backend.py``), registered for each test that asks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agrad import _backends
from tests.devices.fake_backend import FakeBackend


@pytest.fixture
def fake() -> Iterator[FakeBackend]:
    """Register the ``fake`` device type (fake:0 and fake:1) for one test."""
    b = FakeBackend()
    _backends.register_backend(b)
    try:
        yield b
    finally:
        _backends.unregister_backend("fake")


from tests.engine.conftest import Api, api  # noqa: E402, F401  (the entry points, three ways)
