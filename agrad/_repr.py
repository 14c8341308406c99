"""PyTorch-style ``repr`` for tensors: ``tensor([1., 2.], grad_fn=<MulBackward0>)``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from agrad import _dtype

if TYPE_CHECKING:
    from agrad._tensor import Tensor


def _float_formatter(data: np.ndarray):  # type: ignore[no-untyped-def]
    finite = data[np.isfinite(data)].astype(np.float64)
    if finite.size == 0 or np.all(finite == np.round(finite)) and np.abs(finite).max() < 1e8:
        return lambda v: "nan" if np.isnan(v) else ("inf" if v == np.inf else "-inf" if v == -np.inf else f"{v:.0f}.")
    nonzero = np.abs(finite[finite != 0])
    if nonzero.size and (
        nonzero.max() >= 1e8 or nonzero.min() < 1e-4 or (nonzero.max() / nonzero.min() > 1e3 and nonzero.max() >= 1e3)
    ):
        return lambda v: f"{v:.4e}"
    return lambda v: f"{v:.4f}"


def tensor_repr(t: "Tensor") -> str:
    data = t._data
    prefix = "tensor("
    if data.size == 0:
        body = "[]" if data.ndim == 1 else f"[], size={tuple(data.shape)}"
    else:
        formatter = {}
        if data.dtype.kind == "f":
            formatter["float_kind"] = _float_formatter(data)
        body = np.array2string(
            data, separator=", ", prefix=prefix, formatter=formatter or None,
            threshold=1000, edgeitems=3, max_line_width=80,
        )
    extras = []
    d = t.dtype
    if d is not _dtype.bool and d is not _dtype.int64 and d is not _dtype.get_default_dtype():
        extras.append(f"dtype={d}")
    if t._grad_fn is not None:
        extras.append(f"grad_fn=<{t._grad_fn.name()}>")
    elif t._requires_grad:
        extras.append("requires_grad=True")
    return prefix + ", ".join([body, *extras]) + ")"
