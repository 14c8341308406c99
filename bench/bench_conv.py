"""Convolution benchmark: agrad's conv kernels next to PyTorch and a hand-written numpy limit, in one process.

Three workloads, float32, each timed as a whole step (forward and backward;
the CNN also its SGD update), by four systems: agrad awaited (a coroutine
awaiting ``backward()`` on an ``asyncio.Runner`` kept for the block; the clock
runs inside the coroutine), agrad's blocking twin (``backward_sync()``),
PyTorch (CPU, with as many intra-op threads as agrad gives BLAS:
``torch.set_num_threads(agrad.get_num_threads())``) and a hand-written numpy
im2col + matmul forward and backward, the limit (kernels with no engine, and
the forward's im2col columns kept for the weight's gradient, which agrad's
node does not save).

* C1: ``conv2d`` 3 -> 64 channels, 3x3, padding 1, on 32x3x56x56 (a first
  layer: gradients of weight and bias, not of the input), backward given a
  fixed random output gradient.
* C2: the same geometry 64 -> 64 (a middle layer: input, weight and bias).
* C3: a small CNN training step on 64x3x32x32: (conv 3x3 pad 1, relu,
  max_pool 2) x 2 (3 -> 16 -> 32 channels), linear 2048 -> 10,
  cross-entropy, and a manual SGD update of every parameter.

Before timing, every workload checks that all systems produce the same
gradients and aborts loudly if not.  Fair measurement (``_harness``): every
system runs in its own block, in the order A B C D D C B A (twice by default),
with a pause between blocks, after a warm-up; figures are medians, ratios
over PyTorch and over the numpy limit.  glibc's malloc thresholds are pinned
first (Note [Pinned malloc thresholds]).  The target is agrad within 1.3x of
the numpy limit.  Nothing here asserts on timings.

Run ``python bench/bench_conv.py`` (a few minutes on two cores) or
``--quick`` (batch 8 for C1/C2 and 16 for C3, one round: under a minute).
``--docs`` rewrites the ``conv`` region of ``docs/performance.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

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

import agrad  # noqa: E402

# -- the allocator -----------------------------------------------------------------------------


# Note [Pinned malloc thresholds]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Every system here allocates arrays of megabytes per step, and glibc serves
# those from fresh mmap'd pages (a page fault per 4 KiB) or from its heap
# depending on thresholds it moves with the process's history: the same numpy
# step took 16 ms or 28 ms in one process depending on what ran before it,
# and PyTorch's 6 ms or 12 ms.  The benchmark pins them (``mallopt``: no
# mmap below 1 GiB, no trimming of the heap), so that every system reuses
# heap memory and the figures compare kernels, not page faults.
# ``--default-malloc`` leaves glibc alone.
def pin_malloc() -> bool:
    """Pin glibc's mmap and trim thresholds; False where there is no glibc."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3
    return bool(libc.mallopt(m_mmap_threshold, 1 << 30)) and bool(libc.mallopt(m_trim_threshold, 2**31 - 1))


require(__file__, "torch")  # the peer is optional for agrad, required here
import torch  # noqa: E402

AWAIT, BLOCKING, TORCH, NUMPY = "agrad await", "agrad blocking", "pytorch", "numpy (limit)"
LABELS = (AWAIT, BLOCKING, TORCH, NUMPY)
AGRAD = (AWAIT, BLOCKING)
TARGET = 1.3  # agrad's step at most this times the numpy limit's
LR = 0.01
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS_PAGE = os.path.join(ROOT, "docs", "performance.md")

# -- the numpy limit: im2col + matmul by hand ----------------------------------------------------


