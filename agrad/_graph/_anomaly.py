"""Anomaly mode: record forward tracebacks in nodes, check backward outputs for NaN."""

from __future__ import annotations

import warnings
from typing import Any

from agrad._ambient import anomaly_check_nan, anomaly_enabled, running_node


class detect_anomaly:
    """Context manager enabling anomaly detection (mirrors ``torch.autograd.detect_anomaly``).

    While enabled, each recorded node keeps the traceback of the forward call
    that created it; a backward error names the node and shows that
    traceback, and (with ``check_nan``) a node returning NaN raises.
    """

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = check_nan
        self._prev: list[tuple[bool, bool]] = []
        warnings.warn(  # on construction, as PyTorch (set_detect_anomaly does not warn)
            "Anomaly Detection has been enabled. This mode will increase the runtime and should only be "
            "enabled for debugging.",
            UserWarning,
            stacklevel=2,
        )

    def __enter__(self) -> None:
        self._prev.append((anomaly_enabled.get(), anomaly_check_nan.get()))
        anomaly_enabled.set(True)
        anomaly_check_nan.set(self.check_nan)

    def __exit__(self, *exc: object) -> None:
        mode, nan = self._prev.pop()
        anomaly_enabled.set(mode)
        anomaly_check_nan.set(nan)


class set_detect_anomaly(detect_anomaly):
    """Set anomaly detection on or off; as a context manager, restore on exit."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self.check_nan = check_nan
        self._prev = [(anomaly_enabled.get(), anomaly_check_nan.get())]
        anomaly_enabled.set(bool(mode))
        anomaly_check_nan.set(check_nan)

    def __enter__(self) -> None:
        pass


def is_anomaly_enabled() -> bool:
    return anomaly_enabled.get()


def is_anomaly_check_nan_enabled() -> bool:
    return anomaly_check_nan.get()


# Note [Anomaly parents]
# ~~~~~~~~~~~~~~~~~~~~~~
# As PyTorch's ``Node::assign_parent``: in anomaly mode a node recorded while
# the engine runs another node's backward (a ``create_graph`` backward)
# keeps that node as its ``metadata["parent_"]``, so an error in a
# higher-order backward also shows the forward call that induced it.  The
# engine sets ``running_node`` around a node's kernel only in anomaly mode.
# An ``async def`` backward's nodes get no parent: its coroutine runs after
# the kernel call that set the variable returned.


def run_as_parent(node: Any, inputs: list[Any], task: Any) -> Any:
    """``node.apply(inputs, task)`` with ``node`` as the parent of the nodes it records."""
    token = running_node.set(node)
    try:
        return node.apply(inputs, task)
    finally:
        running_node.reset(token)


_NO_FORWARD = "No forward pass information available. Enable detect anomaly during forward pass for more information."


def warn_error_detected(node: Any) -> None:
    """PyTorch's warnings when a backward fails in anomaly mode
    (``AnomalyMetadata::print_stack``): the failing node's forward traceback,
    then each parent's (Note [Anomaly parents])."""
    trace = node._trace
    detail = "Traceback of forward call that caused the error:\n" + "".join(trace) if trace else _NO_FORWARD
    warnings.warn(f"Error detected in {node.name()}. {detail}", UserWarning, stacklevel=2)
    parent = _parent(node)
    while parent is not None:
        if parent._trace:
            warnings.warn(f"\n\nPrevious calculation was induced by {parent.name()}. Traceback of forward call that "
                          "induced the previous calculation:\n" + "".join(parent._trace), UserWarning, stacklevel=2)
        else:
            warnings.warn(f"Error detected in {parent.name()}. {_NO_FORWARD}", UserWarning, stacklevel=2)
        parent = _parent(parent)


def _parent(node: Any) -> Any:
    return node._metadata.get("parent_") if node._metadata else None
