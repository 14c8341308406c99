"""Run the reliability suite and print its figures.

    python -m tests.reliability.run            # the light form (what the tests run)
    python -m tests.reliability.run --full     # thousands of trials, 5-10 minutes on 2 cores
    python -m tests.reliability.run --catalogue               # how each catalogue case differs from torch
    python -m tests.reliability.run --replay cancellation:trio:20046
    python -m tests.reliability.run --replay sigint:30047     # or node:<seed>

Exits 1 if a violation was found.  The light tests (``test_*.py`` here) run
the same functions with the :data:`LIGHT` plan.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from dataclasses import dataclass

import anyio

from tests.helpers import torch
from tests.reliability import cancellation, catalogue, interrupts, leaks
from tests.reliability._invariants import Tally, load


@dataclass(frozen=True)
class Plan:
    """Trial counts and seeds of one run."""

    cancellations: int  # per loop: asyncio, uvloop, trio
    interrupts: int  # SIGINT trials, and as many node-raise trials
    leak_steps: int  # backwards per loop and for the blocking twin, per round
    seed: int = 20_000


LIGHT = Plan(cancellations=80, interrupts=60, leak_steps=60)
FULL = Plan(cancellations=2000, interrupts=1500, leak_steps=400)


def run(plan: Plan) -> list[Tally]:
    tallies = [catalogue.run_catalogue()]
    cancelled = Tally("cancellation")
    for backend in leaks.BACKENDS:
        cancelled.merge(anyio.run(cancellation.soak, plan.cancellations, plan.seed, backend,
                                  **cancellation.backend_args(backend)))
    tallies.append(cancelled)
    tallies.append(interrupts.soak(plan.interrupts, plan.seed + 10_000))
    tallies.append(leaks.soak(plan.leak_steps, plan.seed + 20_000))
    return tallies


def table(tallies: list[Tally], plan: Plan, wall: float, load_before: str) -> str:
    rows = [f"agrad reliability suite: {plan}",
            f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
            f"torch {'absent' if torch is None else torch.__version__}; load (1/5/15 min) before {load_before}, "
            f"after {load()}; wall {wall:.1f} s",
            "", "| part | what | count |", "| --- | --- | ---: |"]
    for t in tallies:
        for what, n in sorted(t.trials.items()):
            bad = f" ({t.violated[what]} violated)" if t.violated[what] else ""
            rows.append(f"| {t.part} | trials: {what} | {n}{bad} |")
        for what, n in sorted(t.outcomes.items()):
            rows.append(f"| {t.part} | {what} | {n} |")
        rows.append(f"| {t.part} | **violations** | **{len(t.violations)}** |")
        rows.append(f"| {t.part} | time (s) | {t.seconds:.1f} |")
    for t in tallies:
        if t.mismatches:
            rows += ["", f"{t.part}: {len(t.mismatches)} cases differ from torch (all in KNOWN_MISMATCHES "
                     "unless listed as violations):"]
            rows += [f"  {name}: {why}" for name, why in sorted(t.mismatches.items())]
    for t in tallies:
        if t.violations:
            rows += ["", f"{t.part}: violations (replay with --replay):", t.report()]
    return "\n".join(rows)


def replay(spec: str) -> Tally:
    kind, _, rest = spec.partition(":")
    tally = Tally(kind)
    if kind == "cancellation":
        backend, _, seed = rest.partition(":")
        tally = anyio.run(cancellation.soak, 1, int(seed), backend, **cancellation.backend_args(backend))
    elif kind == "sigint":
        interrupts.sigint_trial(int(rest), tally)
    elif kind == "node":
        interrupts.node_raise_trial(int(rest), tally)
    else:
        raise SystemExit(f"unknown replay {spec!r}: cancellation:<backend>:<seed>, sigint:<seed> or node:<seed>")
    return tally


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="thousands of trials (5-10 minutes)")
    parser.add_argument("--seed", type=int, default=None, help="first seed (default: the plan's)")
    parser.add_argument("--catalogue", action="store_true", help="run only the catalogue")
    parser.add_argument("--replay", metavar="SPEC", help="replay one trial")
    args = parser.parse_args(argv)
    if args.replay:
        tally = replay(args.replay)
        print(tally.report() or "no violation")
        return 1 if tally.violations else 0
    plan = FULL if args.full else LIGHT
    if args.seed is not None:
        plan = Plan(plan.cancellations, plan.interrupts, plan.leak_steps, args.seed)
    before, start = load(), time.perf_counter()
    tallies = [catalogue.run_catalogue()] if args.catalogue else run(plan)
    print(table(tallies, plan, time.perf_counter() - start, before))
    return 1 if any(t.violations for t in tallies) else 0


if __name__ == "__main__":
    sys.exit(main())
