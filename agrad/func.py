"""Function transforms (mirrors ``torch.func``): :func:`functional_call`, :func:`grad`,
:func:`grad_and_value` and :func:`vjp`, with ``await``.

``functional_call(module, tensors, args)`` runs a module with other tensors in
place of its parameters and buffers; ``grad(f)`` is the function computing
the gradient of ``f``'s scalar output w.r.t. its arguments; ``vjp(f, *primals)``
gives ``f``'s output and a function taking cotangents to the vector-Jacobian
product.  As everywhere in agrad the backward pass is awaited: the functions
that ``grad``, ``grad_and_value`` and ``vjp`` return are awaitable
(``await grad(f)(x)``), and ``grad_sync``, ``grad_and_value_sync`` and
``vjp_sync`` return blocking ones.  Each pair shares one core, a generator
that runs ``f`` and *yields* its one gradient request (the arguments of
``agrad.autograd.grad``), driven by ``agrad.autograd.functional``'s async or
blocking driver.

    >>> x = agrad.tensor([1.0, 2.0, 3.0])
    >>> agrad.func.grad_sync(lambda x: (x ** 2).sum())(x)
    tensor([2., 4., 6.])

    >>> model = agrad.nn.Linear(3, 1)
    >>> def loss(params, x):
    ...     return agrad.func.functional_call(model, params, (x,)).sum()
    >>> params = {k: v.detach() for k, v in model.named_parameters()}
    >>> grads = agrad.func.grad_sync(loss)(params, agrad.ones(2, 3))
    >>> grads["weight"], grads["bias"]
    (tensor([[2., 2., 2.]]), tensor([2.]))

Arguments and outputs may be trees of tensors (dicts, lists and tuples of
them), as ``torch.func``'s pytrees; a gradient has its argument's structure.

Note [Transforms without levels]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
``torch.func`` wraps tensors in a level per transform; agrad has one graph.
A transform differentiates ``f`` w.r.t. fresh tensors standing for its
arguments: a detached leaf that requires grad, or, where the argument itself
requires grad (and grad mode is on), an alias of it (a view), so that paths
from the argument through a closure are not counted and the result stays
connected to the argument.  The gradient is recorded (``create_graph``) only
when something outside the transform may differentiate it again: when the
output's graph reaches a tensor that requires grad other than the
transform's own fresh leaves (an argument that requires grad, a tensor ``f``
closes over, an enclosing transform's leaf: ``grad_sync(grad_sync(f))``
gives second derivatives).  Otherwise the results are detached, as PyTorch
returns them.  Deciding this walks the output's graph once, stopping at the
first such tensor.  Under ``no_grad`` nothing is recorded, as in PyTorch.
``f`` itself is synchronous; inside it, nest the ``_sync`` forms (inside
``agrad.cooperative`` they do not block the loop).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain
from typing import Any

from agrad._creation import zeros_like
from agrad._grad_mode import enable_grad, is_grad_enabled
from agrad._graph._node import AccumulateGrad
from agrad._misuse import awaited
from agrad._tensor import Tensor
from agrad.autograd.functional import _Core, _drive, _drive_sync
from agrad.nn.modules.module import Module

__all__ = ["functional_call", "grad", "grad_sync", "grad_and_value", "grad_and_value_sync", "vjp", "vjp_sync"]

_Argnums = int | tuple[int, ...]
_Drive = Callable[[_Core], Any]

# -- functional_call -------------------------------------------------------------------------------


# Note [A private copy per functional call]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch's functional_call swaps the given tensors into the module and swaps
# the originals back when the call returns.  In agrad that is not safe: a
# module shared by a server's requests is called from several asyncio tasks,
# and an ``agrad.cooperative`` call pauses between ops, so another request
# would run the shared module with this request's tensors (or this one with
# theirs) whenever one pauses inside the swap.  Instead each call makes a
# private shallow copy of the module tree: every module object is copied once
# (``object.__new__`` and its ``__dict__``, no ``__init__``) with its own
# ``_parameters``, ``_buffers`` and ``_modules`` dicts, submodules replaced by
# their copies (a module reached twice has one copy, so shared submodules stay
# shared); tensors, hooks and every other attribute are the originals.  The
# substitution happens on the copy with PyTorch's rules (into ``_parameters``
# or ``_buffers`` by name, else as a plain attribute) and the copy is called.
# The shared module is never written, so no other call, synchronous, paused
# or awaiting an ``async def forward``, can observe the substitution, and an
# error leaves nothing to restore.  Costs: one small object and three dict
# copies per module per call.  What differs from a swap: ``forward`` sees the
# copy as ``self`` (code reaching the original by another path, a closure or
# a global, sees the original tensors), and attributes it assigns land on the
# copy and are dropped with it (in-place updates of tensors, such as a
# BatchNorm's running statistics, reach the tensors as in PyTorch).


def _private_copy(module: Module, memo: dict[int, Module]) -> Module:
    """``module``'s private copy (Note [A private copy per functional call]); ``memo`` maps the
    id of every original and of every copy made so far to its copy."""
    copy = memo.get(id(module))
    if copy is not None:
        return copy
    copy = object.__new__(type(module))
    state = copy.__dict__
    state.update(module.__dict__)
    state["_parameters"] = dict(module._parameters)
    state["_buffers"] = dict(module._buffers)
    state["_non_persistent_buffers_set"] = set(module._non_persistent_buffers_set)
    memo[id(module)] = memo[id(copy)] = copy
    state["_modules"] = {k: None if m is None else _private_copy(m, memo) for k, m in module._modules.items()}
    return copy


def _submodule(root: Module, path: str, memo: dict[int, Module]) -> Module:
    """The copy of the submodule at the dotted ``path`` of ``root`` (a copy), with PyTorch's
    ``NamedMemberAccessor`` errors.  A module held as a plain attribute is copied too."""
    module = root
    for attr in path.split(".") if path else ():
        try:
            child = getattr(module, attr)
        except AttributeError as ex:
            raise AttributeError(f"{module._get_name()} has no attribute `{attr}`") from ex
        if not isinstance(child, Module):
            raise TypeError(f"submodule `{path}`: {child} is not an instance of agrad.nn.Module")
        copy = _private_copy(child, memo)
        if copy is not child:  # an unregistered module attribute: the copy gets its own
            module.__dict__[attr] = copy
        module = copy
    return module


def _set_tensor(module: Module, name: str, value: Any) -> None:
    """Put ``value`` in place of ``module``'s tensor ``name`` (PyTorch's ``swap_tensor``)."""
    if value is not None and not isinstance(value, Tensor):
        raise TypeError(f"{value} is not an instance of agrad.Tensor")
    if name == "":
        raise KeyError('tensor name can\'t be empty string ""')
    if name in module._parameters:
        module._parameters[name] = value  # type: ignore[assignment]  # a plain tensor, as PyTorch swaps in
    elif name in module._buffers:
        module._buffers[name] = value
    else:
        original = getattr(module, name, None)
        if original is not None and not isinstance(original, Tensor):
            raise TypeError(f"attribute `{name}`: {original} is not an instance of agrad.Tensor")
        setattr(module, name, value)


def _merged(parameter_and_buffer_dicts: Any) -> dict[str, Any]:
    if isinstance(parameter_and_buffer_dicts, dict):
        return parameter_and_buffer_dicts
    if not isinstance(parameter_and_buffer_dicts, Sequence) or isinstance(parameter_and_buffer_dicts, str):
        raise ValueError("Expected parameter_and_buffer_dicts to be a dict, or a list/tuple of dicts, but got "
                         f"{type(parameter_and_buffer_dicts)}")
    if not all(isinstance(d, dict) for d in parameter_and_buffer_dicts):
        raise ValueError("Expected all elements of parameter_and_buffer_dicts to be dictionaries")
    merged: dict[str, Any] = {}
    repeated = []
    for d in parameter_and_buffer_dicts:
        for k, v in d.items():
            if k in merged and k not in repeated:
                repeated.append(k)
            merged[k] = v
    if repeated:
        raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of functional call is ambiguous")
    return merged


def _named_tensors(module: Module) -> Iterator[tuple[str, Tensor]]:
    """Every (name, tensor) of ``module``, tied ones under each of their names."""
    return chain(module.named_parameters(remove_duplicate=False), module.named_buffers(remove_duplicate=False))


def _untied(module: Module, tensors: dict[str, Any]) -> dict[str, Any]:
    """``tensors`` with each given value also under the other names of the tensor it replaces
    (tie_weights); ``ValueError`` if tied names were given different values."""
    names_of: dict[int, set[str]] = {}
    for name, t in _named_tensors(module):
        names_of.setdefault(id(t), set()).add(name)
    tied = {name: names for names in names_of.values() if len(names) > 1 for name in names}
    untied = dict(tensors)
    for given in (name for name in tensors if name in tied):
        names = tied[given]
        if len({id(tensors[n]) for n in names if n in tensors}) > 1:
            raise ValueError(f"functional_call got multiple values for keys {sorted(names)}, which are tied. "
                             "Consider using tie_weights=False")
        untied.update(dict.fromkeys(names, tensors[given]))
    return untied


def _check_keys(module: Module, keys: Iterable[str]) -> None:
    """``strict``: the given names must be exactly the module's tensors' names."""
    valid = {name for name, _ in _named_tensors(module)}
    given = set(keys)
    errors = []
    if unexpected := sorted(given - valid):
        errors.append(f"Unexpected key(s): {', '.join(map(repr, unexpected))}.")
    if missing := sorted(valid - given):
        errors.append(f"Missing key(s): {', '.join(map(repr, missing))}.")
    if errors:
        raise RuntimeError("Error(s) in reparametrizing for {}:\n\t{}".format(module._get_name(), "\n\t".join(errors)))


def _write_back(copy: Module, memo: dict[int, Module], given: dict[str, Any]) -> None:
    """PyTorch writes the module's tensors at the given names, as the call left them, back into
    the caller's dict (a ``forward`` that reassigns ``self.foo`` updates ``given['foo']``)."""
    for name in given:
        prefix, _, attr = name.rpartition(".")
        value = getattr(_submodule(copy, prefix, memo), attr, None)
        if isinstance(value, Tensor):
            given[name] = value


