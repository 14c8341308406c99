"""Activation checkpointing (mirrors ``torch.utils.checkpoint``): trade compute for memory.

A checkpointed function keeps only its inputs alive through the forward and
recomputes what its backward nodes need when the backward reaches them.  The
two variants of PyTorch, with ``await`` where PyTorch blocks:

* ``use_reentrant=True``: :class:`CheckpointFunction`, a custom Function whose
  forward runs under ``no_grad`` and whose ``async def backward`` recomputes
  under ``enable_grad`` and awaits a nested (reentrant) backward through the
  recomputed graph (Note [Reentrant backward]).
* ``use_reentrant=False``: the forward records its graph as usual, under
  saved-tensor hooks that store a small holder instead of each saved tensor;
  the first unpack in a backward recomputes the function once and hands each
  node its tensor (Notes [Holders, not tensors] and [One recomputation per
  graph task]).
"""

from __future__ import annotations

import contextlib
import threading
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

from agrad import autograd
from agrad._ambient import checkpoint_early_stop, current_graph_task
from agrad._engine._graph_task import GraphTask
from agrad._grad_mode import enable_grad, grad_enabled, no_grad
from agrad._graph._node import SavedTensor
from agrad._graph._saved_hooks import saved_tensors_hooks
from agrad._tensor import Tensor
from agrad.autograd.function import Function
from agrad.random import fork_rng, get_rng_state, set_rng_state

__all__ = [
    "checkpoint", "checkpoint_sequential", "CheckpointError", "CheckpointFunction", "check_backward_validity",
    "detach_variable", "noop_context_fn", "set_checkpoint_early_stop",
]


