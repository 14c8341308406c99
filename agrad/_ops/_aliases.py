"""PyTorch's other spellings of existing ops: the torch-level in-place
functions (``torch.exp_``), torch-level forms of Tensor functions, the
complex-number helpers that are no-ops on agrad's real tensors, a few
operators, the in-place forms of view ops (``t_``, ``transpose_``,
``squeeze_``...), and the global flags agrad only stores and reports.

Nothing here computes anything of its own: each name calls an existing
function or method (or, for ``angle`` and the in-place view ops' nodes, is
one small table entry), so its values, dtypes, errors and gradients are
those of what it calls.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from agrad import _dtype
from agrad._grad_mode import grad_enabled
from agrad._graph._anomaly import set_detect_anomaly
from agrad._ops import _shape, _structure
from agrad._ops._common import _r, _zeros_on
from agrad._ops._inplace import Step, change_view_in_place
from agrad._ops._registry import REGISTRY, defop
from agrad._tensor import Tensor

# The public names of this family (star-imported by ``agrad/__init__.py``).
__all__: list[str] = [
    # torch-level in-place functions
    "abs_", "acos_", "acosh_", "addmv_", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_", "arctanh_",
    "asin_", "asinh_", "atan_", "atanh_", "ceil_", "clamp_", "clamp_max_", "clamp_min_", "clip_", "cos_",
    "cosh_", "deg2rad_", "erf_", "erfc_", "exp2_", "exp_", "expm1_", "fix_", "floor_", "frac_", "gcd_", "i0_",
    "lcm_", "ldexp_", "log10_", "log1p_", "log2_", "log_", "logit_", "nan_to_num_", "neg_", "negative_",
    "rad2deg_", "reciprocal_", "relu_", "round_", "rsqrt_", "sigmoid_", "sin_", "sinc_", "sinh_", "sqrt_",
    "square_", "tan_", "tanh_", "trunc_", "xlogy_", "zero_", "fill_", "detach_",
    # torch-level forms of Tensor functions
    "detach", "fill", "get_device", "is_inference", "is_signed", "split_with_sizes", "unsafe_chunk",
    "unsafe_split", "unsafe_split_with_sizes",
    # complex-number helpers on real tensors
    "conj", "conj_physical", "conj_physical_", "resolve_conj", "resolve_neg", "is_conj", "is_neg", "real",
    "imag", "angle",
    # global flags
    "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
    "is_deterministic_algorithms_warn_only_enabled", "set_deterministic_debug_mode",
    "get_deterministic_debug_mode", "set_float32_matmul_precision", "get_float32_matmul_precision",
    "set_warn_always", "is_warn_always_enabled", "set_flush_denormal", "set_anomaly_enabled",
]


def _check_tensor(name: str, input: Any, arg: str = "input") -> None:
    """PyTorch's TypeError for a non-tensor where its binding expects a tensor."""
    if not isinstance(input, Tensor):
        raise TypeError(f"{name}(): argument '{arg}' (position 1) must be Tensor, not {type(input).__name__}")


# -- torch-level in-place functions -------------------------------------------------


