"""Performance suite (issue 6): agrad next to PyTorch, HIPS autograd and a numpy limit, in one process.

Six workloads, float32, each run by five systems: agrad awaited (a coroutine
awaiting the backward on an ``asyncio.Runner`` kept for the block; the clock
runs inside the coroutine), agrad's blocking twin (``backward_sync()``),
PyTorch (CPU), HIPS autograd (``autograd`` on PyPI) and a hand-written numpy
backward: the kernels with no engine, the limit.

* W1: ``y = x`` (1,); 2000 times ``y = y * 1.0001 + 0.0001``; ``y.sum()``.
  Backward µs per node.
* W2: the same on (10000,).  Backward µs per node.
* W3: MLP 784-1024-1024-10, ReLU, cross-entropy, batch 64.  Forward+backward
  ms per step.
* W4: x (1000,); 500 branches ``tanh(x * w_i).sum()`` (w_i constants),
  summed left to right (499 add nodes).  Backward ms.
* W5: the W1 chain with 100,000 steps (200k nodes).  Backward µs per node and
  graph memory, one fresh process per system.
* W6: ``((x @ W1) @ W2).sum()``, all 2048 x 2048, gradients of W1 and W2.
  Backward ms (three matmuls).

Only the backward is timed, on a graph built untimed and fresh for every
sample, except W3, whose step (forward + backward) is timed.  HIPS autograd
builds its trace untimed with ``autograd.core.make_vjp`` and is timed calling
the vjp (W3: both, as ``autograd.grad`` does).  A chain's per-node figure is the backward time over
2 x steps (a MulBackward0 and an AddBackward0 per step); its numpy limit is
the same multiplications by 1.0001, in a Python loop.

Fair measurement (see ``_harness``): every system runs in its own block, in
the order A B C D E E D C B A, twice over, with a pause between blocks, after a warm-up;
figures are medians.  Before timing, every workload checks once that all
systems produce the same gradients and aborts loudly if not.

W5 runs each system in a fresh subprocess (``--w5-child``), so that memory
figures are clean: backward µs per node (median of a few samples), graph
memory (resident-set growth while the graph is built; for agrad and HIPS also
the Python and numpy memory traced by ``tracemalloc``, on a separate,
untimed pass), and agrad's traced peak during the backward against its peak
during the forward, which shows whether saved tensors are freed as the
backward passes them.
``--nodes-1m`` runs, instead of the suite, the 1,000,000-node chain next to
the 200,000-node one (agrad and PyTorch) to show time linear in nodes.

Each workload's table gives its targets (issue 6), met or missed.  By default
the run also rewrites the results region of ``docs/performance.md`` and draws
``docs/performance.png``.

Run ``python bench/bench_perf.py`` (a few minutes on two cores), ``--quick``
for a smoke run (shorter chains, smaller W6, fewer samples: about half a
minute; writes no docs unless ``--docs``), ``--only W1,W3`` to select
workloads.  Each workload prints a line as it starts.  Nothing here asserts on
timings.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import importlib
import json
import operator
import os
import re
import statistics
import subprocess
import sys
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _harness import (  # noqa: E402
    Measurement,
    System,
    check_same_gradients,
    clock,
    format_table,
    machine_info,
    measure,
    progress,
    require,
    rss_mib,
    spawn_json,
)

import agrad  # noqa: E402

# PyTorch and HIPS autograd are imported where a system of theirs is made (``Workload.impls``):
# a W5 child then imports only the library it runs, not PyTorch's seconds of import, and
# bench_engine, which borrows W1 and the MLP for agrad alone, needs neither; main() checks both.

AWAIT, BLOCKING, TORCH, HIPS, NUMPY = "agrad await", "agrad blocking", "pytorch", "autograd (HIPS)", "numpy (limit)"
LABELS = (AWAIT, BLOCKING, TORCH, HIPS, NUMPY)
AGRAD = (AWAIT, BLOCKING)
ONE = np.float32(1.0)  # the gradient of a scalar loss, as HIPS autograd's vjp is called

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS_PAGE, DOCS_CHART = os.path.join(ROOT, "docs", "performance.md"), os.path.join(ROOT, "docs", "performance.png")

# -- a workload, declared once, run by every system ------------------------------------------------


@dataclass(frozen=True)
class Target:
    """An issue-6 target for agrad's two drivers: at most ``ratio`` x the system labelled ``ref``."""

    ratio: float
    ref: str

    def describe(self) -> str:
        return f"<= {self.ratio:g}x {'torch' if self.ref == TORCH else 'numpy'}"


