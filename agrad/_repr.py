"""PyTorch-style ``repr`` for tensors: ``tensor([1., 2.], grad_fn=<MulBackward0>)``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from agrad import _dtype
from agrad._device import CPU

if TYPE_CHECKING:
    from agrad._tensor import Tensor


def _float_formatter(data: np.ndarray) -> Callable[[float], str]:
    """PyTorch's ``_Formatter`` for floats: integral (``1.``), fixed (``1.5000``) or
    scientific (``1.0000e-05``) notation, chosen from the non-zero finite values,
    every element right-justified to the widest of those."""
    vals = data[np.isfinite(data) & (data != 0)].astype(np.float64)
    if vals.size == 0:
        int_mode, sci_mode = True, False
    else:
        lo, hi = np.abs(vals).min(), np.abs(vals).max()
        int_mode = bool(np.all(vals == np.ceil(vals)))
        sci_mode = bool(hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4)

    def fmt(v: float) -> str:
        if sci_mode:
            return f"{v:.4e}"
        if int_mode:
            return f"{v:.0f}" + ("." if np.isfinite(v) else "")
        return f"{v:.4f}"

    width = max((len(fmt(v)) for v in vals), default=1)
    return lambda v: fmt(v).rjust(width)


def tensor_repr(t: "Tensor") -> str:
    data = t._data
    dev = t.device
    if not t.is_cpu:
        from agrad._backends import transfer
        data = transfer(data, CPU)
    prefix = "tensor("
    d = t.dtype
    if data.size == 0:
        body = "[]" if data.ndim == 1 else f"[], size={tuple(data.shape)}"
        show_dtype = d is not _dtype.get_default_dtype()
    else:
        formatter: Any = None  # numpy's _FormatDict: a TypedDict of formatter callables
        if data.dtype.kind == "f":
            formatter = {"float_kind": _float_formatter(data)}
        body = np.array2string(
            data, separator=", ", prefix=prefix, formatter=formatter,
            threshold=1000, edgeitems=3, max_line_width=80,
        ).replace(", ..., ", ",  ..., ")  # PyTorch summarises a row with " ..." as one more element
        show_dtype = d is not _dtype.bool and d is not _dtype.int64 and d is not _dtype.get_default_dtype()
    extras = [] if t.is_cpu else [f"device='{dev}'"]
    if show_dtype:
        extras.append(f"dtype={d}")
    if t._grad_fn is not None:
        extras.append(f"grad_fn=<{t._grad_fn.name()}>")
    elif t._requires_grad:
        extras.append("requires_grad=True")
    return prefix + ", ".join([body, *extras]) + ")"
