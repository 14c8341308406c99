"""Reductions and normalisations over dimensions."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from agrad import _backends, _dtype
from agrad._grad_mode import grad_enabled
from agrad._ops import _elementwise
from agrad._ops._common import _axis, _expand_reduced, _grids, _quiet, _r, _reduced_count, _zeros_on
from agrad._ops._elementwise import abs, exp, logical_and, logical_or, sign, where
from agrad._ops._registry import defop
from agrad._ops._shape import _wrap_dim, scatter_add
from agrad._tensor import Tensor

# The public names of this family (star-imported by ``agrad/__init__.py``).
__all__ = ["sum", "mean", "log_softmax", "prod", "amax", "amin", "max", "min", "argmax", "argmin",
           "var", "std", "logsumexp", "norm", "cumsum", "all", "any", "isclose", "allclose", "equal",
           "var_mean", "std_mean"]

# -- reductions -------------------------------------------------------------------


def _reduce_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    x = _r(rng, 3, 4, 5)
    return [((x,), {}), ((x,), {"dim": 1}), ((x,), {"dim": -1, "keepdim": True}),
            ((x,), {"dim": (0, 2)}), ((_r(rng),), {}), ((_r(rng, 4),), {"dim": 0})]


def _reduction_node(name: str):
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
    if not _dtype.is_floating_np(input.dtype):
        raise RuntimeError(
            "mean(): could not infer output dtype. Input dtype must be either a floating point or "
            f"complex dtype. Got: {_dtype.from_numpy_dtype(input.dtype)}"
        )
    with np.errstate(invalid="ignore", divide="ignore"):
        return xp.mean(input, axis=_axis(dim), keepdims=keepdim)


@defop(ref=lambda torch: torch.log_softmax,
       vjp=lambda g, out, dim: log_softmax_backward_data(g, out, dim=dim), node="LogSoftmaxBackward0",
       methods=("log_softmax",),
       samples=lambda rng: [((_r(rng, 3, 5),), {"dim": 1}), ((_r(rng, 4),), {"dim": 0}),
                            ((_r(rng, 2, 3, 4),), {"dim": -2})])
@_quiet  # a row of -inf is -inf - -inf: NaN, silently as in PyTorch
def log_softmax(xp, input, *, dim):
    """``log(softmax(input, dim))``, computed stably (shifted by the max); floating inputs only."""
    if not _dtype.is_floating_np(input.dtype):
        raise _softmax_not_implemented("log_softmax", input.dtype, input.ndim, dim)
    shifted = input - xp.max(input, axis=dim, keepdims=True)
    return shifted - xp.log(xp.sum(xp.exp(shifted), axis=dim, keepdims=True))


@defop(ref=lambda torch: lambda grad_output, output, dim:
       torch._log_softmax_backward_data(grad_output, output, dim, output.dtype),
       vjp=(lambda g, output, dim: g - (g * exp(output)).sum(dim=dim, keepdim=True),
            lambda g, grad_output, output, dim: -grad_output.sum(dim=dim, keepdim=True) * exp(output) * g),
       node="LogSoftmaxBackwardDataBackward0", saved_as={"grad_output": "grad_output"},
       samples=lambda rng: [((_r(rng, 3, 5), _r(rng, 3, 5)), {"dim": 1}), ((_r(rng, 4), _r(rng, 4)), {"dim": 0})])
def log_softmax_backward_data(xp, grad_output, output, *, dim):
    """``log_softmax``'s gradient from its output, ``grad - exp(output) * grad.sum(dim)``, as one
    kernel (PyTorch's ``_log_softmax_backward_data``): one op in a classifier's backward, not four."""
    return grad_output - xp.exp(output) * xp.sum(grad_output, axis=dim, keepdims=True)


# Note [softmax as one node]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``softmax`` is one entry, as PyTorch's ``_softmax`` is: one SoftmaxBackward0
# node that saves its output, whose backward is one op too
# (``softmax_backward_data``, PyTorch's ``_softmax_backward_data``:
# ``out * (g - (g * out).sum(dim))``).  It was ``exp(log_softmax(x))``: two
# nodes (ExpBackward0 in ``grad_fn`` where PyTorch shows SoftmaxBackward0),
# an extra pass each way, and two roundings in bfloat16 where PyTorch's kernel
# rounds once.  The backward's own vjps are composites, so double backward
# works.
@defop(ref=lambda torch: torch.softmax,
       vjp=lambda g, out, dim: softmax_backward_data(g, out, dim=dim), node="SoftmaxBackward0",
       samples=lambda rng: [((_r(rng, 3, 5),), {"dim": 1}), ((_r(rng, 4),), {"dim": 0}),
                            ((_r(rng, 2, 3, 4),), {"dim": -2})])
@_quiet  # a row of -inf is exp(-inf - -inf): NaN, silently as in PyTorch
def softmax(xp, input, *, dim):
    """Normalised exponentials along ``dim``, computed stably (shifted by the max); floating inputs only."""
    if not _dtype.is_floating_np(input.dtype):
        raise _softmax_not_implemented("softmax", input.dtype, input.ndim, dim)
    out = xp.exp(input - xp.max(input, axis=dim, keepdims=True))
    out /= xp.sum(out, axis=dim, keepdims=True)
    return out


@defop(ref=lambda torch: lambda grad_output, output, dim:
       torch._softmax_backward_data(grad_output, output, dim, output.dtype),
       vjp=(lambda g, output, dim: softmax_backward_data(g, output, dim=dim),
            lambda g, grad_output, output, dim: g * (grad_output - (grad_output * output).sum(dim=dim, keepdim=True))
            - grad_output * (g * output).sum(dim=dim, keepdim=True)),
       node="SoftmaxBackwardDataBackward0", saved_as={"grad_output": "grad_output"},
       samples=lambda rng: [((_r(rng, 3, 5), _r(rng, 3, 5)), {"dim": 1}), ((_r(rng, 4), _r(rng, 4)), {"dim": 0})])
def softmax_backward_data(xp, grad_output, output, *, dim):
    """``softmax``'s gradient from its output, ``output * (grad - (grad * output).sum(dim))``, as one
    kernel (PyTorch's ``_softmax_backward_data``; Note [softmax as one node])."""
    return output * (grad_output - xp.sum(grad_output * output, axis=dim, keepdims=True))


# -- the negative log-likelihood of class indices -------------------------------

# Note [nll_loss as one node]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``F.nll_loss`` (and so ``F.cross_entropy``, after its ``log_softmax``) is one
# entry, as PyTorch's ``nll_loss_forward`` is: one NllLossBackward0 node whose
# backward scatters ``-weight[target]`` (over the total weight for "mean") into
# zeros, instead of a gather, a product, a negation, two sums and a division
# with a node each.  A training step's loss is then two nodes, as in PyTorch
# (with ``log_softmax_backward_data``, two ops in the backward): forward and
# backward of ``cross_entropy`` over a 128x10 batch took 145 µs as composites,
# 101 µs now (numpy's hand-written gradient: 15 µs; the rest is per-op and
# per-node cost).  The backward is itself an entry (``nll_loss_backward``,
# linear in the gradient), whose own backward is ``nll_loss`` again: double
# backward works as PyTorch's NllLossBackwardBackward0 does.  Both recompute the
# per-target weights from ``target`` (a few elements) instead of saving
# PyTorch's ``total_weight``.  The class weights are a constant input: absent,
# they are ``_NO_WEIGHT`` (a 0-d tensor; a real one is 1-d).  PyTorch records
# NllLoss2DBackward0 between views for inputs of more than two dimensions;
# here every input records NllLossBackward0.
_NO_WEIGHT_ARRAY = np.ones((), np.float32)
_NO_WEIGHT_ARRAY.flags.writeable = False
_NO_WEIGHT = Tensor._make(_NO_WEIGHT_ARRAY)


def class_targets(xp: Any, target: Any, n_classes: int, ignore_index: int) -> tuple[Any, Any]:
    """The class indices ``target`` checked as PyTorch's kernels check them, with the
    ignored ones replaced by 0, and the mask of the others (None when no target
    is ignored); arrays of ``xp``."""
    if target.dtype.name not in ("int64", "uint8"):
        raise RuntimeError("expected target dtype to be Long or Byte, but got "
                           f"{_dtype.SCALAR_TYPE_NAMES[target.dtype.name]}")
    if target.size:  # the common case, every target a class and none ignored, in two reductions
        lo, hi = int(target.min()), int(target.max())
        if 0 <= lo and hi < n_classes and not lo <= ignore_index <= hi:
            return target, None
    valid = xp.asarray(target != ignore_index)  # an array when target is 0-d too (numpy gives a scalar)
    bad = valid & ((target < 0) | (target >= n_classes))
    if bool(xp.any(bad)):
        raise IndexError(f"Target {int(target[bad].reshape(-1)[0])} is out of bounds.")
    return xp.where(valid, target, 0), valid


def _nll_terms(xp: Any, shape: tuple[int, ...], dtype: Any, target: Any, weight: Any,
               ignore_index: int) -> tuple[tuple[Any, ...], Any, Any]:
    """For an input of ``shape``: the index that picks each target's class (its
    ``(sample, class, *position)`` coordinates), each target's weight, 0 where
    ignored (``dtype``; None when all are 1), and the mask of the targets not
    ignored (None: all)."""
    safe, kept = class_targets(xp, target, shape[1] if len(shape) > 1 else shape[0], ignore_index)
    if weight.ndim:
        w = weight[safe].astype(dtype, copy=False) if kept is None else (weight[safe] * kept).astype(dtype)
    else:
        w = None if kept is None else kept.astype(dtype)
    if len(shape) == 1:
        return (safe,), w, kept
    grid = _grids(xp, safe.shape)
    return (grid[0], safe, *grid[1:]), w, kept


def _nll_loss_args(input: Tensor, target: Tensor, weight: Tensor | None = None, reduction: str = "mean",
                   ignore_index: int = -100) -> tuple[tuple[Tensor, ...], dict[str, Any]]:
    """The entry's inputs (``_NO_WEIGHT`` for no weight) and attributes, the weight checked."""
    if weight is None:
        weight = _NO_WEIGHT
    elif weight is not _NO_WEIGHT and weight.shape != (n := input.shape[1 if input.ndim > 1 else 0],):
        raise RuntimeError("weight tensor should be defined either for all or no classes" if input.ndim > 2 else
                           f"weight tensor should be defined either for all {n} classes or no classes but got "
                           f"weight tensor of shape: {list(weight.shape)}")
    return (input, target, weight), {"reduction": reduction, "ignore_index": ignore_index,
                                     "node": _nll_node(input.ndim, reduction)}


def _nll_node(ndim: int, reduction: str) -> str:
    """PyTorch's name of ``nll_loss``'s node for an ``ndim``-D input: ATen's
    ``nll_loss_nd`` runs ``nll_loss`` on 1-D and 2-D inputs, ``nll_loss2d`` on
    others (4-D as they are, the rest reshaped to 4-D), and views an unreduced
    loss of a reshaped input back to its shape."""
    if ndim <= 2:
        return "NllLossBackward0"
    return "ViewBackward0" if ndim != 4 and reduction == "none" else "NllLoss2DBackward0"


def _nll_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    t2, t3 = rng.integers(0, 5, 4), rng.integers(0, 5, (2, 3))
    t2[1] = 2
    return [((_r(rng, 4, 5), t2, None, "mean", -100), {}), ((_r(rng, 4, 5), t2, None, "sum", 2), {}),
            ((_r(rng, 4, 5), t2, None, "none", 2), {}), ((_r(rng, 2, 5, 3), t3, None, "mean", 2), {}),
            ((_r(rng, 5), np.array(3), None, "mean", -100), {})]


@defop(ref=lambda torch: lambda input, target, weight=None, reduction="mean", ignore_index=-100:
       torch.nn.functional.nll_loss(input, target, weight, reduction=reduction, ignore_index=ignore_index),
       vjp=(lambda g, input_shape, target, weight, reduction, ignore_index:
            nll_loss_backward(g, target, weight, input_shape, reduction, ignore_index), None, None),
       node=("NllLossBackward0", "NllLoss2DBackward0", "ViewBackward0"), node_for=lambda node, **_: node,
       parse=_nll_loss_args, samples=_nll_samples)
@_quiet  # "mean" over no target is 0 / 0: NaN, silently as in PyTorch
def nll_loss(xp, input, target, weight, *, reduction="mean", ignore_index=-100, node="NllLossBackward0"):
    """``-weight[t] * input[n, t, ...]`` for each target ``t = target[n, ...]``, summed,
    averaged over the total weight ("mean") or not reduced (Note [nll_loss as one node]);
    ``node`` is PyTorch's name of its node (``_nll_node``)."""
    index, w, kept = _nll_terms(xp, input.shape, input.dtype, target, weight, ignore_index)
    picked = input[index]
    losses = -picked if w is None else -(picked * w)
    if kept is not None:  # 0 there, even beside an inf or NaN input: PyTorch skips them
        losses = xp.where(kept, losses, xp.zeros((), losses.dtype))
    if reduction == "none":
        return losses
    total = losses.sum()
    if reduction == "mean":
        return total / (target.size if w is None else w.sum())
    return total


def _nll_backward_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    t2 = rng.integers(0, 5, 4)
    t2[1] = 2
    return [((_r(rng), t2, None, (4, 5), "mean", 2), {}), ((_r(rng, 4), t2, None, (4, 5), "none", -100), {}),
            ((_r(rng), rng.integers(0, 5, (2, 3)), None, (2, 5, 3), "sum", -100), {})]


def _nll_backward_ref(torch: Any) -> Callable[..., Any]:
    """PyTorch's ``nll_loss_backward`` through autograd: the gradient of ``nll_loss`` at zeros."""
    def ref(grad: Any, target: Any, weight: Any, input_shape: Any, reduction: str, ignore_index: int) -> Any:
        input = torch.zeros(input_shape, dtype=grad.dtype, requires_grad=True)
        loss = torch.nn.functional.nll_loss(input, target, weight, reduction=reduction, ignore_index=ignore_index)
        return torch.autograd.grad(loss, input, grad, create_graph=True)[0]
    return ref


def _nll_backward_args(grad: Tensor, target: Tensor, weight: Tensor | None, input_shape: Any, reduction: str,
                       ignore_index: int) -> tuple[tuple[Tensor, ...], dict[str, Any]]:
    """The backward entry's inputs (``_NO_WEIGHT`` for no weight) and attributes."""
    return (grad, target, _NO_WEIGHT if weight is None else weight), {
        "input_shape": tuple(input_shape), "reduction": reduction, "ignore_index": ignore_index}


@defop(ref=_nll_backward_ref,
       vjp=(lambda g, target, weight, reduction, ignore_index: nll_loss(g, target, weight, reduction, ignore_index),
            None, None),
       node="NllLossBackwardBackward0", parse=_nll_backward_args, samples=_nll_backward_samples)
@_quiet
def nll_loss_backward(xp, grad, target, weight, *, input_shape, reduction, ignore_index):
    """The gradient of ``nll_loss`` at an input of ``input_shape``: ``-weight[t] * grad``
    (over the total weight for "mean") at each target's class, 0 elsewhere."""
    index, w, kept = _nll_terms(xp, input_shape, grad.dtype, target, weight, ignore_index)
    if reduction == "mean":  # ATen's roundings: -(grad / total weight) * weight
        grad = grad / (target.size if w is None else w.sum())
    coef = -grad if w is None else w * -grad
    if kept is not None:  # 0 there, even for an inf or NaN gradient
        coef = xp.where(kept, coef, xp.zeros((), coef.dtype))
    out = xp.zeros(input_shape, grad.dtype)
    out[index] = coef
    return out


# Note [Prod backward at zeros]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The gradient of a product is, at each x_i, the product of the others.  With
# no zero in the input it is ``out / x``, PyTorch's fast path.  With zeros,
# PyTorch takes exclusive cumulative products; agrad writes the product of the
# others of a slice with Z zeros as P * e / x_i at a nonzero x_i and P * e' at
# a zero, where P is the product of the slice's nonzero elements, e the
# elementary symmetric polynomial of degree Z of its zero elements (1, their
# sum, or the sum of their pairwise products) and e' the one of degree Z - 1
# of the zero elements other than x_i (1, or that other zero).  These are 0 or
# P in value, but written with the zero elements themselves they have the
# right derivatives: up to any order with one or two zeros in a slice, and to
# second order with more (where the gradient is 0 and its derivative too).
# Beside an inf or NaN, P is inf or NaN where the product of the others may be
# finite: there the value is PyTorch's own, the exclusive products computed
# as a constant (``_exclusive_products``).  A full product with several zeros
# has gradient 0 outside create_graph, PyTorch's shortcut.
def _prod_grad(g: Tensor, input: Tensor, out: Tensor, dim, keepdim) -> Tensor:
    g = _expand_reduced(g, input.shape, dim, keepdim)
    zero = input == 0
    if not bool(zero._data.any()):  # no zero anywhere: PyTorch's fast path
        return g * (_expand_reduced(out, input.shape, dim, keepdim) / input)
    if dim is None and not grad_enabled.get() and int(zero._data.sum()) > 1:
        return _zeros_on(input, input.shape)  # PyTorch's shortcut: 0, even beside an inf or NaN
    with np.errstate(all="ignore"):  # inf * 0 beside an inf or NaN: PyTorch is silent
        return g * _others_product(input, zero, dim)


def _others_product(input: Tensor, zero: Tensor, dim) -> Tensor:
    """The product of the other elements along ``dim``, for an input holding
    zeros (Note [Prod backward at zeros])."""
    nz = zero.sum(dim=dim, keepdim=True)
    safe = where(zero, 1.0, input)
    others = prod(safe, dim=dim, keepdim=True) if dim is not None else prod(safe).reshape((1,) * input.ndim)
    zeros_only = where(zero, input, 0.0)
    e1 = zeros_only.sum(dim=dim, keepdim=True)
    e2 = (e1 * e1 - (zeros_only * zeros_only).sum(dim=dim, keepdim=True)) / 2
    e = where(nz == 0, 1.0, where(nz == 1, e1, where(nz == 2, e2, 0.0)))
    e_other = where(nz == 1, 1.0, where(nz == 2, e1 - input, 0.0))
    formula = where(zero, others * e_other, others * e / safe)
    with _backends.on(input.device):
        finite = Tensor._make(_backends.array_module(formula._data).isfinite(formula._data))
    return where(finite, formula, _exclusive_products(input, dim))


def _exclusive_products(input: Tensor, dim) -> Tensor:
    """The product of the other elements along ``dim`` (of all, flattened, by
    default) as PyTorch's prod_safe_zeros_backward computes it: exclusive
    cumulative products from both ends, multiplied.  A constant."""
    arr = input._data
    with _backends.on(input.device):
        xp = _backends.array_module(arr)
        x = arr.reshape(-1) if dim is None else arr
        axis = 0 if dim is None else dim % arr.ndim
        n = x.shape[axis]
        ones = xp.ones_like(xp.take(x, xp.arange(1), axis=axis))
        head = xp.cumprod(xp.concatenate([ones, xp.take(x, xp.arange(n - 1), axis=axis)], axis=axis), axis=axis)
        tail = xp.flip(xp.take(x, xp.arange(1, n), axis=axis), axis=axis)
        tail = xp.flip(xp.cumprod(xp.concatenate([ones, tail], axis=axis), axis=axis), axis=axis)
        return Tensor._make((head * tail).reshape(arr.shape))


def _prod_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    x = _r(rng, 3, 4)
    one = x.copy()
    one[1, 2] = 0.0
    two = one.copy()
    two[1, 0] = two[2, 2] = 0.0  # two zeros in row 1 and in column 2 (Note [Prod backward at zeros])
    return [((x,), {}), ((x,), {"dim": 1}), ((x,), {"dim": -2, "keepdim": True}), ((one,), {}),
            ((one,), {"dim": 1}), ((one,), {"dim": 0, "keepdim": True}), ((_r(rng),), {}),
            ((two,), {}), ((two,), {"dim": 1}), ((two,), {"dim": 0, "keepdim": True})]


@defop(ref=lambda torch: torch.prod, vjp=_prod_grad, node=("ProdBackward0", "ProdBackward1"),
       node_for=_reduction_node("Prod"), methods=("prod",), samples=_prod_samples)
@_quiet
def prod(xp, input, *, dim=None, keepdim=False):
    """Product over ``dim`` (all elements by default); integers and bools multiply to int64."""
    if dim is None and keepdim:
        out = xp.prod(input)
        return out.reshape((1,) * input.ndim)  # internal use (backward); torch.prod has no such call
    if input.dtype.kind in "biu":
        return xp.prod(input, axis=dim, keepdims=keepdim, dtype=np.int64)
    return xp.prod(input, axis=dim, keepdims=keepdim)


def _extreme_grad(g: Tensor, input: Tensor, out: Tensor, dim, keepdim) -> Tensor:
    # The gradient is split evenly among the elements equal to the extreme.
    g = _expand_reduced(g, input.shape, dim, keepdim)
    mask = input == _expand_reduced(out.detach(), input.shape, dim, keepdim)
    count = mask.sum(dim=dim, keepdim=True)
    return where(mask, g, 0.0) / count


def _evenly_distribute(g: Tensor, input: Tensor, out: Tensor) -> Tensor:
    # PyTorch's evenly_distribute_backward (max() and min() of a whole tensor):
    # the gradient splits among the elements equal to the result or, when the
    # result is NaN, among the NaN elements only.  (amax/amin, which compare
    # with the result, give NaN to the whole reduced slice, as in PyTorch.)
    value = out.detach()
    mask = logical_or(input == value, logical_and(input != input, value != value))
    return where(mask, g, 0.0) / mask.sum()


def _extreme_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    x = _r(rng, 3, 4, 5)
    # Ties are not differentiable by finite differences: they are checked
    # against PyTorch in tests/ops/test_reductions_linalg.py.
    return [((x,), {}), ((x,), {"dim": 1}), ((x,), {"dim": -1, "keepdim": True}), ((x,), {"dim": (0, 2)}),
            ((_r(rng, 4),), {})]


def _check_float_extreme(name: str, input: np.ndarray, dim: Any = None) -> None:
    """A reduction with no identity (amax, max) needs a non-empty slice: an empty
    input is fine when the dims reduced are not empty (a (0, 3) tensor's max
    over dim 1 has shape (0,)), as in PyTorch, whose message names ``dim`` as given."""
    if input.size:
        return
    if dim is None or dim == () or dim == []:
        raise RuntimeError(f"{name}(): Expected reduction dim to be specified for input.numel() == 0. "
                           "Specify the reduction dim with the 'dim' argument.")
    for d in (dim,) if isinstance(dim, int) else dim:
        if input.shape[d] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


_dims_ref = lambda f: lambda x, dim=None, keepdim=False: f(x, () if dim is None else dim, keepdim)  # noqa: E731


@defop(ref=lambda torch: _dims_ref(torch.amax), vjp=_extreme_grad, node="AmaxBackward0",
       methods=("amax",), samples=_extreme_samples)
def amax(xp, input, *, dim=None, keepdim=False):
    """Largest element over ``dim`` (all by default); the gradient splits among ties."""
    _check_float_extreme("amax", input, dim)
    return xp.amax(input, axis=_axis(dim), keepdims=keepdim)


@defop(ref=lambda torch: _dims_ref(torch.amin), vjp=_extreme_grad, node="AminBackward0",
       methods=("amin",), samples=lambda rng: _extreme_samples(rng))
def amin(xp, input, *, dim=None, keepdim=False):
    """Smallest element over ``dim`` (all by default); the gradient splits among ties."""
    _check_float_extreme("amin", input, dim)
    return xp.amin(input, axis=_axis(dim), keepdims=keepdim)


@defop(ref=lambda torch: torch.max, vjp=_evenly_distribute,
       node="MaxBackward1", samples=lambda rng: [(args, {}) for args, kw in _extreme_samples(rng) if not kw])
def _max_all(xp, input):
    """Largest element of the whole tensor (``x.max()``)."""
    _check_float_extreme("max", input)
    return xp.amax(input)


@defop(ref=lambda torch: torch.min, vjp=_evenly_distribute,
       node="MinBackward1", samples=lambda rng: [(args, {}) for args, kw in _extreme_samples(rng) if not kw])
def _min_all(xp, input):
    """Smallest element of the whole tensor (``x.min()``)."""
    _check_float_extreme("min", input)
    return xp.amin(input)


def _arg_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    x = _r(rng, 3, 4, 5)
    return [((x,), {}), ((x,), {"dim": 1}), ((x,), {"dim": -1, "keepdim": True})]


def _arg_extreme(xp, fn, input, dim, keepdim):
    if input.size == 0:  # PyTorch's errors (an empty input reduced over a non-empty dim is fine)
        if dim is None:
            raise IndexError(f"{fn.__name__}(): Expected reduction dim to be specified for input.numel() == 0.")
        _check_reduced_dim(fn.__name__, input, dim % (input.ndim or 1))
    if dim is None:
        out = fn(input.reshape(-1))
        return xp.asarray(out, dtype=np.int64).reshape((1,) * input.ndim if keepdim else ())
    return xp.asarray(fn(input, axis=dim, keepdims=keepdim), dtype=np.int64)


@defop(ref=lambda torch: torch.argmax, vjp=None, methods=("argmax",), samples=_arg_samples)
def argmax(xp, input, *, dim=None, keepdim=False):
    """Index (int64) of the first largest element over ``dim`` (of the flattened input by default)."""
    return _arg_extreme(xp, xp.argmax, input, dim, keepdim)


@defop(ref=lambda torch: torch.argmin, vjp=None, methods=("argmin",), samples=_arg_samples)
def argmin(xp, input, *, dim=None, keepdim=False):
    """Index (int64) of the first smallest element over ``dim`` (of the flattened input by default)."""
    return _arg_extreme(xp, xp.argmin, input, dim, keepdim)


def _selected_grad(arg: Any) -> Any:
    """The vjp of ``max``/``min`` along a dim: the gradient flows to the selected
    index only, as PyTorch's ``value_selecting_reduction_backward`` (ties: the
    first, which ``arg`` returns as the forward's index)."""

    def vjp(g: Tensor, input: Tensor, dim: int, keepdim: bool) -> Tensor:
        idx = arg(input, dim=dim, keepdim=True)
        return scatter_add(_zeros_on(g, input.shape), dim, idx, g if keepdim else g.unsqueeze(dim))

    return vjp


def _check_reduced_dim(name: str, input: np.ndarray, dim: int) -> None:
    """An empty input is fine unless the reduced dim itself is empty (PyTorch's IndexError)."""
    if input.shape[dim] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {dim} to have non-zero size.")


def _along_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    x = _r(rng, 3, 4, 5)
    return [((x,), {"dim": 1}), ((x,), {"dim": 2, "keepdim": True}), ((_r(rng, 4),), {"dim": 0}),
            ((_r(rng, 2, 0, 3),), {"dim": 2})]


@defop(ref=lambda torch: lambda x, dim, keepdim=False: torch.max(x, dim, keepdim).values,
       vjp=_selected_grad(argmax), node="MaxBackward0", samples=_along_samples)
def _max_along(xp, input, *, dim, keepdim=False):
    """The values of ``max(x, dim)``: largest elements along ``dim``."""
    _check_reduced_dim("max", input, dim)
    return xp.amax(input, axis=dim, keepdims=keepdim)


@defop(ref=lambda torch: lambda x, dim, keepdim=False: torch.min(x, dim, keepdim).values,
       vjp=_selected_grad(argmin), node="MinBackward0", samples=_along_samples)
def _min_along(xp, input, *, dim, keepdim=False):
    """The values of ``min(x, dim)``: smallest elements along ``dim``."""
    _check_reduced_dim("min", input, dim)
    return xp.amin(input, axis=dim, keepdims=keepdim)


class _ReturnType(tuple):
    """A ``(values, indices)`` pair like ``torch.return_types.max``."""

    __slots__ = ()
    _name = ""

    def __new__(cls, values: Tensor, indices: Tensor) -> _ReturnType:
        return tuple.__new__(cls, (values, indices))

    @property
    def values(self) -> Tensor:
        return self[0]

    @property
    def indices(self) -> Tensor:
        return self[1]

    def __repr__(self) -> str:
        return f"agrad.return_types.{self._name}(\nvalues={self[0]!r},\nindices={self[1]!r})"


class _MaxReturn(_ReturnType):
    __slots__ = ()
    _name = "max"


class _MinReturn(_ReturnType):
    __slots__ = ()
    _name = "min"


def _extreme_along(input: Tensor, dim: int, keepdim: bool, arg, along, result):
    """``(values, indices)`` along ``dim``: the gradient flows to the returned index only."""
    if input.ndim == 0:
        idx = arg(input, dim=dim, keepdim=keepdim)
        return result(input[...], idx)
    d = _wrap_dim(dim, input.ndim)
    return result(along(input, dim=d, keepdim=keepdim), arg(input, dim=d, keepdim=keepdim))


def _extreme(kind: str, reduce_all: Any, arg: Any, along: Any, returns: Any) -> Any:
    """``max`` or ``min``: PyTorch's three overloads in one function."""

    def extreme(input: Tensor, dim: Any = None, keepdim: bool = False, *, other: Any = None) -> Any:
        if isinstance(dim, Tensor) or other is not None:
            return getattr(_elementwise, kind + "imum")(input, dim if other is None else other)
        if dim is None:
            return reduce_all(input)
        return _extreme_along(input, dim, keepdim, arg, along, returns)

    extreme.__name__ = extreme.__qualname__ = kind
    word = "largest" if kind == "max" else "smallest"
    extreme.__doc__ = (f"``{kind}(x)``: the {word} element; ``{kind}(x, dim)``: ``(values, indices)``; "
                       f"``{kind}(x, other)``: elementwise {kind}imum.")
    return extreme


max = _extreme("max", _max_all, argmax, _max_along, _MaxReturn)  # noqa: A001 - mirrors torch.max
min = _extreme("min", _min_all, argmin, _min_along, _MinReturn)  # noqa: A001 - mirrors torch.min


def _moments_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    x = _r(rng, 3, 4, 5)
    return [((x,), {}), ((x,), {"dim": 1}), ((x,), {"dim": (0, 2), "keepdim": True}),
            ((x,), {"dim": -1, "correction": 0}), ((x,), {"correction": 2}), ((_r(rng, 6),), {"dim": 0})]


def _centered(input: Tensor, dim) -> Tensor:
    return input - input.mean(dim=dim, keepdim=True)


def _dof(shape: tuple[int, ...], dim, correction) -> float:
    return float(_reduced_count(shape, _axis(dim)) - correction)


# Note [Zero degrees of freedom]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# With dof = n - correction <= 0 (a batch of one, say) PyTorch's var and std
# warn "degrees of freedom is <= 0" (a UserWarning) and divide the sum of
# squares by max(dof, 0): inf, or NaN where it is 0.  Their backward is
# ``(2 / dof) * grad * (x - mean)`` in double arithmetic, where 2 / 0 is inf,
# and, for a full reduction, ``grad * where(x == mean, nan, inf)``.  Python
# raises ZeroDivisionError on 2 / 0 and numpy warns on inf * 0, so agrad
# writes ``inf * t`` as ``t / 0`` (division, whose kernel is quiet, gives the
# same inf, -inf or NaN).
def _moment(xp, input, dim, correction, keepdim, name):
    """The variance over ``dim``, with PyTorch's warning when the degrees of
    freedom are <= 0 (Note [Zero degrees of freedom])."""
    axis = _axis(dim)
    with np.errstate(invalid="ignore", divide="ignore"):
        if _dof(input.shape, dim, correction) > 0:
            return xp.var(input, axis=axis, ddof=correction, keepdims=keepdim)
        warnings.warn(f"{name}(): degrees of freedom is <= 0. Correction should be strictly less than the "
                      "reduction factor (input numel divided by output numel).", UserWarning, stacklevel=4)
        centered = input - xp.sum(input, axis=axis, keepdims=True) / _reduced_count(input.shape, axis)
        return xp.sum(centered * centered, axis=axis, keepdims=keepdim) / 0.0


def _var_grad(g: Tensor, input: Tensor, dim, correction, keepdim) -> Tensor:
    # PyTorch's var_backward; see Note [Zero degrees of freedom].
    g = _expand_reduced(g, input.shape, dim, keepdim)
    dof = _dof(input.shape, dim, correction)
    if dof > 0 or (dim is not None and dof < 0):
        return (2.0 / dof) * g * _centered(input, dim)
    if dim is None:
        return g / where(input == input.mean(), math.nan, 0.0)
    return g * _centered(input, dim) / 0.0


@defop(ref=lambda torch: torch.var, vjp=_var_grad,
       node="VarBackward0", methods=("var",), to_float=True, samples=_moments_samples)
def var(xp, input, *, dim=None, correction=1, keepdim=False):
    """Variance over ``dim`` with ``correction`` (Bessel's, 1, by default)."""
    return _moment(xp, input, dim, correction, keepdim, "var")


@defop(ref=lambda torch: torch.std,
       vjp=lambda g, input, out, dim, correction, keepdim: _var_grad(
           where(out == 0, 0.0, g / (2 * where(out == 0, 1.0, out))), input, dim, correction, keepdim),
       node="StdBackward0", methods=("std",), to_float=True, samples=_moments_samples)
def std(xp, input, *, dim=None, correction=1, keepdim=False):
    """Standard deviation over ``dim`` with ``correction`` (Bessel's, 1, by default)."""
    return xp.sqrt(_moment(xp, input, dim, correction, keepdim, "std"))


@defop(ref=lambda torch: torch.logsumexp,
       vjp=lambda g, input, out, dim, keepdim: _expand_reduced(g, input.shape, dim, keepdim)
       * exp(input - _expand_reduced(out, input.shape, dim, keepdim)),
       node="LogsumexpBackward0", methods=("logsumexp",), to_float=True,
       samples=lambda rng: [((_r(rng, 3, 4),), {"dim": 1}), ((_r(rng, 3, 4) * 300,), {"dim": 0}),
                            ((_r(rng, 2, 3, 4),), {"dim": (0, 2), "keepdim": True})])
def logsumexp(xp, input, *, dim, keepdim=False):
    """``log(sum(exp(input), dim))``, computed stably (shifted by the max)."""
    axis = _axis(dim)
    m = xp.amax(input, axis=axis, keepdims=True)
    m = xp.where(xp.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        out = xp.log(xp.sum(xp.exp(input - m), axis=axis, keepdims=True)) + m
    return out if keepdim else xp.squeeze(out, axis=axis)


def _norm2_grad(g: Tensor, input: Tensor, out: Tensor, dim, keepdim) -> Tensor:
    # Subgradient 0 at the zero vector, as PyTorch's norm_backward.
    out = _expand_reduced(out, input.shape, dim, keepdim)
    return _expand_reduced(g, input.shape, dim, keepdim) * input / where(out == 0, 1.0, out)


def _norm_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    x = _r(rng, 3, 4)
    # The zero vector (subgradient 0) is checked in tests/ops/test_reductions_linalg.py.
    return [((x,), {}), ((x,), {"dim": 1}), ((x,), {"dim": 0, "keepdim": True}), ((x,), {"dim": (0, 1)})]


@defop(ref=lambda torch: lambda x, dim=None, keepdim=False: torch.linalg.vector_norm(x, dim=dim, keepdim=keepdim),
       vjp=_norm2_grad, node="LinalgVectorNormBackward0", to_float=True, samples=_norm_samples)
def _norm2(xp, input, *, dim=None, keepdim=False):
    """Euclidean norm over ``dim`` (all elements by default)."""
    return xp.sqrt(xp.sum(input * input, axis=_axis(dim), keepdims=keepdim))


def _norm_inf_grad(g: Tensor, input: Tensor, out: Tensor, dim, keepdim) -> Tensor:
    # PyTorch's linalg_vector_norm_backward for ord = +-inf: the gradient splits
    # among the elements whose magnitude is the norm, or is NaN (whose sign,
    # and so gradient, is 0), not to a whole slice as amax's would.
    magnitude = abs(input.detach())
    mask = logical_or(magnitude == _expand_reduced(out.detach(), input.shape, dim, keepdim), magnitude != magnitude)
    g = _expand_reduced(g, input.shape, dim, keepdim)
    return sign(input) * (g / mask.sum(dim=dim, keepdim=True) * mask)


def _norm_inf_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    x = _r(rng, 3, 4)
    return [((x,), {"ord": math.inf}), ((x,), {"ord": -math.inf, "dim": 1}),
            ((x,), {"ord": math.inf, "dim": 0, "keepdim": True}), ((x,), {"ord": -math.inf, "dim": (0, 1)})]


@defop(ref=lambda torch: lambda x, ord, dim=None, keepdim=False: torch.linalg.vector_norm(x, ord, dim, keepdim),
       vjp=_norm_inf_grad, node="LinalgVectorNormBackward0", to_float=True, samples=_norm_inf_samples)
def _norm_inf(xp, input, *, ord, dim=None, keepdim=False):  # noqa: A002 - mirrors torch's ord
    """The largest (``ord=inf``) or smallest (``-inf``) magnitude over ``dim``."""
    axis = _axis(dim)
    empty = [d for d in ((axis,) if isinstance(axis, int) else axis or ()) if input.shape[d] == 0]
    if input.size == 0 and (dim is None or empty):
        place = ("an empty tensor because" if dim is None
                 else f"the dimension {empty[0]} because this dimension is empty and")
        raise RuntimeError(f"linalg.vector_norm cannot compute the {ord} norm on {place} the operation "
                           "does not have an identity")
    return (xp.amax if ord > 0 else xp.amin)(xp.abs(input), axis=axis, keepdims=keepdim)


def vector_norm(x: Tensor, ord=2, dim=None, keepdim: bool = False) -> Tensor:
    """The ``ord``-norm of ``x`` over ``dim`` (all elements by default), as ``torch.linalg.vector_norm``."""
    if not x.dtype.is_floating_point and not x.dtype.is_complex:
        raise RuntimeError("linalg.vector_norm: Expected a floating point or complex tensor as input. "
                           f"Got {_TORCH_TYPE_NAMES[x.dtype.name]}")
    if ord == 2:
        return _norm2(x, dim=dim, keepdim=keepdim)
    if ord == 1:
        return abs(x).sum(dim=dim, keepdim=keepdim)
    if ord in (math.inf, -math.inf):
        return _norm_inf(x, ord=ord, dim=dim, keepdim=keepdim)
    if ord == 0:
        return (x != 0).sum(dim=dim, keepdim=keepdim).to(x.dtype)
    return (abs(x) ** ord).sum(dim=dim, keepdim=keepdim) ** (1.0 / ord)


def norm(input: Tensor, p="fro", dim=None, keepdim: bool = False) -> Tensor:
    """``torch.norm``: the vector ``p``-norm over ``dim`` (2-norm of all elements by default)."""
    return vector_norm(input, 2 if p in ("fro", None) else p, dim=dim, keepdim=keepdim)


@defop(ref=lambda torch: torch.cumsum,
       vjp=lambda g, dim: g.flip(dim).cumsum(dim=dim).flip(dim), node="CumsumBackward0", methods=("cumsum",),
       samples=lambda rng: [((_r(rng, 3, 4),), {"dim": 1}), ((_r(rng, 3, 4),), {"dim": -2}),
                            ((_r(rng, 5),), {"dim": 0})])
def cumsum(xp, input, *, dim):
    """Cumulative sum along ``dim``; integers and bools sum to int64."""
    if input.dtype.kind in "biu":
        return xp.cumsum(input, axis=dim, dtype=np.int64)
    return xp.cumsum(input, axis=dim)



# -- logical reductions, closeness ---------------------------------------


def _logical_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    x = rng.uniform(size=(3, 4)) > 0.3
    return [((x,), {}), ((x,), {"dim": 1}), ((x,), {"dim": 0, "keepdim": True}), ((x,), {"dim": (0, 1)}),
            ((np.array([[1, 0], [2, 3]], dtype=np.uint8),), {"dim": 1}), ((_r(rng, 0, 3),), {"dim": 0}),
            ((_r(rng, 2, 3),), {})]


def _logical(xp: Any, fn: Any, input: Any, dim: Any, keepdim: bool) -> Any:
    out = fn(input, axis=_axis(dim), keepdims=keepdim)
    return xp.asarray(out, dtype=np.uint8 if input.dtype == np.uint8 else np.bool_)  # uint8 stays uint8


@defop(ref=lambda torch: torch.all, vjp=None, methods=("all",), samples=_logical_samples)
def all(xp, input, *, dim=None, keepdim=False):  # noqa: A001 - mirrors torch.all
    """Whether every element over ``dim`` (all dimensions by default) is nonzero."""
    return _logical(xp, xp.all, input, dim, keepdim)


@defop(ref=lambda torch: torch.any, vjp=None, methods=("any",), samples=_logical_samples)
def any(xp, input, *, dim=None, keepdim=False):  # noqa: A001 - mirrors torch.any
    """Whether any element over ``dim`` (all dimensions by default) is nonzero."""
    return _logical(xp, xp.any, input, dim, keepdim)


_TORCH_TYPE_NAMES = {"float16": "Half", "float32": "Float", "float64": "Double", "int8": "Char", "int16": "Short",
                     "int32": "Int", "int64": "Long", "uint8": "Byte", "bool": "Bool"}


def _isclose_parse(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08,
                   equal_nan: bool = False) -> tuple[tuple, dict]:
    if not isinstance(other, Tensor):
        raise TypeError(f"isclose(): argument 'other' (position 2) must be Tensor, not {type(other).__name__}")
    if input.dtype is not other.dtype:
        raise RuntimeError(f"{_TORCH_TYPE_NAMES[input.dtype.name]} did not match {_TORCH_TYPE_NAMES[other.dtype.name]}")
    if rtol < 0:
        raise RuntimeError(f"rtol must be greater than or equal to zero, but got {rtol}")
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {atol}")
    return (input, other), {"rtol": rtol, "atol": atol, "equal_nan": equal_nan}


@defop(ref=lambda torch: torch.isclose, vjp=None, methods=("isclose",), parse=_isclose_parse,
       samples=lambda rng: [((np.array([1.0, 2.0, np.nan, np.inf, 1e-9]),
                              np.array([1.0 + 1e-6, 2.1, np.nan, np.inf, 0.0])), {}),
                            ((np.array([1.0, np.nan]), np.array([1.0, np.nan])), {"equal_nan": True}),
                            ((np.array([[1.0], [2.0]]), np.array([1.05, 2.0])), {"rtol": 0.1, "atol": 0.0}),
                            ((np.array([1, 2, 5]), np.array([1, 3, 3])), {"atol": 1})])
def isclose(xp, input, other, *, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise ``|input - other| <= atol + rtol * |other|`` (NaNs equal only with ``equal_nan``)."""
    with np.errstate(invalid="ignore", over="ignore"):
        return xp.isclose(input, other, rtol=rtol, atol=atol, equal_nan=equal_nan)


def allclose(input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """Whether ``isclose`` holds for every element (a Python bool)."""
    return bool(isclose(input, other, rtol, atol, equal_nan).all())


def equal(input: Tensor, other: Tensor) -> bool:
    """Whether ``input`` and ``other`` have the same shape and elements (a Python
    bool; NaN is unequal to itself; dtypes may differ, as in PyTorch)."""
    for pos, (name, t) in enumerate((("input", input), ("other", other)), 1):
        if not isinstance(t, Tensor):
            raise TypeError(f"equal(): argument '{name}' (position {pos}) must be Tensor, not {type(t).__name__}")
    a, b = input._data, other._data
    return a.shape == b.shape and bool((a == b).all())


def var_mean(input: Tensor, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
             correction: float | None = None) -> tuple[Tensor, Tensor]:
    """``(var(input, dim), mean(input, dim))`` with the same ``correction`` and ``keepdim``."""
    dim, correction = _correction(dim, unbiased, correction)
    return var(input, dim, correction, keepdim), input.mean(dim, keepdim)


def std_mean(input: Tensor, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,
             correction: float | None = None) -> tuple[Tensor, Tensor]:
    """``(std(input, dim), mean(input, dim))`` with the same ``correction`` and ``keepdim``."""
    dim, correction = _correction(dim, unbiased, correction)
    return std(input, dim, correction, keepdim), input.mean(dim, keepdim)


def _correction(dim: Any, unbiased: bool | None, correction: float | None) -> tuple[Any, float]:
    """``(dim, correction)`` from PyTorch's overloads: ``(input, unbiased)``,
    ``(input, dim, unbiased)`` and ``(input, dim, *, correction)``."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise TypeError("var_mean(): pass either unbiased or correction, not both")
    if correction is not None:
        return dim, correction
    return dim, 1 if unbiased is None or unbiased else 0


def _softmax_not_implemented(name: str, dtype: np.dtype, ndim: int, dim: int) -> NotImplementedError:
    """PyTorch's error for (log_)softmax of an integer or bool tensor, naming its CPU kernel."""
    kernel = f"{name}_lastdim_kernel_impl" if dim in (-1, (ndim or 1) - 1) else f"{name}_kernel_impl"
    return NotImplementedError(f'"{kernel}" not implemented for \'{_TORCH_TYPE_NAMES[dtype.name]}\'')


