"""Seeded random graphs for the reliability trials, and their reference gradients.

:func:`build` makes the same graph (leaves, their initial ``.grad``, the
calls a trial makes, the engine options it runs them under) every time it is
given the same seed, so a trial's reference gradients come from running each
call with ``backward_sync`` on a fresh copy of its graph (:func:`reference`).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import numpy as np

import agrad
from agrad.autograd.graph import engine_options
from agrad.utils.checkpoint import checkpoint

__all__ = ["KINDS", "Call", "Graph", "build", "reference", "run_async", "run_sync", "options"]

# Graph shapes; "nested" is a custom Function whose backward starts a nested backward.
KINDS = ("chain", "fanin", "matmul", "retain", "concurrent", "checkpoint", "checkpoint_nested", "nested", "grad")

Mode = Literal["backward", "grad"]


@dataclass
class Call:
    """One backward or grad call of a trial."""

    root: agrad.Tensor
    mode: Mode = "backward"
    inputs: list[agrad.Tensor] = field(default_factory=list)  # grad() only
    retain_graph: bool = False


@dataclass
class Graph:
    kind: str
    seed: int
    leaves: list[agrad.Tensor]
    calls: list[Call]
    opts: dict[str, Any]
    pre: list[Call] = field(default_factory=list)  # run (blocking) before the trial

    def describe(self) -> str:
        sizes = "x".join(str(leaf.numel()) for leaf in self.leaves[:3])
        return f"{self.kind}(seed={self.seed}, leaves={len(self.leaves)}:{sizes}, calls={len(self.calls)}, {self.opts})"


@contextmanager
def options(graph: Graph) -> Iterator[None]:
    with engine_options(**graph.opts):
        yield


def _leaf(rng: np.random.Generator, shape: tuple[int, ...], rs: random.Random) -> agrad.Tensor:
    t = agrad.tensor(rng.uniform(-1, 1, shape), dtype=agrad.float64, requires_grad=True)
    if rs.random() < 0.5:  # half the leaves start with a gradient the trial must keep or add to
        t.grad = agrad.tensor(rng.uniform(-1, 1, shape), dtype=agrad.float64)
    return t


def _size(rs: random.Random) -> int:
    return rs.choice((1, 1, 3, 17, 256, 4096, 65536, 300_000))


def _chain(h: agrad.Tensor, w: agrad.Tensor, length: int, rs: random.Random) -> agrad.Tensor:
    for _ in range(length):
        op = rs.randrange(4)
        h = h * w if op == 0 else h.sin() if op == 1 else h.tanh() if op == 2 else h * 0.75 + 0.125
    return h


class Nest(agrad.autograd.Function):
    """The identity; level ``depth > 0``'s backward runs a nested backward of
    ``(Nest(x', depth - 1) * w).sum()`` (blocking or awaited) and passes
    ``g * x'.grad`` on, so ``w`` gains one per level."""

    @staticmethod
    def forward(ctx: Any, x: agrad.Tensor, depth: int, w: agrad.Tensor, blocking: bool) -> agrad.Tensor:
        ctx.depth, ctx.w, ctx.blocking = depth, w, blocking
        return x.clone()

    @staticmethod
    async def backward(ctx: Any, g: agrad.Tensor) -> Any:
        if ctx.depth == 0:
            return g, None, None, None
        with agrad.enable_grad():
            inner = agrad.ones((), dtype=agrad.float64, requires_grad=True)
            loss = (Nest.apply(inner, ctx.depth - 1, ctx.w, not ctx.blocking) * ctx.w).sum()
        if ctx.blocking:
            agrad.autograd.backward_sync(loss)
        else:
            await anyio.lowlevel.checkpoint()
            await agrad.autograd.backward(loss)
        return g * inner.grad, None, None, None


def build(seed: int, kinds: tuple[str, ...] = KINDS) -> Graph:
    """The graph of trial ``seed`` (always the same for the same seed)."""
    rs = random.Random(seed)
    rng = np.random.default_rng(seed)
    kind = kinds[seed % len(kinds)]  # in turn: any run of len(kinds) seeds builds each (Note [Soak sizes])
    opts: dict[str, Any] = {"time_slice": rs.choice((1e-5, 1e-4, 2e-3)),
                            "offload": rs.choice(("auto", "always", "never"))}
    if rs.random() < 0.5:
        opts["offload_threshold"] = rs.choice((0, 1000, 100_000))
    n = _size(rs)
    x, w = _leaf(rng, (n,), rs), _leaf(rng, (), rs)
    leaves = [x, w]
    pre: list[Call] = []
    if kind in ("chain", "retain", "grad"):
        root = _chain(x, w, rs.randrange(1, 60), rs).sum()
        if kind == "grad":
            calls = [Call(root, "grad", inputs=[x, w])]
        elif kind == "retain":
            pre = [Call(root, retain_graph=True)]
            calls = [Call(root, retain_graph=True)]
        else:
            calls = [Call(root)]
    elif kind == "fanin":
        ws = [_leaf(rng, (), rs) for _ in range(rs.randrange(2, 40))]
        leaves += ws
        root = sum(((x * wi).sin().sum() for wi in ws), start=(x * w).sum())
        calls = [Call(root)]
    elif kind == "matmul":
        m, k, p = (rs.choice((1, 8, 64, 300)) for _ in range(3))
        a, b = _leaf(rng, (m, k), rs), _leaf(rng, (k, p), rs)
        leaves = [a, b]
        calls = [Call(((a @ b).tanh() @ b.transpose(0, 1)).sum())]
    elif kind == "concurrent":
        calls = [Call(_chain(x, w, rs.randrange(1, 20), rs).sum()) for _ in range(rs.randrange(2, 5))]
    elif kind in ("checkpoint", "checkpoint_nested"):
        reentrant = rs.random() < 0.5
        length = rs.randrange(1, 20)
        levels = rs.randrange(2, 12) if kind == "checkpoint_nested" else 1
        if kind == "checkpoint_nested":
            opts["max_recursion_depth"] = rs.randrange(1, 4)

        def fn(a: agrad.Tensor, b: agrad.Tensor, level: int = levels) -> agrad.Tensor:
            if level > 1:
                a = checkpoint(fn, a, b, level - 1, use_reentrant=reentrant)
            return _chain(a, b, length, random.Random(seed + level))

        calls = [Call(checkpoint(fn, x, w, levels, use_reentrant=reentrant).sum())]
    elif kind == "nested":
        opts["max_recursion_depth"] = rs.randrange(1, 6)
        calls = [Call((Nest.apply(x, rs.randrange(1, 40), w, rs.random() < 0.5) * 3.0).sum())]
    else:
        raise ValueError(kind)
    return Graph(kind, seed, leaves, calls, opts, pre)


def run_sync(call: Call) -> Any:
    if call.mode == "grad":
        return agrad.autograd.grad_sync(call.root, call.inputs, retain_graph=call.retain_graph, allow_unused=True)
    call.root.backward_sync(retain_graph=call.retain_graph)
    return None


async def run_async(call: Call) -> Any:
    if call.mode == "grad":
        return await agrad.autograd.grad(call.root, call.inputs, retain_graph=call.retain_graph, allow_unused=True)
    await call.root.backward(retain_graph=call.retain_graph)
    return None


Contribution = list[np.ndarray | None]


def reference(seed: int, kinds: tuple[str, ...] = KINDS) -> list[Contribution]:
    """Per call of trial ``seed``: what it adds to each leaf's ``.grad`` (for
    ``grad()``: what it returns per input), computed with the blocking twin on
    a fresh copy of the graph."""
    out: list[Contribution] = []
    for i in range(len(build(seed, kinds).calls)):
        g = build(seed, kinds)
        with options(g):
            for c in g.pre:
                run_sync(c)
            for leaf in g.leaves:
                leaf.grad = None
            result = run_sync(g.calls[i])
        if g.calls[i].mode == "grad":
            out.append([None if r is None else r.numpy().copy() for r in result])
        else:
            out.append([None if leaf.grad is None else leaf.grad.numpy().copy() for leaf in g.leaves])
    return out

