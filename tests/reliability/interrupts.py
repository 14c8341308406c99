"""KeyboardInterrupt and other BaseExceptions injected into the blocking twin.

Two kinds of trial, both on the main thread (Python delivers signals there):

* **SIGINT** (:func:`sigint_trial`): a timer thread sends SIGINT to the main
  thread after a random delay while ``backward_sync`` runs graph ``seed``
  (chains, fan-in, reentrant checkpoints and nested blocking backwards with a
  small ``max_recursion_depth``, so nested backwards spill to fresh threads).
  Where the interrupt landed is read from its traceback: through a frame of
  agrad, it escaped the call, and every ``.grad`` must be unchanged, and stay
  so after the timer is joined and the engine settled (no thread commits
  later), unless the exception's note says it came after the call's commit
  (Note [After the commit]): then that call's gradients must be whole;
  anywhere else (before the call, or after it returned) the call returned,
  and ``.grad`` must be before + the reference gradient.
* **From inside a node** (:func:`node_raise_trial`): a tensor hook or a custom
  Function's backward raises KeyboardInterrupt, SystemExit or another
  BaseException at a random node; the call must raise it and change no ``.grad``.

After each: ``_PROVISIONAL`` is empty, no spill thread is left, a small
backward works.  Replay: ``python -m tests.reliability.run --replay sigint:<seed>`` (or ``node:<seed>``).
"""

from __future__ import annotations

import gc
import random
import signal
import threading
import time
from types import TracebackType
from typing import Any

import agrad
from agrad._engine._staged_grads import COMMITTED_NOTE
from tests.helpers import collect_only_new_objects
from tests.reliability import _graphs, _invariants
from tests.reliability._invariants import Tally

KINDS = ("chain", "fanin", "matmul", "retain", "checkpoint", "checkpoint_nested", "nested", "grad")


def _inside_call(tb: TracebackType | None) -> bool:
    """Whether an exception passed through a frame below ``_graphs.run_sync`` (it was raised inside the
    call; raised in ``run_sync``'s own frame, it landed just before the call or just after it returned)."""
    while tb is not None:
        if tb.tb_frame.f_code is _graphs.run_sync.__code__:
            return tb.tb_next is not None
        tb = tb.tb_next
    return False


def _check_after(tally: Tally, seed: int, what: str, graph: _graphs.Graph, before: _invariants.Snapshot,
                 added: list[_graphs.Contribution], mechanism: str, problems: list[str] | None = None) -> None:
    problems = (problems or []) + _invariants.provisional_problems()
    now = _invariants.grad_problems(graph.leaves, before, added)
    problems += now + _invariants.settle_sync()
    # Checked again once the engine is quiet: a thread left behind must not commit later.
    problems += [f"later: {p}" for p in _invariants.grad_problems(graph.leaves, before, added) if p not in now]
    problems += _invariants.provisional_problems()
    problems += _invariants.engine_works_sync()
    if problems:
        tally.violation(seed, what, problems, mechanism)


