"""The structural family (``agrad/_ops/_structure.py``) against PyTorch, beyond the op table's samples.

The table-driven part runs each call on both libraries (``fn(m, *tensors)``
with ``m`` the module, ``agrad`` or ``torch``): values, dtypes and gradients
(float64), values (float32), the nodes recorded and which outputs are views,
and, for the composites, float64 ``gradcheck`` and ``gradgradcheck``.  Inputs
are contiguous leaves; non-contiguous inputs are made inside the call (``x.t()``),
so finite differences perturb the leaf.  Then integer and bool inputs, the
in-place forms, warnings, and the errors of obvious misuse, compared with
PyTorch's exception types and messages.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
from agrad.autograd import gradcheck, gradgradcheck
from tests.helpers import non_contiguous, requires_torch, torch

_rng = np.random.default_rng(11)
M = _rng.standard_normal((3, 4))
M2 = _rng.standard_normal((3, 4))
SQ = _rng.standard_normal((4, 4))
B3 = _rng.standard_normal((2, 3, 4))
B4 = _rng.standard_normal((2, 3, 2, 2))
V = _rng.standard_normal(4)
V3 = _rng.standard_normal(3)
V2 = _rng.standard_normal(2)
S = np.asarray(_rng.standard_normal())
E = np.zeros((0, 3))
I3 = np.array([1, 0, 2])
IDX = np.array([1, 3])
SECTIONS = np.array(2)


class Case:
    """A call ``fn(m, *tensors)`` of module ``m`` (``agrad`` or ``torch``) on tensors
    made from ``inputs`` (float arrays require grad; integer arrays are plain tensors)."""

    def __init__(self, fn: Callable[..., Any], *inputs: np.ndarray) -> None:
        self.fn = fn
        self.inputs = inputs


CASES: dict[str, Case] = {
    # triangles, in place (the out-of-place forms are table entries)
    "tril_-clone": Case(lambda m, x: x.clone().tril_(1), M),
    "triu_-clone": Case(lambda m, x: (x * 2).triu_(-1), B3),
    "tril_-view": Case(lambda m, x: _write_then_read(x, lambda v: v.tril_()), M),
    "tril-noncontiguous": Case(lambda m, x: m.tril(x.t(), -1), M),
    "triu-method-noncontiguous": Case(lambda m, x: x.transpose(0, 2).triu(1), B3),
    # diagonals
    "diag-vector": Case(lambda m, v: m.diag(v), V),
    "diag-vector-offset": Case(lambda m, v: m.diag(v, -2), V),
    "diag-matrix": Case(lambda m, x: m.diag(x), M),
    "diag-matrix-method-offset": Case(lambda m, x: x.diag(1), M),
    "diag-matrix-noncontiguous": Case(lambda m, x: m.diag(x.t(), -1), M),
    "diag-empty": Case(lambda m, x: m.diag(x), E),
    "diagflat": Case(lambda m, x: m.diagflat(x), M),
    "diagflat-0d-offset": Case(lambda m, s: m.diagflat(s, 1), S),
    "diagflat-method-noncontiguous": Case(lambda m, x: x.t().diagflat(-1), M),
    "diag_embed-noncontiguous": Case(lambda m, x: m.diag_embed(x.t(), 1, 0, 2), M),
    "trace-noncontiguous": Case(lambda m, x: m.trace(x.t()), M),
    "unfold-noncontiguous": Case(lambda m, x: x.t().unfold(0, 2, 1), M),
    "unfold-overlapping-sum": Case(lambda m, x: x.unfold(-1, 3, 1).sum(-1), B3),
    "t-of-t": Case(lambda m, x: m.t(x).t(), M),
    "block_diag-noncontiguous": Case(lambda m, x, v: m.block_diag(x.t(), v, x[:1, :2]), M, V),
    "rot90-noncontiguous": Case(lambda m, x: x.transpose(0, 2).rot90(1, (1, 2)), B3),
    # products of structure
    "kron-matrix-vector": Case(lambda m, x, v: m.kron(x, v), M, V),
    "kron-3d-2d": Case(lambda m, a, b: m.kron(a, b), B3, SQ[:2, :3]),
    "kron-0d": Case(lambda m, s, x: m.kron(s, x), S, M),
    "kron-method": Case(lambda m, v, w: v.kron(w), V, V3),
    "cartesian_prod-2": Case(lambda m, v, w: m.cartesian_prod(v, w), V, V3),
    "cartesian_prod-3": Case(lambda m, v, w, u: m.cartesian_prod(v, w, u), V3, V2, V),
    "cartesian_prod-1": Case(lambda m, v: m.cartesian_prod(v), V),
    "combinations": Case(lambda m, v: m.combinations(v), V),
    "combinations-3": Case(lambda m, v: m.combinations(v, 3), V),
    "combinations-replacement": Case(lambda m, v: m.combinations(v, 2, with_replacement=True), V3),
    "combinations-1": Case(lambda m, v: m.combinations(v, r=1), V3),
    "combinations-too-many": Case(lambda m, v: m.combinations(v, 4), V3),
    # splitting
    "tensor_split-sections": Case(lambda m, x: m.tensor_split(x, 3, dim=1), M),
    "tensor_split-more-sections-than-elements": Case(lambda m, x: m.tensor_split(x, 5, 1), M),
    "tensor_split-indices": Case(lambda m, x: m.tensor_split(x, [3, 1, -1], dim=-1), M),
    "tensor_split-indices-beyond": Case(lambda m, x: x.tensor_split((1, 10)), M),
    "tensor_split-tensor-indices": Case(lambda m, x, i: m.tensor_split(x, i, 1), M, IDX),
    "tensor_split-tensor-sections": Case(lambda m, x, i: x.tensor_split(i, dim=0), M, SECTIONS),
    "tensor_split-noncontiguous": Case(lambda m, x: m.tensor_split(x.t(), 2), M),
    "hsplit-matrix": Case(lambda m, x: m.hsplit(x, 2), M),
    "hsplit-vector-indices": Case(lambda m, v: m.hsplit(v, [1, 2]), V),
    "vsplit": Case(lambda m, x: x.vsplit([1]), M),
    "dsplit": Case(lambda m, x: m.dsplit(x, 2), B3),
    # stacking
    "hstack-vectors": Case(lambda m, v, w: m.hstack([v, w]), V, V3),
    "hstack-matrices": Case(lambda m, x, y: m.hstack((x, y[:, :1])), M, M2),
    "vstack": Case(lambda m, x, v, s: m.vstack([x, v, v]), M, V, S),
    "row_stack": Case(lambda m, x, v: m.row_stack([x, v]), M, V),
    "dstack": Case(lambda m, x, y, v: m.dstack([x, y, x[:, :, None]]), M, M2, V),
    "dstack-vectors": Case(lambda m, v, s: m.dstack([v, v]), V, S),
    "column_stack": Case(lambda m, v, x, s: m.column_stack([v[:3], x, s.reshape(1).expand(3)]), V, M, S),
    "column_stack-scalars": Case(lambda m, s, t: m.column_stack([s, t]), S, np.asarray(2.0)),
    "concat": Case(lambda m, x, y: m.concat([x, y], dim=1), M, M2),
    "concatenate-axis": Case(lambda m, x, y: m.concatenate([x, y], axis=0), M, M2),
    "atleast_1d-0d": Case(lambda m, s: m.atleast_1d(s), S),
    "atleast_1d-many": Case(lambda m, s, v, x: m.atleast_1d(s, v, x), S, V, M),
    "atleast_2d-sequence": Case(lambda m, s, v, x: m.atleast_2d([s, v, x]), S, V, M),
    "atleast_3d-many": Case(lambda m, s, v, x, b: m.atleast_3d((s, v, x, b)), S, V, M, B3),
    "broadcast_tensors": Case(lambda m, x, v, c: m.broadcast_tensors(x, v, c), M, V, M[:, :1]),
    "broadcast_tensors-0d": Case(lambda m, s, v: m.broadcast_tensors(s, v), S, V),
    "meshgrid-ij": Case(lambda m, v, w: m.meshgrid(v, w, indexing="ij"), V, V3),
    "meshgrid-xy-3": Case(lambda m, v, w, s: m.meshgrid(v, w, s, indexing="xy"), V, V3, S),
    "meshgrid-sequence": Case(lambda m, v, w: m.meshgrid([v, w], indexing="xy"), V, V3),
    "meshgrid-one": Case(lambda m, v: m.meshgrid(v, indexing="xy"), V),
    # moved and swapped dims
    "movedim-int": Case(lambda m, x: m.movedim(x, 0, -1), B3),
    "movedim-tuple": Case(lambda m, x: m.movedim(x, (0, 3), (2, 0)), B4),
    "movedim-0d": Case(lambda m, s: m.movedim(s, 0, -1), S),
    "moveaxis-method": Case(lambda m, x: x.moveaxis([1], [0]), B3),
    "movedim-identity": Case(lambda m, x: x.movedim(1, 1), M),
    "swapaxes": Case(lambda m, x: m.swapaxes(x, 0, 2), B3),
    "swapaxes-method": Case(lambda m, x: x.swapaxes(-1, 0), M),
    "swapdims": Case(lambda m, x: m.swapdims(x, 1, 2), B3),
    "swapdims-method": Case(lambda m, x: x.swapdims(0, 1), M),
    "adjoint": Case(lambda m, x: m.adjoint(x), B3),
    "adjoint-method": Case(lambda m, x: x.adjoint(), M),
    "ravel": Case(lambda m, x: m.ravel(x), B3),
    "ravel-noncontiguous": Case(lambda m, x: x.t().ravel(), M),
    "unflatten": Case(lambda m, x: m.unflatten(x, 1, (2, -1)), M),
    "unflatten-method": Case(lambda m, x: x.unflatten(-1, [2, 1, 2]), B3),
    "fliplr": Case(lambda m, x: m.fliplr(x), B3),
    "flipud": Case(lambda m, v: v.flipud(), V),
    "reshape_as": Case(lambda m, x, y: x.reshape_as(y), M, np.zeros((6, 2), dtype=np.int64)),
    # repeats and differences
    "repeat_interleave-flat": Case(lambda m, x: m.repeat_interleave(x, 2), M),
    "repeat_interleave-dim": Case(lambda m, x: x.repeat_interleave(3, dim=1), M),
    "repeat_interleave-0d": Case(lambda m, s: s.repeat_interleave(3), S),
    "repeat_interleave-output_size": Case(lambda m, x: x.repeat_interleave(2, -2, output_size=6), M),
    "repeat_interleave-tensor": Case(lambda m, x, r: m.repeat_interleave(x, r, dim=0), M, I3),
    "repeat_interleave-tensor-flat": Case(lambda m, v, r: v[:3].repeat_interleave(r, output_size=3), V, I3),
    "repeat_interleave-tensor-one": Case(lambda m, x, r: x.repeat_interleave(r[:1], dim=1), M, I3),
    "repeat_interleave-zero": Case(lambda m, x: x.repeat_interleave(0, dim=1), M),
    "diff": Case(lambda m, x: m.diff(x), M),
    "diff-n2-dim0": Case(lambda m, x: x.diff(n=2, dim=0), M),
    "diff-prepend-append": Case(lambda m, x, p, a: m.diff(x, 1, 0, p, a), M, M2[:1], M2),
    "diff-prepend-only": Case(lambda m, v, p: v.diff(prepend=p), V, V3),
    "diff-n0": Case(lambda m, x: m.diff(x, n=0), M),
    "diff-n-beyond": Case(lambda m, v: m.diff(v, n=6), V),
    "diff-noncontiguous": Case(lambda m, x: m.diff(x.t(), n=2, dim=1), M),
}


def _write_then_read(x: Any, write: Callable[[Any], Any]) -> Any:
    """Write in place into a view of a copy of ``x``, and return the copy (CopySlices)."""
    base = x * 1
    write(base[1:])
    return base


# Composites not to run under finite differences: none are ill-conditioned
# (every case is piecewise linear), so the list is empty by design.
PARAMS = [pytest.param(case, id=name) for name, case in CASES.items()]


def _is_float(a: np.ndarray) -> bool:
    return a.dtype.kind == "f"


def _agrad_inputs(case: Case, dtype: Any) -> list[Any]:
    return [agrad.tensor(a, dtype=dtype if _is_float(a) else None, requires_grad=_is_float(a)) for a in case.inputs]


def _torch_inputs(case: Case, dtype: Any) -> list[Any]:
    return [torch.tensor(a, dtype=dtype if _is_float(a) else None, requires_grad=_is_float(a)) for a in case.inputs]


def _outputs(out: Any) -> tuple[Any, ...]:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _assert_same(mine: Any, ref: Any, **tol: float) -> None:
    assert mine.shape == tuple(ref.shape), f"shape {mine.shape} != {tuple(ref.shape)}"
    assert mine.dtype.name == str(ref.dtype).removeprefix("torch."), f"dtype {mine.dtype} != {ref.dtype}"
    np.testing.assert_allclose(mine.detach().numpy(), ref.detach().numpy(), **tol)


def _weighted_sum(outs: tuple[Any, ...], weights: list[np.ndarray], tensor: Callable[[np.ndarray], Any]) -> Any:
    total = None
    for o, w in zip(outs, weights):
        if o.requires_grad:
            term = (o * tensor(w)).sum()
            total = term if total is None else total + term
    return total


@requires_torch
@pytest.mark.parametrize("case", PARAMS)
def test_matches_torch_float64(case: Case) -> None:
    """Values, dtypes, and the gradients of every float input, equal PyTorch's."""
    _check_against_torch(case, _agrad_inputs(case, agrad.float64))


