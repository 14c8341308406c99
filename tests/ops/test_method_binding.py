"""Every Tensor method comes from one of two places: an op's ``defop`` entry
(``agrad._ops._registry``) or the table of hand-written methods
(``agrad._ops._methods``).  No other module assigns to ``Tensor``."""

from __future__ import annotations

import ast
from pathlib import Path

import agrad
from agrad._ops._methods import METHODS

_PACKAGE = Path(agrad.__file__).parent
_BINDERS = {"_ops/_registry.py", "_ops/_methods.py"}


def _binds_tensor(node: ast.AST) -> bool:
    """``Tensor.x = ...`` or ``setattr(Tensor, ...)``."""
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "Tensor"
                   for t in node.targets)
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr"
            and bool(node.args) and isinstance(node.args[0], ast.Name) and node.args[0].id == "Tensor")


def test_only_the_registry_and_the_methods_table_bind_tensor_methods() -> None:
    offenders = []
    for path in sorted(_PACKAGE.rglob("*.py")):
        name = path.relative_to(_PACKAGE).as_posix()
        if name in _BINDERS:
            continue
        for node in ast.walk(ast.parse(path.read_text(), name)):
            if _binds_tensor(node):
                offenders.append(f"{name}:{node.lineno}")  # type: ignore[attr-defined]
    assert offenders == []


def test_the_methods_table_is_bound() -> None:
    for name, fn in METHODS.items():
        assert vars(agrad.Tensor)[name] is fn, name
