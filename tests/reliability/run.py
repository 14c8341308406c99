"""Run the reliability suite and print its figures.

    python -m tests.reliability.run            # the light form (what the tests run)
    python -m tests.reliability.run --full     # thousands of trials, and the engine's soaks at full size
    python -m tests.reliability.run --catalogue               # how each catalogue case differs from torch
    python -m tests.reliability.run --replay cancellation:trio:20046
    python -m tests.reliability.run --replay sigint:30047     # or node:<seed>

Exits 1 if a violation was found.  The light tests (``test_*.py`` here) run
the same functions with :data:`PLAN`: :data:`LIGHT` by default, :data:`FULL`
under ``AGRAD_SOAK=full`` (Note [Soak sizes] in ``tests/helpers.py``).
``--full`` also runs the engine's own soak tests (``pytest -m soak
tests/engine``) at their full size, in a fresh pytest process.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass

import anyio

from tests.helpers import SOAK, SOAK_VARIABLE, torch
from tests.reliability import cancellation, catalogue, interrupts, leaks
from tests.reliability._invariants import Tally, load


@dataclass(frozen=True)
class Plan:
    """Trial counts and seeds of one run."""

    cancellations: int  # per loop: asyncio, uvloop, trio
    interrupts: int  # SIGINT trials, and as many node-raise trials
    leak_steps: int  # backwards per loop and for the blocking twin, per round
    seed: int = 20_000


# 72 cancellation trials per loop: its 8 mechanisms and the 9 graph kinds are taken in turn (seed modulo
# each count), so 72 consecutive seeds try every mechanism on every kind of graph once.
LIGHT = Plan(cancellations=72, interrupts=60, leak_steps=60)
FULL = Plan(cancellations=2000, interrupts=1500, leak_steps=400)
PLAN = FULL if SOAK == "full" else LIGHT  # what the light tests run (Note [Soak sizes])
# The engine's soak tests, which --full runs at their full size after its own parts.
ENGINE_SOAKS = ["-m", "soak", "tests/engine"]


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


def engine_soaks() -> Tally:
    """The engine's soak tests (marked ``soak``) under ``AGRAD_SOAK=full``, in a fresh pytest process:
    their sizes are read when their modules are imported.  A failure is a violation, with pytest's summary."""
    tally = Tally("engine soaks")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *ENGINE_SOAKS],
                          env={**os.environ, SOAK_VARIABLE: "full"}, capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    tally.trials["pytest " + " ".join(ENGINE_SOAKS)] += 1
    tally.outcomes[lines[-1] if lines else "no output"] += 1
    if done.returncode:
        tally.violations.append("[engine soaks] pytest failed:\n" + "\n".join(lines[-40:]) + done.stderr[-2000:])
    tally.seconds = time.perf_counter() - start
    return tally


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
    parser.add_argument("--full", action="store_true",
                        help="thousands of trials, and the engine's soaks at full size (10-15 minutes)")
    parser.add_argument("--seed", type=int, default=None, help="first seed (default: the plan's)")
    parser.add_argument("--catalogue", action="store_true", help="run only the catalogue")
    parser.add_argument("--replay", metavar="SPEC", help="replay one trial")
    args = parser.parse_args(argv)
    if args.replay:
        tally = replay(args.replay)
        print(tally.report() or "no violation")
        return 1 if tally.violations else 0
    plan = FULL if args.full else PLAN
    if args.seed is not None:
        plan = Plan(plan.cancellations, plan.interrupts, plan.leak_steps, args.seed)
    before, start = load(), time.perf_counter()
    tallies = [catalogue.run_catalogue()] if args.catalogue else run(plan)
    if args.full and not args.catalogue:
        tallies.append(engine_soaks())
    print(table(tallies, plan, time.perf_counter() - start, before))
    return 1 if any(t.violations for t in tallies) else 0


if __name__ == "__main__":
    sys.exit(main())
