"""Random draws PyTorch records in the graph: ``normal`` of tensors,
``bernoulli``, ``poisson`` and the in-place fills (``normal_``,
``uniform_``...), op-table entries whose gradient is zero (Note [Random
draws are ops]).  They draw from the generators of ``agrad._creation``,
which cannot hold them itself: it may not import the op table, since the
op table's hand-written methods import it for ``Tensor.new_*``."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from agrad import _backends, _creation, _dtype
from agrad._device import CPU
from agrad._errors import broadcast_error
from agrad._ops._common import _on_device, _r, _zeros_on
from agrad._ops._inplace import inplace_method
from agrad._ops._registry import defop
from agrad._tensor import Tensor

__all__ = ["normal", "bernoulli", "poisson"]


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


# The in-place fills, and ``bernoulli``/``multinomial`` as methods.
METHODS: dict[str, Any] = {
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
