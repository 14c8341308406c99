"""PyTorch-style ``repr`` for tensors: ``tensor([1., 2.], grad_fn=<MulBackward0>)``,
and :func:`set_printoptions`, which governs it.

The layout is PyTorch's ``torch/_tensor_str.py``, step for step, on numpy
arrays: one formatter for the whole tensor picks integral (``1.``), fixed
(``1.5000``) or scientific (``1.0000e-05``) notation from the non-zero finite
values and right-justifies every element to the widest of them; rows wrap at
``linewidth``; a tensor of more than ``threshold`` elements is summarised to
``edgeitems`` rows at each end of each dimension, with ``...`` between; the
suffixes (device, dtype, ``grad_fn``) wrap at ``linewidth`` too.

Note [Printing summarised tensors]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
PyTorch's printer indexes the whole tensor, one row at a time.  Here the
summary (at most ``2 * edgeitems`` rows along each dimension, PyTorch's
``get_summarized_data``) is cut first, on the tensor's device, and only it is
copied to the host; the printer then walks the summary and places ``...``
where the *original* size along a dimension exceeded ``2 * edgeitems``.  The
formatter reads the same values PyTorch's does (the summary), so the output is
the same, and printing a large CUDA tensor copies a few dozen elements.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from agrad import _dtype
from agrad._backends import array_module, transfer
from agrad._device import CPU

if TYPE_CHECKING:
    from agrad._tensor import Tensor

__all__ = ["set_printoptions"]


@dataclasses.dataclass
class _PrintOptions:
    """What :func:`set_printoptions` sets (PyTorch's ``PRINT_OPTS``)."""

    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: bool | None = None


# Process-wide, as PyTorch's are; changed only by set_printoptions.
PRINT_OPTS = _PrintOptions()

_PROFILES = {
    "default": _PrintOptions(),
    "short": _PrintOptions(precision=2, edgeitems=2),
    "full": _PrintOptions(threshold=math.inf),
}


def set_printoptions(precision: int | None = None, threshold: float | None = None, edgeitems: int | None = None,
                     linewidth: int | None = None, profile: str | None = None, sci_mode: bool | None = None) -> None:
    """Set options for printing tensors (process-wide), as ``torch.set_printoptions``.

    Args:
        precision: digits after the decimal point of floating values (default 4).
        threshold: more elements than this are summarised (default 1000).
        edgeitems: rows shown at each end of a summarised dimension (default 3).
        linewidth: characters per line before a row wraps (default 80).
        profile: ``"default"``, ``"short"`` or ``"full"``: resets the four options
            above to a preset; the other arguments then override it.
        sci_mode: ``True``/``False`` forces scientific notation on or off;
            ``None`` (the default, and what every call without it sets) lets the
            values decide.

    Example::

        >>> agrad.set_printoptions(precision=2)
        >>> agrad.tensor([1.12345])
        tensor([1.12])
        >>> agrad.set_printoptions(threshold=5)
        >>> agrad.arange(10)
        tensor([0, 1, 2,  ..., 7, 8, 9])
        >>> agrad.set_printoptions(profile="default")
        >>> agrad.tensor([1.12345])
        tensor([1.1235])
    """
    if profile is not None:
        preset = _PROFILES.get(profile)
        if preset is not None:  # PyTorch ignores an unknown profile
            PRINT_OPTS.precision, PRINT_OPTS.threshold = preset.precision, preset.threshold
            PRINT_OPTS.edgeitems, PRINT_OPTS.linewidth = preset.edgeitems, preset.linewidth
    if precision is not None:
        PRINT_OPTS.precision = precision
    if threshold is not None:
        PRINT_OPTS.threshold = threshold
    if edgeitems is not None:
        PRINT_OPTS.edgeitems = edgeitems
    if linewidth is not None:
        PRINT_OPTS.linewidth = linewidth
    PRINT_OPTS.sci_mode = sci_mode


class _Formatter:
    """PyTorch's ``_Formatter``: one notation and width for every element, chosen
    from the values to print (the summary of a summarised tensor)."""

    def __init__(self, data: np.ndarray, floating: bool) -> None:
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        if not floating:
            self.max_width = max((len(str(v)) for v in data.reshape(-1).tolist()), default=1)
            return
        values = data.reshape(-1).astype(np.float64)
        finite = values[np.isfinite(values) & (values != 0)]
        if finite.size == 0:
            return
        magnitudes = np.abs(finite)
        lo, hi = float(magnitudes.min()), float(magnitudes.max())
        self.int_mode = bool(np.all(finite == np.ceil(finite)))
        if PRINT_OPTS.sci_mode is None:
            self.sci_mode = hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4
        else:
            self.sci_mode = PRINT_OPTS.sci_mode
        p = PRINT_OPTS.precision
        vals = finite.tolist()
        if self.sci_mode:
            self.max_width = max(len(f"{v:.{p}e}") for v in vals)
        elif self.int_mode:
            self.max_width = max(len(f"{v:.0f}") + 1 for v in vals)  # + the "." that marks a float
        else:
            self.max_width = max(len(f"{v:.{p}f}") for v in vals)

    def format(self, value: Any) -> str:
        if self.floating:
            p = PRINT_OPTS.precision
            if self.sci_mode:
                ret = f"{value:{self.max_width}.{p}e}"
            elif self.int_mode:
                ret = f"{value:.0f}"
                if not (math.isinf(value) or math.isnan(value)):
                    ret += "."
            else:
                ret = f"{value:.{p}f}"
        else:
            ret = f"{value}"
        return (self.max_width - len(ret)) * " " + ret


def _summary(data: Any, edge: int) -> Any:
    """PyTorch's ``get_summarized_data``, on any backend's array: at most
    ``2 * edge`` rows along each dimension (Note [Printing summarised tensors])."""
    if data.ndim == 0:
        return data
    xp = array_module(data)
    if data.ndim == 1:
        # PyTorch's slices, literally: with edge 0, ``data[-0:]`` is all of it.
        return xp.concatenate((data[:edge], data[-edge:])) if data.shape[0] > 2 * edge else data
    if not edge:
        return xp.empty((0,) * data.ndim, data.dtype)
    rows = list(range(edge)) + list(range(data.shape[0] - edge, data.shape[0])) if data.shape[0] > 2 * edge \
        else range(data.shape[0])
    return xp.stack([_summary(data[i], edge) for i in rows])


def _vector_str(data: np.ndarray, size: int, indent: int, summarize: bool, fmt: _Formatter) -> str:
    """A 1-D row, ``size`` its length before summarising, wrapped at ``linewidth``."""
    element_length = fmt.max_width + 2  # with the ", " between elements
    per_line = max(1, math.floor((PRINT_OPTS.linewidth - indent) / element_length))
    edge = PRINT_OPTS.edgeitems
    values = data.astype(np.float64).tolist() if fmt.floating else data.tolist()
    if summarize and not edge:
        cells = ["..."]
    elif summarize and size > 2 * edge:
        cells = [fmt.format(v) for v in values[:edge]] + [" ..."] + [fmt.format(v) for v in values[-edge:]]
    else:
        cells = [fmt.format(v) for v in values]
    lines = [", ".join(cells[i:i + per_line]) for i in range(0, len(cells), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _tensor_str(data: np.ndarray, shape: tuple[int, ...], indent: int, summarize: bool, fmt: _Formatter) -> str:
    """PyTorch's ``_tensor_str_with_formatter`` on ``data``, the summary of an
    array of ``shape`` (Note [Printing summarised tensors])."""
    if data.ndim == 0:
        return fmt.format(data.astype(np.float64).item() if fmt.floating else data.item())
    if data.ndim == 1:
        return _vector_str(data, shape[0], indent, summarize, fmt)
    edge = PRINT_OPTS.edgeitems
    inner = shape[1:]
    if summarize and shape[0] > 2 * edge:
        n = data.shape[0]
        slices = ([_tensor_str(data[i], inner, indent + 1, summarize, fmt) for i in range(min(edge, n))] + ["..."]
                  + [_tensor_str(data[i], inner, indent + 1, summarize, fmt) for i in range(max(n - edge, edge), n)])
    else:
        slices = [_tensor_str(data[i], inner, indent + 1, summarize, fmt) for i in range(data.shape[0])]
    return "[" + ("," + "\n" * (data.ndim - 1) + " " * (indent + 1)).join(slices) + "]"


def _add_suffixes(tensor_str: str, suffixes: list[str], indent: int) -> str:
    """The suffixes after the values, each on a new line where it would pass ``linewidth``."""
    parts = [tensor_str]
    last_line_len = len(tensor_str) - tensor_str.rfind("\n") + 1
    for suffix in suffixes:
        if last_line_len + len(suffix) + 2 > PRINT_OPTS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            last_line_len = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last_line_len += len(suffix) + 2
    parts.append(")")
    return "".join(parts)


def tensor_repr(t: "Tensor") -> str:
    """``repr(t)`` as PyTorch prints it (``torch._tensor_str._str``)."""
    data = t._data
    d = t.dtype
    prefix = "tensor("
    indent = len(prefix)
    suffixes = [] if t.is_cpu else [f"device='{t.device}'"]
    if data.size == 0:
        if data.ndim != 1:
            suffixes.append(f"size={tuple(data.shape)}")
        if d is not _dtype.get_default_dtype():  # no values to tell an int64 tensor by
            suffixes.append(f"dtype={d}")
        body = "[]"
    else:
        edge = PRINT_OPTS.edgeitems
        if not edge:
            suffixes.append(f"size={tuple(data.shape)}")
        if d not in (_dtype.get_default_dtype(), _dtype.int64, _dtype.bool):
            suffixes.append(f"dtype={d}")
        summarize = data.size > PRINT_OPTS.threshold
        shown = _summary(data, edge) if summarize else data
        if not t.is_cpu:
            shown = transfer(shown, CPU)
        fmt = _Formatter(shown, d.is_floating_point)
        body = _tensor_str(shown, tuple(data.shape), indent, summarize, fmt)
    try:
        grad_fn = t.grad_fn  # a view's, brought up to date as PyTorch's repr does
        grad_fn_name = None if grad_fn is None else grad_fn.name().rsplit("::", 1)[-1]
    except RuntimeError:
        grad_fn_name = "Invalid"
    if grad_fn_name is not None:
        suffixes.append(f"grad_fn=<{grad_fn_name}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)
