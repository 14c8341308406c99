"""Custom differentiable functions (mirrors ``torch.autograd.function``).

A subclass of :class:`Function` defines ``forward`` and ``backward`` static
methods; ``backward`` may be ``async def``, in which case the engine awaits it
(from the blocking twin too; see Note [Async backward]).
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from agrad import _dtype
from agrad._backends import zeros
from agrad._grad_mode import grad_enabled, no_grad
from agrad._graph._node import _FREED, Edge, Node
from agrad._ops._inplace import check_recorded_view_write, check_view_write, rebase_view
from agrad._ops._record import record
from agrad._tensor import Tensor

__all__ = ["Function", "FunctionCtx", "BackwardCFunction", "once_differentiable"]


class FunctionCtx:
    """The ``ctx`` passed to ``forward``/``setup_context`` and ``backward``."""

    def save_for_backward(self, *tensors: Tensor | None) -> None:
        """Save tensors for backward; retrieve them with :attr:`saved_tensors`.

        Saved tensors are checked against in-place modification when unpacked
        and freed after the backward unless ``retain_graph=True``.
        """
        for i, t in enumerate(tensors):
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(
                    f"save_for_backward can only save variables, but argument {i} is of type {type(t).__name__}"
                )
        self.to_save = tensors

    def mark_dirty(self, *args: Tensor) -> None:
        """Mark inputs that ``forward`` modified in place (they must be returned)."""
        self.dirty_tensors = args

    def mark_non_differentiable(self, *args: Tensor) -> None:
        """Mark outputs that do not require gradients (e.g. indices)."""
        self.non_differentiable = args

    def set_materialize_grads(self, value: bool) -> None:
        """Whether undefined output gradients reach ``backward`` as zeros (default) or ``None``."""
        self.materialize_grads = value


class BackwardCFunction(Node, FunctionCtx):
    """The backward node of a custom Function; it is also the ``ctx`` object."""

    _forward_cls: type["Function"]

    def __init__(self) -> None:
        Node.__init__(self)
        self.to_save: tuple[Any, ...] = ()
        self.dirty_tensors: tuple[Tensor, ...] = ()
        self.non_differentiable: tuple[Tensor, ...] = ()
        self.materialize_grads = True
        # PyTorch's private switch (functorch sets it): False leaves the
        # gradients of outputs marked non-differentiable None.
        self._materialize_non_diff_grads = True
        self._non_diff_outputs: frozenset[int] = frozenset()
        self.needs_input_grad: tuple[bool, ...] = ()
        self._saved: list[Any] | None = []
        self._tensor_inputs: tuple[bool, ...] = ()

    @property
    def saved_tensors(self) -> tuple[Tensor | None, ...]:
        clear = self._forward_cls.clear_saved_tensors_on_access
        if self._saved is None:
            raise RuntimeError(_ACCESSED_ONCE if clear and self.__dict__.get("_cleared") else _FREED)
        tensors = tuple(s if s is None or isinstance(s, Tensor) else s.unpack(self) for s in self._saved)
        if clear:  # free them now: only the caller holds them (Function.clear_saved_tensors_on_access)
            self._saved = None
            self._cleared = True
        return tensors

    @property
    def saved_variables(self) -> tuple[Tensor | None, ...]:
        """Deprecated alias of ``saved_tensors``, as in PyTorch."""
        warnings.warn("'saved_variables' is deprecated; use 'saved_tensors'", DeprecationWarning, stacklevel=2)
        return self.saved_tensors

    def apply(self, grads: list[Any], task: Any) -> Any:
        if self.materialize_grads:
            keep_none = frozenset() if self._materialize_non_diff_grads else self._non_diff_outputs
            grads = [Tensor._make(zeros(shape, dtype, dev)) if g is None and dtype is not None and i not in keep_none
                     else g for i, (g, (shape, dtype, dev)) in enumerate(zip(grads, self._input_meta))]
        if self.is_async:
            return self._backward_async(grads)
        return self._normalize(self._forward_cls.backward(self, *grads))

    async def _backward_async(self, grads: list[Any]) -> list[Any]:
        # The backward's coroutine is made here, when the driver awaits this one:
        # a backward stopped before that (GraphTask.run closes this coroutine)
        # leaves no coroutine behind that was never awaited.
        return self._normalize(await self._forward_cls.backward(self, *grads))

    def _normalize(self, result: Any) -> list[Any]:
        grads = list(result) if isinstance(result, (tuple, list)) else [result]
        n = len(self._tensor_inputs)
        if len(grads) > n and all(g is None for g in grads[n:]):
            grads = grads[:n]
        if len(grads) != n:
            raise RuntimeError(
                f"function {self.name()} returned an incorrect number of gradients (expected {n}, got {len(grads)})"
            )
        for i, (g, is_tensor) in enumerate(zip(grads, self._tensor_inputs)):
            if g is not None and not is_tensor:
                raise RuntimeError(
                    f"function {self.name()} returned a gradient different than None at position {i + 1}, "
                    "but the corresponding forward input was not a Variable"
                )
            if g is not None and not isinstance(g, Tensor):
                raise RuntimeError(f"function {self.name()} returned an invalid gradient at position {i + 1}: "
                                   f"expected Variable or None (got {type(g).__name__})")
        return grads


_ACCESSED_ONCE = ("saved_tensors can only be accessed once when clear_saved_tensors_on_access=True is set on the "
                  "autograd.Function. Either access saved_tensors only once, or set "
                  "clear_saved_tensors_on_access=False.")


class Function:
    """Base class for custom autograd operations (mirrors ``torch.autograd.Function``).

    Example::

        >>> class Square(agrad.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         ctx.save_for_backward(x)
        ...         return x * x
        ...     @staticmethod
        ...     async def backward(ctx, g):
        ...         (x,) = ctx.saved_tensors
        ...         return 2 * x * g
        >>> x = agrad.tensor([3.0], requires_grad=True)
        >>> Square.apply(x).backward_sync()
        >>> x.grad
        tensor([6.])

    Where ``backward`` runs (agrad only): on the thread that runs the backward,
    which for an awaited backward is the event loop's, as PyTorch runs a CPU
    backward on the calling thread.  A subclass whose ``backward`` is heavy,
    thread-safe array work may set ``offload = True`` (always in an executor
    thread) or ``offload = None`` (by size, like built-in ops) so that it does
    not block the loop; an ``async def backward`` always runs on the loop.

    A subclass may set ``clear_saved_tensors_on_access = True`` (as in
    PyTorch): ``ctx.saved_tensors`` then frees the saved tensors as it hands
    them out, so ``backward`` can release them early, and a second access
    (or a second backward) raises.
    """

    _backward_cls: type[BackwardCFunction]
    offload: bool | None = False
    clear_saved_tensors_on_access = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        backward = inspect.getattr_static(cls, "backward", None)
        fn = backward.__func__ if isinstance(backward, staticmethod) else backward
        is_async = inspect.iscoroutinefunction(fn) or getattr(fn, "_agrad_async", False)
        if is_async and cls.offload is not False:
            raise TypeError(f"{cls.__name__}: an async def backward runs on the event loop; "
                            f"it cannot set offload={cls.offload!r}")
        cls._backward_cls = type(f"{cls.__name__}Backward", (BackwardCFunction,), {
            "_forward_cls": cls, "is_async": is_async, "offload": cls.offload,
        })

    # Note [Instantiated Functions]
    # ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    # As in PyTorch, instantiating a Function only warns (old code builds one
    # before calling ``apply`` on it, which works); calling the instance is
    # the legacy non-static protocol, which raises PyTorch's RuntimeError.
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        warnings.warn(f"{type(self)} should not be instantiated. Methods on autograd functions are all static, "
                      "so you should invoke them on the class itself. Instantiating an autograd function will "
                      "raise an error in a future version of PyTorch.", DeprecationWarning, stacklevel=2)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("Legacy autograd function with non-static forward method is deprecated. Please use "
                           "new-style autograd function with static forward method. (Example: "
                           "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)")

    @staticmethod
    def forward(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        """Compute the outputs; override (with or without ``ctx``, see ``setup_context``)."""
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> Any:
        """Optional: save state on ``ctx`` when ``forward`` takes no ``ctx``."""
        return _SETUP_NOT_OVERRIDDEN

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Any) -> Any:
        """Gradients w.r.t. each forward input; may be ``async def``."""
        raise NotImplementedError("You must implement either the backward or vjp method for your custom "
                                  "autograd.Function to use it with backward mode AD.")

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        """Run ``forward`` without recording and connect its outputs to the graph."""
        custom_setup = inspect.getattr_static(cls, "setup_context") is not _BASE_SETUP_CONTEXT
        if custom_setup:
            # setup_context's ``inputs`` include forward's defaults, as PyTorch binds them.
            bound = inspect.signature(cls.forward).bind(*args, **kwargs)
            bound.apply_defaults()
            args, kwargs = bound.args, bound.kwargs
        ctx = cls._backward_cls()
        is_tensor = tuple(isinstance(a, Tensor) for a in args)
        recording = grad_enabled.get() and any(t and a.requires_grad for t, a in zip(is_tensor, args))
        ctx._tensor_inputs = is_tensor
        # As in PyTorch, from the inputs alone, whatever the grad mode.
        ctx.needs_input_grad = tuple(t and a.requires_grad for t, a in zip(is_tensor, args))
        mode = grad_enabled.get()
        grad_enabled.set(False)
        try:
            if custom_setup:
                output = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, output)
            else:
                output = cls.forward(ctx, *args, **kwargs)
        finally:
            grad_enabled.set(mode)
        return _wrap_outputs(ctx, args, output, recording)


_SETUP_NOT_OVERRIDDEN = object()
_BASE_SETUP_CONTEXT = inspect.getattr_static(Function, "setup_context")


def _wrap_outputs(ctx: BackwardCFunction, args: Sequence[Any], output: Any, recording: bool) -> Any:
    """The Function's outputs, connected to ``ctx`` when ``recording`` (``record``)."""
    try:
        single = not isinstance(output, tuple)
        outputs = (output,) if single else output
        dirty = ctx.dirty_tensors
        non_diff = ctx.non_differentiable
        for d in dirty:
            d._bump_version()  # as PyTorch's mark_dirty, recording or not
        if any(all(o is not d for o in outputs) for d in dirty):
            raise RuntimeError("Some elements marked as dirty during the forward method were not returned as "
                               "output. The inputs that are modified inplace must all be outputs of the Function.")
        # An input returned as-is becomes a new tensor viewing it.
        wrapped = [o._alias() if isinstance(o, Tensor) and not _is_in(o, dirty) and _is_in(o, args) else o
                   for o in outputs]
        non_diff = tuple(w for o, w in zip(outputs, wrapped) if _is_in(o, non_diff))  # aliases of marked inputs
        if recording:
            for d in dirty:
                _check_dirty(d, len(outputs))
            if non_diff:
                ctx._non_diff_outputs = frozenset(i for i, o in enumerate(wrapped) if _is_in(o, non_diff))
            record(None, args, {}, None, node=ctx, edges=[_input_edge(a, dirty) for a in args], outputs=wrapped,
                   to_save=ctx.to_save, connect=lambda node: _connect(ctx, wrapped, dirty, non_diff, True))
        else:
            _connect(ctx, wrapped, dirty, non_diff, False)
            ctx._saved = list(ctx.to_save)
        return wrapped[0] if single else tuple(wrapped)
    finally:
        # The outputs point at ctx (their grad_fn); ctx must not point back at
        # them, or every custom Function would leave a reference cycle for the
        # GC: not even when a pack hook raised (non-reentrant checkpoint's
        # early stop does, by design, while it recomputes).
        ctx.to_save = ctx.dirty_tensors = ctx.non_differentiable = ()


def _connect(ctx: BackwardCFunction, outputs: Sequence[Any], dirty: Sequence[Tensor], non_diff: Sequence[Tensor],
             recording: bool) -> None:
    """Give each floating output ``ctx`` as its ``grad_fn`` when recording (a dirty
    view is rebased: Note [CopySlices]); other outputs not marked dirty do not
    require grad."""
    for i, o in enumerate(outputs):
        if not isinstance(o, Tensor):
            continue
        is_dirty = _is_in(o, dirty)
        if recording and _dtype.is_floating_np(o._data.dtype) and not _is_in(o, non_diff):
            if is_dirty and o._base is not None:
                rebase_view(o, o._alias(ctx, i))  # Note [CopySlices]
            else:
                o._connect_function_output(ctx, i)  # Notes [Hooks when grad_fn changes], [Where a view was made]
        elif not is_dirty:
            o._mark_non_differentiable()


def _is_in(t: Any, items: Sequence[Any]) -> bool:
    """Whether ``t`` itself (not an equal tensor) is one of ``items``."""
    for x in items:
        if x is t:
            return True
    return False


def _check_dirty(t: Tensor, n_outputs: int) -> None:
    """Refuse, as an in-place op does, to record a write into a leaf that requires grad or into a view
    where an in-place op may not write (``check_view_write``); and, as PyTorch, a Function that writes
    into a view and returns several outputs."""
    if t._grad_fn is None and t._requires_grad:
        raise RuntimeError("a leaf Variable that requires grad has been used in an in-place operation.")
    if t._base is not None and n_outputs > 1:
        raise RuntimeError(
            "If your Function modifies inplace an input that is a view of another Tensor, your Function cannot "
            "return more than one Tensor. This is not supported by the current autograd engine. You should either "
            "make sure the input is not a view (using .clone() for example) or make your Function only return one "
            "Tensor (potentially splitting it into two Functions: one doing the inplace that returns a single "
            "Tensor and a second one that does the other operations)."
        )
    if t._base is not None:
        check_view_write(t)
        check_recorded_view_write(t)


# Note [Dirty views]
# ~~~~~~~~~~~~~~~~~~
# A view input marked dirty is rebased like a view written by an in-place op
# (Note [CopySlices]): the Function's edge for it is a fresh replay of the view
# on its base's history, so the view's old node (and the hooks on it) is
# bypassed, and the base gets a CopySlices node whose region gradient flows
# through the Function.  PyTorch's CopySlices assumes the dirty view is the
# Function's *first* input and routes the base's gradient into edge 0
# whatever that input is (a Function whose dirty view is its second argument
# gets ``None`` for its first there); agrad routes by the actual input, which
# is the correct gradient, and keeps that difference deliberately.
def _input_edge(a: Any, dirty: Sequence[Tensor]) -> Edge | None:
    """The ctx's edge for forward argument ``a``; see Note [Dirty views]."""
    if not isinstance(a, Tensor) or not a.requires_grad:
        return None
    if a._base is not None and any(a is d for d in dirty):
        fn, nr = a._view_history()
        if fn is not None:
            return Edge(fn, nr)
    return a._gradient_edge()


class _DelayedError(Node):
    """Backward node that raises when reached: marks results of a once_differentiable backward."""

    def apply(self, grads: list[Any], task: Any) -> Any:
        raise RuntimeError("trying to differentiate twice a function that was marked with @once_differentiable")


def once_differentiable(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a ``backward`` that is not itself differentiable.

    It runs without recording; if a ``create_graph`` backward would need to
    differentiate through it, differentiating its results raises instead of
    silently giving wrong higher-order gradients.
    """

    def wrap(ctx: Any, grads: tuple[Any, ...], outputs: Any) -> Any:
        needs = [g for g in grads if isinstance(g, Tensor) and g.requires_grad]
        if not needs or not grad_enabled.get():
            return outputs
        err = _DelayedError()
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        record(None, needs, {}, None, node=err, edges=[g._gradient_edge() for g in needs], outputs=outs)
        res = tuple(o._alias(grad_fn=err, output_nr=i) if isinstance(o, Tensor) else o for i, o in enumerate(outs))
        return res[0] if single else res

    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def async_wrapper(ctx: Any, *grads: Any) -> Any:
            with no_grad():
                outputs = await fn(ctx, *grads)
            return wrap(ctx, grads, outputs)
        return async_wrapper

    @functools.wraps(fn)
    def wrapper(ctx: Any, *grads: Any) -> Any:
        with no_grad():
            outputs = fn(ctx, *grads)
        return wrap(ctx, grads, outputs)
    return wrapper
