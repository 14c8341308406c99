"""griffe extensions for agrad's API reference (named in ``mkdocs.yml``).

``InspectUnresolvableAliasesInPlace``: objects made at import time are
documented where they are exported.  griffe, inspecting a module, turns each
member whose ``__module__`` names another module into an alias of
``<__module__>.<__qualname__>``.  That holds for code written in one place and
imported, but not for functions that agrad makes at import time: the op
registry's public functions (``agrad.mm``, and the same function as
``agrad.Tensor.mm``) all say they come from ``agrad._ops._registry``, in-place
methods from a factory's ``<locals>``, and some Tensor methods are lambdas in a
table.  No such attribute exists at that path, so the alias would not resolve
and the entry could not be rendered.  And ``agrad.Tensor`` says it comes from
``agrad`` (as ``torch.Tensor`` does), so its methods, declared in
``agrad._tensor``, would be aliases of themselves through
``agrad._tensor.Tensor``, a cycle.  Such a member is inspected in place
instead: it becomes a member of the module or class that exports it, with the
signature ``inspect.signature`` reports at run time.

``PyTorchDocstrings``: agrad's docstrings are in PyTorch's form, which is
reStructuredText's (``Example::`` over an indented ``>>>`` block, doctest
blocks, ``:func:`x``` roles); the Markdown renderer would show the ``::``,
the roles' markup, and a doctest block that ``inspect.cleandoc`` left flush
with the text as a paragraph.  Each docstring is translated before it is
parsed: ``Example::`` becomes a Google-style ``Examples:`` section (rendered
as highlighted ``pycon``), any other doctest block a fenced ``pycon`` block,
and a role its target in code font.
"""

from __future__ import annotations

import importlib
import re
from typing import Any

import griffe

__all__ = ["InspectUnresolvableAliasesInPlace", "PyTorchDocstrings", "markdown_docstring"]


def _runtime_object(path: str) -> object | None:
    """The object at dotted ``path`` at run time: the longest importable module
    prefix, then attributes; ``None`` where the path leads nowhere."""
    parts = path.split(".") if path else []
    for split in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for name in parts[split:]:
            if not hasattr(obj, name):
                return None
            obj = getattr(obj, name)
        return obj
    return None


class InspectUnresolvableAliasesInPlace(griffe.Extension):
    """Replace an alias by the object inspected where it is a member, unless the
    alias's target path leads, at run time, to the same object held by another
    owner (an import from another module, which resolves)."""

    def on_alias_instance(self, *, node: Any, alias: griffe.Alias, agent: Any, **kwargs: Any) -> None:
        if not isinstance(node, griffe.ObjectNode) or not isinstance(agent, griffe.Inspector):
            return  # static analysis: aliases there come from import statements, which resolve
        child = next((c for c in node.children if c.name == alias.name), None)
        if child is None:
            return
        owner_path = alias.target_path.rpartition(".")[0]
        if _runtime_object(alias.target_path) is not child.obj or _runtime_object(owner_path) is node.obj:
            # Removed first: inspecting the member resolves names in its own scope
            # (string annotations), which would otherwise try to resolve the alias.
            agent.current.del_member(alias.name)
            agent.inspect(child)


_ROLE = re.compile(r":(?:[a-z]+:)?[a-z]+:`(~?)([^`]+)`")
_EXAMPLE_HEADER = re.compile(r"Examples?::?")  # reST's ``Example::``, or a Google section already
_FENCE = "```"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _dedent(line: str, columns: int) -> str:
    return line[min(columns, _indent(line)):]


def _role_to_code(match: re.Match[str]) -> str:
    """``:func:`agrad.mm``` -> ``agrad.mm`` in code font; ``:class:`~agrad.Tensor``` -> ``Tensor``."""
    tilde, target = match.groups()
    return f"`{target.rsplit('.', 1)[-1] if tilde else target}`"


def markdown_docstring(text: str) -> str:
    """``text`` (a docstring after ``inspect.cleandoc``) with PyTorch's
    reStructuredText constructs translated for the Markdown renderer."""
    lines = _ROLE.sub(_role_to_code, text).splitlines()
    out: list[str] = []
    text_indent = 0  # of the last line of prose: where a fence must start
    fenced = False  # inside a fence already there: copied as it is
    i = 0
    while i < len(lines):
        line = lines[i]
        if fenced or line.lstrip().startswith(_FENCE):
            fenced ^= line.lstrip().startswith(_FENCE)
            out.append(line)
            i += 1
        elif _EXAMPLE_HEADER.fullmatch(line.strip()):
            # A Google section: its header, then its lines indented below it
            # with no blank line between (griffe turns ``>>>`` lines into pycon).
            header = _indent(line)
            out.append(" " * header + "Examples:")
            i += 1
            while i < len(lines) and not lines[i].strip():
                i += 1
            while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > header):
                out.append(lines[i])
                i += 1
        elif line.lstrip().startswith(">>>"):
            # A doctest block: its lines up to the next blank line, fenced where
            # the prose starts (a fence indented four more would be code itself).
            block_indent, fence_indent = _indent(line), min(_indent(line), text_indent)
            out.append(" " * fence_indent + _FENCE + "pycon")
            while i < len(lines) and lines[i].strip():
                out.append(_dedent(lines[i], block_indent - fence_indent))
                i += 1
            out.append(" " * fence_indent + _FENCE)
        else:
            if line.strip():
                text_indent = _indent(line)
            out.append(line)
            i += 1
    return "\n".join(out)


class PyTorchDocstrings(griffe.Extension):
    """Translate each docstring with :func:`markdown_docstring` before it is parsed."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown_docstring(obj.docstring.value)