@requires_torch
@pytest.mark.parametrize("case", [p for p in PARAMS
                                  if any(_is_float(a) and not non_contiguous(a).flags.c_contiguous
                                         for a in p.values[0].inputs)])
def test_matches_torch_on_non_contiguous_inputs(case: Case) -> None:
    """The same, every float input a leaf over non-contiguous memory."""
    _check_against_torch(case, [agrad.from_numpy(non_contiguous(a.astype(np.float64))).requires_grad_()
                                if _is_float(a) else t
                                for a, t in zip(case.inputs, _agrad_inputs(case, agrad.float64))])


def _check_against_torch(case: Case, ours: list[Any]) -> None:
    theirs = _torch_inputs(case, torch.float64)
    out, expected = _outputs(case.fn(agrad, *ours)), _outputs(case.fn(torch, *theirs))
    assert len(out) == len(expected)
    for o, e in zip(out, expected):
        _assert_same(o, e, rtol=1e-12, atol=1e-12)
        assert o.requires_grad == e.requires_grad
    rng = np.random.default_rng(5)
    weights = [rng.standard_normal(tuple(e.shape)) for e in expected]
    mine = _weighted_sum(out, weights, agrad.tensor)
    if mine is None:
        return
    mine.backward_sync()
    _weighted_sum(expected, weights, torch.tensor).backward()
    for a, t in zip(ours, theirs):
        if t.requires_grad:
            if t.grad is None:
                assert a.grad is None or not np.any(a.grad.numpy())
            else:
                _assert_same(a.grad, t.grad, rtol=1e-12, atol=1e-12)