@dataclass(frozen=True)
class Workload:
    """One workload, declared once.

    ``arrays`` gives the inputs as numpy arrays: the leaves (whose gradients
    are computed and compared) and the constants.  ``forward(lib, leaves,
    consts)`` returns the scalar loss, written once for agrad, PyTorch and
    HIPS autograd (``lib`` is ``agrad``, ``torch`` or ``autograd.numpy``;
    ``hips_forward`` where autograd.numpy cannot run it as written).
    ``numpy_limit(leaves, consts)`` runs the forward by hand (untimed) and
    returns the timed backward, which returns the leaves' gradients.
    """

    key: str
    title: str
    unit: str
    per: float  # seconds times ``per`` are ``unit``
    arrays: Callable[[], tuple[list[np.ndarray], list[np.ndarray]]]
    forward: Callable[[Any, Sequence[Any], Sequence[Any]], Any]
    numpy_limit: Callable[[Sequence[np.ndarray], Sequence[np.ndarray]], Callable[[], Sequence[np.ndarray]]]
    target: Target
    rtol: float
    atol: float
    forward_timed: bool = False
    hips_forward: Callable[[Any, Sequence[Any], Sequence[Any]], Any] | None = None
    sample_seconds: Callable[[], float] | None = None  # an estimate, to fit the repeats into ``budget``
    budget: float = 0.0
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def data(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """The inputs, made once and shared by every system."""
        if "data" not in self._cache:
            self._cache["data"] = self.arrays()
        return self._cache["data"]

    def impls(self, labels: Sequence[str] = LABELS) -> list[Impl]:
        makers: dict[str, Callable[[], Impl]] = {
            AWAIT: functools.partial(_graph_impl, self, AWAIT, agrad, "await"),
            BLOCKING: functools.partial(_graph_impl, self, BLOCKING, agrad, "blocking"),
            TORCH: lambda: _graph_impl(self, TORCH, importlib.import_module("torch"), "torch"),
            HIPS: functools.partial(_hips_impl, self), NUMPY: functools.partial(_numpy_impl, self)}
        return [makers[label]() for label in labels]


@dataclass(frozen=True)
class Impl:
    """How one system runs a workload.

    ``prepare()`` is the untimed part (it builds the graph) and returns a state;
    ``run(state)`` is the timed part (a coroutine function if ``is_async``);
    ``gradients(what run returned)`` gives the leaves' gradients.
    """

    label: str
    prepare: Callable[[], Any]
    run: Callable[[Any], Any]
    gradients: Callable[[Any], list[np.ndarray]]
    is_async: bool = False


def _graph_impl(w: Workload, label: str, lib: Any, driver: str) -> Impl:
    """agrad (either driver) or PyTorch: leaves made once, their ``.grad`` reset per sample."""
    leaves_np, consts_np = w.data()
    leaves = [lib.from_numpy(a.copy()).requires_grad_() for a in leaves_np]
    consts = [lib.from_numpy(a) for a in consts_np]

    def build() -> Any:
        for t in leaves:
            t.grad = None
        return w.forward(lib, leaves, consts)

    prepare: Callable[[], Any] = (lambda: None) if w.forward_timed else build
    loss_of: Callable[[Any], Any] = (lambda _: build()) if w.forward_timed else (lambda loss: loss)

    def gradients(_: Any) -> list[np.ndarray]:
        return [np.array(t.grad.numpy()) for t in leaves]

    if driver == "await":
        async def run(state: Any) -> None:
            await loss_of(state).backward()

        return Impl(label, prepare, run, gradients, is_async=True)
    if driver == "blocking":
        return Impl(label, prepare, lambda state: loss_of(state).backward_sync(), gradients)
    return Impl(label, prepare, lambda state: loss_of(state).backward(), gradients)


def _hips_impl(w: Workload) -> Impl:
    """HIPS autograd: ``make_vjp`` traces the forward (untimed unless W3), the vjp is the backward."""
    import autograd.numpy as anp
    from autograd.core import make_vjp

    leaves, consts = w.data()
    forward = w.hips_forward or w.forward

    def fun(ls: Any) -> Any:
        return forward(anp, ls, consts)

    def trace() -> Callable[[Any], Any]:
        return make_vjp(fun, tuple(leaves))[0]

    if w.forward_timed:
        return Impl(HIPS, lambda: None, lambda _: trace()(ONE), list)
    return Impl(HIPS, trace, lambda vjp: vjp(ONE), list)


def _numpy_impl(w: Workload) -> Impl:
    leaves, consts = w.data()
    return Impl(NUMPY, lambda: w.numpy_limit(leaves, consts), lambda backward: backward(), list)


async def _timed_async(impl: Impl, state: Any) -> tuple[float, Any]:
    t0 = clock()
    out = await impl.run(state)
    return clock() - t0, out


def _timed(impl: Impl, state: Any) -> tuple[float, Any]:
    t0 = clock()
    out = impl.run(state)
    return clock() - t0, out


def _system(impl: Impl) -> System:
    """The harness's view of an implementation: one sample is prepare, then the clocked run."""
    if impl.is_async:
        async def sample_async() -> float:
            return (await _timed_async(impl, impl.prepare()))[0]

        return System(impl.label, sample_async, is_async=True)
    return System(impl.label, lambda: _timed(impl, impl.prepare())[0])


def _gradients(impl: Impl) -> list[np.ndarray]:
    """The gradients of one untimed run."""
    state = impl.prepare()
    out = asyncio.run(impl.run(state)) if impl.is_async else impl.run(state)
    return impl.gradients(out)


def build(w: Workload, labels: Sequence[str] = LABELS) -> tuple[list[System], dict[str, list[np.ndarray]]]:
    """The workload's systems for the harness, and each one's gradients for the check."""
    impls = w.impls(labels)
    return [_system(i) for i in impls], {i.label: _gradients(i) for i in impls}


# -- W1, W2, W5: a chain of tiny ops (per-node overhead) ------------------------------------------

SCALE, SHIFT = 1.0001, 0.0001


def _chain_forward(steps: int, lib: Any, leaves: Sequence[Any], consts: Sequence[Any]) -> Any:
    (y,) = leaves
    for _ in range(steps):
        y = y * SCALE + SHIFT
    return y.sum()


def _chain_numpy(steps: int, leaves: Sequence[np.ndarray], consts: Sequence[np.ndarray]
                 ) -> Callable[[], list[np.ndarray]]:
    """The kernels of the chain's backward with no engine: SumBackward's ones, then one
    multiplication by 1.0001 per MulBackward0 (AddBackward0 passes its gradient through)."""
    shape = leaves[0].shape

    def backward() -> list[np.ndarray]:
        scale = np.asarray(SCALE, dtype=np.float32)
        g = np.ones(shape, dtype=np.float32)
        for _ in range(steps):
            g = g * scale
        return [g]

    return backward


def chain(key: str, shape: tuple[int, ...], steps: int) -> Workload:
    """``y = x``; ``steps`` times ``y = y * 1.0001 + 0.0001``; ``y.sum()``, in µs per backward node."""
    nodes = 2 * steps  # one MulBackward0 and one AddBackward0 per step
    return Workload(
        key, f"{key}: backward of a {nodes:,}-node chain on {shape} float32", "µs/node", 1e6 / nodes,
        arrays=lambda: ([np.ones(shape, np.float32)], []),
        forward=functools.partial(_chain_forward, steps), numpy_limit=functools.partial(_chain_numpy, steps),
        target=Target(0.5, TORCH), rtol=1e-4, atol=0.0)


CHAIN = 2000
CHAIN_NODES = 2 * CHAIN
W1 = chain("W1", (1,), CHAIN)  # also bench_engine's per-node overhead


# -- W3: an MLP training step ---------------------------------------------------------------------

BATCH, SIZES = 64, (784, 1024, 1024, 10)


def mlp_arrays(rng: np.random.Generator, sizes: Sequence[int] = SIZES, batch: int = BATCH
               ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Weights and biases (PyTorch's Linear init and layout: weight is (out, in)); inputs, targets."""
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        bound = 1.0 / np.sqrt(fan_in)
        params.append(rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32))
        params.append(rng.uniform(-bound, bound, (fan_out,)).astype(np.float32))
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], batch).astype(np.int64)
    return params, [x, y]


