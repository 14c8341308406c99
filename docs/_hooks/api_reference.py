"""MkDocs hook: the API reference, generated at build time from the live ``__all__`` lists.

One page per public module of agrad (every module under ``agrad/`` with no
path component starting with ``_``), ``reference/<module>.md``, with one entry
per name in the module's ``__all__``, in that order.  Pages are made in memory
for each build, so the reference cannot go stale: a new module or name appears
at the next build, a removed one disappears.

An object exported by several modules (``agrad.nn.Linear`` is also
``agrad.nn.modules.Linear`` and ``agrad.nn.modules.linear.Linear``) is rendered
in full once, at its *home*: the shortest public path that exports it, which
is the one PyTorch users write.  Its other entries are short ones that link
there, as Sphinx's "alias of".  Every entry's anchor is its full dotted path
(``#agrad.nn.modules.linear.Linear``); ``docs/_tools/check_site.py`` checks that
every public name has one.

Entries are rendered by mkdocstrings' Python handler with dynamic inspection
(``force_inspection`` in ``mkdocs.yml``): many ops are functions made at import
time by ``agrad/_ops/_registry.py``, which static analysis cannot see; see
``docs/_hooks/griffe_agrad.py`` for how griffe is told where they live.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

__all__ = ["REFERENCE_DIR", "public_modules", "public_names", "on_config", "on_files"]

REFERENCE_DIR = "reference"
PACKAGE = "agrad"
# Classes whose members have a page of their own, as ``torch.Tensor``'s do in
# PyTorch's docs: Tensor's ~500 methods would otherwise be most of agrad's page.
CLASS_PAGES = ("agrad.Tensor",)


def public_modules() -> list[str]:
    """Every public module of agrad, the package first, then by dotted name."""
    package = importlib.import_module(PACKAGE)
    found = [
        info.name for info in pkgutil.walk_packages(package.__path__, f"{PACKAGE}.")
        if not any(part.startswith("_") for part in info.name.split("."))
    ]
    return [PACKAGE, *sorted(found)]


def public_names(module: str) -> list[str]:
    """The names in ``module``'s ``__all__``, in its order."""
    return list(importlib.import_module(module).__all__)


def page_uri(path: str) -> str:
    """The reference page of the module (or class in ``CLASS_PAGES``) at ``path``, relative to ``docs/``."""
    return f"{REFERENCE_DIR}/{path}.md"


def _is_shared(obj: object) -> bool:
    """Whether ``obj``'s identity says it is one object exported under several
    names (a class, function or module) rather than a value that may be equal
    by coincidence (``True``, a number, a string)."""
    return callable(obj) or isinstance(obj, ModuleType)


def _homes(modules: list[str]) -> dict[int, str]:
    """For each shared exported object (by id), the full path of its home: a
    public module's own path (its page), else the path with the fewest
    components, then the first module in ``modules``."""
    homes = {id(importlib.import_module(module)): module for module in modules}
    depth = dict.fromkeys(homes, -1)
    for module in modules:
        namespace = importlib.import_module(module)
        for name in public_names(module):
            obj = getattr(namespace, name)
            if _is_shared(obj) and module.count(".") < depth.get(id(obj), 1 << 30):
                homes[id(obj)] = f"{module}.{name}"
                depth[id(obj)] = module.count(".")
    return homes


def _directive(path: str, **options: object) -> list[str]:
    """The lines of mkdocstrings' ``::: path`` block, with ``options`` for it
    over those of ``mkdocs.yml``."""
    lines = [f"::: {path}"]
    if options:
        lines += ["    options:", *(f"      {key}: {json.dumps(value)}" for key, value in options.items())]
    return [*lines, ""]


def _module_page(module: str, modules: list[str], homes: dict[int, str]) -> str:
    """The Markdown of ``module``'s reference page (``modules``: every public one)."""
    namespace = importlib.import_module(module)
    lines = [f"# `{module}`", "",
             *_directive(module, members=False, show_root_heading=False, show_root_toc_entry=False)]
    for name in public_names(module):
        path = f"{module}.{name}"
        obj = getattr(namespace, name)
        home = homes.get(id(obj), path) if _is_shared(obj) else path
        if home in modules:
            lines += [f"## `{name}` {{ #{path} }}", "", f"The module [`{home}`]({home}.md), on its own page.", ""]
        elif home == path and path in CLASS_PAGES:
            lines += [*_directive(path, members=False), f"Its methods and attributes are on [a page]({path}.md).", ""]
        elif home == path:
            lines += _directive(path)
        else:
            lines += [f"## `{name}` {{ #{path} }}", "", f"The same object as [`{home}`][{home}], documented there.", ""]
    return "\n".join(lines)


def _class_page(path: str) -> str:
    """The Markdown of the page of the members of the class at ``path``."""
    options = {"show_root_heading": False, "show_root_toc_entry": False, "heading_level": 1}
    return "\n".join([f"# `{path}`", "", *_directive(path, **options)])


def _index_page(modules: list[str]) -> str:
    """The Markdown of the reference's front page: every module, its summary
    line and how many names it exports."""
    lines = [
        "# API reference",
        "",
        "One page per public module of agrad, generated from its `__all__` at each build.",
        "An object exported under several paths is documented at the shortest one;",
        "its other entries link there.",
        "",
        "| module | names | summary |",
        "| --- | --- | --- |",
    ]
    for module in modules:
        doc = (importlib.import_module(module).__doc__ or "").strip().splitlines()
        summary = doc[0].replace("|", "\\|") if doc else ""
        lines.append(f"| [`{module}`]({module}.md) | {len(public_names(module))} | {summary} |")
    return "\n".join(lines) + "\n"


def _nav(modules: list[str], parent: str) -> Iterator[dict[str, Any]]:
    """The nav entries of ``parent``'s public submodules: a module with public
    submodules becomes a section holding its own page and theirs."""
    prefix = f"{parent}."
    children = [m for m in modules if m.startswith(prefix) and "." not in m[len(prefix):]]
    for child in children:
        grandchildren = list(_nav(modules, child))
        if grandchildren:
            yield {child: [page_uri(child), *grandchildren]}
        else:
            yield {child: page_uri(child)}


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Append the reference's section to the nav (the rest is in ``mkdocs.yml``)."""
    modules = public_modules()
    pages = [{"Overview": f"{REFERENCE_DIR}/index.md"}, {PACKAGE: page_uri(PACKAGE)}]
    section = [*pages, *({path: page_uri(path)} for path in CLASS_PAGES), *_nav(modules, PACKAGE)]
    config.nav = [*(config.nav or []), {"API reference": section}]
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the reference's pages, made in memory, to the build's files."""
    modules = public_modules()
    homes = _homes(modules)
    files.append(File.generated(config, f"{REFERENCE_DIR}/index.md", content=_index_page(modules)))
    for module in modules:
        files.append(File.generated(config, page_uri(module), content=_module_page(module, modules, homes)))
    for path in CLASS_PAGES:
        files.append(File.generated(config, page_uri(path), content=_class_page(path)))
    return files
