"""Reverse-mode automatic differentiation (mirrors ``torch.autograd``), with ``await``.

``backward`` and ``grad`` are coroutines: the backward pass runs as part of the
awaiting task, yielding to the event loop between time slices, so an async
server keeps serving while it differentiates.  ``backward_sync`` and
``grad_sync`` are their blocking twins for scripts and threads: same
arguments, same results, the same engine underneath.
"""

from __future__ import annotations

from collections.abc import Callable

from agrad._ambient import current_graph_task
from agrad._engine._options import is_multithreading_enabled, set_multithreading_enabled
from agrad._grad_mode import enable_grad, inference_mode, no_grad, set_grad_enabled
from agrad._graph._anomaly import detect_anomaly, set_detect_anomaly
from agrad.autograd import function, functional, graph
from agrad.autograd._api import backward, backward_sync, grad, grad_sync
from agrad.autograd.function import Function
from agrad.autograd.gradcheck import gradcheck, gradgradcheck

__all__ = [
    "backward", "backward_sync", "grad", "grad_sync", "Function", "gradcheck", "gradgradcheck",
    "detect_anomaly", "set_detect_anomaly", "no_grad", "enable_grad", "set_grad_enabled",
    "inference_mode", "queue_callback", "function", "functional", "graph", "set_multithreading_enabled",
    "is_multithreading_enabled",
]

def queue_callback(callback: Callable[[], None]) -> None:
    """Run ``callback()`` once the current backward has finished (after ``.grad`` is committed).

    Only valid while a backward is running, e.g. from a hook or a custom
    Function's backward (PyTorch's ``Variable._execution_engine.queue_callback``).
    """
    task = current_graph_task.get()
    if task is None:
        raise RuntimeError("Final callbacks can only be installed during backward pass.")
    task.final_callbacks.append(callback)
