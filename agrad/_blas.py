"""How many threads BLAS uses under agrad: one by default, the user's choice otherwise.

numpy's BLAS (OpenBLAS in numpy's wheels; MKL or BLIS in other builds) keeps
its own thread pool.  This module limits it, through ``threadpoolctl``, once
at ``import agrad`` (Note [BLAS threads]), and gives PyTorch's intra-op
thread API, :func:`set_num_threads` and :func:`get_num_threads`, for users who
want BLAS's threads back.
"""

from __future__ import annotations

import os
import threading

import numpy  # first: importing numpy loads its BLAS, which the scan below must find
from threadpoolctl import OpenBLASController, ThreadpoolController

__all__ = ["apply_default", "get_num_threads", "set_num_threads", "USER_VARIABLES"]

# Note [BLAS threads]
# ~~~~~~~~~~~~~~~~~~~
# agrad runs each kernel with BLAS limited to ONE thread by default.  Its
# parallelism is inter-op: the engine's kernel pool runs independent kernels
# at once (``get_num_interop_threads()``, default: the usable CPUs), as
# PyTorch's inter-op pool does.  BLAS's own threads on top of that would put
# CPUs x BLAS-threads runnable threads on CPUs cores.  OpenBLAS hands even a
# small call to its helper threads and waits until each has run, so when the
# cores are busy every call waits for the scheduler: ``(1,784) @ (784,1024)``
# took 56 ms median with 2 OpenBLAS threads on a loaded 2-core machine against
# 0.086 ms with 1 (issue 15; figures for this code in docs/performance.md,
# "BLAS threads").  PyTorch does not thread a product that small either.
#
# The limit is set once, at import, for the whole process, never per kernel:
# OpenBLAS (pthreads layer, numpy's wheels) has one thread pool per process
# and no per-thread limit, and changing its size while another thread is
# inside a BLAS call is unsafe.  So it is process-wide: the user's own numpy
# products in the same process run on one BLAS thread too.
#
# The user's settings win: when any of USER_VARIABLES is set, the BLAS library
# has already sized its pool from it, and agrad leaves BLAS alone.  (PyTorch
# takes its intra-op threads from OMP_NUM_THREADS the same way; an agrad-only
# variable would add a second name for the same choice.)  An explicit
# ``set_num_threads(n)`` is the user's choice too, and always applies.
#
# threadpoolctl (3.8+) lets one Python thread at a time control OpenBLAS's
# shared pool and silently ignores the others.  agrad releases that control
# after each change, so a later change from any thread (its own
# ``set_num_threads`` from a worker thread, or ``threadpool_limits``) still
# takes effect.

USER_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                  "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")

# The BLAS libraries loaded with numpy, found once: a scan walks every loaded
# shared library.  Empty where threadpoolctl controls none (Apple's Accelerate).
_blas = ThreadpoolController().select(user_api="blas")
_lock = threading.Lock()
# What set_num_threads last asked for: get_num_threads' answer when there is no
# library to ask.
_requested = 1


def _type_name(obj: object) -> str:
    """The type's name as CPython's ``tp_name`` gives it, as torch's messages quote it:
    bare for builtins and classes defined in Python, module-qualified for other
    extension types (``numpy.float64``)."""
    cls = type(obj)
    if cls.__flags__ & (1 << 9) or cls.__module__ == "builtins":  # Py_TPFLAGS_HEAPTYPE
        return cls.__name__
    return f"{cls.__module__}.{cls.__name__}"


def _release_control() -> None:
    """Hand back threadpoolctl's control of OpenBLAS's pool (Note [BLAS threads])."""
    clear = getattr(OpenBLASController, "clear_controlling_thread", None)
    if clear is not None:  # threadpoolctl < 3.8 has no controlling thread
        clear(force=True)


def _set_blas_threads(n: int) -> None:
    """Size every BLAS library's pool to ``n``, from whichever thread calls."""
    global _requested
    with _lock:
        _release_control()  # a thread that took control and did not release it must not swallow this change
        for lib in _blas.lib_controllers:
            lib.set_num_threads(n)
        _release_control()
        _requested = n


def apply_default() -> None:
    """Limit BLAS to one thread unless the environment sizes it (Note [BLAS threads]).

    Called once, by ``import agrad``.
    """
    if not any(os.environ.get(name) for name in USER_VARIABLES):
        _set_blas_threads(1)


def set_num_threads(num: int) -> None:
    """Set the number of threads BLAS uses for one kernel (intra-op parallelism).

    Mirrors ``torch.set_num_threads``: same validation, same errors.  agrad
    runs BLAS with one thread by default (or as ``OPENBLAS_NUM_THREADS``,
    ``OMP_NUM_THREADS`` … say), because the engine already runs independent
    kernels in parallel (:func:`agrad.get_num_interop_threads`); a program
    dominated by a few huge matrix products gets BLAS's threads back with
    ``agrad.set_num_threads(os.cpu_count())``.

    The setting is process-wide (numpy's BLAS has one thread pool per
    process), so it also applies to numpy products outside agrad.  As with
    PyTorch, call it before running kernels: resizing BLAS's pool while
    another thread is inside a BLAS call is unsafe.

    Args:
        num: threads per BLAS call, a positive int.

    Example::

        >>> import agrad
        >>> before = agrad.get_num_threads()
        >>> agrad.set_num_threads(2)
        >>> agrad.get_num_threads()
        2
        >>> agrad.set_num_threads(before)
    """
    if isinstance(num, bool) or not isinstance(num, int | numpy.integer):
        raise RuntimeError(f"set_num_threads expects an int, but got {_type_name(num)}")
    num = int(num)
    # torch reads a C long long, then narrows it to a C int, with these messages
    if not -(2**63) <= num < 2**63:
        raise ValueError("Overflow when unpacking long long")
    if not -(2**31) <= num < 2**31:
        raise ValueError("Overflow when unpacking long")
    if num <= 0:
        raise RuntimeError("set_num_threads expects a positive integer")
    _set_blas_threads(num)


def get_num_threads() -> int:
    """The number of threads BLAS uses for one kernel (intra-op parallelism).

    Mirrors ``torch.get_num_threads``.  1 by default under agrad, unless a
    BLAS environment variable or :func:`set_num_threads` says otherwise; the
    answer comes from the BLAS library itself, so a change made with
    ``threadpoolctl`` shows too.

    Returns:
        int: the most threads any of numpy's BLAS libraries uses; where
        ``threadpoolctl`` controls none, the last value given to
        :func:`set_num_threads` (1 before any).

    Example::

        >>> import agrad
        >>> agrad.get_num_threads() >= 1
        True
    """
    counts = [n for lib in _blas.lib_controllers if (n := lib.get_num_threads()) is not None]
    return max(counts, default=_requested)
