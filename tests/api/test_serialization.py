"""agrad.save / agrad.load: safetensors files, structure in JSON, never pickle."""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import agrad
from tests.helpers import requires_torch, torch

safetensors = pytest.importorskip("safetensors")


def _round_trip(obj: Any, **load_kwargs: Any) -> Any:
    buf = io.BytesIO()
    agrad.save(obj, buf)
    buf.seek(0)
    return agrad.load(buf, **load_kwargs)


def _same(a: Any, b: Any) -> None:
    assert type(a) is type(b)
    if isinstance(a, agrad.Tensor):
        assert a.dtype is b.dtype and a.shape == b.shape and a.requires_grad == b.requires_grad
        np.testing.assert_array_equal(a.detach().float().numpy() if a.dtype is agrad.bfloat16 else a.detach().numpy(),
                                      b.detach().float().numpy() if b.dtype is agrad.bfloat16 else b.detach().numpy())
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b)
    else:
        assert a == b


DTYPES = ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (0, 3), (2, 3), (4,)])
def test_tensors_of_every_dtype_and_shape_round_trip(dtype: str, shape: tuple[int, ...]) -> None:
    t = agrad.tensor(np.random.default_rng(0).uniform(-5, 5, shape)).to(getattr(agrad, dtype))
    _same(_round_trip(t), t)


def test_bfloat16_round_trips() -> None:
    pytest.importorskip("ml_dtypes")
    t = agrad.tensor([1.5, -2.25, 3.0]).bfloat16()
    _same(_round_trip(t), t)


def test_structures_round_trip() -> None:
    w = agrad.randn(3, 2, requires_grad=True)
    obj = {
        "model": {"fc.weight": w, "fc.bias": agrad.zeros(2)},
        "optimizer": {"state": {0: {"step": 3, "exp_avg": agrad.ones(3, 2)}},
                      "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "params": [0], "name": None}]},
        "floats": [math.inf, -math.inf, math.nan, 0.5],
        "flags": (True, False),
        "dtype": agrad.float16,
        "shape": agrad.Size([2, 3]),
        "note": "text",
    }
    _same(_round_trip(obj), obj)


def test_a_tensor_saved_twice_loads_as_one_object() -> None:
    t = agrad.ones(2)
    out = _round_trip({"a": t, "b": [t]})
    assert out["a"] is out["b"][0]


def test_non_contiguous_tensors_save_their_values() -> None:
    t = agrad.arange(12.0).reshape(3, 4).t()
    _same(_round_trip(t), t.contiguous())


def test_paths(tmp_path: Path) -> None:
    p = tmp_path / "state.safetensors"
    agrad.save({"x": agrad.arange(3)}, p)
    _same(agrad.load(p), {"x": agrad.arange(3)})
    agrad.save(agrad.ones(1), str(p))
    _same(agrad.load(str(p), map_location="cpu"), agrad.ones(1))


@pytest.mark.parametrize("obj", [{1, 2}, object(), [lambda: 0], {"a": np.zeros(2)}])
def test_other_objects_are_refused_and_nothing_is_written(obj: Any) -> None:
    buf = io.BytesIO()
    with pytest.raises(TypeError, match="agrad.save: cannot save an object of type"):
        agrad.save(obj, buf)
    assert buf.getvalue() == b""


def test_map_location_takes_devices_only() -> None:
    buf = io.BytesIO()
    agrad.save(agrad.ones(1), buf)
    buf.seek(0)
    with pytest.raises(TypeError, match="map_location must be a device"):
        agrad.load(buf, map_location={"cuda:0": "cpu"})


@requires_torch
def test_a_safetensors_file_written_by_torch_loads_as_its_tensors(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    state = {"fc.weight": torch.randn(3, 2), "fc.bias": torch.arange(2.0), "steps": torch.tensor([1, 2])}
    save_file(state, tmp_path / "torch.safetensors")
    loaded = agrad.load(tmp_path / "torch.safetensors")
    assert sorted(loaded) == sorted(state)
    for k, v in state.items():
        assert loaded[k].dtype.name == str(v.dtype).removeprefix("torch.")
        np.testing.assert_array_equal(loaded[k].numpy(), v.numpy())


@requires_torch
def test_torch_reads_agrad_files(tmp_path: Path) -> None:
    from safetensors.torch import load_file

    t = agrad.randn(2, 3)
    agrad.save(t, tmp_path / "t.safetensors")
    (only,) = load_file(tmp_path / "t.safetensors").values()
    np.testing.assert_array_equal(only.numpy(), t.numpy())
