"""Numerical utilities: isin, trapezoid, cov, corrcoef, histogram, renorm, frexp, gradient, and friends.

Ops with a gradient of their own (``renorm``, ``mvlgamma``) are ``defop``
entries; ``frexp`` has two outputs and records one node through the
decompositions' ``_connect`` (Note [Decompositions]).  The rest are
composites of other ops (``trapezoid``, ``cov``, ``gradient``...), whose
gradients follow from theirs, or are integer-valued (``isin``,
``unravel_index``, ``histogram``).  PyTorch's deprecated ``torch.lu``,
``nuclear_norm`` and ``frobenius_norm`` warn as PyTorch's do, and the
functions PyTorch removed in 1.9 (``solve``, ``lstsq``, ``symeig``, ``eig``)
raise its error.
"""

from __future__ import annotations

import itertools
import math
import operator
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from agrad import _dtype
from agrad._ops._common import _pos, _quiet, _r
from agrad._ops._decompositions import (
    _connect,
    _constant,
    _kernel,
    _node_class,
    _plain,
    _result_type,
    _tensor,
    linalg_lu_solve,
    lu_factor_ex,
    matrix_norm,
)
from agrad._ops._elementwise import abs as _abs
from agrad._ops._elementwise import clamp, sign, sqrt, where
from agrad._ops._linalg import _legacy_name
from agrad._ops._pointwise import _in_float64, _lgamma, digamma, exp2
from agrad._ops._reductions import vector_norm
from agrad._ops._registry import defop
from agrad._ops._shape import _wrap_dim, cat
from agrad._tensor import Tensor

# The public names of this family (star-imported by ``agrad/__init__.py``).
__all__: list[str] = [
    "isin", "trapezoid", "trapz", "cumulative_trapezoid", "cov", "corrcoef", "unravel_index", "vander", "renorm",
    "frexp", "histogram", "gradient", "mvlgamma", "nuclear_norm", "frobenius_norm", "lu", "lu_solve",
    "solve", "lstsq", "symeig", "eig",
]


# -- membership ---------------------------------------------------------------------


def _isin_args(elements: Any, test_elements: Any, *, assume_unique: bool = False, invert: bool = False
               ) -> tuple[tuple, dict]:
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError(f"isin() received an invalid combination of arguments - got "
                        f"({type(elements).__name__}, {type(test_elements).__name__}), but expected a Tensor "
                        "for 'elements' or 'test_elements'")
    return (elements, test_elements), {"assume_unique": assume_unique, "invert": invert}


@defop(ref=lambda torch: torch.isin, vjp=None, parse=_isin_args,
       samples=lambda rng: [((np.array([[1, 2], [3, 4]]), np.array([2, 3, 7])), {}),
                            ((np.array([1, 2, 3, 4]), np.array([[4, 1]])), {"invert": True}),
                            ((np.array([1.0, 2.5, 3.0]), np.array([3, 1])), {}),
                            ((np.array([1, 2, 3]), 2), {}), ((3, np.array([1, 2, 3])), {}),
                            ((np.array(5), np.array([5, 6])), {"assume_unique": True}),
                            ((np.zeros((0, 2), dtype=np.int64), np.array([1])), {}),
                            ((np.array([1, 2]), np.zeros(0, dtype=np.int64)), {})])
