"""The hand-written Tensor methods, bound in one place.

Every Tensor method comes from one of two places: an op's ``defop`` entry
(``methods=``, ``rmethods=``, ``inplace=``; ``_registry``) or the table
:data:`METHODS` below, for methods that are not one table op (``clamp``
picks an op by its arguments, ``to`` moves and casts, ``max`` is a
reduction or an elementwise op) or that PyTorch names differently.  The
table is bound when ``agrad._ops`` is imported, after every family module;
no name in it is also an entry's.

It also holds the random draws PyTorch records in the graph (``normal`` of
tensors, ``bernoulli``, ``poisson`` and the in-place fills ``normal_``,
``uniform_``...): op-table entries whose gradient is zero and whose in-place
forms are hand-written methods here (Note [Random draws are ops]).  They draw
from the generators of ``agrad._creation``, which cannot hold them itself: it
may not import the op table, since this module imports it for ``Tensor.new_*``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from agrad import _backends, _creation, _dtype
from agrad._device import CPU
from agrad._errors import broadcast_error, dim_out_of_range
from agrad._ops import (
    _aliases,
    _conv,
    _decompositions,
    _elementwise,
    _numeric,
    _pointwise,
    _pool,
    _reductions,
    _scatter,
    _shape,
    _sorting,
    _structure,
    _views,
)
from agrad._ops._common import _r, _zeros_on
from agrad._ops._inplace import inplace_method
from agrad._ops._registry import BOUND_METHODS, defop
from agrad._tensor import Tensor

__all__ = ["METHODS", "bind", "normal", "bernoulli", "poisson"]


def _to_dtype(dt: _dtype.dtype) -> Callable[[Tensor], Tensor]:
    """``t.float()``, ``t.long()``…: this tensor cast to ``dt``."""
    return lambda self: _shape._to(self, dt)


# -- random draws ----------------------------------------------------------------------

# Note [Random draws are ops]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch records a node for a random op whose input requires grad
# (``normal(mean, std)`` -> NormalBackward3, ``x.mul(1).uniform_()`` ->
# UniformBackward0) and gives its input a gradient of zeros: the draw is not
# reparameterised.  So each is an op-table entry with a zero vjp, as
# ``fill_`` is.  The numbers are drawn on the host from the generator
# (``agrad._creation``) and copied to the input's device, as the random
# factories' are, so a seed gives the same numbers on every device.  Their
# values cannot be compared with PyTorch's (another generator) and their
# gradients are not derivatives, so ``normal``, ``bernoulli`` and ``poisson``
# carry no samples (they are tested in tests/api/test_factories.py); the
# fills' samples are the degenerate draws PyTorch accepts (``std=0``,
# ``uniform_(a, a)``, ``bernoulli_(1)``...), whose values are certain.


def _zero_grad(g: Tensor) -> Tensor:
    """The gradient PyTorch gives the input of a random draw: zeros (Note [Random draws are ops])."""
    return _zeros_on(g, g.shape)


def _on_device(like: Any, host: np.ndarray) -> Any:
    """Host draws on the device of ``like``, an input array of the forward."""
    return host if type(like) is np.ndarray else _backends.transfer(host, _backends.device_of(like))


def _on_host(array: Any) -> np.ndarray:
    return array if type(array) is np.ndarray else _backends.transfer(array, CPU)


def _g(value: Any) -> str:
    """A number as PyTorch's messages print a double (``-1``, ``0.5``)."""
    return f"{float(value):g}"


def _require_floating(t: Tensor, kernel: str) -> None:
    if not t.dtype.is_floating_point:
        raise NotImplementedError(f'"{kernel}" not implemented for \'{_dtype.SCALAR_TYPE_NAMES[t.dtype.name]}\'')


def _random_bounds(np_dtype: Any) -> tuple[int, int]:
    """``random_()``'s range: every integer the dtype holds exactly, from 0."""
    if np_dtype.kind == "b":
        return 0, 1
    if np_dtype.kind in "iu":
        return 0, int(np.iinfo(np_dtype).max)
    mantissa = {2: 8 if np_dtype == _dtype.bfloat16.np else 11, 4: 24, 8: 53}[np_dtype.itemsize]
    return 0, 1 << mantissa


