"""A catalogue of misuses, each run under torch and under agrad and compared.

Each case is a small function of a :class:`Lib` (torch's or agrad's) that
builds fresh tensors and commits one misuse.  :func:`run_case` runs it under
both libraries and checks (a) the same exception type (agrad's may be a
subclass of torch's), (b) agrad's message contains the case's key phrase of
torch's message (lower case, whitespace collapsed; by default torch's message
up to its first number or shape), (c) every leaf the case made has the same
``.grad`` as before the failing statement (same object, same value), and
(d) a small backward still works afterwards.  Without torch only (c) and (d)
are checked.

:data:`KNOWN_MISMATCHES` names the cases where agrad differs today, with the
reason; the suite fails on an unlisted mismatch and on a listed case that now
matches, so the list stays true.
"""

from __future__ import annotations

import re
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import agrad
import agrad.utils.checkpoint
from tests.helpers import torch
from tests.reliability import _invariants
from tests.reliability._invariants import Tally


class Lib:
    """One library (torch or agrad) as the cases use it; records every leaf a case makes and the
    ``.grad`` state after each step that may legitimately change it."""

    def __init__(self, m: Any) -> None:
        self.m = m
        self.is_torch = m is torch
        self.F = m.nn.functional
        self.checkpoint = m.utils.checkpoint.checkpoint
        self.leaves: list[Any] = []
        self.before: list[tuple[Any, np.ndarray | None]] = []

    # -- tensors ---------------------------------------------------------------------------------

    def t(self, data: Any, dtype: Any = None, rg: bool = False) -> Any:
        t = self.m.tensor(data, dtype=dtype, requires_grad=rg)
        if rg:
            self.leaves.append(t)
            self.snap()
        return t

    def leaf(self, data: Any = (1.0, 2.0, 3.0), grad: Any = None, dtype: Any = None) -> Any:
        """A float leaf requiring grad, optionally with an initial ``.grad``."""
        t = self.m.tensor(data, dtype=dtype or self.m.float32, requires_grad=True)
        if grad is not None:
            t.grad = self.m.tensor(grad, dtype=t.dtype)
        self.leaves.append(t)
        self.snap()
        return t

    def snap(self) -> None:
        self.before = [(t.grad, None if t.grad is None else t.grad.detach().numpy().copy()) for t in self.leaves]

    # -- the calls that differ between the libraries ----------------------------------------------

    def bw(self, t: Any, **kw: Any) -> None:
        t.backward(**kw) if self.is_torch else t.backward_sync(**kw)
        self.snap()

    def backward(self, *args: Any, **kw: Any) -> None:
        (self.m.autograd.backward if self.is_torch else self.m.autograd.backward_sync)(*args, **kw)
        self.snap()

    def grad(self, *args: Any, **kw: Any) -> Any:
        out = (self.m.autograd.grad if self.is_torch else self.m.autograd.grad_sync)(*args, **kw)
        self.snap()
        return out

    def grad_problems(self) -> list[str]:
        problems = []
        for i, (t, (old, value)) in enumerate(zip(self.leaves, self.before)):
            if t.grad is not old:
                problems.append(f"leaf {i}: .grad replaced")
            elif old is not None and not np.array_equal(t.grad.detach().numpy(), value, equal_nan=True):
                problems.append(f"leaf {i}: .grad changed in place")
        return problems


Misuse = Callable[[Lib], Any]


@dataclass(frozen=True)
class Case:
    name: str
    fn: Misuse
    key: str | None = None  # the phrase of torch's message agrad's must contain


CASES: dict[str, Case] = {}


def case(name: str, fn: Misuse | None = None, *, key: str | None = None) -> Any:
    """Register a case: ``case(name, lambda L: ...)``, or as a decorator ``@case(name)``."""
    def register(f: Misuse) -> Misuse:
        if name in CASES:
            raise ValueError(f"duplicate case {name!r}")
        CASES[name] = Case(name, f, key)
        return f

    return register(fn) if fn is not None else register


# == backward and grad() ==========================================================================


@case("backward twice without retain_graph")
def _(L: Lib) -> None:
    x = L.leaf()
    y = (x * x).sum()
    L.bw(y)
    L.bw(y)


@case("grad twice without retain_graph")
def _(L: Lib) -> None:
    x = L.leaf()
    y = (x.exp()).sum()
    L.grad(y, x)
    L.grad(y, x)


@case("backward twice through a shared subgraph")
def _(L: Lib) -> None:
    x = L.leaf()
    h = x.sin()
    L.bw(h.sum())
    L.bw((h * 2).sum())


case("non-scalar backward without gradient", lambda L: L.bw(L.leaf() * 2))
case("non-scalar grad without grad_outputs", lambda L: L.grad(L.leaf() * 2, []))
case("backward of a tensor not requiring grad", lambda L: L.bw(L.t([1.0, 2.0]).sum()))
case("backward of a leaf-free constant", lambda L: L.bw(L.t(3.0)))
case("grad of a tensor not requiring grad", lambda L: L.grad(L.t([1.0]).sum(), [L.leaf()]))


@case("grad with unused input and allow_unused=False")
def _(L: Lib) -> None:
    x, w = L.leaf(), L.leaf()
    L.grad((x * 2).sum(), [x, w])


@case("grad of an input that does not require grad")
def _(L: Lib) -> None:
    x = L.leaf()
    L.grad((x * 2).sum(), [L.t([1.0, 2.0, 3.0])])


