"""Nodes and edges of the backward graph (PyTorch's ``function.h`` / ``edge.h``).

A non-leaf tensor points at the Node that produced it (``grad_fn``) and at
which of that Node's inputs its gradient arrives on (``output_nr``).  A Node
holds one Edge per differentiable forward input: ``(function, input_nr)``,
``None`` where the input needs no gradient.  Leaves that require grad get one
:class:`AccumulateGrad` node each, created on first use and cached weakly on
the tensor, as PyTorch does.

Naming follows PyTorch: a Node's *inputs* are the gradients of its forward
op's outputs, its *outputs* the gradients of the forward inputs.
"""

from __future__ import annotations

import itertools
import re
import sys
import traceback
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from agrad._ambient import before_in_place, saved_hooks
from agrad._backends import device_of
from agrad._device import CPU
from agrad._dtype import legacy_type_name
from agrad._grad_mode import grad_enabled
from agrad._graph._anomaly import running_node
from agrad._graph._hooks import RemovableHandle, _add_hook
from agrad._graph._saved_hooks import Hooks

if TYPE_CHECKING:
    from agrad._engine._graph_task import GraphTask
    from agrad._tensor import Tensor

__all__ = ["Node", "Edge", "GradientEdge", "AccumulateGrad", "GraphRoot", "SavedTensor", "next_sequence_nr",
           "single_input_meta", "input_meta", "before_in_place"]

# Note [Sequence numbers]
# ~~~~~~~~~~~~~~~~~~~~~~~
# Every Node gets the next number of one process-wide counter at creation.
# The ready queue runs higher numbers first, so among ready nodes the one
# created last (closest to the loss) runs first, approximating a reverse
# topological order and freeing activations early.  ``next()`` on an
# itertools.count is atomic under the GIL, so threads may record concurrently.
next_sequence_nr = itertools.count().__next__


class Edge(NamedTuple):
    """An edge of the backward graph: gradient goes to ``function``'s input ``input_nr``.

    Recording stores plain ``(function, input_nr)`` tuples in ``next_edges``
    (a NamedTuple's constructor is a Python call, on every recorded op's
    path); the engine only indexes them.  Edges handed to users are Edges.
    """

    function: "Node"
    input_nr: int


class GradientEdge(NamedTuple):
    """An edge of the graph as PyTorch's ``torch.autograd.graph.GradientEdge``
    names it: the gradient of a tensor arrives at ``node``'s input ``output_nr``.

    Made by :func:`agrad.autograd.graph.get_gradient_edge`; ``grad()`` and
    ``backward(inputs=)`` take it in place of a tensor.  ``ownership_token`` is
    PyTorch's (it keeps a tensor alive there); agrad never needs it.
    """

    node: "Node"
    output_nr: int
    ownership_token: Any = None


# Note [Shared input metadata]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Every node of a table op has one input whose (shape, dtype, device) the
# engine checks gradients against and routes the node by (the device of its
# InputBuffer, as PyTorch's ``InputBuffer::device``).  Graphs repeat a handful
# of them, so the ``_input_meta`` tuples are shared through a small cache: a
# 200,000-node chain then holds two tuples and a shape per node fewer (about
# 150 bytes).
_META: dict[tuple[Any, ...], tuple[tuple[tuple[int, ...], Any, Any]]] = {}
_ndarray = np.ndarray


def input_meta(data: Any) -> tuple[tuple[int, ...], Any, Any]:
    """``(shape, dtype, device)`` of a gradient that must match ``data``."""
    return data.shape, data.dtype, CPU if type(data) is _ndarray else device_of(data)


def single_input_meta(data: Any) -> tuple[tuple[tuple[int, ...], Any, Any]]:
    """The shared ``_input_meta`` of a node whose one input is like ``data``."""
    # A host array's key leaves the device out: hashing a device is a Python call.
    key = (data.shape, data.dtype) if type(data) is _ndarray else (data.shape, data.dtype, device_of(data))
    meta = _META.get(key)
    if meta is None:
        if len(_META) >= 4096:
            _META.clear()
        meta = _META[key] = ((data.shape, data.dtype, key[2] if len(key) == 3 else CPU),)
    return meta