def _fill_draws(kind: str, params: tuple[Any, ...], shape: tuple[int, ...], np_dtype: Any,
                rng: np.random.Generator) -> np.ndarray:
    """The host draws of the in-place fill ``kind`` (its parameters checked by its method)."""
    if kind == "normal":
        mean, std = params
        values: Any = mean + std * rng.standard_normal(shape)
    elif kind == "uniform":
        low, high = params
        values = low + (high - low) * rng.random(shape)
    elif kind == "bernoulli":
        values = rng.random(shape) < params[0]
    elif kind == "bernoulli_tensor":
        values = rng.random(shape) < np.broadcast_to(params[0], shape)
    elif kind == "exponential":
        with np.errstate(divide="ignore"):
            values = rng.standard_exponential(shape) / params[0]
    elif kind in ("random", "random_to", "random_range"):
        low, high = _random_bounds(np_dtype) if kind == "random" else (0, params[0]) if kind == "random_to" else params
        # ``high`` is inclusive for random_() (2**24 for float32), exclusive otherwise
        top = high + 1 if kind == "random" else high
        values = rng.integers(low, top, size=shape, dtype=np.uint64 if top > (1 << 63) - 1 else np.int64)
    elif kind == "geometric":
        values = rng.geometric(params[0], size=shape)
    elif kind == "cauchy":
        median, sigma = params
        values = median + sigma * rng.standard_cauchy(shape)
    else:  # log_normal
        mean, std = params
        values = np.exp(mean + std * rng.standard_normal(shape))
    with np.errstate(over="ignore", invalid="ignore"):  # out of the dtype's range: inf, silently, as in PyTorch
        return np.asarray(values).astype(np_dtype)


# PyTorch's node of each fill: its in-place overloads name them.
_FILL_NODES = {
    "normal": "NormalBackward0", "uniform": "UniformBackward0", "bernoulli_tensor": "BernoulliBackward1",
    "bernoulli": "BernoulliBackward2", "exponential": "ExponentialBackward0", "random_range": "RandomBackward0",
    "random_to": "RandomBackward1", "random": "RandomBackward2", "geometric": "GeometricBackward0",
    "cauchy": "CauchyBackward0", "log_normal": "LogNormalBackward0",
}
# How PyTorch spells each sample's fill, for the op-table oracle.
_TORCH_FILLS = {"normal": "normal_", "uniform": "uniform_", "bernoulli": "bernoulli_", "exponential": "exponential_",
                "random_range": "random_", "random_to": "random_"}


@defop(vjp=_zero_grad, node=tuple(_FILL_NODES.values()), node_for=lambda kind, **_: _FILL_NODES[kind],
       ref=lambda torch: lambda x, kind, params: getattr(x.clone(), _TORCH_FILLS[kind])(*params), opmath=False,
       samples=lambda rng: [
           ((_r(rng, 3, 4),), {"kind": "normal", "params": (0.5, 0.0)}),
           ((_r(rng),), {"kind": "uniform", "params": (0.25, 0.25)}),
           ((_r(rng, 2, 3),), {"kind": "bernoulli", "params": (1.0,)}),
           ((_r(rng, 0, 3),), {"kind": "exponential", "params": (math.inf,)}),
           ((_r(rng, 4),), {"kind": "random_range", "params": (3, 4)}),
           ((_r(rng, 2, 2),), {"kind": "random_to", "params": (1,)}),
       ])
def _random_fill(xp, input, *, kind, params=(), generator=None):
    """``input``'s shape and dtype filled with draws of the distribution ``kind``
    (backs ``normal_``, ``uniform_``, ``bernoulli_``, ``exponential_``,
    ``random_``, ``geometric_``, ``cauchy_`` and ``log_normal_``)."""
    return _on_device(input, _fill_draws(kind, params, input.shape, input.dtype, _creation._rng(generator)))


def _fill_method(name: str, draw: Callable[..., tuple[str, tuple[Any, ...]]]) -> Callable[..., Tensor]:
    """The in-place method ``name``: ``draw(self, *args)`` checks the arguments and
    names the fill and its parameters (Note [Random draws are ops])."""
    def fill(input: Tensor, *args: Any, generator: Any = None) -> Tensor:
        kind, params = draw(input, *args)
        return _random_fill(input, kind=kind, params=params, generator=generator)

    fill.__name__ = name
    return inplace_method(fill, name)