@case("backward gradient of the wrong shape")
def _(L: Lib) -> None:
    x = L.leaf()
    L.bw(x * 2, gradient=L.t([1.0, 1.0]))


@case("backward gradient of the wrong shape, scalar root")
def _(L: Lib) -> None:
    x = L.leaf()
    L.bw((x * 2).sum(), gradient=L.t([1.0, 1.0]))


@case("grad_outputs of the wrong shape")
def _(L: Lib) -> None:
    x = L.leaf()
    L.grad(x * 2, [x], grad_outputs=[L.t([[1.0, 1.0, 1.0]] * 2)])


@case("grad_outputs count differs from outputs")
def _(L: Lib) -> None:
    x = L.leaf()
    L.grad([x * 2, x * 3], [x], grad_outputs=[L.t([1.0, 1.0, 1.0])])


@case("autograd.backward grad_tensors count differs")
def _(L: Lib) -> None:
    x = L.leaf()
    L.backward([x * 2, x * 3], grad_tensors=[L.t([1.0, 1.0, 1.0])])


case("autograd.backward of None", lambda L: L.backward(None))
case("autograd.grad with no inputs", lambda L: L.grad((L.leaf() * 2).sum(), []))


@case("backward inputs= a tensor that does not require grad")
def _(L: Lib) -> None:
    x = L.leaf()
    L.bw((x * 2).sum(), inputs=[L.t([1.0, 2.0, 3.0])])


@case("backward inputs= empty list")
def _(L: Lib) -> None:
    x = L.leaf()
    L.bw((x * 2).sum(), inputs=[])


@case("grad of a detached copy of the input")
def _(L: Lib) -> None:
    x = L.leaf()
    L.grad((x * 2).sum(), [x.detach()])


@case("grad with create_graph through freed graph")
def _(L: Lib) -> None:
    x = L.leaf()
    y = (x ** 3).sum()
    (g,) = L.grad(y, x)
    L.grad(g.sum(), x)


@case("double backward through freed first-order graph")
def _(L: Lib) -> None:
    x = L.leaf()
    y = (x ** 3).sum()
    (g,) = L.grad(y, x, create_graph=True)
    L.bw(g.sum())
    L.bw(g.sum())


@case("backward through a saved tensor modified in place")
def _(L: Lib) -> None:
    x = L.leaf()
    h = x * 1.0
    y = (h * h).sum()
    h.add_(1.0)
    L.bw(y)


@case("backward through exp's saved output modified in place")
def _(L: Lib) -> None:
    x = L.leaf()
    h = x.exp()
    y = h.sum()
    h.mul_(2.0)
    L.bw(y + (h * 1.0).sum())


@case("backward through sigmoid's output modified in place")
def _(L: Lib) -> None:
    x = L.leaf()
    s = x.sigmoid()
    s.mul_(2.0)
    L.bw(s.sum())


@case("backward through tanh's output modified in place")
def _(L: Lib) -> None:
    x = L.leaf()
    s = x.tanh()
    y = s.sum()
    s.zero_()
    L.bw(y)


@case("backward through a saved leaf modified under no_grad")
def _(L: Lib) -> None:
    x = L.leaf()
    y = (x * x).sum()
    with L.m.no_grad():
        x.mul_(2.0)
    L.bw(y)


@case("backward through a saved input detached in place")
def _(L: Lib) -> None:
    x = L.leaf()
    h = x * 1.0
    y = (h * h).sum()
    h.detach_()
    h.zero_()
    L.bw(y)


@case("backward through matmul operand modified in place")
def _(L: Lib) -> None:
    a = L.leaf([[1.0, 2.0], [3.0, 4.0]])
    b = a * 1.0
    y = (b @ b).sum()
    b.add_(1.0)
    L.bw(y)


@case("grad through a saved tensor modified in place")
def _(L: Lib) -> None:
    x = L.leaf()
    h = x * 2
    y = (h.pow(2)).sum()
    h.sub_(1)
    L.grad(y, x)


@case("retain_graph then in-place then backward")
def _(L: Lib) -> None:
    x = L.leaf()
    h = x * 1.0
    y = (h * h).sum()
    L.bw(y, retain_graph=True)
    h.mul_(3.0)
    L.bw(y)


# == in-place misuse ==============================================================================


case("in-place add on a leaf requiring grad", lambda L: L.leaf().add_(1.0))
case("in-place mul on a leaf requiring grad", lambda L: L.leaf().mul_(2.0))
case("in-place zero_ on a leaf requiring grad", lambda L: L.leaf().zero_())
case("in-place fill_ on a leaf requiring grad", lambda L: L.leaf().fill_(1.0))
case("in-place exp_ on a leaf requiring grad", lambda L: L.leaf().exp_())
case("in-place copy_ into a leaf requiring grad", lambda L: L.leaf().copy_(L.t([0.0, 0.0, 0.0])))
case("setitem on a leaf requiring grad", lambda L: L.leaf().__setitem__(0, 5.0))
case("in-place on a view of a leaf requiring grad", lambda L: L.leaf()[1:].mul_(2.0))
case("in-place on a transpose view of a leaf", lambda L: L.leaf([[1.0, 2.0], [3.0, 4.0]]).transpose(0, 1).add_(1))


@case("in-place on an output of split")
def _(L: Lib) -> None:
    a, _ = (L.leaf([1.0, 2.0, 3.0, 4.0]) * 1.0).split(2)
    a.mul_(2.0)


