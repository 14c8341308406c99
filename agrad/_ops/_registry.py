"""The op registry: turns one declarative entry into a public function, Tensor
methods, an in-place variant and a backward Node class.

An entry (in the family modules ``_elementwise.py``, ``_reductions.py``,
``_linalg.py``, ``_shape.py``) is::

    @defop(ref=lambda torch: torch.exp,
           vjp=lambda g, out: g * out, methods=("exp",), samples=...)
    def exp(xp, x):
        return xp.exp(x)

* **forward** is a function of the array module ``xp`` (numpy today, CuPy on
  CUDA).  Its positional parameters after ``xp`` are the tensor inputs; its
  keyword-only parameters are non-tensor attributes (``dim``, ``keepdim``…).
* **ref** is PyTorch's spelling (``torch -> callable``) and **samples** the
  calls the generated tests check, so a new op is tested by its entry alone.
* **vjp** is one function per tensor input (or a single one for unary ops),
  written in agrad ops so that ``create_graph=True`` differentiates them
  again.  Each vjp's first parameter is the incoming gradient; the names of
  the others say what the node must save: an input's name (the saved input),
  ``out`` (the saved output), ``<input>_shape`` (only the input's shape), or an
  attribute's name.  The node saves exactly the union of those names, so an
  op like ``add`` keeps nothing alive.  ``None`` marks a non-differentiable
  input; ``vjp=None`` a non-differentiable op (comparisons).
* Broadcasting is undone in one place, the engine's routing, which reduces a
  gradient to the shape of the forward input it flows to (see
  ``GraphTask._complete``) — so no vjp has to.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from agrad import _backends, _dtype, _errors
from agrad._device import CPU
from agrad._engine import _cooperating
from agrad._grad_mode import grad_enabled
from agrad._graph._anomaly import anomaly_enabled
from agrad._graph._node import _FREED, Node, SavedTensor, before_in_place, single_input_meta
from agrad._ops._memory import writable_target, write_through
from agrad._tensor import InferenceCounter, Tensor, mark_inference

__all__ = ["OpDef", "defop", "apply", "identity", "REGISTRY"]

_ndarray = np.ndarray
_FROM_NP = _dtype._FROM_NP


@dataclass(eq=False)
class OpDef:
    """Everything agrad knows about one op; built by :func:`defop`."""

    name: str
    forward: Callable[..., Any]
    inputs: tuple[str, ...]
    attrs: dict[str, Any]
    vjps: tuple[Callable[..., Any] | None, ...] | None
    promote: bool
    to_float: bool
    node_name: str
    samples: Callable[[np.random.Generator], list[tuple[tuple, dict]]] | None
    # PyTorch's spelling of the op, as a function of the ``torch`` module, for
    # the oracle tests (agrad never imports torch); per-op gradcheck settings.
    ref: Callable[[Any], Callable[..., Any]] | None = None
    check: dict[str, float] = field(default_factory=dict)
    saved: tuple[str, ...] = ()
    # Per mask of inputs needing grad: (what to save, whether that holds a tensor).
    save_plans: tuple[tuple[tuple[tuple[int, Any], ...], bool], ...] = ()
    # Per input: its vjp and the indices of the saved values it takes after ``g``.
    calls: tuple[tuple[Callable[..., Any] | None, tuple[int, ...]], ...] = ()
    vjp_args: tuple[tuple[int, ...], ...] = ()
    node_cls: type = Node
    # Ops whose PyTorch node name depends on their attributes (SumBackward0 for
    # a full reduction, SumBackward1 over a dim): attrs -> name.
    node_for: Callable[..., str] | None = None
    node_classes: dict[str, type] = field(default_factory=dict)
    # ``forward(xp, *tensors, ...)``: any number of tensor inputs, one vjp that
    # returns all their gradients (Note [Variadic ops]).
    variadic: bool = False
    # A view op: its output shares memory with its (first) input when numpy
    # returns a view, and becomes a view of that input's base.
    view: bool = False
    # ``(inputs, result) -> int``: the backward's work for ops whose cost is not
    # their arrays' size (matmul: FLOPs); see Note [Offload threshold].
    work: Callable[[Sequence[Tensor], Tensor], int] | None = None
    # The saved attributes are freed with the saved tensors (Note [Saved values]).
    release: bool = False
    # The input whose rows are the output's rows (a matrix product's first
    # factor): the forward may run in row blocks (Note [Products in row blocks]).
    split_rows: int | None = None
    public: Callable[..., Any] = field(default=None)  # type: ignore[assignment]
    # PyTorch's name of each entry of ``saved``: Note [Saved values by name].
    saved_names: tuple[str, ...] = ()


REGISTRY: dict[str, OpDef] = {}


def identity(g: Any) -> Any:
    """The vjp of an input whose gradient is the incoming one (``add``, ``clone``...).

    Nodes pass the gradient on without calling it (a call is about 5% of an
    ``AddBackward0`` node's cost)."""
    return g


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
# parameters (Note [Saving only what is needed]); ``_saved_names`` maps them to
# PyTorch's names: the first input is ``self``, its shape ``self_sym_sizes``,
# the output ``result``, anything else keeps its name unless the entry's
# ``saved_as`` renames it (``matmul``'s ``other`` is ``mat2``).  A value the
# node did not need is None, as PyTorch's undefined tensor, before and after a
# backward freed the node's tensors; every other ``_saved_`` attribute then
# raises the freed-graph error (PyTorch keeps shapes and attributes: a
# deliberate difference, the engine frees the whole list in one step, Note
# [Saved values]).  They are properties of each op's node class
# (``_saved_attributes``): the hot path pays nothing.
def _saved_attributes(names: tuple[str, ...]) -> dict[str, property]:
    """The ``_saved_<name>``/``_raw_saved_<name>`` properties of a node class.

    Properties of each op's node class, not a ``__getattr__``: a class with
    ``__getattr__`` gets a Python-level attribute hook that slows every
    attribute read of its instances, the engine's included (+2,700
    instructions per node of a chain's backward, callgrind).
    """
    attrs = {}
    for i, name in enumerate(names):
        for raw, attr in ((False, "_saved_" + name), (True, "_raw_saved_" + name)):
            attrs[attr] = property(lambda node, i=i, raw=raw, attr=attr: node._saved_value(i, raw, attr))
    return attrs


def _saved_names(op: OpDef, saved_as: dict[str, str]) -> tuple[str, ...]:
    first = None if op.variadic else op.inputs[0]
    names = []
    for name in op.saved:
        if name in saved_as:
            names.append(saved_as[name])
        elif name == "out":
            names.append("result")
        elif name == first:
            names.append("self")
        elif name.endswith("_shape"):
            names.append(("self" if name[:-6] == first else name[:-6]) + "_sym_sizes")
        else:
            names.append(name)
    return tuple(names)


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
            grads = vjp(g, *map(saved.__getitem__, idx))
            return [None if e is None else o for e, o in zip(self.next_edges, grads)]
        needed = None if task is None or task.exec_info is None else task.needed
        out = []
        for edge, (vjp, idx) in zip(self.next_edges, self.op.calls):
            if edge is None or (needed is not None and not needed(edge[0])):
                out.append(None)
            elif vjp is identity:
                out.append(g)
            elif not idx:
                out.append(vjp(g))
            elif len(idx) == 1:
                out.append(vjp(g, saved[idx[0]]))
            else:
                out.append(vjp(g, *map(saved.__getitem__, idx)))
        return out


def _as_constant(value: Any, dt: _dtype.dtype | None) -> Tensor:
    if isinstance(value, Tensor):
        return value
    if isinstance(value, _ndarray):
        return Tensor._make(value if dt is None else value.astype(dt.np, copy=False))
    if isinstance(value, (bool, int, float, np.generic)):
        d = dt if dt is not None else _dtype.result_type([], [], [value])
        return _constant(value, d.np)
    raise TypeError(f"expected a Tensor or a number, got {type(value).__name__}")


# Note [Scalar constants]
# ~~~~~~~~~~~~~~~~~~~~~~~
# A Python number in an op (``y * 1.0001``) becomes a 0-d constant tensor of
# the op's dtype, so forward kernels and backward rules only ever see tensors.
# Constants never require grad and nothing can write to them (no user code
# holds them), so they are cached by (type, value, dtype): a loop of scalar
# ops allocates no new constant per step.  The cache is bounded by clearing.
_CONSTANTS: dict[tuple[type, Any, np.dtype], Tensor] = {}


def _constant(value: Any, np_dtype: np.dtype) -> Tensor:
    key = (type(value), value, np_dtype)
    t = _CONSTANTS.get(key)
    if t is None:
        if len(_CONSTANTS) >= 4096:
            _CONSTANTS.clear()
        with np.errstate(over="ignore", invalid="ignore"):  # 1e300 in float32 is inf, silently, as in PyTorch
            arr = np.asarray(value, dtype=np_dtype)
        arr.flags.writeable = False
        t = _CONSTANTS[key] = Tensor._make(arr)
    return t


_PY_NUMBERS = (float, int)


def _coerce(op: OpDef, args: Sequence[Any]) -> tuple[tuple[Tensor, ...], list[Any], Any]:
    """Turn numbers into constant tensors and apply PyTorch's type promotion.

    Returns the tensors (what the graph records and the node saves), the
    arrays the forward computes on, cast to the common dtype and all on one
    device, and that device (Note [Mixed devices]).  The casts are not
    recorded: the engine casts each gradient back to its input's dtype when
    routing it, as PyTorch's ``validate_outputs`` does.
    """
    if not (op.promote or op.to_float):
        tensors = tuple(a if isinstance(a, Tensor) else _as_constant(a, None) for a in args)
        arrays = [t._data for t in tensors]
        return tensors, arrays, _placement(arrays)
    if len(args) == 2:
        # Fast path: a tensor and a Python number of no higher category (float
        # tensor * 2.5, int tensor + 1); ``apply`` takes the tensors-only ones.
        a, b = args
        ta, tb = type(a), type(b)
        if ta is Tensor and tb in _PY_NUMBERS or tb is Tensor and ta in _PY_NUMBERS:
            t, num = (a, b) if ta is Tensor else (b, a)
            dt = t._data.dtype
            if dt.kind == "f" or (type(num) is int and dt.kind in "iu" and not op.to_float):
                c = _constant(num, dt)
                if ta is Tensor:
                    arrays = [a._data, c._data]
                    return (a, c), arrays, CPU if type(arrays[0]) is _ndarray else _placement(arrays)
                arrays = [c._data, b._data]
                return (c, b), arrays, CPU if type(arrays[1]) is _ndarray else _placement(arrays)
    dims, zero_dims, scalars = [], [], []
    for a in args:
        if isinstance(a, Tensor):
            (dims if a._data.ndim else zero_dims).append(_FROM_NP[a._data.dtype])
        elif isinstance(a, _ndarray):
            (dims if a.ndim else zero_dims).append(_dtype.from_numpy_dtype(a.dtype))
        else:
            scalars.append(a)
    target = _dtype.result_type(dims, zero_dims, scalars)
    if op.to_float and not target.is_floating_point:
        target = _dtype.get_default_dtype()
    tensors = tuple(a if isinstance(a, Tensor) else _as_constant(a, target) for a in args)
    arrays = [t._data for t in tensors]
    dev = _placement(arrays)
    if any(a.dtype != target.np for a in arrays):
        with _backends.on(dev):
            arrays = [a if a.dtype == target.np else a.astype(target.np) for a in arrays]
    return tensors, arrays, dev


# Note [Mixed devices]
# ~~~~~~~~~~~~~~~~~~~~
# An op runs on its inputs' device, and all of them must be on one device, as
# PyTorch requires, with one exception: a 0-d CPU tensor (a Python number made
# a tensor, Note [Scalar constants], or a user's scalar) goes along with
# tensors on another device.  Only the array the forward computes on is
# copied; the graph records the CPU tensor itself, so its gradient, computed
# on the device, is moved back to the CPU when the engine routes it (the
# gradient is conformed to the input's device as to its shape and dtype).
def _placement(arrays: list[Any]) -> Any:
    """The device ``arrays`` compute on, 0-d CPU arrays moved there in place."""
    for a in arrays:
        if type(a) is not _ndarray:
            break
    else:
        return CPU
    dev = CPU
    for a in arrays:
        if type(a) is not _ndarray:
            d = _backends.device_of(a)
            if dev is not CPU and d is not dev:
                raise RuntimeError(
                    f"Expected all tensors to be on the same device, but found at least two devices, {dev} and {d}!"
                )
            dev = d
    for i, a in enumerate(arrays):
        if type(a) is _ndarray:
            if a.ndim:
                raise RuntimeError(
                    f"Expected all tensors to be on the same device, but found at least two devices, {dev} and cpu!"
                )
            arrays[i] = _backends.transfer(a, dev)
    return dev


def _as_array(out: Any, xp: Any) -> Any:
    """A forward's result as an array: numpy scalars (full reductions) become
    0-d arrays; an array of any backend (``.to()`` returns one) stays as it is."""
    if isinstance(out, np.generic) or not _backends.is_array(out):
        return xp.asarray(out)
    return out


# Note [Saving only what is needed]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A node saves a value only if the vjp of some input that requires grad uses
# it: ``x * c`` with a constant ``c`` saves ``c`` (for x's gradient) but not
# ``x`` (needed only for c's, never computed).  This is PyTorch's conditional
# saving, and it keeps activations from being held alive for nothing.  The
# plans are computed at registration, one per mask of inputs needing grad;
# unused slots hold None so the vjps' argument indices stay fixed.
_SAVE_NOTHING, _SAVE_INPUT, _SAVE_OUTPUT, _SAVE_ATTR, _SAVE_SHAPE = range(5)


def apply(op: OpDef, args: Sequence[Any], attrs: dict[str, Any]) -> Tensor:
    """Run ``op`` forward on ``args`` and, if grad mode is on and any input
    requires grad, record its backward Node.  The hot path of every op."""
    # The commonest calls need no promotion: one tensor, or two of one dtype
    # (float unless the op computes integers in float).  Everything else,
    # numbers included, goes through ``_coerce``.
    n = len(args)
    if (n == 1 and type(a := args[0]) is Tensor and type(ad := a._data) is _ndarray
            and (not op.to_float or ad.dtype.kind == "f")):
        tensors, arrays = args, [ad]
        dev = CPU
    elif (n == 2 and type(a := args[0]) is Tensor and type(b := args[1]) is Tensor
          and type(ad := a._data) is _ndarray and type(bd := b._data) is _ndarray
          and (dt := ad.dtype) is bd.dtype and (not op.to_float or dt.kind == "f")):
        tensors, arrays = args, [ad, bd]
        dev = CPU
    else:
        tensors, arrays, dev = _coerce(op, args)
    try:
        if dev is CPU:
            xp = np
            if not _cooperating.running or (runner := _cooperating.local.runner) is None:
                out = op.forward(np, *arrays, **attrs) if attrs else op.forward(np, *arrays)
            else:  # Notes [Cooperative calls], [Products in row blocks]: may pause, or split
                out = runner.forward(op, arrays, attrs)
            if type(out) is not _ndarray:
                out = _as_array(out, np)
        else:
            xp = _backends.backend(dev.type).xp
            with _backends.on(dev):
                out = op.forward(xp, *arrays, **attrs)
                if type(out) is not _ndarray:
                    out = _as_array(out, xp)
    except (ValueError, IndexError, TypeError, ZeroDivisionError, MemoryError) as exc:
        # Note [Translating numpy's errors]: free unless the kernel raised.
        err = _errors.translate(exc, op.name, [a.shape for a in arrays], attrs)
        if err is None:
            raise
        raise err from None
    result = Tensor._make(out)
    if op.view and out.base is not None and arrays[0] is tensors[0]._data and xp.may_share_memory(out, arrays[0]):
        if type(tensors[0]._version_counter) is InferenceCounter:
            # A view of an inference tensor is an inference tensor, in any mode,
            # which autograd does not track (PyTorch: not _is_view(), no grad_fn).
            result._version_counter = tensors[0]._version_counter
            return result
        _make_view(op, attrs, tensors[0], result, xp)
    if not grad_enabled.get():
        if result._base is None:
            mark_inference(result)  # Note [Inference tensors]
        return result
    if op.vjps is None:
        return result
    if op.variadic:
        return _record_variadic(op, tensors, attrs, result)
    return record(op, tensors, attrs, result)


def record(op: OpDef, tensors: Sequence[Tensor], attrs: dict[str, Any], result: Tensor) -> Tensor:
    """Record ``op``'s backward Node for ``result`` if any input requires grad."""
    vjps = op.vjps
    edges = []
    topo = -1
    mask = 0
    for i, (t, vjp) in enumerate(zip(tensors, vjps)):  # type: ignore[arg-type]
        if t._base is not None:
            t._refresh_view()  # Note [View grad_fn regeneration]
        fn = t._grad_fn
        if fn is not None:
            nr = t._output_nr
        elif t._requires_grad:
            fn, nr = t._grad_accumulator(), 0
        if fn is None or vjp is None:
            edges.append(None)
            continue
        edges.append((fn, nr))
        mask |= 1 << i
        if fn.topological_nr > topo:
            topo = fn.topological_nr
    if topo < 0:
        return result  # no input requires grad
    node = op.node_cls() if op.node_for is None else op.node_classes[op.node_for(**attrs)]()
    node.next_edges = tuple(edges)
    node.topological_nr = topo + 1
    node._input_meta = single_input_meta(result._data)
    saved: list[Any] = []
    work = result._data.size  # the gradient it will receive
    plan, holds_tensors = op.save_plans[mask]
    for kind, key in plan:
        if kind == _SAVE_NOTHING:
            saved.append(None)
        elif kind == _SAVE_INPUT:
            saved.append(SavedTensor(tensors[key]))
            work += tensors[key]._data.size
        elif kind == _SAVE_OUTPUT:
            saved.append(SavedTensor(result, is_output=True))
            work += result._data.size
        elif kind == _SAVE_ATTR:
            saved.append(attrs[key])
        else:
            saved.append(tensors[key]._data.shape)
    node._saved = saved if holds_tensors else tuple(saved)  # Note [Saved values]
    node._work = work if op.work is None else op.work(tensors, result)
    if anomaly_enabled.get():
        node._record_trace()
    result._grad_fn = node
    return result


def _make_view(op: OpDef, attrs: dict[str, Any], src: Tensor, view: Tensor, xp: Any) -> None:
    """Mark ``view`` (whose array is a view of ``src``'s) as a view of
    ``src``'s base: shared memory and version counter, and a replay of the view
    op(s) from the base, as an array function and as a recorded agrad op."""
    parent = src._view_fn if src._base is not None else None
    forward = op.forward
    if parent is None:
        view_np = lambda arr: forward(xp, arr, **attrs)  # noqa: E731
        view_t = lambda base: apply(op, (base,), attrs)  # noqa: E731
    else:
        parent_np, parent_t = parent
        view_np = lambda arr: forward(xp, parent_np(arr), **attrs)  # noqa: E731
        view_t = lambda base: apply(op, (parent_t(base),), attrs)  # noqa: E731
    view._base = src._base if src._base is not None else src
    view._version_counter = src._version_counter
    view._view_fn = (view_np, view_t)
    view._view_version = src._version_counter[0]
    view._multi_output = src._multi_output if src._base is not None else None  # Note [Multi-output views]
    # Note [Where a view was made]: made now in no_grad mode, or as its source was
    view._creation = "no_grad" if not grad_enabled.get() else src._creation if src._base is not None else None


# Note [Variadic ops]
# ~~~~~~~~~~~~~~~~~~~
# ``cat``/``stack``-like ops take any number of tensors: their forward is
# ``forward(xp, *tensors, dim=...)`` and their single vjp returns one gradient
# per tensor.  Its parameters name ``tensors`` (all inputs, saved),
# ``tensors_shape`` (their shapes), ``out`` or attributes, as usual.  Gradients
# of inputs that need none are dropped by the node.
def _record_variadic(op: OpDef, tensors: Sequence[Tensor], attrs: dict[str, Any], result: Tensor) -> Tensor:
    edges = []
    for t in tensors:
        if t._base is not None:
            t._refresh_view()  # Note [View grad_fn regeneration]
        edges.append((t._grad_fn, t._output_nr) if t._grad_fn is not None
                     else t._gradient_edge() if t._requires_grad else None)
    if all(e is None for e in edges):
        return result
    node = op.node_cls() if op.node_for is None else op.node_classes[op.node_for(**attrs)]()
    node.set_next_edges(edges)
    node._input_meta = single_input_meta(result._data)
    name = op.inputs[0]
    saved = []
    work = result._data.size
    for p in op.saved:
        if p == name:
            saved.append(tuple(SavedTensor(t) for t in tensors))
            work += sum(t._data.size for t in tensors)
        elif p == name + "_shape":
            saved.append(tuple(t._data.shape for t in tensors))
        elif p == "out":
            saved.append(SavedTensor(result, is_output=True))
            work += result._data.size
        else:
            saved.append(attrs[p])
    node._saved = saved if name in op.saved or "out" in op.saved else tuple(saved)  # Note [Saved values]
    node._work = work if op.work is None else op.work(tensors, result)
    if anomaly_enabled.get():
        node._record_trace()
    result._grad_fn = node
    return result


class VariadicOpNode(OpNode):
    """Backward node of a variadic op: one vjp call gives every input's gradient."""

    __slots__ = ()
    variadic = True


def _save_plans(op: OpDef) -> tuple[tuple[tuple[tuple[int, Any], ...], bool], ...]:
    """One save plan per mask of inputs that require grad (Note [Saving only what is needed])."""
    entries = []
    for name in op.saved:
        if name == "out":
            entries.append((_SAVE_OUTPUT, None))
        elif name in op.inputs:
            entries.append((_SAVE_INPUT, op.inputs.index(name)))
        elif name in op.attrs:
            entries.append((_SAVE_ATTR, name))
        else:
            entries.append((_SAVE_SHAPE, op.inputs.index(name[:-6])))
    plans = []
    for mask in range(1 << len(op.inputs)):
        used = {k for i, idx in enumerate(op.vjp_args) if mask >> i & 1 for k in idx}
        plan = tuple(e if k in used else (_SAVE_NOTHING, None) for k, e in enumerate(entries))
        plans.append((plan, op.release or any(kind in (_SAVE_INPUT, _SAVE_OUTPUT) for kind, _ in plan)))
    return tuple(plans)


def _signature(forward: Callable[..., Any]) -> tuple[tuple[str, ...], dict[str, Any], bool]:
    params = list(inspect.signature(forward).parameters.values())[1:]  # drop xp
    inputs = tuple(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL))
    attrs = {p.name: p.default for p in params if p.kind is p.KEYWORD_ONLY}
    variadic = any(p.kind is p.VAR_POSITIONAL for p in params)
    return inputs, attrs, variadic