# Note [Saved values]
# ~~~~~~~~~~~~~~~~~~~
# A node's ``_saved`` is a *list* when it holds a SavedTensor and a *tuple*
# when it holds only shapes and attributes (a table op's; a custom
# Function's is always a list).  A backward that does not keep the graph
# frees the list (PyTorch's ``release_variables``) but keeps the tuple: a node
# that saved no tensor can be backpropagated again, as in PyTorch.  An op
# declared ``release`` (``defop``) keeps a list whatever it saved, as PyTorch
# frees the indices of an index_put and the function of a CopySlices.  The type
# says which at no cost, so the engine releases inline, with one check.
class Node:
    """A backward function of the graph (mirrors ``torch.autograd.graph.Node``).

    Attributes:
        next_edges: one :class:`Edge` (or ``None``) per forward input.
        sequence_nr: creation order; see Note [Sequence numbers].
        topological_nr: length of the longest path to a leaf; ``grad()``
            prunes traversal below the smallest one among its inputs.
    """

    __slots__ = (
        "next_edges", "sequence_nr", "topological_nr", "_input_meta",
        "_pre_hooks", "_post_hooks", "_tensor_pre_hooks", "_retains_grad",
        "_trace", "_metadata", "_work", "walk_mark", "_saved", "__weakref__",
    )

    # True for custom Functions whose backward is ``async def``: the drivers
    # await what ``apply`` returns.  See Note [Async backward].
    is_async = False

    #: Where an awaited backward runs this node's kernel: ``None`` lets the
    #: engine decide by size, ``True`` pins it to an executor thread, ``False``
    #: to the event loop's thread (nodes that touch engine state, or user code
    #: that must run where the backward was awaited).  See Note [Offload threshold].
    offload: bool | None = None

    def __init__(self, next_edges: tuple[Edge | None, ...] = (), topological_nr: int = 0,
                 input_meta: tuple[tuple[tuple[int, ...], Any, Any], ...] = (),
                 saved: list[Any] | tuple[Any, ...] | None = None, work: int = 0) -> None:
        """A node, unconnected; or, with arguments, recorded already: see :meth:`_connect`,
        whose invariants the arguments keep (``record`` passes them for a table
        op's node, whose fields are known before it is made)."""
        self.next_edges = next_edges
        self.sequence_nr = next_sequence_nr()
        self.topological_nr = topological_nr
        # (shape, dtype, device) of each forward output: gradients arriving here
        # are checked, reduced and moved to it (see GraphTask._complete), and the
        # node runs on the first of those devices that is not the CPU.
        self._input_meta = input_meta
        self._pre_hooks: dict[int, Callable] | None = None
        self._post_hooks: dict[int, Callable] | None = None
        self._tensor_pre_hooks: dict[int, dict[int, Callable]] | None = None
        self._retains_grad: dict[int, Any] | None = None
        self._trace: list[str] | None = None
        self._metadata: dict[str, Any] | None = None  # created on first use: most nodes never need one
        # Array elements the backward kernel touches, roughly: the gradients it
        # receives plus the tensors it saved; set when the node is recorded.
        # The engine compares it with the offload threshold (Note [Offload threshold]).
        self._work = work
        # The token of the last dependency traversal that reached this node.  Public
        # because the engine's traversals (``_engine/_dependencies``) write it once
        # per edge walked, where a method call would cost ~60 ns an edge; nothing
        # else writes it, and nothing but those traversals reads it (Note
        # [Counting dependencies]).
        self.walk_mark: object = None
        # What the backward needs: a list while it holds saved tensors, a tuple
        # of shapes and attributes otherwise, None once freed (Note [Saved values]).
        self._saved = saved

    # -- the graph ---------------------------------------------------------
    def _connect(self, next_edges: tuple[Edge | None, ...], topological_nr: int,
                 input_meta: tuple[tuple[tuple[int, ...], Any, Any], ...], saved: list[Any] | tuple[Any, ...] | None,
                 work: int) -> None:
        """Join the graph as a recorded node: its edges, the metadata of the gradients it
        receives, what its backward needs and how much work that is (``_ops/_record.record``,
        for a custom Function's node, made before its forward ran).

        Keeps what the engine relies on: ``topological_nr`` is one more than the
        largest of ``next_edges``' nodes (0 with none); ``input_meta`` has one
        ``(shape, dtype, device)`` per forward output; ``saved`` is a list exactly
        when the backward frees it (Note [Saved values]); ``work`` is the array
        elements the backward touches (Note [Offload threshold]).
        """
        self.next_edges = next_edges
        self.topological_nr = topological_nr
        self._input_meta = input_meta
        self._saved = saved
        self._work = work

    def set_next_edges(self, edges: Sequence[Edge | None]) -> None:
        self.next_edges = tuple(edges)
        topo = 0
        for e in self.next_edges:
            if e is not None and e[0].topological_nr >= topo:
                topo = e[0].topological_nr + 1
        self.topological_nr = topo

    @property
    def metadata(self) -> dict[str, Any]:
        """A dict for the user's own data about this node (PyTorch's ``Node.metadata``)."""
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    @property
    def next_functions(self) -> tuple[tuple["Node | None", int], ...]:
        return tuple((e[0], e[1]) if e is not None else (None, 0) for e in self.next_edges)

    def name(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self):#x}>"

    # -- execution ---------------------------------------------------------
    def apply(self, grads: list[Any], task: "GraphTask") -> Sequence[Any]:
        """Map gradients of the forward outputs to gradients of the forward inputs."""
        raise NotImplementedError(f"{self.name()}.apply")

    def release_variables(self) -> None:
        """Free saved tensors once a backward that does not keep the graph is done with them.

        Keeps Note [Saved values]: a node's saved values are freed exactly when
        they are a list (a tuple of shapes and attributes stays, so the node can
        run again).  The engine's hot path (``GraphTask._complete``) checks the
        type inline and calls this only when there is something to free.
        """
        if type(self._saved) is list:
            self._saved = None


    def __call__(self, *grads: Any) -> Any:
        if len(grads) != len(self._input_meta):
            raise TypeError(f"expected {len(self._input_meta)} arguments, got {len(grads)} instead")
        out = self.apply(list(grads), None)  # type: ignore[arg-type]  # called outside a backward: no graph task
        return out[0] if len(out) == 1 else tuple(out)

    # -- hooks (PyTorch's Node.register_hook / register_prehook) -----------
    def register_hook(self, fn: Callable) -> RemovableHandle:
        """Register ``fn(grad_inputs, grad_outputs) -> grad_inputs | None``, run after the node."""
        if self._post_hooks is None:
            self._post_hooks = {}
        return _add_hook(self._post_hooks, fn)

    def register_prehook(self, fn: Callable) -> RemovableHandle:
        """Register ``fn(grad_outputs) -> grad_outputs | None``, run before the node."""
        if self._pre_hooks is None:
            self._pre_hooks = {}
        return _add_hook(self._pre_hooks, fn)

    # -- retain_grad (Tensor.retain_grad, Note [Hooks when grad_fn changes]) --
    def _retain_grad_for(self, output_nr: int, tensor: "Tensor") -> None:
        """Keep the gradient of forward output ``output_nr`` for ``tensor`` (``Tensor.retain_grad``):
        the engine stages it as ``tensor.grad`` when this node runs (``_engine._hooks.run_pre_hooks``).

        Keeps ``_retains_grad`` None or a non-empty dict from output numbers to
        weak references (the node must not keep its outputs alive).
        """
        if self._retains_grad is None:
            self._retains_grad = {}
        self._retains_grad[output_nr] = weakref.ref(tensor)

    def _stop_retaining_grad(self, output_nr: int) -> None:
        """Stop keeping output ``output_nr``'s gradient (its tensor's ``grad_fn`` moved to
        another node).  Keeps ``_retains_grad`` None or non-empty, as the engine's check assumes."""
        retains = self._retains_grad
        if retains is not None:
            retains.pop(output_nr, None)
            if not retains:
                self._retains_grad = None

    def _tensor_hooks(self, output_nr: int) -> dict[int, Callable]:
        if self._tensor_pre_hooks is None:
            self._tensor_pre_hooks = {}
        return self._tensor_pre_hooks.setdefault(output_nr, {})

    def _record_trace(self) -> None:
        self._trace = traceback.format_stack()[:-3]
        parent = running_node.get()
        if parent is not None:  # Note [Anomaly parents]
            self.metadata["parent_"] = parent


