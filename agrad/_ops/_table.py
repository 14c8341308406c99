"""The op table: every primitive op agrad differentiates, one entry each.

Read an entry top to bottom: the forward (numpy/CuPy through ``xp``), the
backward rule per input in agrad ops (``vjp``), the Tensor methods it binds,
and the sample calls the test suite checks it on (``gradcheck``,
``gradgradcheck`` and PyTorch's values and gradients).  See ``_registry.py``
for what each field means.  Composites (softmax, cross_entropy, linear…) are
built from these in ``agrad/nn/functional.py`` and need no rule.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agrad import _dtype
from agrad._ops._registry import defop
from agrad._tensor import Tensor

# -- helpers shared by entries -------------------------------------------------


def _r(rng: np.random.Generator, *shape: int, low: float = -2.0, high: float = 2.0) -> np.ndarray:
    return rng.uniform(low, high, size=shape)


def _pos(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(0.5, 2.0, size=shape)


def _unary_samples(domain=_r):  # type: ignore[no-untyped-def]
    return lambda rng: [((domain(rng, 3, 4),), {}), ((domain(rng),), {}), ((domain(rng, 0, 2),), {})]


def _binary_samples(domain=_r):  # type: ignore[no-untyped-def]
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
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        dims = sorted(d % len(shape) for d in dims)
        kept = list(g.shape)
        for d in dims:
            kept.insert(d, 1)
        g = g.reshape(kept)
    elif dim is None and not keepdim:
        g = g.reshape((1,) * len(shape))
    return g.expand(shape)


def _shape_args(shape: tuple[Any, ...]) -> tuple[int, ...]:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(int(s) for s in shape)


def _quiet(fn):  # type: ignore[no-untyped-def]
    """Silence numpy's floating-point warnings for ops whose domain includes
    IEEE special values (log(0) = -inf, x/0): PyTorch returns them silently."""

    def quiet(*args: Any, **kwargs: Any) -> Any:
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)

    quiet.__name__ = fn.__name__
    quiet.__doc__ = fn.__doc__
    quiet.__wrapped__ = fn  # type: ignore[attr-defined]
    return quiet


# -- elementwise arithmetic ------------------------------------------------------


@defop(vjp=(lambda g: g, lambda g, alpha: g if alpha == 1 else g * alpha), node="AddBackward0",
       methods=("add", "__add__"), rmethods=("__radd__",), inplace=("add_", "__iadd__"),
       promote=True, samples=_binary_samples())
def add(xp, input, other, *, alpha=1):
    """Elementwise ``input + alpha * other`` with broadcasting and type promotion."""
    return input + other if alpha == 1 else input + alpha * other


def _is_bool(x: Any) -> bool:
    return isinstance(x, bool) or (isinstance(x, Tensor) and x.dtype is _dtype.bool)


def _sub_args(input: Any, other: Any, alpha: Any = 1) -> tuple[tuple, dict]:
    if _is_bool(input) or _is_bool(other):
        raise RuntimeError(
            "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to "
            "invert a mask, use the `~` or `logical_not()` operator instead."
        )
    return (input, other), {"alpha": alpha}


@defop(vjp=(lambda g: g, lambda g, alpha: -g if alpha == 1 else g * -alpha), node="SubBackward0",
       methods=("sub", "__sub__"), rmethods=("__rsub__",), inplace=("sub_", "__isub__"),
       promote=True, parse=_sub_args, samples=_binary_samples())
def sub(xp, input, other, *, alpha=1):
    """Elementwise ``input - alpha * other``."""
    return input - other if alpha == 1 else input - alpha * other


@defop(vjp=(lambda g, other: g * other, lambda g, input: g * input), node="MulBackward0",
       methods=("mul", "__mul__"), rmethods=("__rmul__",), inplace=("mul_", "__imul__"),
       promote=True, samples=_binary_samples())
def mul(xp, input, other):
    """Elementwise product."""
    return input * other


@defop(vjp=(lambda g, other: g / other, lambda g, other, out: -g * out / other), node="DivBackward0",
       methods=("div", "__truediv__"), rmethods=("__rtruediv__",), inplace=("div_", "__itruediv__"),
       promote=True, to_float=True, samples=_binary_samples(_pos))
@_quiet
def div(xp, input, other):
    """Elementwise true division (integers divide to the default float dtype)."""
    return input / other


def _pow_grad_base(g: Tensor, input: Tensor, exponent: Tensor) -> Tensor:
    # d/dx x**y = y * x**(y-1), defined as 0 where y == 0 (PyTorch's pow_backward_self).
    return where(exponent == 0, 0.0, g * exponent * input ** (exponent - 1))


def _pow_grad_exponent(g: Tensor, input: Tensor, out: Tensor) -> Tensor:
    # d/dy x**y = x**y * log(x), defined as 0 where x == 0 and y >= 0 (pow_backward_exponent).
    return where(input == 0, 0.0, g * out * log(input))


def _pow_args(input: Any, exponent: Any) -> tuple[tuple, dict]:
    if _is_bool(input) and isinstance(exponent, Tensor) and exponent.dtype is _dtype.bool:
        raise NotImplementedError('"pow" not implemented for \'Bool\'')
    return (input, exponent), {}


@defop(vjp=(_pow_grad_base, lambda g, input, out: _pow_grad_exponent(g, input, out)),
       node="PowBackward1", methods=("pow", "__pow__"), rmethods=("__rpow__",),
       inplace=("pow_", "__ipow__"), promote=True, parse=_pow_args,
       samples=lambda rng: [((_pos(rng, 3, 4), _r(rng, 3, 4)), {}), ((_pos(rng, 2, 3), 2.0), {}),
                            ((_pos(rng, 3), 0.5), {}), ((1.7, _r(rng, 2, 2)), {})])
@_quiet
def pow(xp, input, exponent):  # noqa: A001 - mirrors torch.pow
    """Elementwise ``input ** exponent``; either may be a number."""
    return (input ** exponent).astype(input.dtype, copy=False)  # numpy makes bool ** bool int8


@defop(vjp=lambda g: -g, node="NegBackward0", methods=("neg", "__neg__", "negative"),
       inplace=("neg_",), samples=_unary_samples())
def neg(xp, input):
    """Elementwise negation."""
    return -input


# -- elementwise functions -----------------------------------------------------


@defop(vjp=lambda g, out: g * out, node="ExpBackward0", methods=("exp",), inplace=("exp_",),
       to_float=True, samples=_unary_samples())
def exp(xp, input):
    """Elementwise ``e ** input``."""
    return xp.exp(input)


@defop(vjp=lambda g, input: g / input, node="LogBackward0", methods=("log",), inplace=("log_",),
       to_float=True, samples=_unary_samples(_pos))
@_quiet
def log(xp, input):
    """Elementwise natural logarithm."""
    return xp.log(input)


@defop(vjp=lambda g, out: g * (1 - out * out), node="TanhBackward0", methods=("tanh",),
       inplace=("tanh_",), to_float=True, samples=_unary_samples())
def tanh(xp, input):
    """Elementwise hyperbolic tangent."""
    return xp.tanh(input)


@defop(vjp=lambda g, out: g * out * (1 - out), node="SigmoidBackward0", methods=("sigmoid",),
       inplace=("sigmoid_",), to_float=True, samples=_unary_samples())
def sigmoid(xp, input):
    """Elementwise logistic function, computed without overflow for large ``|x|``."""
    e = xp.exp(-xp.abs(input))
    return xp.where(input >= 0, 1 / (1 + e), e / (1 + e)).astype(input.dtype, copy=False)


@defop(vjp=lambda g, out: g * (out > 0), node="ReluBackward0", methods=("relu",), inplace=("relu_",),
       samples=_unary_samples())
def relu(xp, input):
    """Elementwise ``max(input, 0)``; its gradient at 0 is 0, as in PyTorch."""
    return xp.maximum(input, 0).astype(input.dtype, copy=False)


@defop(vjp=(None, lambda g, condition: where(condition, g, 0.0), lambda g, condition: where(condition, 0.0, g)),
       node="WhereBackward0", methods=("where",),
       parse=lambda condition, input, other: _where_args(condition, input, other),
       samples=lambda rng: [((_r(rng, 3, 4) > 0, _r(rng, 3, 4), _r(rng, 4)), {}),
                            ((_r(rng, 3) > 0, _r(rng, 3), 0.0), {})])
def where(xp, condition, input, other):
    """Elements of ``input`` where ``condition`` holds, else of ``other``."""
    return xp.where(condition, input, other)


def _where_args(condition: Any, input: Any, other: Any) -> tuple[tuple, dict]:
    from agrad._ops._registry import _as_constant
    cond = condition if isinstance(condition, Tensor) else _as_constant(np.asarray(condition, dtype=bool), None)
    if cond.dtype is not _dtype.bool:
        raise RuntimeError(f"where expected condition to be a boolean tensor, but got a tensor with dtype {cond.dtype}")
    dims, zero_dims, scalars = [], [], []
    for a in (input, other):
        if isinstance(a, Tensor):
            (dims if a.ndim else zero_dims).append(a.dtype)
        else:
            scalars.append(a)
    target = _dtype.result_type(dims, zero_dims, scalars)
    vals = tuple(a if isinstance(a, Tensor) and a.dtype is target else
                 (a.to(target) if isinstance(a, Tensor) else _as_constant(a, target)) for a in (input, other))
    return (cond, *vals), {}


# -- comparisons (not differentiable) -----------------------------------------


def _compare(ufunc_name: str, dunder: str):  # type: ignore[no-untyped-def]
    def forward(xp, input, other):  # type: ignore[no-untyped-def]
        return getattr(xp, ufunc_name)(input, other)

    forward.__name__ = {"equal": "eq", "not_equal": "ne", "less": "lt", "less_equal": "le",
                        "greater": "gt", "greater_equal": "ge"}[ufunc_name]
    forward.__doc__ = f"Elementwise ``{ufunc_name.replace('_', ' ')}`` comparison; a bool tensor."
    return defop(vjp=None, methods=(forward.__name__, dunder), promote=True)(forward)


eq = _compare("equal", "__eq__")
ne = _compare("not_equal", "__ne__")
lt = _compare("less", "__lt__")
le = _compare("less_equal", "__le__")
gt = _compare("greater", "__gt__")
ge = _compare("greater_equal", "__ge__")


# -- linear algebra -------------------------------------------------------------


def _transposed(t: Tensor) -> bool:
    """A 2-D tensor laid out column-major, like ``weight.mT`` in ``linear``."""
    f = t._data.flags
    return t.ndim == 2 and f.f_contiguous and not f.c_contiguous


# Both grads below compute a 2-D product in the layout of the input it flows
# to, as PyTorch's mm_mat1_backward/mm_mat2_backward do: for ``x @ W.mT`` the
# gradient of ``W.mT`` is built as ``(g.mT @ x).mT``, so after the transpose
# node it reaches ``W`` row-major and is stored as ``W.grad`` without a copy.
def _matmul_grad_input(g: Tensor, input: Tensor, other: Tensor) -> Tensor:
    if other.ndim == 1:
        return g.unsqueeze(-1) * other if input.ndim > 1 else g * other
    if input.ndim == 1:
        return (g.unsqueeze(-2) @ other.mT).squeeze(-2)
    if _transposed(input) and g.ndim == 2:
        return (other @ g.mT).mT
    return g @ other.mT


def _matmul_grad_other(g: Tensor, input: Tensor, other: Tensor) -> Tensor:
    if input.ndim == 1:
        return input.unsqueeze(-1) * g.unsqueeze(-2) if other.ndim > 1 else g * input
    if other.ndim == 1:
        return (input.mT @ g.unsqueeze(-1)).squeeze(-1)
    if _transposed(other) and g.ndim == 2:
        return (g.mT @ input).mT
    return input.mT @ g


def _matmul_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    shapes = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
              ((5, 2, 3), (3, 4)), ((2, 3), (5, 3, 4)), ((5, 1, 2, 3), (4, 3, 2)), ((3,), (2, 3, 4))]
    return [((_r(rng, *a), _r(rng, *b)), {}) for a, b in shapes]


@defop(vjp=(_matmul_grad_input, _matmul_grad_other), node="MmBackward0",
       methods=("matmul", "__matmul__"), rmethods=("__rmatmul__",), samples=_matmul_samples)
def matmul(xp, input, other):
    """Matrix product with numpy/PyTorch broadcasting of batch dimensions (1-D, 2-D, batched)."""
    if input.dtype != other.dtype:
        raise RuntimeError(
            f"expected m1 and m2 to have the same dtype, but got: {_dtype.from_numpy_dtype(input.dtype)} "
            f"!= {_dtype.from_numpy_dtype(other.dtype)}"
        )
    if input.ndim == 0 or other.ndim == 0:
        raise RuntimeError("both arguments to matmul need to be at least 1D, but they are "
                           f"{input.ndim}D and {other.ndim}D")
    return xp.matmul(input, other)


# -- reductions -------------------------------------------------------------------


def _reduce_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    x = _r(rng, 3, 4, 5)
    return [((x,), {}), ((x,), {"dim": 1}), ((x,), {"dim": -1, "keepdim": True}),
            ((x,), {"dim": (0, 2)}), ((_r(rng),), {}), ((_r(rng, 4),), {"dim": 0})]


def _reduction_node(name: str):  # type: ignore[no-untyped-def]
    # PyTorch's overloads: Backward0 reduces everything, Backward1 takes dims.
    return lambda dim, keepdim: f"{name}Backward0" if dim is None else f"{name}Backward1"


@defop(vjp=lambda g, input_shape, dim, keepdim: _expand_reduced(g, input_shape, dim, keepdim),
       node=("SumBackward0", "SumBackward1"), node_for=_reduction_node("Sum"), methods=("sum",),
       samples=_reduce_samples)
def sum(xp, input, *, dim=None, keepdim=False):  # noqa: A001 - mirrors torch.sum
    """Sum over ``dim`` (all dimensions by default); integers and bools sum to int64."""
    if input.dtype.kind in "biu":
        return xp.sum(input, axis=_axis(dim), keepdims=keepdim, dtype=np.int64)
    return xp.sum(input, axis=_axis(dim), keepdims=keepdim)


@defop(vjp=lambda g, input_shape, dim, keepdim: _expand_reduced(g, input_shape, dim, keepdim)
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


@defop(vjp=lambda g, out, dim: g - exp(out) * g.sum(dim=dim, keepdim=True), node="LogSoftmaxBackward0",
       methods=("log_softmax",), to_float=True,
       samples=lambda rng: [((_r(rng, 3, 5),), {"dim": 1}), ((_r(rng, 4),), {"dim": 0}),
                            ((_r(rng, 2, 3, 4),), {"dim": -2})])
def log_softmax(xp, input, *, dim):
    """``log(softmax(input, dim))``, computed stably (shifted by the max)."""
    shifted = input - xp.max(input, axis=dim, keepdims=True)
    return shifted - xp.log(xp.sum(xp.exp(shifted), axis=dim, keepdims=True))


# -- shape ------------------------------------------------------------------------


@defop(vjp=lambda g, input_shape: g.reshape(input_shape), node="ViewBackward0",
       methods=("reshape", "view"), parse=lambda input, *shape: ((input,), {"shape": _shape_args(shape)}),
       samples=lambda rng: [((_r(rng, 3, 4), 12), {}), ((_r(rng, 3, 4), (2, -1, 3)), {}), ((_r(rng, 1), ()), {})])
def reshape(xp, input, *, shape):
    """The same elements in a new shape (``-1`` infers one dimension)."""
    return xp.reshape(input, shape)


@defop(vjp=lambda g, dim0, dim1: g.transpose(dim0, dim1), node="TransposeBackward0", methods=("transpose",),
       samples=lambda rng: [((_r(rng, 3, 4), 0, 1), {}), ((_r(rng, 2, 3, 4), -1, 0), {})])
def transpose(xp, input, *, dim0, dim1):
    """Swap dimensions ``dim0`` and ``dim1``."""
    return xp.swapaxes(input, dim0, dim1)


@defop(vjp=lambda g, input_shape: g.sum_to_size(input_shape), node="ExpandBackward0",
       methods=("expand",), parse=lambda input, *size: ((input,), {"size": _shape_args(size)}),
       samples=lambda rng: [((_r(rng, 3, 1), (2, 3, 4)), {}), ((_r(rng), (3,)), {}), ((_r(rng, 2, 1), (-1, 3)), {})])
def expand(xp, input, *, size):
    """A broadcast view of ``input`` at ``size`` (``-1`` keeps a dimension)."""
    lead = len(size) - input.ndim
    if lead < 0:
        raise RuntimeError(
            f"expand: the number of sizes provided ({len(size)}) must be greater or equal to the "
            f"number of dimensions in the tensor ({input.ndim})"
        )
    shape = tuple(input.shape[i - lead] if s == -1 else s for i, s in enumerate(size))
    return xp.broadcast_to(input, shape)


def _sum_to(xp: Any, x: Any, shape: tuple[int, ...]) -> Any:
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape) if s == 1 and x.shape[i + lead] != 1)
    out = xp.sum(x, axis=axes, keepdims=True) if axes else x
    return out.reshape(shape) if lead or out.shape != shape else out


@defop(vjp=lambda g, input_shape: g.expand(input_shape), node="SumToSizeBackward0",
       methods=("sum_to_size",), parse=lambda input, *size: ((input,), {"size": _shape_args(size)}),
       samples=lambda rng: [((_r(rng, 2, 3, 4), (3, 1)), {}), ((_r(rng, 3), ()), {})])
def sum_to_size(xp, input, *, size):
    """Sum ``input`` down to ``size``, undoing a broadcast to ``input``'s shape."""
    return _sum_to(xp, input, size)