def isin(xp, elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each element of ``elements`` is in ``test_elements`` (not in, with ``invert``),
    as bools of ``elements``' shape (``torch.isin``); either may be a number."""
    out = xp.isin(xp.asarray(elements), xp.asarray(test_elements).reshape(-1), assume_unique=assume_unique,
                  invert=invert)
    return xp.asarray(out, dtype=bool)


def unravel_index(indices: Tensor, shape: int | Sequence[int]) -> tuple[Tensor, ...]:
    """The coordinates (int64 tensors of ``indices``' shape, one per dim of ``shape``) of
    the flat ``indices`` into a tensor of ``shape`` (``torch.unravel_index``).

    Example::

        >>> import agrad
        >>> [t.tolist() for t in agrad.unravel_index(agrad.tensor([4, 7]), (2, 4))]
        [[1, 1], [0, 3]]
    """
    _tensor(indices, "unravel_index", "indices")
    if indices._data.dtype.kind not in "iu":
        raise TypeError(f"expected 'indices' to be integer dtype, but got agrad.{indices.dtype.name}")
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        dims: tuple[int, ...] = (int(shape),)
    elif isinstance(shape, Sequence):
        for d in shape:
            if not isinstance(d, (int, np.integer)) or isinstance(d, bool):
                raise TypeError(f"expected 'shape' sequence to only contain ints, but got {type(d)}")
        dims = tuple(int(d) for d in shape)
    else:
        raise TypeError(f"expected 'shape' to be int or sequence of ints, but got {type(shape)}")
    if any(d < 0 for d in dims):
        raise ValueError(f"'shape' cannot have negative values, but got {dims}")
    strides = tuple(reversed(list(itertools.accumulate(reversed((*dims[1:], 1)), operator.mul))))

    def kernel(xp: Any, idx: Any) -> Any:
        i = idx.astype(np.int64)[..., None]
        return xp.floor_divide(i, xp.asarray(strides, dtype=np.int64)) % xp.asarray(dims, dtype=np.int64)

    coords = _kernel(kernel, indices)
    return tuple(_plain(coords[..., k]) for k in range(len(dims)))


# -- integration --------------------------------------------------------------------


def _spacing_along(y: Tensor, x: Tensor, dim: int, fn: str) -> Tensor:
    """The differences of the sample points ``x`` along ``dim``, shaped to broadcast with
    ``y``'s: a 1-D ``x`` lies along ``dim``, a shorter one is aligned right (PyTorch's rule)."""
    if x.ndim == 1:
        if x.shape[0] != y.shape[dim]:
            raise RuntimeError(f"{fn}: There must be one `x` value for each sample point")
        x = x.reshape(tuple(x.shape[0] if d == dim else 1 for d in range(y.ndim)))
    elif x.ndim < y.ndim:
        x = x.reshape((1,) * (y.ndim - x.ndim) + x.shape)
    n = x.shape[dim]
    return x.narrow(dim, 1, n - 1) - x.narrow(dim, 0, n - 1)


def _trapezoid_args(y: Any, x: Any, dx: Any, dim: int, fn: str) -> int:
    _tensor(y, fn, "y")
    if x is not None and dx is not None:
        raise TypeError(f"{fn}() received both 'x' and 'dx'; pass one of them")
    if y.dtype.name == "bool" or (isinstance(x, Tensor) and x.dtype.name == "bool"):
        raise RuntimeError(f"{fn}: received a bool input for `x` or `y`, but bool is not supported")
    return _wrap_dim(dim, y.ndim)


def trapezoid(y: Tensor, x: Tensor | None = None, *, dx: float | None = None, dim: int = -1) -> Tensor:
    """The trapezoidal rule along ``dim``: with sample points ``x`` (a tensor) or a constant
    spacing ``dx`` (1 by default) (``torch.trapezoid``); an empty ``dim`` integrates to 0.

    Example::

        >>> import agrad
        >>> agrad.trapezoid(agrad.tensor([1.0, 2.0, 3.0])).item()
        4.0
        >>> agrad.trapezoid(agrad.tensor([1.0, 2.0, 3.0]), agrad.tensor([1.0, 2.0, 4.0])).item()
        6.5
    """
    d = _trapezoid_args(y, x, dx, dim, "trapezoid")
    n = y.shape[d]
    if n == 0:  # numpy's (and PyTorch's) answer for no samples
        return (y.sum(dim=d) * 0).to(y.dtype) if y.dtype.is_floating_point else y.sum(dim=d) * 0.0
    if isinstance(x, Tensor):
        step = _spacing_along(y, x, d, "trapezoid")
        return (step * (y.narrow(d, 0, n - 1) + y.narrow(d, 1, n - 1))).sum(dim=d) / 2.0
    return (y.sum(dim=d) - (y.select(d, 0) + y.select(d, -1)) * 0.5) * (1.0 if dx is None else dx)


trapz = trapezoid  # torch.trapz: the older name of trapezoid


def cumulative_trapezoid(y: Tensor, x: Tensor | None = None, *, dx: float | None = None, dim: int = -1) -> Tensor:
    """The running trapezoidal integral along ``dim`` (one element shorter than ``y`` there)
    (``torch.cumulative_trapezoid``)."""
    d = _trapezoid_args(y, x, dx, dim, "cumulative_trapezoid")
    n = max(y.shape[d] - 1, 0)
    pairs = y.narrow(d, 0, n) + y.narrow(d, min(1, y.shape[d]), n)
    if isinstance(x, Tensor):
        if y.shape[d] == 0:
            return pairs * 0.5
        return (_spacing_along(y, x, d, "cumulative_trapezoid") * pairs).cumsum(dim=d) / 2.0
    return ((1.0 if dx is None else dx) / 2.0 * pairs).cumsum(dim=d)


# -- covariance ---------------------------------------------------------------------


def _check_weights(w: Tensor, name: str, observations: int, integral: bool) -> None:
    if w.ndim > 1:
        raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got {name} with "
                           f"{w.ndim} dimensions")
    kind = w._data.dtype.kind
    if integral and kind not in "iu":
        raise RuntimeError(f"cov(): expected {name} to have integral dtype but got {name} with "
                           f"{_legacy_name(w._data.dtype)} dtype")
    if not integral and kind != "f":
        raise RuntimeError(f"cov(): expected {name} to have floating point dtype but got {name} with "
                           f"{_legacy_name(w._data.dtype)} dtype")
    if w.numel() != observations:
        raise RuntimeError(f"cov(): expected {name} to have the same numel as there are observations in the "
                           f"input but got {w.numel()} != {observations}")
    if observations and bool((w < 0).any()):
        raise RuntimeError(f"cov(): {name} cannot be negative")