class GraphRoot(Node):
    """Joins several roots of one backward: its outputs are the roots' gradients."""

    __slots__ = ("_grads",)

    offload = False  # returns the roots' gradients: nothing to compute

    def __init__(self, edges: Sequence[Edge], grads: Sequence[Any]) -> None:
        super().__init__()
        self.sequence_nr = sys.maxsize
        self.set_next_edges(edges)
        self._grads = list(grads)

    def apply(self, grads: list[Any], task: "GraphTask") -> Sequence[Any]:
        return self._grads


class AccumulateGrad(Node):
    """Sink for a leaf tensor's gradient.

    Applying it does not touch ``.grad``: it stages the gradient on the graph
    task, which commits all staged gradients in one step when the whole
    backward succeeds.  See Note [Staged gradients].  Its sequence number is
    the largest possible, so a leaf's gradient is staged as soon as it is
    complete.
    """

    __slots__ = ("variable",)
    offload = False  # stages on the graph task: bookkeeping, on the loop's thread

    def __init__(self, variable: "Tensor") -> None:
        super().__init__()
        self.sequence_nr = sys.maxsize
        self.variable = variable
        self._input_meta = single_input_meta(variable._data)
        if variable._hooks is not None:
            self._share_leaf_hooks(variable._hooks)

    def _share_leaf_hooks(self, hooks: dict[int, Callable]) -> None:
        """Run ``hooks``, the leaf tensor's own hook dict, as this node's tensor pre-hooks.

        A leaf's hooks live on the tensor (they outlive this weakly cached node),
        so the node shares the tensor's dict rather than copying it: hooks
        registered later, on the tensor, run too.
        """
        self._tensor_pre_hooks = {0: hooks}

    def name(self) -> str:
        return "agrad::autograd::AccumulateGrad"

    def apply(self, grads: list[Any], task: "GraphTask") -> Sequence[Any]:
        if grads[0] is not None:
            task.stage(self.variable, grads[0], is_leaf=True)
        return ()