def _generic_public(op: OpDef) -> Callable[..., Any]:
    n = len(op.inputs)
    names = tuple(op.attrs)
    defaults = op.attrs

    def public(*args: Any, **kwargs: Any) -> Tensor:
        if len(args) == n and not kwargs:
            return apply(op, args, defaults)  # the common call: inputs only
        if len(args) < n:
            missing = op.inputs[len(args):]
            if not all(m in kwargs for m in missing):
                raise TypeError(f"{op.name}() missing required argument(s): {', '.join(missing)}")
            args = args + tuple(kwargs.pop(m) for m in missing)
        attrs = dict(defaults)
        for k, v in zip(names, args[n:]):
            attrs[k] = v
        for k, v in kwargs.items():
            if k not in defaults:
                raise TypeError(f"{op.name}() got an unexpected keyword argument '{k}'")
            attrs[k] = v
        return apply(op, args[:n], attrs)

    return public


def _inplace(fn: Callable[..., Tensor], name: str) -> Callable[..., Tensor]:
    """The in-place variant ``t.op_(...)``: compute out of place, write into ``t``'s
    memory, bump its version and move its ``grad_fn`` to the new node."""

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        recording = grad_enabled.get()
        if recording and self._grad_fn is None and self._requires_grad:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        self._check_inplace_allowed()  # Note [Inference tensors]; in PyTorch's order of the checks
        base = self._base
        if recording and base is not None:
            from agrad._ops._views import check_view_write
            self._refresh_view()
            check_view_write(self)
        target = self._data
        if type(target) is _ndarray and not target.flags.writeable:  # Note [Writing into expanded tensors]
            target = writable_target(self, name)
        src = self
        if recording and base is not None:
            from agrad._ops._views import view_source
            src = view_source(self)  # Note [CopySlices]
        elif recording:
            # The new node may save the *old* value of self; give it its own copy,
            # with self's place in the graph, since self's memory is overwritten below.
            with _backends.on(self.device):
                src = Tensor._make(self._data.copy(), self._grad_fn, self._output_nr)
            src._requires_grad = self._requires_grad
        result = fn(src, *args, **kwargs)
        if result.shape != self.shape:
            raise RuntimeError(
                f"output with shape {list(self.shape)} doesn't match the broadcast shape {list(result.shape)}"
            )
        if not np.can_cast(result._data.dtype, self._data.dtype, casting="same_kind"):
            raise RuntimeError(
                f"result type {_dtype.SCALAR_TYPE_NAMES[result.dtype.name]} can't be cast to the desired output "
                f"type {_dtype.SCALAR_TYPE_NAMES[self.dtype.name]}"
            )
        if recording and base is not None and result._grad_fn is not None:
            from agrad._ops._views import check_recorded_view_write
            check_recorded_view_write(self)
        mutating = before_in_place.get()
        if mutating is not None:
            mutating(self)  # Note [Mutation of saved tensors]
        with _backends.on(self.device):
            if target is self._data:
                target[...] = result._data
            else:
                write_through(target, result._data)
        self._bump_version()
        if recording and base is not None and result._grad_fn is not None:
            from agrad._ops._views import rebase_view
            rebase_view(self, result)
        elif result._grad_fn is not None:
            self._set_grad_fn(result._grad_fn, result._output_nr)  # Note [Hooks when grad_fn changes]
        return self

    method.__name__ = name
    return method


