"""In-place writes: ``t.op_(...)`` from an out-of-place op, and the glue that
rebases a view written in place.

:func:`inplace_method` makes the method every ``inplace=`` name of ``defop``
(and every hand-written in-place method, ``_methods``) binds: it checks that
the write is allowed, computes the op out of place, writes the result into
``t``'s memory, bumps ``t``'s version and moves ``t``'s ``grad_fn`` to the new
node.  When ``t`` is a view, the op's input is a fresh replay of the view
(:func:`view_source`) and the base is rebased onto a CopySlices node
(:func:`rebase_view`; Note [CopySlices] in ``_views``, which holds the op).
A custom Function's ``mark_dirty`` uses the same checks and rebase.

:func:`change_view_in_place` is the in-place form of a view op (``t_``,
``squeeze_``...): the same checks, but nothing is written and nothing rebased;
the tensor takes the view's shape instead (Note [In-place view ops] in
``_tensor``).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from agrad import _backends, _dtype
from agrad._grad_mode import grad_enabled
from agrad._graph._node import before_in_place
from agrad._ops._memory import writable_target, write_through
from agrad._ops._record import record
from agrad._ops._schema import REGISTRY
from agrad._tensor import Tensor

__all__ = [
    "change_view_in_place", "check_recorded_view_write", "check_view_write", "inplace_method", "rebase_view",
    "view_source",
]

# A replay step: on arrays, and recorded on tensors (as a view's ``_view_fn``).
Step = tuple[Callable[[Any], Any], Callable[[Tensor], Tensor]]

_ndarray = np.ndarray


def inplace_method(fn: Callable[..., Tensor], name: str) -> Callable[..., Tensor]:
    """The in-place variant ``t.op_(...)``: compute out of place, write into ``t``'s
    memory, bump its version and move its ``grad_fn`` to the new node."""

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        recording = grad_enabled.get()
        if recording and self._grad_fn is None and self._requires_grad:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        self._check_inplace_allowed()  # Note [Inference tensors]; in PyTorch's order of the checks
        base = self._base
        if recording and base is not None:
            self._refresh_view()
            check_view_write(self)
        target = self._data
        if type(target) is _ndarray and not target.flags.writeable:  # Note [Writing into expanded tensors]
            target = writable_target(self, name)
        src = self
        if recording and base is not None:
            src = view_source(self)  # Note [CopySlices]
        elif recording:
            # The new node may save the *old* value of self; give it its own copy,
            # with self's place in the graph, since self's memory is overwritten below.
            with _backends.on(self.device):
                src = self._stand_in(self._data.copy())
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
            rebase_view(self, result)
        elif result._grad_fn is not None:
            self._set_grad_fn(result._grad_fn, result._output_nr)  # Note [Hooks when grad_fn changes]
        return self

    method.__name__ = name
    method.__doc__ = f"In-place version of :meth:`Tensor.{fn.__name__}`."
    method.__signature__ = _method_signature(fn)  # type: ignore[attr-defined]
    return method


def _method_signature(fn: Callable[..., Tensor]) -> inspect.Signature:
    """``fn``'s signature as a method's: its first parameter, the tensor written
    into, named ``self`` (for ``help()``, IDEs and the API reference)."""
    signature = inspect.signature(fn)
    params = list(signature.parameters.values())
    if params and params[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD:
        params[0] = params[0].replace(name="self")
    else:
        params.insert(0, inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY))
    return signature.replace(parameters=params)


def change_view_in_place(self: Tensor, step: Step, undo: Step) -> Tensor:
    """``self`` changed in place by a view op: ``step`` is the op (its tensor form
    the recorded in-place entry, TBackward1...), ``undo`` its inverse.

    Refused where any in-place op is (a leaf that requires grad, an inference
    tensor, a view of such a leaf or a multi-output view, a view made in
    no_grad mode); then ``self`` takes the array and node of ``step`` applied
    to it and its version is bumped, so values saved from it before are
    stale, as in PyTorch.  Returns ``self``.  See Note [In-place view ops]."""
    recording = grad_enabled.get()
    if recording and self._grad_fn is None and self._requires_grad:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    self._check_inplace_allowed()  # Note [Inference tensors]
    base = self._base
    if recording and base is not None:
        self._refresh_view()
        check_view_write(self)
    src = self
    if recording and base is not None and self._grad_fn is None:
        # A view made in no_grad mode has no grad_fn of its own: the op's input is
        # its replay on the base's history, as ``view_source`` gives any in-place
        # op, so that the check below refuses it as PyTorch does.
        src = Tensor._make(self._data, *self._view_history())
    result = step[1](src)  # validates the arguments before anything changes
    if recording and base is not None and result._grad_fn is not None:
        check_recorded_view_write(self)
    mutating = before_in_place.get()
    if mutating is not None:
        mutating(self)  # Note [Mutation of saved tensors]
    self._bump_version()
    self._change_geometry(result._data, result._grad_fn, result._output_nr, step, undo)
    return self


def rebase_view(view: Tensor, value: Tensor) -> None:
    """After ``value`` was written in place into ``view``: give the base a
    CopySlices ``grad_fn`` and re-derive the view's.  See Note [CopySlices]."""
    base = view._base
    assert base is not None
    history = base._stand_in(base._data)
    node = record(REGISTRY["copy_slices"], (history, value), {"view": view._view_fn}, Tensor._make(base._data))
    base._set_grad_fn(node, 0)  # Note [Hooks when grad_fn changes]
    view._regenerate_view()