# Note [Mutation of saved tensors]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``allow_mutation_on_saved_tensors`` (agrad.autograd.graph) must copy a saved
# tensor before an in-place op overwrites its memory.  Every in-place write of
# an op goes through the registry's ``_inplace``, which calls this ContextVar's
# function, when one is set, with the tensor about to be written (PyTorch
# intercepts the write with a dispatch mode instead).

# Bound once: SavedTensor's constructor is on every recorded op's path.
_current_hooks = saved_hooks.get


def _is_constant(t: "Tensor") -> bool:
    """Whether ``t`` is a Python number made a tensor (Note [Scalar constants]): as
    PyTorch does for wrapped numbers, saved-tensor hooks never see it."""
    data = t._data
    return (data.ndim == 0 and type(data) is _ndarray and not data.flags.writeable and t._grad_fn is None
            and not t._requires_grad)

_FREED = (
    "Trying to backward through the graph a second time (or directly access saved tensors after "
    "they have already been freed). Saved intermediate values of the graph are freed when you call "
    ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
    "graph a second time or if you need to access saved tensors after calling backward."
)


# Note [Saved tensors detached in place]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A saved input keeps the tensor itself, so ``detach_()`` on it afterwards cuts
# the history a ``create_graph`` backward would record through.  As PyTorch's
# SavedVariable, an input that had a grad_fn when saved (``is_leaf`` False)
# and has none when unpacked is refused, whether or not the graph is needed.
_DETACHED = ("Trying to use a saved tensor that has been detached in-place, i.e. with .detach_().This is not "
             "supported, please use out-of-place `.detach()` instead")