def _unsqueeze_shape(shape: tuple[int, ...], dim: int) -> tuple[int, ...]:
    dim = dim % (len(shape) + 1)
    return shape[:dim] + (1,) + shape[dim:]


@defop(vjp=lambda g, input_shape: g.reshape(input_shape), node="UnsqueezeBackward0", methods=("unsqueeze",),
       samples=lambda rng: [((_r(rng, 3, 4), 1), {}), ((_r(rng, 3), -1), {}), ((_r(rng), 0), {})])
def unsqueeze(xp, input, *, dim):
    """Insert a dimension of size one at ``dim``."""
    return xp.reshape(input, _unsqueeze_shape(input.shape, dim))


@defop(vjp=lambda g, input_shape: g.reshape(input_shape), node="SqueezeBackward1", methods=("squeeze",),
       samples=lambda rng: [((_r(rng, 3, 1, 4),), {}), ((_r(rng, 3, 1),), {"dim": -1}), ((_r(rng, 3, 2),), {"dim": 1})])
def squeeze(xp, input, *, dim=None):
    """Remove dimensions of size one (only ``dim`` if given; a no-op if it is not 1)."""
    if dim is None:
        return xp.reshape(input, tuple(s for s in input.shape if s != 1))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    drop = {d % max(input.ndim, 1) for d in dims if input.ndim and input.shape[d] == 1}
    return xp.reshape(input, tuple(s for i, s in enumerate(input.shape) if i not in drop))


