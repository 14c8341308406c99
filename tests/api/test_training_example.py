"""examples/training.py: its one training loop, driven awaited and blocking, trains and agrees with itself."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "training.py"


@pytest.fixture(scope="module")
def training() -> ModuleType:
    spec = importlib.util.spec_from_file_location("training_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_both_forms_print_the_same_losses(training: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    curves = training.main(["--steps", "6", "--every", "2"])
    assert list(curves) == ["awaited", "blocking"]
    assert curves["awaited"] == curves["blocking"]
    assert len(curves["blocking"]) == 6 and all(math.isfinite(v) for v in curves["blocking"])
    lines = capsys.readouterr().out.splitlines()
    for form in curves:
        steps = [int(line.split()[2]) for line in lines if line.startswith(form) and " step " in line]
        assert steps == [0, 2, 4, 5]
        assert any(line.startswith(form) and "accuracy" in line for line in lines)
    assert lines[-1] == "awaited and blocking losses equal: True"


def test_the_loop_learns(training: ModuleType) -> None:
    losses = training.main(["--steps", "60", "--form", "blocking"])["blocking"]
    assert sum(losses[-10:]) / 10 < 0.6 * losses[0]


def test_one_form_and_the_plot(training: ModuleType, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "loss_curve.png"
    curves = training.main(["--steps", "4", "--form", "awaited", "--plot", str(path)])
    assert list(curves) == ["awaited"]
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