def functional_call(module: Module, parameter_and_buffer_dicts: dict[str, Tensor] | Sequence[dict[str, Tensor]],
                    args: Any = None, kwargs: dict[str, Any] | None = None, *, tie_weights: bool = True,
                    strict: bool = False) -> Any:
    """Call ``module(*args, **kwargs)`` with the given tensors in place of its parameters
    and buffers, by dotted name; the module itself is never changed.

    Args:
        module: the module to call.
        parameter_and_buffer_dicts: ``{name: tensor}``, or a list or tuple of such dicts
            with distinct keys.  Names the module lacks become attributes of the call's
            module; names left out keep the module's own tensors.
        args: the positional arguments: a tuple, or one argument that is not a tuple.
        kwargs: the keyword arguments.
        tie_weights: a tensor the module holds under several names (tied weights) is
            replaced under all of them by the value given for one; giving different
            values for tied names is a ``ValueError``.
        strict: the given names must be exactly the module's parameters and buffers
            (``RuntimeError`` listing unexpected and missing keys otherwise).

    Returns:
        What the module returns.  For a module whose ``forward`` is ``async def``, a
        coroutine to await; the substitution holds for that coroutine alone, across
        its awaits.

    The call runs on a private shallow copy of the module tree, so concurrent
    calls (asyncio tasks, ``agrad.cooperative`` calls, threads) that share one
    module never see each other's tensors (Note [A private copy per functional
    call] in ``agrad/func.py``).  As in PyTorch, in-place updates of tensors
    reach the given tensors, and when one dict is given its entries are set to
    the module's tensors at those names as the call left them.

        >>> lin = agrad.nn.Linear(2, 1)
        >>> params = {"weight": agrad.ones(1, 2), "bias": agrad.zeros(1)}
        >>> agrad.func.functional_call(lin, params, agrad.tensor([[1.0, 2.0]]))
        tensor([[3.]])
    """
    tensors = _merged(parameter_and_buffer_dicts)
    untied = _untied(module, tensors) if tie_weights else tensors
    if strict:
        _check_keys(module, list(untied))
    memo: dict[int, Module] = {}
    copy = _private_copy(module, memo)
    for name, value in untied.items():
        prefix, _, attr = name.rpartition(".")
        _set_tensor(_submodule(copy, prefix, memo), attr, value)
    args = () if args is None else args if isinstance(args, tuple) else (args,)
    given = parameter_and_buffer_dicts if isinstance(parameter_and_buffer_dicts, dict) else {}
    if inspect.iscoroutinefunction(copy.forward):
        return _awaited_call(copy, memo, given, args, kwargs or {})
    try:
        return copy(*args, **(kwargs or {}))
    finally:
        _write_back(copy, memo, given)


