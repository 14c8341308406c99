"""Reductions and normalisations over dimensions."""

from __future__ import annotations

import numpy as np

from agrad import _dtype
from agrad._ops._common import _axis, _expand_reduced, _r, _reduced_count
from agrad._ops._elementwise import exp
from agrad._ops._registry import defop
from agrad._tensor import Tensor

# The public names of this family (star-imported by ``agrad/__init__.py``).
__all__ = ["sum", "mean", "log_softmax"]

# -- reductions -------------------------------------------------------------------


def _reduce_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    x = _r(rng, 3, 4, 5)
    return [((x,), {}), ((x,), {"dim": 1}), ((x,), {"dim": -1, "keepdim": True}),
            ((x,), {"dim": (0, 2)}), ((_r(rng),), {}), ((_r(rng, 4),), {"dim": 0})]


def _reduction_node(name: str):  # type: ignore[no-untyped-def]
    # PyTorch's overloads: Backward0 reduces everything, Backward1 takes dims.
    return lambda dim, keepdim: f"{name}Backward0" if dim is None else f"{name}Backward1"


@defop(ref=lambda torch: torch.sum,
       vjp=lambda g, input_shape, dim, keepdim: _expand_reduced(g, input_shape, dim, keepdim),
       node=("SumBackward0", "SumBackward1"), node_for=_reduction_node("Sum"), methods=("sum",),
       samples=_reduce_samples)
def sum(xp, input, *, dim=None, keepdim=False):  # noqa: A001 - mirrors torch.sum
    """Sum over ``dim`` (all dimensions by default); integers and bools sum to int64."""
    if input.dtype.kind in "biu":
        return xp.sum(input, axis=_axis(dim), keepdims=keepdim, dtype=np.int64)
    return xp.sum(input, axis=_axis(dim), keepdims=keepdim)


@defop(ref=lambda torch: torch.mean,
       vjp=lambda g, input_shape, dim, keepdim: _expand_reduced(g, input_shape, dim, keepdim)
       / _reduced_count(input_shape, _axis(dim)),
       node=("MeanBackward0", "MeanBackward1"), node_for=_reduction_node("Mean"), methods=("mean",),
       samples=_reduce_samples)
def mean(xp, input, *, dim=None, keepdim=False):
    """Mean over ``dim`` (all dimensions by default); floating inputs only."""
    if input.dtype.kind != "f":
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point or "
            f"complex dtype. Got: {_dtype.from_numpy_dtype(input.dtype)}"
        )
    with np.errstate(invalid="ignore", divide="ignore"):
        return xp.mean(input, axis=_axis(dim), keepdims=keepdim)


@defop(ref=lambda torch: torch.log_softmax,
       vjp=lambda g, out, dim: g - exp(out) * g.sum(dim=dim, keepdim=True), node="LogSoftmaxBackward0",
       methods=("log_softmax",), to_float=True,
       samples=lambda rng: [((_r(rng, 3, 5),), {"dim": 1}), ((_r(rng, 4),), {"dim": 0}),
                            ((_r(rng, 2, 3, 4),), {"dim": -2})])
def log_softmax(xp, input, *, dim):
    """``log(softmax(input, dim))``, computed stably (shifted by the max)."""
    shifted = input - xp.max(input, axis=dim, keepdims=True)
    return shifted - xp.log(xp.sum(xp.exp(shifted), axis=dim, keepdims=True))




Tensor.softmax = lambda self, dim: exp(log_softmax(self, dim=dim))  # type: ignore[attr-defined]