@defop(vjp=lambda g: g, node="CloneBackward0", methods=("clone",), samples=_unary_samples())
def clone(xp, input):
    """A copy of ``input`` with its own memory and, as PyTorch's ``preserve_format``, its layout."""
    return input.copy(order="K")


@defop(vjp=lambda g: g, node="ToCopyBackward0", samples=lambda rng: [((_r(rng, 3),), {"dtype": _dtype.float32})])
def _to_dtype(xp, input, *, dtype):
    """Cast to ``dtype``; the engine casts the gradient back (see GraphTask.route)."""
    return input.astype(dtype.np)


@defop(vjp=lambda g: g * 0, node="FillBackward0", inplace=("fill_",))
def _filled(xp, input, *, value):
    """``input``'s shape and dtype filled with ``value`` (backs ``fill_``)."""
    return xp.full_like(input, value)


# -- indexing ---------------------------------------------------------------------


def _index_arg(index: Any) -> Any:
    """Normalise an index: tensors become arrays; lists of ints become integer arrays."""
    if isinstance(index, tuple):
        return tuple(_index_arg(i) for i in index)
    if isinstance(index, Tensor):
        return index._data
    if isinstance(index, list):
        return np.asarray(index)
    return index


def _is_basic(index: Any) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return all(i is None or i is Ellipsis or isinstance(i, (int, slice, np.integer)) for i in items)