def defop(
    *,
    vjp: Callable[..., Any] | Sequence[Callable[..., Any] | None] | None,
    node: str | Sequence[str] | None = None,
    node_for: Callable[..., str] | None = None,
    methods: Sequence[str] = (),
    rmethods: Sequence[str] = (),
    inplace: Sequence[str] = (),
    promote: bool = False,
    to_float: bool = False,
    parse: Callable[..., tuple[tuple, dict]] | None = None,
    samples: Callable[[np.random.Generator], list[tuple[tuple, dict]]] | None = None,
    ref: Callable[[Any], Callable[..., Any]] | None = None,
    check: dict[str, float] | None = None,
    view: bool = False,
    work: Callable[[Sequence[Tensor], Tensor], int] | None = None,
    saved_as: dict[str, str] | None = None,
    release: bool = False,
    split_rows: int | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Tensor]]:
    """Register the decorated forward as an op; return its public function.

    Args:
        vjp: backward rule(s), one per tensor input; see the module docstring.
        node: the backward node's name (PyTorch's, e.g. ``"MulBackward0"``), or
            all its names when ``node_for`` picks one per call.
        node_for: ``attrs -> name``, for ops PyTorch names by overload
            (``SumBackward0`` vs ``SumBackward1``).
        methods: Tensor methods/operators bound to the public function.
        rmethods: reflected operators (``__radd__``): called as ``fn(other, self)``.
        inplace: in-place method names (``add_``, ``__iadd__``).
        promote: apply PyTorch's type promotion across the inputs.
        to_float: integer/bool inputs compute in the default float dtype.
        parse: maps the public call's arguments to ``(inputs, attrs)`` for ops
            whose Python signature differs from the forward's (``reshape(*shape)``).
        samples: ``rng -> [(args, kwargs), ...]`` sample calls for the op tests.
        ref: ``torch -> callable``, PyTorch's spelling of the op, called by the
            oracle tests with the same arguments as agrad's public function.
        check: gradcheck settings for this op's samples (``eps``, ``atol``…).
        view: the output is a view of the first input when numpy makes one
            (shared memory, ``_base``, shared version counter).
        work: ``(inputs, result) -> int``, the backward's work in the engine's
            units (array elements touched), for ops whose cost is not the size
            of their arrays; by default the gradient's size plus the saved
            tensors'.  See Note [Offload threshold].
        saved_as: PyTorch's names of saved values where the default rule
            differs (Note [Saved values by name]): ``{"other": "mat2"}``.
        release: free the node's saved attributes after a backward that does
            not keep the graph, as its saved tensors are, so that a second
            backward through it raises as PyTorch's does (its IndexPutBackward0
            saves the indices as tensors; its CopySlices drops its function).
        split_rows: the input whose rows are the output's rows, if the forward
            may run in row blocks on several kernel threads (a matrix
            product's first factor; Note [Products in row blocks]).
    """

    def register(forward: Callable[..., Any]) -> Callable[..., Tensor]:
        name = forward.__name__.lstrip("_")
        inputs, attrs, variadic = _signature(forward)
        vjps = None if vjp is None else (tuple(vjp) if isinstance(vjp, (tuple, list)) else (vjp,))
        if vjps is not None and len(vjps) != len(inputs):
            raise TypeError(f"op {name}: {len(vjps)} vjp(s) for {len(inputs)} inputs")
        names = [node] if isinstance(node, str) else list(node or (name.capitalize() + "Backward0",))
        node_name = names[0]
        op = OpDef(name, forward, inputs, attrs, vjps, promote, to_float, node_name, samples)
        op.node_for = node_for
        op.variadic = variadic
        op.view = view
        op.ref = ref
        op.check = dict(check or {})
        op.work = work
        op.release = release
        op.split_rows = split_rows
        if vjps is not None:
            saved: list[str] = []
            arg_names = []
            for f in vjps:
                ps = [] if f is None else list(inspect.signature(f).parameters)[1:]
                for p in ps:
                    known = p == "out" or p in inputs or p in attrs or (p.endswith("_shape") and p[:-6] in inputs)
                    if not known:
                        raise TypeError(f"op {name}: vjp parameter {p!r} names nothing the node can save")
                    if p not in saved:
                        saved.append(p)
                arg_names.append(ps)
            op.saved = tuple(saved)
            op.vjp_args = tuple(tuple(saved.index(p) for p in ps) for ps in arg_names)
            op.save_plans = _save_plans(op)
            op.calls = tuple(zip(vjps, op.vjp_args))
            op.saved_names = _saved_names(op, saved_as or {})
            base = VariadicOpNode if variadic else OpNode
            attrs = {"__slots__": (), "op": op, **_saved_attributes(op.saved_names)}
            op.node_classes = {n: type(n, (base,), attrs) for n in names}
            op.node_cls = op.node_classes[node_name]
        if parse is None:
            public = _generic_public(op)
        else:
            def public(*args: Any, **kwargs: Any) -> Tensor:
                ins, at = parse(*args, **kwargs)
                return apply(op, ins, at)
        public.__name__ = public.__qualname__ = name
        public.__doc__ = forward.__doc__
        op.public = public
        REGISTRY[name] = op
        # Operators take exactly one operand: without a parser they go straight
        # to ``apply``, skipping the public function's argument handling.
        defaults = op.attrs
        for m in methods:
            if parse is None and m.startswith("__") and len(inputs) == 2:
                setattr(Tensor, m, lambda self, other: apply(op, (self, other), defaults))
            else:
                setattr(Tensor, m, public)
        for m in rmethods:
            if parse is None:
                setattr(Tensor, m, lambda self, other: apply(op, (other, self), defaults))
            else:
                setattr(Tensor, m, lambda self, other, _f=public: _f(other, self))
        for m in inplace:
            setattr(Tensor, m, _inplace(public, m))
        return public

    return register
