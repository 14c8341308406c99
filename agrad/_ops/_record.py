"""Recording: the one function that connects a backward node to the graph.

:func:`record` is how every node made in a forward pass joins the graph: a
table op's (``OpNode``), a variadic op's (``VariadicOpNode``), a custom
Function's ``ctx`` and a ``once_differentiable`` backward's ``_DelayedError``.
It sets the node's edges and topological number, the metadata of the
gradients it will receive, its saved values, its ``_work`` estimate and, in
anomaly mode, its forward trace.  This module also holds the table ops' node
classes, which apply the entry's vjps to what ``record`` saved.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agrad._device import CPU
from agrad._graph._anomaly import anomaly_enabled
from agrad._graph._node import _FREED, Edge, Node, SavedTensor, _is_constant, input_meta, single_input_meta
from agrad._ops._schema import (
    _SAVE_ATTR,
    _SAVE_INPUT,
    _SAVE_INPUTS,
    _SAVE_NOTHING,
    _SAVE_OUTPUT,
    _SAVE_SHAPE,
    _SAVE_STRIDES,
    _SAVE_TENSOR,
    OpDef,
    identity,
)
from agrad._tensor import Tensor

__all__ = ["OpNode", "VariadicOpNode", "node_classes", "record"]

# The input metadata of a custom node's output that is not a tensor.
_NO_META = ((), None, CPU)
_NOTHING = (_SAVE_NOTHING, None)


def record(op: OpDef | None, inputs: Sequence[Any], attrs: dict[str, Any], result: Tensor | None,
           node: Node | None = None, edges: Sequence[Edge | None] = (), outputs: Sequence[Any] = (),
           to_save: Sequence[Tensor | None] = (), connect: Callable[[Node], None] | None = None) -> Node | None:
    """Record the backward node of a forward call and return it (None: nothing requires grad).

    A table op (``op`` given; ``apply``, ``rebase_view``) records a new node of
    the op's class for its one output ``result``, with an edge for each input
    that requires grad and has a vjp (every input of a variadic op), and saves
    what the op's save plan for those inputs says (Note [Saving only what is
    needed]); ``result`` gets the node as its ``grad_fn``.

    A custom node (``op`` None: a Function's ``ctx``, a ``_DelayedError``) comes
    with its ``edges`` (a Function's dirty views have their own:
    Note [Dirty views]) and its ``outputs``, whose gradients it receives; it
    saves ``to_save`` (an output as its own output, an input as an input; None
    kept), always as a list.  ``connect(node)`` gives the outputs their
    ``grad_fn`` once the node's edges are set and before anything is saved.

    Either way the node's ``_work`` is the size of the gradients it receives
    plus that of the tensors it saved, unless the op says otherwise (Note
    [Offload threshold]).  The hot path of every recorded op: the table-op
    path is written out on purpose, and its node is made once its fields are
    known, with them (``Node._connect`` states what they keep).
    """
    plan: Sequence[tuple[int, Any]]  # what to save: Note [Saving only what is needed]
    meta: tuple[tuple[tuple[int, ...], Any, Any], ...]  # of the gradients it receives: (shape, dtype, device)
    if op is not None:
        new_edges: list[Edge | None] = []
        topo = -1
        mask = 0
        for t, vjp, bit in zip(inputs, op.edge_vjps, op.edge_bits):
            if t._base is not None:
                t._refresh_view()  # Note [View grad_fn regeneration]
            fn = t._grad_fn
            if fn is not None:
                nr = t._output_nr
            elif t._requires_grad:
                fn, nr = t._grad_accumulator(), 0
            if fn is None or vjp is None:
                new_edges.append(None)
                continue
            new_edges.append((fn, nr))  # type: ignore[arg-type]  # a plain tuple: see Edge
            mask |= bit
            if fn.topological_nr > topo:
                topo = fn.topological_nr
        if topo < 0:
            return None  # no input requires grad
        node_cls = op.node_cls if op.node_for is None else op.node_classes[op.node_for(**attrs)]
        next_edges = tuple(new_edges)
        meta = single_input_meta(result._data)  # type: ignore[union-attr]  # a table op has its result
        plan, holds_tensors = op.save_plans[mask]
        work = result._data.size  # type: ignore[union-attr]  # as above; the gradient it will receive
    else:
        assert node is not None
        topo = -1
        for e in edges:
            if e is not None and e[0].topological_nr > topo:
                topo = e[0].topological_nr
        next_edges = tuple(edges)
        meta = tuple(input_meta(o._data) if isinstance(o, Tensor) else _NO_META for o in outputs)
        if connect is not None:
            # connect(node) may record through the node (a dirty view's rebase
            # records a CopySlices on it), so the node joins the graph first,
            # with the saved values it was made with; what it saves comes after.
            node._connect(next_edges, topo + 1, meta, node._saved, node._work)
            connect(node)
        plan = [_NOTHING if t is None else (_SAVE_TENSOR, i) for i, t in enumerate(to_save)]
        holds_tensors = True  # a custom Function's saved values are freed even when empty
        work = sum(o._data.size for o in outputs if isinstance(o, Tensor))
    saved: list[Any] = []
    for kind, key in plan:
        if kind == _SAVE_NOTHING:
            saved.append(None)
        elif kind == _SAVE_INPUT:
            saved.append(SavedTensor(inputs[key]))
            work += inputs[key]._data.size
        elif kind == _SAVE_OUTPUT:
            saved.append(SavedTensor(result, is_output=True))  # type: ignore[arg-type]  # only table ops save it
            work += result._data.size  # type: ignore[union-attr]  # only table ops save it, with a result
        elif kind == _SAVE_ATTR:
            saved.append(attrs[key])
        elif kind == _SAVE_SHAPE:
            saved.append(inputs[key]._data.shape)
        elif kind == _SAVE_STRIDES:  # a layout, not the tensor (Note [Gradients in their input's layout])
            a = inputs[key]._data
            saved.append(tuple([s // a.itemsize for s in a.strides]))  # in elements, as PyTorch's
        elif kind == _SAVE_TENSOR:  # a custom node's: an output is saved as the node's own
            tensor: Tensor = to_save[key]  # type: ignore[assignment]  # not None: None is _NOTHING in the plan
            nr = _index_of(tensor, outputs)
            saved.append(SavedTensor(tensor, is_output=True, output_nr=nr) if nr >= 0 else SavedTensor(tensor))
            work += tensor._data.size
        elif kind == _SAVE_INPUTS:  # Note [Variadic ops]
            saved.append(tuple([SavedTensor(t) for t in inputs]))
            work += sum(t._data.size for t in inputs)
        else:  # _SAVE_SHAPES
            saved.append(tuple([t._data.shape for t in inputs]))
    # Saved values are a list only when they hold tensors (Note [Saved values]).
    if op is not None:  # made now, connected: no call beyond its constructor
        if op.work is not None:
            work = op.work(inputs, result)  # type: ignore[arg-type]  # a table op has its result
        node = node_cls(next_edges, topo + 1, meta, saved if holds_tensors else tuple(saved), work)
    else:
        assert node is not None  # as checked above
        node._connect(next_edges, topo + 1, meta, saved, work)
    if anomaly_enabled.get():
        node._record_trace()
    if result is not None:
        result._become_output(node)
    return node


def _index_of(t: Tensor, items: Sequence[Any]) -> int:
    for i, o in enumerate(items):
        if o is t:
            return i
    return -1


def _unpack(saved: list[Any], node: Node) -> list[Any]:
    """The saved values with each SavedTensor (alone or in a variadic op's tuple)
    unpacked, which checks its version; see Note [Saved values]."""
    out = []
    for s in saved:
        if type(s) is SavedTensor:
            # SavedTensor.unpack's commonest case inline: an input saved without
            # hooks and not modified since.  Anything else takes the full method.
            t = s.tensor
            s = (t if t is not None and not s.is_output and t._version_counter[0] == s.version
                 and (s.is_leaf or t._grad_fn is not None) else s.unpack(node))
        elif type(s) is tuple and s and type(s[0]) is SavedTensor:
            s = tuple([x.unpack(node) for x in s])
        out.append(s)
    return out


# Note [Saved values by name]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch exposes each value a built-in node saved as ``grad_fn._saved_<name>``
# (unpacked: a tensor, with the version check; shapes and attributes as they
# are) and each saved tensor as ``grad_fn._raw_saved_<name>`` (the SavedTensor,
# whose ``register_hooks`` repacks it).  ``<name>`` is the argument's name in
# PyTorch's derivative formula.  An entry's saved values are named by its vjps'
# parameters (Note [Saving only what is needed]); ``_saved_names`` (in
# ``_schema``) maps them to PyTorch's names: the first input is ``self``, its
# shape ``self_sym_sizes``, the output ``result``, anything else keeps its
# name unless the entry's ``saved_as`` renames it (``matmul``'s ``other`` is
# ``mat2``).  A value the node did not need is None, as PyTorch's undefined
# tensor, before and after a backward freed the node's tensors; every other
# ``_saved_`` attribute then raises the freed-graph error (PyTorch keeps
# shapes and attributes: a deliberate difference, the engine frees the whole
# list in one step, Note [Saved values]).  They are properties of each op's
# node class (``_saved_attributes``): the hot path pays nothing.
def _saved_attributes(names: tuple[str, ...]) -> dict[str, property]:
    """The ``_saved_<name>``/``_raw_saved_<name>`` properties of a node class.

    Properties of each op's node class, not a ``__getattr__``: a class with
    ``__getattr__`` gets a Python-level attribute hook that slows every
    attribute read of its instances, the engine's included (+2,700
    instructions per node of a chain's backward, callgrind).
    """
    attrs: dict[str, property] = {}
    for i, name in enumerate(names):
        for raw, attr in ((False, "_saved_" + name), (True, "_raw_saved_" + name)):
            def saved(node: Any, i: int = i, raw: bool = raw, attr: str = attr) -> Any:
                return node._saved_value(i, raw, attr)

            attrs[attr] = property(saved)
    return attrs


class OpNode(Node):
    """Backward node of a table op: applies the entry's vjps to the saved values."""

    __slots__ = ()
    op: OpDef
    variadic = False

    def _saved_value(self, i: int, raw: bool, name: str) -> Any:
        """``_saved_<name>`` (``raw``: ``_raw_saved_<name>``) of the ``i``-th saved
        value: Note [Saved values by name]."""
        saved = self._saved
        if saved is None:
            if not self.variadic and self.op.save_plans[self._save_mask()][0][i][0] == _SAVE_NOTHING:
                return SavedTensor.undefined() if raw else None  # never saved, as before the free
            raise RuntimeError(_FREED)
        value = saved[i]
        if type(value) is SavedTensor and value.tensor is not None and _is_constant(value.tensor):
            value = value.tensor.item()  # a Python number (``x ** 2``'s exponent) as PyTorch's Scalar
        is_tensor = type(value) is SavedTensor or type(value) is tuple and value and type(value[0]) is SavedTensor
        if raw:
            if value is None:
                return SavedTensor.undefined()
            if not is_tensor:
                raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
            return value
        if type(value) is SavedTensor:
            return value.unpack(self)
        return tuple(v.unpack(self) for v in value) if is_tensor else value

    def _save_mask(self) -> int:
        """The mask of inputs needing grad this node was recorded with (``record``)."""
        return sum(1 << i for i, e in enumerate(self.next_edges) if e is not None)

    def apply(self, grads: list[Any], task: Any) -> Sequence[Any]:
        # The backward's hottest function: plain loops (a comprehension costs a
        # function object per call on 3.11) and each vjp called directly.
        g = grads[0]
        if g is None:
            return [None] * len(self.next_edges)
        saved = self._saved
        if type(saved) is list:  # holds tensors (Note [Saved values])
            saved = _unpack(saved, self)
        elif saved is None:
            raise RuntimeError(_FREED)
        if self.variadic:  # Note [Variadic ops]: one vjp gives every input's gradient
            vjp, idx = self.op.calls[0]
            grads = vjp(g, *map(saved.__getitem__, idx))  # type: ignore[misc]  # a variadic op has its vjp
            return [None if e is None else o for e, o in zip(self.next_edges, grads)]
        needed = None if task is None or task.exec_info is None else task.needed
        out: list[Any] = []
        for edge, (vjp, idx) in zip(self.next_edges, self.op.calls):
            if edge is None or (needed is not None and not needed(edge[0])):
                out.append(None)
            elif vjp is identity:
                out.append(g)
            elif not idx:
                out.append(vjp(g))  # type: ignore[misc]  # an input with an edge has a vjp (record)
            elif len(idx) == 1:
                out.append(vjp(g, saved[idx[0]]))  # type: ignore[misc]  # as above
            else:
                out.append(vjp(g, *map(saved.__getitem__, idx)))  # type: ignore[misc]  # as above
        return out


# Note [Variadic ops]
# ~~~~~~~~~~~~~~~~~~~
# ``cat``/``stack``-like ops take any number of tensors: their forward is
# ``forward(xp, *tensors, dim=...)`` and their single vjp returns one gradient
# per tensor.  Its parameters name ``tensors`` (all inputs, saved),
# ``tensors_shape`` (their shapes), ``out`` or attributes, as usual.  Gradients
# of inputs that need none are dropped by the node.
class VariadicOpNode(OpNode):
    """Backward node of a variadic op: one vjp call gives every input's gradient."""

    __slots__ = ()
    variadic = True


def node_classes(names: Sequence[str], variadic: bool, saved_names: tuple[str, ...]) -> dict[str, type]:
    """An op's node classes, one per PyTorch name, with its ``_saved_<name>``
    properties; ``build_opdef`` gives each its ``op``."""
    base = VariadicOpNode if variadic else OpNode
    body = {"__slots__": (), **_saved_attributes(saved_names)}
    return {n: type(n, (base,), body) for n in names}