def _normal_params(t: Tensor, mean: float = 0.0, std: float = 1.0) -> tuple[str, tuple[Any, ...]]:
    _require_floating(t, "normal_kernel_cpu")
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {_g(std)}")
    return "normal", (float(mean), float(std))


def _uniform_params(t: Tensor, low: float = 0.0, high: float = 1.0) -> tuple[str, tuple[Any, ...]]:
    _require_floating(t, "check_uniform_bounds")
    if low > high:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={_g(low)} > to={_g(high)}")
    return "uniform", (float(low), float(high))


def _bernoulli_params(t: Tensor, p: Any = 0.5) -> tuple[str, tuple[Any, ...]]:
    if isinstance(p, Tensor):
        probs = _on_host(p._data).astype(np.float64)
        if probs.ndim > t.ndim or broadcast_error([t.shape, probs.shape]) is not None \
                or np.broadcast_shapes(t.shape, probs.shape) != tuple(t.shape):
            raise RuntimeError(f"bernoulli_: p of shape {list(probs.shape)} does not broadcast to the tensor's "
                               f"shape {list(t.shape)}")
        if not np.all((probs >= 0) & (probs <= 1)):
            raise RuntimeError("bernoulli_ expects all elements of p to be in [0, 1]")
        return "bernoulli_tensor", (probs,)
    if not 0 <= p <= 1:
        raise RuntimeError(f"bernoulli_ expects p to be in [0, 1], but got p={_g(p)}")
    return "bernoulli", (float(p),)


def _continuous(t: Tensor, what: str, names: dict[str, str]) -> None:
    if not t.dtype.is_floating_point:
        raise RuntimeError(f"{what} distribution is a continuous probability distribution. dtype must be a floating "
                           f"point but you specified {names[t.dtype.name]}")


def _exponential_params(t: Tensor, lambd: float = 1.0) -> tuple[str, tuple[Any, ...]]:
    _continuous(t, "Exponential", _dtype.SCALAR_TYPE_NAMES)
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={_g(lambd)}")
    return "exponential", (float(lambd),)


def _random_params(t: Tensor, *bounds: Any) -> tuple[str, tuple[Any, ...]]:
    """``random_()``, ``random_(to)`` or ``random_(from, to)`` (``to=None``: the dtype's top)."""
    if not bounds:
        return "random", ()
    if bounds[0] is None or len(bounds) > 2:
        raise TypeError("random_() received an invalid combination of arguments, expected one of: "
                        "(*, Generator generator), (int from, int to, *, Generator generator), "
                        "(int to, *, Generator generator)")
    if len(bounds) == 1:
        low, high = 0, int(bounds[0])
    else:
        low = int(bounds[0])
        high = _random_bounds(t._data.dtype)[1] + 1 if bounds[1] is None else int(bounds[1])
    if not all(-(1 << 63) <= b < (1 << 64) for b in (low, high)):
        raise ValueError("Overflow when unpacking long long")
    _creation._check_random_bounds(low, high, t.dtype)
    return ("random_to", (high,)) if len(bounds) == 1 else ("random_range", (low, high))


def _geometric_params(t: Tensor, p: float) -> tuple[str, tuple[Any, ...]]:
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={_g(p)}")
    return "geometric", (float(p),)


def _cauchy_params(t: Tensor, median: float = 0.0, sigma: float = 1.0) -> tuple[str, tuple[Any, ...]]:
    _continuous(t, "Cauchy", _dtype.CPP_TYPE_NAMES)
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={_g(sigma)}")
    return "cauchy", (float(median), float(sigma))


def _log_normal_params(t: Tensor, mean: float = 1.0, std: float = 2.0) -> tuple[str, tuple[Any, ...]]:
    _require_floating(t, "log_normal_cpu")
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={_g(std)}")
    return "log_normal", (float(mean), float(std))