@requires_torch
@pytest.mark.parametrize("case", PARAMS)
def test_matches_torch_float32(case: Case) -> None:
    """The same calls in float32 keep float32 and give PyTorch's values."""
    out = _outputs(case.fn(agrad, *_agrad_inputs(case, agrad.float32)))
    expected = _outputs(case.fn(torch, *_torch_inputs(case, torch.float32)))
    for o, e in zip(out, expected, strict=True):
        _assert_same(o, e, rtol=1e-6, atol=1e-6)


# Nodes agrad names differently: kron's last (Note [Structural composites]),
# and the CopySlices of a write through a view, in agrad's namespace.
NODE_DIFFERENCES = {"UnsafeViewBackward0": "ViewBackward0",
                    "torch::autograd::CopySlices": "agrad::autograd::CopySlices"}
# ``diff(x, n=0)`` is a copy: PyTorch's ``copy_`` into a new tensor, agrad's ``clone`` (CloneBackward0).
NODES_NOT_COMPARED = {"diff-n0"}


@requires_torch
@pytest.mark.parametrize("case", [p for p in PARAMS if p.id not in NODES_NOT_COMPARED])
def test_records_torchs_nodes(case: Case) -> None:
    """Each output's ``grad_fn`` has PyTorch's name (composites: their last primitive's)."""
    out = _outputs(case.fn(agrad, *_agrad_inputs(case, agrad.float64)))
    expected = _outputs(case.fn(torch, *_torch_inputs(case, torch.float64)))
    for o, e in zip(out, expected, strict=True):
        name = None if e.grad_fn is None else e.grad_fn.name()
        assert (None if o.grad_fn is None else o.grad_fn.name()) == NODE_DIFFERENCES.get(name, name)


