"""The op registry: turns one declarative entry into a public function, Tensor
methods, an in-place variant and a backward Node class.

An entry (see ``_table.py``) is::

    @defop(vjp=lambda g, out: g * out, methods=("exp",), samples=...)
    def exp(xp, x):
        return xp.exp(x)

* **forward** is a function of the array module ``xp`` (numpy today, CuPy on
  CUDA).  Its positional parameters after ``xp`` are the tensor inputs; its
  keyword-only parameters are non-tensor attributes (``dim``, ``keepdim``…).
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
  ``GraphTask.route``) — so no vjp has to.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from agrad import _dtype
from agrad._graph._node import Edge, Node, SavedTensor
from agrad._grad_mode import grad_enabled
from agrad._graph._anomaly import anomaly_enabled
from agrad._tensor import Tensor

__all__ = ["OpDef", "defop", "apply", "REGISTRY"]

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
    saved: tuple[str, ...] = ()
    vjp_args: tuple[tuple[int, ...], ...] = ()
    node_cls: type = Node
    public: Callable[..., Any] = field(default=None)  # type: ignore[assignment]


REGISTRY: dict[str, OpDef] = {}


class OpNode(Node):
    """Backward node of a table op: applies the entry's vjps to the saved values."""

    __slots__ = ("_saved",)
    op: OpDef

    def apply(self, grads: list[Any], task: Any) -> Sequence[Any]:
        g = grads[0]
        edges = self.next_edges
        if g is None:
            return [None] * len(edges)
        saved = self._saved
        if saved is None:
            from agrad._graph._node import _FREED
            raise RuntimeError(_FREED)
        vals = [s.unpack(self) if type(s) is SavedTensor else s for s in saved]
        needed = task.needed if task is not None and task.exec_info is not None else None
        out = []
        for edge, vjp, idx in zip(edges, self.op.vjps, self.op.vjp_args):  # type: ignore[arg-type]
            if edge is None or vjp is None or (needed is not None and not needed(edge.function)):
                out.append(None)
            else:
                out.append(vjp(g, *[vals[k] for k in idx]))
        return out

    def release_variables(self) -> None:
        if self._saved:
            self._saved = None


def _as_constant(value: Any, dt: _dtype.dtype | None) -> Tensor:
    if isinstance(value, Tensor):
        return value
    if isinstance(value, _ndarray):
        return Tensor._make(value if dt is None else value.astype(dt.np, copy=False))
    if isinstance(value, (bool, int, float, np.generic)):
        d = dt if dt is not None else _dtype.result_type([], [], [value])
        return Tensor._make(np.asarray(value, dtype=d.np))
    raise TypeError(f"expected a Tensor or a number, got {type(value).__name__}")


def _coerce(op: OpDef, args: Sequence[Any]) -> tuple[tuple[Tensor, ...], list[np.ndarray]]:
    """Turn numbers into constant tensors and apply PyTorch's type promotion.

    Returns the tensors (what the graph records and the node saves) and the
    arrays the forward computes on, cast to the common dtype.  The casts are
    not recorded: the engine casts each gradient back to its input's dtype
    when routing it, as PyTorch's ``validate_outputs`` does.
    """
    tensors = tuple(a if isinstance(a, Tensor) else _as_constant(a, None) for a in args) \
        if not (op.promote or op.to_float) else None
    if tensors is not None:
        return tensors, [t._data for t in tensors]
    first = args[0]
    if isinstance(first, Tensor):
        dt = first._data.dtype
        if all(type(a) is Tensor and a._data.dtype is dt for a in args) and (not op.to_float or dt.kind == "f"):
            return tuple(args), [a._data for a in args]  # the common case: one dtype
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
    return tensors, [t._data if t._data.dtype == target.np else t._data.astype(target.np) for t in tensors]


def apply(op: OpDef, args: Sequence[Any], attrs: dict[str, Any]) -> Tensor:
    """Run ``op`` forward on ``args`` and, if grad mode is on and any input
    requires grad, record its backward Node.  The hot path of every op."""
    tensors, arrays = _coerce(op, args)
    out = op.forward(np, *arrays, **attrs)
    if type(out) is not _ndarray:
        out = np.asarray(out)
    result = Tensor._make(out)
    if op.vjps is None or not grad_enabled.get():
        return result
    for t in tensors:
        if t._grad_fn is not None or t._requires_grad:
            break
    else:
        return result
    node = op.node_cls()
    edges = []
    for t, vjp in zip(tensors, op.vjps):
        if vjp is None or (t._grad_fn is None and not t._requires_grad):
            edges.append(None)
        elif t._grad_fn is not None:
            edges.append(Edge(t._grad_fn, t._output_nr))
        else:
            edges.append(t._gradient_edge())
    node.set_next_edges(edges)
    node._input_meta = ((out.shape, out.dtype),)
    node._saved = tuple(_save(name, op, tensors, attrs, result) for name in op.saved)
    if anomaly_enabled.get():
        node._record_trace()
    result._grad_fn = node
    return result