def detach_variable(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    """Detach each tensor of ``inputs``, keeping its ``requires_grad``; other values pass through."""
    if not isinstance(inputs, tuple):
        raise RuntimeError(
            f"Only tuple of tensors is supported. Got Unsupported input type: {type(inputs).__name__}"
        )
    out = []
    for inp in inputs:
        if isinstance(inp, Tensor):
            x = inp.detach()
            x.requires_grad = inp.requires_grad
            inp = x
        out.append(inp)
    return tuple(out)


def check_backward_validity(inputs: Iterable[Any]) -> None:
    """Warn if no tensor of ``inputs`` requires grad."""
    if not any(inp.requires_grad for inp in inputs if isinstance(inp, Tensor)):
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", stacklevel=2)


def noop_context_fn() -> tuple[AbstractContextManager[Any], AbstractContextManager[Any]]:
    """The default ``context_fn`` of :func:`checkpoint`: two null contexts."""
    return contextlib.nullcontext(), contextlib.nullcontext()


class CheckpointError(RuntimeError):
    """A recomputation did not save the same tensors as the original forward."""


# -- the reentrant variant ---------------------------------------------------------------


class CheckpointFunction(Function):
    """The reentrant checkpoint (``use_reentrant=True``) as a custom Function.

    ``forward(ctx, run_function, preserve_rng_state, *args)`` runs
    ``run_function(*args)`` without recording; its ``async def backward``
    recomputes it with recording on and awaits a nested backward through the
    recomputation (Note [Reentrant backward]), so the outer backward's loop
    keeps running meanwhile.
    """

    @staticmethod
    def forward(ctx: Any, run_function: Callable[..., Any], preserve_rng_state: bool, *args: Any) -> Any:
        check_backward_validity(args)
        ctx.run_function = run_function
        ctx.preserve_rng_state = preserve_rng_state
        if preserve_rng_state:
            ctx.fwd_cpu_state = get_rng_state()
        # Non-tensor inputs stay on ctx; tensors are saved (version-checked).
        ctx.inputs = [None if isinstance(a, Tensor) else a for a in args]
        ctx.tensor_indices = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        ctx.save_for_backward(*(args[i] for i in ctx.tensor_indices))
        with no_grad():
            return run_function(*args)

    @staticmethod
    async def backward(ctx: Any, *args: Any) -> tuple[Any, ...]:
        task = current_graph_task.get()
        if task is not None and task.exec_info is not None:
            raise RuntimeError(
                "When use_reentrant=True, agrad.utils.checkpoint is incompatible"
                " with .grad() or passing an `inputs` parameter to .backward()."
                " To resolve this error, you can either set use_reentrant=False,"
                " or call .backward() without passing the `inputs` argument."
            )
        inputs = list(ctx.inputs)
        for i, tensor in zip(ctx.tensor_indices, ctx.saved_tensors):
            inputs[i] = tensor
        with fork_rng(enabled=ctx.preserve_rng_state):
            if ctx.preserve_rng_state:
                set_rng_state(ctx.fwd_cpu_state)
            detached_inputs = detach_variable(tuple(inputs))
            with enable_grad():
                outputs = ctx.run_function(*detached_inputs)
        if isinstance(outputs, Tensor):
            outputs = (outputs,)
        outputs_with_grad, args_with_grad = [], []
        for out, grad in zip(outputs, args):
            if isinstance(out, Tensor) and out.requires_grad:
                outputs_with_grad.append(out)
                args_with_grad.append(grad)
        if not outputs_with_grad:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
        await autograd.backward(outputs_with_grad, args_with_grad)
        grads = tuple(inp.grad if isinstance(inp, Tensor) else None for inp in detached_inputs)
        return (None, None) + grads


# -- the non-reentrant variant -----------------------------------------------------------

# Note [Holders, not tensors]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# While the checkpointed function runs forward, saved-tensor hooks replace
# every tensor its ops save by a ``_Holder``: a small object carrying the
# tensor's index in its frame (the order of saves).  The graph keeps the
# holders, not the activations, which is the point of checkpointing; the frame
# keeps only weak references to them.  A holder dies with the node that saved
# it (its saved values are released after a backward that does not retain the
# graph), so on recomputation a dead holder tells the frame not to keep that
# tensor: nothing will ask for it again.

# Note [One recomputation per graph task]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The first unpack of one of its holders in a backward runs the function again
# under recording hooks that collect, in order, the tensors its ops save; every
# later unpack in that backward takes its tensor from that list.  The lists are
# keyed by the current GraphTask, weakly: each backward recomputes once, however
# many of the frame's nodes it runs, and two backwards through a retained graph
# (one after the other, or concurrently on one loop) each recompute for
# themselves and never see each other's tensors; a backward's list goes when
# the backward does.  An unpacked tensor leaves the list at once (PyTorch's
# Rule 4 of Note [Nestable Checkpoint]: recomputed tensors are cleared as they
# are unpacked, even with retain_graph=True), so memory drops as the backward
# proceeds, and a second unpack of one holder in one backward is an error.  An
# unpack outside any backward (no graph task) recomputes for itself.

# Note [Recomputation lock]
# ~~~~~~~~~~~~~~~~~~~~~~~~~
# Node kernels may run in executor threads, two at once (Note [Offloaded
# kernels]), so two nodes of one frame may unpack concurrently in the same
# backward.  The frame's lock makes the check-recompute-take sequence atomic:
# the second waits for the first's recomputation and then takes its own
# tensor from it.  The lock is held only by synchronous code (no await), so no
# other task of the same event loop can run, let alone wait for it, while it is
# held; at worst the loop's thread waits for a recomputation that a kernel
# thread is running.  Nested checkpoints take the locks inner first (an inner
# frame's inputs are unpacked from its outer frame during the inner
# recomputation), never the reverse, so they cannot deadlock.


class _Holder:
    """What the graph stores in place of a saved tensor (Note [Holders, not tensors])."""

    __slots__ = ("index", "__weakref__")

    def __init__(self, index: int) -> None:
        self.index = index


class _StopRecomputation(Exception):
    """Raised from the recording hook once every needed tensor is recomputed (early stop)."""


_DEBUG_TIP = (
    "\nTip: the recomputation must run the same operations on tensors of the same shapes and dtypes as the "
    "original forward; look for control flow that depends on data, on global state, or on randomness when "
    "preserve_rng_state=False.\n"
)


def _default_meta(x: Tensor) -> dict[str, Any]:
    return {"shape": x.shape, "dtype": x.dtype, "device": x.device}


_DETERMINISM_CHECKS: dict[str, Callable[[Tensor], Any] | None] = {"default": _default_meta, "none": None}


class _Frame:
    """One call of a non-reentrant checkpoint: its saved inputs, its holders and
    how to recompute it; its ``pack``/``unpack`` are the forward's hooks."""

    def __init__(self, recompute_fn: Callable[..., None], args: Sequence[Any], early_stop: bool,
                 metadata_fn: Callable[[Tensor], Any] | None) -> None:
        self.recompute_fn = recompute_fn
        # Saved as any saved tensor (so under an outer checkpoint's hooks, if any).
        self.saved_args = [SavedTensor(a) if isinstance(a, Tensor) else a for a in args]
        self.early_stop = early_stop
        self.metadata_fn = metadata_fn
        self.holders: list[weakref.ref[_Holder]] = []
        self.metadata: list[Any] = []
        self.recomputed: weakref.WeakKeyDictionary[GraphTask, list[Tensor | None]] = weakref.WeakKeyDictionary()
        self.lock = threading.Lock()  # Note [Recomputation lock]
        self.forward_completed = False
        self.ignore_saved_mismatch = False

    def pack(self, x: Tensor) -> _Holder:
        holder = _Holder(len(self.holders))
        self.holders.append(weakref.ref(holder))
        if self.metadata_fn is not None:
            self.metadata.append(self.metadata_fn(x))
        return holder

    def unpack(self, holder: _Holder) -> Tensor:
        task = current_graph_task.get()
        with self.lock:
            values = self.recomputed.get(task) if task is not None else None
            if values is None:
                values = self._recompute()
                if task is not None:
                    self.recomputed[task] = values
            x = values[holder.index]
            if x is None:
                raise CheckpointError(
                    "agrad.utils.checkpoint: Unpack is being triggered for a tensor that was already unpacked "
                    "once. If you are calling ctx.saved_tensors in backward, make sure to do so only once. "
                    "Otherwise please open an issue with details on your use case."
                )
            values[holder.index] = None
        return x

    def _recompute(self) -> list[Tensor | None]:
        """Run the function again, collecting the tensors its ops save, by index."""
        n = len(self.holders)
        values: list[Tensor | None] = [None] * n
        count = 0

        def pack(x: Tensor) -> Tensor:
            nonlocal count
            index = count
            count += 1
            if x.requires_grad:
                x = x.detach()
            if index >= n:
                if not self.forward_completed:
                    # A backward inside the checkpointed function, early stop off:
                    # the forward has not saved everything yet.
                    self.ignore_saved_mismatch = True
                    return x
                raise CheckpointError(
                    "agrad.utils.checkpoint: trying to save more tensors during recomputation than during the "
                    f"original forward pass.\n{_DEBUG_TIP}"
                )
            if self.holders[index]() is not None:  # else nothing will ask for it again
                values[index] = x
            if self.early_stop and count == n:
                raise _StopRecomputation
            return x

        args = [a.unpack(None) if isinstance(a, SavedTensor) else a for a in self.saved_args]
        with saved_tensors_hooks(pack, _identity), enable_grad():
            try:
                self.recompute_fn(*args)
            except _StopRecomputation:
                pass
        self._check(values, count)
        return values

    def _check(self, values: list[Tensor | None], count: int) -> None:
        if self.ignore_saved_mismatch:
            return
        if count != len(self.holders):
            raise CheckpointError(
                "agrad.utils.checkpoint: A different number of tensors was saved during the original forward "
                f"and recomputation.\nNumber of tensors saved during forward: {len(self.holders)}\n"
                f"Number of tensors saved during recomputation: {count}.\n{_DEBUG_TIP}"
            )
        if self.metadata_fn is None:
            return
        mismatched = ""
        for i, x in enumerate(values):
            if x is not None and self.metadata[i] != self.metadata_fn(x):
                mismatched += (f"tensor at position {i}:\nsaved metadata: {self.metadata[i]}\n"
                               f"recomputed metadata: {self.metadata_fn(x)}\n")
        if mismatched:
            raise CheckpointError(
                "agrad.utils.checkpoint: Recomputed values for the following tensors have different metadata "
                f"than during the forward pass.\n{mismatched}.\n{_DEBUG_TIP}"
            )


def _identity(x: Tensor) -> Tensor:
    return x


@contextlib.contextmanager
def set_checkpoint_early_stop(enable: bool) -> Iterator[None]:
    """Whether non-reentrant checkpoints made in this block stop recomputing early.

    By default (``early_stop=True`` of :func:`checkpoint`) the recomputation
    of a ``use_reentrant=False`` checkpoint stops as soon as every tensor the
    backward needs is recomputed; the rest of the function does not run.
    ``set_checkpoint_early_stop(False)`` makes the recomputations of the
    checkpoints *made* (forward run) in the block run the whole function, as
    PyTorch's does, whatever their ``early_stop`` argument.  The setting lives
    in a context variable: other asyncio tasks are unaffected.

    Example::

        >>> from agrad.utils.checkpoint import checkpoint, set_checkpoint_early_stop
        >>> x = agrad.ones(3, requires_grad=True)
        >>> with set_checkpoint_early_stop(False):
        ...     y = checkpoint(lambda t: t.exp().sin(), x, use_reentrant=False)
        >>> y.sum().backward_sync()
        >>> x.grad
        tensor([-2.4784, -2.4784, -2.4784])
    """
    token = checkpoint_early_stop.set(bool(enable))
    try:
        yield
    finally:
        checkpoint_early_stop.reset(token)


def _checkpoint_without_reentrant(
    function: Callable[..., Any], preserve_rng_state: bool,
    context_fn: Callable[[], tuple[AbstractContextManager[Any], AbstractContextManager[Any]]],
    determinism_check: str, debug: bool, early_stop: bool, args: tuple[Any, ...], kwargs: dict[str, Any],
) -> Any:
    if debug and context_fn is not noop_context_fn:
        raise ValueError("debug=True is incompatible with non-default context_fn")
    if determinism_check not in _DETERMINISM_CHECKS:
        raise ValueError(f"determinism_check should be one of {list(_DETERMINISM_CHECKS)}, "
                         f"but got {determinism_check}")
    forward_context, recompute_context = context_fn()
    fwd_rng_state = get_rng_state() if preserve_rng_state else None

    def recompute_fn(*inputs: Any) -> None:
        with fork_rng(enabled=preserve_rng_state):
            if preserve_rng_state:
                set_rng_state(fwd_rng_state)
            with recompute_context:
                function(*inputs, **kwargs)

    if not grad_enabled.get():
        return function(*args, **kwargs)
    override = checkpoint_early_stop.get()
    frame = _Frame(recompute_fn, args, early_stop if override is None else override,
                   _DETERMINISM_CHECKS[determinism_check])
    completed = False
    with saved_tensors_hooks(frame.pack, frame.unpack), forward_context:
        ret = function(*args, **kwargs)
        completed = True
    if not completed:
        raise RuntimeError(
            "agrad.utils.checkpoint: the forward context provided by context_fn suppressed an exception raised "
            "during the checkpointed forward. This is not supported because checkpoint cannot return a value "
            "for a failed forward."
        )
    frame.forward_completed = True
    return ret


# -- the entry points ----------------------------------------------------------------------


def checkpoint(
    function: Callable[..., Any],
    *args: Any,
    use_reentrant: bool | None = None,
    context_fn: Callable[[], tuple[AbstractContextManager[Any], AbstractContextManager[Any]]] = noop_context_fn,
    determinism_check: str = "default",
    debug: bool = False,
    early_stop: bool = True,
    preserve_rng_state: bool = True,
    **kwargs: Any,
) -> Any:
    r"""Checkpoint a model or part of the model.

    Activation checkpointing trades compute for memory: the tensors
    ``function`` computes are not kept alive until the backward needs them;
    only its inputs are, and the backward recomputes the rest by calling
    ``function`` again.  Use ``use_reentrant=False`` (recommended):

    * ``use_reentrant=False`` records the forward graph as usual but stores a
      small holder instead of each saved tensor; the first backward node that
      needs one recomputes ``function`` once for that backward.  It works with
      ``agrad.autograd.grad``, ``inputs=``, ``retain_graph=True``, keyword
      arguments and ``create_graph=True``.
    * ``use_reentrant=True`` runs ``function`` under ``no_grad`` and, in the
      backward, recomputes it and awaits a nested backward through the
      recomputation.  It supports only ``backward()`` without ``inputs``, and
      at least one input and one output must require grad.

    If ``function`` behaves differently when called again (global state,
    data-dependent control flow), gradients may be wrong or an error raised.

    Args:
        function: what to run in the forward pass; called as
            ``function(*args, **kwargs)``.
        args: the inputs of ``function``.
        use_reentrant: which variant to use; pass it explicitly (a warning is
            issued otherwise, and ``True`` is used, as in PyTorch).
        context_fn: returns two context managers, under which ``function`` and
            its recomputation run respectively (``use_reentrant=False`` only).
        determinism_check: ``"default"`` checks that the recomputed tensors
            have the shapes, dtypes and devices of the original ones;
            ``"none"`` skips the check (``use_reentrant=False`` only).
        debug: accepted for compatibility and ignored: agrad has no operator
            log to print (``use_reentrant=False`` only).
        early_stop: stop the recomputation as soon as every needed tensor is
            recomputed (``use_reentrant=False`` only); overridden by
            :func:`set_checkpoint_early_stop` around the call.
        preserve_rng_state: stash the default generator's state in the forward
            and restore it for the recomputation, so random ops (dropout) draw
            the same numbers; the generator's state outside is left unchanged.
        kwargs: keyword arguments of ``function`` (``use_reentrant=False`` only).

    Returns:
        What ``function(*args, **kwargs)`` returns.

    Example::

        >>> from agrad.utils.checkpoint import checkpoint
        >>> w = agrad.ones(3, 3, requires_grad=True)
        >>> x = agrad.ones(2, 3)
        >>> y = checkpoint(lambda x: (x @ w).tanh(), x, use_reentrant=False)
        >>> y.sum().backward_sync()
        >>> w.grad.shape
        agrad.Size([3, 3])
    """
    if use_reentrant is None:
        warnings.warn(
            "agrad.utils.checkpoint: the use_reentrant parameter should be "
            "passed explicitly. Starting in PyTorch 2.9, calling checkpoint "
            "without use_reentrant will raise an exception. use_reentrant=False is "
            "recommended, but if you need to preserve the current default "
            "behavior, you can pass use_reentrant=True. Refer to docs for more "
            "details on the differences between the two variants.",
            stacklevel=2,
        )
        use_reentrant = True
    if kwargs and use_reentrant:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))
    if use_reentrant:
        if context_fn is not noop_context_fn or debug is not False:
            raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
        return CheckpointFunction.apply(function, preserve_rng_state, *args)
    return _checkpoint_without_reentrant(function, preserve_rng_state, context_fn, determinism_check, debug,
                                         early_stop, args, kwargs)