# Not compared: where agrad returns a copy and PyTorch a view of its own
# copy (a ``reshape`` that cannot view: PyTorch reshapes a clone); ``kron``,
# whose result PyTorch makes with ``_unsafe_view`` (not a view) and agrad with
# a view of the product, which nothing else holds; and empty slices, which
# agrad's dispatch does not mark as views (``may_share_memory`` is False for
# an empty array), where PyTorch's are.
NOT_VIEWS = {"repeat_interleave-flat", "repeat_interleave-dim", "repeat_interleave-0d",
             "repeat_interleave-output_size", "repeat_interleave-zero", "ravel-noncontiguous", "cartesian_prod-2",
             "cartesian_prod-3", "kron-matrix-vector", "kron-3d-2d", "kron-0d", "kron-method",
             "tensor_split-more-sections-than-elements", "tensor_split-indices", "tensor_split-indices-beyond"}


@requires_torch
@pytest.mark.parametrize("case", [p for p in PARAMS if p.id not in NOT_VIEWS])
def test_views_where_torch_has_views(case: Case) -> None:
    """An output is a view (sharing its input's memory) exactly where PyTorch's is."""
    out = _outputs(case.fn(agrad, *_agrad_inputs(case, agrad.float64)))
    expected = _outputs(case.fn(torch, *_torch_inputs(case, torch.float64)))
    for o, e in zip(out, expected, strict=True):
        assert o._is_view() == e._is_view()


def _differentiable(case: Case) -> bool:
    return any(_is_float(a) for a in case.inputs)


GRAD_PARAMS = [p for p in PARAMS if _differentiable(p.values[0])]


@pytest.mark.parametrize("case", GRAD_PARAMS)
@pytest.mark.parametrize("check", [gradcheck, gradgradcheck], ids=["grad", "gradgrad"])
def test_gradcheck(case: Case, check: Callable[..., bool]) -> None:
    """First and second derivatives of every call match finite differences (float64)."""
    assert check(lambda *ts: case.fn(agrad, *ts), _agrad_inputs(case, agrad.float64))


# -- integer and bool inputs ---------------------------------------------------------

INTS = np.arange(12).reshape(3, 4) * 3 % 7
BOOLS = INTS % 2 == 0
INT_CASES = {
    "tril": lambda m, x: m.tril(x, 1),
    "triu-method": lambda m, x: x.triu(-1),
    "tril_": lambda m, x: x.clone().tril_(),
    "diag": lambda m, x: m.diag(x[0], 1),
    "diag-matrix": lambda m, x: x.diag(),
    "diag_embed": lambda m, x: m.diag_embed(x),
    "diagflat": lambda m, x: m.diagflat(x[:2]),
    "trace": lambda m, x: m.trace(x),
    "kron": lambda m, x: m.kron(x[:2, :2], x[:1]),
    "block_diag": lambda m, x: m.block_diag(x, x[0], x[0, 0]),
    "cartesian_prod": lambda m, x: m.cartesian_prod(x[0], x[1, :2]),
    "combinations": lambda m, x: m.combinations(x[0], 3),
    "combinations-0": lambda m, x: m.combinations(x[0], 0),
    "tensor_split": lambda m, x: m.tensor_split(x, [1, 3], 1),
    "hstack": lambda m, x: m.hstack([x, x]),
    "vstack": lambda m, x: m.vstack([x, x[0]]),
    "dstack": lambda m, x: m.dstack([x, x]),
    "column_stack": lambda m, x: m.column_stack([x[0, :3], x]),
    "meshgrid": lambda m, x: m.meshgrid(x[0], x[1], indexing="xy"),
    "movedim": lambda m, x: x.movedim(0, 1),
    "t": lambda m, x: m.t(x),
    "rot90": lambda m, x: m.rot90(x, 3),
    "fliplr": lambda m, x: m.fliplr(x),
    "unfold": lambda m, x: x.unfold(1, 2, 2),
    "repeat_interleave": lambda m, x: x.repeat_interleave(2, 0),
    "repeat_interleave-tensor": lambda m, x: x.repeat_interleave(m.tensor([0, 2, 1]), 0),
    "diff": lambda m, x: m.diff(x, n=2),
    "diff-prepend": lambda m, x: m.diff(x, dim=0, prepend=x[:1]),
    "unflatten": lambda m, x: x.unflatten(1, (2, 2)),
}


