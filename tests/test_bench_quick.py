"""The benchmark scripts keep working: one tiny path through ``bench/`` run in-process, and their contract.

The benchmarks are scripts, outside the package and its suite, so nothing
else notices when a change to agrad or to the shared harness breaks them.
Here: bench_engine's per-node overhead section (bench_perf's W1 chain timed
by the harness, agrad's two drivers: about a second) through its ``main``,
as ``python bench/bench_engine.py --quick --only overhead`` runs it; the
one-line message and exit status 2 of a benchmark whose peer is not
installed; and that every ``bench/bench_*.py`` has ``--quick`` and the
README shows that form.  Nothing here looks at a timing.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
SCRIPTS = sorted(p.name for p in BENCH.glob("bench_*.py"))


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], ModuleType]:
    """Import a benchmark script as a module, with ``bench/`` on a copy of ``sys.path``
    (the scripts add their own directory too) that is put back afterwards."""
    monkeypatch.setattr(sys, "path", [str(BENCH), *sys.path])
    return importlib.import_module


def test_engine_overhead_section_runs_and_prints_its_table(bench: Callable[[str], ModuleType],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    bench_engine = bench("bench_engine")
    assert bench_engine.main(["--quick", "--only", "overhead"]) == 0
    out = capsys.readouterr().out
    assert "[1/1] overhead: backward of bench_perf's W1, the 4000-node chain" in out
    assert "gradients agree: chain (1 tensor, 2 systems)" in out
    table = out[out.index("[µs/node, median of 4 samples in 2 blocks]"):]
    assert re.search(r"^\s+agrad await\s+\d", table, re.M) and re.search(r"^\s+agrad blocking\s+\d", table, re.M)
    assert "total time" in out


@pytest.mark.parametrize(("script", "argv", "missing", "command"), [
    ("bench_perf", ["--quick"], "autograd", 'pip install -e ".[bench]"'),
    ("bench_serving", ["--quick"], "starlette", 'pip install -e ".[serving]"'),
])
def test_a_missing_peer_is_one_line_and_exit_status_2(bench: Callable[[str], ModuleType],
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str], script: str,
                                                       argv: list[str], missing: str, command: str) -> None:
    if script == "bench_serving":
        pytest.importorskip("uvloop")  # imported by the script itself; a dependency of agrad on Linux
    module = bench(script)
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == missing else find_spec(name, *a))
    with pytest.raises(SystemExit) as exit_info:
        module.main(argv)
    assert exit_info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith(f"{script}.py needs {missing}") and line.endswith(command)


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_benchmark_has_quick_and_the_readme_shows_it(script: str) -> None:
    assert '"--quick"' in (BENCH / script).read_text()
    assert f"python bench/{script} --quick" in (ROOT / "README.md").read_text()
