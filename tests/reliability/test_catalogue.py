"""The misuse catalogue, one test per case: torch's exception type and message (unless the case is a
listed mismatch, and then it must still differ), ``.grad`` unchanged by the error, the engine usable."""

from __future__ import annotations

import pytest

from tests.reliability import catalogue


def test_the_catalogue_is_large_and_its_known_mismatches_are_cases() -> None:
    assert len(catalogue.CASES) >= 130
    assert set(catalogue.KNOWN_MISMATCHES) <= set(catalogue.CASES)


@pytest.mark.parametrize("name", list(catalogue.CASES))
def test_misuse_fails_as_in_torch_and_changes_no_grad(name: str) -> None:
    _, wrong = catalogue.problems(name)
    assert not wrong, "; ".join(wrong)
