"""Shared fixtures: every async test runs on asyncio, asyncio+uvloop and trio."""

from __future__ import annotations

import numpy as np
import pytest


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
