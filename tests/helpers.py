"""Test helpers: the optional PyTorch oracle."""

from __future__ import annotations

import pytest

try:
    import torch
except ImportError:  # the oracle is optional; tests that need it skip
    torch = None

requires_torch = pytest.mark.skipif(torch is None, reason="PyTorch (the test oracle) is not installed")