def cov(input: Tensor, *, correction: int = 1, fweights: Tensor | None = None,
        aweights: Tensor | None = None) -> Tensor:
    """The covariance matrix of the variables in ``input``'s rows (observations in columns),
    with frequency and analytic weights (``torch.cov``; PyTorch's algorithm).

    Example::

        >>> import agrad
        >>> agrad.cov(agrad.tensor([[1.0, 2.0, 3.0], [2.0, 2.0, 5.0]])).tolist()
        [[1.0, 1.5], [1.5, 3.0]]
    """
    _tensor(input, "cov", "input")
    if input.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.ndim} dimensions")
    x = input.reshape(1, -1) if input.ndim < 2 else input
    observations = x.shape[1]
    w = None
    if fweights is not None:
        _check_weights(fweights, "fweights", observations, True)
        w = fweights
    if aweights is not None:
        _check_weights(aweights, "aweights", observations, False)
        w = aweights if w is None else w * aweights
    if w is None:
        w_sum: Any = observations
        avg = x.sum(dim=1) / observations
        factor: Any = observations - correction
    else:
        w_sum = w.sum()
        if not bool(w_sum != 0):
            raise RuntimeError("cov(): weights sum to zero, can't be normalized")
        avg = (x * w).sum(dim=1) / w_sum
        factor = w_sum - correction * (w * aweights).sum() / w_sum \
            if aweights is not None and correction != 0 else w_sum - correction
    if bool(factor <= 0):
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than the number "
                      "of observations.", UserWarning, stacklevel=2)
        factor = factor * 0
    centred = x - avg.unsqueeze(1)
    c = centred @ (centred if w is None else centred * w).mT
    with np.errstate(divide="ignore", invalid="ignore"):
        return (c / factor).squeeze()


def corrcoef(input: Tensor) -> Tensor:
    """Pearson's correlation coefficients of the variables in ``input``'s rows, clamped to
    [-1, 1] (``torch.corrcoef``)."""
    _tensor(input, "corrcoef", "input")
    if input.ndim > 2:
        raise RuntimeError(f"corrcoef(): expected input to have two or fewer dimensions but got an input with "
                           f"{input.ndim} dimensions")
    c = cov(input)
    with np.errstate(divide="ignore", invalid="ignore"):
        if c.ndim == 0:
            return c / c
        stddev = sqrt(c.diagonal())
        c = c / stddev.reshape(-1, 1)
        c = c / stddev.reshape(1, -1)
    return clamp(c, -1, 1)


# -- matrices of powers, norms ------------------------------------------------------


def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:
    """The Vandermonde matrix of the 1-D ``x``: columns ``x^(N-1) … x^0`` (``x^0 …`` with
    ``increasing``), N = len(x) by default; integers compute in int64 (``torch.vander``)."""
    _tensor(x, "vander", "x")
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    if N is None:
        N = x.shape[0]
    if N < 0:
        raise RuntimeError("N must be non-negative.")
    if x._data.dtype.kind in "biu":
        x = x.to(_dtype.int64)
    powers = _constant(x, lambda xp: xp.arange(N, dtype=x._data.dtype))
    out = x.unsqueeze(-1) ** powers
    return out if increasing else out.flip(-1)


