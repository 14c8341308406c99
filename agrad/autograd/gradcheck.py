"""Finite-difference gradient checks (mirrors ``torch.autograd.gradcheck``)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from agrad._backends import transfer, zeros
from agrad._device import CPU
from agrad._tensor import Tensor
from agrad.autograd._api import grad_sync
from agrad.autograd.function import Function

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]


class GradcheckError(RuntimeError):
    """Raised by :func:`gradcheck` and :func:`gradgradcheck` when a check fails."""


def _as_tuple(x: Any) -> tuple[Any, ...]:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def _differentiable_outputs(outputs: tuple[Any, ...]) -> list[Tensor]:
    return [o for o in outputs if isinstance(o, Tensor) and o.requires_grad]


def _host(t: Tensor) -> np.ndarray:
    """``t``'s values as a flat float64 host array (copied from its device if need be)."""
    return transfer(t._data, CPU).reshape(-1).astype(np.float64)


def _outputs_at(fn: Callable[..., Any], inputs: tuple[Any, ...],
                which: Callable[[tuple[Any, ...]], list[Tensor]]) -> list[tuple[Any, Any, np.ndarray]]:
    """``(shape, dtype, values)`` of ``fn``'s outputs now: copied at once, since
    an output may alias the input about to be perturbed again."""
    return [(o.shape, o.dtype, _host(o)) for o in which(_as_tuple(fn(*inputs)))]


def _differences(minus: list[tuple[Any, Any, np.ndarray]], plus: list[tuple[Any, Any, np.ndarray]], eps: float,
                 denom: float) -> list[np.ndarray]:
    """``(plus - minus) / denom`` per output, refusing outputs whose shape or
    dtype changed with the perturbation (PyTorch's ``_check_outputs_same_dtype_and_shape``)."""
    for (sa, da, _), (sb, db, _) in zip(minus, plus):
        if sa != sb:
            raise AssertionError(f"Expected `func` to return outputs with the same shape when inputs are perturbed "
                                 f"by {eps}, but got: shapes {sa} and {sb}.")
        if da != db:
            raise AssertionError(f"Expected `func` to return outputs with the same dtype when inputs are perturbed "
                                 f"by {eps}, but got: dtypes {da} and {db}.")
    return [(b - a) / denom for (_, _, a), (_, _, b) in zip(minus, plus)]


def _numerical_jacobian(fn: Callable[..., Any], inputs: tuple[Any, ...], x: Tensor, n_out: list[int],
                        eps: float, which: Callable[[tuple[Any, ...]], list[Tensor]] = _differentiable_outputs,
                        ) -> list[np.ndarray]:
    """d(outputs)/d(x) by central differences, one (numel(x), numel(out)) block per output."""
    data = x._data  # written through element by element: x may be non-contiguous, so no flat view of it
    jac = [np.zeros((data.size, n)) for n in n_out]
    # Evaluated with grad mode on: gradgradcheck's function calls grad() inside.
    for j in range(data.size):
        at = np.unravel_index(j, data.shape)  # row j: x's elements in C order, as the analytical Jacobian's
        orig = data[at].copy()
        data[at] = orig - eps
        minus = _outputs_at(fn, inputs, which)
        data[at] = orig + eps
        plus = _outputs_at(fn, inputs, which)
        data[at] = orig
        for k, d in enumerate(_differences(minus, plus, eps, 2 * eps)):
            jac[k][j] = d
    return jac


def _directional_derivative(fn: Callable[..., Any], inputs: tuple[Any, ...], x: Tensor, v: np.ndarray,
                            eps: float) -> list[np.ndarray]:
    """d(outputs)/d(x) applied to ``v`` (a Jacobian-vector product) by central differences."""
    orig = x._data.copy()
    try:
        x._data[...] = orig - eps * v
        minus = _outputs_at(fn, inputs, _differentiable_outputs)
        x._data[...] = orig + eps * v
        plus = _outputs_at(fn, inputs, _differentiable_outputs)
    finally:
        x._data[...] = orig
    return _differences(minus, plus, eps, 2 * eps)


def _tensor_outputs(outputs: tuple[Any, ...]) -> list[Tensor]:
    return [o for o in outputs if isinstance(o, Tensor)]


