"""``backward`` and ``grad`` with their blocking twins: the entry points into the engine.

Private: ``agrad.autograd`` exports them; ``functional`` and ``gradcheck``
import them from here, below the package that imports those modules.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agrad._engine import _drivers, _run
from agrad._misuse import must_await
from agrad._tensor import Tensor

__all__ = ["backward", "backward_sync", "grad", "grad_sync"]

_Tensors = Tensor | Sequence[Tensor]


@must_await("agrad.autograd.backward(...)", "await agrad.autograd.backward(...)",
            "agrad.autograd.backward_sync(...)")
async def backward(
    tensors: _Tensors,
    grad_tensors: _Tensors | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    grad_variables: Any = None,
    inputs: _Tensors | None = None,
) -> None:
    """Accumulate gradients of ``tensors`` into the ``.grad`` of graph leaves.

    Args:
        tensors: roots of the backward (usually one scalar loss).
        grad_tensors: the gradient w.r.t. each root; may be omitted for
            single-element roots (taken as ones).
        retain_graph: keep saved tensors so the graph can be backpropagated
            again; defaults to ``create_graph``.
        create_graph: record the backward itself, for higher-order gradients.
        inputs: accumulate only into these tensors (leaves or not); others
            are left alone and parts of the graph not leading to them are
            skipped.

    ``.grad`` is changed only if the whole backward succeeds: an exception or
    a cancellation leaves every ``.grad`` as it was.  Called without ``await``,
    it does nothing and reports :class:`agrad.NotAwaitedWarning` at the call.

    Example::

        >>> import asyncio
        >>> x = agrad.tensor([1.0, 2.0], requires_grad=True)
        >>> asyncio.run(agrad.autograd.backward((x * x).sum()))  # await it in async code
        >>> x.grad
        tensor([2., 4.])
    """
    if grad_variables is not None:
        grad_tensors = grad_variables
    await _drivers.execute(_run.backward_task(tensors, grad_tensors, retain_graph, create_graph, inputs))


def backward_sync(
    tensors: _Tensors,
    grad_tensors: _Tensors | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    grad_variables: Any = None,
    inputs: _Tensors | None = None,
) -> None:
    """Blocking twin of :func:`backward`: same arguments and effect.

    Callable from any thread, including one whose event loop is running: it
    then blocks that loop for the duration, as any blocking call does, and
    warns so (:class:`agrad.BlockingCallWarning`, once per call site).

    Example::

        >>> x = agrad.tensor([1.0, 2.0], requires_grad=True)
        >>> agrad.autograd.backward_sync((x * x).sum())
        >>> x.grad
        tensor([2., 4.])
    """
    if grad_variables is not None:
        grad_tensors = grad_variables
    _drivers.execute_sync(_run.backward_task(tensors, grad_tensors, retain_graph, create_graph, inputs))


@must_await("agrad.autograd.grad(...)", "await agrad.autograd.grad(...)", "agrad.autograd.grad_sync(...)")
async def grad(
    outputs: _Tensors,
    inputs: _Tensors,
    grad_outputs: _Tensors | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    only_inputs: bool = True,
    allow_unused: bool | None = None,
    is_grads_batched: bool = False,
    materialize_grads: bool = False,
) -> tuple[Tensor | None, ...]:
    """Return the gradients of ``outputs`` w.r.t. ``inputs`` without touching ``.grad``.

    Args:
        outputs: the differentiated tensors.
        inputs: the tensors to differentiate w.r.t. (leaves or not).
        grad_outputs: the gradient w.r.t. each output (ones for scalars).
        retain_graph: keep the graph; defaults to ``create_graph``.
        create_graph: record the backward, so the result can be differentiated.
        allow_unused: return ``None`` for inputs the outputs do not depend on,
            instead of raising.
        materialize_grads: return zeros instead of ``None`` for unused inputs.

    Returns:
        One gradient per input.

    Example::

        >>> import asyncio
        >>> x = agrad.tensor(3.0, requires_grad=True)
        >>> asyncio.run(agrad.autograd.grad(x ** 2, x))  # await it in async code
        (tensor(6.),)
    """
    task, collect = _run.grad_task(outputs, inputs, grad_outputs, retain_graph, create_graph,
                                   allow_unused, is_grads_batched, materialize_grads)
    await _drivers.execute(task)
    return collect()


def grad_sync(
    outputs: _Tensors,
    inputs: _Tensors,
    grad_outputs: _Tensors | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    only_inputs: bool = True,
    allow_unused: bool | None = None,
    is_grads_batched: bool = False,
    materialize_grads: bool = False,
) -> tuple[Tensor | None, ...]:
    """Blocking twin of :func:`grad`: same arguments and result.

    Example::

        >>> x = agrad.tensor(3.0, requires_grad=True)
        >>> agrad.autograd.grad_sync(x ** 2, x)
        (tensor(6.),)
    """
    task, collect = _run.grad_task(outputs, inputs, grad_outputs, retain_graph, create_graph,
                                   allow_unused, is_grads_batched, materialize_grads)
    _drivers.execute_sync(task)
    return collect()
