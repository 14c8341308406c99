"""Programs written for PyTorch run on agrad after a mechanical rename.

Each script in ``examples/tutorials/`` is a PyTorch tutorial program (or the
examples of a PyTorch note) with ``torch`` renamed ``agrad`` and the
backward entry points spelt as their blocking twins.  Here the rename is
undone to get the PyTorch program back, both run, and what they print must
agree: the same lines, numbers equal to a relative 1e-3 (float32 training
loops over 2,000 steps), the library's name aside.  Random draws are made
equal by replaying agrad's draws in the torch run.
"""

from __future__ import annotations

import contextlib
import io
import math
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import agrad
from tests.helpers import requires_torch, torch

TUTORIALS = sorted((Path(__file__).resolve().parents[2] / "examples" / "tutorials").glob("*.py"))

# The mechanical rename, agrad -> torch (the reverse of what a porter does).
RENAMES = [(r"\bagrad\b", "torch"), (r"\.backward_sync\(", ".backward("), (r"\bgrad_sync\(", "grad(")]

RANDOM = ("randn", "rand")


def to_torch(source: str) -> str:
    for pattern, repl in RENAMES:
        source = re.sub(pattern, repl, source)
    return source


@contextlib.contextmanager
def recorded_draws(module: Any, draws: list[np.ndarray], replay: bool) -> Iterator[None]:
    """Record ``module``'s random draws into ``draws``, or replay them in order."""
    originals = {name: getattr(module, name) for name in RANDOM}
    it = iter(draws)

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        def draw(*args: Any, **kwargs: Any) -> Any:
            t = fn(*args, **kwargs)
            if replay:
                with module.no_grad():
                    t.copy_(module.from_numpy(next(it)))
            else:
                draws.append(t.detach().numpy().copy())
            return t
        return draw

    for name, fn in originals.items():
        setattr(module, name, wrap(fn))
    try:
        yield
    finally:
        for name, fn in originals.items():
            setattr(module, name, fn)


def run(source: str, path: Path) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, str(path), "exec"), {"__name__": "__main__"})
    return out.getvalue()


_NUMBER = re.compile(r"-?\d+(?:\.\d*)?(?:e[-+]?\d+)?")


def assert_same_line(mine: str, other: str) -> None:
    """The same text, and numbers equal to a relative 1e-3."""
    assert _NUMBER.sub("#", mine) == _NUMBER.sub("#", other), f"\nagrad: {mine}\ntorch: {other}"
    for a, b in zip(_NUMBER.findall(mine), _NUMBER.findall(other)):
        assert math.isclose(float(a), float(b), rel_tol=1e-3, abs_tol=1e-6), f"\nagrad: {mine}\ntorch: {other}"


@requires_torch
@pytest.mark.parametrize("path", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_tutorial_prints_what_pytorch_prints(path: Path) -> None:
    source = path.read_text()
    draws: list[np.ndarray] = []
    agrad.manual_seed(0)
    with recorded_draws(agrad, draws, replay=False):
        ours = run(source, path).replace("agrad", "torch").splitlines()
    with recorded_draws(torch, draws, replay=True):
        theirs = run(to_torch(source), path).splitlines()
    assert len(ours) == len(theirs), (ours, theirs)
    for mine, other in zip(ours, theirs):
        assert_same_line(mine, other)
