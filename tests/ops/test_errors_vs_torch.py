"""Misused public ops raise PyTorch's exceptions, checked against torch itself.

Each case is a small function of the library module ``lib`` (``torch`` or
``agrad``) that misuses one op.  It runs on both libraries and the test
asserts:

* the same exception type (``type(agrad_error) is type(torch_error)``);
* agrad's message contains torch's *key phrase*.  Normalisation: the key
  phrase is the first line of torch's message with its C++ decorations
  removed (a leading ``[enforce fail at <file>] <condition>. `` and a trailing
  `` (Triggered internally at ...)``).  A case may give a shorter ``key`` where agrad's wording deliberately differs;
  the test then checks that this key is in torch's message too, so it is
  always torch's own words that agrad must contain;
* for in-place misuse, that the tensor written to keeps its values and its
  ``_version``: nothing is half-applied (agrad's promise: torch's
  ``scatter_add_`` writes the valid indices before it finds the bad one).

Item 14's write-through rules (in-place writes into an expanded tensor, and
``view`` versus ``reshape`` of non-contiguous tensors) are compared with torch
by their results.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
from tests.helpers import requires_torch, torch

pytestmark = requires_torch


def _F(lib: Any) -> Any:
    return lib.nn.functional


# (id, misuse, key phrase or None for torch's normalised message)
CASES: list[tuple[str, Callable[[Any], Any], str | None]] = [
    # broadcasting (numpy's ValueError before)
    ("add_broadcast", lambda L: L.ones(2, 3) + L.ones(4), None),
    ("mul_broadcast_3d", lambda L: L.ones(5, 2, 3) * L.ones(4, 1, 4), None),
    ("maximum_broadcast", lambda L: L.maximum(L.ones(2, 3), L.ones(4)), None),
    ("pow_broadcast", lambda L: L.ones(2, 3) ** L.ones(4), None),
    ("eq_broadcast", lambda L: L.ones(2, 3) == L.ones(4), None),
    ("where_broadcast", lambda L: L.where(L.ones(2, 3) > 0, L.ones(2, 3), L.ones(4)), None),
    ("mse_loss_shapes", lambda L: _F(L).mse_loss(L.ones(2, 3), L.ones(2, 4)), None),
    ("l1_loss_shapes", lambda L: _F(L).l1_loss(L.ones(2, 3), L.ones(3, 3)), None),
    ("copy_shapes", lambda L: L.ones(2, 3).copy_(L.ones(4)), None),
    # reshape / view / expand
    ("reshape_size", lambda L: L.ones(2, 3).reshape(5), None),
    ("reshape_infer_size", lambda L: L.ones(2, 3).reshape(-1, 4), None),
    ("reshape_two_inferred", lambda L: L.ones(2, 3).reshape(-1, -1), None),
    ("reshape_bad_dim", lambda L: L.ones(2, 3).reshape(-2, 3), None),
    ("reshape_empty_ambiguous", lambda L: L.ones(0, 3).reshape(-1, 0), None),
    ("view_size", lambda L: L.ones(2, 3).view(5), None),
    ("view_non_contiguous", lambda L: L.ones(2, 3).transpose(0, 1).view(6), None),
    ("view_non_contiguous_slice", lambda L: L.ones(4, 6)[:, 1:4].view(12), None),
    ("expand_size", lambda L: L.ones(2, 3).expand(2, 5), None),
    ("expand_leading_minus_one", lambda L: L.ones(2, 3).expand(-1, 2, 3), None),
    # matmul family (numpy's gufunc text before)
    ("matmul_2d", lambda L: L.ones(2, 3) @ L.ones(4, 5), None),
    ("matmul_1d_1d", lambda L: L.ones(3) @ L.ones(4), None),
    ("matmul_2d_1d", lambda L: L.matmul(L.ones(2, 3), L.ones(4)), None),
    ("matmul_1d_2d", lambda L: L.matmul(L.ones(3), L.ones(4, 5)), None),
    ("matmul_3d_2d", lambda L: L.matmul(L.ones(2, 2, 3), L.ones(4, 5)), None),
    ("matmul_batched_inner", lambda L: L.matmul(L.ones(2, 2, 3), L.ones(2, 4, 5)), None),
    ("matmul_batched_batch", lambda L: L.matmul(L.ones(3, 2, 3), L.ones(2, 3, 5)), None),
    ("linear_shapes", lambda L: _F(L).linear(L.ones(2, 3), L.ones(5, 4)), None),
    ("mm_shapes", lambda L: L.mm(L.ones(2, 3), L.ones(4, 5)), None),
    ("bmm_shapes", lambda L: L.bmm(L.ones(2, 2, 3), L.ones(2, 4, 5)), None),
    # factories
    ("arange_zero_step", lambda L: L.arange(0, 10, 0), None),
    ("arange_step_sign", lambda L: L.arange(0, 10, -1), None),
    ("arange_infinite", lambda L: L.arange(0, float("inf")), None),
    ("huge_allocation", lambda L: L.zeros(1 << 25, 1 << 25), "can't allocate memory: you tried to allocate"),
    ("randint_bounds", lambda L: L.randint(5, 3, (2,)), None),
    ("randint_empty_range", lambda L: L.randint(3, 3, (2,)), None),
    ("randint_negative_size", lambda L: L.randint(3, (2, -1)), None),
    ("zeros_negative", lambda L: L.zeros(-1), None),
    ("ones_negative", lambda L: L.ones(2, -3), None),
    ("full_negative", lambda L: L.full((-1,), 1.0), None),
    ("empty_negative", lambda L: L.empty(-2), None),
    ("rand_negative", lambda L: L.rand(-2), None),
    ("randn_negative", lambda L: L.randn(-2), None),
    ("eye_negative", lambda L: L.eye(-1), None),
    ("eye_negative_m", lambda L: L.eye(2, -1), None),
    ("linspace_negative", lambda L: L.linspace(0, 1, -1), None),
    # cat / stack / gather / scatter / index_select
    ("cat_shapes", lambda L: L.cat([L.ones(2, 3), L.ones(2, 4)]), None),
    ("cat_empty", lambda L: L.cat([]), None),
    ("stack_shapes", lambda L: L.stack([L.ones(2, 3), L.ones(2, 4)]), None),
    ("gather_index", lambda L: L.gather(L.ones(2, 3), 1, L.tensor([[0, 5]])), None),
    ("scatter_add_index", lambda L: L.scatter_add(L.ones(2, 3), 1, L.tensor([[0, 5]]), L.ones(1, 2)), None),
    ("index_select_index", lambda L: L.index_select(L.ones(2, 3), 0, L.tensor([5])), None),
    # dims out of range (numpy's AxisError before) and duplicates
    ("sum_dim", lambda L: L.ones(2, 3).sum(5), None),
    ("mean_dim", lambda L: L.ones(2, 3).mean(-3), None),
    ("prod_dim", lambda L: L.ones(2, 3).prod(4), None),
    ("logsumexp_dim", lambda L: L.ones(2, 3).logsumexp(4), None),
    ("argmax_dim", lambda L: L.ones(2, 3).argmax(5), None),
    ("cumsum_dim", lambda L: L.ones(2, 3).cumsum(5), None),
    ("max_dim", lambda L: L.ones(2, 3).max(5), None),
    ("softmax_dim", lambda L: _F(L).softmax(L.ones(2, 3), dim=5), None),
    ("log_softmax_dim", lambda L: _F(L).log_softmax(L.ones(2, 3), dim=-3), None),
    ("softmax_dim_0d", lambda L: _F(L).softmax(L.tensor(1.0), dim=1), None),
    ("unsqueeze_dim", lambda L: L.ones(2, 3).unsqueeze(4), None),
    ("squeeze_dim", lambda L: L.ones(2, 3).squeeze(3), None),
    ("transpose_dim", lambda L: L.ones(2, 3).transpose(0, 2), None),
    ("permute_dim", lambda L: L.ones(2, 3).permute(0, 2), None),
    ("cat_dim", lambda L: L.cat([L.ones(2, 3)], dim=2), None),
    ("sum_duplicate_dims", lambda L: L.ones(2, 3).sum((0, 0)), None),
    ("sum_duplicate_wrapped_dims", lambda L: L.ones(2, 3).sum((1, -1)), None),
    # indexing out of bounds
    ("index_row", lambda L: L.ones(2, 3)[5], None),
    ("index_column", lambda L: L.ones(2, 3)[0, 7], None),
    ("index_advanced", lambda L: L.ones(2, 3)[L.tensor([0, 4])], None),
    ("index_too_many", lambda L: L.ones(2, 3)[0, 0, 0], None),
    # losses, split, dtypes
    ("cross_entropy_batch", lambda L: _F(L).cross_entropy(L.ones(2, 3), L.tensor([0, 1, 2])), None),
    ("nll_loss_batch", lambda L: _F(L).nll_loss(L.ones(2, 3), L.tensor([0, 1, 2])), None),
    ("cross_entropy_integer_probabilities", lambda L: _F(L).cross_entropy(L.ones(3), L.tensor([0, 1, 2])), None),
    ("cross_entropy_bool_probabilities",
     lambda L: _F(L).cross_entropy(L.ones(2, 3), L.ones(2, 3, dtype=L.bool)), None),
    ("outer_self_2d", lambda L: L.outer(L.ones(2, 2), L.ones(3)), None),
    ("outer_vec2_2d", lambda L: L.outer(L.ones(2), L.ones(3, 3)), None),
    ("scatter_add_float_index", lambda L: L.scatter_add(L.ones(2, 3), 1, L.tensor([[0.0]]), L.ones(1, 1)), None),
    ("split_sizes", lambda L: L.ones(5).split([2, 2]), None),
    ("bool_rsub", lambda L: 1 - L.tensor([True]), None),
    ("bool_sub_bools", lambda L: L.tensor([True]) - L.tensor([False]), None),
    ("bool_sub_python_bool", lambda L: L.tensor([True]) - True, None),
    ("bool_neg", lambda L: -L.tensor([True]), None),
    ("int_requires_grad_", lambda L: L.tensor([1, 2]).requires_grad_(), None),
    ("int_tensor_requires_grad", lambda L: L.tensor([1, 2], requires_grad=True), None),
    ("int_zeros_requires_grad", lambda L: L.zeros(2, dtype=L.int64, requires_grad=True), None),
    # issue 14 items 21/22: masks, index dtypes, argument types
    ("masked_fill_mask_first", lambda L: L.ones(3).masked_fill(L.tensor([True, False]), 0.0), None),
    ("masked_fill_2d_mask_first", lambda L: L.ones(2, 3).masked_fill(L.tensor([[True], [False], [True]]), 0.0), None),
    ("masked_fill_tensor_value_mask_first", lambda L: L.ones(3).masked_fill(L.tensor([True, False]), L.tensor(0.0)),
     None),
    ("masked_fill_int_mask", lambda L: L.ones(2).masked_fill(L.tensor([1, 0]), 0.0), None),
    ("index_select_float_index", lambda L: L.index_select(L.ones(2, 3), 0, L.tensor([0.0])), None),
    ("index_float_tensor", lambda L: L.ones(3, 3)[0, L.tensor([0.5])], None),
    ("reshape_str", lambda L: L.ones(3).reshape("a"), None),
    ("reshape_float", lambda L: L.ones(3).reshape(3.0), None),
    ("reshape_float_in_list", lambda L: L.ones(3).reshape([3.0]), None),
    ("expand_str", lambda L: L.ones(3).expand("a"), None),
    ("sum_dim_str", lambda L: L.ones(3).sum(dim="a"), "sum() received an invalid combination of arguments - got"),
    ("mean_dim_float", lambda L: L.ones(3).mean(dim=1.5), "mean() received an invalid combination of arguments - got"),
    ("float_of_two_elements", lambda L: float(L.ones(2)), None),
    ("full_like_str", lambda L: L.full_like(L.ones(2), "x"), None),
    ("ones_like_list", lambda L: L.ones_like([1.0]), None),
    ("tensor_of_none", lambda L: L.tensor([1.0, None]), None),
    ("log_softmax_int_dim0", lambda L: L.ones(2, 3, dtype=L.int64).log_softmax(0), None),
    ("softmax_int_functional", lambda L: _F(L).softmax(L.ones(2, 3, dtype=L.int64), dim=-1), None),
    ("einsum_more_operands", lambda L: L.einsum("i->i", L.ones(2), L.ones(2)), None),
    ("nll_loss_multi_target", lambda L: _F(L).nll_loss(L.ones(3), L.ones(3, 4)), None),
]


def _key(message: str) -> str:
    """torch's message normalised to its key phrase (see the module docstring)."""
    line = message.split("\n")[0]
    line = re.sub(r"^\[enforce fail at [^\]]*\] [^.]*\. ", "", line)
    line = re.sub(r" \(Triggered internally at .*\)$", "", line)
    return line


