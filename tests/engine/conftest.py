"""Fixtures of the engine tests: the entry points in their awaited and blocking forms.

Every entry point exists twice: a coroutine (``await loss.backward()``) and a
blocking twin (``loss.backward_sync()``).  The ``api`` fixture hands a test one
of the two behind the same awaitable signature, so each assertion is written
once and checked against both.  The blocking twin is called in place, from
inside the running event loop (the hardest place to call it from: it must not
deadlock on, or start a second loop in, the thread it blocks).
"""

from __future__ import annotations

from typing import Any

import pytest

import agrad


class Api:
    """The entry points under test, all awaitable.

    ``blocking=False`` awaits agrad's coroutines; ``blocking=True`` calls the
    blocking twins (``backward_sync``, ``grad_sync``) and returns their result.
    """

    def __init__(self, blocking: bool) -> None:
        self.blocking = blocking

    def __repr__(self) -> str:
        return f"Api(blocking={self.blocking})"

    async def backward(self, tensors: Any, grad_tensors: Any = None, **kwargs: Any) -> None:
        """``agrad.autograd.backward`` / ``backward_sync``."""
        if self.blocking:
            agrad.autograd.backward_sync(tensors, grad_tensors, **kwargs)
        else:
            await agrad.autograd.backward(tensors, grad_tensors, **kwargs)

    async def tensor_backward(self, tensor: agrad.Tensor, gradient: Any = None, **kwargs: Any) -> None:
        """``Tensor.backward`` / ``Tensor.backward_sync``."""
        if self.blocking:
            tensor.backward_sync(gradient, **kwargs)
        else:
            await tensor.backward(gradient, **kwargs)

    async def grad(self, outputs: Any, inputs: Any, grad_outputs: Any = None, **kwargs: Any) -> tuple:
        """``agrad.autograd.grad`` / ``grad_sync``."""
        if self.blocking:
            return agrad.autograd.grad_sync(outputs, inputs, grad_outputs, **kwargs)
        return await agrad.autograd.grad(outputs, inputs, grad_outputs, **kwargs)


@pytest.fixture(params=[False, True], ids=["awaited", "blocking"])
def api(request: pytest.FixtureRequest) -> Api:
    return Api(blocking=request.param)
