"""``agrad.nn`` recurrent layers against ``torch.nn``: RNN, LSTM, GRU and their cells.

Values and gradients (inputs, initial states, every parameter) in float64 and
float32 over layer counts, directions, ``batch_first``, ``bias``, LSTM's
``proj_size`` and unbatched input; parameter names, order and initialisation;
``repr``; PackedSequence input; dropout in training and evaluation; double backward; and PyTorch's
errors, type and text, for bad arguments and bad inputs.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
from tests.helpers import requires_torch, torch
from tests.nn.oracle import assert_close, check_module, load_from_torch

T, B, IN, H = 3, 2, 3, 4  # sequence length, batch, input and hidden sizes: small, so every case is fast

LAYERS = [("RNN", {}), ("RNN", {"nonlinearity": "relu"}), ("LSTM", {}), ("GRU", {})]
CONFIGS = [{}, {"num_layers": 2}, {"bidirectional": True}, {"bias": False},
           {"num_layers": 2, "bidirectional": True, "batch_first": True}]


def _ids(kw: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in kw.items()) or "default"


def _input_shape(batched: bool, batch_first: bool) -> tuple[int, ...]:
    if not batched:
        return (T, IN)
    return (B, T, IN) if batch_first else (T, B, IN)


def _state_shapes(cls: str, kw: dict[str, Any], batched: bool) -> list[tuple[int, ...]]:
    """The shapes of ``h_0`` (and LSTM's ``c_0``)."""
    rows = kw.get("num_layers", 1) * (2 if kw.get("bidirectional") else 1)
    sizes = [kw.get("proj_size") or H] + ([H] if cls == "LSTM" else [])
    return [(rows, B, s) if batched else (rows, s) for s in sizes]


def _with_state(lib: Any, inner: Any) -> Any:
    """``inner`` behind a module whose forward takes the states as separate tensors (``check_module``
    makes only bare arrays into tensors), so ``(h_0, c_0)`` can be checked like ``x``."""

    class WithState(lib.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, x: Any, *states: Any) -> Any:
            return self.inner(x, None if not states else states[0] if len(states) == 1 else states)

    return WithState()


def _pair(cls: str, kw: dict[str, Any]) -> tuple[Any, Any]:
    return getattr(agrad.nn, cls)(IN, H, **kw), getattr(torch.nn, cls)(IN, H, **kw)


@requires_torch
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
@pytest.mark.parametrize("config", CONFIGS, ids=_ids)
@pytest.mark.parametrize(("cls", "kind"), LAYERS, ids=["RNN", "RNN-relu", "LSTM", "GRU"])
def test_layer_matches_torch(cls: str, kind: dict[str, Any], config: dict[str, Any], batched: bool,
                             dtype: str) -> None:
    kw = {**kind, **config}
    ours, theirs = _pair(cls, kw)
    rng = np.random.default_rng(1)
    check_module(ours, theirs, [rng.standard_normal(_input_shape(batched, kw.get("batch_first", False)))], dtype)


@requires_torch
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
@pytest.mark.parametrize(("cls", "kw"), [("RNN", {"num_layers": 2}), ("GRU", {"bidirectional": True}),
                                         ("LSTM", {"num_layers": 2, "bidirectional": True}),
                                         ("LSTM", {"proj_size": 2, "batch_first": True})], ids=str)
def test_layer_with_initial_state(cls: str, kw: dict[str, Any], batched: bool) -> None:
    ours, theirs = _pair(cls, kw)
    rng = np.random.default_rng(2)
    inputs = [rng.standard_normal(s) for s in
              [_input_shape(batched, kw.get("batch_first", False)), *_state_shapes(cls, kw, batched)]]
    check_module(_with_state(agrad, ours), _with_state(torch, theirs), inputs, "float64")


# torch's own float32 LSTM with projections says it falls back from oneDNN
@pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")
@requires_torch
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("config", [{}, {"num_layers": 2, "bidirectional": True, "bias": False},
                                    {"batch_first": True}], ids=_ids)
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
@pytest.mark.parametrize("with_state", [False, True], ids=["zeros", "h0"])
def test_lstm_projection(config: dict[str, Any], batched: bool, with_state: bool, dtype: str) -> None:
    kw = {"proj_size": 2, **config}
    ours, theirs = _pair("LSTM", kw)
    rng = np.random.default_rng(3)
    shapes = [_input_shape(batched, kw.get("batch_first", False))]
    if with_state:
        shapes += _state_shapes("LSTM", kw, batched)
    check_module(_with_state(agrad, ours), _with_state(torch, theirs), [rng.standard_normal(s) for s in shapes],
                 dtype)


@requires_torch
@pytest.mark.parametrize(("cls", "kw"), [("RNN", {}), ("LSTM", {"proj_size": 3}), ("GRU", {"bias": False})], ids=str)
def test_parameters_names_order_and_init(cls: str, kw: dict[str, Any]) -> None:
    kw = {"num_layers": 2, "bidirectional": True, **kw}
    ours, theirs = _pair(cls, kw)
    assert ours._flat_weights_names == theirs._flat_weights_names
    assert [name for name, _ in ours.named_parameters()] == [name for name, _ in theirs.named_parameters()]
    assert [[tuple(w.shape) for w in ws] for ws in ours.all_weights] == \
        [[tuple(w.shape) for w in ws] for ws in theirs.all_weights]
    assert all(w is getattr(ours, name) for w, name in zip(ours._flat_weights, ours._flat_weights_names))
    bound = 1 / math.sqrt(H)
    for p in ours.parameters():
        assert isinstance(p, agrad.nn.Parameter) and p.dtype == agrad.float32
        assert float(p.abs().max()) <= bound
    assert ours.flatten_parameters() is None


def test_factory_kwargs_and_to() -> None:
    lstm = agrad.nn.LSTM(IN, H, dtype=agrad.float64)
    assert {p.dtype for p in lstm.parameters()} == {agrad.float64}
    params = list(lstm.parameters())
    lstm.float()
    assert [p is q for p, q in zip(params, lstm.parameters())] == [True] * len(params)
    out, (h, c) = lstm(agrad.zeros(T, B, IN))
    assert out.dtype == h.dtype == c.dtype == agrad.float32


@requires_torch
def test_reassigned_parameter_is_used() -> None:
    ours, theirs = _pair("GRU", {})
    load_from_torch(ours, theirs)
    w = np.random.default_rng(4).standard_normal(tuple(theirs.weight_hh_l0.shape)).astype("float32")
    theirs.weight_hh_l0 = torch.nn.Parameter(torch.from_numpy(w.copy()))
    ours.weight_hh_l0 = agrad.nn.Parameter(agrad.from_numpy(w.copy()))
    x = np.random.default_rng(5).standard_normal((T, B, IN)).astype("float32")
    assert_close(ours(agrad.from_numpy(x))[0], theirs(torch.from_numpy(x))[0], "float32")


@requires_torch
@pytest.mark.parametrize("cls", ["RNN", "LSTM", "GRU"])
def test_dropout_between_layers(cls: str) -> None:
    ours, theirs = _pair(cls, {"num_layers": 2, "dropout": 0.5})
    x = np.random.default_rng(6).standard_normal((T, B, IN))
    theirs.eval()
    check_module(ours, theirs, [x], "float64")  # evaluation: no dropout
    xa = agrad.from_numpy(x)
    evaluated = ours(xa)[0]
    ours.train()
    agrad.manual_seed(0)
    trained = ours(xa)[0]
    agrad.manual_seed(0)
    assert trained.shape == evaluated.shape
    assert np.array_equal(trained.detach().numpy(), ours(xa)[0].detach().numpy())  # the same seed, the same masks
    assert not np.allclose(trained.detach().numpy(), evaluated.detach().numpy())


@requires_torch
@pytest.mark.parametrize(("cls", "kw"), [("RNN", {"nonlinearity": "relu"}), ("LSTM", {}), ("GRU", {"bias": False})],
                         ids=str)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "unbatched"])