def sigint_trial(seed: int, tally: Tally, retries: int = 5) -> None:
    """One SIGINT trial; retried (with the next delay) while the interrupt lands outside the call."""
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("SIGINT trials run on the main thread")
    rs = random.Random(seed ^ 0x1A7)
    start = time.perf_counter()
    reference = _graphs.reference(seed, KINDS)
    span = time.perf_counter() - start  # about one build and one blocking run per call
    for attempt in range(retries):
        graph = _graphs.build(seed, KINDS)
        with _graphs.options(graph):
            for c in graph.pre:
                _graphs.run_sync(c)
        before = _invariants.snapshot(graph.leaves)
        start = time.perf_counter()
        timer = threading.Timer(rs.uniform(0, 0.6 * span * (attempt + 1)), signal.pthread_kill,
                                (threading.main_thread().ident, signal.SIGINT))
        results: list[Any] = []
        escaped = committed = False
        surfaced: list[str] = []
        # Note [No collection while SIGINT is due]
        # ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
        # A SIGINT that lands in a finalizer run by the cyclic collector (trio's Nursery.__del__ of an
        # earlier run, say) is swallowed as "Exception ignored", which pytest turns into an error: the
        # garbage is collected first, and the collector waits until the interrupt has landed.
        gc.collect()
        gc.disable()
        try:
            timer.start()
            with _graphs.options(graph):
                for c in graph.calls:
                    results.append(_graphs.run_sync(c))
            timer.join()  # the interrupt, if sent, is delivered by the next bytecodes
            for _ in range(1000):
                pass
        except KeyboardInterrupt as exc:
            escaped = _inside_call(exc.__traceback__)
            # Landed during or after the commit (Note [After the commit]): that call's gradients stand.
            committed = COMMITTED_NOTE in getattr(exc, "__notes__", ())
            timer.join()
        except BaseException as exc:  # noqa: BLE001  (the interrupt turned into another exception)
            escaped = True
            surfaced = [f"the interrupt surfaced as {type(exc).__name__}: {exc}"]
            timer.join()
        finally:
            timer.cancel()
            gc.enable()
        what = f"SIGINT after {time.perf_counter() - start:.4f}s on {graph.describe()}"
        if escaped:
            mechanism = "SIGINT: escaped backward_sync" + (" after its commit" if committed else "")
            tally.trials[mechanism] += 1
            done = len(results) + committed  # the calls whose gradients are in .grad
            added = [ref for ref, c in zip(reference[:done], graph.calls[:done]) if c.mode == "backward"]
            _check_after(tally, seed, what, graph, before, added, mechanism, surfaced)
            return
        if len(results) == len(graph.calls):  # returned; the interrupt landed after it or not at all
            tally.trials["SIGINT: call returned"] += 1
            added = [ref for ref, c in zip(reference, graph.calls) if c.mode == "backward"]
            _check_after(tally, seed, what, graph, before, added, "SIGINT: call returned")
            problems = _invariants.result_problems(
                [r if c.mode == "grad" else None for r, c in zip(results, graph.calls)], reference)
            if problems:
                tally.violation(seed, what, problems, "SIGINT: call returned")
            return
        tally.outcomes["SIGINT landed outside the call, before it returned: retried"] += 1
    tally.outcomes["SIGINT never landed in the call"] += 1


class Injected(BaseException):
    """A BaseException that is neither KeyboardInterrupt nor SystemExit."""


RAISERS = (KeyboardInterrupt, SystemExit, Injected)
PLACES = ("hook", "function")


class _Raise(agrad.autograd.Function):
    """The identity; its backward raises ``ctx.exc``."""

    @staticmethod
    def forward(ctx: Any, x: agrad.Tensor, exc: BaseException) -> agrad.Tensor:
        ctx.exc = exc
        return x.clone()

    @staticmethod
    def backward(ctx: Any, g: agrad.Tensor) -> Any:
        raise ctx.exc


def _raiser(exc_type: type[BaseException]) -> Any:
    def hook(g: agrad.Tensor) -> None:
        raise exc_type("injected")

    return hook


def node_raise_trial(seed: int, tally: Tally) -> None:
    """A hook or a Function's backward raises a BaseException at a random node of a chain."""
    graph = _graphs.build(seed, ("chain", "fanin", "checkpoint", "nested"))
    # In turn: any run of six seeds raises each BaseException from each place (Note [Soak sizes]).
    exc_type, how = RAISERS[seed % len(RAISERS)], PLACES[seed // len(RAISERS) % len(PLACES)]
    # Splice the raising node onto the first leaf's path: it feeds every call's root.
    x = graph.leaves[0]
    extra = _Raise.apply(x, exc_type("injected")) if how == "function" else x * 1.0
    if how == "hook":
        extra.register_hook(_raiser(exc_type))
    root = graph.calls[0].root + extra.sum()
    before = _invariants.snapshot(graph.leaves)
    what = f"{exc_type.__name__} from a {how} on {graph.describe()}"
    mechanism = f"{exc_type.__name__} from a {how}"
    tally.trials[mechanism] += 1
    try:
        with _graphs.options(graph):
            root.backward_sync()
    except exc_type:
        pass
    except BaseException as exc:  # noqa: BLE001  (must not escape: a KeyboardInterrupt would stop the run)
        tally.violation(seed, what, [f"raised {type(exc).__name__} instead: {exc}"], mechanism)
    else:
        tally.violation(seed, what, ["the backward returned"], mechanism)
    _check_after(tally, seed, what, graph, before, [], mechanism)


def soak(trials: int, seed: int) -> Tally:
    """``trials`` SIGINT trials and as many node-raise trials, seeds from ``seed``."""
    tally = Tally("interrupts")
    start = time.perf_counter()
    # SIGINT must raise KeyboardInterrupt, as in an interactive program, even where this process
    # inherited it ignored (a background job of a shell without job control starts so).
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with collect_only_new_objects():  # each SIGINT trial collects first (Note [Collecting per trial])
            for s in range(seed, seed + trials):
                sigint_trial(s, tally)
                node_raise_trial(s, tally)
    finally:
        signal.signal(signal.SIGINT, old)
    tally.seconds = time.perf_counter() - start
    return tally