@defop(vjp=lambda g, input_shape, index: _index_put_grad(g, shape=input_shape, index=index),
       node="IndexBackward0", methods=("__getitem__",),
       parse=lambda input, index: ((input,), {"index": _index_arg(index)}),
       samples=lambda rng: [((_r(rng, 4, 5), 1), {}), ((_r(rng, 4, 5), (slice(None), slice(1, None, 2))), {}),
                            ((_r(rng, 4, 5), (None, Ellipsis, 0)), {}),
                            ((_r(rng, 4, 5), np.array([0, 2, 0])), {}),
                            ((_r(rng, 4, 5), (np.array([0, 1, 1]), np.array([2, 2, 2]))), {}),
                            ((_r(rng, 4, 5), np.array([True, False, True, True])), {})])
def _index(xp, input, *, index):
    """``input[index]`` with basic and advanced (integer, boolean) indexing."""
    return input[index]


@defop(vjp=lambda g, index: g[index], node="IndexPutBackward0")
def _index_put_grad(xp, grad, *, shape, index):
    """Scatter ``grad`` into zeros of ``shape`` at ``index``, summing repeated indices."""
    out = xp.zeros(shape, dtype=grad.dtype)
    if _is_basic(index):
        out[index] = grad
    else:
        xp.add.at(out, index, grad)
    return out


