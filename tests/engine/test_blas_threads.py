"""BLAS threads under agrad (Note [BLAS threads]): one by default, the
environment's choice when it makes one, and PyTorch's intra-op thread API.

What ``import agrad`` does is checked in fresh subprocesses, since this
process imported agrad long ago; the in-process tests restore the BLAS thread
count they found.
"""

from __future__ import annotations

import enum
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import agrad
from agrad._blas import USER_VARIABLES
from tests.helpers import requires_torch, torch

# Prints numpy's BLAS threads before and after ``import agrad``, as threadpoolctl
# reads them from the libraries, and what agrad.get_num_threads() says.
_PROBE = """
import json, numpy, threadpoolctl
def blas():
    return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
before = blas()
import agrad
print(json.dumps({"before": before, "after": blas(), "agrad": agrad.get_num_threads()}))
"""


def _probe(**env: str) -> dict[str, Any]:
    """Run _PROBE in a fresh interpreter whose environment has none of the BLAS
    variables except ``env``."""
    clean = {k: v for k, v in os.environ.items() if k not in USER_VARIABLES}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", _PROBE], env={**clean, **env}, cwd=root,
                         capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout)


@pytest.fixture
def restore_blas_threads() -> Iterator[None]:
    before = agrad.get_num_threads()
    yield
    agrad.set_num_threads(before)


def test_import_limits_blas_to_one_thread_by_default() -> None:
    seen = _probe()
    assert seen["before"], "threadpoolctl found no BLAS library loaded with numpy"
    assert seen["after"] == [1] * len(seen["before"])
    assert seen["agrad"] == 1


def test_an_empty_variable_counts_as_unset() -> None:
    assert _probe(OPENBLAS_NUM_THREADS="")["agrad"] == 1


@pytest.mark.parametrize("name", USER_VARIABLES)
def test_a_blas_variable_in_the_environment_wins(name: str) -> None:
    """agrad leaves BLAS exactly as the library sized itself: OpenBLAS reads
    OPENBLAS_NUM_THREADS and OMP_NUM_THREADS (2 threads), and ignores MKL's
    variable (its own default), but agrad touches neither."""
    seen = _probe(**{name: "2"})
    assert seen["after"] == seen["before"]
    assert seen["agrad"] == max(seen["before"])


def test_set_num_threads_round_trips(restore_blas_threads: None) -> None:
    for n in (2, 1, 3):
        agrad.set_num_threads(n)
        assert agrad.get_num_threads() == n


def test_set_num_threads_reaches_the_blas_library(restore_blas_threads: None) -> None:
    from threadpoolctl import threadpool_info

    agrad.set_num_threads(2)
    assert {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"} == {2}


def test_set_num_threads_from_another_thread_takes_effect(restore_blas_threads: None) -> None:
    """threadpoolctl lets one thread control OpenBLAS and ignores the others;
    agrad gives that control back after each change, so the import's change
    (made on the main thread) does not lock out a worker thread."""
    agrad.set_num_threads(1)
    worker = threading.Thread(target=agrad.set_num_threads, args=(2,))
    worker.start()
    worker.join()
    assert agrad.get_num_threads() == 2


class _Two(enum.IntEnum):
    TWO = 2


@pytest.mark.parametrize("good", [np.int64(2), _Two.TWO], ids=["numpy-int64", "IntEnum"])
def test_set_num_threads_takes_what_torch_takes(good: Any, restore_blas_threads: None) -> None:
    agrad.set_num_threads(good)
    assert agrad.get_num_threads() == 2
    assert type(agrad.get_num_threads()) is int


BAD = [0, -1, -(2**31), 1.5, True, "2", None, np.float64(2.0), np.True_, np.int8(0), 2**31, -(2**31) - 1, 2**63]


@requires_torch
@pytest.mark.parametrize("bad", BAD, ids=repr)
def test_set_num_threads_errors_match_torch(bad: Any, restore_blas_threads: None) -> None:
    before = agrad.get_num_threads()
    with pytest.raises(Exception) as expected:
        torch.set_num_threads(bad)
    with pytest.raises(type(expected.value), match=f"^{re.escape(str(expected.value))}$") as got:
        agrad.set_num_threads(bad)
    assert type(got.value) is type(expected.value)
    assert agrad.get_num_threads() == before