def _check_inputs(inputs: tuple[Any, ...]) -> list[Tensor]:
    """The inputs that require grad, checked as PyTorch's ``_check_inputs``:
    a warning for each that is not float64; ValueError if there is none;
    RuntimeError for one with a stride-0 dimension (perturbing one element
    would perturb several)."""
    diff_inputs = []
    for idx, t in enumerate(inputs):
        if not (isinstance(t, Tensor) and t.requires_grad):
            continue
        if t.dtype.name != "float64":
            warnings.warn(f"Input #{idx} requires gradient and is not a double precision floating point or "
                          "complex. This check will likely fail if all the inputs are not of double precision "
                          "floating point or complex. ", UserWarning, stacklevel=3)
        # (numpy gives an empty array zero strides; it overlaps nothing)
        if t._data.size and not all(st > 0 or sz <= 1 for st, sz in zip(t._data.strides, t._data.shape)):
            raise RuntimeError(f"The {idx}th input has a dimension with stride 0. gradcheck only supports inputs "
                               "that are non-overlapping to be able to compute the numerical gradients correctly. "
                               "You should call .contiguous on the input before passing it to gradcheck.")
        diff_inputs.append(t)
    if not diff_inputs:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, "
                         "but none of the them have requires_grad=True.")
    return diff_inputs


_NONDET = ("Backward is not reentrant, i.e., running backward with same input and grad_output multiple times gives "
           "different values, although analytical gradient matches numerical gradient.The tolerance for "
           "nondeterminism was {}.\n\nNOTE: If your op relies on non-deterministic operations i.e., it is listed "
           "here:\nhttps://pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html\nthis failure "
           "might be expected.\n\nIf you are adding a new operator, please file an issue and then use one of the\n"
           "workarounds. The workaround depends on how your test invokes gradcheck/gradgradcheck.\nIf the test\n"
           "- manually invokes gradcheck/gradgradcheck, then call gradcheck/gradgradcheck\n  with "
           "`nondet_tol=<tol>` as a keyword argument.\n")


def _vjp(out: Tensor, x: Tensor, u: np.ndarray, nondet_tol: float, check_grad_dtypes: bool) -> np.ndarray | None:
    """``grad(out, x, u)`` as a flat host array (None if unused), computed
    twice to check that backward is reentrant within ``nondet_tol``, as
    PyTorch's ``_check_analytical_jacobian_attributes``."""

    go = Tensor._make(transfer(u, out.device))
    (g1,) = grad_sync(out, x, go, retain_graph=True, allow_unused=True)
    (g2,) = grad_sync(out, x, go, retain_graph=True, allow_unused=True)
    if g1 is None or g2 is None:
        return None
    if check_grad_dtypes and g1.dtype != x.dtype:
        raise GradcheckError("Gradient has dtype mismatch")
    if g1.shape != x.shape:
        raise GradcheckError("Analytical gradient has incorrect size")
    a, b = _host(g1), _host(g2)
    if a.size and np.abs(a - b).max() > nondet_tol:
        raise GradcheckError(_NONDET.format(nondet_tol))
    return a


# Note [Fast gradcheck]
# ~~~~~~~~~~~~~~~~~~~~~
# ``fast_mode=True`` checks one random projection of each Jacobian instead of
# the whole of it, as PyTorch's fast mode does: for input ``x`` and output
# ``y``, with random ``v`` (shaped like ``x``) and ``u`` (like ``y``), the
# analytical ``u^T J v`` is the vjp ``grad(y, x, u)`` dotted with ``v`` and the
# numerical one the central difference of ``f`` along ``v`` dotted with ``u``.
# Two evaluations of ``f`` and one backward per pair instead of two
# evaluations per element of ``x`` and one backward per element of ``y``; a
# wrong Jacobian passes only if its error is orthogonal to a random
# direction.  The directions come from a fixed seed, so a check is repeatable.
def _fast_check(func: Callable[..., Any], inputs: tuple[Any, ...], diff_inputs: list[Tensor],
                outputs: list[Tensor], eps: float, atol: float, rtol: float, nondet_tol: float,
                check_grad_dtypes: bool) -> str | None:
    """The mismatch message of the first failing (input, output) pair, or None."""
    rng = np.random.default_rng(0)
    us = [rng.standard_normal(out.shape).astype(out._data.dtype) for out in outputs]
    for i, x in enumerate(diff_inputs):
        v = rng.standard_normal(x.shape).astype(x._data.dtype)
        numerical = _directional_derivative(func, inputs, x, v, eps)
        for k, (out, u) in enumerate(zip(outputs, us)):
            expected = float(numerical[k] @ u.reshape(-1).astype(np.float64))
            g = _vjp(out, x, u, nondet_tol, check_grad_dtypes)
            actual = 0.0 if g is None else float(g @ v.reshape(-1).astype(np.float64))
            if not abs(actual - expected) <= atol + rtol * abs(expected):
                return (f"Jacobian mismatch for output {k} with respect to input {i} (fast mode: the projection "
                        f"u^T J v),\nnumerical:{expected}\nanalytical:{actual}\n")
    return None


