"""Fixtures of the engine tests: the entry points in their awaited and blocking forms.

Every entry point exists twice: a coroutine (``await loss.backward()``) and a
blocking twin (``loss.backward_sync()``).  The ``api`` fixture hands a test one
of them behind the same awaitable signature, so each assertion is written once
and checked three ways: awaited with the default scheduling, awaited with every
kernel forced into an executor thread (``offload="always"``: the thread path,
which the tests' small arrays would never take by size), and blocking.  The
blocking twin is called in place, from inside the running event loop (the
hardest place to call it from: it must not deadlock on, or start a second loop
in, the thread it blocks).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

import agrad
from agrad._ops._registry import REGISTRY
from agrad.autograd.graph import engine_options
from tests.helpers import blocking_on_the_loop


class Api:
    """The entry points under test, all awaitable.

    ``blocking=False`` awaits agrad's coroutines (``offload`` is the engine
    option they run with); ``blocking=True`` calls the blocking twins
    (``backward_sync``, ``grad_sync``) and returns their result.
    """

    def __init__(self, blocking: bool, offload: str = "auto") -> None:
        self.blocking = blocking
        self.offload = offload

    def __repr__(self) -> str:
        return f"Api(blocking={self.blocking}, offload={self.offload!r})"

    def _scheduling(self) -> Any:
        # Blocking: called on the loop's thread on purpose (see the module's docstring).
        return blocking_on_the_loop() if self.blocking else engine_options(offload=self.offload)

    async def backward(self, tensors: Any, grad_tensors: Any = None, **kwargs: Any) -> None:
        """``agrad.autograd.backward`` / ``backward_sync``."""
        with self._scheduling():
            if self.blocking:
                agrad.autograd.backward_sync(tensors, grad_tensors, **kwargs)
            else:
                await agrad.autograd.backward(tensors, grad_tensors, **kwargs)

    async def tensor_backward(self, tensor: agrad.Tensor, gradient: Any = None, **kwargs: Any) -> None:
        """``Tensor.backward`` / ``Tensor.backward_sync``."""
        with self._scheduling():
            if self.blocking:
                tensor.backward_sync(gradient, **kwargs)
            else:
                await tensor.backward(gradient, **kwargs)

    async def grad(self, outputs: Any, inputs: Any, grad_outputs: Any = None, **kwargs: Any) -> tuple:
        """``agrad.autograd.grad`` / ``grad_sync``."""
        with self._scheduling():
            if self.blocking:
                return agrad.autograd.grad_sync(outputs, inputs, grad_outputs, **kwargs)
            return await agrad.autograd.grad(outputs, inputs, grad_outputs, **kwargs)


@pytest.fixture(params=[Api(blocking=False), Api(blocking=False, offload="always"), Api(blocking=True)],
                ids=["awaited", "offloaded", "blocking"])
def api(request: pytest.FixtureRequest) -> Api:
    return request.param


@pytest.fixture
def product_blocks(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, int]]:
    """``(op, rows, thread)`` per call of the matrix products' forward kernels
    (``matmul``, ``mm``, ``addmm``): where their row blocks ran (Note [Products
    in row blocks])."""
    calls: list[tuple[str, int, int]] = []
    for name in ("matmul", "mm", "addmm"):
        op = REGISTRY[name]

        def recorded(xp: Any, *arrays: Any, _forward: Any = op.forward, _name: str = name,
                     _k: int = op.split_rows, **attrs: Any) -> Any:
            calls.append((_name, arrays[_k].shape[0], threading.get_ident()))
            return _forward(xp, *arrays, **attrs)

        monkeypatch.setitem(vars(op), "forward", recorded)
    return calls
