"""Test helpers: the optional PyTorch oracle, the size of the soaks, how long a test
waits for a condition, blocking twins called on a loop on purpose, and cheap
per-trial garbage collection."""

from __future__ import annotations

import contextlib
import gc
import os
import warnings
from collections.abc import Iterator

import numpy as np
import pytest

import agrad

try:
    import torch
except ImportError:  # the oracle is optional; tests that need it skip
    torch = None

requires_torch = pytest.mark.skipif(torch is None, reason="PyTorch (the test oracle) is not installed")


# Note [Soak sizes]
# ~~~~~~~~~~~~~~~~~
# The randomized soaks (seeded cancellation, interrupt and leak trials, many
# concurrent backwards; marked ``soak``) have one implementation and two
# sizes, chosen by one environment variable, AGRAD_SOAK: "ci" (the default: a
# plain pytest run and .ci/run) or "full" (the full reliability script,
# ``python -m tests.reliability.run --full``, runs its own parts at that size,
# then the engine's soaks under it).  The CI size is fewer trials of the same
# kinds, never fewer kinds: every soak still runs each backend (asyncio,
# uvloop, trio), each cancellation mechanism and fault kind, each mode; where
# a random draw could miss a kind at the small size, the soak takes the kinds
# in turn instead.  The full size finds the rare interleavings; the CI size
# keeps the suite fast.
SOAK_VARIABLE = "AGRAD_SOAK"
SOAK_SIZES = ("ci", "full")


def _soak_size() -> str:
    size = os.environ.get(SOAK_VARIABLE, "ci")
    if size not in SOAK_SIZES:
        raise ValueError(f"{SOAK_VARIABLE}={size!r}: expected one of {', '.join(SOAK_SIZES)}")
    return size


SOAK = _soak_size()


def soak(ci: int, full: int) -> int:
    """``ci`` trials by default, ``full`` under ``AGRAD_SOAK=full`` (Note [Soak sizes])."""
    return full if SOAK == "full" else ci


# How long a test waits for a condition (an event, a rendezvous, a worker's
# exit, a server's start) before it fails.  Tests wait on conditions, never
# on time: this bound is reached only by a hang, so it sits far above what a
# machine loaded many times over needs, and far below the per-test timeout
# (pyproject.toml), so that a hang fails with the test's own message.
WAIT_S = 60.0


@contextlib.contextmanager
def blocking_on_the_loop() -> Iterator[None]:
    """Around a blocking twin (``backward_sync``, ``grad_sync``) that a test calls on a
    running loop's thread on purpose (the engine must work there, or it is the reference a
    trial compares with): no :class:`agrad.BlockingCallWarning`, which the suite's
    ``filterwarnings = error`` would turn into a failure of whichever test reaches the
    call site first (it warns once per site)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", agrad.BlockingCallWarning)
        yield


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