def mlp_loss(lib: Any, params: Sequence[Any], x: Any, y: Any) -> Any:
    """ReLU MLP and cross-entropy in ``lib`` (``agrad`` or ``torch``)."""
    F = lib.nn.functional
    h = x
    for i in range(0, len(params) - 2, 2):
        h = F.relu(F.linear(h, params[i], params[i + 1]))
    return F.cross_entropy(F.linear(h, params[-2], params[-1]), y)


def _hips_mlp_loss(lib: Any, params: Sequence[Any], consts: Sequence[np.ndarray]) -> Any:
    from autograd.tracer import getval  # imported already, by _hips_impl: a lookup in sys.modules

    x, y = consts
    h, n_layers = x, len(params) // 2
    for i in range(n_layers):
        h = h @ params[2 * i].T + params[2 * i + 1]
        if i < n_layers - 1:
            h = lib.maximum(h, 0.0)
    shifted = h - getval(h).max(axis=1, keepdims=True)  # a constant shift: no gradient through the max
    logp = shifted - lib.log(lib.sum(lib.exp(shifted), axis=1, keepdims=True))
    return -lib.mean(logp[np.arange(len(y)), y])


def _mlp_numpy(params: Sequence[np.ndarray], consts: Sequence[np.ndarray]) -> Callable[[], list[np.ndarray]]:
    """Forward and backward written by hand (both timed: W3 times the step)."""
    x, y = consts

    def step() -> list[np.ndarray]:
        acts = [x]  # the input of each linear layer
        h = x
        n_layers = len(params) // 2
        for i in range(n_layers):
            h = h @ params[2 * i].T + params[2 * i + 1]
            if i < n_layers - 1:
                h = np.maximum(h, 0)
                acts.append(h)
        shifted = h - h.max(axis=1, keepdims=True)
        logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        rows = np.arange(len(y))
        g = np.exp(logp)
        g[rows, y] -= 1
        g /= len(y)
        grads: list[np.ndarray] = [None] * len(params)  # type: ignore[list-item]
        for i in reversed(range(n_layers)):
            a = acts[i]
            grads[2 * i] = g.T @ a
            grads[2 * i + 1] = g.sum(axis=0)
            if i:
                g = (g @ params[2 * i]) * (a > 0)
        return grads

    return step


W3 = Workload(
    "W3", f"W3: MLP step (forward+backward) {'-'.join(map(str, SIZES))}, relu, cross-entropy, batch {BATCH}",
    "ms/step", 1e3, arrays=lambda: mlp_arrays(np.random.default_rng(0)),
    forward=lambda lib, ps, cs: mlp_loss(lib, ps, *cs),
    numpy_limit=_mlp_numpy, target=Target(1.1, NUMPY), rtol=1e-3, atol=1e-5, forward_timed=True,
    hips_forward=_hips_mlp_loss)


# -- W4: many small branches into one leaf ---------------------------------------------------------

BRANCH_N, BRANCHES = 1000, 500


