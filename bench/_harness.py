"""The timing harness shared by the benchmarks in ``bench/``.

Fair measurement: numpy (OpenBLAS) and PyTorch (OpenMP) keep their worker
threads spinning for a while after a call, and interleaving two systems op by
op slows both (about 2x on two cores).  So systems are never interleaved
sample by sample: ``measure`` runs each system in its own block, in the order
A B C … C B A with a short pause between blocks, each block after a warm-up;
a system's figure is the median over both of its blocks, and the per-block
medians are kept so that drift shows.

Also here: the gradient agreement check every benchmark runs before timing,
the machine header its figures are quoted with, resident-memory readings, a
subprocess runner for measurements that need a clean process, the table
printer, the check for the peers a benchmark compares with (``require``) and
the line each phase of a run prints as it starts (``progress``).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import gc
import importlib.util
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import numpy as np

import agrad

clock = time.perf_counter

# -- peers and progress ------------------------------------------------------------------------

# What installs each peer a benchmark may compare with or draw through: none of them is a
# dependency of agrad itself (pyproject.toml's ``bench`` and ``serving`` extras; PyTorch apart).
INSTALL = {
    "torch": "pip install torch==2.13.0",
    **dict.fromkeys(("autograd", "matplotlib"), 'pip install -e ".[bench]"'),
    **dict.fromkeys(("greenlet", "starlette", "uvicorn", "httptools", "safetensors"), 'pip install -e ".[serving]"'),
}


def require(script: str, *modules: str) -> None:
    """Exit with status 2 and one line saying what to install if any of ``modules`` is missing.

    Called before any work, so that a fresh ``pip install -e .`` gets the
    command to run instead of a traceback minutes into a run.  ``modules`` are
    keys of ``INSTALL``; ``script`` names the benchmark in the message.
    """
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        commands = " && ".join(dict.fromkeys(INSTALL[m] for m in missing))
        print(f"{os.path.basename(script)} needs {', '.join(missing)}, not installed here: {commands}",
              file=sys.stderr)
        sys.exit(2)


def progress(i: int, n: int, what: str) -> None:
    """Print ``[i/n] what`` as phase ``i`` of ``n`` starts, flushed at once.

    A benchmark prints each table only when its phase is done, seconds to
    minutes later; this line shows that the run moves and how far it has come
    (flushed: a pipe or a CI log would otherwise hold it, and what came before
    it, until the buffer fills).
    """
    print(f"[{i}/{n}] {what}", flush=True)


@contextlib.contextmanager
def blocking_on_purpose() -> Iterator[None]:
    """Silence ``agrad.BlockingCallWarning`` inside the block.

    Where a benchmark calls the blocking twin on a running event loop, that
    blocked loop is what it measures (the responsiveness tables' "blocking"
    rows), not a mistake to warn about.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", agrad.BlockingCallWarning)
        yield


# -- timing ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class System:
    """One implementation of a workload.

    ``sample`` prepares one repetition, times the part being measured and
    returns its duration in seconds.  For an async system it is a coroutine
    function; the harness runs it on an event loop kept for the block, so the
    clock runs inside the coroutine.
    """

    label: str
    sample: Callable[[], float] | Callable[[], Awaitable[float]]
    is_async: bool = False


@dataclass
class Measurement:
    """The samples (seconds) of one system, one list per block."""

    system: System
    blocks: list[list[float]]

    @property
    def median(self) -> float:
        return statistics.median([s for block in self.blocks for s in block])

    def block_medians(self) -> list[float]:
        return [statistics.median(block) for block in self.blocks]


@dataclass
class Outcome:
    """One workload's measurements; ``workload`` is the benchmark's own description of it."""

    workload: Any
    results: list[Measurement]

    def median(self, label: str) -> float:
        return next(m.median for m in self.results if m.system.label == label)

    def ratio(self, label: str, reference: str) -> float:
        """``label``'s median over ``reference``'s."""
        return self.median(label) / self.median(reference)


def _time_block(system: System, warmup: int, repeats: int) -> list[float]:
    """Warm up, then take ``repeats`` samples of ``system`` back to back.

    Garbage from the previous sample is collected before each one, outside
    the timed region; collections the sample itself triggers are part of its
    cost, as they would be in a real program.
    """
    with ExitStack() as stack:
        if system.is_async:
            runner = stack.enter_context(asyncio.Runner())
            one: Callable[[], float] = lambda: runner.run(system.sample())  # type: ignore[arg-type]
        else:
            one = system.sample  # type: ignore[assignment]
        samples = []
        for i in range(warmup + repeats):
            gc.collect()
            elapsed = one()
            if i >= warmup:
                samples.append(elapsed)
        return samples


def measure(systems: Sequence[System], warmup: int, repeats: int | Mapping[str, int],
            pause: float, rounds: int = 1) -> list[Measurement]:
    """Time every system in two blocks per round, in the order A B C … C B A
    (repeated ``rounds`` times), pausing between blocks.

    ``repeats`` is samples per block, for all systems or per label (a slow
    peer may be given fewer).  More rounds of shorter blocks spread every
    system over the same stretches of a noisy machine's time.
    """
    results = {s.label: Measurement(s, []) for s in systems}
    order = (list(systems) + list(reversed(systems))) * rounds
    for i, system in enumerate(order):
        if i:
            time.sleep(pause)  # let the previous system's spinning threads go idle
        n = repeats if isinstance(repeats, int) else repeats[system.label]
        results[system.label].blocks.append(_time_block(system, warmup, n))
    return [results[s.label] for s in systems]


# -- gradient agreement ------------------------------------------------------------------


