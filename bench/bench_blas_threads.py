"""BLAS threads: what agrad's default of one BLAS thread per kernel saves and costs.

agrad limits numpy's BLAS to one thread at import (Note [BLAS threads] in
``agrad/_blas.py``); ``agrad.set_num_threads(n)`` gives the threads back.
Three measurements of numpy float32 products, each at 1 BLAS thread (agrad's
default) and at ``--threads`` (default: the usable cores, OpenBLAS's own
default):

* **small, loaded**: ``(1,784) @ (784,1024)``, one layer of issue 15's MLP at
  batch 1, called once a millisecond for 5 s per block, while ``--hogs`` busy
  processes (default: the usable cores) compete for the cores, as a server's
  other work or other tenants do.  Once a millisecond, as a server calls it
  between other work: back to back, a block of calls fits in one scheduler
  slice and hides the stalls in the tail.  Long blocks, because where the
  scheduler puts the threads changes over seconds.  Each hog is a
  ``timeout``-bounded ``while True: pass``, started for this measurement and
  stopped right after it.
* **small, as is**: the same, on the machine as it is.
* **big, as is**: ``(2048,2048) @ (2048,2048)``: what a program dominated by
  huge products loses at one thread, and gets back with ``set_num_threads``.

Blocks alternate 1, n, n, 1 threads (per-block medians printed, and each
count's 90th percentile); each block stops after its sample count or its
time bound, whichever comes first.  The load average is printed before and
after each measurement.  Nothing here asserts on timings.

Run ``python bench/bench_blas_threads.py`` (about a minute), ``--quick`` for a
smoke run (about ten seconds), ``--only big`` for one measurement.  Each
measurement prints a line as it starts.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence

import numpy as np
from threadpoolctl import threadpool_info

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import Measurement, System, format_table, progress  # noqa: E402

import agrad  # noqa: E402
from agrad._blas import USER_VARIABLES  # noqa: E402

_clock = time.perf_counter
HOG_SECONDS = 60  # the most any hog lives, whatever happens to this process
RUNS = ("small-loaded", "small", "big")


def _usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


@contextlib.contextmanager
def _hogs(n: int) -> Iterator[None]:
    """``n`` busy processes for the duration of the block (each ends after HOG_SECONDS anyway).

    Each is ``timeout`` running the hog: SIGTERM to ``timeout`` reaches the hog
    too (SIGKILL would orphan it, unbounded), and ``timeout`` still ends it if
    this process dies first.  The hogs' output goes nowhere, so they never hold
    a pipe of ours open.
    """
    procs = [subprocess.Popen(["timeout", str(HOG_SECONDS), sys.executable, "-c", "while True: pass"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for _ in range(n)]
    try:
        time.sleep(1.0)  # the hogs are running and have been scheduled
        yield
    finally:
        for p in procs:
            p.terminate()
            p.wait()


def _product(m: int, k: int, n: int) -> Callable[[], float]:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)

    def sample() -> float:
        t0 = _clock()
        a @ b
        return _clock() - t0

    return sample


def _block(sample: Callable[[], float], warmup: int, repeats: int, seconds: float, gap: float) -> list[float]:
    """Up to ``repeats`` samples ``gap`` seconds apart, for at most ``seconds`` (at least 3)."""
    for _ in range(warmup):
        sample()
    out: list[float] = []
    deadline = _clock() + seconds
    while len(out) < repeats and (len(out) < 3 or _clock() < deadline):
        out.append(sample())
        time.sleep(gap)
    return out


def measure_threads(sample: Callable[[], float], counts: Sequence[int], warmup: int, repeats: int,
                    seconds: float, gap: float) -> list[Measurement]:
    """Time ``sample`` in blocks at each BLAS thread count, in the order A B … B A."""
    results = {n: Measurement(System(f"BLAS {n} thread{'s' * (n > 1)}", sample), []) for n in counts}
    for n in [*counts, *reversed(counts)]:
        agrad.set_num_threads(n)
        time.sleep(0.2)  # the previous block's spinning BLAS threads go idle
        results[n].blocks.append(_block(sample, warmup, repeats, seconds, gap))
    return list(results.values())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few samples: a smoke run")
    parser.add_argument("--threads", type=int, default=_usable_cores(), help="the multi-threaded setting")
    parser.add_argument("--hogs", type=int, default=_usable_cores(), help="busy processes for the loaded run")
    parser.add_argument("--markdown", action="store_true", help="tables in markdown")
    parser.add_argument("--only", action="append", choices=RUNS, help="run only this measurement (repeatable)")
    args = parser.parse_args(argv)
    default = agrad.get_num_threads()
    counts = [1, args.threads]
    small, big = _product(1, 784, 1024), _product(2048, 2048, 2048)
    Run = tuple[str, Callable[[], float], Callable[[], contextlib.AbstractContextManager[None]], int, float, float]
    runs: dict[str, Run] = {
        # title, sample, condition, samples per block, seconds per block, gap between samples
        "small-loaded": (f"(1,784) @ (784,1024) float32 every 1 ms, {args.hogs} busy processes running", small,
                         lambda: _hogs(args.hogs), 30 if args.quick else 3000, 1.0 if args.quick else 5.0, 0.001),
        "small": ("(1,784) @ (784,1024) float32 every 1 ms, machine as is", small,
                  contextlib.nullcontext, 30 if args.quick else 3000, 1.0 if args.quick else 5.0, 0.001),
        "big": ("(2048,2048) @ (2048,2048) float32, machine as is", big,
                contextlib.nullcontext, 2 if args.quick else 5, 2.0 if args.quick else 10.0, 0.0),
    }
    blas = "; ".join(f"{i['internal_api']} {i.get('version')} ({i.get('threading_layer')})"
                     for i in threadpool_info() if i["user_api"] == "blas")
    env = ", ".join(f"{k}={os.environ[k]}" for k in USER_VARIABLES if k in os.environ)
    print(f"machine    {platform.processor() or platform.machine()}, usable cores {_usable_cores()}, "
          f"python {platform.python_version()}, numpy {np.__version__}, {blas or 'no BLAS found'}")
    print(f"agrad      get_num_threads() = {default} at start (BLAS variables set: {env or 'none'})")
    chosen = args.only or RUNS
    try:
        for i, (title, sample, condition, repeats, seconds, gap) in enumerate((runs[name] for name in chosen), 1):
            print()
            progress(i, len(chosen), title)
            before = _load()
            with condition():
                results = measure_threads(sample, counts, warmup=3 if repeats > 10 else 1, repeats=repeats,
                                          seconds=seconds, gap=gap)
            print(format_table(f"{title}; load average (1/5/15 min) {before} before, {_load()} after", "ms", 1e3,
                               results, {"/ 1 thread": results[0].system.label}, markdown=args.markdown))
            print("  p90: " + ", ".join(f"{m.system.label} {np.percentile(sum(m.blocks, []), 90) * 1e3:.3f} ms"
                                        for m in results))
    finally:
        agrad.set_num_threads(default)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