def _renorm_args(input: Tensor, p: Any, dim: int, maxnorm: Any) -> tuple[tuple, dict]:
    _tensor(input, "renorm", "input")
    if input.ndim < 2:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {input.ndim} dimensions")
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    if input._data.dtype.kind != "f":
        raise RuntimeError(f"linalg.vector_norm: Expected a floating point or complex tensor as input. "
                           f"Got {_legacy_name(input._data.dtype)}")
    d = _wrap_dim(dim, input.ndim)
    return (input,), {"p": p, "dims": tuple(k for k in range(input.ndim) if k != d), "maxnorm": maxnorm}


def _norm_direction(input: Tensor, norm: Tensor, p: Any, dims: tuple[int, ...]) -> Tensor:
    """d norm / d input for ``norm = vector_norm(input, p, dims, keepdim=True) > 0``
    (PyTorch's norm_backward without its incoming gradient)."""
    if p == 1:
        return sign(input)
    if p == 2:
        return input / norm
    if p == math.inf:
        peak = (_abs(input) == norm).to(input.dtype)
        return sign(input) * peak / peak.sum(dim=dims, keepdim=True)
    return sign(input) * (_abs(input) / norm) ** (p - 1)


def _renorm_grad(g: Tensor, input: Tensor, p: Any, dims: tuple[int, ...], maxnorm: Any) -> Tensor:
    # PyTorch's renorm_backward: out = input * maxnorm / (norm + 1e-7) where the
    # slice's norm exceeds maxnorm, so the factor's own gradient adds a term.
    norm = vector_norm(input, p, dim=dims, keepdim=True)
    over = norm > maxnorm
    safe = where(over, norm, 1.0)  # the other branch is discarded: keep it finite
    invnorm = 1.0 / (safe + 1e-7)
    along = (input * g).sum(dim=dims, keepdim=True) * _norm_direction(input, safe, p, dims)
    return where(over, (g - invnorm * along) * (invnorm * maxnorm), g)


def _renorm_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    x = _r(rng, 3, 4)
    return [((x, 2, 0, 1.5), {}), ((x, 1, 1, 2.0), {}), ((_r(rng, 2, 3, 4), 3, -1, 1.0), {}),
            ((x, math.inf, 0, 1.0), {}), ((x, 2, 0, 100.0), {}), ((_r(rng, 4, 6)[:, ::2], 2, 1, 0.5), {}),
            ((_r(rng, 0, 3), 2, 0, 1.0), {})]


@defop(ref=lambda torch: torch.renorm, vjp=_renorm_grad, node="RenormBackward0", methods=("renorm",),
       inplace=("renorm_",), parse=_renorm_args, samples=_renorm_samples)
def renorm(xp, input, *, p, dims, maxnorm):
    """``input`` with each slice along the kept dim scaled down to ``p``-norm ``maxnorm``
    where its norm exceeds it (``torch.renorm(input, p, dim, maxnorm)``)."""
    a = xp.abs(input)
    if p == math.inf:
        norm = xp.amax(a, axis=dims, keepdims=True, initial=0)
    else:
        norm = xp.sum(a ** p, axis=dims, keepdims=True) ** (1.0 / p)
    factor = xp.where(norm > maxnorm, maxnorm / (norm + 1e-7), 1.0).astype(input.dtype)
    return input * factor


def _matrix_norm_warning(name: str, replacement: str) -> None:
    warnings.warn(f"at::{name} is deprecated and it is just left for JIT compatibility. It will be removed in a "
                  f"future PyTorch release. Please use `{replacement}` instead", UserWarning, stacklevel=3)


def nuclear_norm(input: Tensor, dim: Any = None, keepdim: bool = False) -> Tensor:
    """The nuclear norm of ``input`` (2-D, or over the two dims ``dim``); deprecated, as in
    PyTorch, for ``linalg.matrix_norm(A, 'nuc', dim, keepdim)`` (``torch.nuclear_norm``)."""
    if isinstance(dim, bool):  # nuclear_norm(input, keepdim)
        dim, keepdim = None, dim
    _matrix_norm_warning("nuclear_norm", "linalg.matrix_norm(A, 'nuc', dim, keepdim)")
    if dim is None:
        if input.ndim != 2:
            raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 dimensions.")
        dim = (0, 1)
    return matrix_norm(input, "nuc", dim, keepdim)


