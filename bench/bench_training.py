"""Training-step benchmark: agrad's ``nn`` and ``optim`` next to PyTorch and a hand-written numpy limit.

One training step (forward, backward, Adam update) of two models, float32,
timed whole by four systems: agrad awaited (a coroutine awaiting
``loss.backward()`` on an ``asyncio.Runner`` kept for the block; the clock
runs inside the coroutine), agrad's blocking twin (``loss.backward_sync()``),
PyTorch (CPU, with as many intra-op threads as agrad gives BLAS:
``torch.set_num_threads(agrad.get_num_threads())``, one by default) and a
hand-written numpy step, the limit (kernels with no engine, no modules and
no optimizer object: every buffer of the Adam update preallocated).  agrad
and PyTorch run the same program: ``nn.Sequential`` layers,
``nn.CrossEntropyLoss``, ``optim.Adam`` (PyTorch's defaults), ``zero_grad``,
forward, backward, ``step``.

* M: MLP 784-512-512-10, ReLU, batch 128.
* C: small CNN, (conv 3x3 pad 1, relu, max_pool 2) x 2 (3 -> 16 -> 32
  channels), linear 2048 -> 10, batch 64x3x32x32; its numpy limit is
  bench_conv.py's im2col step (C3 there) with the numpy Adam below.

Before timing, every workload checks that all systems produce the same
gradients from the same weights and aborts loudly if not.  Measurement as in
bench_conv.py (``_harness``): each system in its own block, in the order
A B C D D C B A (twice by default), a pause between blocks, a warm-up;
figures are medians; glibc's malloc thresholds pinned (Note [Pinned malloc
thresholds] in bench_conv.py).  Target (reported, never asserted): agrad's
MLP step within 1.1x of the numpy limit.

Run ``python bench/bench_training.py`` (a minute or two on two cores) or
``--quick`` (CNN batch 16, one round of fewer samples: about half a minute;
each workload prints a line as it starts).  ``--docs`` rewrites
the ``training`` region of ``docs/models-and-training.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import (  # noqa: E402
    Outcome,
    System,
    check_same_gradients,
    clock,
    format_table,
    machine_info,
    measure,
    progress,
    require,
    write_docs_region,
)

require(__file__, "torch")  # the peer is optional for agrad, required here
from bench_conv import cnn_workload, pin_malloc, torch  # noqa: E402
from bench_optim import BETAS, EPS, LR, NumpyAdam  # noqa: E402  (Adam with PyTorch's defaults)

import agrad  # noqa: E402

AWAIT, BLOCKING, TORCH, NUMPY = "agrad await", "agrad blocking", "pytorch", "numpy (limit)"
AGRAD = (AWAIT, BLOCKING)
TARGETS = {"M": 1.1}  # agrad's step at most this times the numpy limit's (per workload key)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS_PAGE = os.path.join(ROOT, "docs", "models-and-training.md")

Arrays = tuple[list[np.ndarray], list[np.ndarray]]

# -- the numpy limit ---------------------------------------------------------------------------


MLP_SIZES = (784, 512, 512, 10)


def _mlp_arrays(batch: int) -> Callable[[np.random.Generator], Arrays]:
    def arrays(rng: np.random.Generator) -> Arrays:
        params = []
        for fan_in, fan_out in zip(MLP_SIZES[:-1], MLP_SIZES[1:]):
            bound = 1 / np.sqrt(fan_in)  # nn.Linear's initial range
            params += [rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32),
                       rng.uniform(-bound, bound, fan_out).astype(np.float32)]
        x = rng.standard_normal((batch, MLP_SIZES[0]), dtype=np.float32)
        y = rng.integers(0, MLP_SIZES[-1], batch).astype(np.int64)
        return params, [x, y]
    return arrays


def _softmax_cross_entropy_grad(logits: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The gradient of the mean cross-entropy with respect to ``logits``, computed in ``logits``' storage."""
    n = logits.shape[0]
    logits -= logits.max(axis=1, keepdims=True)
    np.exp(logits, out=logits)
    logits *= 1 / logits.sum(axis=1, keepdims=True)
    logits[np.arange(n), y] -= 1
    logits *= 1 / n
    return logits