def _branch_arrays(seed: int = 0) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(BRANCH_N).astype(np.float32)
    return [x], [rng.standard_normal(BRANCH_N).astype(np.float32) for _ in range(BRANCHES)]


def _branch_forward(lib: Any, leaves: Sequence[Any], ws: Sequence[Any]) -> Any:
    (x,) = leaves
    return functools.reduce(operator.add, (lib.tanh(x * w).sum() for w in ws))  # 499 add nodes


def _branch_numpy(leaves: Sequence[np.ndarray], ws: Sequence[np.ndarray]) -> Callable[[], list[np.ndarray]]:
    (x,) = leaves
    ts = [np.tanh(x * w) for w in ws]  # the forward's outputs, kept as the graph keeps them

    def backward() -> list[np.ndarray]:
        gx = np.zeros_like(x)
        for t, w in zip(ts, ws):
            gx += (1 - t * t) * w
        return [gx]

    return backward


W4 = Workload(
    "W4", f"W4: backward of {BRANCHES} branches tanh(x * w_i).sum() on ({BRANCH_N},) float32, summed",
    "ms", 1e3, arrays=_branch_arrays, forward=_branch_forward, numpy_limit=_branch_numpy,
    target=Target(2.0, NUMPY), rtol=1e-4, atol=1e-4)


# -- W6: two large matmul layers ---------------------------------------------------------------------


W6_SIZE = 2048
W6_BUDGET = 75.0  # seconds W6's samples may take in all