@requires_torch
@pytest.mark.parametrize("name", list(INT_CASES))
@pytest.mark.parametrize("data", [INTS, INTS.astype(np.int32), BOOLS], ids=["int64", "int32", "bool"])
def test_integer_and_bool_inputs(name: str, data: np.ndarray) -> None:
    """Integer and bool tensors give PyTorch's values and dtypes (``diff`` of bools is ``!=``)."""
    fn = INT_CASES[name]
    try:
        expected = _outputs(fn(torch, torch.tensor(data)))
    except (RuntimeError, NotImplementedError) as exc:  # e.g. trace of bools: the same refusal
        with pytest.raises(type(exc)):
            fn(agrad, agrad.tensor(data))
        return
    out = _outputs(fn(agrad, agrad.tensor(data)))
    for o, e in zip(out, expected, strict=True):
        _assert_same(o, e)


def test_integer_promotion_with_float() -> None:
    """``block_diag``, ``kron`` and ``diff``'s ``prepend`` promote as PyTorch does."""
    i, f = agrad.tensor([1, 2]), agrad.tensor([0.5], dtype=agrad.float32)
    assert agrad.block_diag(i, f).dtype is agrad.float32
    assert agrad.kron(i, f).dtype is agrad.float32
    assert agrad.diff(i, prepend=f).dtype is agrad.float32


# -- creation of indices and shapes ------------------------------------------------------


@requires_torch
@pytest.mark.parametrize("name", ["tril_indices", "triu_indices"])
@pytest.mark.parametrize(("args", "kwargs"), [
    ((3, 3), {}), ((3, 4, 1), {}), ((4, 3, -1), {}), ((3, 3), {"offset": 10}), ((3, 3, -10), {}),
    ((0, 3), {}), ((5, 0), {}), ((3, 4), {"dtype": "int32"}),
])
def test_triangle_indices(name: str, args: tuple, kwargs: dict) -> None:
    ours = getattr(agrad, name)(*args, **{k: getattr(agrad, v) if k == "dtype" else v for k, v in kwargs.items()})
    theirs = getattr(torch, name)(*args, **{k: getattr(torch, v) if k == "dtype" else v for k, v in kwargs.items()})
    _assert_same(ours, theirs)


@requires_torch
@pytest.mark.parametrize("shapes", [
    ((2,), (3, 1), (1, 1, 1)), ((3, 4),), (), (2, (3, 1)), ((0,), (1,)), ([5, 1], (1, 4)), ((2, 1), None, (3,)),
])
def test_broadcast_shapes(shapes: tuple) -> None:
    ours = agrad.broadcast_shapes(*shapes)
    assert isinstance(ours, agrad.Size)
    assert ours == tuple(torch.broadcast_shapes(*shapes))


@requires_torch
def test_repeat_interleave_of_counts_alone() -> None:
    """``repeat_interleave(counts)``: the index ``i`` repeated ``counts[i]`` times, in counts' dtype."""
    for counts in (np.array([1, 2, 0, 3]), np.array([2, 1], dtype=np.int32), np.array([], dtype=np.int64)):
        _assert_same(agrad.repeat_interleave(agrad.tensor(counts)), torch.repeat_interleave(torch.tensor(counts)))
    _assert_same(agrad.repeat_interleave(agrad.tensor([1, 2]), output_size=3),
                 torch.repeat_interleave(torch.tensor([1, 2]), output_size=3))


def test_block_diag_of_nothing() -> None:
    out = agrad.block_diag()
    assert out.shape == (1, 0) and out.dtype is agrad.get_default_dtype()


# -- in place, views, and the unfold view ------------------------------------------------


@pytest.mark.parametrize(("method", "node"), [("tril_", "TrilBackward0"), ("triu_", "TriuBackward0")])
def test_triangle_in_place(method: str, node: str) -> None:
    """``tril_``/``triu_`` write into the tensor, bump its version and record the op's node."""
    leaf = agrad.tensor(M, requires_grad=True)
    x = leaf * 1
    version = x._version
    assert getattr(x, method)(1) is x
    assert x._version == version + 1
    assert x.grad_fn.name() == node
    expected = np.tril(M, 1) if method == "tril_" else np.triu(M, 1)
    np.testing.assert_array_equal(x.detach().numpy(), expected)
    x.sum().backward_sync()
    np.testing.assert_array_equal(leaf.grad.numpy(), expected != 0)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        getattr(agrad.tensor(M, requires_grad=True), method)()


def test_unfold_is_a_view_whose_windows_overlap() -> None:
    """Windows share memory with the input and with each other (Note [Unfold windows])."""
    x = agrad.arange(6.0)
    w = x.unfold(0, 3, 1)
    assert w._base is x and w.shape == (4, 3)
    x[2] = 10.0
    assert w[:, :].tolist() == [[0.0, 1.0, 10.0], [1.0, 10.0, 3.0], [10.0, 3.0, 4.0], [3.0, 4.0, 5.0]]
    leaf = agrad.arange(6.0, requires_grad=True)
    leaf.unfold(0, 3, 1).sum().backward_sync()
    assert leaf.grad.tolist() == [1.0, 2.0, 3.0, 3.0, 2.0, 1.0]


