"""MkDocs hook: links from the docs to repository files outside ``docs/``.

The pages link to the README, the examples and the benchmarks with relative
paths (``../examples/quickstart.py``), which work where the Markdown is read
in the repository.  A built site has no such files, and ``mkdocs build
--strict`` rejects the links.  This hook puts every linked file into the site
and points the links at it, so the same Markdown works in both places:

* a Markdown file (``README.md``) becomes a page, ``repo/README.md``, whose own
  links are rewritten the same way (its ``docs/...`` links to the site's pages);
* another text file (``examples/quickstart.py``) becomes a page showing it as
  highlighted code, ``repo/examples/quickstart.py.md``;
* any other file is copied, ``repo/<path>``;
* a directory becomes its path in code font (a site has no listings).

Files linked from those pages are included too, transitively.  A link to a
path that does not exist is left alone, for ``--strict`` to report.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

__all__ = ["on_files", "on_page_markdown"]

PREFIX = "repo"
# [text](target) and ![alt](target), without a title; the target a relative path.
_LINK = re.compile(r"(?P<bang>!?)\[(?P<text>[^\]\n]*)\]\((?P<target>[^)\s]+)\)")
_LANGUAGES = {".py": "python", ".sh": "bash", ".toml": "toml", ".yml": "yaml", ".yaml": "yaml", ".json": "json"}


def _paths(config: MkDocsConfig) -> tuple[Path, str]:
    """The repository's root and ``docs_dir`` relative to it (``"docs"``)."""
    root = Path(config.config_file_path).resolve().parent
    return root, Path(config.docs_dir).resolve().relative_to(root).as_posix()


def _text(path: Path) -> str | None:
    """The file's text, or ``None`` if it is not UTF-8 (an image)."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None


def _site_uri(root: Path, path: str) -> str:
    """Where the repository file ``path`` (outside ``docs/``) is in the site."""
    if path.endswith(".md") or _text(root / path) is None:
        return f"{PREFIX}/{path}"
    return f"{PREFIX}/{path}.md"


def _origin(src_uri: str, root: Path, docs: str) -> str | None:
    """The repository path whose Markdown the page ``src_uri`` renders; ``None``
    for a page showing a code file (its text is not Markdown to rewrite)."""
    if not src_uri.startswith(f"{PREFIX}/"):
        return f"{docs}/{src_uri}"
    path = src_uri[len(PREFIX) + 1:]
    return path if (root / path).is_file() else None


def _links(markdown: str, origin: str, root: Path) -> Iterator[tuple[re.Match[str], str, str]]:
    """Each relative link of ``markdown`` (read at repository path ``origin``)
    to an existing path in the repository: the match, that path, the fragment."""
    for match in _LINK.finditer(markdown):
        target, _, fragment = match["target"].partition("#")
        if not target or "://" in target or target.startswith(("/", "mailto:")):
            continue
        path = posixpath.normpath(posixpath.join(posixpath.dirname(origin), target))
        if not path.startswith("../") and (root / path).exists():
            yield match, path, fragment


def _code_page(path: str, text: str) -> str:
    """A page that shows the text file ``path`` as highlighted code."""
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    language = _LANGUAGES.get(posixpath.splitext(path)[1], "text")
    return f"# `{path}`\n\n{fence}{language}\n{text.rstrip()}\n{fence}\n"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add every repository file outside ``docs/`` that a page links to."""
    root, docs = _paths(config)
    pending = [(f.src_uri, f.content_string) for f in files.documentation_pages()]
    while pending:
        src_uri, markdown = pending.pop()
        origin = _origin(src_uri, root, docs)
        if origin is None:
            continue
        for _, path, _ in _links(markdown, origin, root):
            if path.startswith(f"{docs}/") or (root / path).is_dir():
                continue
            uri = _site_uri(root, path)
            if files.get_file_from_path(uri):
                continue
            text = _text(root / path)
            if text is None:
                files.append(File.generated(config, uri, content=(root / path).read_bytes()))
                continue
            content = text if path.endswith(".md") else _code_page(path, text)
            files.append(File.generated(config, uri, content=content))
            pending.append((uri, content))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Point the page's links to repository files at their place in the site."""
    root, docs = _paths(config)
    origin = _origin(page.file.src_uri, root, docs)
    if origin is None:
        return markdown
    here = posixpath.dirname(page.file.src_uri)
    pieces: list[str] = []
    end = 0
    for match, path, fragment in _links(markdown, origin, root):
        if (root / path).is_dir():
            text = match["text"].strip("`")
            link = f"`{path}/`" if text.rstrip("/") == path else f"{match['text']} (`{path}/`)"
        else:
            uri = path[len(docs) + 1:] if path.startswith(f"{docs}/") else _site_uri(root, path)
            target = posixpath.relpath(uri, here or ".") + (f"#{fragment}" if fragment else "")
            link = f"{match['bang']}[{match['text']}]({target})"
        pieces += [markdown[end:match.start()], link]
        end = match.end()
    return "".join(pieces) + markdown[end:]
