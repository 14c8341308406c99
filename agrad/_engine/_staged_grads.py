"""Staged gradients: what a backward will write to ``.grad``, and its all-or-nothing commit.

A graph task's AccumulateGrad nodes and retain_grad hooks stage gradients
here while the backward runs; :meth:`StagedGrads.commit` applies them at the
end, :meth:`StagedGrads.rollback` drops them (and undoes the provisional
commits of nested backwards) when it fails.
"""

from __future__ import annotations

import threading
from typing import TypeAlias

import numpy as np

from agrad._ambient import kernels_inline
from agrad._backends import on, writeable
from agrad._engine._interrupts import deferred_interrupts
from agrad._tensor import Tensor

__all__ = ["COMMITTED_NOTE", "StagedGrads"]

# Note [Staged gradients]
# ~~~~~~~~~~~~~~~~~~~~~~~
# A backward never writes ``.grad`` while it runs.  AccumulateGrad nodes and
# retain_grad hooks *stage* their gradient on the graph task; when the last
# node has run, ``commit`` applies every staged gradient in one step (under
# ``_COMMIT_LOCK``, so blocking backwards on other threads cannot interleave).
# A backward that raises or is cancelled is simply dropped with its staged
# gradients, so ``.grad`` is exactly what it was before the call, and two
# concurrent backwards into shared leaves sum exactly, as if run one after
# the other.  The commit is all or nothing (Note [Atomic commit]).
# Post-accumulate-grad hooks, which observe ``.grad``, run right after it
# (Note [After the commit]).  Tensor hooks (``register_hook``) still run
# during the backward, because they may change the gradient that flows on.
_COMMIT_LOCK = threading.Lock()
# Ids of pending provisional .grad tensors (Note [Commits of reentrant backwards]); under _COMMIT_LOCK.
_PROVISIONAL: set[int] = set()
# Added to an exception raised after a top-level backward committed (Note [After the commit]).
COMMITTED_NOTE = "(raised after the backward committed its gradients: every .grad holds its result)"

# Note [Commits of reentrant backwards]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A reentrant backward must make its gradients visible when it returns: the
# node that started it reads them (reentrant checkpointing returns
# ``detached_input.grad``).  But its parent may still fail, and then no
# ``.grad`` may have changed (Note [Staged gradients]).  So a reentrant
# backward commits *provisionally*: never in place (``.grad`` gets a new
# tensor, the old one stays intact) and journaled on its own task as
# ``(variable, old, new, version of new)``.  When it finishes, its journal
# passes to its parent, which answers for it from then on; the top-level task
# drops the journal when it succeeds, and any task that fails restores
# ``old`` for each entry, newest first.  While an entry is pending, its
# ``new`` tensor is in ``_PROVISIONAL`` and no commit accumulates into it in
# place, so ``new - old`` stays the nested backward's contribution: if
# ``.grad`` was replaced after the provisional commit (another backward
# accumulated into it, or the caller assigned it), only that contribution is
# subtracted, which is exact up to rounding.  The journal holds no array the
# backward would not hold anyway: ``old`` and ``new`` are ``.grad`` values.

# One leaf's change in a commit's plan: (variable, old .grad, new .grad or what
# to add to old in place, in place?); see Note [Atomic commit].
_Change: TypeAlias = "tuple[Tensor, Tensor | None, Tensor, bool]"
# A provisional commit's journal entry: (variable, old .grad, new .grad, new's version).
_Entry: TypeAlias = "tuple[Tensor, Tensor | None, Tensor, int]"