def _raised(fn: Callable[[Any], Any], lib: Any) -> BaseException:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's and agrad's broadcast warnings before the error
        try:
            fn(lib)
        except Exception as e:  # noqa: BLE001 - the exception is what is compared
            return e
    raise AssertionError(f"{lib.__name__} raised nothing")


@pytest.mark.parametrize("fn, key", [pytest.param(fn, key, id=name) for name, fn, key in CASES])
def test_same_exception_as_torch(fn: Callable[[Any], Any], key: str | None) -> None:
    expected = _raised(fn, torch)
    got = _raised(fn, agrad)
    assert type(got) is type(expected), f"agrad raised {type(got).__name__}: {got}; torch {type(expected).__name__}"
    phrase = _key(str(expected)) if key is None else key
    assert phrase in str(expected)
    assert phrase in str(got), f"{phrase!r} not in {str(got)!r}"


def _expanded(L: Any) -> Any:
    return L.zeros(1, 3).expand(2, 3)


# (id, the tensor written to, the failing in-place call, key phrase or None)
INPLACE: list[tuple[str, Callable[[Any], Any], Callable[[Any, Any], Any], str | None]] = [
    ("add_broadcast", lambda L: L.ones(3), lambda L, t: t.add_(L.ones(2, 3)), None),
    ("sub_int_float", lambda L: L.ones(2, dtype=L.int64), lambda L, t: t.sub_(L.ones(2) * 0.5),
     "can't be cast to the desired output type"),
    ("copy_shapes", lambda L: L.ones(2, 3), lambda L, t: t.copy_(L.ones(4)), None),
    ("scatter_add_index", lambda L: L.ones(2, 3),
     lambda L, t: t.scatter_add_(1, L.tensor([[0, 5]]), L.ones(1, 2)), None),
    ("setitem_out_of_bounds", lambda L: L.ones(2, 3), lambda L, t: t.__setitem__(5, 1.0), None),
    ("expanded_add_", _expanded, lambda L, t: t.add_(1), None),
    ("expanded_mul_", _expanded, lambda L, t: t.mul_(2), None),
    ("expanded_copy_", _expanded, lambda L, t: t.copy_(L.ones(2, 3)), None),
    ("expanded_scatter_add_", _expanded, lambda L, t: t.scatter_add_(1, L.tensor([[0]]), L.ones(1, 1)), None),
    ("expanded_setitem_column", _expanded, lambda L, t: t.__setitem__((slice(None), 0), 1.0), None),
    ("expanded_setitem_all", _expanded, lambda L, t: t.__setitem__(Ellipsis, 1.0), None),
    ("masked_fill_shape", lambda L: L.ones(3), lambda L, t: t.masked_fill_(L.tensor([True, False]), 0.0), None),
    ("bitwise_not_float", lambda L: L.ones(2), lambda L, t: t.bitwise_not_(), None),
    ("mul_int_by_float", lambda L: L.ones(2, dtype=L.int64), lambda L, t: t.mul_(1.5), None),
]


