"""Saving and loading models: state_dicts and optimizer states round-trip through agrad.save/agrad.load,
and checkpoints written by PyTorch (safetensors, or .pt converted to safetensors) load into agrad.nn models."""

from __future__ import annotations

import io
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import agrad
from tests.helpers import requires_torch, torch
from tests.nn.oracle import assert_close

safetensors = pytest.importorskip("safetensors")


def _round_trip(obj: Any) -> Any:
    buf = io.BytesIO()
    agrad.save(obj, buf)
    buf.seek(0)
    return agrad.load(buf)


def _mlp(lib: Any) -> Any:
    nn = lib.nn
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 3))


def _cnn(lib: Any) -> Any:
    nn = lib.nn
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(4 * 3 * 3, 5))


ARCHS = {"mlp": (_mlp, (4, 6)), "cnn": (_cnn, (3, 2, 6, 6))}


@pytest.mark.parametrize("arch", list(ARCHS))
def test_a_state_dict_round_trips(arch: str) -> None:
    make, shape = ARCHS[arch]
    agrad.manual_seed(0)
    model = make(agrad)
    model(agrad.randn(*shape))  # BatchNorm's running statistics move
    state = model.state_dict()
    loaded = _round_trip(state)
    assert type(loaded) is OrderedDict and list(loaded) == list(state)
    for k, v in state.items():
        assert loaded[k].dtype is v.dtype and not isinstance(loaded[k], agrad.nn.Parameter)
        np.testing.assert_array_equal(loaded[k].numpy(), v.numpy())
    agrad.manual_seed(1)
    fresh = make(agrad).eval()
    assert repr(fresh.load_state_dict(loaded)) == "<All keys matched successfully>"
    x = agrad.randn(*shape)
    np.testing.assert_array_equal(fresh(x).detach().numpy(), model.eval()(x).detach().numpy())


def test_parameters_round_trip_as_parameters() -> None:
    model = _mlp(agrad)
    model[0].bias.requires_grad_(False)
    state = model.state_dict(keep_vars=True)
    loaded = _round_trip(state)
    for k, v in state.items():
        assert type(loaded[k]) is agrad.nn.Parameter and loaded[k].requires_grad == v.requires_grad
    assert not loaded["0.bias"].requires_grad and loaded["0.weight"].requires_grad
    tied = _round_trip({"a": model[0].weight, "b": [model[0].weight]})
    assert tied["a"] is tied["b"][0] and isinstance(tied["a"], agrad.nn.Parameter)


def _train(model: Any, opt: Any, steps: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        opt.zero_grad()
        loss = (model(agrad.tensor(rng.standard_normal((5, 6)), dtype=agrad.float32)) ** 2).mean()
        loss.backward_sync()
        opt.step()


@pytest.mark.parametrize("optimizer", ["Adam", "SGD"])
def test_an_optimizer_state_round_trips_and_training_resumes_identically(optimizer: str) -> None:
    def build(seed: int) -> tuple[Any, Any]:
        agrad.manual_seed(seed)
        model = _mlp(agrad)
        kwargs = {"lr": 0.01, "momentum": 0.9} if optimizer == "SGD" else {"lr": 0.01}
        return model, getattr(agrad.optim, optimizer)(model.parameters(), **kwargs)

    model, opt = build(0)
    _train(model, opt, 3, seed=1)
    checkpoint = _round_trip({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3})
    assert checkpoint["epoch"] == 3
    state = checkpoint["optimizer"]["state"]
    assert sorted(state) == list(range(len(list(model.parameters()))))  # int keys survive
    assert all(isinstance(k, int) for k in state)

    resumed, resumed_opt = build(5)
    resumed.load_state_dict(checkpoint["model"])
    resumed_opt.load_state_dict(checkpoint["optimizer"])
    assert resumed_opt.state_dict()["param_groups"] == opt.state_dict()["param_groups"]
    _train(model, opt, 2, seed=2)
    _train(resumed, resumed_opt, 2, seed=2)
    for p, q in zip(model.parameters(), resumed.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())


@requires_torch
@pytest.mark.parametrize("arch", list(ARCHS))
@pytest.mark.parametrize("mode", ["eval", "train"])
def test_a_safetensors_checkpoint_written_by_torch_loads_into_the_same_agrad_model(
        arch: str, mode: str, tmp_path: Path) -> None:
    import safetensors.torch

    make, shape = ARCHS[arch]
    torch.manual_seed(0)
    theirs = make(torch)
    theirs(torch.randn(*shape))  # BatchNorm's running statistics move away from 0 and 1
    path = tmp_path / "model.safetensors"
    safetensors.torch.save_file(theirs.state_dict(), str(path))
    state = agrad.load(path)
    assert set(state) == set(theirs.state_dict())
    ours = make(agrad)
    assert repr(ours.load_state_dict(state)) == "<All keys matched successfully>"
    getattr(ours, mode)()
    getattr(theirs, mode)()
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    assert_close(ours(agrad.tensor(x)), theirs(torch.tensor(x)), "float32", "output")
    for k, v in theirs.state_dict().items():
        assert_close(ours.state_dict()[k], v, "float32", k)


@requires_torch
def test_a_pt_checkpoint_with_tied_weights_converts_with_the_documented_command(tmp_path: Path) -> None:
    import subprocess
    import sys
    import textwrap

    class Tied(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(5, 3)
            self.out = torch.nn.Linear(3, 5, bias=False)
            self.out.weight = self.embed.weight

    theirs = Tied()
    torch.save(theirs.state_dict(), tmp_path / "m.pt")
    doc = agrad.serialization.__doc__ or ""
    start = doc.index('python -c "\n') + len('python -c "\n')
    script = textwrap.dedent(doc[start:doc.index('" m.pt m.safetensors', start)])  # the documented command
    subprocess.run([sys.executable, "-c", script, "m.pt", "m.safetensors"], cwd=tmp_path, check=True)
    state = agrad.load(tmp_path / "m.safetensors")
    assert set(state) == {"embed.weight", "out.weight"}
    for k, v in theirs.state_dict().items():
        assert_close(state[k], v, "float32", k)
