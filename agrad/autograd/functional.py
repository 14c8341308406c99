"""Higher-level differentiation (mirrors ``torch.autograd.functional``), with ``await``.

:func:`vjp`, :func:`jacobian` and :func:`hessian` are coroutines built on
:func:`agrad.autograd.grad`; ``vjp_sync``, ``jacobian_sync`` and
``hessian_sync`` are their blocking twins.  Each pair shares one core, a
generator that *yields* its gradient requests (the arguments of ``grad``) and
is sent their results: the async driver answers them with ``await grad(...)``,
the blocking one with ``grad_sync(...)``.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

from agrad._grad_mode import enable_grad
from agrad._misuse import must_await
from agrad._tensor import Tensor
from agrad.autograd._api import grad, grad_sync

__all__ = ["vjp", "vjp_sync", "jacobian", "jacobian_sync", "hessian", "hessian_sync"]

# A gradient request: the keyword arguments of ``agrad.autograd.grad``.
_Core = Generator[dict[str, Any], Any, Any]


def _as_tuple(x: Any, arg: str, fn: str) -> tuple[bool, tuple[Tensor, ...]]:
    is_tuple = isinstance(x, (tuple, list))
    xs = tuple(x) if is_tuple else (x,)
    for i, t in enumerate(xs):
        if not isinstance(t, Tensor):
            which = f"the value at index {i}" if is_tuple else f"the given {arg}"
            raise TypeError(f"The {arg} given to {fn} must be either a Tensor or a tuple of Tensors but {which} "
                            f"has type {type(t)}.")
    return is_tuple, xs


def _grad_preprocess(inputs: tuple[Tensor, ...], create_graph: bool) -> tuple[Tensor, ...]:
    # As PyTorch: with create_graph, keep the link to the caller's graph via a
    # reshape (a view op; agrad has no ``view_as``); otherwise differentiate w.r.t. fresh leaves.
    if create_graph:
        return tuple(t.reshape(t.shape) if t.requires_grad else t.detach().requires_grad_(True) for t in inputs)
    return tuple(t.detach().requires_grad_(True) for t in inputs)


def _postprocess(xs: Any, create_graph: bool) -> Any:
    if isinstance(xs, tuple):
        return tuple(_postprocess(x, create_graph) for x in xs)
    return xs if create_graph or xs is None else xs.detach()


def _zeros_for_none(grads: tuple[Any, ...], inputs: tuple[Tensor, ...], strict: bool, fn: str,
                    what: str) -> tuple[Tensor, ...]:
    out = []
    for i, (g, x) in enumerate(zip(grads, inputs)):
        if g is None:
            if strict:
                raise RuntimeError(f"The {what} for input {i} is independent of the input. This is not allowed "
                                   f"in strict mode.")
            from agrad._creation import zeros_like
            g = zeros_like(x)
        out.append(g)
    return tuple(out)


def _call(func: Callable[..., Any], inputs: tuple[Tensor, ...], fn: str) -> tuple[bool, tuple[Tensor, ...]]:
    with enable_grad():
        outputs = func(*inputs)
    return _as_tuple(outputs, "outputs of the user-provided function", fn)


def _vjp_core(func: Callable[..., Any], inputs: Any, v: Any, create_graph: bool, strict: bool) -> _Core:
    is_tuple, inps = _as_tuple(inputs, "inputs", "vjp")
    inps = _grad_preprocess(inps, create_graph)
    out_tuple, outputs = _call(func, inps, "vjp")
    if v is not None:
        _, vs = _as_tuple(v, "v", "vjp")
        if len(vs) != len(outputs):
            raise RuntimeError(f"v has invalid size: should be {len(outputs)} but got {len(vs)}")
        for o, vi in zip(outputs, vs):
            if o.shape != vi.shape:
                raise RuntimeError(f"Mismatch in shape: grad_output[0] has a shape of {vi.shape} and output[0] "
                                   f"has a shape of {o.shape}.")
    else:
        if len(outputs) != 1 or outputs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the user-provided function returns a single "
                               "Tensor with a single element.")
        vs = None
    with enable_grad():
        diff = [i for i, o in enumerate(outputs) if o.requires_grad]
        if diff:
            grads = yield {"outputs": [outputs[i] for i in diff], "inputs": inps,
                           "grad_outputs": None if vs is None else [vs[i] for i in diff],
                           "create_graph": create_graph, "allow_unused": True}
        else:
            grads = (None,) * len(inps)
    if strict and not create_graph and len(diff) != len(outputs):
        raise RuntimeError("Output 0 of the user-provided function does not require gradients. The outputs "
                           "must be computed in a differentiable manner from the input when running in strict mode.")
    grads = _zeros_for_none(tuple(grads), inps, strict, "vjp", "output of the user-provided function")
    outs = _postprocess(outputs, create_graph)
    grads = _postprocess(grads, create_graph)
    return (outs if out_tuple else outs[0]), (grads if is_tuple else grads[0])


def _jacobian_rows(outputs: tuple[Tensor, ...], inps: tuple[Tensor, ...], create_graph: bool,
                   strict: bool) -> _Core:
    """``jac[i][j]``: d outputs[i] / d inps[j], shaped ``outputs[i].shape + inps[j].shape``."""
    from agrad._creation import zeros, zeros_like
    from agrad._ops._shape import stack

    jac = []
    for i, out in enumerate(outputs):
        rows: list[list[Tensor]] = [[] for _ in inps]
        flat = out.reshape(-1)
        n = flat.shape[0]
        for k in range(n):
            grads: tuple[Any, ...] = (None,) * len(inps)
            if out.requires_grad:
                onehot = zeros(n, dtype=out.dtype)
                onehot._data[k] = 1
                with enable_grad():
                    grads = yield {"outputs": [out], "inputs": inps, "grad_outputs": [onehot.reshape(out.shape)],
                                   "retain_graph": True, "create_graph": create_graph, "allow_unused": True}
            for j, (g, x) in enumerate(zip(grads, inps)):
                if g is None:
                    if strict:
                        raise RuntimeError(f"Output {i} of the user-provided function is independent of input "
                                           f"{j}. This is not allowed in strict mode.")
                    g = zeros_like(x)
                rows[j].append(g)
        jac.append(tuple(
            (stack(r) if r else zeros(0, *x.shape, dtype=out.dtype)).reshape(*out.shape, *x.shape)
            for r, x in zip(rows, inps)))
    return tuple(jac)


def _shape_jacobian(jac: tuple[tuple[Tensor, ...], ...], out_tuple: bool, in_tuple: bool) -> Any:
    if out_tuple:
        return tuple(row if in_tuple else row[0] for row in jac)
    return jac[0] if in_tuple else jac[0][0]


def _jacobian_core(func: Callable[..., Any], inputs: Any, create_graph: bool, strict: bool,
                   vectorize: bool) -> _Core:
    is_tuple, inps = _as_tuple(inputs, "inputs", "jacobian")
    inps = _grad_preprocess(inps, create_graph)
    out_tuple, outputs = _call(func, inps, "jacobian")
    jac = yield from _jacobian_rows(outputs, inps, create_graph, strict)
    return _shape_jacobian(_postprocess(jac, create_graph), out_tuple, is_tuple)


def _hessian_core(func: Callable[..., Any], inputs: Any, create_graph: bool, strict: bool) -> _Core:
    is_tuple, inps = _as_tuple(inputs, "inputs", "hessian")
    inps = _grad_preprocess(inps, create_graph)
    _, outputs = _call(func, inps, "hessian")
    if len(outputs) != 1 or outputs[0].numel() != 1:
        raise RuntimeError("The function given to hessian should return a single Tensor with a single element.")
    out = outputs[0].reshape(())
    if out.requires_grad:
        with enable_grad():
            grads = yield {"outputs": [out], "inputs": inps, "create_graph": True, "allow_unused": True}
    else:
        grads = (None,) * len(inps)
    grads = _zeros_for_none(tuple(grads), inps, strict, "hessian", "gradient")
    jac = yield from _jacobian_rows(grads, inps, create_graph, strict)
    return _shape_jacobian(_postprocess(jac, create_graph), is_tuple, is_tuple)


async def _drive(core: _Core) -> Any:

    try:
        request = next(core)
        while True:
            request = core.send(await grad(**request))
    except StopIteration as stop:
        return stop.value


def _drive_sync(core: _Core) -> Any:

    try:
        request = next(core)
        while True:
            request = core.send(grad_sync(**request))
    except StopIteration as stop:
        return stop.value


@must_await("agrad.autograd.functional.vjp(...)", "await agrad.autograd.functional.vjp(...)",
            "agrad.autograd.functional.vjp_sync(...)")
async def vjp(func: Callable[..., Any], inputs: Any, v: Any = None, create_graph: bool = False,
              strict: bool = False) -> tuple[Any, Any]:
    """``(func(*inputs), vᵀ·J)``: the vector-Jacobian product of ``func`` at ``inputs``.

    ``v`` may be omitted when ``func`` returns a single-element tensor.  The
    gradients have the structure of ``inputs`` (a tensor or a tuple).
    """
    return await _drive(_vjp_core(func, inputs, v, create_graph, strict))


def vjp_sync(func: Callable[..., Any], inputs: Any, v: Any = None, create_graph: bool = False,
             strict: bool = False) -> tuple[Any, Any]:
    """Blocking twin of :func:`vjp`."""
    return _drive_sync(_vjp_core(func, inputs, v, create_graph, strict))


@must_await("agrad.autograd.functional.jacobian(...)", "await agrad.autograd.functional.jacobian(...)",
            "agrad.autograd.functional.jacobian_sync(...)")
async def jacobian(func: Callable[..., Any], inputs: Any, create_graph: bool = False, strict: bool = False,
                   vectorize: bool = False, strategy: str = "reverse-mode") -> Any:
    """The Jacobian of ``func`` at ``inputs`` (one backward per output element).

    A tensor for one input and one output, of shape ``output.shape + input.shape``;
    otherwise tuples as ``torch.autograd.functional.jacobian``.  ``vectorize``
    is accepted for compatibility and changes nothing.
    """
    _check_strategy(strategy)
    return await _drive(_jacobian_core(func, inputs, create_graph, strict, vectorize))


def jacobian_sync(func: Callable[..., Any], inputs: Any, create_graph: bool = False, strict: bool = False,
                  vectorize: bool = False, strategy: str = "reverse-mode") -> Any:
    """Blocking twin of :func:`jacobian`."""
    _check_strategy(strategy)
    return _drive_sync(_jacobian_core(func, inputs, create_graph, strict, vectorize))


@must_await("agrad.autograd.functional.hessian(...)", "await agrad.autograd.functional.hessian(...)",
            "agrad.autograd.functional.hessian_sync(...)")
async def hessian(func: Callable[..., Any], inputs: Any, create_graph: bool = False, strict: bool = False,
                  vectorize: bool = False, outer_jacobian_strategy: str = "reverse-mode") -> Any:
    """The Hessian of the scalar function ``func`` at ``inputs``.

    A tensor of shape ``input.shape + input.shape`` for one input; for a tuple
    of inputs, a tuple of tuples ``H[i][j]``.
    """
    _check_strategy(outer_jacobian_strategy)
    return await _drive(_hessian_core(func, inputs, create_graph, strict))


def hessian_sync(func: Callable[..., Any], inputs: Any, create_graph: bool = False, strict: bool = False,
                 vectorize: bool = False, outer_jacobian_strategy: str = "reverse-mode") -> Any:
    """Blocking twin of :func:`hessian`."""
    _check_strategy(outer_jacobian_strategy)
    return _drive_sync(_hessian_core(func, inputs, create_graph, strict))


def _check_strategy(strategy: str) -> None:
    if strategy != "reverse-mode":
        raise NotImplementedError(f"agrad supports only the 'reverse-mode' strategy, got {strategy!r}")
