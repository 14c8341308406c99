"""Reverse-mode automatic differentiation (mirrors ``torch.autograd``), with ``await``.

``backward`` and ``grad`` are coroutines: the backward pass runs as part of the
awaiting task, yielding to the event loop between time slices, so an async
server keeps serving while it differentiates.  ``backward_sync`` and
``grad_sync`` are their blocking twins for scripts and threads: same
arguments, same results, the same engine underneath.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agrad._engine import _drivers, _run
from agrad._engine._graph_task import current_graph_task
from agrad._engine._options import is_multithreading_enabled, set_multithreading_enabled
from agrad._grad_mode import enable_grad, inference_mode, no_grad, set_grad_enabled
from agrad._graph._anomaly import detect_anomaly, set_detect_anomaly
from agrad._tensor import Tensor
from agrad.autograd import function, functional, graph
from agrad.autograd.function import Function
from agrad.autograd.gradcheck import gradcheck, gradgradcheck

__all__ = [
    "backward", "backward_sync", "grad", "grad_sync", "Function", "gradcheck", "gradgradcheck",
    "detect_anomaly", "set_detect_anomaly", "no_grad", "enable_grad", "set_grad_enabled",
    "inference_mode", "queue_callback", "function", "functional", "graph", "set_multithreading_enabled",
    "is_multithreading_enabled",
]

_Tensors = Tensor | Sequence[Tensor]


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
    a cancellation leaves every ``.grad`` as it was.

    Example::

        >>> x = agrad.tensor([1.0, 2.0], requires_grad=True)
        >>> await agrad.autograd.backward((x * x).sum())  # doctest: +SKIP
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

    Callable from any thread, including one whose event loop is running (it
    then blocks that loop for the duration, as any blocking call does).

    Example::

        >>> x = agrad.tensor([1.0, 2.0], requires_grad=True)
        >>> agrad.autograd.backward_sync((x * x).sum())
        >>> x.grad
        tensor([2., 4.])
    """
    if grad_variables is not None:
        grad_tensors = grad_variables
    _drivers.execute_sync(_run.backward_task(tensors, grad_tensors, retain_graph, create_graph, inputs))


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

        >>> x = agrad.tensor(3.0, requires_grad=True)
        >>> agrad.autograd.grad_sync(x ** 2, x)
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
    """Blocking twin of :func:`grad`: same arguments and result."""
    task, collect = _run.grad_task(outputs, inputs, grad_outputs, retain_graph, create_graph,
                                   allow_unused, is_grads_batched, materialize_grads)
    _drivers.execute_sync(task)
    return collect()


def queue_callback(callback: Callable[[], None]) -> None:
    """Run ``callback()`` once the current backward has finished (after ``.grad`` is committed).

    Only valid while a backward is running, e.g. from a hook or a custom
    Function's backward (PyTorch's ``Variable._execution_engine.queue_callback``).
    """
    task = current_graph_task.get()
    if task is None:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    task.final_callbacks.append(callback)