# -- methods that are spellings of the entries above ------------------------------

def _to(self: Tensor, *args: Any, dtype: Any = None, device: Any = None, copy: bool = False) -> Tensor:
    """Return a tensor with the given dtype (and device); ``self`` when nothing changes."""
    from agrad._device import device as _device
    for a in args:
        if isinstance(a, (_dtype.dtype, type, np.dtype)):
            dtype = a
        elif isinstance(a, Tensor):
            dtype = a.dtype
        else:
            device = a
    if device is not None:
        _device(device)  # validates; cpu is the only device today
    target = self.dtype if dtype is None else _dtype.to_dtype(dtype)
    if target is self.dtype and not copy:
        return self
    return _to_dtype(self, dtype=target)


def _zero_(self: Tensor) -> Tensor:
    return self.fill_(0)


Tensor.to = _to  # type: ignore[attr-defined]
Tensor.zero_ = _zero_  # type: ignore[attr-defined]
for _name, _d in (("float", _dtype.float32), ("double", _dtype.float64), ("half", _dtype.float16),
                  ("long", _dtype.int64), ("int", _dtype.int32), ("bool", _dtype.bool)):
    setattr(Tensor, _name, lambda self, _d=_d: _to(self, _d))
Tensor.contiguous = lambda self: self  # type: ignore[attr-defined]
Tensor.mT = property(lambda self: transpose(self, -2, -1))  # type: ignore[attr-defined]
Tensor.T = property(lambda self: transpose(self, 0, 1) if self.ndim == 2 else self)  # type: ignore[attr-defined]
Tensor.softmax = lambda self, dim: exp(log_softmax(self, dim=dim))  # type: ignore[attr-defined]
