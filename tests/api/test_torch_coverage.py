"""agrad's public names against torch's, group by group (tests/api/torch_surface.py).

The coverage table is printed (``pytest -s`` or ``-rP`` shows it); the test
fails when a required name is missing, or when a pending one has arrived and
should move to the required list.
"""

from __future__ import annotations

import pytest

from tests.api import torch_surface
from tests.helpers import requires_torch, torch


@requires_torch
def test_required_names_present() -> None:
    print(torch_surface.table(torch))
    missing = {name: m for name, _, _, m in torch_surface.coverage(torch) if m}
    assert not missing, f"required names missing: {missing}"


@requires_torch
@pytest.mark.parametrize("group", [g.name for g in torch_surface.GROUPS])
def test_required_and_pending_names_are_torch_names(group: str) -> None:
    """Both lists name things torch has in that group (no typos, no stale names)."""
    g = next(g for g in torch_surface.GROUPS if g.name == group)
    theirs = g.torch_names(torch)
    listed = torch_surface.REQUIRED.get(group, set()) | set(torch_surface.PENDING.get(group, {}))
    assert not listed - theirs, f"not torch names in {group}: {sorted(listed - theirs)}"


@pytest.mark.parametrize("group", [g.name for g in torch_surface.GROUPS])
def test_pending_names_are_not_there_yet(group: str) -> None:
    g = next(g for g in torch_surface.GROUPS if g.name == group)
    arrived = sorted(n for n in torch_surface.PENDING.get(group, {}) if hasattr(g.agrad_namespace(), n))
    assert not arrived, f"now in agrad, move them to REQUIRED[{group!r}]: {arrived}"