def _im2col(x: np.ndarray, k: int, pad: int) -> np.ndarray:
    """(N, C, H, W) -> (N, C*k*k, H'*W') columns of the zero-padded input (stride 1)."""
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad))) if pad else x
    n, c, h, w = xp.shape
    oh, ow = h - k + 1, w - k + 1
    s = xp.strides
    view = as_strided(xp, (n, c, k, k, oh, ow), (s[0], s[1], s[2], s[3], s[2], s[3]))
    return np.ascontiguousarray(view).reshape(n, c * k * k, oh * ow)


def conv_forward(x: np.ndarray, w: np.ndarray, b: np.ndarray, pad: int) -> tuple[np.ndarray, np.ndarray]:
    """A stride-1 convolution and the columns its weight gradient reuses."""
    n, _, h, wd = x.shape
    co, _, k, _ = w.shape
    cols = _im2col(x, k, pad)
    y = np.matmul(w.reshape(co, -1), cols)
    y += b[:, None]
    return y.reshape(n, co, h + 2 * pad - k + 1, wd + 2 * pad - k + 1), cols


def conv_backward(g: np.ndarray, x_shape: tuple[int, ...], w: np.ndarray, cols: np.ndarray, pad: int,
                  need_input: bool) -> tuple[np.ndarray | None, np.ndarray, np.ndarray]:
    """Gradients of input (a stride-1 transposed convolution: a convolution of the
    padded ``g`` with the flipped, transposed kernel), weight and bias."""
    n, co = g.shape[:2]
    k = w.shape[2]
    g3 = g.reshape(n, co, -1)
    gw = np.matmul(g3, cols.transpose(0, 2, 1)).sum(axis=0).reshape(w.shape)
    gb = g3.sum(axis=(0, 2))
    if not need_input:
        return None, gw, gb
    wt = np.ascontiguousarray(w.transpose(1, 0, 2, 3)[:, :, ::-1, ::-1])
    gx = np.matmul(wt.reshape(wt.shape[0], -1), _im2col(g, k, k - 1 - pad))
    return gx.reshape(x_shape), gw, gb


def _pool_forward(x: np.ndarray) -> np.ndarray:
    """2x2 max pool, stride 2: the max of four strided views."""
    return np.maximum(np.maximum(x[:, :, 0::2, 0::2], x[:, :, 0::2, 1::2]),
                      np.maximum(x[:, :, 1::2, 0::2], x[:, :, 1::2, 1::2]))


