"""Test helpers: the optional PyTorch oracle, and cheap per-trial garbage collection."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

import numpy as np
import pytest

try:
    import torch
except ImportError:  # the oracle is optional; tests that need it skip
    torch = None

requires_torch = pytest.mark.skipif(torch is None, reason="PyTorch (the test oracle) is not installed")


# Note [Collecting per trial]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A full ``gc.collect()`` walks every tracked object in the process: with
# torch imported and the suite's modules loaded that is 0.2-0.3 s each on the
# 2-core VM, and several times more on a loaded one.  A test that collects
# once per trial (to show each trial's graph is garbage) then spends almost
# all its time there: 150 trials ran past pytest-timeout's 300 s on a loaded
# CI machine, and the timeout's exception, raised by SIGALRM while a
# collected trio ``Nursery.__del__`` ran, was swallowed as "Exception ignored
# in Nursery.__del__" (issue 14, item 24).  Freezing the objects that exist
# before the loop (``gc.freeze``) takes them out of every collection, so each
# one walks only what the test made since; nothing the test makes is frozen,
# so what it asserts about its own objects is unchanged.
@contextlib.contextmanager
def collect_only_new_objects() -> Iterator[None]:
    """Inside the block, ``gc.collect()`` skips every object older than the
    block (Note [Collecting per trial])."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def non_contiguous(a: np.ndarray) -> np.ndarray:
    """``a``'s values in memory that is not C-contiguous where it can be:
    column-major for two or more dimensions, every other element of a longer
    array for one (a 0-d array, or one whose column-major layout is also
    row-major, stays as it is)."""
    if a.ndim >= 2:
        return np.asfortranarray(a)
    return np.repeat(a, 2)[::2] if a.ndim == 1 else a