def frobenius_norm(input: Tensor, dim: Any, keepdim: bool = False) -> Tensor:
    """The 2-norm of ``input`` over ``dim`` (at most two dims); deprecated, as in PyTorch, for
    ``linalg.vector_norm(A, 2., dim, keepdim)`` (``torch.frobenius_norm``)."""
    _matrix_norm_warning("frobenius_norm", "linalg.vector_norm(A, 2., dim, keepdim)")
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if len(dims) > 2:
        raise RuntimeError(f"Expected at most 2 dimensions, but got {len(dims)} dimensions instead.")
    return vector_norm(input, 2, dim=dims, keepdim=keepdim)


# -- mantissa and exponent ----------------------------------------------------------

_Frexp = _result_type("frexp", ("mantissa", "exponent"))


def _frexp_vjp(grads: list[Tensor | None], exponent: Tensor) -> list[Tensor | None]:
    g = grads[0]
    assert g is not None  # the exponent takes no gradient: only the mantissa's flows
    return [g / exp2(exponent)]


_FrexpNode = _node_class("FrexpBackward0", _frexp_vjp)


def frexp(input: Tensor) -> Any:
    """``(mantissa, exponent)`` with ``input = mantissa * 2**exponent``, ``|mantissa|`` in
    [0.5, 1) and an int32 exponent (``torch.frexp``); the mantissa takes the gradient.

    Example::

        >>> import agrad
        >>> m, e = agrad.frexp(agrad.tensor([8.0, 0.75]))
        >>> m.tolist(), e.tolist(), e.dtype
        ([0.5, 0.75], [4, 0], agrad.int32)
    """
    _tensor(input, "frexp", "input")
    if input._data.dtype.kind != "f":
        raise RuntimeError("torch.frexp() only supports floating-point dtypes")
    mantissa, exponent = _kernel(lambda xp, a: xp.frexp(a), input)
    out = Tensor._make(mantissa.astype(input._data.dtype, copy=False))
    e = _plain(exponent.astype(np.int32, copy=False))
    _connect(_FrexpNode, [input], [out], [e], {})
    return _Frexp(out, e)


# -- multivariate log-gamma ---------------------------------------------------------


def _mvlgamma_args(input: Tensor, p: int) -> tuple[tuple, dict]:
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    return (input,), {"p": p}


def _mvlgamma_grad(g: Tensor, input: Tensor, p: int) -> Tensor:
    # PyTorch's mvlgamma_backward: the sum of digamma at input - j/2, j < p.
    shifts = _constant(input, lambda xp: -xp.arange(p, dtype=input._data.dtype) / 2)
    return g * digamma(input.unsqueeze(-1) + shifts).sum(dim=-1)


def _mvlgamma_kernel(xp: Any, x: Any, p: int) -> Any:
    shifted = x[..., None] - xp.arange(p, dtype=np.float64) / 2
    return _lgamma(xp, shifted).sum(axis=-1) + p * (p - 1) / 4 * math.log(math.pi)


@defop(ref=lambda torch: torch.mvlgamma, vjp=_mvlgamma_grad, node="MvlgammaBackward0", methods=("mvlgamma",),
       inplace=("mvlgamma_",), to_float=True, parse=_mvlgamma_args,
       samples=lambda rng: [((_pos(rng, 3, 4) + 1.5, 2), {}), ((_pos(rng, 5) + 3, 4), {}),
                            ((_pos(rng, 3) + 0.5, 1), {}), ((np.asarray(_pos(rng) + 2), 3), {}),
                            ((_pos(rng, 0, 2) + 2, 2), {})])  # integer inputs: tests/ops/test_numeric.py
@_quiet
def mvlgamma(xp, input, *, p):
    """The multivariate log-gamma function of dimension ``p``, elementwise: ``p(p-1)/4
    log(pi) + sum_j lgamma(input - j/2)`` (``torch.mvlgamma``).  Its domain is
    ``input > (p-1)/2``; PyTorch 2.13 no longer checks it, and neither does agrad."""
    return _in_float64(_mvlgamma_kernel, xp, input, p)


# -- histograms ---------------------------------------------------------------------

_Histogram = _result_type("histogram", ("hist", "bin_edges"))