def _normal_args(mean: Any, std: Any, generator: Any = None) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``normal`` of tensors: PyTorch's checks, and its overload (which names the node)."""
    for t in (mean, std):
        if isinstance(t, Tensor):
            _require_floating(t, "normal_kernel_cpu")
    if isinstance(std, Tensor):
        if std._data.size and bool((std._data < 0).any()):
            raise RuntimeError("normal expects all elements of std >= 0.0")
    elif std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {_g(std)}")
    if isinstance(mean, Tensor) and isinstance(std, Tensor) and (err := broadcast_error([mean.shape, std.shape])):
        raise err
    overload = 3 if isinstance(mean, Tensor) and isinstance(std, Tensor) else 1 if isinstance(mean, Tensor) else 2
    return (mean, std), {"generator": generator, "overload": overload}


@defop(vjp=(_zero_grad, _zero_grad), node=("NormalBackward1", "NormalBackward2", "NormalBackward3"),
       node_for=lambda overload, **_: f"NormalBackward{overload}", parse=_normal_args)
def _normal_tensors(xp, mean, std, *, generator=None, overload=3):
    """Normal draws of mean ``mean`` and standard deviation ``std`` (broadcast
    together), as :func:`normal` of tensors, in the dtype of ``mean`` (of
    ``std`` when ``mean`` is a number), as PyTorch's; ``overload`` is
    PyTorch's, and names the node."""
    dt = std.dtype if overload == 2 else mean.dtype
    z = _on_device(mean, _creation._rng(generator).standard_normal(np.broadcast_shapes(mean.shape, std.shape)))
    return (mean + std * z.astype(dt)).astype(dt, copy=False)


def normal(mean: Any, std: Any = 1.0, size: Sequence[int] | None = None, *, generator: Any = None,
           dtype: Any = None, device: Any = None, requires_grad: bool = False, layout: Any = None,
           pin_memory: bool = False) -> Tensor:
    """Normal draws, in PyTorch's four overloads: ``normal(mean, std)`` with
    ``mean`` and/or ``std`` tensors (broadcast together, a number for the
    other; recorded, their gradients zero, Note [Random draws are ops]), or
    ``normal(mean, std, size)`` with numbers, a factory.

    Example::

        >>> agrad.normal(agrad.zeros(3), 0.0)
        tensor([0., 0., 0.])
        >>> agrad.normal(2.0, 0.0, (2,), dtype=agrad.float64)
        tensor([2., 2.], dtype=agrad.float64)
    """
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        if size is not None:
            raise TypeError("normal() received an invalid combination of arguments: a size goes only with a "
                            "number mean and std: normal(mean: float, std: float, size)")
        return _normal_tensors(mean, std, generator=generator)
    if size is None:
        raise TypeError("normal() received an invalid combination of arguments - got (float, float), but expected "
                        "one of: (Tensor mean, Tensor std), (Tensor mean, float std = 1), (float mean, Tensor std), "
                        "(float mean, float std, tuple of ints size)")
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {_g(std)}")
    return _creation._normal_sized(mean, std, size, generator=generator, dtype=dtype, device=device,
                                   requires_grad=requires_grad)