async def _awaited_call(copy: Module, memo: dict[int, Module], given: dict[str, Any], args: tuple[Any, ...],
                        kwargs: dict[str, Any]) -> Any:
    """:func:`functional_call` of a module with an ``async def forward``."""
    try:
        return await copy(*args, **kwargs)
    finally:
        _write_back(copy, memo, given)


# -- trees of tensors ----------------------------------------------------------------------------

# A tree's structure: None for a leaf, else (container type, keys or length, children's structures).
_Spec = tuple[type, Any, tuple[Any, ...]] | None


def _flatten(tree: Any) -> tuple[list[Any], _Spec]:
    """The leaves of ``tree`` (anything but a dict, list or tuple) in order, and its structure."""
    keys: Any
    if isinstance(tree, dict):
        keys = tuple(tree)
        parts = [_flatten(tree[k]) for k in keys]
    elif isinstance(tree, (list, tuple)):
        keys = len(tree)
        parts = [_flatten(v) for v in tree]
    else:
        return [tree], None
    return [leaf for leaves, _ in parts for leaf in leaves], (type(tree), keys, tuple(s for _, s in parts))


def _unflatten(leaves: Iterator[Any], spec: _Spec) -> Any:
    """The tree of structure ``spec`` whose leaves are taken, in order, from ``leaves``."""
    if spec is None:
        return next(leaves)
    kind, keys, children = spec
    if issubclass(kind, dict):
        items = {k: _unflatten(leaves, c) for k, c in zip(keys, children)}
        return items if kind is dict else kind(items)
    values = [_unflatten(leaves, c) for c in children]
    if kind is list:
        return values
    make: Callable[..., Any] = kind
    return make(*values) if hasattr(kind, "_fields") else make(values)  # a namedtuple takes its fields