def histogram(input: Tensor, bins: int | Tensor = 100, *, range: Sequence[float] | None = None,  # noqa: A002
              weight: Tensor | None = None, density: bool = False) -> Any:
    """``(hist, bin_edges)``: the histogram of ``input``'s elements in ``bins`` equal bins
    (over ``range``, else the data's range) or between the given edges; elements outside
    are left out, the last bin includes its right edge (``torch.histogram``).  ``weight``
    weighs each element; ``density`` normalises to a density.  Floating point only."""
    _tensor(input, "histogram", "input")
    dt = input._data.dtype
    if dt.kind != "f":
        raise NotImplementedError(f"\"histogramdd\" not implemented for '{_legacy_name(dt)}'")
    if isinstance(bins, Tensor):
        if bins.ndim != 1:
            raise RuntimeError(f"torch.histogramdd: bins tensor should have one dimension, but got "
                               f"{bins.ndim} dimensions in the bins tensor for dimension 0")
        if bins._data.dtype != dt:
            raise RuntimeError(f"torch.histogramdd: input tensor and bins tensors should have the same dtype, but "
                               f"got input with dtype {_legacy_name(dt).lower()} and bins for dimension 0 with "
                               f"dtype {_legacy_name(bins._data.dtype).lower()}")
        if bins.shape[0] < 1:
            raise RuntimeError("torch.histogramdd: bins tensor should have at least 1 element, but got 0 "
                               "elements for dimension 0")
    elif bins <= 0:
        raise RuntimeError(f"torch.histogramdd: number of bins should be positive, but got {bins} for dimension 0")
    if weight is not None and (weight.shape != input.shape or weight._data.dtype != dt):
        raise RuntimeError("torch.histogramdd: if weight tensor is provided it should have the same shape and "
                           "dtype as the input tensor")

    def edges_of(xp: Any, a: Any) -> Any:
        if range is not None:
            low, high = float(range[0]), float(range[1])
        elif a.size:
            low, high = float(xp.amin(a)), float(xp.amax(a))
        else:
            low, high = 0.0, 1.0
        if low > high:
            raise RuntimeError(f"torch.histogramdd: min should not exceed max, but got min {low:g} max {high:g} "
                               "for dimension 0")
        if not (math.isfinite(low) and math.isfinite(high)):
            raise RuntimeError(f"torch.histogramdd: dimension 0's range [{low:g}, {high:g}] is not finite")
        if low == high:
            low, high = low - 0.5, high + 0.5
        return xp.linspace(low, high, bins + 1).astype(dt)

    def kernel(xp: Any, a: Any, *rest: Any) -> tuple[Any, Any]:
        edges = rest[0] if isinstance(bins, Tensor) else edges_of(xp, a)
        w = rest[-1].reshape(-1) if weight is not None else None
        x = a.reshape(-1)
        n = edges.shape[0] - 1
        with np.errstate(invalid="ignore"):
            inside = (x >= edges[0]) & (x <= edges[-1])
        pos = xp.minimum(xp.searchsorted(edges, x[inside], side="right") - 1, n - 1)
        hist = xp.bincount(pos, weights=None if w is None else w[inside], minlength=n)[:n].astype(dt)
        if density:
            with np.errstate(divide="ignore", invalid="ignore"):
                hist = hist / (hist.sum() * xp.diff(edges))
        return hist, edges

    tensors = [input] + ([bins] if isinstance(bins, Tensor) else []) + ([weight] if weight is not None else [])
    hist, edges = _kernel(kernel, *tensors)
    return _Histogram(_plain(hist), _plain(edges.copy()))


# -- numerical gradient -------------------------------------------------------------


def _gradient_dims(input: Tensor, spacing: Any, dim: Any, edge_order: int) -> tuple[list[int], list[Any]]:
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    dims = list(range(input.ndim)) if dim is None else [dim] if isinstance(dim, int) else list(dim)
    dims = [_wrap_dim(d, input.ndim) for d in dims]
    spacings = list(spacing) if isinstance(spacing, (list, tuple)) else [spacing] * len(dims)
    if len(spacings) != len(dims):
        raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or it's spacing and dim "
                           f"arguments to have the same length, but got a spacing argument of length "
                           f"{len(spacings)} and a dim argument of length {len(dims)}.")
    for d in dims:
        if input.shape[d] < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least edge_order+1")
    for d, s in zip(dims, spacings):
        if isinstance(s, Tensor) and (s.ndim != 1 or s.shape[0] != input.shape[d]):
            raise RuntimeError(f"torch.gradient expected each tensor to be on the same device and to have the "
                               f"size of the dimension {d} of input, but got a tensor of shape {list(s.shape)}")
    return dims, spacings