def check_view_write(view: Tensor) -> None:
    """Refuse a recorded in-place write into ``view`` (an op's or a custom
    Function's) where PyTorch does: a view of a leaf that requires grad, or an
    output of an op that returns several views (Note [Multi-output views])."""
    base = view._base
    if base is not None and base._grad_fn is None and base._requires_grad and view._creation != "no_grad":
        raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place operation.")
    if view._multi_output is not None:
        raise RuntimeError(
            f"{view._multi_output} is a view and is being modified inplace. This view is the output of a function "
            "that returns multiple views. Such functions do not allow the output views to be modified inplace. "
            "You should replace the inplace operation by an out-of-place one."
        )


# Note [Where a view was made]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch's CreationMeta, for the cases agrad refuses here: a view made while
# grad mode was off (``_creation == "no_grad"``) recorded no link to its base's
# history, and a view returned by a custom Function (``"custom_function"``, set
# by ``_wrap_outputs``, in its ``_connect``) has that Function's node as its
# grad_fn, which a CopySlices rebase would silently bypass.  Views of them inherit the mark
# (``_make_view``; a view made in no_grad mode is "no_grad" whatever its
# source).  An in-place write into such a view is refused when it would be
# recorded (grad mode on and the result requires grad); inside no_grad, or
# when nothing requires grad, it is allowed.  The check runs once the op's
# out-of-place result is known, before anything is written.
def check_recorded_view_write(view: Tensor) -> None:
    """Refuse a recorded in-place write into a view made in no_grad mode or by a
    custom Function; see Note [Where a view was made]."""
    creation = view._creation
    if creation == "no_grad":
        raise RuntimeError(
            "A view was created in no_grad mode and is being modified inplace with grad mode enabled. Given that "
            "this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by moving both "
            "the view and the inplace either both inside the no_grad block (if you don't want the inplace to be "
            "tracked) or both outside (if you want the inplace to be tracked)."
        )
    if creation == "custom_function":
        op = re.sub(r"Backward\d*$", "", view._grad_fn.name()) if view._grad_fn is not None else "a custom Function"
        raise RuntimeError(
            f"Output {view._output_nr} of {op} is a view and is being modified inplace. This view was created "
            "inside a custom Function (or because an input was returned as-is) and the autograd logic to handle "
            "view+inplace would override the custom backward associated with the custom Function, leading to "
            "incorrect gradients. This behavior is forbidden. You can fix this by cloning the output of the "
            "custom Function."
        )


def view_source(view: Tensor) -> Tensor:
    """The input of an in-place op on ``view``: a copy of its values (the op may
    save them; the write overwrites them) on a fresh replay of the view on its
    base's history.  See Note [CopySlices]."""
    with _backends.on(view.device):
        data = view._data.copy()
    return Tensor._make(data, *view._view_history())