@case("in-place on an output of chunk")
def _(L: Lib) -> None:
    a, _ = (L.leaf([1.0, 2.0, 3.0, 4.0]) * 1.0).chunk(2)
    a.add_(1.0)


@case("in-place on an output of unbind")
def _(L: Lib) -> None:
    a, _ = (L.leaf([[1.0, 2.0], [3.0, 4.0]]) * 1.0).unbind(0)
    a.add_(1.0)


@case("in-place on a view of a custom Function's multiple outputs")
def _(L: Lib) -> None:
    class Two(L.m.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x.view_as(x), x.view_as(x)

        @staticmethod
        def backward(ctx: Any, a: Any, b: Any) -> Any:
            return a + b

    x = L.leaf() * 1.0
    a, _ = Two.apply(x)
    a.mul_(2)


case("in-place float op on an int tensor", lambda L: L.t([1, 2, 3]).mul_(1.5))
case("in-place division of an int tensor", lambda L: L.t([1, 2, 3]).div_(2))
case("in-place broadcast into a smaller tensor", lambda L: L.t([1.0, 2.0]).add_(L.t([[1.0, 2.0], [3.0, 4.0]])))
case("in-place result dtype bool from float", lambda L: L.t([True, False]).add_(L.t([1.5, 2.5])))


@case("in-place on a tensor under inference_mode used outside")
def _(L: Lib) -> None:
    with L.m.inference_mode():
        t = L.m.ones(3)
    t.add_(1)


@case("inference tensor saved for backward")
def _(L: Lib) -> None:
    with L.m.inference_mode():
        t = L.m.ones(3)
    x = L.leaf()
    (x * t).sum()


@case("requires_grad_ on an inference tensor")
def _(L: Lib) -> None:
    with L.m.inference_mode():
        t = L.m.ones(3)
    t.requires_grad_()


@case("detach_ on a view")
def _(L: Lib) -> None:
    x = L.leaf() * 1.0
    x[1:].detach_()


@case("in-place on a leaf view under grad mode after no_grad view")
def _(L: Lib) -> None:
    x = L.leaf()
    with L.m.no_grad():
        v = x[:2]
    v.mul_(2)


# == .grad, .data, requires_grad ==================================================================


@case("assign .grad = the tensor itself")
def _(L: Lib) -> None:
    x = L.leaf()
    x.grad = x


case("assign .grad of the wrong shape", lambda L: setattr(L.leaf(), "grad", L.t([1.0, 2.0])))
case("assign .grad of an int dtype", lambda L: setattr(L.leaf(), "grad", L.t([1, 2, 3])))
case("assign .grad of a different float dtype", lambda L: setattr(L.leaf(), "grad", L.t([1.0, 2.0, 3.0],
                                                                                        dtype=L.m.float64)))
case("assign .grad a non-tensor", lambda L: setattr(L.leaf(), "grad", [1.0, 2.0, 3.0]))
case("assign .grad of the wrong shape over an existing grad",
     lambda L: setattr(L.leaf(grad=[1.0, 1.0, 1.0]), "grad", L.t([[1.0]])))
case("assign .data an int tensor on a float leaf", lambda L: setattr(L.leaf(), "data", L.t([1, 2, 3])))
case("assign .data a non-tensor", lambda L: setattr(L.leaf(), "data", [1.0, 2.0]))
case("requires_grad on an int tensor", lambda L: L.t([1, 2, 3], rg=True), key="only tensors of floating point")
case("requires_grad_ on an int tensor", lambda L: L.t([1, 2, 3]).requires_grad_())
case("requires_grad_ on a bool tensor", lambda L: L.t([True]).requires_grad_())
case("requires_grad on a bool factory", lambda L: L.m.ones(2, dtype=L.m.bool, requires_grad=True))
case("requires_grad on an int factory", lambda L: L.m.zeros(2, dtype=L.m.int64, requires_grad=True))
case("requires_grad on an int arange", lambda L: L.m.arange(3, requires_grad=True))
case("requires_grad_(False) on a non-leaf", lambda L: (L.leaf() * 2).requires_grad_(False))
case("set requires_grad False on a non-leaf", lambda L: setattr(L.leaf() * 2, "requires_grad", False))
case("retain_grad on a tensor not requiring grad", lambda L: L.t([1.0]).retain_grad())
case("numpy() of a tensor requiring grad", lambda L: L.leaf().numpy())
case("item() of a multi-element tensor", lambda L: L.leaf().item())
case("float() of a multi-element tensor", lambda L: float(L.t([1.0, 2.0])))
case("bool() of a multi-element tensor", lambda L: bool(L.t([1.0, 2.0])))
case("int() of a multi-element tensor", lambda L: int(L.t([1, 2])))


# == hooks ========================================================================================


@case("hook returning the wrong shape")
def _(L: Lib) -> None:
    x = L.leaf()
    h = x * 2
    h.register_hook(lambda g: g[:2])
    L.bw(h.sum())


@case("hook returning a different dtype")
def _(L: Lib) -> None:
    x = L.leaf()
    h = x * 2
    h.register_hook(lambda g: g.to(L.m.int64))
    L.bw(h.sum())


@case("hook returning a non-tensor")
def _(L: Lib) -> None:
    x = L.leaf()
    h = x * 2
    h.register_hook(lambda g: [1.0, 2.0, 3.0])
    L.bw(h.sum())


@case("leaf hook returning the wrong shape")
def _(L: Lib) -> None:
    x = L.leaf()
    x.register_hook(lambda g: g.sum())
    L.bw((x * 2).sum())


@case("hook raising an error")
def _(L: Lib) -> None:
    x = L.leaf(grad=[1.0, 1.0, 1.0])
    h = x * 2

    def hook(g: Any) -> Any:
        raise ValueError("hook failed on purpose")

    h.register_hook(hook)
    L.bw(h.sum())


case("register_hook on a tensor not requiring grad",
     lambda L: L.t([1.0]).register_hook(lambda g: g))
case("register_post_accumulate_grad_hook on a non-leaf",
     lambda L: (L.leaf() * 2).register_post_accumulate_grad_hook(lambda t: None))
case("register_post_accumulate_grad_hook on a tensor not requiring grad",
     lambda L: L.t([1.0]).register_post_accumulate_grad_hook(lambda t: None))


@case("grad_fn hook returning the wrong count")
def _(L: Lib) -> None:
    x = L.leaf()
    y = x * 2
    y.grad_fn.register_hook(lambda gi, go: (gi[0], gi[0]))
    L.bw(y.sum())


@case("grad_fn prehook returning the wrong count")
def _(L: Lib) -> None:
    x = L.leaf()
    y = x * 2
    y.grad_fn.register_prehook(lambda go: (go[0], go[0]))
    L.bw(y.sum())


@case("calling grad_fn with the wrong number of gradients")
def _(L: Lib) -> None:
    x = L.leaf()
    y = x * 2
    y.grad_fn(L.t([1.0, 1.0, 1.0]), L.t([1.0, 1.0, 1.0]))


# == custom Function ==============================================================================


def _function(L: Lib, backward: Callable[..., Any], forward: Callable[..., Any] | None = None) -> Any:
    class F(L.m.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return forward(ctx, x) if forward else x * 2

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return backward(ctx, g)

    return F


@case("Function backward returning too many gradients")
def _(L: Lib) -> None:
    F = _function(L, lambda ctx, g: (g, g))
    L.bw(F.apply(L.leaf()).sum())


@case("Function backward returning a gradient of the wrong shape")
def _(L: Lib) -> None:
    F = _function(L, lambda ctx, g: g[:1])
    L.bw(F.apply(L.leaf()).sum())


@case("Function backward returning a non-tensor")
def _(L: Lib) -> None:
    F = _function(L, lambda ctx, g: "gradient")
    L.bw(F.apply(L.leaf()).sum())


@case("Function save_for_backward of a non-tensor")
def _(L: Lib) -> None:
    def fwd(ctx: Any, x: Any) -> Any:
        ctx.save_for_backward(x, "not a tensor")
        return x * 2

    F = _function(L, lambda ctx, g: g, forward=fwd)
    F.apply(L.leaf())


@case("Function mark_dirty of a tensor not modified in place (returned)")
def _(L: Lib) -> None:
    def fwd(ctx: Any, x: Any) -> Any:
        ctx.mark_dirty(x)
        return x * 2

    F = _function(L, lambda ctx, g: g, forward=fwd)
    F.apply(L.leaf() * 1.0)


@case("Function mark_dirty on a leaf requiring grad")
def _(L: Lib) -> None:
    def fwd(ctx: Any, x: Any) -> Any:
        x.add_(1)
        ctx.mark_dirty(x)
        return x

    F = _function(L, lambda ctx, g: g, forward=fwd)
    F.apply(L.leaf())


@case("Function saved tensors read after backward freed them")
def _(L: Lib) -> None:
    def fwd(ctx: Any, x: Any) -> Any:
        ctx.save_for_backward(x)
        return x * 2

    F = _function(L, lambda ctx, g: g * ctx.saved_tensors[0], forward=fwd)
    y = F.apply(L.leaf())
    L.bw(y.sum())
    y.grad_fn.saved_tensors  # noqa: B018


@case("Function saved input modified in place before backward")
def _(L: Lib) -> None:
    def fwd(ctx: Any, x: Any) -> Any:
        ctx.save_for_backward(x)
        return x * 2

    F = _function(L, lambda ctx, g: g * ctx.saved_tensors[0], forward=fwd)
    h = L.leaf() * 1.0
    y = F.apply(h)
    h.add_(1)
    L.bw(y.sum())


@case("Function called directly instead of apply")
def _(L: Lib) -> None:
    F = _function(L, lambda ctx, g: g)
    F()(L.leaf())


@case("Function backward raising")
def _(L: Lib) -> None:
    def bwd(ctx: Any, g: Any) -> Any:
        raise RuntimeError("custom backward failed on purpose")

    F = _function(L, bwd)
    L.bw(F.apply(L.leaf(grad=[1.0, 2.0, 3.0])).sum())


@case("Function without backward")
def _(L: Lib) -> None:
    class F(L.m.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x * 2

    L.bw(F.apply(L.leaf()).sum())


@case("Function without forward")
def _(L: Lib) -> None:
    class F(L.m.autograd.Function):
        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            return g

    F.apply(L.leaf())


# == checkpoint ===================================================================================


@case("checkpoint without use_reentrant passes unexpected kwargs")
def _(L: Lib) -> None:
    L.checkpoint(lambda a: a * 2, L.leaf(), use_reentrant=False, bogus=1)


@case("reentrant checkpoint with grad()", key="is incompatible with .grad()")
def _(L: Lib) -> None:
    x = L.leaf()
    y = L.checkpoint(lambda a: a.sin(), x, use_reentrant=True).sum()
    L.grad(y, x)


@case("reentrant checkpoint backward twice")
def _(L: Lib) -> None:
    x = L.leaf()
    y = L.checkpoint(lambda a: a.sin() * 2, x, use_reentrant=True).sum()
    L.bw(y)
    L.bw(y)


@case("non-reentrant checkpoint backward twice")
def _(L: Lib) -> None:
    x = L.leaf()
    y = L.checkpoint(lambda a: a.sin() * 2, x, use_reentrant=False).sum()
    L.bw(y)
    L.bw(y)


@case("checkpointed function raising in recompute")
def _(L: Lib) -> None:
    calls = []

    def fn(a: Any) -> Any:
        calls.append(1)
        if len(calls) > 1:
            raise ValueError("recompute failed on purpose")
        return a.sin()

    x = L.leaf(grad=[0.5, 0.5, 0.5])
    y = L.checkpoint(fn, x, use_reentrant=False).sum()
    L.bw(y)


@case("non-reentrant checkpoint recompute with a different number of saved tensors",
      key="a different number of tensors was saved during the original forward and recomputation")
def _(L: Lib) -> None:
    calls = []

    def fn(a: Any) -> Any:
        calls.append(1)
        return a.sin().exp().cos() if len(calls) == 1 else a.sin()

    x = L.leaf()
    y = L.checkpoint(fn, x, use_reentrant=False).sum()
    L.bw(y)


# == grad mode ====================================================================================


@case("backward of a result computed under no_grad")
def _(L: Lib) -> None:
    x = L.leaf()
    with L.m.no_grad():
        y = (x * 2).sum()
    L.bw(y)


@case("backward of a result computed under inference_mode")
def _(L: Lib) -> None:
    x = L.leaf()
    with L.m.inference_mode():
        y = (x * 2).sum()
    L.bw(y)


@case("grad of a result computed under no_grad")
def _(L: Lib) -> None:
    x = L.leaf()
    with L.m.no_grad():
        y = (x * 2).sum()
    L.grad(y, x)


case("set_grad_enabled with a non-bool", lambda L: L.m.set_grad_enabled("yes"))
case("set_grad_enabled with no argument", lambda L: L.m.set_grad_enabled())


# == shape errors =================================================================================


case("add broadcast mismatch", lambda L: L.t([1.0, 2.0]) + L.t([1.0, 2.0, 3.0]))
case("mul broadcast mismatch 2d", lambda L: L.m.ones(2, 3) * L.m.ones(3, 2))
case("sub broadcast mismatch with grad", lambda L: L.leaf() - L.m.ones(2))
case("div broadcast mismatch", lambda L: L.m.ones(4) / L.m.ones(3))
case("where broadcast mismatch",
     lambda L: L.m.where(L.t([True, False]), L.m.ones(3), L.m.zeros(3)))
case("maximum broadcast mismatch", lambda L: L.m.maximum(L.m.ones(2), L.m.ones(3)))
case("reshape to a wrong number of elements", lambda L: L.m.ones(6).reshape(4, 2))
case("reshape with two -1", lambda L: L.m.ones(6).reshape(-1, -1))
case("view to a wrong number of elements", lambda L: L.m.ones(6).view(5))
case("view of a non-contiguous tensor", lambda L: L.m.ones(2, 3).transpose(0, 1).view(6))
case("expand to a smaller size", lambda L: L.m.ones(3).expand(2))
case("expand a non-singleton dim", lambda L: L.m.ones(2, 3).expand(4, 3))
case("expand with fewer dims", lambda L: L.m.ones(2, 3).expand(3), key="the number of sizes provided")
case("broadcast_to mismatch", lambda L: L.m.broadcast_to(L.m.ones(3), (2, 2)))
case("matmul inner dims mismatch", lambda L: L.m.ones(2, 3) @ L.m.ones(2, 3))
case("matmul of a 0-d tensor", lambda L: L.t(1.0) @ L.m.ones(2))
case("mm of 1-d tensors", lambda L: L.m.mm(L.m.ones(2), L.m.ones(2)))
case("mm inner dims mismatch", lambda L: L.m.mm(L.m.ones(2, 3), L.m.ones(4, 2)))
case("bmm of 2-d tensors", lambda L: L.m.bmm(L.m.ones(2, 3), L.m.ones(3, 2)))
case("bmm batch mismatch", lambda L: L.m.bmm(L.m.ones(2, 2, 3), L.m.ones(3, 3, 2)))
case("dot of different lengths", lambda L: L.m.dot(L.m.ones(2), L.m.ones(3)))
case("dot of 2-d tensors", lambda L: L.m.dot(L.m.ones(2, 2), L.m.ones(2, 2)))
case("linear weight shape mismatch", lambda L: L.F.linear(L.m.ones(2, 3), L.m.ones(4, 2)))
case("cat of different shapes", lambda L: L.m.cat([L.m.ones(2, 3), L.m.ones(2, 4)]))
case("cat of an empty list", lambda L: L.m.cat([]))
case("stack of different shapes", lambda L: L.m.stack([L.m.ones(2), L.m.ones(3)]))
case("stack of an empty list", lambda L: L.m.stack([]))
case("einsum operand count mismatch", lambda L: L.m.einsum("ij,jk->ik", L.m.ones(2, 2)))
case("einsum subscript dims mismatch", lambda L: L.m.einsum("ij,jk->ik", L.m.ones(2, 3), L.m.ones(2, 2)))
case("mse_loss shape mismatch with grad", lambda L: L.F.mse_loss(L.leaf(), L.m.ones(3, 2)), key="size")
case("cross_entropy target out of range", lambda L: L.F.cross_entropy(L.m.ones(2, 3), L.t([0, 5])))
case("cross_entropy batch mismatch", lambda L: L.F.cross_entropy(L.m.ones(2, 3), L.t([0, 1, 2])))
case("cross_entropy float target of the wrong shape",
     lambda L: L.F.cross_entropy(L.m.ones(2, 3), L.m.ones(2, 4)))
case("nll_loss target of a float dtype", lambda L: L.F.nll_loss(L.m.ones(2, 3), L.t([0.0, 1.0])))
case("embedding index out of range", lambda L: L.F.embedding(L.t([5]), L.m.ones(3, 2)))
case("embedding with float indices", lambda L: L.F.embedding(L.t([0.0]), L.m.ones(3, 2)))
case("layer_norm shape mismatch", lambda L: L.F.layer_norm(L.m.ones(2, 3), (4,)))
case("binary_cross_entropy target shape mismatch",
     lambda L: L.F.binary_cross_entropy(L.m.ones(3) * 0.5, L.m.ones(2)))


# == bad dims and indices =========================================================================


case("sum over an out-of-range dim", lambda L: L.m.ones(2, 3).sum(dim=2))
case("sum over a negative out-of-range dim", lambda L: L.m.ones(2, 3).sum(dim=-3))
case("mean over a repeated dim", lambda L: L.m.ones(2, 3).mean(dim=(0, 0)))
case("softmax over an out-of-range dim", lambda L: L.m.ones(2, 3).softmax(dim=3))
case("log_softmax over an out-of-range dim", lambda L: L.F.log_softmax(L.m.ones(2, 3), dim=-4))
case("transpose of an out-of-range dim", lambda L: L.m.ones(2, 3).transpose(0, 2))
case("permute with too few dims", lambda L: L.m.ones(2, 3).permute(0))
case("permute with a repeated dim", lambda L: L.m.ones(2, 3).permute(0, 0))
case("squeeze of an out-of-range dim", lambda L: L.m.ones(2, 3).squeeze(3))
case("unsqueeze of an out-of-range dim", lambda L: L.m.ones(2, 3).unsqueeze(4))
case("narrow past the end", lambda L: L.m.ones(4).narrow(0, 2, 3))
case("narrow of an out-of-range dim", lambda L: L.m.ones(4).narrow(1, 0, 1))
case("select past the end", lambda L: L.m.ones(2, 3).select(1, 3))
case("index past the end", lambda L: L.m.ones(3)[3], key="is out of bounds for dimension")
case("index with too many indices", lambda L: L.m.ones(3)[0, 0])
case("index with a float tensor", lambda L: L.m.ones(3)[L.t([0.0])])
case("index with an out-of-range index tensor", lambda L: L.m.ones(3)[L.t([0, 5])],
     key="is out of bounds for dimension")
case("gather with an out-of-range index", lambda L: L.m.gather(L.m.ones(2, 2), 1, L.t([[0, 2], [1, 0]])))
case("gather with a float index", lambda L: L.m.gather(L.m.ones(2, 2), 1, L.t([[0.0, 1.0]])))
case("index_select with a 2-d index", lambda L: L.m.index_select(L.m.ones(3), 0, L.t([[0, 1]])))
case("index_select out of range", lambda L: L.m.index_select(L.m.ones(3), 0, L.t([3])))
case("split with a zero size", lambda L: L.m.ones(4).split(0))
case("chunk with zero chunks", lambda L: L.m.ones(4).chunk(0))
case("flatten with start after end", lambda L: L.m.ones(2, 3, 4).flatten(2, 1))
case("cumsum over an out-of-range dim", lambda L: L.m.ones(3).cumsum(1))
case("argmax over an out-of-range dim", lambda L: L.m.ones(3).argmax(dim=1))
case("max over an out-of-range dim", lambda L: L.m.ones(3).max(dim=2))
case("max of an empty tensor", lambda L: L.m.ones(0).max())
case("roll with mismatched shifts and dims", lambda L: L.m.roll(L.m.ones(3, 3), (1, 2), (0,)))
case("flip with a repeated dim", lambda L: L.m.flip(L.m.ones(3, 3), (0, 0)))
case("diagonal with equal dims", lambda L: L.m.ones(3, 3).diagonal(dim1=0, dim2=0))
case("tile with a negative repeat", lambda L: L.m.ones(3).tile((-1,)))
case("repeat with fewer dims than the tensor", lambda L: L.m.ones(2, 3).repeat(2))
case("masked_fill with a float mask", lambda L: L.m.ones(3).masked_fill(L.m.ones(3), 0.0),
     key="masked_fill_ only supports boolean masks")
case("masked_fill with a mask of the wrong shape",
     lambda L: L.m.ones(3).masked_fill(L.t([True, False]), 0.0))
case("scatter_add with an index of a float dtype",
     lambda L: L.m.ones(3).scatter_add(0, L.t([0.0]), L.m.ones(1)), key="expected dtype int32/int64 for index")
case("index_select with an index of a float dtype", lambda L: L.m.ones(3).index_select(0, L.t([0.0])))
case("einsum subscript repeated with two sizes", lambda L: L.m.einsum("ii->i", L.m.ones(2, 3)))
case("nll_loss 2-d target of another batch size", lambda L: L.F.nll_loss(L.m.ones(2, 3), L.m.ones(3, 4)))
case("nll_loss target of int32", lambda L: L.F.nll_loss(L.m.ones(2, 3), L.m.zeros(2, dtype=L.m.int32)))
case("cross_entropy float target of another spatial size",
     lambda L: L.F.cross_entropy(L.m.ones(2, 3, 4), L.m.ones(2, 3, 5)))
case("pad with an odd pad length", lambda L: L.F.pad(L.m.ones(3), (1,)))
case("sum_to_size to an incompatible size", lambda L: L.m.ones(2, 3).sum_to_size(3, 2))


# == factories ====================================================================================


case("zeros with a negative size", lambda L: L.m.zeros(-1))
case("ones with a negative size", lambda L: L.m.ones(2, -3))
case("empty with a negative size", lambda L: L.m.empty(-2))
case("full with a negative size", lambda L: L.m.full((-1,), 1.0))
case("rand with a negative size", lambda L: L.m.rand(-1))
case("randn with a negative size", lambda L: L.m.randn(3, -1))
case("eye with a negative size", lambda L: L.m.eye(-1))
case("arange with step 0", lambda L: L.m.arange(0, 10, 0))
case("arange with a step of the wrong sign", lambda L: L.m.arange(0, 10, -1))
case("linspace with negative steps", lambda L: L.m.linspace(0, 1, -1))
case("randint with low >= high", lambda L: L.m.randint(5, 5, (3,)))
case("randint with low > high", lambda L: L.m.randint(5, 2, (3,)))
case("randint with a negative size", lambda L: L.m.randint(0, 5, (-1,)))
case("tensor of ragged lists", lambda L: L.m.tensor([[1.0, 2.0], [3.0]]))
case("tensor of a string", lambda L: L.m.tensor("abc"))
case("tensor of nested strings", lambda L: L.m.tensor(["a", "b"]))
case("tensor of a string after a number", lambda L: L.m.tensor([1, "a"]))
case("tensor of None", lambda L: L.m.tensor([1.0, None]))
case("tensor of ragged lists three deep", lambda L: L.m.tensor([[[1], [2]], [[3], [4, 5]]]))
case("full with a non-number fill", lambda L: L.m.full((2,), "x"))
case("zeros_like of a non-tensor", lambda L: L.m.zeros_like([1.0, 2.0]))
case("tensor with an unknown dtype", lambda L: L.m.tensor([1.0], dtype="float32"))
case("requires_grad on an int tensor literal", lambda L: L.m.tensor([1, 2], requires_grad=True),
     key="only tensors of floating point")


# == dtypes =======================================================================================


case("subtraction of bool tensors", lambda L: L.t([True, False]) - L.t([False, True]),
     key="subtraction, the `-` operator, with")
case("negation of a bool tensor", lambda L: -L.t([True, False]))
case("bitwise_not of a float tensor", lambda L: L.m.bitwise_not(L.t([1.0])))
case("~ of a float tensor", lambda L: ~L.t([1.0]))
case("bitwise_not_ of a float tensor", lambda L: L.t([1.0]).bitwise_not_())
case("matmul of mixed dtypes", lambda L: L.m.ones(2, 2) @ L.m.ones(2, 2, dtype=L.m.float64))
case("mm of int and float", lambda L: L.m.mm(L.m.ones(2, 2, dtype=L.m.int64), L.m.ones(2, 2)))
case("cat of bool with grad float requiring grad", lambda L: L.F.linear(L.m.ones(2, 2, dtype=L.m.int64),
                                                                     L.m.ones(2, 2)))
case("mean of an int tensor", lambda L: L.t([1, 2, 3]).mean())
case("softmax of an int tensor", lambda L: L.t([1, 2, 3]).softmax(0))
case("cross_entropy with int logits", lambda L: L.F.cross_entropy(L.m.ones(2, 3, dtype=L.m.int64),
                                                                   L.t([0, 1])))
case("where with a non-bool condition", lambda L: L.m.where(L.t([1.0, 0.0]), L.m.ones(2), L.m.zeros(2)),
     key="where expected condition to be a boolean tensor")


# == gradcheck ====================================================================================


@case("gradcheck of a wrong custom backward")
def _(L: Lib) -> None:
    F = _function(L, lambda ctx, g: g * 3)
    x = L.m.tensor([1.0, 2.0], dtype=L.m.float64, requires_grad=True)
    L.m.autograd.gradcheck(F.apply, (x,))


@case("gradcheck with float32 inputs and a wrong backward")
def _(L: Lib) -> None:
    F = _function(L, lambda ctx, g: g * 0)
    x = L.m.tensor([1.0, 2.0], dtype=L.m.float64, requires_grad=True)
    L.m.autograd.gradcheck(F.apply, (x,), eps=1e-6, atol=1e-5)


@case("gradcheck with no input requiring grad", key="gradcheck expects at least one input tensor to require gradient")
def _(L: Lib) -> None:
    x = L.m.tensor([1.0, 2.0], dtype=L.m.float64)
    L.m.autograd.gradcheck(lambda a: a * 2, (x,))


@case("gradgradcheck of a wrong double backward")
def _(L: Lib) -> None:
    class F(L.m.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            ctx.save_for_backward(x)
            return x ** 2

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            (x,) = ctx.saved_tensors
            return g * 2 * x.detach() + 0 * x

    x = L.m.tensor([1.0, 2.0], dtype=L.m.float64, requires_grad=True)
    L.m.autograd.gradgradcheck(F.apply, (x,))


@case("functional.jacobian of a non-tensor output")
def _(L: Lib) -> None:
    F = L.m.autograd.functional
    (F.jacobian if L.is_torch else F.jacobian_sync)(lambda a: 3.0, L.m.ones(2))


# == the engine after a failed backward ===========================================================


@case("failure in the middle of a fan-in keeps every grad")
def _(L: Lib) -> None:
    x = L.leaf(grad=[1.0, 1.0, 1.0])
    w = L.leaf([2.0, 2.0, 2.0], grad=[3.0, 3.0, 3.0])

    def hook(g: Any) -> Any:
        raise RuntimeError("fails after some leaves were reached")

    h = x * w
    h.register_hook(hook)
    L.bw((h + x.exp() + w.sin()).sum())


@case("retain_grad on a non-leaf then failing backward")
def _(L: Lib) -> None:
    x = L.leaf()
    h = x * 2
    h.retain_grad()
    h2 = h * 1.0
    h2.register_hook(lambda g: g[:1])
    L.bw(h2.sum())


def key_phrase(message: str) -> str:
    """Torch's message normalised, up to its first number or shape."""
    text = normalise(message)
    cut = re.search(r"[0-9\[(]", text)
    phrase = (text[:cut.start()] if cut else text).strip(" :,.'\"")
    return phrase if len(phrase) >= 8 else text[:60]


def normalise(message: str) -> str:
    """Lower case, whitespace collapsed, torch's own name read as agrad's (``torch.utils.checkpoint``)."""
    return " ".join(message.lower().split()).replace("torch", "agrad")


@dataclass
class Outcome:
    exc: BaseException | None
    grad_problems: list[str] = field(default_factory=list)


def _run(m: Any, fn: Misuse) -> Outcome:
    lib = Lib(m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fn(lib)
        except Exception as exc:  # noqa: BLE001  (the misuse's error is the result)
            return Outcome(exc, lib.grad_problems())
    return Outcome(None, lib.grad_problems())


def compare(c: Case) -> tuple[str | None, list[str]]:
    """Run ``c`` under both libraries: (why agrad differs from torch or None, violations of (c) and (d))."""
    mine = _run(agrad, c.fn)
    violations = [f"after the error: {p}" for p in mine.grad_problems] if mine.exc is not None else []
    violations += _invariants.engine_works_sync()
    if torch is None:
        return None, violations
    theirs = _run(torch, c.fn)
    if theirs.exc is None:
        return "torch raises nothing (the case is wrong)", violations
    if mine.exc is None:
        return f"agrad raises nothing; torch raises {type(theirs.exc).__name__}", violations
    if not _same_type(mine.exc, theirs.exc):
        return (f"agrad raises {type(mine.exc).__name__} ({_short(mine.exc)}); "
                f"torch raises {type(theirs.exc).__name__} ({_short(theirs.exc)})"), violations
    key = normalise(c.key) if c.key else key_phrase(str(theirs.exc))
    if key not in normalise(str(mine.exc)):
        return f"message lacks {key!r}: agrad says {_short(mine.exc)}", violations
    return None, violations


def _same_type(mine: BaseException, theirs: BaseException) -> bool:
    """agrad's exception is torch's class or a subclass; for torch's own classes (``CheckpointError``),
    agrad's class of the same name, a subclass of the same builtin."""
    kind = type(theirs)
    if isinstance(mine, kind):
        return True
    builtin = next(k for k in kind.__mro__ if k.__module__ == "builtins")
    return kind.__module__.startswith("torch") and type(mine).__name__ == kind.__name__ and isinstance(mine, builtin)


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 100 else text[:97] + "..."


_SILENT = "not fixed yet: agrad raises nothing where torch raises (issue 14 items 22, 14)"
_TYPE = "not fixed yet: another exception type than torch's, mostly numpy's passing through (issue 14 item 21)"
_MESSAGE = "not fixed yet: the message lacks the gist of torch's (issue 14 item 21)"
_INFERENCE = "not fixed yet: inference_mode is no_grad, without inference tensors (issue 14 item 18)"

# Cases where agrad differs from torch today: {case: reason}.  Keep it true: the suite fails when a
# listed case matches (remove it) and when an unlisted one does not.  `python -m tests.reliability.run
# --catalogue` prints how each case differs.
KNOWN_MISMATCHES: dict[str, str] = {
}


def problems(name: str) -> tuple[str | None, list[str]]:
    """How case ``name`` differs from torch (None if it matches), and what is wrong with that: a violation
    of (c) or (d), a mismatch not in KNOWN_MISMATCHES, or a listed case that matches now."""
    why, wrong = compare(CASES[name])
    if torch is not None:
        if why is not None and name not in KNOWN_MISMATCHES:
            wrong.append(f"differs from torch: {why}")
        if why is None and name in KNOWN_MISMATCHES:
            wrong.append("matches torch now: remove it from KNOWN_MISMATCHES")
    return why, wrong


def run_catalogue(names: list[str] | None = None) -> Tally:
    """Every case (or ``names``); per case, what is wrong goes to the tally's violations."""
    tally = Tally("catalogue")
    start = time.perf_counter()
    for name in names or list(CASES):
        tally.trials["misuse cases"] += 1
        why, wrong = problems(name)
        tally.outcomes["matches torch" if why is None else "differs from torch"] += 1
        if why is not None:
            tally.mismatches[name] = why
        if wrong:
            tally.violations.append(f"[catalogue] {name}: " + "; ".join(wrong))
    tally.seconds = time.perf_counter() - start
    return tally