@pytest.mark.parametrize("op", [
    lambda x: x.movedim(0, 2), lambda x: agrad.swapaxes(x, 0, 1), lambda x: x.swapdims(1, 2),
    lambda x: x[0].t(), lambda x: x.adjoint(), lambda x: x.unfold(2, 2, 1), lambda x: x.unflatten(2, (2, 2)),
    lambda x: x.ravel(), lambda x: agrad.atleast_3d(x[0, 0]), lambda x: agrad.tensor_split(x, 2, 1)[1],
])
def test_views_write_through(op: Callable[[Any], Any]) -> None:
    """A write into the input shows in the view these ops return, as in PyTorch."""
    x = agrad.zeros(2, 3, 4)
    v = op(x)
    x.fill_(1.0)
    assert np.all(v.numpy() == 1.0)


def test_t_rejects_in_place_on_leaf_views_like_any_view() -> None:
    leaf = agrad.tensor(M, requires_grad=True)
    with pytest.raises(RuntimeError, match="view of a leaf Variable"):
        leaf.t().mul_(2)


# -- warnings ----------------------------------------------------------------------------


def test_meshgrid_warns_without_indexing() -> None:
    v = agrad.tensor(V)
    with pytest.warns(UserWarning, match="required to pass the indexing argument"):
        a, b = agrad.meshgrid(v, v[:2])
    assert a.shape == b.shape == (4, 2)  # 'ij'


def test_adjoint_of_0d_warns_and_returns_input() -> None:
    s = agrad.tensor(S)
    with pytest.warns(UserWarning, match="adjoint\\(\\) is deprecated on 0-D tensors"):
        assert s.adjoint() is s


# -- errors ------------------------------------------------------------------------------

