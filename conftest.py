"""Doctests: every docstring example in ``agrad/`` runs with the test suite.

``testpaths`` in pyproject.toml names ``agrad`` beside ``tests``, and the hook
below collects each module of the ``agrad`` package as a doctest module. This is
``--doctest-modules`` restricted to the package: the flag itself would also
import every file under ``tests/``, ``examples/`` and ``bench/`` that a run
names (benchmarks that need matplotlib, scripts that start servers). Run only
the doctests with ``python -m pytest agrad``.

Examples are written as in PyTorch's docs: ``agrad`` is already imported.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from _pytest.doctest import DoctestItem, DoctestModule

_PACKAGE = Path(__file__).resolve().parent / "agrad"

# Examples that need an optional dependency, skipped where it is absent (the
# test suite's own tests of these features skip alike).
_NEEDS = {
    "agrad._engine._cooperative.cooperative": "greenlet",  # agrad[serving]
}


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.suffix != ".py" or parent.config.getoption("doctestmodules"):
        return None  # with --doctest-modules, pytest's own hook collects them
    if _PACKAGE not in file_path.resolve().parents:
        return None
    return DoctestModule.from_parent(parent, path=file_path)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if isinstance(item, DoctestItem) and item.name in _NEEDS:
            module = _NEEDS[item.name]
            if importlib.util.find_spec(module) is None:
                item.add_marker(pytest.mark.skip(reason=f"the example needs {module}"))


@pytest.fixture(scope="session")
def doctest_namespace() -> dict[str, object]:
    """The globals every docstring example starts with (overrides pytest's)."""
    import agrad  # here, not at the top: the test session imports agrad, not this plugin

    return {"agrad": agrad}
