"""Anomaly mode: record forward tracebacks in nodes, check backward outputs for NaN."""

from __future__ import annotations

import warnings
from contextvars import ContextVar

anomaly_enabled: ContextVar[bool] = ContextVar("agrad_anomaly_enabled", default=False)
anomaly_check_nan: ContextVar[bool] = ContextVar("agrad_anomaly_check_nan", default=True)


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


def warn_error_detected(name: str, trace: list[str] | None) -> None:
    """PyTorch's warning when a backward fails in anomaly mode (AnomalyMetadata::print_stack)."""
    if trace:
        detail = "Traceback of forward call that caused the error:\n" + "".join(trace)
    else:
        detail = ("No forward pass information available. Enable detect anomaly during forward pass for more "
                  "information.")
    warnings.warn(f"Error detected in {name}. {detail}", UserWarning, stacklevel=2)