def _uniform_gradient(f: Tensor, d: int, h: Any, edge_order: int) -> Tensor:
    n = f.shape[d]

    def s(start: int, stop: int) -> Tensor:
        start, stop = start % n if start < 0 else start, stop % n if stop <= 0 else stop
        return f.narrow(d, start, stop - start)

    center = (s(2, n) - s(0, -2)) / h
    if edge_order == 1:
        first = (s(1, 2) - s(0, 1)) / h
        last = (s(-1, n) - s(-2, -1)) / h
    else:
        first = (-1.5 * s(0, 1) + 2 * s(1, 2) - 0.5 * s(2, 3)) / h
        last = (0.5 * s(-3, -2) - 2 * s(-2, -1) + 1.5 * s(-1, n)) / h
    return cat([first, center / 2, last], dim=d)


def _coordinate_gradient(f: Tensor, d: int, x: Tensor, edge_order: int) -> Tensor:
    n = f.shape[d]
    shape = tuple(-1 if k == d else 1 for k in range(f.ndim))
    h = x.narrow(0, 1, n - 1) - x.narrow(0, 0, n - 1)
    h1, h2 = h.narrow(0, 0, n - 2), h.narrow(0, 1, n - 2)
    a = (-h2 / (h1 * (h1 + h2))).reshape(shape)
    b = ((h2 - h1) / (h1 * h2)).reshape(shape)
    c = (h1 / (h2 * (h1 + h2))).reshape(shape)
    center = a * f.narrow(d, 0, n - 2) + b * f.narrow(d, 1, n - 2) + c * f.narrow(d, 2, n - 2)
    if edge_order == 1:
        first = (f.narrow(d, 1, 1) - f.narrow(d, 0, 1)) / h[0]
        last = (f.narrow(d, n - 1, 1) - f.narrow(d, n - 2, 1)) / h[-1]
    else:
        d0, d1, e0, e1 = h[0], h[1], h[-1], h[-2]
        first = (-(2.0 * d0 + d1) / (d0 * (d0 + d1)) * f.narrow(d, 0, 1) + (d0 + d1) / (d0 * d1) * f.narrow(d, 1, 1)
                 - d0 / (d1 * (d0 + d1)) * f.narrow(d, 2, 1))
        last = (e0 / (e1 * (e0 + e1)) * f.narrow(d, n - 3, 1) - (e0 + e1) / (e0 * e1) * f.narrow(d, n - 2, 1)
                + (2 * e0 + e1) / (e0 * (e0 + e1)) * f.narrow(d, n - 1, 1))
    return cat([first, center, last], dim=d)


def gradient(input: Tensor, *, spacing: Any = 1, dim: Any = None, edge_order: int = 1) -> tuple[Tensor, ...]:
    """The derivative of the samples ``input`` along each dim in ``dim`` (all by default),
    by central differences inside and one-sided ones of order ``edge_order`` at the ends
    (``torch.gradient``).  ``spacing`` is one step for all dims, one per dim, or per dim
    the sample coordinates (1-D tensors).

    Example::

        >>> import agrad
        >>> agrad.gradient(agrad.tensor([1.0, 2.0, 4.0, 8.0]))[0].tolist()
        [1.0, 1.5, 3.0, 4.0]
    """
    _tensor(input, "gradient", "input")
    dims, spacings = _gradient_dims(input, spacing, dim, edge_order)
    return tuple(_coordinate_gradient(input, d, s, edge_order) if isinstance(s, Tensor)
                 else _uniform_gradient(input, d, s, edge_order) for d, s in zip(dims, spacings))


# -- deprecated LU, removed solvers -------------------------------------------------

_LU_DEPRECATED = (
    "torch.lu is deprecated in favor of torch.linalg.lu_factor / torch.linalg.lu_factor_ex and will be removed in a "
    "future PyTorch release.\nLU, pivots = torch.lu(A, compute_pivots)\nshould be replaced with\nLU, pivots = "
    "torch.linalg.lu_factor(A, compute_pivots)\nand\nLU, pivots, info = torch.lu(A, compute_pivots, "
    "get_infos=True)\nshould be replaced with\nLU, pivots, info = torch.linalg.lu_factor_ex(A, compute_pivots)")


def lu(A: Tensor, pivot: bool = True, get_infos: bool = False) -> tuple[Tensor, ...]:
    """``(LU, pivots)`` (and ``infos`` with ``get_infos``) of ``linalg.lu_factor_ex``;
    deprecated, with PyTorch's warning (``torch.lu``)."""
    warnings.warn(_LU_DEPRECATED, UserWarning, stacklevel=2)
    LU, pivots, info = lu_factor_ex(A, pivot=pivot)
    return (LU, pivots, info) if get_infos else (LU, pivots)