def check_same_gradients(workload: str, grads: Mapping[str, Sequence[np.ndarray]], rtol: float, atol: float) -> None:
    """Abort the run if any system's gradients differ from the first system's."""
    (ref_label, ref), *others = grads.items()
    for label, got in others:
        for k, (a, b) in enumerate(zip(ref, got, strict=True)):
            if a.shape != b.shape or not np.allclose(a, b, rtol=rtol, atol=atol):
                diff = float(np.max(np.abs(a - b))) if a.shape == b.shape else float("nan")
                sys.exit(
                    f"\n*** GRADIENT MISMATCH in workload {workload!r}: gradient {k} of {label!r} differs from "
                    f"{ref_label!r} (shapes {a.shape} vs {b.shape}, max |diff| {diff:.3g}). "
                    "Timings would be meaningless; aborting. ***"
                )
    n = len(ref)
    print(f"  gradients agree: {workload} ({n} tensor{'s' if n > 1 else ''}, {len(grads)} systems)")


# -- memory and subprocesses -----------------------------------------------------------------


def rss_mib() -> float:
    """This process's resident set size now, in MiB (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mib() -> float:
    """This process's high-water mark of resident memory, in MiB (Linux: ``ru_maxrss`` is in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def spawn_json(script: str, args: Sequence[str]) -> dict[str, Any]:
    """Run ``script`` with ``args`` in a fresh interpreter; the last line of its stdout, as JSON.

    Raises ``subprocess.CalledProcessError`` (with the child's stderr) if it exits non-zero.
    """
    out = subprocess.run([sys.executable, os.path.abspath(script), *args], capture_output=True, text=True)
    if out.returncode:
        raise subprocess.CalledProcessError(out.returncode, out.args, out.stdout, out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- the machine header ------------------------------------------------------------------------


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def machine_info() -> str:
    """Where the figures were taken, one fact per line; the last line names the event loop.

    PyTorch's threads are reported where the benchmark has imported it; one
    that runs no PyTorch in this process is not made to import it (seconds,
    and a heap that makes every ``gc.collect`` between samples slower) for
    the header: its installed version is reported instead.
    """
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    threads = {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
               if k in os.environ}
    torch = sys.modules.get("torch")
    if torch is not None:
        torch_version = f"torch {torch.__version__} (torch threads {torch.get_num_threads()})"
    else:
        installed = _version("torch")
        torch_version = "torch not installed" if installed == "not installed" else \
            f"torch {installed} (not imported in this process)"
    return "\n".join([
        f"date       {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"machine    {_cpu_model()}; os.cpu_count()={os.cpu_count()}, usable cores={affinity}, "
        f"load average {os.getloadavg()[0]:.2f} at start",
        f"python     {platform.python_version()} ({platform.python_implementation()}), {platform.platform()}",
        f"versions   agrad {agrad.__version__}, numpy {np.__version__}, {torch_version}, "
        f"autograd (HIPS) {_version('autograd')}{', env ' + str(threads) if threads else ''}",
        "event loop asyncio (default policy)",
    ])


# -- tables -----------------------------------------------------------------------------------


def format_table(title: str, unit: str, scale: float, results: Sequence[Measurement], refs: Mapping[str, str],
                 notes: Mapping[str, str] | None = None, markdown: bool = False) -> str:
    """Median and per-block medians of every system, and its ratio to each reference.

    Args:
        title: the table's first line (plain text) or caption (markdown).
        unit, scale: seconds times ``scale`` are ``unit``.
        refs: column heading -> label of the reference system, e.g. ``{"/ torch": "pytorch"}``.
        notes: label -> text for a last column (targets met or missed); none if empty.
        markdown: a markdown table instead of aligned text.
    """
    by_label = {m.system.label: m for m in results}
    n = sum(len(b) for b in results[0].blocks)
    head = ["system", "median", *(f"block {i + 1}" for i in range(len(results[0].blocks))), *refs]
    if notes:
        head.append("target")
    rows = []
    for m in results:
        row = [m.system.label, f"{m.median * scale:.3f}", *(f"{b * scale:.3f}" for b in m.block_medians())]
        row += [f"{m.median / by_label[ref].median:.2f}x" for ref in refs.values()]
        if notes:
            row.append(notes.get(m.system.label, ""))
        rows.append(row)
    caption = f"{title}  [{unit}, median of {n} samples in {len(results[0].blocks)} blocks]"
    if markdown:
        return "\n".join([f"**{title}** ({unit}, median of {n} samples in {len(results[0].blocks)} blocks)", "",
                          "| " + " | ".join(head) + " |", "|" + " --- |" * len(head),
                          *("| " + " | ".join(r) + " |" for r in rows)])
    widths = [max(10, max(len(r[i]) for r in [head, *rows]) + 2) for i in range(len(head))]
    numeric = range(1, len(head) - bool(notes))

    def line(cells: Sequence[str]) -> str:
        return "  " + "".join(c.rjust(w) if i in numeric else ("  " * bool(i) + c).ljust(w)
                              for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([caption, line(head), *map(line, rows)])


def write_docs_region(page: str, region: str, body: str) -> None:
    """Rewrite the ``<!-- region:begin -->``...``<!-- region:end -->`` block of the docs
    page ``page`` with ``body`` (appended to the page if it has no such block)."""
    begin, end = f"<!-- {region}:begin -->", f"<!-- {region}:end -->"
    block = f"{begin}\n{body.strip()}\n{end}"
    with open(page) as f:
        text = f.read()
    if begin in text and end in text:
        text = re.sub(re.escape(begin) + r".*?" + re.escape(end), lambda _: block, text, flags=re.S)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    with open(page, "w") as f:
        f.write(text)
    print(f"docs: {os.path.relpath(page, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))} "
          f"({region} region) written")
