"""Small models written once for both agrad and PyTorch (the oracle).

``lib`` is the module (``agrad`` or ``torch``); both spell these ops alike, so
one function builds the same graph in either library and their gradients can
be compared number for number.  Parameters are float64 numpy arrays.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import numpy as np

import agrad
from agrad._engine._pool import current_pool
from tests.helpers import WAIT_S

ACTIVATIONS: dict[str, Callable[[Any, Any], Any]] = {
    "tanh": lambda lib, h: lib.tanh(h),
    "relu": lambda lib, h: lib.relu(h),
    "sigmoid": lambda lib, h: lib.sigmoid(h),
}


def mlp_arrays(rng: np.random.Generator, sizes: tuple[int, ...] = (4, 6, 3), batch: int = 5) -> dict[str, np.ndarray]:
    """Weights, biases, an input batch and class targets for :func:`mlp_loss`."""
    arrays: dict[str, np.ndarray] = {}
    for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
        arrays[f"w{i}"] = rng.standard_normal((n_out, n_in))
        arrays[f"b{i}"] = rng.standard_normal(n_out)
    arrays["x"] = rng.standard_normal((batch, sizes[0]))
    arrays["target"] = rng.integers(0, sizes[-1], size=batch)
    return arrays


def leaves(lib: Any, arrays: dict[str, np.ndarray]) -> dict[str, Any]:
    """Tensors of ``lib`` for ``arrays``: parameters require grad, data and targets do not."""
    return {
        k: lib.tensor(v.copy(), requires_grad=k.startswith(("w", "b")))
        for k, v in arrays.items()
    }


def mlp_logits(lib: Any, p: dict[str, Any], activation: str = "tanh") -> Any:
    """``x -> linear -> activation -> ... -> linear`` (logits)."""
    f = lib.nn.functional
    n_layers = sum(1 for k in p if k.startswith("w"))
    h = p["x"]
    for i in range(n_layers):
        h = f.linear(h, p[f"w{i}"], p[f"b{i}"])
        if i < n_layers - 1:
            h = ACTIVATIONS[activation](lib, h)
    return h


def mlp_loss(lib: Any, p: dict[str, Any], activation: str = "tanh", loss: str = "cross_entropy") -> Any:
    """A scalar loss of the MLP: ``cross_entropy`` or the mean NLL of ``log_softmax``."""
    f = lib.nn.functional
    logits = mlp_logits(lib, p, activation)
    if loss == "cross_entropy":
        return f.cross_entropy(logits, p["target"])
    if loss == "log_softmax":
        return f.nll_loss(f.log_softmax(logits, dim=1), p["target"])
    raise ValueError(loss)


def params(p: dict[str, Any]) -> list[str]:
    """Names of the entries that require grad, in a stable order."""
    return sorted(k for k, v in p.items() if v.requires_grad)


def to_numpy(t: Any) -> np.ndarray:
    """An agrad or torch tensor as a numpy array (copy)."""
    if isinstance(t, agrad.Tensor):
        return np.array(t.detach().numpy())
    return t.detach().numpy().copy()


def assert_close(actual: Any, expected: Any, rtol: float = 1e-10, atol: float = 1e-12) -> None:
    """Compare an agrad tensor with a torch tensor (or anything array-like)."""
    a = to_numpy(actual) if not isinstance(actual, np.ndarray) else actual
    e = expected if isinstance(expected, np.ndarray) else to_numpy(expected)
    assert a.shape == e.shape, (a.shape, e.shape)
    np.testing.assert_allclose(a, e, rtol=rtol, atol=atol)


# -- concurrency helpers: exact sums and forced overlap ----------------------------------------


def grads(p: dict[str, agrad.Tensor]) -> dict[str, np.ndarray | None]:
    """A copy of each leaf's ``.grad`` (None where it has none)."""
    return {k: (None if t.grad is None else t.grad.numpy().copy()) for k, t in p.items()}


def assert_exactly_equal(actual: dict[str, Any], expected: dict[str, Any]) -> None:
    """Bit-for-bit equal float64 gradients (the tests use integer values, so any
    order of accumulation gives the same sum)."""
    assert actual.keys() == expected.keys()
    for k in expected:
        if expected[k] is None:
            assert actual[k] is None, k
            continue
        assert actual[k] is not None, k
        assert actual[k].dtype == np.float64
        assert (actual[k] == expected[k]).all(), (k, actual[k], expected[k])


def make_rendezvous(n: int) -> tuple[Any, dict[str, Any]]:
    """A custom Function whose ``async def backward`` returns only once ``n``
    backwards reached it: concurrency forced, never hoped for."""
    state: dict[str, Any] = {"arrived": 0, "all": anyio.Event()}

    class Rendezvous(agrad.autograd.Function):
        @staticmethod
        def forward(ctx, h):
            return h * 1.0

        @staticmethod
        async def backward(ctx, g):
            state["arrived"] += 1
            if state["arrived"] == n:
                state["all"].set()
            await state["all"].wait()
            return g

    return Rendezvous.apply, state


# -- the kernel pool ------------------------------------------------------------------------------

WAIT = WAIT_S  # how long a forced rendezvous or a worker's exit may take before a test fails


async def pool_is_idle() -> None:
    """No kernel in flight or queued and no task in line in this loop's pool, and
    its workers give their threads back."""
    pool = current_pool()
    assert pool.running == 0 and pool._helpers == 0 and not pool._queue and not pool._waiting
    with anyio.fail_after(WAIT):
        while pool._workers:  # noqa: ASYNC110  (a count the workers' threads lower)
            await anyio.sleep(0.001)
