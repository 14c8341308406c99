"""agrad's module layering, read from the imports.

Every module of ``agrad/`` is parsed with :mod:`ast` (nothing is imported) and
each of its imports of agrad is checked against the layer map below.  Layers,
bottom to top (a module may import its own layer or lower ones, never upward):

1. foundation: dtypes, devices, backends, BLAS threads, errors, ambient state;
2. tensor and graph: ``Tensor``, its repr, Nodes/Edges, saved tensors, hooks;
3. ops: the op table and everything built only from ops and tensors
   (creation, random, linalg, the internals of ``nn.functional``);
4. the engine;
5. the public API: ``agrad``, ``agrad.autograd``, ``agrad.nn``, ``agrad.utils``,
   ``agrad.cuda``.

What counts as an import:

* *module-level* imports (anything not inside a function body, class bodies
  included) run when the module is imported; they must never point upward,
  and must form no cycle;
* *call-time* imports (inside a function body) run when the function is
  called.  They must not point upward either, and must not close a cycle with
  module-level imports (a call-time import written to dodge a circular import
  is the same cycle, postponed), except the few edges in ``CALL_TIME_ALLOWED``;
* type-only imports (under ``if TYPE_CHECKING:``) never run and are not checked;
* importing ``agrad.a.b`` also runs the package ``agrad.a`` (its
  ``__init__.py``): that package counts as imported too.  The root package
  ``agrad`` is imported before any of its modules and is left out, except where
  a module names it (``import agrad``, ``from agrad import <not a module>``).

Failures list one violation a line: ``importer -> imported (layer a imports layer b)``.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "agrad"

# Each layer: (number, what it is, module-name patterns). ``x`` matches module
# ``x`` only; ``x*`` matches ``x`` and everything under it (``x.y``, ``x.y.z``).
LAYERS: list[tuple[int, str, tuple[str, ...]]] = [
    (1, "foundation", (
        "agrad._dtype",
        "agrad._device",
        "agrad._backends*",
        "agrad._blas",
        "agrad._errors",
        "agrad._size",
        "agrad._grad_mode",
        # Every ContextVar (grad mode, anomaly mode, saved-tensor hooks, the
        # current graph task, engine options...) and the thread's kernel runner,
        # so that ops read the engine's ambient state without importing it.
        "agrad._ambient",
        "agrad._misuse",
    )),
    (2, "tensor and graph", (
        "agrad._tensor",
        "agrad._repr",
        "agrad._graph*",
    )),
    (3, "ops", (
        "agrad._ops*",
        "agrad._creation",
        "agrad.random",
        "agrad.linalg",
        # nn.functional's implementation: ops composed from ops.  The public
        # modules agrad.nn and agrad.nn.functional sit on top (layer 5).
        "agrad.nn._activations",
        "agrad.nn._attention",
        "agrad.nn._convolution",
        "agrad.nn._distance",
        "agrad.nn._layers",
        "agrad.nn._losses",
        "agrad.nn._normalization",
        "agrad.nn._toplevel",
    )),
    (4, "engine", (
        "agrad._engine*",
    )),
    (5, "public API", (
        "agrad",
        "agrad.autograd*",
        "agrad.nn",
        "agrad.nn.functional",
        # What a model author builds with: Module and its layers, Parameter,
        # initialisers, optimizers, agrad.func.
        "agrad.nn.modules*",
        "agrad.nn.parameter",
        "agrad.nn.init",
        "agrad.nn.utils*",
        "agrad.optim*",
        "agrad.func",
        "agrad.utils*",
        "agrad.cuda",
        "agrad._pytest_plugin",
        "agrad.serialization",
    )),
]

# Call-time imports that may point upward or close a cycle, each with why.
CALL_TIME_ALLOWED: dict[tuple[str, str], str] = {
    # Tensor.backward / backward_sync are agrad.autograd.backward(self, ...), as
    # PyTorch's are torch.autograd.backward: the tensor is below the engine
    # (the engine computes with tensors), so the method imports it when called.
    ("agrad._tensor", "agrad.autograd"): "Tensor.backward runs the engine",
    # DataLoader's samplers draw through agrad.randperm and friends, as PyTorch's
    # through torch.randperm, so a program that wraps them sees the draws.
    ("agrad.utils.data._utils.draws", "agrad"): "the samplers draw through the public namespace",
}


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int
    call_time: bool
    via: str | None = None  # the module whose import runs this package's __init__


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def is_package(name: str) -> bool:
    return MODULES.get(name, Path()).name == "__init__.py"


def layer_of(name: str) -> int | None:
    for number, _, patterns in LAYERS:
        for pattern in patterns:
            if pattern.endswith("*"):
                base = pattern[:-1]
                if name == base or name.startswith(base + "."):
                    return number
            elif name == pattern:
                return number
    return None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, call_time: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, call_time
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for stmt in child.orelse:  # only the else branch runs
                yield from _walk(stmt, call_time)
        else:
            inside = call_time or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            yield from _walk(child, inside)


def _resolve(importer: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = importer.split(".") if is_package(importer) else importer.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(importer: str) -> list[Import]:
    """The agrad modules ``importer`` imports: named ones, and the packages their import runs."""
    tree = ast.parse(MODULES[importer].read_text(), str(MODULES[importer]))
    named: list[tuple[str, int, bool]] = []
    for node, call_time in _walk(tree, call_time=False):
        if isinstance(node, ast.Import):
            named += [(alias.name, node.lineno, call_time) for alias in node.names]
        else:
            source = _resolve(importer, node)
            for alias in node.names:
                sub = f"{source}.{alias.name}"  # ``from pkg import mod`` imports pkg.mod
                named.append((sub if sub in MODULES else source, node.lineno, call_time))
    found: dict[tuple[str, bool, str | None], Import] = {}
    for name, line, call_time in named:
        if name != "agrad" and not name.startswith("agrad."):
            continue
        found.setdefault((name, call_time, None), Import(importer, name, line, call_time))
        parts = name.split(".")
        for i in range(2, len(parts)):  # packages strictly between agrad and the module
            package = ".".join(parts[:i])
            if not (importer + ".").startswith(package + "."):  # own ancestors are already running
                found.setdefault((package, call_time, name), Import(importer, package, line, call_time, via=name))
    return [imp for imp in found.values() if imp.imported != importer]


ALL_IMPORTS: list[Import] = [imp for name in MODULES for imp in imports_of(name)]


def _describe(imp: Import) -> str:
    a, b = layer_of(imp.importer), layer_of(imp.imported)
    when = "call-time import, " if imp.call_time else ""
    via = f", run by importing {imp.via}" if imp.via else ""
    return f"{imp.importer} -> {imp.imported} ({when}layer {a} imports layer {b}{via}; line {imp.line})"


def _upward(imports: list[Import]) -> list[str]:
    bad: list[str] = []
    named_upward = {(i.importer, i.imported, i.call_time) for i in imports if i.via is None}
    for imp in imports:
        a, b = layer_of(imp.importer), layer_of(imp.imported)
        if a is None or b is None or b <= a:
            continue
        if imp.call_time and (imp.importer, imp.imported) in CALL_TIME_ALLOWED:
            continue
        if imp.via is not None and (imp.importer, imp.via, imp.call_time) in named_upward:
            continue  # the module itself is reported; its package adds nothing
        bad.append(_describe(imp))
    return bad


def _graph(imports: list[Import]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for imp in imports:
        if imp.imported in graph:
            graph[imp.importer].add(imp.imported)
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm (iterative): the components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(sorted(component))
    return components


def _path(graph: dict[str, set[str]], start: str, goal: str) -> list[str] | None:
    """A shortest import path from ``start`` to ``goal`` (breadth first)."""
    previous: dict[str, str | None] = {start: None}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for child in sorted(graph[node]):
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
        if goal in previous:
            path = [goal]
            while (step := previous[path[-1]]) is not None:
                path.append(step)
            return path[::-1]
    return None


def _cycle_message(graph: dict[str, set[str]], component: list[str]) -> str:
    first = component[0]
    back = next(child for child in sorted(graph[first]) if child in component)
    path = _path({k: v & set(component) for k, v in graph.items() if k in component}, back, first) or [back]
    return "cycle: " + " -> ".join([first, *path])


def _fail(title: str, lines: list[str]) -> None:
    if lines:
        raise AssertionError(f"{title} ({len(lines)}):\n" + "\n".join(sorted(set(lines))))


# -- the checks ------------------------------------------------------------------------------------


def test_every_module_has_a_layer() -> None:
    assert "agrad._tensor" in MODULES and "agrad" in MODULES
    _fail("modules missing from the layer map in tests/test_layering.py",
          [name for name in MODULES if layer_of(name) is None])


def test_module_level_imports_never_point_upward() -> None:
    _fail("upward module-level imports", _upward([i for i in ALL_IMPORTS if not i.call_time]))


def test_call_time_imports_never_point_upward() -> None:
    _fail("upward call-time imports (allowed ones: CALL_TIME_ALLOWED)",
          _upward([i for i in ALL_IMPORTS if i.call_time]))


def test_no_cycles_among_module_level_imports() -> None:
    graph = _graph([i for i in ALL_IMPORTS if not i.call_time])
    _fail("import cycles among module-level imports",
          [_cycle_message(graph, component) for component in strongly_connected(graph)])


def test_call_time_imports_close_no_cycle() -> None:
    """A function-body import of a module that imports this one back at module
    level is a circular import postponed, not removed."""
    graph = _graph([i for i in ALL_IMPORTS if not i.call_time])
    bad: list[str] = []
    for imp in ALL_IMPORTS:
        if not imp.call_time or imp.via is not None or imp.imported not in graph:
            continue
        if (imp.importer, imp.imported) in CALL_TIME_ALLOWED:
            continue
        back = _path(graph, imp.imported, imp.importer)
        if back is not None:
            bad.append(f"{imp.importer} -> {imp.imported} (call-time import, line {imp.line}, "
                       f"closes the cycle {' -> '.join(back)})")
    _fail("call-time imports that dodge an import cycle", bad)


def test_allowlist_is_still_needed() -> None:
    used = {(i.importer, i.imported) for i in ALL_IMPORTS if i.call_time}
    assert set(CALL_TIME_ALLOWED) <= used, f"stale CALL_TIME_ALLOWED entries: {set(CALL_TIME_ALLOWED) - used}"


def test_package_init_has_no_import_order_tricks() -> None:
    """``agrad/__init__.py`` imports what it exports, all at the top, in the
    order a formatter would put them: none is there for a side effect, and none
    has to come after something else to work."""
    path = MODULES["agrad"]
    source = path.read_text()
    tree = ast.parse(source)
    bad: list[str] = []
    # 1. no comment that pins an order or silences "import not at top" / "unused import"
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            text = token.string.replace(" ", "").lower()
            if "isort:" in text or any(code in text for code in ("e402", "f401")):
                bad.append(f"agrad/__init__.py:{token.start[0]}: {token.string.strip()}")
    # 2. every module-level import comes before any other statement
    body = tree.body[1:] if ast.get_docstring(tree) is not None else tree.body
    seen_code = False
    for stmt in body:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            if seen_code:
                bad.append(f"agrad/__init__.py:{stmt.lineno}: import after other statements")
        else:
            seen_code = True
    # 3. every name an import binds is used or exported (a star import exports its __all__)
    bound: dict[str, int] = {}
    for stmt in body:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            for alias in stmt.names:
                if alias.name != "*":
                    bound[(alias.asname or alias.name).split(".")[0]] = stmt.lineno
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    exported: set[str] = set()
    for stmt in body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in stmt.targets):
            exported |= {c.value for c in ast.walk(stmt.value)
                         if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    for name, line in bound.items():
        if name not in used and name not in exported:
            bad.append(f"agrad/__init__.py:{line}: {name} is imported for a side effect (neither used nor exported)")
    _fail("import-order tricks in agrad/__init__.py", bad)


def test_every_context_var_lives_in_the_ambient_module() -> None:
    """Note [Ambient state in contextvars]: one module holds all ambient state."""
    stray = []
    for path in sorted(ROOT.rglob("*.py")):
        if module_name(path) == "agrad._ambient":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            name = getattr(node, "func", None)
            if isinstance(node, ast.Call) and getattr(name, "id", getattr(name, "attr", None)) == "ContextVar":
                stray.append(f"{module_name(path)}:{node.lineno} creates a ContextVar")
    _fail("ContextVars outside agrad._ambient", stray)
