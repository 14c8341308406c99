"""The generated typed block of Tensor methods in agrad/_tensor.py is current."""

from __future__ import annotations

from agrad._ops import _stubgen


def test_the_generated_tensor_methods_are_current() -> None:
    source = _stubgen.TENSOR_PY.read_text()
    assert _stubgen.render(source, _stubgen.generate()) == source, (
        "agrad/_tensor.py's generated Tensor methods are stale: run python -m agrad._ops._stubgen")


def test_every_bound_method_is_typed() -> None:
    import agrad

    block = _stubgen.TENSOR_PY.read_text().split(_stubgen.BEGIN, 1)[1].split(_stubgen.END, 1)[0]
    for name in ("exp", "sum", "view", "__add__", "__radd__", "add_", "clamp", "to", "T", "mT", "float"):
        assert hasattr(agrad.Tensor, name)
        assert f"def {name}(self" in block, name