@pytest.mark.parametrize("with_state", [False, True], ids=["zeros", "h0"])
def test_cell_matches_torch(cls: str, kw: dict[str, Any], dtype: str, batched: bool, with_state: bool) -> None:
    ours, theirs = getattr(agrad.nn, cls + "Cell")(IN, H, **kw), getattr(torch.nn, cls + "Cell")(IN, H, **kw)
    rng = np.random.default_rng(7)
    shapes = [(B, IN) if batched else (IN,)]
    if with_state:
        shapes += [(B, H) if batched else (H,)] * (2 if cls == "LSTM" else 1)
        ours, theirs = _with_state(agrad, ours), _with_state(torch, theirs)
    check_module(ours, theirs, [rng.standard_normal(s) for s in shapes], dtype)


@requires_torch
@pytest.mark.parametrize("make", [
    lambda nn: nn.RNN(3, 4), lambda nn: nn.RNN(3, 4, 2, "relu", False),
    lambda nn: nn.LSTM(3, 4, 2, dropout=0.5, bidirectional=True, batch_first=True, proj_size=2, bias=False),
    lambda nn: nn.GRU(10, 20, num_layers=3, dropout=0.25),
    lambda nn: nn.RNNCell(3, 4), lambda nn: nn.RNNCell(3, 4, bias=False, nonlinearity="relu"),
    lambda nn: nn.LSTMCell(3, 4, False), lambda nn: nn.GRUCell(3, 4),
])
def test_repr(make: Callable[[Any], Any]) -> None:
    assert repr(make(agrad.nn)) == repr(make(torch.nn)).replace("torch", "agrad")