def _inplace_function(name: str) -> Callable[..., Tensor]:
    """``torch.<name>(input, *args, **kwargs)``: the Tensor method ``input.<name>``
    (PyTorch binds these in-place ops at top level too).  The method does the
    work, checks and version bump; this only checks that ``input`` is a tensor."""

    def function(input: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        _check_tensor(name, input)
        result: Tensor = getattr(input, name)(*args, **kwargs)
        return result

    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"``input.{name}(*args, **kwargs)``: in place, returns ``input``."
    return function


# Spelled out one per line (not generated from a list) so that static analysis
# and the stub generator see each name.
abs_ = _inplace_function("abs_")
acos_ = _inplace_function("acos_")
acosh_ = _inplace_function("acosh_")
addmv_ = _inplace_function("addmv_")
arccos_ = _inplace_function("arccos_")
arccosh_ = _inplace_function("arccosh_")
arcsin_ = _inplace_function("arcsin_")
arcsinh_ = _inplace_function("arcsinh_")
arctan_ = _inplace_function("arctan_")
arctanh_ = _inplace_function("arctanh_")
asin_ = _inplace_function("asin_")
asinh_ = _inplace_function("asinh_")
atan_ = _inplace_function("atan_")
atanh_ = _inplace_function("atanh_")
ceil_ = _inplace_function("ceil_")
clamp_ = _inplace_function("clamp_")
clamp_max_ = _inplace_function("clamp_max_")
clamp_min_ = _inplace_function("clamp_min_")
clip_ = _inplace_function("clip_")
cos_ = _inplace_function("cos_")
cosh_ = _inplace_function("cosh_")
deg2rad_ = _inplace_function("deg2rad_")
erf_ = _inplace_function("erf_")
erfc_ = _inplace_function("erfc_")
exp2_ = _inplace_function("exp2_")
exp_ = _inplace_function("exp_")
expm1_ = _inplace_function("expm1_")
fix_ = _inplace_function("fix_")
floor_ = _inplace_function("floor_")
frac_ = _inplace_function("frac_")
gcd_ = _inplace_function("gcd_")
i0_ = _inplace_function("i0_")
lcm_ = _inplace_function("lcm_")
ldexp_ = _inplace_function("ldexp_")
log10_ = _inplace_function("log10_")
log1p_ = _inplace_function("log1p_")
log2_ = _inplace_function("log2_")
log_ = _inplace_function("log_")
logit_ = _inplace_function("logit_")
nan_to_num_ = _inplace_function("nan_to_num_")
neg_ = _inplace_function("neg_")
negative_ = _inplace_function("negative_")
rad2deg_ = _inplace_function("rad2deg_")
reciprocal_ = _inplace_function("reciprocal_")
relu_ = _inplace_function("relu_")
round_ = _inplace_function("round_")
rsqrt_ = _inplace_function("rsqrt_")
sigmoid_ = _inplace_function("sigmoid_")
sin_ = _inplace_function("sin_")
sinc_ = _inplace_function("sinc_")
sinh_ = _inplace_function("sinh_")
sqrt_ = _inplace_function("sqrt_")
square_ = _inplace_function("square_")
tan_ = _inplace_function("tan_")
tanh_ = _inplace_function("tanh_")
trunc_ = _inplace_function("trunc_")
xlogy_ = _inplace_function("xlogy_")
zero_ = _inplace_function("zero_")
fill_ = _inplace_function("fill_")
detach_ = _inplace_function("detach_")


# -- torch-level forms of Tensor functions ------------------------------------------


def detach(input: Tensor) -> Tensor:
    """``input.detach()``: a tensor sharing its data and version counter, outside the graph."""
    _check_tensor("detach", input)
    return input.detach()


def fill(input: Tensor, value: Any) -> Tensor:
    """A new tensor of ``input``'s shape and dtype filled with ``value`` (out of
    place; FillBackward0, a zero gradient for ``input``)."""
    _check_tensor("fill", input)
    return _shape._filled(input, value=value)


def get_device(input: Tensor) -> int:
    """``input.get_device()``: the device index, -1 on the CPU."""
    _check_tensor("get_device", input)
    return int(getattr(input, "get_device")())  # noqa: B009 - the method ``_methods`` binds


def is_inference(input: Tensor) -> bool:
    """``input.is_inference()``: whether ``input`` was made in inference mode."""
    _check_tensor("is_inference", input)
    return input.is_inference()


def is_signed(input: Tensor) -> bool:
    """``input.is_signed()``: whether ``input``'s dtype holds negative numbers."""
    _check_tensor("is_signed", input)
    return input.dtype.is_signed


def split_with_sizes(input: Tensor, split_sizes: Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
    """``split`` with explicit section sizes (views of ``input``)."""
    if isinstance(split_sizes, (int, Tensor)) or not isinstance(split_sizes, Sequence):
        raise TypeError(f"split_with_sizes(): argument 'split_sizes' (position 2) must be tuple of ints, "
                        f"not {type(split_sizes).__name__}")
    return _shape.split(input, list(split_sizes), dim)


# Note [Unsafe splits]
# ~~~~~~~~~~~~~~~~~~~~
# PyTorch's ``unsafe_split``/``unsafe_chunk`` return the same pieces as
# ``split``/``chunk``, sharing ``input``'s memory, but autograd does not treat
# them as views: no ``_base``, no multi-output mark, so an in-place write into
# a piece is allowed and is *not* rebased onto ``input``'s history (the
# "unsafe": ``input``'s gradient then misses the write; the caller promises
# not to write).  agrad gives each piece of ``split`` a plain alias with the
# piece's node (``Tensor._alias``), which is exactly that.  The node is agrad's
# slice node, where PyTorch records UnsafeSplitBackward0.
def _unsafe(pieces: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    """The pieces as non-view aliases; Note [Unsafe splits]."""
    return tuple(p._alias(p.grad_fn, p.output_nr) for p in pieces)


def unsafe_split(tensor: Tensor, split_size: int, dim: int = 0) -> tuple[Tensor, ...]:
    """``split`` into pieces of ``split_size`` that autograd does not track as
    views (sections are ``unsafe_split_with_sizes``'); Note [Unsafe splits]."""
    if not isinstance(split_size, (int, np.integer)) or isinstance(split_size, bool):
        raise TypeError(f"unsafe_split(): argument 'split_size' (position 2) must be int, "
                        f"not {type(split_size).__name__}")
    return _unsafe(_shape.split(tensor, split_size, dim))


def unsafe_split_with_sizes(input: Tensor, split_sizes: Sequence[int], dim: int = 0) -> tuple[Tensor, ...]:
    """``split_with_sizes`` whose pieces autograd does not track as views; Note [Unsafe splits]."""
    return _unsafe(split_with_sizes(input, split_sizes, dim))


def unsafe_chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """``chunk`` whose pieces autograd does not track as views; Note [Unsafe splits]."""
    return _unsafe(_shape.chunk(input, chunks, dim))


# -- complex-number helpers -----------------------------------------------------------

# Note [Real tensors only]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# agrad has no complex dtype, so PyTorch's complex helpers take their
# real-tensor branches: ``conj``, ``conj_physical``, ``resolve_conj``,
# ``resolve_neg`` and ``real`` return ``input`` itself (the same object, as
# PyTorch does, so no node is recorded), ``is_conj``/``is_neg`` are False,
# ``imag`` raises, and ``angle`` is 0 or pi (NaN stays NaN) with a zero
# gradient.  They exist so that code written for complex and real tensors
# alike runs unchanged.


def _same(name: str) -> Callable[[Tensor], Tensor]:
    def function(input: Tensor) -> Tensor:
        _check_tensor(name, input)
        return input

    function.__name__ = function.__qualname__ = name
    function.__doc__ = "``input`` itself: agrad's tensors are real (Note [Real tensors only])."
    return function


conj = _same("conj")
conj_physical = _same("conj_physical")
resolve_conj = _same("resolve_conj")
resolve_neg = _same("resolve_neg")
real = _same("real")


def conj_physical_(input: Tensor) -> Tensor:
    """In place, a no-op on a real tensor; refused on a leaf that requires grad,
    as every in-place op is (Note [Real tensors only])."""
    _check_tensor("conj_physical_", input)
    if grad_enabled.get() and input.is_leaf and input.requires_grad:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    return input


def is_conj(input: Tensor) -> bool:
    """False: a real tensor has no conjugate bit (Note [Real tensors only])."""
    _check_tensor("is_conj", input)
    return False


def is_neg(input: Tensor) -> bool:
    """False: a real tensor has no negative bit (Note [Real tensors only])."""
    _check_tensor("is_neg", input)
    return False


def imag(input: Tensor) -> Tensor:
    """PyTorch's error: a real tensor has no imaginary part (Note [Real tensors only])."""
    _check_tensor("imag", input)
    raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")


def _angle_samples(rng: Any) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    # Away from 0, where the real angle jumps (its gradient there is zero too, but
    # finite differences straddling 0 are not).
    away = _r(rng, 3, 4)
    away[abs(away) < 0.1] = 0.5
    return [((away,), {}), ((np.asarray(-1.5),), {}), ((_r(rng, 0, 2),), {})]


@defop(ref=lambda torch: torch.angle, vjp=lambda g: _zeros_on(g, g.shape), node="AngleBackward0",
       methods=("angle",), to_float=True, samples=_angle_samples)
def angle(xp, input):
    """The argument of each (real) element: pi where it is negative, 0 where it
    is not (-0.0 included), NaN for NaN; a zero gradient (Note [Real tensors only])."""
    out = xp.where(input < 0, math.pi, 0.0).astype(input.dtype)
    return xp.where(xp.isnan(input), input, out)


# -- operators ---------------------------------------------------------------------------


def _pos(self: Tensor) -> Tensor:
    """``+t``: ``t`` itself (as PyTorch: no copy, no node); refused for bool."""
    if self.dtype is _dtype.bool:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return self


def _contains(self: Tensor, element: Any) -> bool:
    """``element in t``: whether any element of ``t`` equals ``element`` (broadcast)."""
    if not isinstance(element, (Tensor, numbers.Number)):
        raise RuntimeError(
            f"Tensor.__contains__ only supports Tensor or scalar, but you passed in a {type(element)}."
        )
    return bool((self == element).any())


def _reversed(self: Tensor) -> Tensor:
    """``reversed(t)``: ``t`` flipped along dimension 0 (``t`` itself when 0-d)."""
    return self if self.ndim == 0 else self.flip(0)


def _complex(self: Tensor) -> complex:
    """``complex(t)`` for a one-element tensor."""
    if self.numel() != 1:
        raise ValueError("only one element tensors can be converted to Python scalars")
    return complex(self.item())


# -- in-place view ops ---------------------------------------------------------------------

# Note [In-place view op nodes]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``x.t_()`` gives ``x`` its own memory transposed (Note [In-place view ops] in
# ``_tensor``; the method is ``_inplace.change_view_in_place``).  Its node is
# the out-of-place op's under the name PyTorch gives the in-place overload:
# TBackward1, TransposeBackward1, SqueezeBackward3/4/5 (no dim, one dim, a
# tuple), UnsqueezeBackward1.  Each entry below reuses its out-of-place
# forward and is only that named node; each method also gives the array step
# and its inverse, which keep the replays of views right.  ``swapaxes_`` and
# ``swapdims_`` are ``transpose_``; there is no ``torch.t_`` (PyTorch has
# none) and no ``as_strided_`` (agrad has no ``as_strided``).

def _identity_array(arr: Any) -> Any:
    return arr


def _identity_tensor(t: Tensor) -> Tensor:
    return t


_NO_UNDO: Step = (_identity_array, _identity_tensor)


@defop(view=True, vjp=lambda g: _structure.t(g), node="TBackward1", ref=lambda torch: lambda x: x.clone().t_(),
       samples=lambda rng: [((_r(rng, 3, 4),), {}), ((_r(rng, 3),), {}), ((_r(rng),), {}), ((_r(rng, 0, 2),), {})])
def _t_in_place(xp, input):
    """``t`` recorded as ``t_``'s node (Note [In-place view op nodes])."""
    return REGISTRY["t"].forward(xp, input)


def _t_(self: Tensor) -> Tensor:
    """``self`` transposed in place (a matrix; a vector or 0-d tensor keeps its
    shape): shares its memory, returns ``self`` (Note [In-place view op nodes])."""
    if self.ndim > 2:
        raise RuntimeError(f"t_() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
    if self.ndim < 2:
        return change_view_in_place(self, (_identity_array, _t_in_place), _NO_UNDO)
    swap: Callable[[Any], Any] = lambda arr: arr.swapaxes(0, 1)  # noqa: E731
    return change_view_in_place(self, (swap, _t_in_place), (swap, _structure.t))


def _swap_grad(g: Tensor, dim0: int, dim1: int) -> Tensor:
    return g.transpose(dim0, dim1) if g.ndim else g


@defop(view=True, vjp=_swap_grad, node="TransposeBackward1",
       ref=lambda torch: lambda x, dim0, dim1: x.clone().transpose_(dim0, dim1),
       samples=lambda rng: [((_r(rng, 3, 4), 0, 1), {}), ((_r(rng, 2, 3, 4), 2, 0), {}), ((_r(rng), 0, 0), {}),
                            ((_r(rng, 0, 3), 1, 0), {})])
def _transpose_in_place(xp, input, *, dim0, dim1):
    """``transpose`` (dims wrapped) recorded as ``transpose_``'s node (Note [In-place view op nodes])."""
    return REGISTRY["transpose"].forward(xp, input, dim0=dim0, dim1=dim1) if input.ndim else input[...]


def _dim_arg(name: str, arg: str, position: int, dim: Any) -> int:
    """``dim`` as an int, or PyTorch's TypeError naming the op and argument."""
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise TypeError(f"{name}(): argument '{arg}' (position {position}) must be int, not {type(dim).__name__}")
    return int(dim)


def _transpose_(self: Tensor, dim0: int, dim1: int) -> Tensor:
    """``self`` with dimensions ``dim0`` and ``dim1`` swapped, in place (shares its
    memory, returns ``self``; Note [In-place view op nodes])."""
    d0 = _shape._wrap_dim(_dim_arg("transpose_", "dim0", 1, dim0), self.ndim)
    d1 = _shape._wrap_dim(_dim_arg("transpose_", "dim1", 2, dim1), self.ndim)
    step_t = lambda t: _transpose_in_place(t, d0, d1)  # noqa: E731
    if d0 == d1:
        return change_view_in_place(self, (_identity_array, step_t), _NO_UNDO)
    swap: Callable[[Any], Any] = lambda arr: arr.swapaxes(d0, d1)  # noqa: E731
    return change_view_in_place(self, (swap, step_t), (swap, lambda t: _shape.transpose(t, d0, d1)))


def _swapaxes_(self: Tensor, axis0: int, axis1: int) -> Tensor:
    """``transpose_`` under numpy's name and argument names."""
    return _transpose_(self, axis0, axis1)


def _squeeze_node(dim: Any = None) -> str:
    return "SqueezeBackward3" if dim is None else "SqueezeBackward4" if isinstance(dim, int) else "SqueezeBackward5"


def _squeeze_in_place_ref(torch: Any) -> Callable[..., Any]:
    return lambda x, dim=None: x.clone().squeeze_() if dim is None else x.clone().squeeze_(dim)


@defop(view=True, vjp=lambda g, input_shape: g.reshape(input_shape),
       node=("SqueezeBackward3", "SqueezeBackward4", "SqueezeBackward5"), node_for=_squeeze_node,
       ref=_squeeze_in_place_ref,
       samples=lambda rng: [((_r(rng, 3, 1, 4),), {}), ((_r(rng, 3, 1),), {"dim": -1}), ((_r(rng, 3, 2),), {"dim": 1}),
                            ((_r(rng, 1, 2, 1),), {"dim": (0, 2)}), ((_r(rng),), {"dim": 0}),
                            ((_r(rng, 0, 1),), {})])
def _squeeze_in_place(xp, input, *, dim=None):
    """``squeeze`` recorded as ``squeeze_``'s node (Note [In-place view op nodes])."""
    return REGISTRY["squeeze"].forward(xp, input, dim=dim)


def _squeeze_(self: Tensor, dim: int | Sequence[int] | None = None) -> Tensor:
    """``self`` without its dimensions of size one (only those of ``dim`` if given;
    none if they are not of size one), in place: shares its memory, returns
    ``self``, and is recorded (and bumps the version) even when nothing is
    dropped, as in PyTorch (Note [In-place view op nodes])."""
    shape = tuple(self.shape)
    if dim is None:
        drop = [i for i, s in enumerate(shape) if s == 1]
    else:
        dims = (dim,) if not isinstance(dim, Sequence) else tuple(dim)
        wrapped = {_shape._wrap_dim(_dim_arg("squeeze_", "dim", 1, d), self.ndim) for d in dims}
        drop = sorted(d for d in wrapped if shape and shape[d] == 1)
        dim = _dim_arg("squeeze_", "dim", 1, dim) if not isinstance(dim, Sequence) else tuple(dims)
    step_t = lambda t: _squeeze_in_place(t, dim=dim)  # noqa: E731
    if not drop:
        return change_view_in_place(self, (_identity_array, step_t), _NO_UNDO)
    axes = tuple(drop)
    restore = tuple(None if i in axes else slice(None) for i in range(len(shape)))
    return change_view_in_place(self, (lambda arr: arr.squeeze(axis=axes), step_t),
                                (lambda arr: arr[restore], lambda t: t.view(shape)))


@defop(view=True, vjp=lambda g, input_shape: g.reshape(input_shape), node="UnsqueezeBackward1",
       ref=lambda torch: lambda x, dim: x.clone().unsqueeze_(dim),
       samples=lambda rng: [((_r(rng, 3, 4), 1), {}), ((_r(rng, 3), -1), {}), ((_r(rng), 0), {}),
                            ((_r(rng, 0, 2), 2), {})])
def _unsqueeze_in_place(xp, input, *, dim):
    """``unsqueeze`` recorded as ``unsqueeze_``'s node (Note [In-place view op nodes])."""
    return REGISTRY["unsqueeze"].forward(xp, input, dim=dim)


def _unsqueeze_(self: Tensor, dim: int) -> Tensor:
    """``self`` with a dimension of size one inserted at ``dim``, in place (shares
    its memory, returns ``self``; Note [In-place view op nodes])."""
    d = _shape._wrap_dim(_dim_arg("unsqueeze_", "dim", 1, dim), self.ndim + 1)
    insert = (slice(None),) * d + (None,)
    return change_view_in_place(self, (lambda arr: arr[insert], lambda t: _unsqueeze_in_place(t, d)),
                                (lambda arr: arr.squeeze(axis=d), lambda t: _shape.squeeze(t, d)))


# -- global flags --------------------------------------------------------------------------

# Note [Global flags]
# ~~~~~~~~~~~~~~~~~~~
# PyTorch's process-wide switches, stored and reported with PyTorch's
# validation so that code which sets them runs unchanged.  None changes what
# agrad computes: its kernels are deterministic whatever the flag, its float32
# products are numpy's (full precision: "highest"), it has no warn-once
# warnings to repeat, and numpy cannot set the FPU's flush-to-zero mode.
# Unlike grad mode they are not per-context: a plain module-level dict, read
# and written only by the functions below.
_FLAGS: dict[str, Any] = {
    "deterministic": False,
    "deterministic_warn_only": False,
    "float32_matmul_precision": "highest",
    "warn_always": False,
}


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Ask for deterministic algorithms (agrad's are always; Note [Global flags])."""
    if not isinstance(mode, bool):
        raise TypeError(
            f"_set_deterministic_algorithms(): argument 'mode' (position 1) must be bool, not {type(mode).__name__}"
        )
    if not isinstance(warn_only, bool):
        raise TypeError(f"_set_deterministic_algorithms(): argument 'warn_only' must be bool, not "
                        f"{type(warn_only).__name__}")
    _FLAGS["deterministic"] = mode
    _FLAGS["deterministic_warn_only"] = warn_only if mode else False


def are_deterministic_algorithms_enabled() -> bool:
    """Whether ``use_deterministic_algorithms(True)`` is in force."""
    return bool(_FLAGS["deterministic"])


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    """Whether ``use_deterministic_algorithms(True, warn_only=True)`` is in force."""
    return bool(_FLAGS["deterministic_warn_only"])


_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_deterministic_debug_mode(debug_mode: int | str) -> None:
    """``use_deterministic_algorithms`` by level: 0/"default" off, 1/"warn"
    warn only, 2/"error" on."""
    if isinstance(debug_mode, str):
        if debug_mode not in _DEBUG_MODES:
            raise RuntimeError(
                f"invalid value of debug_mode, expected one of `default`, `warn`, `error`, but got {debug_mode}"
            )
        debug_mode = _DEBUG_MODES[debug_mode]
    elif not isinstance(debug_mode, int):
        raise TypeError(f"debug_mode must be str or int, but got {type(debug_mode)}")
    if debug_mode not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected 0, 1, or 2, but got {debug_mode}")
    use_deterministic_algorithms(debug_mode != 0, warn_only=debug_mode == 1)


def get_deterministic_debug_mode() -> int:
    """The level ``set_deterministic_debug_mode`` takes: 0, 1 (warn only) or 2."""
    if not _FLAGS["deterministic"]:
        return 0
    return 1 if _FLAGS["deterministic_warn_only"] else 2


def set_float32_matmul_precision(precision: str) -> None:
    """Store the float32 matmul precision ("highest", "high" or "medium"); an
    unknown one warns and is ignored, as in PyTorch.  agrad's float32 products
    are always computed in full precision (Note [Global flags])."""
    if not isinstance(precision, str):
        raise RuntimeError(f"set_float32_matmul_precision expects a str, but got {type(precision).__name__}")
    if precision not in ("highest", "high", "medium"):
        warnings.warn(
            f"{precision} is not one of 'highest', 'high', or 'medium'; the current"
            "setFloat32MatmulPrecision call has no effect.",
            UserWarning,
            stacklevel=2,
        )
        return
    _FLAGS["float32_matmul_precision"] = precision


def get_float32_matmul_precision() -> str:
    """The precision last set by ``set_float32_matmul_precision`` ("highest" by default)."""
    return str(_FLAGS["float32_matmul_precision"])


def set_warn_always(b: bool, /) -> None:
    """Store PyTorch's warn-always flag (agrad has no warn-once warnings; Note [Global flags])."""
    _FLAGS["warn_always"] = bool(b)


def is_warn_always_enabled() -> bool:
    """The flag ``set_warn_always`` stored."""
    return bool(_FLAGS["warn_always"])


def set_flush_denormal(mode: bool) -> bool:
    """PyTorch's switch for flushing denormal floats to zero.  numpy cannot set
    the FPU's mode, so agrad cannot honour it: returns False, PyTorch's answer
    on a system without support, and computes as before (Note [Global flags])."""
    if not isinstance(mode, bool):
        raise TypeError(f"set_flush_denormal(): argument 'mode' (position 1) must be bool, not {type(mode).__name__}")
    return False


def set_anomaly_enabled(enabled: bool, check_nan: bool = True) -> None:
    """Turn anomaly mode on or off (``agrad.autograd.set_detect_anomaly`` without
    the context manager), with its NaN check."""
    if not isinstance(enabled, bool):
        raise TypeError(
            f"set_anomaly_enabled(): argument 'enabled' (position 1) must be bool, not {type(enabled).__name__}"
        )
    set_detect_anomaly(enabled, check_nan)


# Tensor methods of this family that are not one entry's ``methods=``
# (composites, aliases with another signature); bound by ``_methods.bind``.
METHODS: dict[str, Any] = {
    "split_with_sizes": split_with_sizes,
    "unsafe_split": unsafe_split,
    "unsafe_split_with_sizes": unsafe_split_with_sizes,
    "unsafe_chunk": unsafe_chunk,
    "conj": conj,
    "conj_physical": conj_physical,
    "conj_physical_": conj_physical_,
    "resolve_conj": resolve_conj,
    "resolve_neg": resolve_neg,
    "is_conj": is_conj,
    "is_neg": is_neg,
    "real": property(real),
    "imag": property(imag),
    "__pos__": _pos,
    "__contains__": _contains,
    "__reversed__": _reversed,
    "__complex__": _complex,
    "t_": _t_,
    "transpose_": _transpose_,
    "swapdims_": _transpose_,
    "swapaxes_": _swapaxes_,
    "squeeze_": _squeeze_,
    "unsqueeze_": _unsqueeze_,
}