class StagedGrads:
    """The gradients one backward will commit, by variable (Note [Staged gradients])."""

    __slots__ = ("create_graph", "parent", "committed", "_staged", "_owned", "_journal")

    def __init__(self, create_graph: bool, parent: StagedGrads | None) -> None:
        self.create_graph = create_graph
        # A reentrant backward's parent answers for its commits (Note [Commits of reentrant backwards]).
        self.parent = parent
        self.committed = False  # .grad changed: the backward has succeeded (Note [After the commit])
        self._staged: dict[int, tuple[Tensor, Tensor, bool]] = {}  # id(variable): (variable, grad, is_leaf)
        # Ids of arrays the caller handed in (root gradients), and of memory
        # already stored as a .grad: never stored again without a copy (_plan).
        self._owned: set[int] = set()
        # Commits of reentrant backwards nested in this one, to undo if this one
        # fails (Note [Commits of reentrant backwards]).
        self._journal: list[_Entry] = []

    def not_own(self, grad: Tensor) -> None:
        """``grad`` is the caller's (a root gradient): a ``.grad`` gets a copy of it."""
        self._owned.add(id(grad._data))

    def stage(self, variable: Tensor, grad: Tensor, is_leaf: bool) -> None:
        """Record a gradient for ``variable.grad``, summed with one staged before."""
        key = id(variable)
        entry = self._staged.get(key)
        self._staged[key] = (variable, grad if entry is None else entry[1] + grad, is_leaf)

    # Note [Atomic commit]
    # ~~~~~~~~~~~~~~~~~~~~
    # ``commit`` applies every staged gradient, or none.  It works in two
    # phases under ``_COMMIT_LOCK``.  The first computes each leaf's new
    # ``.grad`` and checks every in-place sum before anything changes: it may
    # raise (an out-of-place sum that fails, PyTorch's error for a ``.grad``
    # with overlapping memory) or be interrupted, and the backward then
    # aborts with every ``.grad`` as it was.  The second only applies what
    # the first decided: reference assignments and in-place sums already
    # known to succeed, the journal of provisional commits, and ``committed``
    # last.  It runs with SIGINT held back (``deferred_interrupts``), so a
    # KeyboardInterrupt cannot land between two leaves; one that arrives
    # during it is raised right after, with the commit whole.  A read-only
    # ``.grad`` array is summed out of place (PyTorch writes through it).
    #
    # Note [A commit never pauses]
    # ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    # The commit (and a rollback) runs ops under ``_COMMIT_LOCK``: a clone of a
    # gradient the leaf cannot own, ``old + grad``.  Inside ``agrad.cooperative``
    # an op's kernel goes to the call, which pauses its greenlet when the time
    # slice is spent (Note [Cooperative calls]).  A pause there left the lock
    # held while the loop's thread ran other calls, and the next one to commit
    # blocked that thread on the lock for good: the event loop hung (found by
    # the full-size cancellation soak; tests/engine/test_cooperative.py shows
    # it with two calls and a spent slice).  So the ops run inline here
    # (``kernels_inline``): a commit is short and takes no slice.
    def commit(self) -> None:
        """Apply every staged gradient to ``.grad`` with PyTorch's AccumulateGrad
        rules, all or nothing (Note [Atomic commit]), and pass the journal of
        provisional commits on.  From here on the backward has succeeded
        (Note [After the commit]).

        A reentrant backward's commit is provisional: journaled, so that its
        parent can undo it (Note [Commits of reentrant backwards]).
        """
        if not self._staged and not self._journal:
            self.committed = True
            return
        with _COMMIT_LOCK, kernels_inline():  # Note [A commit never pauses]
            plan = self._plan()
            with deferred_interrupts():
                self._apply(plan)

    def _plan(self) -> list[_Change]:
        """Phase one of the commit: ``(variable, old, grad, in_place)`` per staged
        gradient, where ``grad`` is the new ``.grad`` or, in place, what to add
        to ``old``.  Changes no ``.grad``."""
        create_graph = self.create_graph
        seen = self._owned
        provisional = self.parent is not None
        plan: list[_Change] = []
        for variable, grad, is_leaf in self._staged.values():
            if not create_graph:
                grad = grad.detach()
            old = variable._grad
            if old is None:
                # Store a gradient as is only if nothing else can see its memory
                # (PyTorch's AccumulateGrad steals a gradient only when its use
                # count is 1).  Copied first: a read-only or broadcast array, the
                # caller's root gradient, memory already stored on another leaf in
                # this commit, and any retain_grad value (PyTorch clones those).
                arr = grad._data
                owner = arr if arr.base is None else arr.base
                if not is_leaf or not writeable(arr) or id(owner) in seen or id(arr) in seen:
                    grad = grad.clone()
                    arr = owner = grad._data
                seen.add(id(arr))
                seen.add(id(owner))
                plan.append((variable, None, grad, False))
            elif (not create_graph and not old.requires_grad and not provisional and id(old) not in _PROVISIONAL
                    and old._data.shape == grad._data.shape):
                if 0 in old._data.strides and old._data.size > 1:
                    raise RuntimeError(
                        "unsupported operation: more than one element of the written-to tensor refers to a "
                        "single memory location. Please clone() the tensor before performing the operation."
                    )
                if writeable(old._data):
                    plan.append((variable, old, grad, True))
                else:
                    plan.append((variable, old, old + grad, False))
            else:
                plan.append((variable, old, old + grad, False))
        return plan

    def _apply(self, plan: list[_Change]) -> None:
        """Phase two of the commit: apply ``plan``; nothing here can fail."""
        parent = self.parent
        for variable, old, grad, in_place in plan:
            new = grad
            if in_place and old is not None:
                with on(variable.device):
                    np.add(old._data, grad._data, out=old._data, casting="unsafe")
                old._bump_version()
                new = old
            else:
                variable._commit_grad(grad)
            if parent is not None:
                _PROVISIONAL.add(id(new))
                self._journal.append((variable, old, new, new._version))
        if parent is not None:  # the parent answers for every commit below it now
            parent._journal.extend(self._journal)
        else:  # final now
            for entry in self._journal:
                _PROVISIONAL.discard(id(entry[2]))
        self._journal.clear()
        self.committed = True

    # Note [After the commit]
    # ~~~~~~~~~~~~~~~~~~~~~~~
    # The commit is the point where a backward succeeds: before it, whatever
    # stops the backward (an exception, a cancellation, a KeyboardInterrupt)
    # leaves every ``.grad`` as it was; after it, nothing is undone.  So
    # nothing after it may look like a failed backward.  The async driver has
    # no await after the commit, so no cancellation can be reported once
    # ``.grad`` changed (a cancellation requested meanwhile reaches the caller
    # at its next await, as for any other synchronous step).  What does run
    # after it is user code that observes the committed ``.grad``: the
    # post-accumulate-grad hooks (an optimizer step in a hook needs the
    # accumulated value) and the final callbacks of ``queue_callback``, as in
    # PyTorch.  If one of them raises (or a KeyboardInterrupt lands while the
    # call unwinds), the exception propagates as in PyTorch, the hooks after
    # it do not run, and the driver adds a note to the exception saying that
    # the gradients are committed (``COMMITTED_NOTE``): a caller that would
    # retry a failed backward can tell that this one must not be retried.  A
    # reentrant backward's commit is provisional: if something raises after
    # it, its parent fails and undoes it, so no note is added there.
    def run_post_accumulate_hooks(self) -> None:
        """The committed leaves' post-accumulate-grad hooks (Note [After the commit])."""
        staged, self._staged = self._staged, {}
        for variable, _, is_leaf in staged.values():
            if is_leaf and variable._post_acc_hooks:
                for hook in list(variable._post_acc_hooks.values()):
                    if (result := hook(variable)) is not None:  # PyTorch checks the type first
                        raise (RuntimeError("Tensor post accumulate grad hooks should return None.")
                               if isinstance(result, Tensor) else
                               TypeError(f"expected Variable, but hook returned '{type(result).__name__}'"))

    def note_if_committed(self, exc: BaseException) -> None:
        """Tell the caller, on ``exc``, that the gradients of this top-level
        backward stay committed (Note [After the commit])."""
        if self.committed and self.parent is None and COMMITTED_NOTE not in getattr(exc, "__notes__", ()):
            exc.add_note(COMMITTED_NOTE)

    def rollback(self) -> None:
        """Drop every staged gradient and undo the commits of the reentrant
        backwards nested in this one: the backward changes no ``.grad``."""
        self._staged.clear()
        # All undone, or none (Note [Atomic commit]), without a pause (Note [A commit never pauses]).
        with _COMMIT_LOCK, kernels_inline(), deferred_interrupts():
            for variable, old, new, version in reversed(self._journal):
                _PROVISIONAL.discard(id(new))
                current = variable._grad
                if current is new and new._version == version:
                    variable._commit_grad(old)
                elif current is not None and current.shape == new.shape:
                    # Replaced since (another backward accumulated into it, or the
                    # caller assigned it): take out only this backward's part.
                    variable._commit_grad((current - (new if old is None else new - old)).detach())
        self._journal.clear()
