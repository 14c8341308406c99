"""Property tests (hypothesis) against PyTorch.

* Elementwise binary ops over random mutually broadcastable shapes: values and
  the gradients of both operands (broadcasting undone by the engine) match.
* Random expression graphs over 2-3 leaves, built from the op table itself
  (every elementwise-callable differentiable entry), with shared
  subexpressions: the leaves' gradients match.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays, mutually_broadcastable_shapes

import agrad
from agrad._ops._registry import REGISTRY
from tests.helpers import requires_torch, torch

pytestmark = requires_torch

SETTINGS = settings(max_examples=40, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])

BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
}

_values = st.floats(-3.0, 3.0, allow_nan=False, allow_subnormal=False)
# Divisors stay away from zero, where the quotient's gradient blows up.
_divisors = st.one_of(st.floats(0.5, 3.0), st.floats(-3.0, -0.5))


@st.composite
def _operands(draw: st.DrawFn, op: str) -> tuple[np.ndarray, np.ndarray]:
    shapes = draw(mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, min_side=0, max_side=3))
    left_shape, right_shape = shapes.input_shapes
    left = draw(arrays(np.float64, left_shape, elements=_values))
    right = draw(arrays(np.float64, right_shape, elements=_divisors if op == "div" else _values))
    return left, right


def _leaves(lib: Any, arrays_: tuple[np.ndarray, ...]) -> list[Any]:
    return [lib.tensor(a, dtype=lib.float64, requires_grad=True) for a in arrays_]


@pytest.mark.parametrize("op", list(BINARY))
@SETTINGS
@given(data=st.data())
def test_broadcasting_binary_ops_match_torch(op: str, data: st.DataObject) -> None:
    left, right = data.draw(_operands(op))
    ours, theirs = _leaves(agrad, (left, right)), _leaves(torch, (left, right))
    out, expected = BINARY[op](*ours), BINARY[op](*theirs)
    assert out.shape == tuple(expected.shape)
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-12, atol=1e-12)

    grad_output = data.draw(arrays(np.float64, out.shape, elements=_values))
    out.backward_sync(agrad.tensor(grad_output))
    expected.backward(torch.from_numpy(grad_output))
    for mine, ref in zip(ours, theirs, strict=True):
        assert mine.grad.shape == tuple(ref.grad.shape)
        np.testing.assert_allclose(mine.grad.numpy(), ref.grad.numpy(), rtol=1e-10, atol=1e-12)


# -- random expression graphs ---------------------------------------------------


def _graph_ops() -> list[tuple[str, int]]:
    """Every differentiable op of the table that acts elementwise on one or two
    (2, 3) float matrices with no attributes: judged from its own samples
    (called that way), then probed to map (2, 3) operands in [0.5, 1.5] to a
    finite (2, 3) result.  These are the building blocks of random graphs; a new op
    joins by its entry alone."""
    probe = agrad.tensor(np.linspace(0.5, 1.5, 6).reshape(2, 3))
    ops = []
    for name, op in sorted(REGISTRY.items()):
        if op.vjps is None or op.ref is None or op.samples is None or op.variadic:
            continue
        for args, kwargs in op.samples(np.random.default_rng(0)):
            plain = all(isinstance(a, np.ndarray) and a.dtype.kind == "f" and a.ndim == 2 for a in args)
            if kwargs or not plain or len(args) not in (1, 2) or len({a.shape for a in args}) != 1:
                continue
            try:
                out = op.public(*[probe] * len(args))
                # finite on the probe: ops defined on part of it only (asin, acosh, logit...) make NaN
                # programs, whose comparison with PyTorch says nothing
                elementwise = out.shape == probe.shape and bool(np.isfinite(out.detach().numpy()).all())
            except (RuntimeError, ValueError):
                elementwise = False
            if elementwise:
                ops.append((name, len(args)))
            break
    return ops


GRAPH_OPS = _graph_ops()

# A program is a list of steps; each step applies an op to earlier values
# (leaves first), so values can be reused and the graph is a DAG.
_Step = tuple[str, int, int]


@st.composite
def _programs(draw: st.DrawFn) -> tuple[int, list[_Step]]:
    n_leaves = draw(st.integers(2, 3))
    steps: list[_Step] = []
    for i in range(draw(st.integers(1, 8))):
        available = n_leaves + i
        name, _ = draw(st.sampled_from(GRAPH_OPS))
        steps.append((name, draw(st.integers(0, available - 1)), draw(st.integers(0, available - 1))))
    return n_leaves, steps


def _run(lib: Any, leaves: list[Any], steps: list[_Step]) -> Any:
    arity = dict(GRAPH_OPS)
    values = list(leaves)
    for name, a, b in steps:
        op = REGISTRY[name]
        fn = op.public if lib is agrad else op.ref(torch)
        # Squash operands into [0.5, 1.5], inside every op's domain (log, sqrt,
        # division, tan…) and away from kinks at 0, so gradients are defined.
        args = [lib.sigmoid(values[i]) + 0.5 for i in (a, b)[: arity[name]]]
        values.append(fn(*args))
    # Sum every leaf into the result, so each one receives a gradient.
    total = values[-1]
    for leaf in leaves:
        total = total + leaf
    return total.sum()


def test_graph_ops_cover_the_table() -> None:
    assert {"exp", "log", "mul", "div", "pow", "tanh", "sigmoid"} <= {name for name, _ in GRAPH_OPS}


@SETTINGS
@given(program=_programs(), seed=st.integers(0, 2**32 - 1))
def test_random_expression_gradients_match_torch(program: tuple[int, list[_Step]], seed: int) -> None:
    n_leaves, steps = program
    rng = np.random.default_rng(seed)
    inputs = tuple(rng.uniform(-2.0, 2.0, size=(2, 3)) for _ in range(n_leaves))
    ours, theirs = _leaves(agrad, inputs), _leaves(torch, inputs)
    out, expected = _run(agrad, ours, steps), _run(torch, theirs, steps)
    np.testing.assert_allclose(out.item(), expected.item(), rtol=1e-9)

    out.backward_sync()
    expected.backward()
    for mine, ref in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(mine.grad.numpy(), ref.grad.numpy(), rtol=1e-8, atol=1e-12)
