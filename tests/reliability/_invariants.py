"""What must hold after every reliability trial, and the tally of what was seen.

* ``.grad`` is transactional: a call that raised changed no leaf's ``.grad``
  (same object, same value, ``None`` stays ``None``); the calls that returned
  added exactly their reference gradients (:func:`grad_problems`).
* The engine is quiet afterwards: no provisional ``.grad`` left
  (``_PROVISIONAL``), no agrad task, kernel or spill thread still running
  after a short settle (:func:`settle_async`, :func:`settle_sync`).
* The engine still works: a small backward gives the right gradient.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio
import numpy as np
import sniffio

import agrad
from agrad._engine import _pool, _staged_grads
from tests.reliability._graphs import Contribution

# How long a trial waits for the engine to be quiet: a quiet engine settles at once, and a loaded machine
# within seconds; reached only when something is left running (a violation, reported as such).
SETTLE_S = 20.0

Snapshot = list[tuple[agrad.Tensor | None, np.ndarray | None]]


@dataclass
class Tally:
    """Figures of one part of the suite."""

    part: str
    trials: Counter[str] = field(default_factory=Counter)  # per mechanism
    outcomes: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    violated: Counter[str] = field(default_factory=Counter)  # violations per mechanism
    mismatches: dict[str, str] = field(default_factory=dict)  # catalogue cases that differ from torch
    seconds: float = 0.0

    def violation(self, seed: int, what: str, problems: list[str], mechanism: str = "") -> None:
        self.violations.append(f"[{self.part}] seed={seed} {what}: " + "; ".join(problems))
        self.violated[mechanism or self.part] += 1

    def merge(self, other: Tally) -> None:
        self.trials.update(other.trials)
        self.outcomes.update(other.outcomes)
        self.violations += other.violations
        self.violated.update(other.violated)
        self.mismatches.update(other.mismatches)
        self.seconds += other.seconds

    def report(self) -> str:
        return "\n".join(self.violations[:20]) + (f"\n... {len(self.violations) - 20} more"
                                                  if len(self.violations) > 20 else "")


def snapshot(leaves: list[agrad.Tensor]) -> Snapshot:
    return [(leaf.grad, None if leaf.grad is None else leaf.grad.numpy().copy()) for leaf in leaves]


def grad_problems(leaves: list[agrad.Tensor], before: Snapshot, added: list[Contribution],
                  maybe: Sequence[Contribution] = ()) -> list[str]:
    """How ``.grad`` differs from ``before`` plus the contributions of the calls that
    returned, and of each of ``maybe`` or not: calls that raised but may have
    committed first (a cancelled ``agrad.cooperative`` call whose ``fn`` ran its
    backward before the cancellation reached it).  A call adds all of its
    contribution or none of it."""
    first: list[str] | None = None
    for r in range(len(maybe) + 1):
        for subset in itertools.combinations(maybe, r):
            problems = _grad_problems(leaves, before, [*added, *subset])
            if not problems:
                return []
            first = problems if first is None else first
    assert first is not None
    return first


def _grad_problems(leaves: list[agrad.Tensor], before: Snapshot, added: list[Contribution]) -> list[str]:
    problems = []
    for i, (leaf, (old, old_value)) in enumerate(zip(leaves, before)):
        parts = [c[i] for c in added if c[i] is not None]
        now = leaf.grad
        if not parts:
            if now is not old:
                problems.append(f"leaf {i}: .grad replaced ({_brief(old)} -> {_brief(now)})")
            elif old is not None and not np.array_equal(now.numpy(), old_value):
                problems.append(f"leaf {i}: .grad changed in place")
            continue
        expected = sum(parts, start=np.zeros_like(parts[0]) if old_value is None else old_value)
        if now is None:
            problems.append(f"leaf {i}: .grad is None, expected a gradient")
        elif not np.allclose(now.numpy(), expected, rtol=1e-9, atol=1e-12):
            problems.append(f"leaf {i}: .grad is not before + the gradient of the calls that returned")
    if len(problems) > 3:
        return problems[:3] + [f"... {len(problems) - 3} more leaves"]
    return problems


def result_problems(results: list[object], reference: list[Contribution]) -> list[str]:
    """grad() calls that returned gave their reference result."""
    problems = []
    for k, (got, want) in enumerate(zip(results, reference)):
        if got is None:  # not a grad() call, or it did not return
            continue
        for j, (g, r) in enumerate(zip(got, want)):  # type: ignore[call-overload]
            if (g is None) != (r is None) or (g is not None and not np.allclose(g.numpy(), r, rtol=1e-9, atol=1e-12)):
                problems.append(f"call {k}: grad() result {j} differs from the reference")
    return problems


def provisional_problems() -> list[str]:
    """Ids left in the engine's ``_PROVISIONAL`` set (a violation); cleared once reported, so that one
    trial's leftovers are not counted again by every later trial."""
    left = _staged_grads._PROVISIONAL
    if not left:
        return []
    problem = f"_PROVISIONAL holds {len(left)} ids"
    left.clear()
    return [problem]