def test_inplace_on_read_only_numpy_memory_raises_and_leaves_it() -> None:
    # Note [Read-only numpy memory]: PyTorch writes (undefined behaviour); agrad refuses with its type.
    array = np.ones(3, dtype=np.float32)
    array.flags.writeable = False
    t = agrad.from_numpy(array)
    for act in (lambda: t.add_(1), lambda: t[1:].mul_(2)):
        with pytest.raises(RuntimeError, match="read-only numpy array"):
            act()
        assert t._version == 0 and array.tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("make, act, key", [pytest.param(m, a, k, id=name) for name, m, a, k in INPLACE])
def test_failed_inplace_leaves_tensor_unchanged(make: Callable[[Any], Any], act: Callable[[Any, Any], Any],
                                                key: str | None) -> None:
    expected = _raised(lambda L: act(L, make(L)), torch)
    t = make(agrad)
    before, version = t.tolist(), t._version
    got = _raised(lambda L: act(L, t), agrad)
    assert t.tolist() == before
    assert t._version == version
    assert type(got) is type(expected)
    phrase = _key(str(expected)) if key is None else key
    assert phrase in str(expected)
    assert phrase in str(got), f"{phrase!r} not in {str(got)!r}"


# -- item 14: writes into expanded tensors that PyTorch lets through ---------------