def _describe(spec: _Spec) -> str:
    """A structure as PyTorch prints a pytree spec: ``*`` for a leaf."""
    if spec is None:
        return "*"
    kind, keys, children = spec
    if issubclass(kind, dict):
        return "{" + ", ".join(f"{k!r}: {_describe(c)}" for k, c in zip(keys, children)) + "}"
    inner = ", ".join(_describe(c) for c in children)
    return f"[{inner}]" if issubclass(kind, list) else f"({inner},)" if len(children) == 1 else f"({inner})"


# -- gradients -------------------------------------------------------------------------------------

def _differentiable(leaves: list[Any], track: bool) -> list[Tensor]:
    """Fresh tensors standing for ``leaves``; aliases where ``track`` and the leaf requires grad
    (Note [Transforms without levels])."""
    for leaf in leaves:
        if not isinstance(leaf, Tensor):
            raise ValueError(f"Thing passed to transform API must be Tensor, got {type(leaf)}")
    return [t.view_as(t) if track and t.requires_grad else t.detach().requires_grad_() for t in leaves]


def _reaches_outside(outputs: Sequence[Tensor], inputs: Sequence[Tensor]) -> bool:
    """Whether ``outputs`` depend on a tensor that requires grad other than the transform's
    fresh ``inputs``: then its results are recorded (Note [Transforms without levels])."""
    own = {id(t) for t in inputs}
    stack = []
    for o in outputs:
        if o.grad_fn is not None:
            stack.append(o.grad_fn)
        elif o.requires_grad and id(o) not in own:
            return True
    seen = {id(node) for node in stack}
    while stack:
        node = stack.pop()
        if isinstance(node, AccumulateGrad):
            if id(node.variable) not in own:
                return True
            continue
        for edge in node.next_edges:
            if edge is not None and id(edge[0]) not in seen:
                seen.add(id(edge[0]))
                stack.append(edge[0])
    return False