def lu_solve(b: Tensor, LU_data: Tensor, LU_pivots: Tensor) -> Tensor:
    """The solution of ``A X = b`` from A's ``lu_factor`` (``torch.lu_solve``: the older
    argument order of ``linalg.lu_solve``)."""
    return linalg_lu_solve(LU_data, LU_pivots, b)


_REMOVED = "This function was deprecated since version 1.9 and is now removed. "
_REMOVED_LSTSQ = (
    _REMOVED + "`torch.lstsq` is deprecated in favor of `torch.linalg.lstsq`.\n`torch.linalg.lstsq` has reversed "
    "arguments and does not return the QR decomposition in the returned tuple (although it returns other "
    "information about the problem).\n\nTo get the QR decomposition consider using `torch.linalg.qr`.\n\nThe "
    "returned solution in `torch.lstsq` stored the residuals of the solution in the last m - n columns of the "
    "returned value whenever m > n. In torch.linalg.lstsq, the residuals are in the field 'residuals' of the "
    "returned named tuple.\n\nThe unpacking of the solution, as in\nX, _ = torch.lstsq(B, A).solution[:A.size(1)]\n"
    "should be replaced with:\nX = torch.linalg.lstsq(A, B).solution")
_REMOVED_SOLVE = (
    _REMOVED + "`torch.solve` is deprecated in favor of `torch.linalg.solve`. `torch.linalg.solve` has its "
    "arguments reversed and does not return the LU factorization.\n\nTo get the LU factorization see `torch.lu`, "
    "which can be used with `torch.lu_solve` or `torch.lu_unpack`.\nX = torch.solve(B, A).solution should be "
    "replaced with:\nX = torch.linalg.solve(A, B)")
_REMOVED_SYMEIG = (
    _REMOVED + "The default behavior has changed from using the upper triangular portion of the matrix by default "
    "to using the lower triangular portion.\n\nL, _ = torch.symeig(A, upper=upper) should be replaced with:\nL = "
    "torch.linalg.eigvalsh(A, UPLO='U' if upper else 'L')\n\nand\n\nL, V = torch.symeig(A, eigenvectors=True) "
    "should be replaced with:\nL, V = torch.linalg.eigh(A, UPLO='U' if upper else 'L')")
_REMOVED_EIG = (
    _REMOVED + "`torch.linalg.eig` returns complex tensors of dtype `cfloat` or `cdouble` rather than real tensors "
    "mimicking complex tensors.\n\nL, _ = torch.eig(A) should be replaced with:\nL_complex = "
    "torch.linalg.eigvals(A)\n\nand\n\nL, V = torch.eig(A, eigenvectors=True) should be replaced with:\n"
    "L_complex, V_complex = torch.linalg.eig(A)")


def solve(*args: Any, **kwargs: Any) -> Any:
    """Removed in PyTorch 1.9: raises its RuntimeError (use ``linalg.solve``)."""
    raise RuntimeError(_REMOVED_SOLVE)


def lstsq(*args: Any, **kwargs: Any) -> Any:
    """Removed in PyTorch 1.9: raises its RuntimeError (use ``linalg.lstsq``)."""
    raise RuntimeError(_REMOVED_LSTSQ)


def symeig(*args: Any, **kwargs: Any) -> Any:
    """Removed in PyTorch 1.9: raises its RuntimeError (use ``linalg.eigh``)."""
    raise RuntimeError(_REMOVED_SYMEIG)


def eig(*args: Any, **kwargs: Any) -> Any:
    """Removed in PyTorch 1.9: raises its RuntimeError (``linalg.eig`` is complex, which agrad lacks)."""
    raise RuntimeError(_REMOVED_EIG)


def _lu_solve_method(self: Tensor, LU_data: Tensor, LU_pivots: Tensor) -> Tensor:
    """``b.lu_solve(LU_data, LU_pivots)``."""
    return lu_solve(self, LU_data, LU_pivots)


# Tensor methods of this family that are not one entry's ``methods=``
# (composites, aliases with another signature); bound by ``_methods.bind``.
METHODS: dict[str, Any] = {
    "cov": cov,
    "corrcoef": corrcoef,
    "frexp": frexp,
    "histogram": histogram,
    "lu": lu,
    "lu_solve": _lu_solve_method,
    "solve": solve,
    "lstsq": lstsq,
    "symeig": symeig,
    "eig": eig,
}