class _UndefinedGrad(Function):
    """Identity whose backward sends an undefined (None) gradient on, as PyTorch's
    ``torch._C._functions.UndefinedGrad``."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        return x

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> None:
        return None


def _undefined_grad_check(func: Callable[..., Any], inputs: tuple[Any, ...],
                          diff_inputs: list[Tensor]) -> str | None:
    """PyTorch's ``_test_undefined_backward_mode``: every backward must accept
    undefined output gradients (all at once, and one at a time) and give
    undefined or zero input gradients when all of them are.  The failure
    message, or None."""

    def undefined(outs: list[Tensor], which: int | None) -> list[Tensor]:
        return [_UndefinedGrad.apply(o) if which is None or k == which else o for k, o in enumerate(outs)]

    to_check = [undefined(_differentiable_outputs(_as_tuple(func(*inputs))), None)]
    if len(to_check[0]) > 1:  # one undefined at a time must work too
        to_check += [undefined(_differentiable_outputs(_as_tuple(func(*inputs))), k) for k in range(len(to_check[0]))]
    for outs in to_check:
        zero_grads = [Tensor._make(zeros(o._data.shape, o._data.dtype, o.device)) for o in outs]
        try:
            grads = grad_sync(outs, diff_inputs, zero_grads, allow_unused=True)
        except RuntimeError:
            _warn_bc_breaking()
            return ("Expected backward function to handle undefined output grads. Please look at \"Notes about "
                    "undefined output gradients\" in \"tools/autograd/derivatives.yaml\"")
        if any(g is not None and _host(g).any() for g in grads):
            _warn_bc_breaking()
            return ("Expected all input grads to be undefined or zero when all output grads are undefined or "
                    "zero. Please look at \"Notes about undefined output gradients\" in "
                    "\"tools/autograd/derivatives.yaml\"")
    return None


def _warn_bc_breaking() -> None:
    warnings.warn(
        "Backwards compatibility: New undefined gradient support checking feature is enabled by default, but it "
        "may break existing callers of this function. If this is true for you, you can call this function with "
        "\"check_undefined_grad=False\" to disable the feature",
        UserWarning,
        stacklevel=4,
    )


def _backward_mul_by_grad_output(outputs: list[Tensor], diff_inputs: list[Tensor]) -> str | None:
    """PyTorch's ``_test_backward_mul_by_grad_output``: zero output gradients
    must give zero input gradients of the inputs' dtype, device and shape."""

    zero_grads = [Tensor._make(zeros(o._data.shape, o._data.dtype, o.device)) for o in outputs]
    for gi, di in zip(grad_sync(outputs, diff_inputs, zero_grads, allow_unused=True), diff_inputs):
        if gi is None:
            continue
        if _host(gi).any():
            return "backward not multiplied by grad_output"
        if gi.dtype != di.dtype:
            return "grad is incorrect type"
        if gi.device != di.device:
            return "grad is incorrect device"
        if gi.shape != di.shape:
            return "grad is incorrect size"
    return None


def _unsupported(**flags: bool) -> None:
    for name, value in flags.items():
        if value:
            raise NotImplementedError(f"gradcheck: {name}=True needs forward-mode AD or vmap, which agrad lacks")


def gradcheck(
    func: Callable[..., Any],
    inputs: Any,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_batched_grad: bool = False,
    check_batched_forward_grad: bool = False,
    check_forward_ad: bool = False,
    check_backward_ad: bool = True,
    fast_mode: bool = False,
    masked: bool | None = None,
) -> bool:
    """Check analytical gradients of ``func`` against central finite differences.

    The analytical Jacobian is built row by row with the engine
    (:func:`agrad.autograd.grad_sync` with one-hot ``grad_outputs``), twice,
    to check that backward is reentrant within ``nondet_tol``; the numerical
    one by perturbing each element of each input that requires grad by
    ``±eps``.  Inputs should be ``float64``.  As in PyTorch, backward must
    also give zero input gradients for zero output gradients, and (with
    ``check_undefined_grad``) accept undefined output gradients.
    ``check_batched_grad``, ``check_batched_forward_grad`` and
    ``check_forward_ad`` need vmap or forward-mode AD, which agrad lacks:
    passing True raises ``NotImplementedError``.  ``masked`` matters only for
    sparse inputs, which agrad does not have.

    With ``fast_mode=True`` only a random projection of each Jacobian is
    compared (Note [Fast gradcheck]): a few evaluations instead of a few per
    element, for large inputs.

    Returns:
        ``True`` if every entry matches within ``atol + rtol * |numerical|``;
        otherwise raises :class:`GradcheckError` (or returns ``False`` when
        ``raise_exception=False``).

    Example::

        >>> x = agrad.randn(3, dtype=agrad.float64, requires_grad=True)
        >>> agrad.autograd.gradcheck(lambda t: (t * t).sum(), (x,))
        True
    """
    _unsupported(check_batched_grad=check_batched_grad, check_batched_forward_grad=check_batched_forward_grad,
                 check_forward_ad=check_forward_ad)
    inputs = _as_tuple(inputs)
    diff_inputs = _check_inputs(inputs)
    func_out = _as_tuple(func(*inputs))
    try:
        _check(func, inputs, diff_inputs, func_out, eps, atol, rtol, nondet_tol, check_undefined_grad,
               check_grad_dtypes, check_backward_ad, fast_mode)
    except GradcheckError:
        if raise_exception:
            raise
        return False
    return True