def _matmul_arrays(n: int, seed: int = 0) -> tuple[list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    bound = 1.0 / np.sqrt(n)
    w1, w2 = (rng.uniform(-bound, bound, (n, n)).astype(np.float32) for _ in range(2))
    return [w1, w2], [rng.standard_normal((n, n), dtype=np.float32)]


def _matmul_forward(lib: Any, leaves: Sequence[Any], consts: Sequence[Any]) -> Any:
    w1, w2 = leaves
    (x,) = consts
    return ((x @ w1) @ w2).sum()


def _matmul_numpy(leaves: Sequence[np.ndarray], consts: Sequence[np.ndarray]) -> Callable[[], list[np.ndarray]]:
    w1, w2 = leaves
    (x,) = consts
    h = x @ w1

    def backward() -> list[np.ndarray]:
        g = np.ones((x.shape[0], w2.shape[1]), np.float32)
        g_w2 = h.T @ g
        g_h = g @ w2.T
        return [x.T @ g_h, g_w2]

    return backward


def matmuls(n: int) -> Workload:
    return Workload(
        "W6", f"W6: backward of ((x @ W1) @ W2).sum(), {n}x{n} float32", "ms", 1e3,
        arrays=functools.partial(_matmul_arrays, n), forward=_matmul_forward, numpy_limit=_matmul_numpy,
        target=Target(1.05, NUMPY), rtol=1e-3, atol=1e-3,
        # per sample, two matmuls of forward (untimed) and three of backward
        sample_seconds=lambda: 5 * _matmul_seconds(n), budget=W6_BUDGET)



def _matmul_seconds(n: int) -> float:
    """One n x n x n float32 matmul here, best of three."""
    a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    best = float("inf")
    for _ in range(3):
        t0 = clock()
        a @ a
        best = min(best, clock() - t0)
    return best


# -- timing W1-W4 and W6 -------------------------------------------------------------------------------


Check = tuple[str, bool]  # what was measured against which target, and whether it was met


@dataclass
class Outcome:
    """A workload's measurements; its per-system targets (agrad's two drivers) and other target checks."""

    workload: Workload
    results: list[Measurement]
    per_system: dict[str, Check]
    checks: list[Check]

    def median(self, label: str) -> float:
        return next(m.median for m in self.results if m.system.label == label)

    def all_checks(self) -> list[Check]:
        return [(f"{self.workload.key} {label}: {text}", met) for label, (text, met) in self.per_system.items()] + \
            [(f"{self.workload.key} {text}", met) for text, met in self.checks]


def _met(met: bool) -> str:
    return "met" if met else "MISSED"


def _drivers_check(awaited: float, blocking: float) -> Check:
    ratio = awaited / blocking
    return f"agrad await / blocking = {ratio:.3f} (target: within 10%)", max(ratio, 1 / ratio) <= 1.10


def run_workload(w: Workload, warmup: int, repeats: int, pause: float, rounds: int) -> Outcome:
    systems, grads = build(w)
    check_same_gradients(w.key, grads, w.rtol, w.atol)
    if w.sample_seconds is not None:  # a heavy workload: one warm-up, and as many samples as fit its budget
        per_sample, warmup = w.sample_seconds(), min(warmup, 1)
        repeats = max(2, min(repeats, int(w.budget / (2 * rounds * len(systems) * per_sample)) - warmup))
        print(f"  {w.key}: about {per_sample:.2f} s per sample here: {warmup} warm-up and {repeats} samples per block")
    results = measure(systems, warmup, repeats, pause, rounds)
    out = Outcome(w, results, {}, [])
    t = w.target
    for label in AGRAD:
        ratio = out.median(label) / out.median(t.ref)
        out.per_system[label] = (f"{ratio:.2f}x, {t.describe()}", ratio <= t.ratio)
    out.checks.append(_drivers_check(out.median(AWAIT), out.median(BLOCKING)))
    return out


def _report(out: Outcome, markdown: bool = False) -> str:
    w = out.workload
    notes = {label: f"{w.target.describe()}: {_met(met)}" for label, (_, met) in out.per_system.items()}
    table = format_table(w.title, w.unit, w.per, out.results, {"/ torch": TORCH, "/ numpy": NUMPY},
                         notes=notes, markdown=markdown)
    lines = [("- " if markdown else "  ") + f"{text}: {_met(met)}" for text, met in out.checks]
    return "\n".join([table, *([""] if markdown else []), *lines])


# -- W5: a long chain in fresh processes ----------------------------------------------------------------

W5_STEPS, W5_STEPS_1M = 100_000, 500_000
LINEAR = 1.25  # per-node time at 1M nodes at most this times that at 200k: linear


def w5_child(label: str, steps: int, repeats: int, trace: bool) -> dict[str, Any]:
    """In a fresh process: one system's backward of the long chain, timed and measured."""
    w = chain("W5", (1,), steps)
    (impl,) = w.impls([label])
    runner = asyncio.Runner() if impl.is_async else None

    def one(impl: Impl, state: Any) -> tuple[float, Any]:
        return runner.run(_timed_async(impl, state)) if runner else _timed(impl, state)

    (small,) = chain("warm-up", (1,), 200).impls([label])  # sets up what the library sets up lazily
    for _ in range(2):
        one(small, small.prepare())
    result: dict[str, Any] = {"label": label, "steps": steps}
    try:
        times = []
        for i in range(repeats):
            gc.collect()
            before = rss_mib()
            state = impl.prepare()
            if i == 0:
                result["graph_rss_mib"] = rss_mib() - before
            gc.collect()
            elapsed, out = one(impl, state)
            times.append(elapsed)
            grads = impl.gradients(out)
            del state, out
        result["times"] = times
        result["grad"] = [float(v) for v in grads[0].ravel()]
        if trace:
            # Memory on its own pass, untimed: tracemalloc slows every allocation.
            # A chain a tenth as long is traced too: what the backward adds above
            # the forward's peak is then seen to depend on the chain's length or not.
            (tenth,) = chain("W5/10", (1,), steps // 10).impls([label])
            for prefix, each in (("", impl), ("tenth_", tenth)):
                gc.collect()
                tracemalloc.start()
                base = tracemalloc.get_traced_memory()[0]
                state = each.prepare()
                current, peak = tracemalloc.get_traced_memory()
                result[prefix + "traced_graph_mib"] = (current - base) / 2**20
                result[prefix + "forward_peak_mib"] = (peak - base) / 2**20
                tracemalloc.reset_peak()
                one(each, state)
                current, peak = tracemalloc.get_traced_memory()
                result[prefix + "backward_peak_mib"] = (peak - base) / 2**20
                result[prefix + "after_backward_mib"] = (current - base) / 2**20
                del state
                tracemalloc.stop()
    except RecursionError as e:
        return {"label": label, "steps": steps, "failed": f"RecursionError: {e}"}
    finally:
        if runner:
            runner.close()
    return result


def _spawn_w5(label: str, steps: int, repeats: int, trace: bool) -> dict[str, Any]:
    args = ["--w5-child", label, str(steps), "--w5-repeats", str(repeats)] + (["--w5-trace"] if trace else [])
    try:
        return spawn_json(__file__, args)
    except subprocess.CalledProcessError as e:
        last = (e.stderr or "").strip().splitlines()[-1:] or [""]
        return {"label": label, "steps": steps, "failed": f"exit status {e.returncode}: {last[0][:120]}"}


def _per_node(r: dict[str, Any]) -> float:
    """µs per node, median of the child's samples."""
    return statistics.median(r["times"]) * 1e6 / (2 * r["steps"])


def run_w5(steps: int, repeats: int, labels: Sequence[str] = LABELS) -> dict[str, Any]:
    """Every system in its own process; the gradients compared; targets checked."""
    results = {}
    for label in labels:
        t0 = clock()
        print(f"  W5 {label}:", end="", flush=True)  # the line ends when the child is done
        results[label] = _spawn_w5(label, steps, repeats, trace=label in (*AGRAD, HIPS))
        status = results[label].get("failed", f"{_per_node(results[label]):.3f} µs/node"
                                    if "times" in results[label] else "?")
        print(f" {status} ({clock() - t0:.0f} s)")
    ok = {k: r for k, r in results.items() if "failed" not in r}
    check_same_gradients(f"W5 ({2 * steps:,} nodes)", {k: [np.asarray(r["grad"], np.float32)] for k, r in ok.items()},
                         rtol=1e-3, atol=0.0)
    checks: list[tuple[str, bool]] = []
    if TORCH in ok:
        for label in AGRAD:
            if label in ok:
                ratio = _per_node(ok[label]) / _per_node(ok[TORCH])
                checks.append((f"{label}: {ratio:.2f}x torch per node (target <= 0.5x torch)", ratio <= 0.5))
        for label in AGRAD:
            if label in ok:
                a, t = ok[label]["graph_rss_mib"], ok[TORCH]["graph_rss_mib"]
                checks.append((f"{label}: graph memory {a:.1f} MiB RSS against torch's {t:.1f} MiB "
                               "(target: no larger)", a <= t))
    for label in AGRAD:
        if label in ok and "backward_peak_mib" in ok[label]:
            r = ok[label]
            f, b = r["forward_peak_mib"], r["backward_peak_mib"]
            excess = (b - f) * 1024
            tenth = (r["tenth_backward_peak_mib"] - r["tenth_forward_peak_mib"]) * 1024
            checks.append((f"{label}: traced peak during the backward {b:.2f} MiB, during the forward {f:.2f} MiB, "
                           f"{excess:+.1f} KiB (a chain a tenth as long: {tenth:+.1f} KiB) (target: no higher)",
                           b <= f))
    failed = [k for k in (*AGRAD, TORCH) if k in results and k not in ok]
    checks.append((f"no recursion limit hit by agrad or torch at {2 * steps:,} nodes"
                   + (f" (failed: {', '.join(failed)})" if failed else ""), not failed))
    if AWAIT in ok and BLOCKING in ok:
        checks.append(_drivers_check(_per_node(ok[AWAIT]), _per_node(ok[BLOCKING])))
    return {"steps": steps, "repeats": repeats, "results": results, "checks": checks}


def _w5_title(steps: int) -> str:
    return f"W5: backward of a {2 * steps:,}-node chain on (1,) float32, one fresh process per system"


def _w5_report(w5: dict[str, Any], markdown: bool = False) -> str:
    results, steps = w5["results"], w5["steps"]
    title = _w5_title(steps)
    head = ["system", "µs/node", "/ torch", "/ numpy", "graph RSS", "traced graph", "fwd peak", "bwd peak",
            "after bwd"]
    rows = []
    ok = {k: r for k, r in results.items() if "failed" not in r}
    for label, r in results.items():
        if "failed" in r:
            rows.append([label, f"failed: {r['failed']}"] + [""] * (len(head) - 2))
            continue
        us = _per_node(r)
        ratio = [f"{us / _per_node(ok[ref]):.2f}x" if ref in ok else "-" for ref in (TORCH, NUMPY)]
        mib = [f"{r[k]:.1f}" if k in r and label != NUMPY else "-"
               for k in ("graph_rss_mib", "traced_graph_mib", "forward_peak_mib", "backward_peak_mib",
                         "after_backward_mib")]
        rows.append([label, f"{us:.3f}", *ratio, *mib])
    checks = [f"{text}: {_met(met)}" for text, met in w5["checks"]]
    unit = (f"µs/node: median of {w5['repeats']} samples; MiB: resident-set growth while the graph is built, "
            "and, on a separate pass, traced (tracemalloc: Python + numpy) graph, peaks during the forward and "
            "the backward, and what is left after the backward with the loss still held")
    if markdown:
        return "\n".join([f"**{title}** ({unit})", "", "| " + " | ".join(head) + " |", "|" + " --- |" * len(head),
                          *("| " + " | ".join(r) + " |" for r in rows), "", *("- " + c for c in checks)])
    widths = [max(len(r[i]) for r in [head, *rows] if not r[1].startswith("failed") or i == 0) + 2
              for i in range(len(head))]
    lines = [f"{title}  [{unit}]"]
    for r in [head, *rows]:
        if r[1].startswith("failed"):
            lines.append("  " + r[0].ljust(widths[0]) + r[1])
        else:
            lines.append("  " + r[0].ljust(widths[0]) + "".join(c.rjust(wd) for c, wd in zip(r[1:], widths[1:])))
    return "\n".join(lines + ["  " + c for c in checks])


def nodes_1m(repeats: int, steps: tuple[int, int] = (W5_STEPS, W5_STEPS_1M)) -> str:
    """The 200k- and the 1M-node chains (``steps`` each), agrad and PyTorch: µs per node at both sizes."""
    labels = (*AGRAD, TORCH)
    runs: dict[int, dict[str, dict[str, Any]]] = {n: {} for n in steps}
    for n in steps:
        for label in labels:
            t0 = clock()
            print(f"  {2 * n:,} nodes, {label}:", end="", flush=True)  # the line ends when the child is done
            runs[n][label] = r = _spawn_w5(label, n, repeats, trace=False)
            print(f" {r.get('failed') or f'{_per_node(r):.3f} µs/node'} ({clock() - t0:.0f} s)")
    for n in steps:
        ok = {k: [np.asarray(r["grad"], np.float32)] for k, r in runs[n].items() if "failed" not in r}
        check_same_gradients(f"W5 ({2 * n:,} nodes)", ok, rtol=1e-3, atol=0.0)
    names = [f"{2 * n / 1e6:g}M" if n * 2 >= 1e6 else f"{2 * n // 1000}k" for n in steps]
    lines = [f"W5 linearity: backward µs/node at {2 * steps[0]:,} and {2 * steps[1]:,} nodes "
             f"[median of {repeats} samples, one fresh process per system and size]",
             f"  {'system':<18}{names[0]:>10}{names[1]:>10}{f'{names[1]} / {names[0]}':>14}"
             f"{f'{names[1]} vs torch':>14}"]
    for label in labels:
        small, large = runs[steps[0]][label], runs[steps[1]][label]
        if "failed" in small or "failed" in large:
            lines.append(f"  {label:<18}failed: {small.get('failed') or large.get('failed')}")
            continue
        growth = _per_node(large) / _per_node(small)
        t = runs[steps[1]][TORCH]
        vs = f"{_per_node(large) / _per_node(t):.2f}x" if "failed" not in t else "-"
        lines.append(f"  {label:<18}{_per_node(small):>10.3f}{_per_node(large):>10.3f}{growth:>13.2f}x{vs:>14}"
                     + (f"  (linear, target <= {LINEAR}x: {_met(growth <= LINEAR)})" if label in AGRAD else ""))
    return "\n".join(lines)


# -- the docs page and chart ------------------------------------------------------------------------------

INTRO = """\
# Performance

`bench/bench_perf.py` (issue 6) runs six workloads in agrad (awaited, and
through the blocking twin), PyTorch (CPU), HIPS autograd and a hand-written
numpy backward (the kernels with no engine: the limit), side by side in one
process; it checks that all produce the same gradients, then prints medians
and ratios, each workload with its targets. Figures are only meaningful with
the machine header printed with them.

The marked regions below are rewritten by the script: the results (and the
chart, `performance.png`) by `python bench/bench_perf.py`, the 1,000,000-node
chain by `python bench/bench_perf.py --nodes-1m`; text outside them is kept.

"""


def _replace_region(text: str, name: str, body: str) -> str:
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    block = f"{begin}\n{body.strip()}\n{end}"
    if begin in text and end in text:
        return re.sub(re.escape(begin) + r".*?" + re.escape(end), lambda _: block, text, flags=re.S)
    return text.rstrip("\n") + "\n\n" + block + "\n"


def write_page(name: str, body: str) -> None:
    """Rewrite the region ``name`` of the docs page (creating the page if missing)."""
    text = open(DOCS_PAGE).read() if os.path.exists(DOCS_PAGE) else INTRO
    with open(DOCS_PAGE, "w") as f:
        f.write(_replace_region(text, name, body))
    print(f"docs: {os.path.relpath(DOCS_PAGE, ROOT)} ({name} region) written")


def plot(path: str, outcomes: Sequence[Outcome], w5: dict[str, Any] | None) -> None:
    """Grouped bars: per workload, every system's time over the numpy limit's (log scale), targets marked."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups: list[tuple[str, dict[str, float], float]] = []  # (name, label -> ratio to numpy, target in numpy units)
    for out in outcomes:
        t = out.workload.target
        target = t.ratio * out.median(t.ref) / out.median(NUMPY)
        groups.append((out.workload.key, {m.system.label: m.median / out.median(NUMPY) for m in out.results}, target))
    if w5 is not None:
        ok = {k: _per_node(r) for k, r in w5["results"].items() if "failed" not in r}
        if NUMPY in ok:
            ratios = {k: v / ok[NUMPY] for k, v in ok.items()}
            groups.append(("W5", ratios, 0.5 * ratios[TORCH] if TORCH in ratios else float("nan")))
    groups.sort(key=lambda g: g[0])
    shown = [label for label in LABELS if label != NUMPY]
    colors = {AWAIT: "#2b8cbe", BLOCKING: "#7bccc4", TORCH: "#e6550d", HIPS: "#969696"}
    width = 0.8 / len(shown)
    fig, ax = plt.subplots(figsize=(10, 4.8))
    for k, label in enumerate(shown):
        xs = [i + (k - (len(shown) - 1) / 2) * width for i in range(len(groups))]
        ax.bar(xs, [g[1].get(label, float("nan")) for g in groups], width, label=label, color=colors[label])
    for i, (_, _, target) in enumerate(groups):
        ax.hlines(target, i - 0.45, i + 0.45, colors="crimson", linestyles="--", lw=1.2,
                  label="agrad target" if i == 0 else "_nolegend_")
    ax.axhline(1.0, color="black", lw=0.8, label="numpy limit")
    ax.set_yscale("log")
    ax.set_ylim(top=ax.get_ylim()[1] * 4)  # room for the legend
    ax.set_xticks(range(len(groups)), [g[0] for g in groups])
    ax.set_ylabel("time / numpy limit (log)")
    ax.set_title("agrad, PyTorch and HIPS autograd against the hand-written numpy backward")
    ax.legend(fontsize=8, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"docs: {os.path.relpath(path, ROOT)} written")


def _page_body(header: str, command: str, settings: str, outcomes: Sequence[Outcome],
               w5: dict[str, Any] | None) -> str:
    parts = ["```text", header, "```", "", f"Command: `{command}`; {settings}.", "",
             "![time of each system over the numpy limit, per workload](performance.png)", ""]
    for out in outcomes:
        parts += [_report(out, markdown=True), ""]
    if w5 is not None:
        parts += [_w5_report(w5, markdown=True), ""]
    return "\n".join(parts)


# -- main -------------------------------------------------------------------------------------------------

KEYS = ("W1", "W2", "W3", "W4", "W5", "W6")
# --quick: (chain steps of W1 and W2, of W5; W6's size), a smoke run of the same code
QUICK_CHAIN, QUICK_W5, QUICK_W6 = 500, 2_000, 512


def main(argv: Sequence[str] | None = None) -> int:
    """Check gradients, time every workload, print the tables, write the docs."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"{2 * QUICK_CHAIN:,}-node W1 and W2, {2 * QUICK_W5:,}-node W5, {QUICK_W6}x{QUICK_W6} W6, "
                        "few samples, short pauses: a smoke run of about half a minute (no docs unless --docs)")
    parser.add_argument("--only", help="comma-separated workloads to run, e.g. W1,W3 (default: all)")
    parser.add_argument("--repeats", type=int, help="samples per block (default 6, or 1 with --quick; W6 may "
                        "take fewer to stay within its time budget)")
    parser.add_argument("--rounds", type=int, help="rounds of blocks A B C D E E D C B A (default 2, or 1 with "
                        "--quick)")
    parser.add_argument("--warmup", type=int, help="untimed samples per block (default 2, or 1 with --quick)")
    parser.add_argument("--pause", type=float, help="seconds between blocks (default 0.5, or 0.05 with --quick)")
    parser.add_argument("--w5-samples", type=int, help="W5 samples per process (default 3, or 2 with --quick)")
    parser.add_argument("--nodes-1m", action="store_true", help="instead of the suite: the 1,000,000-node chain "
                        "next to the 200,000-node one (agrad, PyTorch), for time linear in nodes "
                        "(--quick: 4,000 and 20,000 nodes)")
    docs = parser.add_mutually_exclusive_group()
    docs.add_argument("--docs", action="store_true", help="write the docs page and chart even with --quick")
    docs.add_argument("--no-docs", action="store_true", help="do not write the docs page and chart")
    parser.add_argument("--w5-child", nargs=2, metavar=("SYSTEM", "STEPS"), help=argparse.SUPPRESS)
    parser.add_argument("--w5-repeats", type=int, default=3, help=argparse.SUPPRESS)
    parser.add_argument("--w5-trace", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.w5_child:
        label, steps = args.w5_child
        print(json.dumps(w5_child(label, int(steps), args.w5_repeats, args.w5_trace)))
        return 0

    keys = [k.strip().upper() for k in args.only.split(",")] if args.only else list(KEYS)
    if unknown := set(keys) - set(KEYS):
        parser.error(f"unknown workloads {sorted(unknown)}: choose from {', '.join(KEYS)}")
    repeats = args.repeats or (1 if args.quick else 6)
    rounds = args.rounds or (1 if args.quick else 2)
    warmup = args.warmup if args.warmup is not None else (1 if args.quick else 2)
    pause = args.pause if args.pause is not None else (0.05 if args.quick else 0.5)
    w5_samples = args.w5_samples or (2 if args.quick else 3)
    write_docs = args.docs or not (args.quick or args.no_docs)
    require(__file__, "torch", "autograd", *(["matplotlib"] if write_docs and not args.nodes_1m else []))
    importlib.import_module("torch")  # before the header, which then gives its threads
    header = machine_info()
    print(header)
    command = "python bench/bench_perf.py" + "".join(f" {a}" for a in argv)
    started = clock()

    if args.nodes_1m:
        print(f"settings   {w5_samples} samples per process\n")
        report = nodes_1m(w5_samples, (2_000, 10_000) if args.quick else (W5_STEPS, W5_STEPS_1M))
        print(report)
        if write_docs:
            write_page("nodes-1m", "\n".join(["```text", header, "", report, "```", "", f"Command: `{command}`."]))
        print(f"\ntotal time {clock() - started:.1f} s")
        return 0

    chain_steps = QUICK_CHAIN if args.quick else CHAIN
    workloads = {"W1": chain("W1", (1,), chain_steps), "W2": chain("W2", (10000,), chain_steps), "W3": W3, "W4": W4,
                 "W6": matmuls(QUICK_W6 if args.quick else W6_SIZE)}
    w5_steps = QUICK_W5 if args.quick else W5_STEPS
    settings = (f"{repeats} samples per block after {warmup} warm-up, {pause} s pause between blocks, order "
                f"A B C D E E D C B A{f' x {rounds}' if rounds > 1 else ''}; W5: {w5_samples} samples in one "
                "fresh process per system")
    print(f"settings   {settings}\n")
    outcomes: list[Outcome] = []
    w5: dict[str, Any] | None = None
    for i, key in enumerate(keys, 1):
        t0 = clock()
        progress(i, len(keys), _w5_title(w5_steps) if key == "W5" else workloads[key].title)
        if key == "W5":
            w5 = run_w5(w5_steps, w5_samples)
            print(_w5_report(w5))
        else:
            outcomes.append(run_workload(workloads[key], warmup, repeats, pause, rounds))
            print(_report(outcomes[-1]))
            workloads[key]._cache.clear()  # the inputs (W6: 48 MiB) are not needed any more
        print(f"  ({key} took {clock() - t0:.0f} s)\n")
    checks = [c for out in outcomes for c in out.all_checks()]
    checks += [(f"W5 {text}", met) for text, met in (w5["checks"] if w5 else [])]
    missed = [text for text, met in checks if not met]
    print(f"targets: {len(checks) - len(missed)} of {len(checks)} met" + "".join(f"\n  missed: {m}" for m in missed))
    print(f"total time {clock() - started:.1f} s")

    if write_docs:
        plot(DOCS_CHART, outcomes, w5)
        write_page("results", _page_body(header, command, settings, outcomes, w5))
    return 0


if __name__ == "__main__":
    sys.exit(main())
