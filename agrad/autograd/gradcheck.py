"""Finite-difference gradient checks (mirrors ``torch.autograd.gradcheck``)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from agrad._backends import transfer, zeros
from agrad._device import CPU
from agrad._tensor import Tensor
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


def _numerical_jacobian(fn: Callable[..., Any], inputs: tuple[Any, ...], x: Tensor, n_out: list[int],
                        eps: float) -> list[np.ndarray]:
    """d(outputs)/d(x) by central differences, one (numel(x), numel(out)) block per output."""
    flat = x._data.reshape(-1)  # a view: perturbing it perturbs x
    jac = [np.zeros((flat.size, n)) for n in n_out]
    # Evaluated with grad mode on: gradgradcheck's function calls grad() inside.
    for j in range(flat.size):
        orig = flat[j].copy()
        flat[j] = orig + eps
        plus = [_host(o) for o in _differentiable_outputs(_as_tuple(fn(*inputs)))]
        flat[j] = orig - eps
        minus = [_host(o) for o in _differentiable_outputs(_as_tuple(fn(*inputs)))]
        flat[j] = orig
        for k, (p, m) in enumerate(zip(plus, minus)):
            jac[k][j] = (p - m) / (2 * eps)
    return jac


def _directional_derivative(fn: Callable[..., Any], inputs: tuple[Any, ...], x: Tensor, v: np.ndarray,
                            eps: float) -> list[np.ndarray]:
    """d(outputs)/d(x) applied to ``v`` (a Jacobian-vector product) by central differences."""
    orig = x._data.copy()
    try:
        x._data[...] = orig + eps * v
        plus = [_host(o) for o in _differentiable_outputs(_as_tuple(fn(*inputs)))]
        x._data[...] = orig - eps * v
        minus = [_host(o) for o in _differentiable_outputs(_as_tuple(fn(*inputs)))]
    finally:
        x._data[...] = orig
    return [(p - m) / (2 * eps) for p, m in zip(plus, minus)]


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
                outputs: list[Tensor], eps: float, atol: float, rtol: float) -> str | None:
    """The mismatch message of the first failing (input, output) pair, or None."""
    from agrad.autograd import grad_sync

    rng = np.random.default_rng(0)
    us = [rng.standard_normal(out.shape).astype(out._data.dtype) for out in outputs]
    for i, x in enumerate(diff_inputs):
        v = rng.standard_normal(x.shape).astype(x._data.dtype)
        numerical = _directional_derivative(func, inputs, x, v, eps)
        for k, (out, u) in enumerate(zip(outputs, us)):
            expected = float(numerical[k] @ u.reshape(-1).astype(np.float64))
            (g,) = grad_sync(out, x, Tensor._make(transfer(u, out.device)), retain_graph=True, allow_unused=True)
            if g is not None and g.shape != x.shape:
                return f"Gradient has incorrect size for input {i}: {g.shape} vs {x.shape}"
            actual = 0.0 if g is None else float(_host(g) @ v.reshape(-1).astype(np.float64))
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
    from agrad.autograd import grad_sync

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
    fast_mode: bool = False,
) -> bool:
    """Check analytical gradients of ``func`` against central finite differences.

    The analytical Jacobian is built row by row with the engine
    (:func:`agrad.autograd.grad_sync` with one-hot ``grad_outputs``), the
    numerical one by perturbing each element of each input that requires grad
    by ``±eps``.  Inputs should be ``float64``.

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
    from agrad.autograd import grad_sync

    inputs = _as_tuple(inputs)
    diff_inputs = [t for t in inputs if isinstance(t, Tensor) and t.requires_grad]
    for i, t in enumerate(diff_inputs):
        if t.dtype.name != "float64":
            warnings.warn(f"Input #{i} requires gradient and is not a double precision floating point. "
                          "This check will likely fail if all the inputs are not of double precision "
                          "floating point.", UserWarning, stacklevel=2)
    if not diff_inputs:
        raise ValueError("gradcheck expects at least one input tensor to require gradient")
    outputs = _differentiable_outputs(_as_tuple(func(*inputs)))
    n_out = [o.numel() for o in outputs]

    def fail(msg: str) -> bool:
        if raise_exception:
            raise GradcheckError(msg)
        return False

    if fast_mode:
        msg = _fast_check(func, inputs, diff_inputs, outputs, eps, atol, rtol)
        if msg is not None:
            return fail(msg)
    else:
        for i, x in enumerate(diff_inputs):
            numerical = _numerical_jacobian(func, inputs, x, n_out, eps)
            for k, out in enumerate(outputs):
                analytical = np.zeros((x.numel(), out.numel()))
                for col in range(out.numel()):
                    onehot = np.zeros(out.numel(), dtype=out._data.dtype)
                    onehot[col] = 1
                    (g,) = grad_sync(out, x, Tensor._make(transfer(onehot.reshape(out.shape), out.device)),
                                     retain_graph=True, allow_unused=True)
                    if g is not None:
                        if g.shape != x.shape:
                            return fail(f"Gradient has incorrect size for input {i}: {g.shape} vs {x.shape}")
                        analytical[:, col] = _host(g)
                if not np.allclose(analytical, numerical[k], rtol=rtol, atol=atol, equal_nan=True):
                    return fail(
                        f"Jacobian mismatch for output {k} with respect to input {i},\n"
                        f"numerical:{numerical[k]}\nanalytical:{analytical}\n"
                    )
    if check_undefined_grad:
        msg = _undefined_grad_check(func, inputs, diff_inputs)
        if msg is not None:
            return fail(msg)
    return True


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
    fast_mode: bool = False,
) -> bool:
    """Check second derivatives: :func:`gradcheck` of the map
    ``(inputs, grad_outputs) -> grad(func(inputs), inputs, grad_outputs, create_graph=True)``,
    in fast mode if ``fast_mode`` (Note [Fast gradcheck]).
    """
    from agrad.autograd import grad_sync

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
                     raise_exception=raise_exception, fast_mode=fast_mode)
