"""Tests of PyTorch's ``test/test_autograd.py`` that failed when run against
agrad by rename (issue 14), each ported with the smallest adaptation
(``torch`` -> ``agrad``, ``backward`` -> ``backward_sync``, ``grad`` ->
``grad_sync``) and named after the torch test it comes from.  Where a test
compares with PyTorch, the same code is run on torch as the oracle."""

from __future__ import annotations

from typing import Any

import pytest

import agrad
from agrad.autograd import Function
from tests.helpers import requires_torch, torch

LEGACY = "Legacy autograd function with non-static forward method is deprecated"
INSTANTIATED = "should not be instantiated"


def _identity_function(lib: Any) -> type:
    class Id(lib.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x

        @staticmethod
        def backward(ctx: Any, grad_x: Any) -> Any:
            return grad_x

    return Id


def test_legacy_function_deprecation_exception() -> None:
    """torch: TestAutograd.test_legacy_function_deprecation_exception."""

    class MyFunction(Function):
        def forward(self, x):  # type: ignore[override]
            return x

        def backward(self, grad_output):  # type: ignore[override]
            return grad_output

    with pytest.warns(DeprecationWarning, match=INSTANTIATED), pytest.raises(RuntimeError, match=LEGACY):
        MyFunction()(agrad.randn(3, 4))


@pytest.mark.parametrize("lib_name", ["agrad", pytest.param("torch", marks=requires_torch)])
def test_naughty_autograd_function_attribute_access(lib_name: str) -> None:
    """torch: TestAutograd.test_naughty_autograd_function_attribute_access (its
    first half: the node-attribute checks need torch's C++ node internals)."""
    lib = agrad if lib_name == "agrad" else torch
    Id = _identity_function(lib)
    with pytest.warns(DeprecationWarning, match=INSTANTIATED):
        f = Id()
    assert isinstance(f, Id)
    x = lib.zeros(1, requires_grad=True)
    with pytest.raises(RuntimeError, match="non-static forward method is deprecated"):
        f(x)
    t = Id.apply(x)
    assert t.grad_fn.name() == "IdBackward"
