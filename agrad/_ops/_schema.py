"""What an op *is*: the :class:`OpDef` and everything derived from a
forward's signature and its vjps' parameters, computed once at registration.

Nothing here runs per call.  :func:`build_opdef` derives every field (the
inputs and attributes, what the node saves for each mask of inputs needing
grad, the vjps' argument indices, PyTorch's names of the saved values) before
the ``OpDef`` is constructed, so nothing in agrad changes an ``OpDef``
afterwards.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from agrad._graph._node import Node

if TYPE_CHECKING:
    from agrad._tensor import Tensor

__all__ = ["REGISTRY", "OpDef", "SavePlan", "build_opdef", "identity"]

# One entry of a save plan: (what to save, where from); see _save_plans.
SaveEntry = tuple[int, Any]
# Per mask of inputs needing grad: (what to save, whether that holds a tensor).
SavePlan = tuple[tuple[SaveEntry, ...], bool]
Samples = Callable[[np.random.Generator], list[tuple[tuple[Any, ...], dict[str, Any]]]]


def identity(g: Any) -> Any:
    """The vjp of an input whose gradient is the incoming one (``add``, ``clone``...).

    Nodes pass the gradient on without calling it (a call is about 5% of an
    ``AddBackward0`` node's cost)."""
    return g


# A variadic op's inputs all take gradients and share one plan (mask 0):
# ``record`` zips its inputs with these endless iterators, which never run out
# and hold no state, so one of each serves every op and thread.
_EVERY_INPUT_DIFFERENTIABLE = itertools.repeat(identity)
_NO_MASK_BITS = itertools.repeat(0)


# Frozen: ``build_opdef`` computes every field before constructing it, and
# nothing assigns to an OpDef afterwards.  (The engine's tests that watch or
# hold an op's kernel swap ``forward`` in the instance's ``__dict__`` through
# ``monkeypatch.setitem``, which restores it.)
@dataclass(eq=False, frozen=True)
class OpDef:
    """Everything agrad knows about one op; built complete by :func:`build_opdef`."""

    name: str
    forward: Callable[..., Any]
    inputs: tuple[str, ...]
    attrs: dict[str, Any]
    vjps: tuple[Callable[..., Any] | None, ...] | None
    promote: bool
    to_float: bool
    node_name: str
    samples: Samples | None
    # The op's public function (what ``agrad.<name>`` is).
    public: Callable[..., Tensor]
    # PyTorch's spelling of the op, as a function of the ``torch`` module, for
    # the oracle tests (agrad never imports torch); per-op gradcheck settings.
    ref: Callable[[Any], Callable[..., Any]] | None = None
    check: dict[str, float] = field(default_factory=dict)
    saved: tuple[str, ...] = ()
    # Per mask of inputs needing grad: (what to save, whether that holds a tensor).
    save_plans: tuple[SavePlan, ...] = ()
    # Per input: its vjp and the indices of the saved values it takes after ``g``.
    calls: tuple[tuple[Callable[..., Any] | None, tuple[int, ...]], ...] = ()
    vjp_args: tuple[tuple[int, ...], ...] = ()
    # What ``record`` zips the inputs with: each input's vjp (None: no edge) and
    # its bit in the mask that picks the save plan (endless for variadic ops).
    edge_vjps: Iterable[Callable[..., Any] | None] = ()
    edge_bits: Iterable[int] = ()
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
    # PyTorch's name of each entry of ``saved``: Note [Saved values by name].
    saved_names: tuple[str, ...] = ()
    # Half-precision inputs compute in float32 (Note [Half precision computes
    # in float32]); False for forwards whose result depends on the input's
    # dtype itself (its range, its spacing, its random bounds).
    opmath: bool = True


# Every op's OpDef by name, filled by ``defop`` as the op modules are imported.
REGISTRY: dict[str, OpDef] = {}


# Note [Saving only what is needed]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A node saves a value only if the vjp of some input that requires grad uses
# it: ``x * c`` with a constant ``c`` saves ``c`` (for x's gradient) but not
# ``x`` (needed only for c's, never computed).  This is PyTorch's conditional
# saving, and it keeps activations from being held alive for nothing.  The
# plans are computed at registration, one per mask of inputs needing grad;
# unused slots hold None so the vjps' argument indices stay fixed.  A variadic
# op (Note [Variadic ops]) has one plan, which saves the tuple of all its
# inputs or of their shapes.  A custom Function's plan is made when it records
# (``record``): its ``to_save`` entries (``_SAVE_TENSOR``), None kept.
(_SAVE_NOTHING, _SAVE_INPUT, _SAVE_OUTPUT, _SAVE_ATTR, _SAVE_SHAPE,
 _SAVE_INPUTS, _SAVE_SHAPES, _SAVE_TENSOR, _SAVE_STRIDES) = range(9)


def _save_plans(inputs: tuple[str, ...], attrs: dict[str, Any], saved: tuple[str, ...],
                vjp_args: tuple[tuple[int, ...], ...], variadic: bool, release: bool) -> tuple[SavePlan, ...]:
    """One save plan per mask of inputs that require grad (Note [Saving only what is needed])."""
    entries: list[SaveEntry] = []
    for name in saved:
        if name == "out":
            entries.append((_SAVE_OUTPUT, None))
        elif variadic and name == inputs[0]:
            entries.append((_SAVE_INPUTS, None))
        elif variadic and name == inputs[0] + "_shape":
            entries.append((_SAVE_SHAPES, None))
        elif name in inputs:
            entries.append((_SAVE_INPUT, inputs.index(name)))
        elif name in attrs:
            entries.append((_SAVE_ATTR, name))
        elif name.endswith("_strides"):
            entries.append((_SAVE_STRIDES, inputs.index(name[:-8])))
        else:
            entries.append((_SAVE_SHAPE, inputs.index(name[:-6])))
    holds = (_SAVE_INPUT, _SAVE_OUTPUT, _SAVE_INPUTS)
    if variadic:  # every input takes a gradient: one plan saves everything
        return ((tuple(entries), release or any(kind in holds for kind, _ in entries)),)
    plans = []
    for mask in range(1 << len(inputs)):
        used = {k for i, idx in enumerate(vjp_args) if mask >> i & 1 for k in idx}
        plan = tuple(e if k in used else (_SAVE_NOTHING, None) for k, e in enumerate(entries))
        plans.append((plan, release or any(kind in holds for kind, _ in plan)))
    return tuple(plans)


def _saved_names(saved: tuple[str, ...], first: str | None, saved_as: dict[str, str]) -> tuple[str, ...]:
    """PyTorch's names of the saved values (Note [Saved values by name]); ``first``
    is the first input's name (None for variadic ops)."""
    names = []
    for name in saved:
        if name in saved_as:
            names.append(saved_as[name])
        elif name == "out":
            names.append("result")
        elif name == first:
            names.append("self")
        elif name.endswith("_shape"):
            names.append(("self" if name[:-6] == first else name[:-6]) + "_sym_sizes")
        elif name.endswith("_strides"):
            names.append(("self" if name[:-8] == first else saved_as.get(name[:-8], name[:-8])) + "_sym_strides")
        else:
            names.append(name)
    return tuple(names)


def _signature(forward: Callable[..., Any]) -> tuple[tuple[str, ...], dict[str, Any], bool]:
    """The forward's tensor inputs, its attributes with their defaults, and whether it is variadic."""
    params = list(inspect.signature(forward).parameters.values())[1:]  # drop xp
    inputs = tuple(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL))
    attrs = {p.name: p.default for p in params if p.kind is p.KEYWORD_ONLY}
    variadic = any(p.kind is p.VAR_POSITIONAL for p in params)
    return inputs, attrs, variadic