def checkpoint_sequential(
    functions: Sequence[Callable[[Any], Any]],
    segments: int,
    input: Any,
    use_reentrant: bool | None = None,
    **kwargs: Any,
) -> Any:
    r"""Checkpoint a sequential model to save memory.

    The functions run in order, split into ``segments`` chunks; every chunk
    but the last is checkpointed (only its input is kept for the backward).

    Args:
        functions: the functions (or layers) to run in order, each taking and
            returning one value.
        segments: the number of chunks.
        input: the input of the first function.
        use_reentrant: as for :func:`checkpoint`; pass it explicitly.
        **kwargs: ``preserve_rng_state`` (bool, default ``True``), as for
            :func:`checkpoint`.

    Returns:
        The output of the last function.

    Example::

        >>> from agrad.utils.checkpoint import checkpoint_sequential
        >>> x = agrad.ones(4, requires_grad=True)
        >>> y = checkpoint_sequential([agrad.tanh, agrad.exp, agrad.sin], 2, x, use_reentrant=False)
        >>> y.sum().backward_sync()
        >>> x.grad
        tensor([-0.4860, -0.4860, -0.4860, -0.4860])
    """
    if use_reentrant is None:
        warnings.warn(
            "agrad.utils.checkpoint.checkpoint_sequential: the use_reentrant "
            "parameter should be passed explicitly. "
            "In version 2.9 we will raise an exception if use_reentrant "
            "is not passed. use_reentrant=False is "
            "recommended, but if you need to preserve the current default "
            "behavior, you can pass use_reentrant=True. Refer to docs for more "
            "details on the differences between the two variants.",
            stacklevel=2,
        )
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))

    def run_function(start: int, end: int, functions: Sequence[Callable[[Any], Any]]) -> Callable[[Any], Any]:
        def forward(input: Any) -> Any:
            for j in range(start, end + 1):
                input = functions[j](input)
            return input
        return forward

    functions = list(functions)
    segment_size = len(functions) // segments
    # the last chunk is not checkpointed
    end = -1
    for start in range(0, segment_size * (segments - 1), segment_size):
        end = start + segment_size - 1
        input = checkpoint(run_function(start, end, functions), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve)
    return run_function(end + 1, len(functions) - 1, functions)(input)