def _pool_backward(g: np.ndarray, x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """2x2 max pool's backward by equality with the maximum; ties (zeros after relu)
    get the gradient too, which the relu below zeroes: the same result as the first argmax."""
    gx = np.empty_like(x)
    for i in (0, 1):
        for j in (0, 1):
            np.multiply(g, x[:, :, i::2, j::2] == out, out=gx[:, :, i::2, j::2])
    return gx


# -- workloads ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """One workload, declared once.

    ``arrays(rng)`` gives the parameters (leaves: their gradients are compared)
    and the constants as numpy arrays; ``forward(lib, leaves, consts)`` returns
    ``(output, gradient)``, the tensor whose backward is run and the gradient
    it is given (None for a scalar loss), in ``agrad`` or ``torch``;
    ``numpy_step(leaves, consts)`` runs the same step by hand and returns the
    leaves' gradients.  ``sgd``: the step ends with ``p -= LR * p.grad``.
    """

    key: str
    title: str
    arrays: Callable[[np.random.Generator], tuple[list[np.ndarray], list[np.ndarray]]]
    forward: Callable[[Any, Sequence[Any], Sequence[Any]], tuple[Any, Any]]
    numpy_step: Callable[[Sequence[np.ndarray], Sequence[np.ndarray]], list[np.ndarray]]
    sgd: bool = False
    rtol: float = 2e-3
    atol: float = 1e-2


def _conv_arrays(batch: int, cin: int, cout: int, input_grad: bool
                 ) -> Callable[[np.random.Generator], tuple[list[np.ndarray], list[np.ndarray]]]:
    def arrays(rng: np.random.Generator) -> tuple[list[np.ndarray], list[np.ndarray]]:
        bound = 1 / np.sqrt(cin * 9)
        x = rng.standard_normal((batch, cin, 56, 56), dtype=np.float32)
        w = rng.uniform(-bound, bound, (cout, cin, 3, 3)).astype(np.float32)
        b = rng.uniform(-bound, bound, cout).astype(np.float32)
        g = rng.standard_normal((batch, cout, 56, 56), dtype=np.float32)
        return ([x, w, b], [g]) if input_grad else ([w, b], [x, g])
    return arrays


def _conv_forward(input_grad: bool) -> Callable[[Any, Sequence[Any], Sequence[Any]], tuple[Any, Any]]:
    def forward(lib: Any, leaves: Sequence[Any], consts: Sequence[Any]) -> tuple[Any, Any]:
        x, w, b = leaves if input_grad else (consts[0], *leaves)
        return lib.nn.functional.conv2d(x, w, b, padding=1), consts[-1]
    return forward


def _conv_numpy(input_grad: bool) -> Callable[[Sequence[np.ndarray], Sequence[np.ndarray]], list[np.ndarray]]:
    def step(leaves: Sequence[np.ndarray], consts: Sequence[np.ndarray]) -> list[np.ndarray]:
        x, w, b = leaves if input_grad else (consts[0], *leaves)
        _, cols = conv_forward(x, w, b, 1)
        gx, gw, gb = conv_backward(consts[-1], x.shape, w, cols, 1, input_grad)
        return [gx, gw, gb] if input_grad else [gw, gb]  # type: ignore[list-item]
    return step


def conv_workload(key: str, batch: int, cin: int, cout: int, input_grad: bool) -> Workload:
    what = "input, weight, bias" if input_grad else "weight, bias"
    return Workload(key, f"{key}: conv2d {cin}->{cout}, 3x3, padding 1, on {batch}x{cin}x56x56 float32, forward + "
                         f"backward ({what})",
                    _conv_arrays(batch, cin, cout, input_grad), _conv_forward(input_grad), _conv_numpy(input_grad))


CNN_CHANNELS = (3, 16, 32)
CNN_CLASSES = 10


def _cnn_arrays(batch: int) -> Callable[[np.random.Generator], tuple[list[np.ndarray], list[np.ndarray]]]:
    def arrays(rng: np.random.Generator) -> tuple[list[np.ndarray], list[np.ndarray]]:
        params = []
        for cin, cout in zip(CNN_CHANNELS[:-1], CNN_CHANNELS[1:]):
            bound = 1 / np.sqrt(cin * 9)
            params += [rng.uniform(-bound, bound, (cout, cin, 3, 3)).astype(np.float32),
                       rng.uniform(-bound, bound, cout).astype(np.float32)]
        features = CNN_CHANNELS[-1] * 8 * 8
        bound = 1 / np.sqrt(features)
        params += [rng.uniform(-bound, bound, (CNN_CLASSES, features)).astype(np.float32),
                   rng.uniform(-bound, bound, CNN_CLASSES).astype(np.float32)]
        x = rng.standard_normal((batch, 3, 32, 32), dtype=np.float32)
        y = rng.integers(0, CNN_CLASSES, batch).astype(np.int64)
        return params, [x, y]
    return arrays


def _cnn_forward(lib: Any, leaves: Sequence[Any], consts: Sequence[Any]) -> tuple[Any, Any]:
    F = lib.nn.functional
    w1, b1, w2, b2, w3, b3 = leaves
    x, y = consts
    h = F.max_pool2d(F.relu(F.conv2d(x, w1, b1, padding=1)), 2)
    h = F.max_pool2d(F.relu(F.conv2d(h, w2, b2, padding=1)), 2)
    return F.cross_entropy(F.linear(h.reshape(h.shape[0], -1), w3, b3), y), None


def _cnn_numpy(leaves: Sequence[np.ndarray], consts: Sequence[np.ndarray]) -> list[np.ndarray]:
    w1, b1, w2, b2, w3, b3 = leaves
    x, y = consts
    n = x.shape[0]
    a1, cols1 = conv_forward(x, w1, b1, 1)
    r1 = np.maximum(a1, 0)
    p1 = _pool_forward(r1)
    a2, cols2 = conv_forward(p1, w2, b2, 1)
    r2 = np.maximum(a2, 0)
    p2 = _pool_forward(r2)
    flat = p2.reshape(n, -1)
    logits = flat @ w3.T + b3
    shifted = logits - logits.max(axis=1, keepdims=True)
    prob = np.exp(shifted)
    prob /= prob.sum(axis=1, keepdims=True)
    prob[np.arange(n), y] -= 1
    g = prob / n
    gw3, gb3 = g.T @ flat, g.sum(axis=0)
    g = _pool_backward((g @ w3).reshape(p2.shape), r2, p2) * (a2 > 0)
    gp1, gw2, gb2 = conv_backward(g, p1.shape, w2, cols2, 1, True)
    g = _pool_backward(gp1, r1, p1) * (a1 > 0)  # type: ignore[arg-type]
    _, gw1, gb1 = conv_backward(g, x.shape, w1, cols1, 1, False)
    return [gw1, gb1, gw2, gb2, gw3, gb3]


def cnn_workload(batch: int) -> Workload:
    return Workload("C3", f"C3: small CNN training step, (conv3x3-relu-maxpool2) x2 {'->'.join(map(str, CNN_CHANNELS))}"
                          f", linear, cross-entropy, SGD, batch {batch}x3x32x32 float32",
                    _cnn_arrays(batch), _cnn_forward, _cnn_numpy, sgd=True, rtol=1e-3, atol=1e-5)


# -- the systems --------------------------------------------------------------------------------


def _graph_system(w: Workload, label: str, lib: Any, driver: str) -> tuple[System, Callable[[], list[np.ndarray]]]:
    """agrad (either driver) or PyTorch; and a function giving one untimed step's gradients."""
    leaves_np, consts_np = w.arrays(np.random.default_rng(0))
    leaves = [lib.from_numpy(a.copy()).requires_grad_() for a in leaves_np]
    consts = [lib.from_numpy(a) for a in consts_np]

    def update() -> None:
        with lib.no_grad():
            for p in leaves:
                p.sub_(LR * p.grad)

    def start() -> tuple[Any, Any]:
        for p in leaves:
            p.grad = None
        out, g = w.forward(lib, leaves, consts)
        return out, None if g is None else g

    if driver == "await":
        async def sample_async() -> float:
            t0 = clock()
            out, g = start()
            await out.backward(g)
            if w.sgd:
                update()
            return clock() - t0

        async def once() -> list[np.ndarray]:
            out, g = start()
            await out.backward(g)
            return [np.array(p.grad.numpy()) for p in leaves]

        return System(label, sample_async, is_async=True), lambda: asyncio.run(once())

    def backward(out: Any, g: Any) -> None:
        if driver == "blocking":
            out.backward_sync(g)
        else:
            out.backward(g)

    def sample() -> float:
        t0 = clock()
        out, g = start()
        backward(out, g)
        if w.sgd:
            update()
        return clock() - t0

    def grads() -> list[np.ndarray]:
        out, g = start()
        backward(out, g)
        return [np.array(p.grad.numpy()) for p in leaves]

    return System(label, sample), grads


def _numpy_system(w: Workload) -> tuple[System, Callable[[], list[np.ndarray]]]:
    leaves, consts = w.arrays(np.random.default_rng(0))
    leaves = [a.copy() for a in leaves]

    def sample() -> float:
        t0 = clock()
        grads = w.numpy_step(leaves, consts)
        if w.sgd:
            for p, g in zip(leaves, grads):
                p -= LR * g
        return clock() - t0

    return System(NUMPY, sample), lambda: w.numpy_step(leaves, consts)


def build(w: Workload) -> tuple[list[System], dict[str, list[np.ndarray]]]:
    made = [_graph_system(w, AWAIT, agrad, "await"), _graph_system(w, BLOCKING, agrad, "blocking"),
            _graph_system(w, TORCH, torch, "torch"), _numpy_system(w)]
    grads = {s.label: once() for s, once in made}  # before any timed (and updating) step
    return [s for s, _ in made], grads


# -- running and reporting -----------------------------------------------------------------------


def run_workload(w: Workload, warmup: int, repeats: int, pause: float, rounds: int) -> Outcome:
    systems, grads = build(w)
    check_same_gradients(w.key, grads, w.rtol, w.atol)
    return Outcome(w, measure(systems, warmup, repeats, pause, rounds))


def report(out: Outcome, markdown: bool = False) -> str:
    notes = {label: f"<= {TARGET:g}x numpy: {'met' if out.ratio(label, NUMPY) <= TARGET else 'MISSED'}"
             for label in AGRAD}
    return format_table(out.workload.title, "ms/step", 1e3, out.results, {"/ torch": TORCH, "/ numpy": NUMPY},
                        notes=notes, markdown=markdown)


def main(argv: Sequence[str] | None = None) -> int:
    """Check gradients, time every workload, print the tables (and write the docs with --docs)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller batches, fewer repeats: under a minute")
    parser.add_argument("--only", help="comma-separated workloads, e.g. C1,C3 (default: all)")
    parser.add_argument("--repeats", type=int, help="samples per block (default 5, or 2 with --quick)")
    parser.add_argument("--rounds", type=int, help="rounds of blocks A B C D D C B A (default 2, or 1 with --quick)")
    parser.add_argument("--warmup", type=int, help="untimed samples per block (default 1)")
    parser.add_argument("--pause", type=float, help="seconds between blocks (default 0.5, or 0.05 with --quick)")
    parser.add_argument("--docs", action="store_true", help="rewrite the conv region of docs/performance.md")
    parser.add_argument("--default-malloc", action="store_true",
                        help="leave glibc's malloc thresholds alone (Note [Pinned malloc thresholds])")
    args = parser.parse_args(argv)
    pinned = not args.default_malloc and pin_malloc()
    repeats = args.repeats or (2 if args.quick else 5)
    rounds = args.rounds or (1 if args.quick else 2)
    warmup = args.warmup if args.warmup is not None else 1
    pause = args.pause if args.pause is not None else (0.05 if args.quick else 0.5)
    torch.set_num_threads(agrad.get_num_threads())
    conv_batch, cnn_batch = (8, 16) if args.quick else (32, 64)
    workloads = {"C1": conv_workload("C1", conv_batch, 3, 64, False),
                 "C2": conv_workload("C2", conv_batch, 64, 64, True), "C3": cnn_workload(cnn_batch)}
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
        progress(i, len(keys), workloads[key].title)
        out = run_workload(workloads[key], warmup, repeats, pause, rounds)
        outcomes.append(out)
        print(report(out))
        print(f"  agrad blocking / numpy {out.ratio(BLOCKING, NUMPY):.2f}x, / torch "
              f"{out.median(BLOCKING) / out.median(TORCH):.2f}x; agrad await / numpy {out.ratio(AWAIT, NUMPY):.2f}x\n")
    load = f"load average {os.getloadavg()[0]:.2f} at the end"
    print(f"{load}; total time {clock() - started:.1f} s")
    if args.docs:
        command = "python bench/bench_conv.py" + "".join(f" {a}" for a in argv)
        parts = ["```text", header, "```", "", f"Command: `{command}`; {settings}; {load}.", ""]
        for out in outcomes:
            parts += [report(out, markdown=True), ""]
        write_docs_region(DOCS_PAGE, "conv", "\n".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