def _unwrapped(tree: Any, record: bool) -> Any:
    """A result tree as the caller gets it: detached unless the transform records."""
    leaves, spec = _flatten(tree)
    for leaf in leaves:
        if not isinstance(leaf, Tensor):
            raise RuntimeError(f"Expected tensors, got unsupported type {type(leaf)}")
    return tree if record else _unflatten(iter([t.detach() for t in leaves]), spec)


def _autograd_grad(outputs: Sequence[Tensor], inputs: Sequence[Tensor], grad_outputs: Sequence[Tensor] | None,
                   retain_graph: bool, create_graph: bool) -> _Core:
    """Yield the request for d ``outputs`` / d ``inputs``; return the gradients, zeros for an
    input the outputs do not depend on (PyTorch's ``_autograd_grad`` of functorch)."""
    given: Sequence[Tensor | None] = [None] * len(outputs) if grad_outputs is None else grad_outputs
    pairs = [(o, g) for o, g in zip(outputs, given) if o.requires_grad]
    grads: Sequence[Tensor | None] = (None,) * len(inputs)
    if pairs:
        with enable_grad():
            grads = yield {"outputs": [o for o, _ in pairs], "inputs": list(inputs),
                           "grad_outputs": None if grad_outputs is None else [g for _, g in pairs],
                           "retain_graph": retain_graph, "create_graph": create_graph, "allow_unused": True}
    return [zeros_like(x) if g is None else g for g, x in zip(grads, inputs)]


def _validated_argnums(argnums: Any, num_args: int) -> _Argnums:
    """``argnums`` with negative positions wrapped, after PyTorch's checks."""
    if not isinstance(argnums, (int, tuple)):
        raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")

    def wrap(argnum: Any) -> int:
        if not isinstance(argnum, int):
            raise RuntimeError(f"argnum must be int, got: {type(argnum)}")
        if -num_args <= argnum < num_args:
            return argnum % num_args
        raise RuntimeError(f"Got argnum={argnum}, but only {num_args} positional inputs")

    if isinstance(argnums, int):
        return wrap(argnums)
    if not argnums:
        raise RuntimeError("argnums must be non-empty")
    if len(set(argnums)) != len(argnums):
        raise RuntimeError(f"argnums elements must be unique, got {argnums}")
    return tuple(wrap(a) for a in argnums)


