"""Building a GraphTask from the arguments of ``backward`` and ``grad``.

Everything that checks the caller's arguments and prepares the task lives
here, shared by the awaitable entry points and their blocking twins; the
drivers only run the prepared task.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from agrad._ambient import current_graph_task
from agrad._backends import full, zeros
from agrad._dtype import from_numpy_dtype
from agrad._engine._graph_task import GraphTask
from agrad._graph._node import Edge, GradientEdge, GraphRoot
from agrad._tensor import Tensor


def _as_tuple(x: Any, what: str) -> tuple[Any, ...]:
    if x is None:
        return ()
    if isinstance(x, (Tensor, GradientEdge)):  # (a GradientEdge is a tuple, but one input)
        return (x,)
    if isinstance(x, (list, tuple)):
        return tuple(x)
    raise TypeError(f"{what} must be a Tensor or a sequence of Tensors, got {type(x).__name__}")


def _roots(x: Any, what: str) -> tuple[Any, ...]:
    """The ``tensors``/``outputs`` argument as a tuple: unlike the optional
    arguments it may not be None (PyTorch iterates it and raises)."""
    if x is None:
        raise TypeError("'NoneType' object is not iterable")
    return _as_tuple(x, what)


def _root_meta(out: Any, i: int) -> tuple[tuple[int, ...], Any, Any]:
    """``(shape, dtype, device)`` of the gradient a root takes: a Tensor's own,
    or, for a GradientEdge, what its node expects at that input (PyTorch's
    ``_make_grads`` reads ``node._input_metadata`` the same way)."""
    if isinstance(out, GradientEdge):
        shape, dtype, device = out.node._input_meta[out.output_nr]
        return tuple(shape), dtype, device
    if not isinstance(out, Tensor):
        raise TypeError(f"element {i} of tensors is a {type(out).__name__}, not a Tensor")
    if not out.requires_grad:
        raise RuntimeError(f"element {i} of tensors does not require grad and does not have a grad_fn")
    return tuple(out._data.shape), out._data.dtype, out.device


def _make_grads(outputs: Sequence[Tensor | GradientEdge], grads: Sequence[Any]) -> list[Tensor]:
    """Check or create the gradient of each root (PyTorch's ``_make_grads``)."""
    new = []
    for i, (out, g) in enumerate(zip(outputs, grads)):
        shape, dtype, device = _root_meta(out, i)
        if g is None:
            if math.prod(shape) != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            g = Tensor._make(full(shape, 1, dtype, device))
        elif not isinstance(g, Tensor):
            raise TypeError(f"gradients can be either Tensors or None, but got {type(g).__name__}")
        elif tuple(g.shape) != shape:
            raise RuntimeError(
                f"Mismatch in shape: grad_output[{i}] has a shape of {tuple(g.shape)} and "
                f"output[{i}] has a shape of {shape}."
            )
        else:
            if g.device is not device:
                raise RuntimeError(
                    f"invalid gradient at index {i} - expected device {device} but got {g.device}"
                )
            if g._data.dtype != dtype:
                g = g.to(from_numpy_dtype(dtype))
        new.append(g)
    return new


def _root_edge(out: Tensor | GradientEdge) -> Edge:
    return Edge(out.node, out.output_nr) if isinstance(out, GradientEdge) else out._gradient_edge()


def _new_task(outputs: tuple[Tensor | GradientEdge, ...], grad_outputs: Any, retain_graph: bool | None,
              create_graph: bool, inputs: tuple[Tensor, ...] | None, accumulate_grad: bool) -> GraphTask:
    grads = _as_tuple(grad_outputs, "grad_tensors") or (None,) * len(outputs)
    if len(grads) != len(outputs):
        raise RuntimeError(f"got {len(outputs)} tensors and {len(grads)} gradients")
    root_grads = _make_grads(outputs, grads)
    keep_graph = create_graph if retain_graph is None else bool(retain_graph)
    task = GraphTask(keep_graph, create_graph, current_graph_task.get())

    edges = [_root_edge(t) for t in outputs]
    if len(edges) == 1:
        # One root: start at its node directly, as PyTorch's skip_dummy_node does.
        root, nr = edges[0]
        buffer: list[Any] = [None] * len(root._input_meta)
        buffer[nr] = root_grads[0]
    else:
        root, buffer = GraphRoot(edges, root_grads), []

    output_edges = None
    if inputs is not None:
        output_edges = []
        for t in inputs:
            if isinstance(t, GradientEdge):  # the gradient arriving there, as PyTorch's
                output_edges.append(Edge(t.node, t.output_nr))
                continue
            if not isinstance(t, Tensor):
                raise TypeError(f"inputs must be Tensors or GradientEdges, got {type(t).__name__}")
            if not t.requires_grad:  # backward() retains the grad of its inputs, as PyTorch's does
                raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False" if accumulate_grad
                                   else "One of the differentiated Tensors does not require grad")
            if accumulate_grad and t._grad_fn is not None:
                t.retain_grad()  # backward(inputs=[non_leaf]) fills its .grad, as in PyTorch
            output_edges.append(t._gradient_edge())
    task.start(root, buffer, output_edges, accumulate_grad)
    return task


