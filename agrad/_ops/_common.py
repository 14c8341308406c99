"""Helpers shared by the op-table modules: sample makers for the tests,
dimension handling, and the broadcast-back of reductions."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from agrad import _backends, _dtype
from agrad._tensor import Tensor

# -- helpers shared by entries -------------------------------------------------


def _r(rng: np.random.Generator, *shape: int, low: float = -2.0, high: float = 2.0) -> np.ndarray:
    return rng.uniform(low, high, size=shape)


def _pos(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(0.5, 2.0, size=shape)


def _unary_samples(domain=_r):
    return lambda rng: [((domain(rng, 3, 4),), {}), ((domain(rng),), {}), ((domain(rng, 0, 2),), {})]


def _binary_samples(domain=_r):
    return lambda rng: [
        ((domain(rng, 3, 4), domain(rng, 3, 4)), {}),
        ((domain(rng, 3, 1), domain(rng, 4)), {}),      # broadcasting both ways
        ((domain(rng), domain(rng, 2, 3)), {}),         # 0-d with n-d
        ((domain(rng, 2, 3), 1.5), {}),                 # python scalar
        ((domain(rng, 0, 3), domain(rng, 3)), {}),      # empty
    ]


def _axis(dim: Any) -> Any:
    return tuple(dim) if isinstance(dim, list) else dim


def _reduced_count(shape: tuple[int, ...], dim: Any) -> int:
    if dim is None:
        return int(np.prod(shape, dtype=np.int64))
    dims = (dim,) if isinstance(dim, int) else dim
    return int(np.prod([shape[d] for d in dims], dtype=np.int64))


def _expand_reduced(g: Tensor, shape: tuple[int, ...], dim: Any, keepdim: bool) -> Tensor:
    """Broadcast the gradient of a reduction back to the reduced input's shape."""
    if dim is not None and not keepdim:
        dims = sorted(d % len(shape) for d in ((dim,) if isinstance(dim, int) else dim))
        kept = list(g.shape)
        for d in dims:
            kept.insert(d, 1)
        g = g.reshape(kept)
    elif dim is None and not keepdim and g.ndim:
        g = g.reshape((1,) * len(shape))  # (a 0-d gradient, the usual case, expands as is)
    return g.expand(shape)


def _on_device(like: Any, host: np.ndarray) -> Any:
    """A host array a forward computed with numpy (random draws, window indices,
    interpolation weights) on the device of ``like``, an input array of the forward."""
    return host if type(like) is np.ndarray else _backends.transfer(host, _backends.device_of(like))


def _zeros_on(like: Tensor, shape: tuple[int, ...]) -> Tensor:
    """A constant tensor of zeros of ``shape``, with ``like``'s dtype and on its device."""
    return Tensor._make(_backends.zeros(shape, like._data.dtype, like.device))


def _grids(xp: Any, shape: tuple[int, ...]) -> list[Any]:
    """``arange(n)`` along each dimension of ``shape``, shaped to broadcast together:
    ``numpy.indices(shape, sparse=True)``, which CuPy lacks.  Made on the current
    device, so callers outside a forward wrap it in ``_backends.on``."""
    nd = len(shape)
    return [xp.arange(n).reshape(tuple(n if j == k else 1 for j in range(nd))) for k, n in enumerate(shape)]


def _shape_args(shape: tuple[Any, ...], op: str, arg: str = "size") -> tuple[int, ...]:
    """Sizes given as ``*ints`` or one sequence; a sequence's elements are checked by the kernel
    (see ``_errors.translate``), loose ints here, refusing what is not an int as PyTorch does."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    out = []
    for s in shape:
        try:
            out.append(operator.index(s))
        except TypeError:
            raise TypeError(f"{op}(): argument '{arg}' (position 1) must be tuple of ints, not {type(s).__name__}"
                            ) from None
    return tuple(out)


def _quiet(fn):
    """Silence numpy's floating-point warnings for ops whose domain includes
    IEEE special values (log(0) = -inf, x/0): PyTorch returns them silently."""

    def quiet(*args: Any, **kwargs: Any) -> Any:
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)

    quiet.__name__ = fn.__name__
    quiet.__doc__ = fn.__doc__
    quiet.__wrapped__ = fn
    return quiet


# Note [Positive NaN]
# ~~~~~~~~~~~~~~~~~~~
# numpy's log, log2 and sqrt of a negative number give a NaN with the sign bit
# set (the x86 default NaN); PyTorch's have it clear (its log1p and rsqrt keep
# it set, as numpy's).  ``_quiet_nan`` silences the op as ``_quiet`` does and
# asks numpy to report an invalid operation to a callback: only an output
# whose computation made a NaN is scanned to clear the bit, so valid inputs
# pay no extra pass (NaN inputs propagate with their own sign and report
# nothing, as in PyTorch).  CuPy reports nothing; CUDA's NaN is positive.


def _quiet_nan(fn):
    """``_quiet``, and NaNs made by the op get their sign bit clear (Note [Positive NaN])."""

    def quiet(xp: Any, *args: Any, **kwargs: Any) -> Any:
        invalid: list[int] = []
        with np.errstate(all="ignore", invalid="call", call=lambda err, flag: invalid.append(flag)):
            out = fn(xp, *args, **kwargs)
        if invalid:
            out = xp.where(xp.isnan(out), xp.abs(out), out)
        return out

    quiet.__name__ = fn.__name__
    quiet.__doc__ = fn.__doc__
    quiet.__wrapped__ = fn
    return quiet


def _is_bool(x: Any) -> bool:
    return isinstance(x, bool) or (isinstance(x, Tensor) and x.dtype is _dtype.bool)