ERRORS: list[tuple[str, Callable[[Any], Any], type, str]] = [
    ("tril-1d", lambda m: m.tril(m.ones(3)), RuntimeError, "tril: input tensor must have at least 2 dimensions"),
    ("triu_-1d", lambda m: m.ones(3).triu_(), RuntimeError, "triu: input tensor must have at least 2 dimensions"),
    ("tril_indices-row", lambda m: m.tril_indices(-1, 3), RuntimeError, "row must be non-negative, got-1"),
    ("triu_indices-col", lambda m: m.triu_indices(2, -2), RuntimeError, "col must be non-negative, got-2"),
    ("tril_indices-dtype", lambda m: m.tril_indices(2, 2, dtype=m.float32), NotImplementedError,
     "\"tril_indices\" not implemented for 'Float'"),
    ("diag-3d", lambda m: m.diag(m.ones(2, 2, 2)), RuntimeError, "diag\\(\\): Supports 1D or 2D tensors. Got 3D"),
    ("diag-0d", lambda m: m.diag(m.ones(())), RuntimeError, "Got 0D"),
    ("diag_embed-same-dims", lambda m: m.diag_embed(m.ones(2, 3), 0, -1, 2), RuntimeError,
     "diagonal dimensions cannot be identical -1, 2"),
    ("diag_embed-0d", lambda m: m.diag_embed(m.ones(())), IndexError, "Dimension out of range"),
    ("trace-3d", lambda m: m.trace(m.ones(2, 2, 2)), RuntimeError,
     "trace: expected a matrix, but got tensor with dim 3"),
    ("trace-bool", lambda m: m.trace(m.ones(2, 2, dtype=m.bool)), NotImplementedError,
     "\"trace\" not implemented for 'Bool'"),
    ("block_diag-3d", lambda m: m.block_diag(m.ones(2), m.ones(1, 2, 2)), RuntimeError,
     "Input tensors must have 2 or fewer dimensions. Input 1 has 3 dimensions"),
    ("cartesian_prod-2d", lambda m: m.cartesian_prod(m.ones(2, 3)), RuntimeError,
     "Expect a 1D vector, but got shape \\[2, 3\\]"),
    ("cartesian_prod-dtypes", lambda m: m.cartesian_prod(m.ones(2), m.ones(2, dtype=m.int64)), RuntimeError,
     "meshgrid expects all tensors to have the same dtype"),
    ("combinations-negative", lambda m: m.combinations(m.ones(3), -1), RuntimeError,
     "Expect a non-negative number, but got -1"),
    ("combinations-2d", lambda m: m.combinations(m.ones(3, 2)), RuntimeError, "Expect a 1D vector"),
    ("tensor_split-0d", lambda m: m.tensor_split(m.ones(()), 2), RuntimeError,
     "tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims"),
    ("tensor_split-zero", lambda m: m.tensor_split(m.ones(3), 0), RuntimeError,
     "number of sections must be larger than 0, got 0"),
    ("tensor_split-float-indices", lambda m: m.tensor_split(m.ones(3), m.tensor([1.0])), RuntimeError,
     "to have dtype of long, but got Float"),
    ("tensor_split-2d-indices", lambda m: m.tensor_split(m.ones(3), m.tensor([[1]])), RuntimeError,
     "zero-dimensional or one-dimensional tensor, but got a tensor with 2 dims"),
    ("tensor_split-dim", lambda m: m.tensor_split(m.ones(3, 4), 2, dim=5), IndexError, "Dimension out of range"),
    ("hsplit-indivisible", lambda m: m.hsplit(m.ones(3, 4), 3), RuntimeError,
     "torch.hsplit attempted to split along dimension 1, but the size of the dimension 4 is not divisible by the "
     "split_size 3!"),
    ("hsplit-0d", lambda m: m.hsplit(m.ones(()), 1), RuntimeError,
     "torch.hsplit requires a tensor with at least 1 dimension, but got a tensor with 0 dimensions!"),
    ("vsplit-1d", lambda m: m.vsplit(m.ones(3), 3), RuntimeError, "torch.vsplit requires a tensor with at least 2"),
    ("dsplit-indivisible", lambda m: m.dsplit(m.ones(2, 2, 4), 3), RuntimeError,
     "torch.dsplit attempted to split along dimension 2"),
    ("hstack-empty", lambda m: m.hstack([]), RuntimeError, "hstack expects a non-empty TensorList"),
    ("vstack-tensor", lambda m: m.vstack(m.ones(3)), TypeError, "must be tuple of Tensors, not Tensor"),
    ("column_stack-empty", lambda m: m.column_stack(()), RuntimeError, "column_stack expects a non-empty TensorList"),
    ("dstack-mismatch", lambda m: m.dstack([m.ones(2, 2), m.ones(3, 2)]), RuntimeError,
     "Sizes of tensors must match except in dimension 2"),
    ("broadcast_tensors", lambda m: m.broadcast_tensors(m.ones(3, 4), m.ones(5)), RuntimeError,
     "The size of tensor a \\(4\\) must match the size of tensor b \\(5\\) at non-singleton dimension 1"),
    ("broadcast_shapes", lambda m: m.broadcast_shapes((3,), (4,)), RuntimeError,
     "Attempting to broadcast a dimension of length 4 at -1! Mismatching argument at index 1 had \\(4,\\); but "
     "expected shape should be broadcastable to \\[3\\]"),
    ("broadcast_shapes-negative", lambda m: m.broadcast_shapes((-1,)), ValueError,
     "Attempting to broadcast a dimension with negative length!"),
    ("meshgrid-empty", lambda m: m.meshgrid([], indexing="ij"), RuntimeError,
     "meshgrid expects a non-empty TensorList"),
    ("meshgrid-indexing", lambda m: m.meshgrid(m.ones(2), indexing="yx"), RuntimeError,
     "indexing must be one of \"xy\" or \"ij\", but received: yx"),
    ("meshgrid-2d", lambda m: m.meshgrid(m.ones(2, 2), indexing="ij"), RuntimeError,
     "Expected 0D or 1D tensor in the tensor list"),
    ("movedim-lengths", lambda m: m.movedim(m.ones(2, 3), (0, 1), (0,)), RuntimeError,
     "movedim: Invalid source or destination dims: source \\(\\[0, 1\\] dims\\) should contain the same number of "
     "dims as destination \\(\\[0\\] dims\\)"),
    ("movedim-repeated", lambda m: m.movedim(m.ones(2, 3), (0, 0), (0, 1)), RuntimeError,
     "movedim: repeated dim in `source` \\(\\[0, 0\\]\\)"),
    ("movedim-repeated-destination", lambda m: m.movedim(m.ones(2, 3), (0, 1), (1, -1)), RuntimeError,
     "movedim: repeated dim in `destination` \\(\\[1, -1\\]\\)"),
    ("movedim-range", lambda m: m.movedim(m.ones(2, 3), 2, 0), IndexError, "Dimension out of range"),
    ("movedim-mixed", lambda m: m.movedim(m.ones(2, 3), 0, (0, 1)), TypeError, "movedim\\(\\)"),
    ("swapaxes-range", lambda m: m.swapaxes(m.ones(2, 3), 0, 2), IndexError, "Dimension out of range"),
    ("t-3d", lambda m: m.t(m.ones(2, 2, 2)), RuntimeError,
     "t\\(\\) expects a tensor with <= 2 dimensions, but self is 3D"),
    ("adjoint-1d", lambda m: m.adjoint(m.ones(3)), RuntimeError,
     "tensor.adjoint\\(\\) is only supported on matrices or batches of matrices. Got 1-D tensor."),
    ("unflatten-product", lambda m: m.ones(3, 4).unflatten(-1, (3, 3)), RuntimeError,
     "unflatten: Provided sizes \\[3, 3\\] don't multiply up to the size of dim 1 \\(4\\) in the input tensor"),
    ("unflatten-zero-inferred", lambda m: m.ones(3, 4).unflatten(1, (0, -1)), RuntimeError,
     "don't multiply up to the size of dim 1"),
    ("unflatten-empty", lambda m: m.ones(3, 4).unflatten(1, ()), RuntimeError, "unflatten: sizes must be non-empty"),
    ("unflatten-two-inferred", lambda m: m.ones(3, 4).unflatten(1, (-1, -1)), RuntimeError,
     "only one dimension can be inferred"),
    ("fliplr-1d", lambda m: m.fliplr(m.ones(3)), RuntimeError, "Input must be >= 2-d."),
    ("flipud-0d", lambda m: m.flipud(m.ones(())), RuntimeError, "Input must be >= 1-d."),
    ("rot90-dims", lambda m: m.rot90(m.ones(2, 2, 2), 1, (0, 1, 2)), RuntimeError,
     "expected total rotation dims == 2, but got dims = 3"),
    ("rot90-1d", lambda m: m.rot90(m.ones(3)), RuntimeError, "expected total dims >= 2, but got total dims = 1"),
    ("rot90-same", lambda m: m.rot90(m.ones(2, 3), 1, [1, -1]), RuntimeError,
     "expected rotation dims to be different, but got dim0 = 1 and dim1 = -1"),
    ("rot90-range", lambda m: m.rot90(m.ones(2, 3), 1, (0, 5)), IndexError, "Dimension out of range"),
    ("repeat_interleave-negative", lambda m: m.ones(3).repeat_interleave(-1), RuntimeError,
     "Repeats must be non-negative"),
    ("repeat_interleave-output_size", lambda m: m.ones(3, 4).repeat_interleave(2, 1, output_size=5), RuntimeError,
     "repeat_interleave: Invalid output_size, expected 8 but got 5"),
    ("repeat_interleave-sizes", lambda m: m.ones(3, 4).repeat_interleave(m.tensor([1, 2]), 0), RuntimeError,
     "repeats must have the same size as input along dim, but got repeats.size\\(0\\) = 2 and input.size\\(0\\) = 3"),
    ("repeat_interleave-negative-tensor", lambda m: m.ones(3).repeat_interleave(m.tensor([1, -2, 1])), RuntimeError,
     "repeats can not be negative"),
    ("repeat_interleave-float-counts", lambda m: m.ones(3).repeat_interleave(m.tensor([1.0, 2.0, 1.0])),
     NotImplementedError, "\"repeat_interleave_cpu\" not implemented for 'Float'"),
    ("repeat_interleave-2d-counts", lambda m: m.repeat_interleave(m.tensor([[1, 2]])), RuntimeError,
     "repeat_interleave only accept 1D vector as repeat"),
    ("repeat_interleave-allocated", lambda m: m.ones(3).repeat_interleave(m.tensor([1, 2, 1]), output_size=3),
     RuntimeError, "allocated size does not match required size"),
    ("diff-0d", lambda m: m.diff(m.ones(())), RuntimeError, "diff expects input to be at least one-dimensional"),
    ("diff-order", lambda m: m.diff(m.ones(3), n=-1), RuntimeError, "order must be non-negative but got -1"),
    ("diff-prepend-dims", lambda m: m.diff(m.ones(3, 4), prepend=m.ones(3)), RuntimeError,
     "diff expects prepend or append to be the same dimension as input"),
    ("diff-prepend-shape", lambda m: m.diff(m.ones(3, 4), prepend=m.ones(2, 4)), RuntimeError,
     "input.size\\(0\\) = 3, but got tensor.size\\(0\\) = 2"),
    ("unfold-size", lambda m: m.ones(3, 4).unfold(-1, 5, 1), RuntimeError,
     "maximum size for tensor at dimension 1 is 4 but size is 5"),
    ("unfold-step", lambda m: m.ones(3, 4).unfold(1, 2, 0), RuntimeError, "step is 0 but must be > 0"),
    ("unfold-negative", lambda m: m.ones(3, 4).unfold(1, -1, 1), RuntimeError, "size is -1 but must be >= 0"),
    ("unfold-dim", lambda m: m.ones(3, 4).unfold(2, 1, 1), IndexError, "Dimension out of range"),
    ("unfold-0d", lambda m: m.ones(()).unfold(0, 2, 1), RuntimeError,
     "maximum size for tensor at dimension 0 is 1 but size is 2"),
]


