"""The CUDA backend: CuPy arrays, kernels on one engine stream per device.

Imported by the registry at start-up but CuPy itself only by :meth:`load`,
when a CUDA device is first used; install it with ``pip install 'agrad[cuda]'``.

Note [Engine streams]
~~~~~~~~~~~~~~~~~~~~~
Each CUDA device has one *engine stream*, created on first use, on which
every backward kernel for that device is launched (the device's worker makes
it current around each job, ``agrad._backends.on(dev, engine=True)``); the
forward runs on the caller's current stream, as CuPy code does.  Ordering:

* *forward before backward*: when a graph task first sends work to a device,
  the engine stream waits on an event recorded on the caller's current stream
  (:meth:`join_caller`).  The engine stream is also created *blocking*
  (``non_blocking=False``), so it is ordered with CUDA's legacy default
  stream, CuPy's default.
* *inside the backward*: every kernel of a device is on the one stream: a
  job's kernels, the conforming of the gradients it produced (the graph task
  routes them inside the producer's context), and every InputBuffer sum (inside
  the consumer's, as PyTorch's ``InputBuffer::add``).  Producer and consumer on
  one device share the stream, so producer-before-consumer holds by stream
  order; a gradient that crosses devices was copied after the worker waited
  for the producer's device (below).
* *backward before the caller*: a graph task awaits :meth:`when_idle` of each
  device it used before it commits ``.grad`` (a host callback queued behind
  its kernels, handed to the event loop thread-safely), so when ``backward``
  returns its gradients are computed and any later work, on any stream, sees
  them.  A node whose gradient leaves the device (to the host or another
  device) first waits the same way, so its copy never blocks the loop for
  kernels queued before it.

Memory comes from CuPy's default memory pool, which caches freed blocks, so a
steady training loop allocates from the pool and not from the driver.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from agrad._backends._base import Backend

__all__ = ["CupyBackend"]


class CupyBackend(Backend):
    type = "cuda"

    def __init__(self) -> None:
        self._cupy: Any = None
        self._streams: dict[int, Any] = {}

    def load(self) -> None:
        try:
            import cupy
        except ImportError as exc:
            raise RuntimeError(
                "agrad's CUDA backend needs CuPy, which is not installed: pip install 'agrad[cuda]' "
                "(or the cupy-cudaXXx wheel matching your CUDA toolkit)"
            ) from exc
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except cupy.cuda.runtime.CUDARuntimeError as exc:
            raise RuntimeError(f"No CUDA GPUs are available ({exc})") from exc
        if count == 0:
            raise RuntimeError("No CUDA GPUs are available")
        self._cupy = cupy
        self.xp = cupy
        self.array_types = (cupy.ndarray,)

    def device_count(self) -> int:
        return int(self._cupy.cuda.runtime.getDeviceCount())

    def current_index(self) -> int:
        return int(self._cupy.cuda.runtime.getDevice())

    def index_of(self, array: Any) -> int:
        return int(array.device.id)

    def stream(self, index: int) -> Any:
        """Device ``index``'s engine stream (Note [Engine streams])."""
        s = self._streams.get(index)
        if s is None:
            with self._cupy.cuda.Device(index):
                s = self._streams[index] = self._cupy.cuda.Stream(non_blocking=False)
        return s

    @contextlib.contextmanager
    def context(self, index: int, engine: bool) -> Iterator[None]:
        with self._cupy.cuda.Device(index):
            if engine:
                with self.stream(index):
                    yield
            else:
                yield

    def from_host(self, array: np.ndarray, index: int) -> Any:
        with self._cupy.cuda.Device(index):
            if array.ndim == 0:
                # A scalar (Note [Mixed devices]) becomes a fill kernel on the current
                # stream: a copy from pageable host memory would first wait for
                # every kernel queued on that stream, on the loop's thread.
                return self._cupy.full((), array[()], array.dtype)
            return self._cupy.asarray(array)

    def to_host(self, array: Any) -> np.ndarray:
        return self._cupy.asnumpy(array)

    def move(self, array: Any, index: int) -> Any:
        cp = self._cupy
        src = cp.ascontiguousarray(array)
        with cp.cuda.Device(index):
            out = cp.empty(src.shape, src.dtype)
            out.data.copy_from_device(src.data, src.nbytes)
        return out

    def join_caller(self, index: int) -> None:
        cp = self._cupy
        engine = self.stream(index)
        with cp.cuda.Device(index):
            caller = cp.cuda.get_current_stream()
            if caller.ptr == engine.ptr:
                return
            event = cp.cuda.Event(block=False, disable_timing=True)
            event.record(caller)
            engine.wait_event(event)

    def when_idle(self, index: int, callback: Callable[[], None]) -> None:
        # A host function queued behind the kernels: CUDA calls it on its own
        # thread once they are done; ``callback`` only hands over to the loop
        # (no CUDA call is allowed there).
        self.stream(index).launch_host_func(lambda _: callback(), None)

    def synchronize(self, index: int) -> None:
        self.stream(index).synchronize()