def _check(func: Callable[..., Any], inputs: tuple[Any, ...], diff_inputs: list[Tensor], func_out: tuple[Any, ...],
           eps: float, atol: float, rtol: float, nondet_tol: float, check_undefined_grad: bool,
           check_grad_dtypes: bool, check_backward_ad: bool, fast_mode: bool) -> None:
    """The checks of :func:`gradcheck`, in PyTorch's order; raises GradcheckError."""
    outputs = _differentiable_outputs(func_out)
    if not outputs:
        # No differentiable output: the numerical gradient must be zero too.
        tensors = _tensor_outputs(func_out)
        for x in diff_inputs:
            jac = _numerical_jacobian(func, inputs, x, [o.numel() for o in tensors], eps, _tensor_outputs)
            if any(j.any() for j in jac):
                raise GradcheckError("Numerical gradient for function expected to be zero")
        return
    if not check_backward_ad:
        return
    if fast_mode:
        msg = _fast_check(func, inputs, diff_inputs, outputs, eps, atol, rtol, nondet_tol, check_grad_dtypes)
        if msg is not None:
            raise GradcheckError(msg)
    else:
        n_out = [o.numel() for o in outputs]
        for i, x in enumerate(diff_inputs):
            numerical = _numerical_jacobian(func, inputs, x, n_out, eps)
            for k, out in enumerate(outputs):
                analytical = np.zeros((x.numel(), out.numel()))
                for col in range(out.numel()):
                    onehot = np.zeros(out.numel(), dtype=out._data.dtype)
                    onehot[col] = 1
                    g = _vjp(out, x, onehot.reshape(out.shape), nondet_tol, check_grad_dtypes)
                    if g is not None:
                        analytical[:, col] = g
                if not np.allclose(analytical, numerical[k], rtol=rtol, atol=atol, equal_nan=True):
                    raise GradcheckError(
                        f"Jacobian mismatch for output {k} with respect to input {i},\n"
                        f"numerical:{numerical[k]}\nanalytical:{analytical}\n"
                    )
    msg = _backward_mul_by_grad_output(outputs, diff_inputs)
    if msg is None and check_undefined_grad:
        msg = _undefined_grad_check(func, inputs, diff_inputs)
    if msg is not None:
        raise GradcheckError(msg)


def gradgradcheck(
    func: Callable[..., Any],
    inputs: Any,
    grad_outputs: Sequence[Tensor] | None = None,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    gen_non_contig_grad_outputs: bool = False,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_batched_grad: bool = False,
    check_fwd_over_rev: bool = False,
    check_rev_over_rev: bool = True,
    fast_mode: bool = False,
    masked: bool = False,
) -> bool:
    """Check second derivatives: :func:`gradcheck` of the map
    ``(inputs, grad_outputs) -> grad(func(inputs), inputs, grad_outputs, create_graph=True)``,
    in fast mode if ``fast_mode`` (Note [Fast gradcheck]).
    """

    inputs = _as_tuple(inputs)
    diff_idx = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    outputs = _differentiable_outputs(_as_tuple(func(*inputs)))
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = [Tensor._make(transfer(rng.standard_normal(o.shape).astype(o._data.dtype), o.device))
                        .requires_grad_() for o in outputs]
    n_in = len(inputs)

    def first_derivative(*args: Any) -> tuple[Tensor, ...]:
        ins, gos = args[:n_in], args[n_in:]
        outs = _differentiable_outputs(_as_tuple(func(*ins)))
        grads = grad_sync(outs, [ins[i] for i in diff_idx], list(gos), create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(first_derivative, (*inputs, *grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, nondet_tol=nondet_tol,
                     check_undefined_grad=check_undefined_grad, check_grad_dtypes=check_grad_dtypes,
                     check_batched_grad=check_batched_grad, check_forward_ad=check_fwd_over_rev,
                     check_backward_ad=check_rev_over_rev, fast_mode=fast_mode, masked=masked)