@requires_torch
@pytest.mark.parametrize(("fn", "error", "message"), [pytest.param(*e[1:], id=e[0]) for e in ERRORS])
def test_errors_match_torch(fn: Callable[[Any], Any], error: type, message: str) -> None:
    """Misuse raises PyTorch's exception type with its message (checked on PyTorch too)."""
    with pytest.raises(error, match=message):
        fn(torch)
    with pytest.raises(error, match=message):
        fn(agrad)


# -- the surface ------------------------------------------------------------------------------

METHOD_NAMES = ["tril", "triu", "tril_", "triu_", "diag", "diag_embed", "diagflat", "trace", "kron", "tensor_split",
                "hsplit", "vsplit", "dsplit", "movedim", "moveaxis", "swapaxes", "swapdims", "t", "adjoint", "ravel",
                "unflatten", "fliplr", "flipud", "rot90", "repeat_interleave", "diff", "unfold", "reshape_as"]


@pytest.mark.parametrize("name", METHOD_NAMES)
def test_tensor_methods_exist(name: str) -> None:
    assert callable(getattr(agrad.Tensor, name))
    if torch is not None:
        assert hasattr(torch.Tensor, name)


def test_aliases_are_the_same_function() -> None:
    assert agrad.concat is agrad.cat
    assert agrad.moveaxis is agrad.movedim
    assert agrad.swapdims is agrad.transpose
    assert agrad.row_stack is agrad.vstack