def backward_task(tensors: Any, grad_tensors: Any, retain_graph: bool | None, create_graph: bool,
                  inputs: Any) -> GraphTask:
    """The GraphTask of ``agrad.autograd.backward``."""
    outputs = _roots(tensors, "tensors")
    ins = None
    if inputs is not None:
        ins = _as_tuple(inputs, "inputs")
        if not ins:
            raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
    if create_graph:
        warnings.warn(
            "Using backward() with create_graph=True will create a reference cycle between the "
            "parameter and its gradient which can cause a memory leak. We recommend using "
            "autograd.grad when creating the graph to avoid this. If you have to use this function, "
            "make sure to reset the .grad fields of your parameters to None after use to break the "
            "cycle and avoid the leak.",
            UserWarning,
            stacklevel=3,
        )
    return _new_task(outputs, grad_tensors, retain_graph, create_graph, ins, accumulate_grad=True)


def grad_task(outputs: Any, inputs: Any, grad_outputs: Any, retain_graph: bool | None, create_graph: bool,
              allow_unused: bool | None, is_grads_batched: bool,
              materialize_grads: bool) -> tuple[GraphTask, Callable[[], tuple[Tensor | None, ...]]]:
    """The GraphTask of ``agrad.autograd.grad`` and the function that collects its result."""
    if materialize_grads and allow_unused is False:
        raise ValueError(
            "Expected allow_unused to be True or not passed when materialize_grads=True, "
            "but got: allow_unused=False."
        )
    if is_grads_batched:
        raise NotImplementedError("agrad.autograd.grad does not support is_grads_batched=True yet")
    allow_unused = materialize_grads if allow_unused is None else allow_unused
    outs = _roots(outputs, "outputs")
    ins = _as_tuple(inputs, "inputs")
    if not ins:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    task = _new_task(outs, grad_outputs, retain_graph, create_graph, ins, accumulate_grad=False)

    def collect() -> tuple[Tensor | None, ...]:
        result = []
        for i, (t, g) in enumerate(zip(ins, task.captured)):
            if g is None:
                if materialize_grads and isinstance(t, GradientEdge):
                    # Only an unused edge is refused: PyTorch checks after the run, as here.
                    raise RuntimeError("materialize_grads cannot be used when the given input is a GradientEdge")
                if materialize_grads:
                    # zeros_like(input, requires_grad=create_graph), as PyTorch's grad()
                    g = Tensor._make(zeros(t._data.shape, t._data.dtype, t.device)).requires_grad_(create_graph)
                elif not allow_unused:
                    raise RuntimeError(
                        f"The differentiated Tensor at index {i} appears to not have been used in the "
                        "graph. Set allow_unused=True if this is the desired behavior."
                    )
            elif not create_graph:
                g = g.detach()
            result.append(g)
        return tuple(result)

    return task, collect