def _packing(lib: Any, inner: Any) -> Any:
    """``inner`` fed a PackedSequence packed (unsorted) from a padded batch and its lengths."""

    class Packing(lib.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, x: Any, lengths: Any, *states: Any) -> Any:
            packed = lib.nn.utils.rnn.pack_padded_sequence(x, lengths, enforce_sorted=False)
            return self.inner(packed, None if not states else states[0] if len(states) == 1 else states)

    return Packing()


@pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")
@requires_torch
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("with_state", [False, True], ids=["zeros", "h0"])
@pytest.mark.parametrize(("cls", "kw"), [("RNN", {}), ("GRU", {"num_layers": 2, "bidirectional": True}),
                                         ("LSTM", {"bidirectional": True}),
                                         ("LSTM", {"num_layers": 2, "proj_size": 2, "bias": False})], ids=str)
def test_packed_sequence(cls: str, kw: dict[str, Any], with_state: bool, dtype: str) -> None:
    ours, theirs = _pair(cls, kw)
    rng = np.random.default_rng(8)
    lengths = np.array([2, 4, 1], dtype=np.int64)  # unsorted, so the states are permuted and back
    inputs = [rng.standard_normal((4, 3, IN)), lengths]
    if with_state:
        inputs += [rng.standard_normal((s[0], 3, s[2])) for s in _state_shapes(cls, kw, True)]
    check_module(_packing(agrad, ours), _packing(torch, theirs), inputs, dtype)


def test_dropout_on_one_layer_warns() -> None:
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1, but got dropout=0.3 "
                                         "and num_layers=1"):
        agrad.nn.GRU(3, 4, dropout=0.3)


def test_double_backward() -> None:
    agrad.manual_seed(0)
    lstm = agrad.nn.LSTM(2, 2, bidirectional=True, dtype=agrad.float64)
    x = agrad.randn(2, 1, 2, dtype=agrad.float64, requires_grad=True)
    assert agrad.autograd.gradgradcheck(lambda x: lstm(x)[0], (x,))


def _raised(fn: Callable[[], Any]) -> tuple[type, str]:
    with pytest.raises(Exception) as info:
        fn()
    return info.type, str(info.value)


