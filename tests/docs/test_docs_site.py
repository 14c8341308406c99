"""The docs site: ``mkdocs build --strict`` (warnings are errors) and the
headless-Chromium check of every built page (``docs/_tools/check_site.py``:
loads, links, anchors, nothing fetched from outside the site, an API
reference entry for every public name).

Needs the ``docs`` extra (``pip install -e ".[docs]"``) and Debian's
``chromium``; without them the tests skip, except where the environment
variable ``CI`` is set (CI installs both), where a missing tool fails.  The
build and check take one to two minutes; ``-k "not docs_site"`` leaves them out.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
CHECK_SITE = REPO / "docs" / "_tools" / "check_site.py"
CHROMIUM = Path("/usr/bin/chromium")


def _require(present: bool, what: str) -> None:
    """Skip without ``what``; under CI, fail."""
    if present:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{what} is missing; CI installs it and must run the docs checks")
    pytest.skip(f"{what} is missing")


def _require_mkdocs() -> None:
    present = all(importlib.util.find_spec(m) is not None for m in ("mkdocs", "material", "mkdocstrings_handlers"))
    _require(present, 'mkdocs with its plugins (pip install -e ".[docs]")')


def _require_chromium() -> None:
    _require(CHROMIUM.is_file(), f"Chromium at {CHROMIUM} (apt-get install -y chromium)")


def _load(path: Path) -> ModuleType:
    """Import a file of ``docs/`` (not a package) as a module."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(argv: list[str], what: str) -> None:
    """Run ``argv`` in the repository; fail with its output's end if it fails."""
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=900,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, f"{what} failed ({done.returncode}):\n{(done.stdout + done.stderr)[-6000:]}"


@pytest.fixture(scope="module")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once for this module's tests with warnings as errors."""
    _require_mkdocs()
    site = tmp_path_factory.mktemp("docs") / "site"
    _run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(site)], "mkdocs build --strict")
    return site


@pytest.mark.timeout(1200)  # the build and the check take one to two minutes, more on a loaded machine
def test_docs_site_builds_strict_and_every_page_passes_the_browser_check(built_site: Path) -> None:
    _require_chromium()
    _run([sys.executable, str(CHECK_SITE), str(built_site)], "check_site.py")


@pytest.mark.timeout(1200)
@pytest.mark.parametrize(("page", "entry", "parameters"), [
    ("agrad", "agrad.mm", "mat2"),                      # an op made by the op registry
    ("agrad.Tensor", "agrad.Tensor.mm", "mat2"),        # the same function as a Tensor method
    ("agrad.Tensor", "agrad.Tensor.add_", "alpha"),     # an in-place method made by a factory
    ("agrad.nn", "agrad.nn.Linear", "in_features"),     # a class written in Python
])
def test_docs_site_reference_entry_shows_the_signature(built_site: Path, page: str, entry: str,
                                                       parameters: str) -> None:
    html = (built_site / "reference" / page / "index.html").read_text(encoding="utf-8")
    start = html.index(f'id="{entry}"')
    signature = html[start:html.index("</code>", html.index('class="doc-signature', start))]
    assert f">{parameters}<" in signature, f"{entry}'s entry lacks {parameters!r}: it shows inspect.signature({entry})"


def test_docs_site_check_reports_each_kind_of_problem(tmp_path: Path) -> None:
    """A check that never fails checks nothing: on a small site with one
    problem of each kind, each is reported, and nothing else."""
    _require_chromium()
    (tmp_path / "other").mkdir()
    icon = '<link rel="icon" href="data:,">'  # else Chromium may fetch /favicon.ico, a 404 here
    (tmp_path / "index.html").write_text(
        icon + '<article><a href="other/">page</a> <a href="other/#here">anchor</a> <a href="https://pytorch.org/">ok</a>'
        ' <a href="other/#nowhere">1</a> <a href="missing/">2</a> <a href="ftp://example.org/">3</a>'
        ' <a href="https://unknown.example/">4</a> <img src="nope.png"></article>'
    )
    (tmp_path / "other" / "index.html").write_text(f'{icon}<article><h2 id="here">here</h2></article>')
    problems = _load(CHECK_SITE).check_site(tmp_path, {"/other/": ["here", "agrad.absent"]})
    expected = ["missing anchor: /other/#nowhere", "broken link: /missing/", "not http(s): ftp://example.org/",
                "unknown host: https://unknown.example/", "/nope.png: HTTP 404", "image does not load",
                "no reference entry on /other/ for: agrad.absent"]
    for fragment in expected:
        assert any(fragment in p for p in problems), f"{fragment!r} not reported in {problems}"
    assert len(problems) == len(expected), problems


def test_docs_site_docstrings_translate_pytorch_form_to_markdown() -> None:
    _require(importlib.util.find_spec("griffe") is not None, 'griffe (pip install -e ".[docs]")')
    translate = _load(REPO / "docs" / "_hooks" / "griffe_agrad.py").markdown_docstring
    text = ("Sum of :func:`agrad.add` and :class:`~agrad.Tensor`.\n\n    >>> x = 1\n    >>> x\n    1\n\n"
            "Example::\n\n    >>> agrad.ones(1)\n    tensor([1.])")
    expected = ("Sum of `agrad.add` and `Tensor`.\n\n```pycon\n>>> x = 1\n>>> x\n1\n```\n\n"
                "Examples:\n    >>> agrad.ones(1)\n    tensor([1.])")
    assert translate(text) == expected
    assert translate(expected) == expected