def mlp_numpy_grads(params: Sequence[np.ndarray], consts: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Forward and backward of the MLP by hand: three matmuls forward, five back (no input gradient)."""
    w1, b1, w2, b2, w3, b3 = params
    x, y = consts
    h1 = x @ w1.T
    h1 += b1
    np.maximum(h1, 0, out=h1)
    h2 = h1 @ w2.T
    h2 += b2
    np.maximum(h2, 0, out=h2)
    logits = h2 @ w3.T
    logits += b3
    g = _softmax_cross_entropy_grad(logits, y)
    gw3, gb3 = g.T @ h2, g.sum(axis=0)
    g = g @ w3
    g *= h2 > 0
    gw2, gb2 = g.T @ h1, g.sum(axis=0)
    g = g @ w2
    g *= h1 > 0
    gw1, gb1 = g.T @ x, g.sum(axis=0)
    return [gw1, gb1, gw2, gb2, gw3, gb3]


# -- workloads ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """One model, declared once.

    ``arrays(rng)`` gives the parameters (in ``model(lib).parameters()`` order)
    and the constants (inputs, labels) as numpy arrays; ``model(lib)`` builds
    the layers in ``agrad`` or ``torch``; ``numpy_grads(params, consts)`` runs
    forward and backward by hand and returns the parameters' gradients.
    """

    key: str
    title: str
    arrays: Callable[[np.random.Generator], Arrays]
    model: Callable[[Any], Any]
    numpy_grads: Callable[[Sequence[np.ndarray], Sequence[np.ndarray]], list[np.ndarray]]
    rtol: float = 1e-3
    atol: float = 1e-5


def _mlp_model(lib: Any) -> Any:
    nn = lib.nn
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))


def _cnn_model(lib: Any) -> Any:
    nn = lib.nn
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * 8 * 8, 10))


def mlp_workload(batch: int) -> Workload:
    return Workload("M", f"M: MLP {'-'.join(map(str, MLP_SIZES))}, ReLU, cross-entropy, Adam, batch {batch} float32",
                    _mlp_arrays(batch), _mlp_model, mlp_numpy_grads)


def cnn_training_workload(batch: int) -> Workload:
    conv = cnn_workload(batch)  # bench_conv's C3: the same network, its data and its im2col limit
    return Workload("C", f"C: small CNN, (conv3x3-relu-maxpool2) x2 3->16->32, linear 2048->10, cross-entropy, "
                         f"Adam, batch {batch}x3x32x32 float32", conv.arrays, _cnn_model, conv.numpy_step)


# -- the systems -------------------------------------------------------------------------------


def _graph_system(w: Workload, label: str, lib: Any, driver: str) -> tuple[System, Callable[[], list[np.ndarray]]]:
    """agrad (either driver) or PyTorch; and a function giving one untimed, un-stepped step's gradients."""
    params_np, consts_np = w.arrays(np.random.default_rng(0))
    model = w.model(lib)
    with lib.no_grad():
        for p, a in zip(model.parameters(), params_np, strict=True):
            p.copy_(lib.from_numpy(a))
    x, y = (lib.from_numpy(a) for a in consts_np)
    loss_fn = lib.nn.CrossEntropyLoss()
    optimizer = lib.optim.Adam(model.parameters(), lr=LR, betas=BETAS, eps=EPS)

    def start() -> Any:
        optimizer.zero_grad()
        return loss_fn(model(x), y)

    def grads() -> list[np.ndarray]:
        return [np.array(p.grad.numpy()) for p in model.parameters()]

    if driver == "await":
        async def sample_async() -> float:
            t0 = clock()
            loss = start()
            await loss.backward()
            optimizer.step()
            return clock() - t0

        async def once() -> list[np.ndarray]:
            await start().backward()
            return grads()

        return System(label, sample_async, is_async=True), lambda: asyncio.run(once())

    backward = (lambda loss: loss.backward_sync()) if driver == "blocking" else (lambda loss: loss.backward())

    def sample() -> float:
        t0 = clock()
        loss = start()
        backward(loss)
        optimizer.step()
        return clock() - t0

    def once_sync() -> list[np.ndarray]:
        backward(start())
        return grads()

    return System(label, sample), once_sync


def _numpy_system(w: Workload) -> tuple[System, Callable[[], list[np.ndarray]]]:
    params, consts = w.arrays(np.random.default_rng(0))
    adam = NumpyAdam(params, [], 0)  # whole arrays: the parameters are small

    def sample() -> float:
        t0 = clock()
        adam.step(w.numpy_grads(params, consts))
        return clock() - t0

    return System(NUMPY, sample), lambda: w.numpy_grads(params, consts)


def build(w: Workload) -> tuple[list[System], dict[str, list[np.ndarray]]]:
    made = [_graph_system(w, AWAIT, agrad, "await"), _graph_system(w, BLOCKING, agrad, "blocking"),
            _graph_system(w, TORCH, torch, "torch"), _numpy_system(w)]
    grads = {s.label: once() for s, once in made}  # before any timed (and updating) step
    return [s for s, _ in made], grads


# -- running and reporting ---------------------------------------------------------------------


def report(out: Outcome, markdown: bool = False) -> str:
    target = TARGETS.get(out.workload.key)
    notes = {} if target is None else {
        label: f"<= {target:g}x numpy: {'met' if out.median(label) <= target * out.median(NUMPY) else 'MISSED'}"
        for label in AGRAD}
    return format_table(out.workload.title, "ms/step", 1e3, out.results, {"/ numpy": NUMPY, "/ torch": TORCH},
                        notes=notes, markdown=markdown)


def main(argv: Sequence[str] | None = None) -> int:
    """Check gradients, time both workloads, print the tables (and write the docs with --docs)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="CNN batch 16, fewer samples: a smoke run")
    parser.add_argument("--only", help="comma-separated workloads, M and/or C (default: both)")
    parser.add_argument("--repeats", type=int, help="samples per block (default 10, or 2 with --quick)")
    parser.add_argument("--rounds", type=int, help="rounds of blocks A B C D D C B A (default 2, or 1 with --quick)")
    parser.add_argument("--warmup", type=int, help="untimed samples per block (default 2, or 1 with --quick)")
    parser.add_argument("--pause", type=float, help="seconds between blocks (default 0.5, or 0.05 with --quick)")
    parser.add_argument("--docs", action="store_true",
                        help="rewrite the training region of docs/models-and-training.md")
    parser.add_argument("--default-malloc", action="store_true",
                        help="leave glibc's malloc thresholds alone (Note [Pinned malloc thresholds], bench_conv.py)")
    args = parser.parse_args(argv)
    pinned = not args.default_malloc and pin_malloc()
    repeats = args.repeats or (2 if args.quick else 10)
    rounds = args.rounds or (1 if args.quick else 2)
    warmup = args.warmup if args.warmup is not None else (1 if args.quick else 2)
    pause = args.pause if args.pause is not None else (0.05 if args.quick else 0.5)
    torch.set_num_threads(agrad.get_num_threads())
    workloads = {"M": mlp_workload(128), "C": cnn_training_workload(16 if args.quick else 64)}
    keys = [k.strip().upper() for k in args.only.split(",")] if args.only else list(workloads)
    if unknown := set(keys) - set(workloads):
        parser.error(f"unknown workloads {sorted(unknown)}: choose from {', '.join(workloads)}")
    header = (machine_info() + f"\nthreads    agrad BLAS {agrad.get_num_threads()}, torch {torch.get_num_threads()}"
              f"\nmalloc     {'glibc thresholds pinned (mmap 1 GiB, no trim)' if pinned else 'glibc defaults'}")
    print(header)
    settings = (f"{repeats} samples per block after {warmup} warm-up, {pause} s pause between blocks, order "
                f"A B C D D C B A{f' x {rounds}' if rounds > 1 else ''}")
    print(f"settings   {settings}\n")
    started = clock()
    outcomes = []
    for i, key in enumerate(keys, 1):
        w = workloads[key]
        progress(i, len(keys), w.title)
        systems, grads = build(w)
        check_same_gradients(w.key, grads, w.rtol, w.atol)
        out = Outcome(w, measure(systems, warmup, repeats, pause, rounds))
        outcomes.append(out)
        print(report(out))
        print("  " + "; ".join(f"{label} / numpy {out.median(label) / out.median(NUMPY):.2f}x, / torch "
                               f"{out.median(label) / out.median(TORCH):.2f}x" for label in AGRAD) + "\n")
    load = f"load average {os.getloadavg()[0]:.2f} at the end"
    print(f"{load}; total time {clock() - started:.1f} s")
    if args.docs:
        command = "python bench/bench_training.py" + "".join(f" {a}" for a in argv)
        parts = ["```text", header, "```", "", f"Command: `{command}`; {settings}; {load}.", ""]
        for out in outcomes:
            parts += [report(out, markdown=True), ""]
        write_docs_region(DOCS_PAGE, "training", "\n".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