def _same_error(make: Callable[[Any], Any]) -> None:
    """``make(agrad)`` raises what ``make(torch)`` raises: the same type and text, 'torch' read as 'agrad'."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = _raised(lambda: make(torch))
        ours = _raised(lambda: make(agrad))
    assert ours[0].__name__ == theirs[0].__name__, (ours, theirs)
    assert ours[1] == theirs[1].replace("torch", "agrad")


CONSTRUCTOR_ERRORS = {
    "dropout>1": lambda lib: lib.nn.LSTM(3, 4, dropout=2),
    "dropout-bool": lambda lib: lib.nn.LSTM(3, 4, dropout=True),
    "dropout-str": lambda lib: lib.nn.GRU(3, 4, dropout="0.1"),
    "bias-int": lambda lib: lib.nn.LSTM(3, 4, bias=1),
    "batch_first-str": lambda lib: lib.nn.RNN(3, 4, batch_first="yes"),
    "input_size-0": lambda lib: lib.nn.LSTM(0, 4),
    "hidden_size-0": lambda lib: lib.nn.LSTM(3, 0),
    "input_size-float": lambda lib: lib.nn.LSTM(3.0, 4),
    "hidden_size-float": lambda lib: lib.nn.GRU(3, 4.0),
    "num_layers-0": lambda lib: lib.nn.LSTM(3, 4, num_layers=0),
    "proj_size-too-big": lambda lib: lib.nn.LSTM(3, 4, proj_size=4),
    "proj_size-negative": lambda lib: lib.nn.LSTM(3, 4, proj_size=-1),
    "gru-proj_size": lambda lib: lib.nn.GRU(3, 4, proj_size=2),
    "rnn-proj_size": lambda lib: lib.nn.RNN(3, 4, proj_size=2),
    "rnn-nonlinearity": lambda lib: lib.nn.RNN(3, 4, nonlinearity="sigmoid"),
    "rnn-unknown-kwarg": lambda lib: lib.nn.RNN(3, 4, foo=1),
    "rnnbase-mode": lambda lib: lib.nn.RNNBase("CELL", 3, 4),
}

FORWARD_ERRORS = {
    "4-d input": lambda lib: lib.nn.RNN(3, 4)(lib.zeros(2, 5, 2, 3)),
    "1-d input lstm": lambda lib: lib.nn.LSTM(3, 4)(lib.zeros(3)),
    "1-d input gru": lambda lib: lib.nn.GRU(3, 4)(lib.zeros(3)),
    "input size": lambda lib: lib.nn.RNN(3, 4)(lib.zeros(5, 2, 4)),
    "input dtype": lambda lib: lib.nn.GRU(3, 4)(lib.zeros(5, 2, 3, dtype=lib.float64)),
    "hidden size": lambda lib: lib.nn.RNN(3, 4)(lib.zeros(5, 2, 3), lib.zeros(1, 3, 4)),
    "hidden size batch_first": lambda lib: lib.nn.GRU(3, 4, batch_first=True)(lib.zeros(2, 5, 3), lib.zeros(1, 5, 4)),
    "unbatched 3-d hx": lambda lib: lib.nn.RNN(3, 4)(lib.zeros(5, 3), lib.zeros(1, 2, 4)),
    "batched 2-d hx": lambda lib: lib.nn.GRU(3, 4)(lib.zeros(5, 2, 3), lib.zeros(1, 4)),
    "lstm hidden[0]": lambda lib: lib.nn.LSTM(3, 4, proj_size=2)(lib.zeros(5, 2, 3),
                                                                 (lib.zeros(1, 2, 4), lib.zeros(1, 2, 4))),
    "lstm hidden[1]": lambda lib: lib.nn.LSTM(3, 4, proj_size=2)(lib.zeros(5, 2, 3),
                                                                 (lib.zeros(1, 2, 2), lib.zeros(1, 2, 2))),
    "lstm batched hx dims": lambda lib: lib.nn.LSTM(3, 4)(lib.zeros(5, 2, 3), (lib.zeros(1, 2, 4), lib.zeros(2, 4))),
    "lstm unbatched hx dims": lambda lib: lib.nn.LSTM(3, 4)(lib.zeros(5, 3), (lib.zeros(1, 2, 4), lib.zeros(1, 4))),
    "packed hidden size": lambda lib: lib.nn.GRU(3, 4)(
        lib.nn.utils.rnn.pack_sequence([lib.zeros(2, 3), lib.zeros(1, 3)]), lib.zeros(1, 3, 4)),
    "empty sequence": lambda lib: lib.nn.LSTM(3, 4)(lib.zeros(0, 2, 3)),
    "cell 3-d input": lambda lib: lib.nn.RNNCell(3, 4)(lib.zeros(1, 2, 3)),
    "cell 3-d hidden": lambda lib: lib.nn.GRUCell(3, 4)(lib.zeros(2, 3), lib.zeros(1, 2, 4)),
    "lstm cell hx[1]": lambda lib: lib.nn.LSTMCell(3, 4)(lib.zeros(2, 3), (lib.zeros(2, 4), lib.zeros(1, 2, 4))),
    "cell input size": lambda lib: lib.nn.RNNCell(3, 4)(lib.zeros(2, 5)),
    "cell batch": lambda lib: lib.nn.GRUCell(3, 4)(lib.zeros(2, 3), lib.zeros(3, 4)),
    "cell hidden size": lambda lib: lib.nn.LSTMCell(3, 4)(lib.zeros(2, 3), (lib.zeros(2, 4), lib.zeros(2, 5))),
    "unbatched cell, batched hidden": lambda lib: lib.nn.RNNCell(3, 4)(lib.zeros(3), lib.zeros(2, 4)),
    "cell nonlinearity": lambda lib: lib.nn.RNNCell(3, 4, nonlinearity="gelu")(lib.zeros(2, 3)),
}


@requires_torch
@pytest.mark.parametrize("make", CONSTRUCTOR_ERRORS.values(), ids=CONSTRUCTOR_ERRORS.keys())
def test_constructor_errors(make: Callable[[Any], Any]) -> None:
    _same_error(make)


@requires_torch
@pytest.mark.parametrize("make", FORWARD_ERRORS.values(), ids=FORWARD_ERRORS.keys())
def test_forward_errors(make: Callable[[Any], Any]) -> None:
    _same_error(make)