def _bernoulli_args(input: Tensor, generator: Any = None) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if not isinstance(input, Tensor):
        raise TypeError(f"bernoulli(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    _require_floating(input, "bernoulli_tensor_cpu_p_")
    if input._data.size and not bool(((input._data >= 0) & (input._data <= 1)).all()):
        raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.  (Could this error message be "
                           "improved?  If so, please report an enhancement request to PyTorch.)")
    return (input,), {"generator": generator}


@defop(vjp=_zero_grad, node="BernoulliBackward0", parse=_bernoulli_args)
def _bernoulli_draw(xp, input, *, generator=None):
    """1 with probability ``input`` (elementwise), else 0, in ``input``'s dtype."""
    u = _on_device(input, _creation._rng(generator).random(input.shape))
    return (u < input).astype(input.dtype)


def bernoulli(input: Tensor, p: float | None = None, *, generator: Any = None) -> Tensor:
    """Bernoulli draws: 1 with probability ``input`` (each element in ``[0, 1]``),
    else 0, in ``input``'s dtype; recorded with a zero gradient (Note [Random
    draws are ops]).  ``bernoulli(input, p)`` draws with probability ``p``
    instead, in ``input``'s shape and dtype, unrecorded (PyTorch records a node
    whose backward raises).

    Example::

        >>> agrad.bernoulli(agrad.tensor([0.0, 1.0]))
        tensor([0., 1.])
    """
    if p is None:
        return _bernoulli_draw(input, generator=generator)
    kind, params = _bernoulli_params(input, p)
    return _random_fill(input.detach(), kind=kind, params=params, generator=generator)


def _poisson_args(input: Tensor, generator: Any = None) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if not isinstance(input, Tensor):
        raise TypeError(f"poisson(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")
    _require_floating(input, "poisson_cpu")
    if input._data.size and not bool((input._data >= 0).all()):  # NaN fails it too
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    return (input,), {"generator": generator}


@defop(vjp=_zero_grad, node="PoissonBackward0", parse=_poisson_args)
def poisson(xp, input, *, generator=None):
    """Poisson draws with the rates ``input`` (non-negative), in ``input``'s dtype;
    recorded with a zero gradient (Note [Random draws are ops])."""
    rates = _on_host(input).astype(np.float64)
    return _on_device(input, _creation._rng(generator).poisson(rates).astype(input.dtype))


# -- hand-written methods: what a tensor is, and casts by name ----------------------------

# PyTorch's legacy type names' stems (``Float`` of ``FloatTensor``) -> dtype
_TYPE_NAMES = {_dtype.SCALAR_TYPE_NAMES[d.name]: d for d in _dtype._ALL}


def _type(self: Tensor, dtype: Any = None, non_blocking: bool = False, **kwargs: Any) -> Any:
    """``t.type()``: the legacy type name (``agrad.FloatTensor``; ``torch.`` is
    accepted for ``agrad.`` in what it reads); ``t.type(dtype)`` or
    ``t.type("agrad.cuda.HalfTensor")``: this tensor cast (and moved), or itself
    when it already is of that type."""
    if dtype is None:
        return _dtype.legacy_type_name(self.dtype, self.device.type)
    if not isinstance(dtype, str):
        return _shape._to(self, _dtype.to_dtype(dtype))
    prefix, _, name = dtype.rpartition(".")
    device_type = prefix.partition(".")[2] or "cpu"
    if prefix.partition(".")[0] not in ("agrad", "torch") or not name.endswith("Tensor") \
            or name[:-6] not in _TYPE_NAMES or device_type not in _backends.known_types():
        raise ValueError(f"invalid type: '{dtype}'")
    target = _TYPE_NAMES[name[:-6]]
    if device_type == self.device.type:
        return _shape._to(self, target)
    return _shape._to(self, target, device_type)


def _type_as(self: Tensor, other: Tensor) -> Tensor:
    """This tensor with ``other``'s type: its dtype and device type (PyTorch's ``self.type(other.type())``)."""
    return _type(self, _type(other))


def _stride(self: Tensor, dim: int | None = None) -> Any:
    """The step in elements between neighbours along each dimension (numpy's byte
    strides over the item size), or along ``dim``.  Where numpy and PyTorch lay
    out a view differently the strides differ too (a dimension of size 1 may
    show another step; numpy's ``flip`` is a view with negative strides)."""
    data = self._data
    if data.size:
        strides = tuple(s // data.itemsize for s in data.strides)
    else:  # numpy gives an empty array zero strides; PyTorch the contiguous ones
        steps = [1]
        for n in reversed(data.shape[1:]):
            steps.append(steps[-1] * max(n, 1))
        strides = tuple(reversed(steps))
    if dim is None:
        return strides
    if not -max(data.ndim, 1) <= dim < max(data.ndim, 1) or data.ndim == 0:
        raise dim_out_of_range(dim, data.ndim)
    return strides[dim]


def _lowest_address(data: Any) -> int:
    """The lowest address an array's elements use (its first element's, unless a stride is negative)."""
    ptr = data.__array_interface__["data"][0] if type(data) is np.ndarray else int(data.data.ptr)
    return ptr + sum(s * (n - 1) for s, n in zip(data.strides, data.shape) if s < 0 and n > 0)


def _storage_offset(self: Tensor) -> int:
    """The offset in elements of this view's first element into its base's memory (0 for a non-view)."""
    base = self._base
    if base is None or self._data.size == 0:
        return 0
    first = self._data.__array_interface__["data"][0] if type(self._data) is np.ndarray else int(self._data.data.ptr)
    return (first - _lowest_address(base._data)) // self._data.itemsize


def _dense_in_order(shape: tuple[int, ...], strides: tuple[int, ...], order: Sequence[int]) -> bool:
    """Whether the dimensions, innermost first in ``order``, are laid out densely
    (PyTorch's contiguity: dimensions of size 1 may have any stride)."""
    expected = 1
    for d in order:
        if shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= shape[d]
    return True


def _dim_order(self: Tensor, *, ambiguity_check: bool = False) -> tuple[int, ...]:
    """The dimensions from the outermost in memory to the innermost: PyTorch's
    ``compute_elementwise_output_logical_to_physical_perm``, whose insertion
    sort leaves dimensions of stride 0 (expanded) where they are."""
    shape, strides, nd = tuple(self.shape), _stride(self), self._data.ndim
    if nd <= 1:
        return tuple(range(nd))
    contiguous = self._data.size == 0 or _dense_in_order(shape, strides, range(nd - 1, -1, -1))
    channels_last = nd in (4, 5) and _dense_in_order(shape, strides, (1, 3, 2, 0) if nd == 4 else (1, 4, 3, 2, 0))
    if contiguous and not channels_last:
        return tuple(range(nd))
    if channels_last and not contiguous:
        return (0, *range(2, nd), 1)

    def at_least(a: int, b: int) -> bool:
        return b == 0 or (a != 0 and (a >= b or a % b == 0))

    def should_swap(a: int, b: int) -> int:
        if strides[a] == 0 or strides[b] == 0:
            return 0
        if strides[a] == strides[b]:
            return 0 if at_least(shape[b], shape[a]) else 1
        return -1 if at_least(strides[b], strides[a]) else 1 if at_least(strides[a], strides[b]) else 0

    perm = list(reversed(range(nd)))  # sorted innermost first, reversed at the end
    for i in range(1, nd):
        dim1 = i
        for dim0 in reversed(range(i)):
            comparison = should_swap(perm[dim0], perm[dim1])
            if comparison > 0:
                perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
                dim1 = dim0
            elif comparison < 0:
                break
    if ambiguity_check and any(should_swap(perm[i], perm[i + 1]) != -1 for i in range(nd - 1)):
        raise RuntimeError("The tensor does not have unique dim order.")
    return tuple(reversed(perm))


def _get_device(self: Tensor) -> int:
    """The index of the device holding this tensor; -1 on the CPU."""
    dev = self.device
    return -1 if dev is CPU else (dev.index if dev.index is not None else 0)


def _is_same_size(self: Tensor, other: Tensor) -> bool:
    if not isinstance(other, Tensor):
        raise TypeError(f"is_same_size(): argument 'other' (position 1) must be Tensor, not {type(other).__name__}")
    return tuple(self.shape) == tuple(other.shape)


def _matrix_transpose(kind: str, batches: bool) -> property:
    """``H``/``mH``/``mT``: the (last) two dimensions swapped (agrad's tensors are
    real, so the conjugate is the tensor), with PyTorch's checks."""
    def get(self: Tensor) -> Tensor:
        nd = self._data.ndim
        if nd == 0 and kind != "mT":
            warnings.warn(f"Tensor.{kind} is deprecated on 0-D tensors. Consider using x.conj().", UserWarning,
                          stacklevel=2)
            return self
        if batches and nd >= 2:
            return _shape.transpose(self, -2, -1)
        if not batches and nd == 2:
            return _shape.transpose(self, 0, 1)
        if batches:
            raise RuntimeError(
                f"tensor.{kind} is only supported on matrices or batches of matrices. Got {nd}-D tensor.")
        hint = ". For batches of matrices, consider using tensor.mH" if nd > 2 else "."
        raise RuntimeError(f"tensor.{kind} is only supported on matrices (2-D tensors). Got {nd}-D tensor{hint}")

    return property(get)


def _check_python_kernel(self: Tensor, name: str) -> None:
    """``apply_`` and ``map_`` run Python on every element: CPU tensors outside autograd only."""
    if self.requires_grad:
        raise RuntimeError(f"Can't call {name}() on Variable that requires grad. Use var.detach().{name}() instead.")
    if not self.is_cpu:
        raise TypeError(f"{name} is only implemented on CPU tensors")
    self._check_inplace_allowed()


def _write_elements(self: Tensor, values: np.ndarray) -> Tensor:
    """Store Python results into this tensor's memory, cast as PyTorch converts a number."""
    with np.errstate(invalid="ignore", over="ignore"):
        self._data[...] = values.astype(np.float64 if self.dtype.is_floating_point else self._data.dtype)
    self._bump_version()
    return self


def _apply_(self: Tensor, callable: Callable[[Any], Any]) -> Tensor:
    """Replace every element ``x`` by ``callable(x)`` in place (CPU only, no autograd).

    Slow: a Python call per element, as PyTorch's; use ops where one exists."""
    _check_python_kernel(self, "apply_")
    if self._data.size:
        _write_elements(self, np.frompyfunc(callable, 1, 1)(self._data.astype(object)))
    return self


def _map_(self: Tensor, tensor: Tensor, callable: Callable[[Any, Any], Any]) -> Tensor:
    """Replace every element ``x`` by ``callable(x, y)`` in place, ``y`` the element of
    ``tensor`` (broadcast to this tensor's shape) at its position.  CPU only, no
    autograd, and as slow as :meth:`apply_`."""
    _check_python_kernel(self, "map_")
    if not isinstance(tensor, Tensor) or tensor.dtype is not self.dtype:
        got = _dtype.legacy_type_name(tensor.dtype, "cpu") if isinstance(tensor, Tensor) else type(tensor).__name__
        raise TypeError(f"map_: expected {_dtype.legacy_type_name(self.dtype, 'cpu')} for 'other' (got {got})")
    if broadcast_error([self.shape, tensor.shape]) is not None \
            or np.broadcast_shapes(self.shape, tensor.shape) != tuple(self.shape):
        raise RuntimeError(f"map_: the tensor of shape {list(tensor.shape)} does not broadcast to {list(self.shape)}")
    if self._data.size:
        other = np.broadcast_to(_on_host(tensor._data), self._data.shape)
        _write_elements(self, np.frompyfunc(callable, 2, 1)(self._data.astype(object), other.astype(object)))
    return self


def _fill_diagonal_(self: Tensor, fill_value: Any, wrap: bool = False) -> Tensor:
    """Fill the main diagonal (every index equal) with ``fill_value``, in place.

    A tall matrix with ``wrap=True`` starts the diagonal again every
    ``columns + 1`` rows, as numpy's ``fill_diagonal``.  The diagonal is written
    through a view (``CopySlices``, as PyTorch); the wrapped rows are written
    by an indexed assignment, so a wrapped fill records an index_put.
    """
    nd = self._data.ndim
    if nd < 2:
        raise RuntimeError("dimensions must larger than 1")
    if nd > 2 and len(set(self.shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    _dtype.check_scalar(fill_value.item() if isinstance(fill_value, Tensor) else fill_value, self.dtype)
    diagonal = self
    for _ in range(nd - 1):
        diagonal = _shape.diagonal(diagonal, 0, 0, 1) if diagonal is self else _shape.diagonal(diagonal, 0, -1, 0)
    diagonal.fill_(fill_value)
    rows, cols = self.shape[0], self.shape[-1]
    if wrap and nd == 2 and rows > cols + 1:
        positions = np.arange(cols + 1, rows * cols, cols + 1)
        positions = positions[positions // cols >= cols]  # past the first block, written above
        self[(positions // cols, positions % cols)] = fill_value
    return self


# name -> the function (or property) bound as ``Tensor.<name>``
METHODS: dict[str, Any] = {
    # elementwise
    "clamp": _elementwise.clamp,
    "clip": _elementwise.clamp,
    "clamp_": inplace_method(_elementwise.clamp, "clamp_"),
    "clip_": inplace_method(_elementwise.clamp, "clip_"),
    "__invert__": _elementwise._invert,
    # devices, dtypes and memory
    "to": _shape._to,
    "cpu": _shape._cpu,
    "cuda": _shape._cuda,
    "zero_": _shape._zero_,
    "float": _to_dtype(_dtype.float32),
    "double": _to_dtype(_dtype.float64),
    "half": _to_dtype(_dtype.float16),
    "long": _to_dtype(_dtype.int64),
    "int": _to_dtype(_dtype.int32),
    "bool": _to_dtype(_dtype.bool),
    "byte": _to_dtype(_dtype.uint8),
    "char": _to_dtype(_dtype.int8),
    "short": _to_dtype(_dtype.int16),
    "bfloat16": _to_dtype(_dtype.bfloat16),
    "type": _type,
    "type_as": _type_as,
    "contiguous": _shape._contiguous,
    "is_contiguous": _shape._is_contiguous,
    # shapes
    "mT": _matrix_transpose("mT", batches=True),
    "mH": _matrix_transpose("mH", batches=True),
    "H": _matrix_transpose("H", batches=False),
    "T": property(lambda self: _shape.transpose(self, 0, 1) if self.ndim == 2 else self),
    "masked_fill": _shape.masked_fill,
    "masked_fill_": inplace_method(_shape._masked_fill_self_first, "masked_fill_"),
    "flatten": _shape.flatten,
    "expand_as": _shape._expand_as,
    "broadcast_to": _shape.broadcast_to,
    "narrow": _shape.narrow,
    "split": _shape.split,
    "chunk": _shape.chunk,
    "tile": _shape._tile_method,
    "unbind": _shape.unbind,
    "view_as": _shape._view_as,
    # writes through views
    "__getitem__": _shape._getitem,
    "__setitem__": _views._setitem,
    # reductions
    "max": _reductions.max,
    "min": _reductions.min,
    "norm": _reductions.norm,
    "allclose": _reductions.allclose,
    "equal": _reductions.equal,
    "softmax": _reductions.softmax,
    # factories with this tensor's dtype and device
    "new_zeros": _creation._new_zeros,
    "new_ones": _creation._new_ones,
    "new_full": _creation._new_full,
    "new_empty": _creation._new_empty,
    "new_tensor": _creation._new_tensor,
    # what a tensor is
    "stride": _stride,
    "storage_offset": _storage_offset,
    "dim_order": _dim_order,
    "itemsize": property(lambda self: self._data.itemsize),
    "nbytes": property(lambda self: self._data.size * self._data.itemsize),
    "nelement": lambda self: int(self._data.size),
    "ndimension": lambda self: self._data.ndim,
    "is_complex": lambda self: False,
    "is_signed": lambda self: self.dtype.is_signed,
    "get_device": _get_device,
    "is_same_size": _is_same_size,
    "is_nonzero": _creation.is_nonzero,
    # Python callables on every element
    "apply_": _apply_,
    "map_": _map_,
    "fill_diagonal_": _fill_diagonal_,
    # random draws (Note [Random draws are ops])
    "bernoulli": bernoulli,
    "multinomial": _creation.multinomial,
    "normal_": _fill_method("normal_", _normal_params),
    "uniform_": _fill_method("uniform_", _uniform_params),
    "bernoulli_": _fill_method("bernoulli_", _bernoulli_params),
    "exponential_": _fill_method("exponential_", _exponential_params),
    "random_": _fill_method("random_", _random_params),
    "geometric_": _fill_method("geometric_", _geometric_params),
    "cauchy_": _fill_method("cauchy_", _cauchy_params),
    "log_normal_": _fill_method("log_normal_", _log_normal_params),
}


# The families' own tables of hand-written methods (each module's ``METHODS``).
FAMILIES = (_pointwise, _sorting, _scatter, _structure, _conv, _pool, _decompositions, _aliases, _numeric)


def bind() -> None:
    """Bind :data:`METHODS` and each family's ``METHODS`` onto :class:`Tensor`
    (``agrad._ops`` does, once); a name bound twice is a bug."""
    tables = [METHODS, *(family.METHODS for family in FAMILIES)]
    for table in tables:
        for name, fn in table.items():
            setattr(Tensor, name, fn)
    names = [name for table in tables for name in table]
    twice = {n for n in names if names.count(n) > 1} | (set(names) & set(BOUND_METHODS))
    if twice:
        raise RuntimeError(f"Tensor methods bound twice: {sorted(twice)}")