def _grad_core(func: Callable[..., Any], argnums: Any, has_aux: bool, with_value: bool, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> _Core:
    """``grad`` (or, ``with_value``, ``grad_and_value``) of ``func`` at ``args``: runs ``func``,
    yields the one gradient request, returns the result."""
    argnums = _validated_argnums(argnums, len(args))
    positions = (argnums,) if isinstance(argnums, int) else argnums
    diff_args = args[argnums] if isinstance(argnums, int) else tuple(args[i] for i in argnums)
    leaves, spec = _flatten(diff_args)
    track = is_grad_enabled()
    inputs = _differentiable(leaves, track)
    new = _unflatten(iter(inputs), spec)
    replaced = dict(zip(positions, (new,) if isinstance(argnums, int) else new))
    with enable_grad():
        output = func(*(replaced.get(i, a) for i, a in enumerate(args)), **kwargs)
    aux = None
    if has_aux:
        if not (isinstance(output, tuple) and len(output) == 2):
            raise RuntimeError("grad_and_value(f)(*args): output of function f should be a tuple: (output, aux) "
                               "if has_aux is True")
        output, aux = output
    if not isinstance(output, Tensor):
        raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got {type(output)}")
    if output.dim() != 0:
        raise RuntimeError("grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got tensor with "
                           f"{output.dim()} dims. Maybe you wanted to use the vjp or jacrev APIs instead?")
    record = track and _reaches_outside([output], inputs)
    grads = yield from _autograd_grad([output], inputs, None, retain_graph=record, create_graph=record)
    gradient = _unflatten(iter(_unwrapped(grads, record)), spec)
    value = _unwrapped(output, record)
    if has_aux:
        aux = _unwrapped(aux, record)
        return (gradient, (value, aux)) if with_value else (gradient, aux)
    return (gradient, value) if with_value else gradient


def _reporting(call: str, fix: str, twin: str) -> _Drive:
    """``_drive``, its coroutine reporting a forgotten ``await`` of the transformed
    function at the line that called it (Note [A forgotten await])."""
    def drive(core: _Core) -> Any:
        return awaited(_drive(core), call, fix, twin, depth=2)  # the user, the transformed function, here
    return drive


_DRIVE_GRAD = _reporting("agrad.func.grad(f)(...)", "await agrad.func.grad(f)(...)", "agrad.func.grad_sync(f)(...)")
_DRIVE_GRAD_AND_VALUE = _reporting("agrad.func.grad_and_value(f)(...)", "await agrad.func.grad_and_value(f)(...)",
                                   "agrad.func.grad_and_value_sync(f)(...)")
_DRIVE_VJP = _reporting("vjp_fn(...) from agrad.func.vjp", "await vjp_fn(...)", "agrad.func.vjp_sync(f, ...)")


def _grad_transform(func: Callable[..., Any], argnums: _Argnums, has_aux: bool, with_value: bool,
                    drive: _Drive) -> Callable[..., Any]:
    @functools.wraps(func)
    def transformed(*args: Any, **kwargs: Any) -> Any:
        return drive(_grad_core(func, argnums, has_aux, with_value, args, kwargs))

    return transformed


def grad(func: Callable[..., Any], argnums: _Argnums = 0, has_aux: bool = False) -> Callable[..., Any]:
    """The gradient of ``func`` (returning a scalar tensor) w.r.t. its argument(s) at ``argnums``,
    as an awaitable function: ``await grad(func)(*args)``.

    Args:
        func: a synchronous function of tensors (or trees of tensors) returning a
            0-dim tensor, or ``(output, aux)`` with ``has_aux``.
        argnums: the position, or a tuple of positions, of the arguments to
            differentiate; the gradient has the structure of the argument (a tuple
            of them for a tuple of positions).
        has_aux: ``func`` returns ``(output, aux)``; the result is then ``(gradient, aux)``.

    The arguments need not require grad.  See Note [Transforms without levels]
    for when the result is itself differentiable.  :func:`grad_sync` is the
    blocking twin.

        >>> import asyncio
        >>> asyncio.run(agrad.func.grad(lambda x: x.sin().sum())(agrad.zeros(2)))
        tensor([1., 1.])
    """
    return _grad_transform(func, argnums, has_aux, False, _DRIVE_GRAD)


def grad_sync(func: Callable[..., Any], argnums: _Argnums = 0, has_aux: bool = False) -> Callable[..., Any]:
    """Blocking twin of :func:`grad`: ``grad_sync(func)(*args)`` returns the gradient.

        >>> f = lambda x: (x ** 3).sum()
        >>> agrad.func.grad_sync(agrad.func.grad_sync(f))(agrad.tensor(2.0))  # 6x
        tensor(12.)
    """
    return _grad_transform(func, argnums, has_aux, False, _drive_sync)


def grad_and_value(func: Callable[..., Any], argnums: _Argnums = 0, has_aux: bool = False) -> Callable[..., Any]:
    """Like :func:`grad`, but the awaited function returns ``(gradient, value)``
    (``(gradient, (value, aux))`` with ``has_aux``).

        >>> import asyncio
        >>> asyncio.run(agrad.func.grad_and_value(lambda x: (x * x).sum())(agrad.tensor([3.0])))
        (tensor([6.]), tensor(9.))
    """
    return _grad_transform(func, argnums, has_aux, True, _DRIVE_GRAD_AND_VALUE)


def grad_and_value_sync(func: Callable[..., Any], argnums: _Argnums = 0,
                        has_aux: bool = False) -> Callable[..., Any]:
    """Blocking twin of :func:`grad_and_value`.

        >>> agrad.func.grad_and_value_sync(lambda x: (x * x).sum())(agrad.tensor([3.0]))
        (tensor([6.]), tensor(9.))
    """
    return _grad_transform(func, argnums, has_aux, True, _drive_sync)


def _vjp(func: Callable[..., Any], primals: tuple[Any, ...], has_aux: bool, drive: _Drive) -> tuple[Any, ...]:
    """:func:`vjp`, its ``vjp_fn`` driven by ``drive``."""
    leaves, spec = _flatten(primals)
    track = is_grad_enabled()
    inputs = _differentiable(leaves, track)
    with enable_grad():
        output = func(*_unflatten(iter(inputs), spec))
    aux = None
    if has_aux:
        if not (isinstance(output, tuple) and len(output) == 2):
            raise RuntimeError("vjp(f, *primals): output of function f should be a tuple: (output, aux) "
                               "if has_aux is True")
        output, aux = output
    outputs, out_spec = _flatten(output)
    if not outputs or (len(outputs) == 1 and outputs[0] is None):
        raise RuntimeError(f"vjp(f, *primals): Expected f to be a function that has non-empty output (got output "
                           f"= {outputs})")
    for o in outputs:
        if not isinstance(o, Tensor):
            raise RuntimeError(f"vjp(f, *primals): expected f(*primals) to return only tensors, got unsupported "
                               f"type {type(o)}")
        if not o.is_floating_point():
            raise RuntimeError(f"vjp(f, ...): All outputs of f must be floating-point or complex Tensors, got "
                               f"Tensor with dtype {o.dtype}")
    record = track and _reaches_outside(outputs, inputs)
    if has_aux:
        aux = _unwrapped(aux, record)

    def core(cotangents: Any, retain_graph: bool, create_graph: bool | None) -> _Core:
        cts, ct_spec = _flatten(cotangents)
        if ct_spec != out_spec:
            raise RuntimeError("Expected pytree structure of cotangents to be the same as pytree structure of "
                               f"outputs to the function. cotangents: {_describe(ct_spec)}, primal output: "
                               f"{_describe(out_spec)}")
        create = record and is_grad_enabled() if create_graph is None else create_graph
        grads = yield from _autograd_grad(outputs, inputs, cts, retain_graph, create)
        return _unflatten(iter(_unwrapped(grads, create)), spec)

    def vjp_fn(cotangents: Any, retain_graph: bool = True, create_graph: bool | None = None) -> Any:
        return drive(core(cotangents, retain_graph, create_graph))

    result = _unwrapped(output, record)
    return (result, vjp_fn, aux) if has_aux else (result, vjp_fn)


def vjp(func: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """``(func(*primals), vjp_fn)``: ``await vjp_fn(cotangents)`` is the vector-Jacobian product,
    one gradient per primal (a tuple, the primals' structure).

    ``cotangents`` has the structure and shapes of ``func``'s output.  ``vjp_fn``
    may be awaited several times (``retain_graph=True`` by default).  With
    ``has_aux``, ``func`` returns ``(output, aux)`` and ``vjp`` returns
    ``(output, vjp_fn, aux)``.  ``func`` runs at once; :func:`vjp_sync` gives a
    blocking ``vjp_fn``.

        >>> import asyncio
        >>> out, vjp_fn = agrad.func.vjp(lambda x: x * 2, agrad.tensor([1.0, 2.0]))
        >>> asyncio.run(vjp_fn(agrad.tensor([1.0, 10.0])))
        (tensor([ 2., 20.]),)
    """
    return _vjp(func, primals, has_aux, _DRIVE_VJP)


def vjp_sync(func: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple[Any, ...]:
    """Blocking twin of :func:`vjp`: ``vjp_fn(cotangents)`` returns the product.

        >>> out, vjp_fn = agrad.func.vjp_sync(lambda x, y: x * y, agrad.tensor(2.0), agrad.tensor(3.0))
        >>> vjp_fn(agrad.tensor(1.0))
        (tensor(3.), tensor(2.))
    """
    return _vjp(func, primals, has_aux, _drive_sync)
