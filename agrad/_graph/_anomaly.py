"""Anomaly mode: record forward tracebacks in nodes, check backward outputs for NaN."""

from __future__ import annotations

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
        super().__init__(check_nan)
        self._prev.append((anomaly_enabled.get(), anomaly_check_nan.get()))
        anomaly_enabled.set(bool(mode))
        anomaly_check_nan.set(check_nan)

    def __enter__(self) -> None:
        pass


def is_anomaly_enabled() -> bool:
    return anomaly_enabled.get()


def is_anomaly_check_nan_enabled() -> bool:
    return anomaly_check_nan.get()
