"""Optimizer benchmark: one Adam step over 10M float32 parameters, agrad next to numpy and PyTorch.

The workload: 10 parameters of 1M float32 elements each (``--tensors``,
``--size``), gradients set once, and one ``Adam(lr=1e-3)`` step timed per
sample (moments, bias corrections and the parameter update; the state
exists from the warm-up on).  Five systems:

* agrad: ``agrad.optim.Adam.step()``, which follows PyTorch's single-tensor
  Adam op for op on the arrays, in cache-sized blocks (Note [Blocked updates]
  in ``agrad/optim/_elementwise.py``);
* numpy (limit): the best hand-written numpy Adam: in-place ufuncs with
  ``out=``, a multiplication where PyTorch divides, 12 passes per block
  instead of agrad's 13, blocked the same way;
* numpy (whole arrays): the same ufuncs over whole parameters, unblocked;
* PyTorch's foreach and single-tensor (``foreach=False``) Adam, with as many
  intra-op threads as agrad gives BLAS (``torch.set_num_threads``).

Every system first takes one step from the same parameters and state, and
the run aborts unless all agree.  Fair measurement (``_harness``): each
system in its own block, in the order A B C D E E D C B A (twice by
default), a pause between blocks, after a warm-up; figures are medians.
glibc's malloc thresholds are pinned as in ``bench_conv.py``.  The target is
agrad within 1.2x of the numpy limit.  Nothing here asserts on timings.

Run ``python bench/bench_optim.py`` (under a minute on two cores) or
``--quick`` (one round of fewer samples: under 30 s).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import (  # noqa: E402
    System,
    check_same_gradients,
    clock,
    format_table,
    machine_info,
    measure,
    progress,
    require,
)

require(__file__, "torch")  # the peer is optional for agrad, required here
import torch  # noqa: E402  (required above)
from bench_conv import pin_malloc  # noqa: E402

import agrad  # noqa: E402
from agrad.optim import _elementwise  # noqa: E402

AGRAD, NUMPY, NUMPY_WHOLE, TORCH_FOREACH, TORCH_LOOP = (
    "agrad Adam", "numpy (limit)", "numpy (whole arrays)", "pytorch foreach", "pytorch for-loop")
TARGET = 1.2  # agrad's step at most this times the numpy limit's
LR, BETAS, EPS = 1e-3, (0.9, 0.999), 1e-8


# -- the numpy limit: Adam by hand ----------------------------------------------------------------


class NumpyAdam:
    """Adam over numpy arrays (C-contiguous, any shape) with in-place ufuncs; ``block`` elements at
    a time (0: whole arrays).  ``step()`` reads ``grads``, or the gradients it is given
    (bench_training's numpy limit computes new ones each step)."""

    def __init__(self, params: list[np.ndarray], grads: list[np.ndarray], block: int) -> None:
        self.params, self.grads, self.block = params, grads, block
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]
        self.t = 0
        width = block or max(p.size for p in params)
        self.tmp = [np.empty(width, np.float32) for _ in range(2)]

    def step(self, grads: list[np.ndarray] | None = None) -> None:
        self.t += 1
        beta1, beta2 = BETAS
        step_size = LR / (1 - beta1**self.t)
        inv_bc2_sqrt = 1 / (1 - beta2**self.t) ** 0.5
        for arrays in zip(self.params, self.grads if grads is None else grads, self.m, self.v):
            p, g, m, v = (a.reshape(-1) for a in arrays)  # views: the update is elementwise
            n = p.size
            block = self.block or n
            for start in range(0, n, block):
                stop = min(start + block, n)
                t1, t2 = (t[:stop - start] for t in self.tmp)
                pb, gb, mb, vb = p[start:stop], g[start:stop], m[start:stop], v[start:stop]
                mb *= beta1
                np.multiply(gb, 1 - beta1, out=t1)
                mb += t1
                vb *= beta2
                np.multiply(gb, gb, out=t1)
                t1 *= 1 - beta2
                vb += t1
                np.sqrt(vb, out=t2)
                t2 *= inv_bc2_sqrt
                t2 += EPS
                np.divide(mb, t2, out=t2)
                t2 *= -step_size
                pb += t2


# -- the systems ---------------------------------------------------------------------------------