def _brief(t: agrad.Tensor | None) -> str:
    return "None" if t is None else f"tensor#{id(t) & 0xffff:x}"


def _spill_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("agrad")]


def _busy_async() -> list[str]:
    busy = []
    pool = _pool._POOL.get(None)
    if pool is not None and (pool.running or pool._workers or pool._waiting):
        busy.append(f"kernel pool busy (running={pool.running}, workers={pool._workers})")
    if sniffio.current_async_library() == "trio":
        import trio
        tasks = [t for n in trio.lowlevel.current_root_task().child_nurseries for t in n.child_tasks]
        names = [t.name for t in tasks if "agrad" in t.name]
    else:
        names = [t.get_name() for t in asyncio.all_tasks() if t.get_name().startswith("agrad")]
    busy += [f"task {n} still running" for n in names]
    return busy + [f"thread {n} still running" for n in _spill_threads()]


async def settle_async() -> list[str]:
    """Wait up to SETTLE_S for the engine to be quiet; what is still running then."""
    deadline = time.monotonic() + SETTLE_S
    while time.monotonic() < deadline:
        if not _busy_async():
            return []
        await anyio.sleep(0.002)  # polling: the engine signals nothing when it is quiet
    return _busy_async()


def settle_sync() -> list[str]:
    deadline = time.monotonic() + SETTLE_S
    while (busy := [f"thread {n} still running" for n in _spill_threads()]) and time.monotonic() < deadline:
        time.sleep(0.002)
    return busy


def _small() -> tuple[agrad.Tensor, agrad.Tensor]:
    x = agrad.tensor([1.0, 2.0], dtype=agrad.float64, requires_grad=True)
    return x, (x * 3.0).sum()


def _ambient_problems() -> list[str]:
    """Grad mode left disabled by the trial (a violation); re-enabled once reported, as for _PROVISIONAL."""
    if agrad.is_grad_enabled():
        return []
    agrad.set_grad_enabled(True)
    return ["grad mode left disabled in the caller's context"]


def _works(x: agrad.Tensor) -> list[str]:
    if x.grad is None or x.grad.tolist() != [3.0, 3.0]:
        return [f"the next backward gave {None if x.grad is None else x.grad.tolist()}, expected [3.0, 3.0]"]
    return []


async def engine_works_async() -> list[str]:
    problems = _ambient_problems()
    x, y = _small()
    try:
        with anyio.fail_after(30):
            await y.backward()
    except Exception as exc:  # noqa: BLE001  (reported)
        return problems + [f"the next backward raised {type(exc).__name__}: {exc}"]
    return problems + _works(x)


def engine_works_sync() -> list[str]:
    problems = _ambient_problems()
    x, y = _small()
    try:
        y.backward_sync()
    except Exception as exc:  # noqa: BLE001  (reported)
        return problems + [f"the next backward raised {type(exc).__name__}: {exc}"]
    return problems + _works(x)


def load() -> str:
    return "/".join(f"{v:.2f}" for v in os.getloadavg())