WRITE_THROUGH: list[tuple[str, Callable[[Any, Any], Any]]] = [
    ("fill_", lambda L, x: x.fill_(1.0)),
    ("zero_", lambda L, x: x.zero_()),
    ("setitem_row_number", lambda L, x: x.__setitem__(0, 2.0)),
    ("setitem_row_tensor", lambda L, x: x.__setitem__(1, L.tensor([1.0, 2.0, 3.0]))),
    ("row_add_", lambda L, x: x[0].add_(1)),
    ("row_copy_", lambda L, x: x[1].copy_(L.tensor([4.0, 5.0, 6.0]))),
]


@pytest.mark.parametrize("act", [pytest.param(a, id=name) for name, a in WRITE_THROUGH])
def test_write_into_expanded_tensor_like_torch(act: Callable[[Any, Any], Any]) -> None:
    results = []
    for L in (torch, agrad):
        base = L.zeros(1, 3)
        x = base.expand(2, 3)
        act(L, x)
        results.append((base.tolist(), x.tolist(), x._version, base._version))
    assert results[1] == results[0]


@pytest.mark.parametrize("op", ["index_put_", "masked_fill_"])
def test_deprecated_write_into_expanded_tensor_warns_and_writes(op: str) -> None:
    results = []
    for L in (torch, agrad):
        base = L.zeros(1, 3)
        x = base.expand(2, 3)
        with pytest.warns(UserWarning, match=f"Use of {op} on expanded tensors is deprecated"):
            if op == "index_put_":
                x[L.tensor([1])] = 7.0
            else:
                x.masked_fill_(L.tensor([[True, False, False], [False, False, False]]), 5.0)
        results.append((base.tolist(), x._version))
    assert results[1] == results[0]


