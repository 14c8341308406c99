"""The Tensor: a numpy array plus PyTorch's autograd metadata.

Ops are not defined here: each entry of the op table (``agrad/_ops/``)
attaches its own methods and operators to :class:`Tensor`, so adding an op is
one entry.  This module holds the data, the autograd state (``requires_grad``,
``grad``, ``grad_fn``, ``output_nr``, the version counter, hooks) and the
conversions.
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from agrad import _dtype
from agrad._backends import device_of
from agrad._device import CPU, device
from agrad._grad_mode import grad_enabled, inference_enabled
from agrad._graph._hooks import RemovableHandle, _add_hook
from agrad._size import Size, size_of

if TYPE_CHECKING:
    from agrad._graph._node import AccumulateGrad, Node

__all__ = ["Tensor"]

_ndarray = np.ndarray


# Note [Inference tensors]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# As in PyTorch, a tensor created under ``inference_mode()`` (by a factory or
# by an op that is not a view of a normal tensor) is an *inference tensor*: it
# has no version counter (``_version`` raises), it cannot be saved for
# backward, written in place or set to require grad outside inference mode.
# agrad marks one by the *type* of its version counter: an InferenceCounter,
# which views share as they share any counter, so views of an inference tensor
# are inference tensors (untracked by autograd, as in PyTorch) and views of a
# normal tensor made in inference mode are normal.  No per-tensor field is
# added, and the recording path pays one type check per saved tensor.  Its
# count still moves (in-place writes inside inference mode) but nothing reads
# it: nothing saved ever holds an inference tensor.  Ops mark their results
# only when they do not record (``_ops/_dispatch.apply``), so under
# ``enable_grad()`` nested in ``inference_mode()`` agrad records a graph of
# normal tensors where PyTorch records nothing: a deliberate difference that
# keeps the mode check off the recording path.  Another: an in-place write
# refused outside inference mode leaves the data as it was (PyTorch has
# written it when it raises).
class InferenceCounter(list):
    """The version counter of an inference tensor (Note [Inference tensors])."""

    __slots__ = ()


def mark_inference(t: "Tensor") -> "Tensor":
    """Make ``t`` (a fresh, non-view tensor) an inference tensor if inference mode is on."""
    if inference_enabled.get():
        t._version_counter = InferenceCounter([0])
    return t


class Tensor:
    """A multi-dimensional array that records the operations applied to it.

    Create tensors with :func:`agrad.tensor` and the other factories.  Leaves
    created with ``requires_grad=True`` accumulate gradients into ``.grad``
    when a backward reaches them; results of recorded ops carry the Node that
    made them in ``grad_fn``.
    """

    __slots__ = (
        "_data", "_requires_grad", "_grad", "_grad_fn", "_output_nr", "_version_counter",
        "_accumulator", "_hooks", "_post_acc_hooks", "_retains_grad", "_base", "_view_fn", "_view_version",
        "_multi_output", "_creation", "_reshapes", "__weakref__",
    )
    _data: Any  # a numpy (or CuPy) array
    _requires_grad: bool
    _grad: Tensor | None
    _grad_fn: Node | None
    _output_nr: int
    _version_counter: list[int]  # shared by aliases (PyTorch's VariableVersion)
    _accumulator: weakref.ref[AccumulateGrad] | None
    _hooks: dict[int, Callable[[Tensor], Tensor | None]] | None
    _post_acc_hooks: dict[int, Callable[[Tensor], None]] | None
    _retains_grad: bool
    # Views only (Note [View grad_fn regeneration]):
    _base: Tensor | None
    # Replays the view ops from the base: on arrays, and recorded on tensors.
    _view_fn: tuple[Callable[[Any], Any], Callable[[Tensor], Tensor]]
    _view_version: int
    _multi_output: str | None  # "Output <i> of <Op>" (Note [Multi-output views])
    _creation: str | None  # Note [Where a view was made]
    # Non-views only, and only once changed by an in-place view op: (version, undo)
    # per change, undo a ``_view_fn``-like pair back to the old geometry
    # (Note [In-place view ops]).
    _reshapes: tuple[tuple[int, tuple[Callable[[Any], Any], Callable[[Tensor], Tensor]]], ...]

    # numpy must defer to our reflected operators (ndarray * Tensor -> Tensor.__rmul__).
    __array_priority__ = 1000

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("use agrad.tensor(data) or a factory such as agrad.zeros() to create a Tensor")

    @classmethod
    def _make(cls, data: np.ndarray, grad_fn: "Node | None" = None, output_nr: int = 0,
              version_counter: list[int] | None = None) -> "Tensor":
        """Wrap an array without copying.  The hot constructor: keep it lean."""
        t = object.__new__(cls)
        t._data = data
        t._requires_grad = False
        t._grad = None
        t._grad_fn = grad_fn
        t._output_nr = output_nr
        t._version_counter = [0] if version_counter is None else version_counter
        t._accumulator = None
        t._hooks = None
        t._post_acc_hooks = None
        t._retains_grad = False
        t._base = None  # _view_fn, _view_version, _multi_output and _creation are set only on views
        return t

    @classmethod
    def _make_leaf(cls, data: Any, version_counter: list[int], accumulator: "AccumulateGrad") -> "Tensor":
        """A leaf that requires grad and whose gradient goes to ``accumulator``, another
        leaf's AccumulateGrad (a saved tensor unpacked by a hook takes its leaf's place).

        Keeps a leaf's ``_accumulator`` a weak reference: whoever needs the node
        alive holds it (here the saved tensor, as PyTorch's SavedVariable does).
        """
        t = cls._make(data, version_counter=version_counter)
        t._requires_grad = True
        t._accumulator = weakref.ref(accumulator)
        return t

    def _alias(self, grad_fn: "Node | None" = None, output_nr: int = 0) -> "Tensor":
        """A tensor sharing this one's data and version counter (not its graph)."""
        return Tensor._make(self._data, grad_fn, output_nr, self._version_counter)

    def _stand_in(self, data: Any) -> "Tensor":
        """A new tensor holding ``data`` that takes this tensor's place in the graph:
        its ``grad_fn`` and ``output_nr``, or, for a leaf, its ``requires_grad``
        and its AccumulateGrad, so a gradient routed through the new tensor
        reaches what this one's would.  Not a view, and with a version counter of
        its own (an in-place op's input copy, a CopySlices' base history).
        """
        t = Tensor._make(data, self._grad_fn, self._output_nr)
        t._requires_grad = self._requires_grad
        t._accumulator = self._accumulator
        return t

    # -- array facts -------------------------------------------------------
    @property
    def shape(self) -> Size:
        return size_of(self._data.shape)

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def dtype(self) -> _dtype.dtype:
        return _dtype._FROM_NP[self._data.dtype]

    @property
    def device(self) -> device:
        """Where the data lives; see Note [Devices come from arrays]."""
        return CPU if type(self._data) is _ndarray else device_of(self._data)

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def is_cpu(self) -> bool:
        return type(self._data) is _ndarray

    def size(self, dim: int | None = None) -> Any:
        return size_of(self._data.shape) if dim is None else self._data.shape[dim]

    def dim(self) -> int:
        return self._data.ndim

    def numel(self) -> int:
        return int(self._data.size)

    def element_size(self) -> int:
        return self._data.itemsize

    def data_ptr(self) -> int:
        """The address of the first element; a view's points into its base's
        memory at its offset, as in PyTorch (0 for an empty tensor)."""
        data = self._data
        if not data.size:
            return 0
        return data.ctypes.data if type(data) is _ndarray else int(data.data.ptr)

    def is_floating_point(self) -> bool:
        return _dtype.is_floating_np(self._data.dtype)

    def __len__(self) -> int:
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self) -> Any:
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._data.shape[0]))

    # -- conversions -------------------------------------------------------
    def numpy(self, *, force: bool = False) -> np.ndarray:
        """Return the underlying numpy array (shared memory, as in PyTorch).

        With ``force=True`` a tensor that requires grad or lives on another
        device is converted too (copied to the host), as in PyTorch.
        """
        if type(self._data) is not _ndarray:
            if not force:
                raise TypeError(
                    f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to copy "
                    "the tensor to host memory first."
                )
            from agrad._backends import transfer
            return transfer(self._data, CPU)
        if self.requires_grad and not force and grad_enabled.get():  # allowed under no_grad, as in PyTorch
            raise RuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead."
            )
        return self._data

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        arr = self.numpy()
        if dtype is not None and np.dtype(dtype) != arr.dtype:
            return arr.astype(dtype)
        return arr.copy() if copy else arr

    def item(self) -> Any:
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted to Scalar")
        return self._data.reshape(()).item()

    def tolist(self) -> Any:
        return self._data.tolist()

    def __bool__(self) -> bool:
        if self._data.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self._data.reshape(()))

    def __float__(self) -> float:
        return float(self._scalar())

    def __int__(self) -> int:
        return int(self._scalar())

    def _scalar(self) -> Any:
        """The one element for ``float()``/``int()``: ``ValueError`` where ``item()`` raises ``RuntimeError``."""
        if self._data.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return self.item()

    def __index__(self) -> int:
        if self._data.dtype.kind not in "iub" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        from agrad._repr import tensor_repr
        return tensor_repr(self)

    # -- copying -------------------------------------------------------------
    # Note [Pickling tensors]
    # ~~~~~~~~~~~~~~~~~~~~~~~
    # As PyTorch's ``Tensor.__reduce_ex__``: a pickle holds the data (a view's
    # own elements; it does not share memory with anything once loaded), the
    # dtype and ``requires_grad``, nothing of the graph: ``grad``, ``grad_fn``
    # and hooks are dropped, so a non-leaf that requires grad loads as a leaf
    # that requires grad.  ``copy.deepcopy`` is PyTorch's too: leaves only, and
    # ``.grad`` is copied along.
    def __reduce_ex__(self, protocol: Any) -> tuple[Any, ...]:
        return _rebuild_tensor, (self._data, self.requires_grad)

    def __deepcopy__(self, memo: dict[int, Any]) -> "Tensor":
        if self._grad_fn is not None:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol at the "
                "moment.  If you were attempting to deepcopy a module, this may be because of a "
                "torch.nn.utils.weight_norm usage, see https://github.com/pytorch/pytorch/pull/103001"
            )
        if id(self) in memo:
            return memo[id(self)]
        new = _rebuild_tensor(self._data.copy(), self._requires_grad)
        memo[id(self)] = new
        if self._grad is not None:
            new._grad = self._grad.__deepcopy__(memo)
        return new

    # -- autograd state ----------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        return self._requires_grad or self._grad_fn is not None

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    @requires_grad.deleter
    def requires_grad(self) -> None:
        raise RuntimeError("requires_grad must be a bool")  # PyTorch's words for ``del t.requires_grad``

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        """Set whether autograd records operations on this leaf (in place)."""
        if self._grad_fn is not None:
            if requires_grad:
                return self
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use a "
                "computed variable in a subgraph that doesn't require differentiation use "
                "var_no_grad = var.detach()."
            )
        if requires_grad and not _dtype.is_floating_np(self._data.dtype):
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        if requires_grad and type(self._version_counter) is InferenceCounter and not inference_enabled.get():
            raise RuntimeError("Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.")
        self._requires_grad = bool(requires_grad)
        return self

    @property
    def is_leaf(self) -> bool:
        return self._grad_fn is None

    @property
    def grad_fn(self) -> "Node | None":
        if self._base is not None:
            self._refresh_view()
        return self._grad_fn

    # -- views ---------------------------------------------------------------
    def _is_view(self) -> bool:
        """Whether this tensor is a view sharing memory with ``_base``."""
        return self._base is not None

    def _become_view(self, src: "Tensor", view_fn: tuple[Callable[[Any], Any], Callable[["Tensor"], "Tensor"]]) -> None:
        """Make this fresh tensor, whose array is a view of ``src``'s, a view of ``src``'s base
        (``_ops/_dispatch``).  ``view_fn`` replays the view op(s) from the base: on
        arrays, and recorded on tensors (Note [View grad_fn regeneration]).

        Keeps the view invariants: ``_base`` is never itself a view; a view
        shares its base's version counter; ``_view_version`` is the version its
        ``grad_fn`` was derived at; the multi-output mark is inherited from a
        view source (Note [Multi-output views]) and the creation mark too, unless
        grad mode is off now (Note [Where a view was made]).
        """
        if src._base is not None:
            self._base = src._base
            self._multi_output = src._multi_output
            creation = src._creation
        else:
            self._base = src
            self._multi_output = None
            creation = None
        self._version_counter = src._version_counter
        self._view_fn = view_fn
        if src._base is not None and src._view_version != src._version_counter[0]:
            # view_fn extends src's, which may predate a change of the base's
            # geometry (Note [In-place view ops]).
            self._view_version = src._view_version
            self._follow_base_geometry()
        self._view_version = src._version_counter[0]
        self._creation = "no_grad" if not grad_enabled.get() else creation

    def _mark_multi_output(self, label: str) -> None:
        """Mark this view as ``label`` ("Output <i> of <Op>"), one of several views an op
        returned: recorded in-place writes into it, or into views of it (which
        inherit the mark), are refused (Note [Multi-output views])."""
        self._multi_output = label

    # Note [View grad_fn regeneration]
    # ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    # A view shares memory and the version counter with its base.  When the
    # base (or another view of it) is modified in place, the view's values
    # change but its grad_fn still describes the old history.  As PyTorch does,
    # the view remembers the version it was last connected at and, when that
    # is stale, re-derives its grad_fn by replaying its view op(s) on the base
    # (``_view_fn``), so gradients flow through the base's current history.
    def _refresh_view(self) -> None:
        if self._view_version == self._version_counter[0]:
            return
        self._regenerate_view()

    def _regenerate_view(self) -> None:
        """Re-derive this view's ``grad_fn`` from its base's history now, whatever the
        version says: after a rebase gave the base a new history (Note [CopySlices]).

        Keeps ``_view_fn`` a replay from the base's current geometry first
        (Note [In-place view ops]), then marks the view current."""
        self._follow_base_geometry()
        self._view_version = self._version_counter[0]
        assert self._base is not None  # only views regenerate
        if self._base.requires_grad:
            self._set_grad_fn(*self._view_history())

    def _view_history(self) -> tuple["Node | None", int]:
        """``(grad_fn, output_nr)`` of this view's op(s) replayed on its base's current history."""
        base = self._base
        assert base is not None  # only views have a history to replay
        if not base.requires_grad:
            return self._grad_fn, self._output_nr
        from agrad._grad_mode import enable_grad
        with enable_grad():
            fresh = self._view_fn[1](base)
        return fresh._grad_fn, fresh._output_nr

    # Note [In-place view ops]
    # ~~~~~~~~~~~~~~~~~~~~~~~~
    # ``t_``, ``transpose_``, ``squeeze_``, ``unsqueeze_`` (``_inplace.
    # change_view_in_place``) give a tensor a new shape over the same memory
    # (same first element: they only permute dimensions or add/drop ones of
    # size 1), bump its version and, when recorded, a new grad_fn (TBackward1
    # ...): the tensor takes the array and node of the op's out-of-place form
    # applied to it (``_change_geometry``).  Two kinds of replay must follow:
    #
    # * the tensor's own, if it is a view: its ``_view_fn`` is extended by the
    #   op, so a later rebase or regeneration replays the new shape;
    # * those of views made *of* it earlier, if it is a base: their ``_view_fn``
    #   replays from the base's old geometry.  The base does not know its views,
    #   so it logs the change instead, ``_reshapes``: (version after the change,
    #   undo), undo mapping the new geometry back to the old (on arrays and
    #   recorded, as ``_view_fn``).  A view's ``_view_fn`` replays from the base's
    #   geometry as of ``_view_version``; each write of ``_view_version``
    #   (``_become_view``, ``_regenerate_view``) first prefixes the undos of the
    #   changes logged after it (``_follow_base_geometry``), as PyTorch's
    #   as_strided replay, which addresses storage, needs no such step.
    # A detached alias shares the version counter but not the geometry: its
    # log is its own, as is every base's.
    def _follow_base_geometry(self) -> None:
        """Make this view's ``_view_fn`` replay from its base's current geometry, given
        that it replays from the geometry as of ``_view_version`` (Note [In-place view ops])."""
        base = self._base
        assert base is not None  # only views replay
        since = self._view_version
        undos = [undo for version, undo in getattr(base, "_reshapes", ()) if version > since]
        if not undos:
            return
        undos.reverse()  # the latest change is undone first
        view_np, view_t = self._view_fn

        def replay_np(arr: Any) -> Any:
            for undo_np, _ in undos:
                arr = undo_np(arr)
            return view_np(arr)

        def replay_t(t: "Tensor") -> "Tensor":
            for _, undo_t in undos:
                t = undo_t(t)
            return view_t(t)

        self._view_fn = (replay_np, replay_t)

    def _change_geometry(self, data: Any, grad_fn: "Node | None", output_nr: int,
                         step: tuple[Callable[[Any], Any], Callable[["Tensor"], "Tensor"]],
                         undo: tuple[Callable[[Any], Any], Callable[["Tensor"], "Tensor"]]) -> None:
        """Make this tensor, whose version an in-place view op has just bumped, hold
        ``data`` (its own memory in the new shape) and, if the op was recorded,
        ``grad_fn``; ``step`` is the op and ``undo`` its inverse, on arrays and
        recorded.  Keeps the replays right: a view's ``_view_fn`` is extended by
        ``step``, a base logs ``undo`` for its existing views (Note [In-place view ops])."""
        self._data = data
        if grad_fn is not None:
            self._set_grad_fn(grad_fn, output_nr)  # Note [Hooks when grad_fn changes]
        if self._base is None:
            self._reshapes = getattr(self, "_reshapes", ()) + ((self._version_counter[0], undo),)
            return
        self._follow_base_geometry()
        view_np, view_t = self._view_fn
        step_np, step_t = step
        self._view_fn = (lambda arr: step_np(view_np(arr)), lambda t: step_t(view_t(t)))
        self._view_version = self._version_counter[0]
        if grad_fn is None and self._base.requires_grad:  # not recorded (no_grad): re-derive in the new shape
            self._set_grad_fn(*self._view_history())

    # Note [Hooks when grad_fn changes]
    # ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    # An in-place op, a custom Function's mark_dirty or a view's regeneration
    # gives a tensor a new grad_fn.  As PyTorch's
    # ``update_tensor_hooks_on_new_gradfn``: hooks registered before stay on
    # the old node (they fire only if a backward still runs it, with the
    # gradient of the old value; for a view modified in place nothing runs it,
    # since CopySlices bypasses it: Note [CopySlices]), hooks registered after
    # go to the new node, and ``retain_grad()`` moves to the new node.
    def _set_grad_fn(self, node: "Node | None", output_nr: int) -> None:
        """Point this tensor at a new ``grad_fn``; see Note [Hooks when grad_fn changes]."""
        old, old_nr = self._grad_fn, self._output_nr
        self._grad_fn, self._output_nr = node, output_nr
        if self._retains_grad:
            self._retains_grad = False
            if old is not None:
                old._stop_retaining_grad(old_nr)
            if node is not None:
                self.retain_grad()

    def _become_output(self, node: "Node") -> None:
        """Make this fresh result of a recorded op output 0 of ``node``, the op's new node
        (``_ops/_record.record``).  Only for a tensor with no ``grad_fn`` yet, so no
        hooks or ``retain_grad`` to move (Note [Hooks when grad_fn changes]): the
        one store ``_set_grad_fn`` would do, at the cost of one call per recorded op.
        """
        self._grad_fn = node

    def _connect_function_output(self, node: "Node", output_nr: int) -> None:
        """Make this tensor output ``output_nr`` of a custom Function's ``node``
        (``autograd.function._connect``), hooks and ``retain_grad`` moving as for
        any new ``grad_fn`` (Note [Hooks when grad_fn changes]).  A view so
        connected is marked "custom_function": a recorded in-place write into it
        would bypass the Function's backward and is refused (Note [Where a view
        was made])."""
        self._set_grad_fn(node, output_nr)
        if self._base is not None:
            self._creation = "custom_function"

    def _mark_non_differentiable(self) -> None:
        """Clear the leaf flag ``requires_grad`` of a custom Function's output that is not
        differentiable (``autograd.function._connect``).  Unlike PyTorch's
        ``detach_()`` it leaves a ``grad_fn`` the tensor already had, and unlike
        ``requires_grad_(False)`` it does not refuse a non-leaf."""
        self._requires_grad = False

    @property
    def output_nr(self) -> int:
        return self._output_nr

    @property
    def _version(self) -> int:
        if type(self._version_counter) is InferenceCounter:
            raise RuntimeError("Inference tensors do not track version counter.")
        return self._version_counter[0]

    def is_inference(self) -> bool:
        """Whether this is an inference tensor (Note [Inference tensors])."""
        return type(self._version_counter) is InferenceCounter

    def _check_inplace_allowed(self) -> None:
        """Refuse an in-place write into an inference tensor outside inference mode."""
        if type(self._version_counter) is InferenceCounter and not inference_enabled.get():
            raise RuntimeError(
                "Inplace update to inference tensor outside InferenceMode is not allowed.You can make a clone to "
                "get a normal tensor before doing inplace update.See https://github.com/pytorch/rfcs/pull/17 for "
                "more details."
            )

    def _bump_version(self) -> None:
        self._version_counter[0] += 1

    @property
    def retains_grad(self) -> bool:
        return self._retains_grad

    @property
    def grad(self) -> "Tensor | None":
        if self._grad_fn is not None and not self._retains_grad and self._grad is None:
            warnings.warn(
                "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its "
                ".grad attribute won't be populated during autograd.backward(). If you indeed want "
                "the .grad field to be populated for a non-leaf Tensor, use .retain_grad() on the "
                "non-leaf Tensor. If you access the non-leaf Tensor by mistake, make sure you access "
                "the leaf Tensor instead.",
                UserWarning,
                stacklevel=2,
            )
        return self._grad

    @grad.setter
    def grad(self, value: "Tensor | None") -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type "
                                f"{type(value).__name__}")
            if value is self:
                raise RuntimeError("can't assign Variable as its own grad")
            if value.shape != self.shape:
                raise RuntimeError(
                    f"attempting to assign a gradient of size '{list(value.shape)}' to a tensor of "
                    f"size '{list(self.shape)}'. Please ensure that the gradient and the tensor are "
                    "the same size"
                )
            if value.dtype is not self.dtype:
                raise RuntimeError(  # agrad has no grad_dtype: it is always the tensor's dtype
                    f"attempting to assign a gradient with dtype '{_dtype.CPP_TYPE_NAMES[value.dtype.name]}' to a "
                    f"tensor with grad_dtype '{_dtype.SCALAR_TYPE_NAMES[self.dtype.name]}'. The gradient must match "
                    "the tensor's grad_dtype (defaults to the tensor's dtype)."
                )
        self._grad = value

    @grad.deleter
    def grad(self) -> None:
        self._grad = None

    def _commit_grad(self, value: "Tensor | None") -> None:
        """Set ``.grad`` as a backward's commit, or the rollback of a reentrant one,
        does (``_engine/_staged_grads``), without the public setter's checks.

        The engine keeps what those checks guard: ``value`` is None or a
        gradient it conformed to this tensor's shape, dtype and device, and it
        writes only inside its commit or rollback (Note [Staged gradients]).
        """
        self._grad = value

    @property
    def data(self) -> "Tensor":
        """A tensor sharing this one's data, detached from the graph."""
        return self.detach()

    @data.setter
    def data(self, value: "Tensor") -> None:
        if not isinstance(value, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(value).__name__}")
        if self.requires_grad and not _dtype.is_floating_np(value._data.dtype):
            raise RuntimeError("data set to a tensor that requires gradients must be floating point or complex dtype")
        self._data = value._data

    @data.deleter
    def data(self) -> None:
        raise RuntimeError("Deleting tensor data is not allowed. Delete tensor instead!")

    def detach(self) -> "Tensor":
        """A new tensor sharing data and version counter, outside the graph."""
        return self._alias()

    def detach_(self) -> "Tensor":
        """Detach this tensor from the graph in place, making it a leaf (not for views)."""
        if self._base is not None:
            # PyTorch's message goes on about DDP's bucket views, which agrad has not.
            raise RuntimeError("Can't detach views in-place. Use detach() instead.")
        self._grad_fn = None
        self._output_nr = 0
        self._requires_grad = False
        return self

    def retain_grad(self) -> None:
        """Keep ``.grad`` for this non-leaf tensor during backward (no-op on leaves)."""
        if self._base is not None:
            self._refresh_view()  # retain the current history's gradient (Note [View grad_fn regeneration])
        if self._grad_fn is None:
            if not self._requires_grad:
                raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
            return
        if self._retains_grad:
            return
        self._grad_fn._retain_grad_for(self._output_nr, self)
        self._retains_grad = True

    def register_hook(self, hook: Callable[["Tensor"], "Tensor | None"]) -> RemovableHandle:
        """Register ``hook(grad) -> Tensor | None``, called with this tensor's gradient.

        A returned tensor replaces the gradient for the rest of the backward.
        On a leaf the hook runs before the gradient is accumulated.
        """
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self._base is not None:
            self._refresh_view()  # hook the current history (Note [Hooks when grad_fn changes])
        if self._grad_fn is None:
            return _add_hook(self._leaf_hooks(), hook)
        return _add_hook(self._grad_fn._tensor_hooks(self._output_nr), hook)

    def register_post_accumulate_grad_hook(self, hook: Callable[["Tensor"], None]) -> RemovableHandle:
        """Register ``hook(tensor)``, called after ``.grad`` of this leaf was updated."""
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self._grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        if self._post_acc_hooks is None:
            self._post_acc_hooks = {}
        return _add_hook(self._post_acc_hooks, hook)

    def _leaf_hooks(self) -> dict[int, Callable]:
        if self._hooks is None:
            self._hooks = {}
            acc = self._accumulator() if self._accumulator is not None else None
            if acc is not None:
                acc._share_leaf_hooks(self._hooks)
        return self._hooks

    def _grad_accumulator(self) -> "AccumulateGrad":
        """This leaf's AccumulateGrad node, created on first use and cached weakly."""
        acc = self._accumulator() if self._accumulator is not None else None
        if acc is None:
            from agrad._graph._node import AccumulateGrad
            acc = AccumulateGrad(self)
            self._accumulator = weakref.ref(acc)
        return acc

    def _gradient_edge(self) -> Any:
        from agrad._graph._node import Edge
        if self._base is not None:
            self._refresh_view()
        if self._grad_fn is not None:
            return Edge(self._grad_fn, self._output_nr)
        return Edge(self._grad_accumulator(), 0)

    # -- backward ----------------------------------------------------------
    async def backward(self, gradient: "Tensor | None" = None, retain_graph: bool | None = None,
                       create_graph: bool = False, inputs: Any = None) -> None:
        """Compute the gradient of this tensor w.r.t. graph leaves; awaitable.

        Same arguments and semantics as ``torch.Tensor.backward``.  Leaf
        gradients are committed to ``.grad`` only when the whole backward
        succeeds; see :func:`agrad.autograd.backward`.
        """
        from agrad.autograd import backward
        await backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    def backward_sync(self, gradient: "Tensor | None" = None, retain_graph: bool | None = None,
                      create_graph: bool = False, inputs: Any = None) -> None:
        """Blocking twin of :meth:`backward`, callable from any thread."""
        from agrad.autograd import backward_sync
        backward_sync(self, gradient, retain_graph, create_graph, inputs=inputs)

    # -- methods the op table binds (generated by agrad._ops._stubgen; do not edit) --
    if TYPE_CHECKING:
        @property
        def T(self) -> Tensor: ...
        def __abs__(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def __add__(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def __eq__(self, *args: Any, **kwargs: Any) -> Tensor: ...  # type: ignore[override]  # elementwise, as in PyTorch
        def __ge__(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def __getitem__(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def __gt__(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def __iadd__(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def __imul__(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def __invert__(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def __ipow__(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def __isub__(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def __itruediv__(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def __le__(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def __lt__(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def __matmul__(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def __mul__(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def __ne__(self, *args: Any, **kwargs: Any) -> Tensor: ...  # type: ignore[override]  # elementwise, as in PyTorch
        def __neg__(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def __pow__(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def __radd__(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def __rmatmul__(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def __rmul__(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def __rpow__(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def __rsub__(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def __rtruediv__(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def __setitem__(self, *args: Any, **kwargs: Any) -> Any: ...
        def __sub__(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def __truediv__(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def _index_put_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def abs(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def abs_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def absolute(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def absolute_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def add(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def add_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def addmm(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def all(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def allclose(self, *args: Any, **kwargs: Any) -> Any: ...
        def amax(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def amin(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def any(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def argmax(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def argmin(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def argsort(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def bitwise_not(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def bitwise_not_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def bmm(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def bool(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def broadcast_to(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def ceil(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def ceil_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def chunk(self, *args: Any, **kwargs: Any) -> Any: ...
        def clamp(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def clamp_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def clip(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def clip_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def clone(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def contiguous(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def copy_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def cos(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def cos_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def cpu(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def cuda(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def cumsum(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def diagonal(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def div(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def div_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def dot(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def double(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def eq(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def erf(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def erf_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def exp(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def exp_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def expand(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def expand_as(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def expm1(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def expm1_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def fill_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def flatten(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def flip(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def float(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def floor(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def floor_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def gather(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def ge(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def ger(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def gt(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def half(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def index_select(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def int(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def is_contiguous(self, *args: Any, **kwargs: Any) -> Any: ...
        def isclose(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def le(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def log(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def log1p(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def log1p_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def log2(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def log2_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def log_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def log_softmax(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def logical_and(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def logical_and_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def logical_not(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def logical_not_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def logical_or(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def logical_or_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def logical_xor(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def logical_xor_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def logsumexp(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def long(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def lt(self, *args: Any, **kwargs: Any) -> Tensor: ...
        @property
        def mT(self) -> Tensor: ...
        def masked_fill(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def masked_fill_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def matmul(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def max(self, *args: Any, **kwargs: Any) -> Any: ...
        def maximum(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def mean(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def min(self, *args: Any, **kwargs: Any) -> Any: ...
        def minimum(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def mm(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def mul(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def mul_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def narrow(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def ne(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def neg(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def neg_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def negative(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def norm(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def outer(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def permute(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def pow(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def pow_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def prod(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def reciprocal(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def reciprocal_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def relu(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def relu_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def repeat(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def reshape(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def roll(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def round(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def round_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def rsqrt(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def rsqrt_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def scatter_add(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def scatter_add_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def select(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def sigmoid(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def sigmoid_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def sign(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def sign_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def sin(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def sin_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def softmax(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def split(self, *args: Any, **kwargs: Any) -> Any: ...
        def sqrt(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def sqrt_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def squeeze(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def std(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def sub(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def sub_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def sum(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def sum_to_size(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def tan(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def tan_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def tanh(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def tanh_(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def tile(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def to(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def transpose(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def unbind(self, *args: Any, **kwargs: Any) -> Any: ...
        def unsqueeze(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def var(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def view(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def view_as(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def where(self, *args: Any, **kwargs: Any) -> Tensor: ...
        def zero_(self, *args: Any, **kwargs: Any) -> Tensor: ...
    # -- end of generated methods --


def _rebuild_tensor(data: Any, requires_grad: bool) -> Tensor:
    """A leaf holding ``data`` (an unpickled or copied array); Note [Pickling tensors]."""
    t = Tensor._make(data)
    t._requires_grad = requires_grad
    return t