def arrays(tensors: int, size: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(0)
    return ([rng.standard_normal(size, dtype=np.float32) for _ in range(tensors)],
            [rng.standard_normal(size, dtype=np.float32) for _ in range(tensors)])


def timed(step: Callable[[], Any]) -> Callable[[], float]:
    def sample() -> float:
        t0 = clock()
        step()
        return clock() - t0
    return sample


def build(tensors: int, size: int) -> tuple[list[System], dict[str, list[np.ndarray]]]:
    """The systems, and each one's parameters after one step from the same start."""
    params, grads = arrays(tensors, size)
    systems, after = [], {}

    ours = [agrad.from_numpy(p.copy()).requires_grad_() for p in params]
    for p, g in zip(ours, grads):
        p.grad = agrad.from_numpy(g)
    adam = agrad.optim.Adam(ours, lr=LR, betas=BETAS, eps=EPS)
    adam.step()
    after[AGRAD] = [p.detach().numpy().copy() for p in ours]
    systems.append(System(AGRAD, timed(adam.step)))

    for label, block in ((NUMPY, _elementwise.BLOCK), (NUMPY_WHOLE, 0)):
        by_hand = NumpyAdam([p.copy() for p in params], grads, block)
        by_hand.step()
        after[label] = [p.copy() for p in by_hand.params]
        systems.append(System(label, timed(by_hand.step)))

    for label, foreach in ((TORCH_FOREACH, True), (TORCH_LOOP, False)):
        theirs = [torch.from_numpy(p.copy()).requires_grad_() for p in params]
        for t, g in zip(theirs, grads):
            t.grad = torch.from_numpy(g)
        topt = torch.optim.Adam(theirs, lr=LR, betas=BETAS, eps=EPS, foreach=foreach)
        topt.step()
        after[label] = [t.detach().numpy().copy() for t in theirs]
        systems.append(System(label, timed(topt.step)))
    return systems, after


def main(argv: Sequence[str] | None = None) -> int:
    """Check that every system takes the same step, time them, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="one round of fewer samples: under 30 s")
    parser.add_argument("--tensors", type=int, default=10, help="number of parameters (default 10)")
    parser.add_argument("--size", type=int, default=1_000_000, help="elements per parameter (default 1M)")
    parser.add_argument("--repeats", type=int, help="samples per block (default 10, or 3 with --quick)")
    parser.add_argument("--rounds", type=int, help="rounds of blocks (default 2, or 1 with --quick)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed samples per block (default 1)")
    parser.add_argument("--pause", type=float, help="seconds between blocks (default 0.5, or 0.05 with --quick)")
    parser.add_argument("--default-malloc", action="store_true", help="leave glibc's malloc thresholds alone")
    args = parser.parse_args(argv)
    pinned = not args.default_malloc and pin_malloc()
    repeats = args.repeats or (3 if args.quick else 10)
    rounds = args.rounds or (1 if args.quick else 2)
    pause = args.pause if args.pause is not None else (0.05 if args.quick else 0.5)
    torch.set_num_threads(agrad.get_num_threads())
    print(machine_info() + f"\nthreads    agrad BLAS {agrad.get_num_threads()}, torch {torch.get_num_threads()}"
          f"\nmalloc     {'glibc thresholds pinned (mmap 1 GiB, no trim)' if pinned else 'glibc defaults'}")
    print(f"settings   {repeats} samples per block after {args.warmup} warm-up, {pause} s pause between blocks, "
          f"{rounds} round(s)\n")
    started = clock()
    title = (f"Adam step over {args.tensors} x {args.size:,} float32 parameters "
             f"({args.tensors * args.size / 1e6:g}M elements)")
    progress(1, 1, title)
    systems, after = build(args.tensors, args.size)
    check_same_gradients("adam step", after, rtol=1e-5, atol=1e-6)
    results = measure(systems, args.warmup, repeats, pause, rounds)
    medians = {m.system.label: m.median for m in results}
    ratio = medians[AGRAD] / medians[NUMPY]
    print(format_table(title, "ms/step", 1e3, results, {"/ numpy": NUMPY, "/ torch foreach": TORCH_FOREACH},
                       notes={AGRAD: f"<= {TARGET:g}x numpy: {'met' if ratio <= TARGET else 'MISSED'}"}))
    print(f"\n  agrad / numpy (limit) {ratio:.2f}x, / numpy (whole arrays) {medians[AGRAD] / medians[NUMPY_WHOLE]:.2f}x"
          f", / torch foreach {medians[AGRAD] / medians[TORCH_FOREACH]:.2f}x, / torch for-loop "
          f"{medians[AGRAD] / medians[TORCH_LOOP]:.2f}x")
    print(f"load average {os.getloadavg()[0]:.2f} at the end; total time {clock() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