def test_write_into_expanded_view_of_graph_tensor_gradients() -> None:
    """A write into a row of an expanded non-leaf goes through CopySlices, as in torch."""
    grads = []
    for L in (torch, agrad):
        a = L.zeros(1, 3, requires_grad=True)
        w = L.tensor([1.0, 2.0, 3.0], requires_grad=True)
        c = a.clone()
        c.expand(2, 3)[1] = w * 2
        loss = (c * L.tensor([[1.0, 2.0, 3.0]])).sum()
        loss.backward() if L is torch else loss.backward_sync()
        grads.append((c.tolist(), a.grad.tolist(), w.grad.tolist()))
    assert grads[1] == grads[0]


# -- item 14: view never copies --------------------------------------------------


@pytest.mark.parametrize("make, shape", [
    pytest.param(lambda L: L.arange(24.0).reshape(4, 6)[:, ::2], (12,), id="strided_columns"),
    pytest.param(lambda L: L.arange(24.0).reshape(2, 3, 4).permute(1, 0, 2), (3, 2, 2, 2), id="split_dim"),
    pytest.param(lambda L: L.arange(6.0).reshape(2, 3), (3, 2), id="contiguous"),
    pytest.param(lambda L: L.arange(6.0).reshape(2, 3).transpose(0, 1)[:, :1], (3,), id="size_one_dim"),
])
def test_view_shares_memory_like_torch(make: Callable[[Any], Any], shape: tuple[int, ...]) -> None:
    results = []
    for L in (torch, agrad):
        x = make(L)
        v = x.view(shape)
        v.reshape(-1)[0] = -1.0  # a write through the view reaches x
        results.append((v.tolist(), x.tolist(), x._version))
    assert results[1] == results[0]


def test_view_of_non_contiguous_raises_and_reshape_copies() -> None:
    for L in (torch, agrad):
        x = L.arange(6.0).reshape(2, 3)
        t = x.transpose(0, 1)
        with pytest.raises(RuntimeError, match=re.escape("Use .reshape(...) instead.")):
            t.view(6)
        r = t.reshape(6)
        r[0] = 100.0
        assert x.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]  # reshape copied
        assert t.contiguous().view(6).tolist() == [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
        assert not t.is_contiguous() and t.contiguous().is_contiguous()


def test_view_gradient_flows_like_reshape() -> None:
    x = agrad.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    y = x.view(3, 2)
    assert y.grad_fn.name() == "ViewBackward0"
    (y * agrad.tensor([[1.0, 2.0]])).sum().backward_sync()
    assert x.grad.tolist() == [[1.0, 2.0, 1.0], [2.0, 1.0, 2.0]]
