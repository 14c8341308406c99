"""The op registry: turns one declarative entry into a public function, Tensor
methods, an in-place variant and a backward Node class.

``defop`` is the one place an op is declared; the jobs it hands out live in
their own modules: what the entry means (``_schema``: the frozen ``OpDef``),
running it (``_dispatch.apply``), recording its node (``_record``) and its
in-place variants (``_inplace``).  Hand-written Tensor methods are bound in
``_methods``.

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
from typing import Any

from agrad._ops._dispatch import apply
from agrad._ops._inplace import inplace_method
from agrad._ops._record import node_classes
from agrad._ops._schema import REGISTRY, OpDef, Samples, _signature, build_opdef, identity
from agrad._tensor import Tensor

__all__ = ["OpDef", "defop", "apply", "identity", "REGISTRY", "BOUND_METHODS"]

# Every Tensor method an entry binds, and the op that binds it: two entries
# (or an entry and a hand-written method, ``_methods.bind``) binding one name
# would silently replace one another, so binding a name twice raises.
BOUND_METHODS: dict[str, str] = {}


def _public_function(name: str, inputs: tuple[str, ...], defaults: dict[str, Any],
                     parse: Callable[..., tuple[tuple[Any, ...], dict[str, Any]]] | None,
                     ) -> tuple[Callable[..., Tensor], Callable[[OpDef], None]]:
    """The op's public function, and ``bind(op)`` to call once its ``OpDef`` (which
    holds the function) is built; until then the function has no op to apply."""
    op: OpDef

    def bind(built: OpDef) -> None:
        nonlocal op
        op = built

    if parse is not None:
        def public(*args: Any, **kwargs: Any) -> Tensor:
            ins, at = parse(*args, **kwargs)
            return apply(op, ins, at)
    else:
        n = len(inputs)
        names = tuple(defaults)

        def public(*args: Any, **kwargs: Any) -> Tensor:
            if len(args) == n and not kwargs:
                return apply(op, args, defaults)  # the common call: inputs only
            if len(args) < n:
                missing = inputs[len(args):]
                if not all(m in kwargs for m in missing):
                    raise TypeError(f"{name}() missing required argument(s): {', '.join(missing)}")
                args = args + tuple(kwargs.pop(m) for m in missing)
            attrs = dict(defaults)
            for k, v in zip(names, args[n:]):
                attrs[k] = v
            for k, v in kwargs.items():
                if k not in defaults:
                    raise TypeError(f"{name}() got an unexpected keyword argument '{k}'")
                attrs[k] = v
            return apply(op, args[:n], attrs)

    public.__name__ = public.__qualname__ = name
    return public, bind


def _public_signature(forward: Callable[..., Any],
                      parse: Callable[..., tuple[tuple[Any, ...], dict[str, Any]]] | None) -> inspect.Signature:
    """What ``help()``, IDEs and the API reference show for an op's public function,
    which itself takes ``(*args, **kwargs)``: the parser's parameters, or the
    forward's without ``xp``, attributes positional-or-keyword as the public
    function accepts them (keyword-only after a variadic input)."""
    if parse is not None:
        return inspect.signature(parse).replace(return_annotation="Tensor")
    params = list(inspect.signature(forward).parameters.values())[1:]
    if not any(p.kind is p.VAR_POSITIONAL for p in params):
        params = [p.replace(kind=p.POSITIONAL_OR_KEYWORD) for p in params]
    return inspect.Signature(params, return_annotation="Tensor")


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
    parse: Callable[..., tuple[tuple[Any, ...], dict[str, Any]]] | None = None,
    samples: Samples | None = None,
    ref: Callable[[Any], Callable[..., Any]] | None = None,
    check: dict[str, float] | None = None,
    view: bool = False,
    work: Callable[[Sequence[Tensor], Tensor], int] | None = None,
    saved_as: dict[str, str] | None = None,
    release: bool = False,
    split_rows: int | None = None,
    opmath: bool = True,
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
        opmath: compute half-precision inputs in float32 and round once (the
            default; Note [Half precision computes in float32]); False for a
            forward whose result depends on its input's dtype (``nan_to_num``'s
            default replacements, ``nextafter``, random bounds).
    """

    def register(forward: Callable[..., Any]) -> Callable[..., Tensor]:
        signature = _signature(forward)
        public, bind = _public_function(forward.__name__.lstrip("_"), signature[0], signature[1], parse)
        public.__doc__ = forward.__doc__
        public.__signature__ = _public_signature(forward, parse)  # type: ignore[attr-defined]
        op = build_opdef(
            forward, signature, vjp=vjp, node=node, node_for=node_for, make_node_classes=node_classes, public=public,
            promote=promote, to_float=to_float, samples=samples, ref=ref, check=check, view=view, work=work,
            saved_as=saved_as, release=release, split_rows=split_rows, opmath=opmath,
        )
        bind(op)
        REGISTRY[op.name] = op
        _bind_methods(op, methods, rmethods, inplace, parse is None)
        return public

    return register


def _bind_methods(op: OpDef, methods: Sequence[str], rmethods: Sequence[str], inplace: Sequence[str],
                  direct: bool) -> None:
    """Bind ``op``'s Tensor methods, reflected operators and in-place variants.

    Operators take exactly one operand: without a parser (``direct``) they go
    straight to ``apply``, skipping the public function's argument handling.
    """
    public, defaults = op.public, op.attrs
    for m in (*methods, *rmethods, *inplace):
        if m in BOUND_METHODS:
            raise RuntimeError(f"Tensor.{m} is bound by both op {BOUND_METHODS[m]!r} and op {op.name!r}")
        BOUND_METHODS[m] = op.name
    for m in methods:
        if direct and m.startswith("__") and len(op.inputs) == 2:
            setattr(Tensor, m, lambda self, other: apply(op, (self, other), defaults))
        else:
            setattr(Tensor, m, public)
    for m in rmethods:
        if direct:
            setattr(Tensor, m, lambda self, other: apply(op, (other, self), defaults))
        else:
            setattr(Tensor, m, lambda self, other, _f=public: _f(other, self))
    for m in inplace:
        setattr(Tensor, m, inplace_method(public, m))
