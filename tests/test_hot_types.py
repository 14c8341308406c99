"""The types every op and every backward node touches keep CPython's fast
attribute access.

A class that defines ``__getattr__``, ``__getattribute__``, ``__setattr__``
or ``__delattr__`` gets a Python-level attribute hook for *every* read or
write of its instances' attributes, which slows the whole hot path though no
lookup ever takes the hook: ``OpNode.__getattr__`` cost 2,700 instructions per
backward node and ``Tensor.__delattr__`` 12,000 per recorded op (callgrind),
each added for a rarely used feature.  Those features use properties instead.
"""

from __future__ import annotations

import pytest

import agrad
from agrad._graph._node import Node
from agrad._ops._registry import REGISTRY

HOOKS = ("__getattr__", "__getattribute__", "__setattr__", "__delattr__")


def _hot_types() -> list[type]:
    types: list[type] = [agrad.Tensor, Node]
    for op in REGISTRY.values():
        types += list(op.node_classes.values())
    x = agrad.tensor([1.0], requires_grad=True)
    types.append(type((x * 2).grad_fn))
    types.append(type((x * 2).sum().grad_fn.next_functions[0][0].next_functions[0][0]))  # AccumulateGrad
    return types


@pytest.mark.parametrize("hook", HOOKS)
def test_hot_types_have_no_python_attribute_hooks(hook: str) -> None:
    offenders = sorted({t.__name__ for t in _hot_types()
                        for klass in t.__mro__ if klass is not object and hook in vars(klass)})
    assert offenders == []