def _saved_by_vjps(name: str, vjps: tuple[Callable[..., Any] | None, ...], inputs: tuple[str, ...],
                   attrs: dict[str, Any]) -> tuple[tuple[str, ...], tuple[tuple[int, ...], ...]]:
    """What the node saves (the union of the vjps' parameters after ``g``) and,
    per vjp, the indices of the saved values it takes."""
    saved: list[str] = []
    arg_names = []
    for f in vjps:
        ps = [] if f is None else list(inspect.signature(f).parameters)[1:]
        for p in ps:
            known = (p == "out" or p in inputs or p in attrs or (p.endswith("_shape") and p[:-6] in inputs)
                     or (p.endswith("_strides") and p[:-8] in inputs))
            if not known:
                raise TypeError(f"op {name}: vjp parameter {p!r} names nothing the node can save")
            if p not in saved:
                saved.append(p)
        arg_names.append(ps)
    return tuple(saved), tuple(tuple(saved.index(p) for p in ps) for ps in arg_names)


def build_opdef(
    forward: Callable[..., Any],
    signature: tuple[tuple[str, ...], dict[str, Any], bool],
    *,
    vjp: Callable[..., Any] | Sequence[Callable[..., Any] | None] | None,
    node: str | Sequence[str] | None,
    node_for: Callable[..., str] | None,
    make_node_classes: Callable[[Sequence[str], bool, tuple[str, ...]], dict[str, type]],
    public: Callable[..., Tensor],
    promote: bool,
    to_float: bool,
    samples: Samples | None,
    ref: Callable[[Any], Callable[..., Any]] | None,
    check: dict[str, float] | None,
    view: bool,
    work: Callable[[Sequence[Tensor], Tensor], int] | None,
    saved_as: dict[str, str] | None,
    release: bool,
    split_rows: int | None,
    opmath: bool = True,
) -> OpDef:
    """The ``OpDef`` of ``forward``, every derived field computed (the other
    arguments are ``defop``'s; see there).  ``signature`` is ``_signature(forward)``;
    ``make_node_classes(names, variadic, saved_names)`` makes the op's node
    classes (``_record.node_classes``), each of which then gets the ``OpDef``
    as its ``op`` attribute."""
    name = forward.__name__.lstrip("_")
    inputs, attrs, variadic = signature
    vjps = None if vjp is None else (tuple(vjp) if isinstance(vjp, (tuple, list)) else (vjp,))
    if vjps is not None and len(vjps) != len(inputs):
        raise TypeError(f"op {name}: {len(vjps)} vjp(s) for {len(inputs)} inputs")
    names = [node] if isinstance(node, str) else list(node or (name.capitalize() + "Backward0",))
    saved: tuple[str, ...] = ()
    vjp_args: tuple[tuple[int, ...], ...] = ()
    saved_names: tuple[str, ...] = ()
    save_plans: tuple[SavePlan, ...] = ()
    classes: dict[str, type] = {}
    if vjps is not None:  # a differentiable op: what its node saves, and its node classes
        saved, vjp_args = _saved_by_vjps(name, vjps, inputs, attrs)
        saved_names = _saved_names(saved, None if variadic else inputs[0], saved_as or {})
        save_plans = _save_plans(inputs, attrs, saved, vjp_args, variadic, release)
        classes = make_node_classes(names, variadic, saved_names)
    op = OpDef(
        name, forward, inputs, attrs, vjps, promote, to_float, names[0], samples, public, ref=ref,
        check=dict(check or {}), saved=saved, save_plans=save_plans, calls=tuple(zip(vjps or (), vjp_args)),
        vjp_args=vjp_args, edge_vjps=_EVERY_INPUT_DIFFERENTIABLE if variadic else vjps or (),
        edge_bits=_NO_MASK_BITS if variadic else tuple(1 << i for i in range(len(inputs))),
        node_cls=classes.get(names[0], Node), node_for=node_for, node_classes=classes, variadic=variadic,
        view=view, work=work, release=release, split_rows=split_rows, saved_names=saved_names, opmath=opmath,
    )
    for cls in op.node_classes.values():
        cls.op = op  # type: ignore[attr-defined]  # the class, not the OpDef: built before it, pointing at it
    return op