_INFERENCE_SAVED = (
    "Inference tensors cannot be saved for backward. Please do not use Tensors created in inference mode in "
    "computation tracked by autograd. To work around this, you can make a clone to get a normal tensor and use it "
    "in autograd, or use `agrad.no_grad()` instead of `agrad.inference_mode()`."
)


class SavedTensor:
    """A tensor saved for backward, with the version it had when saved.

    An op's *output* is saved without its ``grad_fn`` (which is the saving node
    itself, so keeping it would make a reference cycle); ``unpack`` rebuilds
    the link when a ``create_graph`` backward needs it, as PyTorch's
    ``SavedVariable`` does.  Under saved-tensor hooks only the packed object is
    kept (``tensor`` is None); see Note [Saved tensor hooks].
    """

    # ``hooked`` is set only under hooks: (unpack_hook, packed, the graph node
    # the unpacked tensor re-attaches to).  Unset otherwise, so that the common
    # path pays for one ContextVar.get and nothing more.
    __slots__ = ("tensor", "version", "is_output", "output_nr", "is_leaf", "hooked")

    def __init__(self, tensor: "Tensor", is_output: bool = False, output_nr: int = 0) -> None:
        if type(tensor._version_counter) is not list and tensor.is_inference():  # Note [Inference tensors]
            raise RuntimeError(_INFERENCE_SAVED)
        self.version = tensor._version_counter[0]
        self.is_leaf = tensor._grad_fn is None  # Note [Saved tensors detached in place]
        self.is_output = is_output
        self.output_nr = output_nr
        hooks = _current_hooks()  # Note [Saved tensor hooks]
        if hooks is None or _is_constant(tensor):
            self.tensor: Tensor | None = tensor._alias() if is_output else tensor
        else:
            self.tensor = None
            self._pack(tensor, hooks)

    @classmethod
    def undefined(cls) -> "SavedTensor":
        """What ``_raw_saved_<name>`` gives for a value the node did not save
        (PyTorch's SavedTensor of an undefined tensor)."""
        s = object.__new__(cls)
        s.tensor = None
        return s

    def register_hooks(self, pack_hook: Callable[["Tensor"], Any], unpack_hook: Callable[[Any], "Tensor"]) -> None:
        """Pack this saved tensor now with ``pack_hook``; the backward gets it from
        ``unpack_hook`` (PyTorch's ``SavedTensor.register_hooks``, reached through
        ``grad_fn._raw_saved_<name>``).  One pair of hooks per saved tensor."""
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TypeError("register_hooks(): expected two callables (pack_hook, unpack_hook)")
        t = self.tensor
        if t is None:
            if hasattr(self, "hooked"):
                raise RuntimeError("Calling register_hooks on a saved tensor whose hooks have already been set. "
                                   "Hint: only one pair of hooks is allowed at a time.")
            raise RuntimeError("Calling register_hooks on a saved tensor with value None is forbidden")
        self.tensor = None
        try:
            self._pack(t, (pack_hook, unpack_hook))
        except BaseException:
            self.tensor = t  # nothing half-applied: the tensor stays saved as it was
            raise

    def unpack(self, node: Node | None) -> "Tensor":
        t = self.tensor
        if t is None:
            return self._unpack_hooked(node)
        if not self.is_leaf and not self.is_output and t._grad_fn is None:
            raise RuntimeError(_DETACHED)  # checked first, as PyTorch's SavedVariable::unpack does
        if t._version_counter[0] != self.version:
            raise RuntimeError(self._modified_message(t, node))
        if self.is_output and node is not None and grad_enabled.get():
            return t._alias(grad_fn=node, output_nr=self.output_nr)
        return t

    def _pack(self, tensor: "Tensor", hooks: Hooks) -> None:
        pack_hook, unpack_hook = hooks
        source: Node | None = None  # what the unpacked tensor's gradient flows to
        if self.is_output:
            arg = tensor._alias()  # the saving node is its grad_fn: rebuilt by unpack
        else:
            arg = tensor
            if tensor._grad_fn is not None:
                source, self.output_nr = tensor._grad_fn, tensor._output_nr
            elif tensor._requires_grad:
                source = tensor._grad_accumulator()
        mode = grad_enabled.get()
        grad_enabled.set(False)
        try:
            packed = pack_hook(arg)
        finally:
            grad_enabled.set(mode)
        if tensor._version_counter[0] != self.version:
            raise RuntimeError(
                "A saved tensor pack hook is modifying its input in place. Tensors provided as input to pack "
                "hook cannot be modified by in-place operations as this can lead to unexpected side-effects. "
                "Please open an issue if you need to perform in-place operations on the input to a pack hook."
            )
        self.hooked = (unpack_hook, packed, source)

    def _unpack_hooked(self, node: Node | None) -> "Tensor":
        from agrad._tensor import Tensor

        unpack_hook, packed, source = self.hooked
        t = unpack_hook(packed)
        if not isinstance(t, Tensor):
            raise TypeError("Output of saved tensor unpack_hook expected to be a Tensor but got result of type "
                            f"{type(t).__name__}")
        if self.is_output:
            # As without hooks: the link to the saving node only matters when recording.
            source = node if grad_enabled.get() else None
        if source is None:
            return t
        # The unpacked data takes the saved tensor's place in the graph, whatever
        # graph the hook's tensor belongs to (a create_graph backward records
        # through it; a checkpoint's saved inputs must require grad again).
        if type(source) is AccumulateGrad:  # kept alive by self.hooked, as PyTorch does
            return Tensor._make_leaf(t._data, t._version_counter, source)
        return Tensor._make(t._data, source, self.output_nr, t._version_counter)

    def _modified_message(self, t: "Tensor", node: Node | None) -> str:
        """PyTorch's message for a saved tensor modified in place since it was saved.

        It names the node that made the tensor as PyTorch 2.13 does, by its
        forward op (``Sigmoid`` for ``SigmoidBackward0``): for a saved output,
        the node that saved it (its own grad_fn then); for an input, its grad_fn
        now (the in-place op's), if it has one."""
        fn = node if self.is_output else t._grad_fn
        nr = self.output_nr if self.is_output else t._output_nr
        where = f", which is output {nr} of {_forward_name(fn)}," if fn is not None else ""
        return (
            "one of the variables needed for gradient computation has been modified by an inplace "
            f"operation: [{legacy_type_name(t.dtype, t.device.type)} {list(t.shape)}]{where} "
            f"is at version {t._version_counter[0]}; "
            f"expected version {self.version} instead. Hint: enable anomaly detection to find the "
            "operation that failed to compute its gradient, with "
            "agrad.autograd.set_detect_anomaly(True)."
        )


def _forward_name(node: Node) -> str:
    """The forward op a node differentiates, as PyTorch's messages name it: its
    name without ``Backward`` and a trailing ``0`` (``SigmoidBackward0`` ->
    ``Sigmoid``, ``TBackward1`` -> ``T1``)."""
    return re.sub(r"Backward(\d*)$", lambda m: "" if m[1] == "0" else m[1], node.name())