def _save(name: str, op: OpDef, tensors: Sequence[Tensor], attrs: dict[str, Any], result: Tensor) -> Any:
    if name == "out":
        return SavedTensor(result, is_output=True)
    if name in attrs:
        return attrs[name]
    if name.endswith("_shape"):
        return tensors[op.inputs.index(name[:-6])].shape
    return SavedTensor(tensors[op.inputs.index(name)])


def _signature(forward: Callable[..., Any]) -> tuple[tuple[str, ...], dict[str, Any]]:
    params = list(inspect.signature(forward).parameters.values())[1:]  # drop xp
    inputs = tuple(p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD)
    attrs = {p.name: p.default for p in params if p.kind is p.KEYWORD_ONLY}
    return inputs, attrs


def _generic_public(op: OpDef) -> Callable[..., Any]:
    n = len(op.inputs)
    names = tuple(op.attrs)
    defaults = op.attrs

    def public(*args: Any, **kwargs: Any) -> Tensor:
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
        src = self
        if recording:
            # The new node may save the *old* value of self; give it its own copy,
            # with self's place in the graph, since self's memory is overwritten below.
            src = Tensor._make(self._data.copy(), self._grad_fn, self._output_nr)
            src._requires_grad = self._requires_grad
        result = fn(src, *args, **kwargs)
        if result.shape != self.shape:
            raise RuntimeError(
                f"output with shape {list(self.shape)} doesn't match the broadcast shape {list(result.shape)}"
            )
        if not np.can_cast(result._data.dtype, self._data.dtype, casting="same_kind"):
            raise RuntimeError(
                f"result type {result.dtype} can't be cast to the desired output type {self.dtype}"
            )
        self._data[...] = result._data
        self._bump_version()
        if result._grad_fn is not None:
            retained = self._retains_grad
            self._grad_fn, self._output_nr, self._retains_grad = result._grad_fn, result._output_nr, False
            if retained:
                self.retain_grad()
        return self

    method.__name__ = name
    return method


def defop(
    *,
    vjp: Callable[..., Any] | Sequence[Callable[..., Any] | None] | None,
    node: str | None = None,
    methods: Sequence[str] = (),
    rmethods: Sequence[str] = (),
    inplace: Sequence[str] = (),
    promote: bool = False,
    to_float: bool = False,
    parse: Callable[..., tuple[tuple, dict]] | None = None,
    samples: Callable[[np.random.Generator], list[tuple[tuple, dict]]] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Tensor]]:
    """Register the decorated forward as an op; return its public function.

    Args:
        vjp: backward rule(s), one per tensor input; see the module docstring.
        node: the backward node's name (PyTorch's, e.g. ``"MulBackward0"``).
        methods: Tensor methods/operators bound to the public function.
        rmethods: reflected operators (``__radd__``): called as ``fn(other, self)``.
        inplace: in-place method names (``add_``, ``__iadd__``).
        promote: apply PyTorch's type promotion across the inputs.
        to_float: integer/bool inputs compute in the default float dtype.
        parse: maps the public call's arguments to ``(inputs, attrs)`` for ops
            whose Python signature differs from the forward's (``reshape(*shape)``).
        samples: ``rng -> [(args, kwargs), ...]`` sample calls for the op tests.
    """

    def register(forward: Callable[..., Any]) -> Callable[..., Tensor]:
        name = forward.__name__.lstrip("_")
        inputs, attrs = _signature(forward)
        vjps = None if vjp is None else (tuple(vjp) if isinstance(vjp, (tuple, list)) else (vjp,))
        if vjps is not None and len(vjps) != len(inputs):
            raise TypeError(f"op {name}: {len(vjps)} vjp(s) for {len(inputs)} inputs")
        node_name = node or name.capitalize() + "Backward0"
        op = OpDef(name, forward, inputs, attrs, vjps, promote, to_float, node_name, samples)
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
            op.node_cls = type(node_name, (OpNode,), {"__slots__": (), "op": op})
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
        for m in methods:
            setattr(Tensor, m, public)
        for m in rmethods:
            setattr(Tensor, m, lambda self, other, _f=public: _f(other, self))
        for m in inplace:
            setattr(Tensor, m, _inplace(public, m))
        return public

    return register
