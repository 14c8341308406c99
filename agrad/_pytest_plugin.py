"""agrad's pytest plugin: a test that forgets an ``await`` fails.

Installed with agrad (the ``pytest11`` entry point ``agrad``); disable it with
``pytest -p no:agrad``.  ``loss.backward()`` without ``await`` does nothing
and reports :class:`agrad.NotAwaitedWarning` at its line (Note [A forgotten
await] in ``agrad/_misuse.py``); the report is made while the dropped
awaitable is released, where an exception cannot propagate, so without this
plugin such a test would pass with a warning in the summary.  With it, the
test fails with the report's message.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from agrad._misuse import report_count, reports_since

__all__ = ["pytest_runtest_call"]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    """Run the test; fail it if an awaitable agrad call was dropped unawaited meanwhile."""
    before = report_count()
    result = yield
    reports = reports_since(before)
    if reports:
        pytest.fail("\n".join(reports), pytrace=False)
    return result
