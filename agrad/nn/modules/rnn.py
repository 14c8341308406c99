"""Recurrent layers: RNN, LSTM, GRU and their cells (mirrors ``torch.nn.modules.rnn``).

Parameter names, shapes, registration order, initialisation, ``repr`` and the
input checks are PyTorch's, so a ``state_dict`` moves between the two.  The
layers compose differentiable ops, so ``create_graph`` and ``agrad.func`` see
through them; there is no fused kernel.

    >>> _ = agrad.manual_seed(0)
    >>> lstm = agrad.nn.LSTM(10, 20, num_layers=2)
    >>> output, (h_n, c_n) = lstm(agrad.randn(5, 3, 10))
    >>> output.shape, h_n.shape, c_n.shape
    (agrad.Size([5, 3, 20]), agrad.Size([2, 3, 20]), agrad.Size([2, 3, 20]))

Note [One projection per layer]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The input side of every gate, ``x_t @ W_ih^T + b_ih``, does not depend on the
recurrence, so a layer computes it for all time steps and both directions in
one ``linear`` over the whole ``(T, B, I)`` sequence (the directions' weights
concatenated).  The directions then run in lock step as a leading batch
dimension ``D``: the reverse direction's projections are flipped in time, the
state is ``(D, B, H)``, one ``baddbmm`` per step computes every direction's
hidden side, and the reverse outputs are flipped back before the directions
are concatenated.  A step is thus a handful of ops whatever ``D`` is, and the
per-step work is the recurrence alone.

Note [Folded hidden bias]
~~~~~~~~~~~~~~~~~~~~~~~~~
RNN and LSTM add the input and hidden pre-activations before any
nonlinearity, so ``b_hh`` can join ``b_ih`` in the per-layer projection and
the step is a bare ``baddbmm(gx, h, W_hh^T)``.  GRU cannot: its new gate is
``tanh(W_in x + b_in + r * (W_hn h + b_hn))``, where ``b_hn`` is scaled by the
reset gate, so GRU keeps ``b_hh`` in the recurrence.  ``_Gates.sums_gates``
says which kind a mode is; ``_Recurrence.bias`` is None when the bias was folded.

Note [Packed sequences as masked steps]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A :class:`~agrad.nn.utils.rnn.PackedSequence` input is padded (one gather),
run like a dense batch, and its output packed again (one gather).  A step
updates only the sequences still running at that time: ``where(running, new,
old)`` keeps the others' state.  So the forward direction's state stops at
each sequence's last step, and the reverse direction starts each sequence
from ``h_0`` at its own last step (the padding after it leaves the state
alone), which is what PyTorch computes by shrinking the batch.  Dense input
takes no mask and pays nothing for this.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from agrad._creation import as_tensor, empty, zeros
from agrad._ops._elementwise import where
from agrad._ops._linalg import addmm, baddbmm, matmul
from agrad._ops._shape import cat, stack
from agrad._tensor import Tensor
from agrad.nn import functional as F
from agrad.nn import init
from agrad.nn.modules.module import Module
from agrad.nn.parameter import Parameter
from agrad.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]


# -- gate math ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Recurrence:
    """The hidden side of the gates: ``acc + h @ weight_t (+ bias)``, in one matmul node.

    ``weight_t`` is ``W_hh^T``: ``(H, G)`` for a cell, ``(D, H, G)`` for a layer's
    directions (Note [One projection per layer]).  ``bias`` is ``b_hh``, or None
    when there is none or it was folded into ``acc`` (Note [Folded hidden bias]).
    """

    weight_t: Tensor
    bias: Tensor | None

    def __call__(self, h: Tensor, acc: Tensor | None = None) -> Tensor:
        base = self.bias if acc is None else acc if self.bias is None else acc + self.bias
        if base is None:
            return matmul(h, self.weight_t)
        return addmm(base, h, self.weight_t) if h.dim() == 2 else baddbmm(base, h, self.weight_t)


_State = tuple[Tensor, ...]
_Step = Callable[[Tensor, _State, _Recurrence], _State]


def _tanh_step(gx: Tensor, state: _State, recur: _Recurrence) -> _State:
    """``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)``."""
    return (recur(state[0], gx).tanh(),)


def _relu_step(gx: Tensor, state: _State, recur: _Recurrence) -> _State:
    """``h' = relu(x W_ih^T + b_ih + h W_hh^T + b_hh)``."""
    return (F.relu(recur(state[0], gx)),)


def _lstm_step(gx: Tensor, state: _State, recur: _Recurrence) -> _State:
    """Gates ``i, f, g, o`` in PyTorch's order: ``c' = f * c + i * g``, ``h' = o * tanh(c')``."""
    h, c = state
    i, f, g, o = recur(h, gx).chunk(4, -1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * c.tanh(), c


def _gru_step(gx: Tensor, state: _State, recur: _Recurrence) -> _State:
    """Gates ``r, z, n``: ``n = tanh(x_n + r * (W_hn h + b_hn))``, ``h' = n + z * (h - n)``
    (PyTorch's ``(1 - z) * n + z * h``, in its order of operations)."""
    (h,) = state
    size = h.size(-1)
    x_rz, x_n = gx.split([2 * size, size], -1)
    h_rz, h_n = recur(h).split([2 * size, size], -1)
    r, z = (x_rz + h_rz).sigmoid().chunk(2, -1)
    n = (x_n + r * h_n).tanh()
    return (n + z * (h - n),)


@dataclass(frozen=True)
class _Gates:
    """One mode's recurrence: ``chunks`` gates of ``hidden_size`` each, its ``step``,
    how many state tensors it carries (LSTM's ``(h, c)``: 2), and whether it sums the
    input and hidden pre-activations before any nonlinearity (Note [Folded hidden bias])."""

    chunks: int
    step: _Step
    states: int
    sums_gates: bool


_MODES = {
    "RNN_TANH": _Gates(1, _tanh_step, 1, True),
    "RNN_RELU": _Gates(1, _relu_step, 1, True),
    "LSTM": _Gates(4, _lstm_step, 2, True),
    "GRU": _Gates(3, _gru_step, 1, False),
}
_RNN_MODES = {"tanh": "RNN_TANH", "relu": "RNN_RELU"}  # RNN's and RNNCell's nonlinearity -> mode


class _Weights(NamedTuple):
    """One layer direction's parameters, by kind (the names without ``_l{k}[_reverse]``); absent ones are None."""

    weight_ih: Tensor | None
    weight_hh: Tensor | None
    bias_ih: Tensor | None
    bias_hh: Tensor | None
    weight_hr: Tensor | None


# -- a layer over a whole sequence ----------------------------------------------------


def _time_aligned(pieces: Sequence[Tensor]) -> list[Tensor]:
    """Direction ``d``'s piece as the recurrence sees it: the reverse direction's flipped in time."""
    return [p.flip(0) if d else p for d, p in enumerate(pieces)]


def _present(weights: Sequence[_Weights], field: str) -> list[Tensor]:
    """Each direction's ``field`` parameter, or ``[]`` where the layer has none."""
    return [t for t in (getattr(w, field) for w in weights) if t is not None]


def _cat(ts: Sequence[Tensor], dim: int = 0) -> Tensor:
    return ts[0] if len(ts) == 1 else cat(list(ts), dim)


def _input_projection(gates: _Gates, x: Tensor, weights: Sequence[_Weights]) -> Tensor:
    """``(T, D, B, G)``: every step's and direction's input pre-activations in one ``linear``,
    ``b_hh`` included where it folds (Notes [One projection per layer], [Folded hidden bias])."""
    biases = _present(weights, "bias_ih")
    bias = _cat(biases) if biases else None
    if bias is not None and gates.sums_gates:
        bias = bias + _cat(_present(weights, "bias_hh"))
    projected = F.linear(x, _cat(_present(weights, "weight_ih")), bias)
    return stack(_time_aligned(projected.chunk(len(weights), -1)), 1)


def _run_layer(gates: _Gates, x: Tensor, state: _State, weights: Sequence[_Weights],
               running: Sequence[Tensor] | None) -> tuple[Tensor, _State]:
    """One layer, all directions in lock step (Note [One projection per layer]).

    ``x``: ``(T, B, I)``; ``state``: the layer's initial ``(h,)`` or ``(h, c)``, each
    ``(D, B, *)``; ``running``: for a packed batch, each step's ``(D, B, 1)`` mask of the
    sequences that step updates (Note [Packed sequences as masked steps]).
    Returns the output ``(T, B, D * H_out)`` and the final state.
    """
    hidden_biases = [] if gates.sums_gates else _present(weights, "bias_hh")
    recur = _Recurrence(stack(_present(weights, "weight_hh")).mT,
                        stack(hidden_biases).unsqueeze(1) if hidden_biases else None)
    projections = _present(weights, "weight_hr")
    w_hr_t = stack(projections).mT if projections else None
    outputs = []
    for t, gx in enumerate(_input_projection(gates, x, weights).unbind(0)):
        new = gates.step(gx, state, recur)
        if w_hr_t is not None:  # LSTM's projection: h = (o * tanh(c)) @ W_hr^T
            new = (matmul(new[0], w_hr_t), *new[1:])
        state = new if running is None else tuple(where(running[t], n, s) for n, s in zip(new, state))
        outputs.append(state[0])
    return _cat(_time_aligned(stack(outputs).unbind(1)), -1), state


def _running(batch_sizes: Tensor, directions: int, device: Any) -> list[Tensor]:
    """Each step's ``(D, B, 1)`` mask of the sequences it updates, the reverse direction's in
    reverse time (Note [Packed sequences as masked steps])."""
    sizes = batch_sizes.numpy()
    active = np.arange(sizes[0])[None, :] < sizes[:, None]  # (T, B)
    masks = np.stack([active, active[::-1]][:directions], axis=1)[..., None]
    return [as_tensor(m, device=device) for m in masks]


# -- the sequence layers ----------------------------------------------------------------


class RNNBase(Module):
    """Base class of :class:`RNN`, :class:`LSTM` and :class:`GRU`: their parameters, checks and forward.

    ``mode`` is ``"RNN_TANH"``, ``"RNN_RELU"``, ``"LSTM"`` or ``"GRU"``.  Layer ``k``
    direction ``d`` owns ``weight_ih_l{k}``, ``weight_hh_l{k}``, ``bias_ih_l{k}``,
    ``bias_hh_l{k}`` (with ``bias``) and ``weight_hr_l{k}`` (with ``proj_size``), the
    reverse direction's suffixed ``_reverse``, registered in PyTorch's order
    (``_flat_weights_names``) and all drawn from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)).

        >>> gru = agrad.nn.GRU(4, 3, bidirectional=True)
        >>> gru._flat_weights_names[:4]
        ['weight_ih_l0', 'weight_hh_l0', 'bias_ih_l0', 'bias_hh_l0']
        >>> [tuple(w.shape) for w in gru.all_weights[1]]
        [(9, 4), (9, 3), (9,), (9,)]
    """

    __constants__ = ["mode", "input_size", "hidden_size", "num_layers", "bias", "batch_first", "dropout",
                     "bidirectional", "proj_size"]
    mode: str
    input_size: int
    hidden_size: int
    num_layers: int
    bias: bool
    batch_first: bool
    dropout: float
    bidirectional: bool
    proj_size: int
    _flat_weights_names: list[str]
    _all_weights: list[list[str]]
    _input_dim_error = "{name}: Expected input to be 2D or 3D, got {dim}D instead"

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        _check_arguments(input_size, hidden_size, num_layers, bias, batch_first, dropout, proj_size)
        if mode not in _MODES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        gate_size = _MODES[mode].chunks * hidden_size
        real_hidden_size = proj_size if proj_size > 0 else hidden_size
        kinds = ["weight_ih", "weight_hh", *(["bias_ih", "bias_hh"] if bias else []),
                 *(["weight_hr"] if proj_size else [])]
        self._flat_weights_names = []
        self._all_weights = []
        for layer in range(num_layers):
            layer_input_size = input_size if layer == 0 else real_hidden_size * self._directions
            shapes = {"weight_ih": (gate_size, layer_input_size), "weight_hh": (gate_size, real_hidden_size),
                      "bias_ih": (gate_size,), "bias_hh": (gate_size,), "weight_hr": (proj_size, hidden_size)}
            for direction in range(self._directions):
                names = [f"{kind}{_suffix(layer, direction)}" for kind in kinds]
                for kind, name in zip(kinds, names):
                    setattr(self, name, Parameter(empty(shapes[kind], device=device, dtype=dtype)))
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    @property
    def _directions(self) -> int:
        return 2 if self.bidirectional else 1

    @property
    def _flat_weights(self) -> list[Parameter | None]:
        """The parameters named by ``_flat_weights_names``, read afresh (so reassigning one is seen)."""
        return [getattr(self, name, None) for name in self._flat_weights_names]

    @property
    def all_weights(self) -> list[list[Parameter]]:
        """Each layer's and direction's parameters, in ``_flat_weights_names`` order."""
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def flatten_parameters(self) -> None:
        """A no-op: PyTorch packs the weights for cuDNN here; agrad's layers use them as they are."""

    def reset_parameters(self) -> None:
        """Redraw every parameter, in registration order, from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    # -- PyTorch's checks ---------------------------------------------------------------
    def check_input(self, input: Tensor, batch_sizes: Tensor | None) -> None:
        """``input``'s dtype must be the weights', its dimensions 3 and its last size ``input_size``."""
        weight = self._flat_weights[0]
        if weight is not None and input.dtype != weight.dtype:
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match weight dtype ({weight.dtype}). "
                             f"Convert input: input.to({weight.dtype}), or convert model: model.to({input.dtype})")
        expected_input_dim = 2 if batch_sizes is not None else 3
        if input.dim() != expected_input_dim:
            raise RuntimeError(f"input must have {expected_input_dim} dimensions, got {input.dim()}")
        if self.input_size != input.size(-1):
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {input.size(-1)}")

    def get_expected_hidden_size(self, input: Tensor, batch_sizes: Tensor | None) -> tuple[int, int, int]:
        """``(num_layers * num_directions, batch, proj_size or hidden_size)``."""
        mini_batch = int(batch_sizes[0]) if batch_sizes is not None else input.size(0 if self.batch_first else 1)
        return (self.num_layers * self._directions, mini_batch,
                self.proj_size if self.proj_size > 0 else self.hidden_size)

    def check_hidden_size(self, hx: Tensor, expected_hidden_size: tuple[int, int, int],
                          msg: str = "Expected hidden size {}, got {}") -> None:
        if tuple(hx.size()) != expected_hidden_size:
            raise RuntimeError(msg.format(expected_hidden_size, list(hx.size())))

    def check_forward_args(self, input: Tensor, hidden: Any, batch_sizes: Tensor | None) -> None:
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden, self.get_expected_hidden_size(input, batch_sizes))

    # -- forward ------------------------------------------------------------------------
    def forward(self, input: Tensor | PackedSequence, hx: Any = None) -> tuple[Any, Any]:
        """``(output, h_n)`` (LSTM: ``(output, (h_n, c_n))``) for ``input`` of ``(L, N, H_in)``
        (``(N, L, H_in)`` with ``batch_first``), unbatched ``(L, H_in)`` or a PackedSequence
        (then ``output`` is one too); ``hx`` defaults to zeros."""
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        if input.dim() not in (2, 3):
            raise ValueError(self._input_dim_error.format(name=type(self).__name__, dim=input.dim()))
        batched = input.dim() == 3
        batch_dim = 0 if self.batch_first else 1
        if not batched:
            input = input.unsqueeze(batch_dim)
        state = self._initial_state(input, hx, batched)
        if input.size(1 if self.batch_first else 0) == 0:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        output, final = self._run(input.transpose(0, 1) if self.batch_first else input, state, None)
        if self.batch_first:
            output = output.transpose(0, 1)
        if not batched:
            output = output.squeeze(batch_dim)
            final = tuple(s.squeeze(1) for s in final)
        return output, self._as_hidden(final)

    def _forward_packed(self, input: PackedSequence, hx: Any) -> tuple[PackedSequence, Any]:
        """PyTorch's forward on a PackedSequence (Note [Packed sequences as masked steps])."""
        data, batch_sizes, sorted_indices, unsorted_indices = input
        if hx is None:
            state = self._zero_state(data, batch_sizes)
        else:
            state = self._as_state(self.permute_hidden(hx, sorted_indices))
        self.check_forward_args(data, self._as_hidden(state), batch_sizes)
        padded, lengths = pad_packed_sequence(PackedSequence(data, batch_sizes))
        output, final = self._run(padded, state, _running(batch_sizes, self._directions, data.device))
        packed = PackedSequence(pack_padded_sequence(output, lengths).data, batch_sizes, sorted_indices,
                                unsorted_indices)
        return packed, self.permute_hidden(self._as_hidden(final), unsorted_indices)

    def permute_hidden(self, hx: Any, permutation: Tensor | None) -> Any:
        """``hx`` with its batch (dimension 1) reordered by ``permutation`` (None: as it is)."""
        return hx if permutation is None else hx.index_select(1, permutation)

    def _as_state(self, hx: Any) -> _State:
        """``hx`` as the tuple of state tensors the layers carry (LSTM: ``(h, c)``)."""
        return (hx,)

    def _as_hidden(self, state: _State) -> Any:
        """The state tuple as this module's ``hx`` (LSTM: the tuple itself)."""
        return state[0]

    def _state_dim_error(self, state: _State, batched: bool) -> str:
        return (f"For {'batched 3-D' if batched else 'unbatched 2-D'} input, hx should also be "
                f"{3 if batched else 2}-D but got {state[0].dim()}-D tensor")

    def _state_sizes(self, input: Tensor, batch_sizes: Tensor | None) -> list[tuple[int, int, int]]:
        return [self.get_expected_hidden_size(input, batch_sizes)]

    def _zero_state(self, input: Tensor, batch_sizes: Tensor | None) -> _State:
        return tuple(zeros(size, dtype=input.dtype, device=input.device)
                     for size in self._state_sizes(input, batch_sizes))

    def _initial_state(self, input: Tensor, hx: Any, batched: bool) -> _State:
        """``hx`` checked and made 3-D, or zeros; then PyTorch's ``check_forward_args``."""
        if hx is None:
            state = self._zero_state(input, None)
        else:
            state = self._as_state(hx)
            if any(s.dim() != (3 if batched else 2) for s in state):
                raise RuntimeError(self._state_dim_error(state, batched))
            if not batched:
                state = tuple(s.unsqueeze(1) for s in state)
        self.check_forward_args(input, self._as_hidden(state), None)
        return state

    def _run(self, x: Tensor, state: _State, running: Sequence[Tensor] | None) -> tuple[Tensor, _State]:
        """All layers over the time-major ``x``, with dropout between them in training;
        ``running``: a packed batch's masks (``_run_layer``)."""
        gates, directions = _MODES[self.mode], self._directions
        finals: list[_State] = []
        for layer in range(self.num_layers):
            if layer and self.dropout and self.training:
                x = F.dropout(x, self.dropout, True)
            rows = slice(layer * directions, (layer + 1) * directions)
            weights = [self._weights(layer, d) for d in range(directions)]
            x, final = _run_layer(gates, x, tuple(s[rows] for s in state), weights, running)
            finals.append(final)
        return x, tuple(_cat(per_layer) for per_layer in zip(*finals))

    def _weights(self, layer: int, direction: int) -> _Weights:
        suffix = _suffix(layer, direction)
        return _Weights(*(getattr(self, kind + suffix, None) for kind in _Weights._fields))

    def extra_repr(self) -> str:
        s = "{input_size}, {hidden_size}"
        if self.proj_size != 0:
            s += ", proj_size={proj_size}"
        if self.num_layers != 1:
            s += ", num_layers={num_layers}"
        if self.bias is not True:
            s += ", bias={bias}"
        if self.batch_first is not False:
            s += ", batch_first={batch_first}"
        if self.dropout != 0:
            s += ", dropout={dropout}"
        if self.bidirectional is not False:
            s += ", bidirectional={bidirectional}"
        return s.format(**self.__dict__)


def _suffix(layer: int, direction: int) -> str:
    return f"_l{layer}{'_reverse' if direction else ''}"


def _check_arguments(input_size: Any, hidden_size: Any, num_layers: int, bias: Any, batch_first: Any,
                     dropout: float, proj_size: int) -> None:
    """PyTorch's constructor checks, in its order, and its warning for dropout on one layer."""
    if not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1 or isinstance(dropout, bool):
        raise ValueError("dropout should be a number in range [0, 1] representing the probability of an element "
                         "being zeroed")
    if dropout > 0 and num_layers == 1:
        warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout expects "
                      f"num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}",
                      stacklevel=4)
    for name, value, kind in (("bias", bias, bool), ("batch_first", batch_first, bool)):
        if not isinstance(value, kind):
            raise TypeError(f"{name} should be of type bool, got: {type(value).__name__}")
    for name, value in (("input_size", input_size), ("hidden_size", hidden_size)):
        if not isinstance(value, int):
            raise TypeError(f"{name} should be of type int, got: {type(value).__name__}")
        if value <= 0:
            raise ValueError(f"{name} must be greater than zero")
    if num_layers <= 0:
        raise ValueError("num_layers must be greater than zero")
    if proj_size < 0:
        raise ValueError("proj_size should be a positive integer or zero to disable projections")
    if proj_size >= hidden_size:
        raise ValueError("proj_size has to be smaller than hidden_size")


def _refuse_proj_size(kwargs: dict[str, Any]) -> None:
    if "proj_size" in kwargs:
        raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")


class RNN(RNNBase):
    r"""A multi-layer Elman RNN: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)``
    (``relu`` instead of ``tanh`` with ``nonlinearity='relu'``).

    Takes ``(input, hx=None)`` and returns ``(output, h_n)``: ``output`` holds the last
    layer's ``h_t`` for every ``t`` (both directions side by side when
    ``bidirectional``), ``h_n`` every layer's and direction's last state.  ``dropout``
    applies between layers in training only.

        >>> _ = agrad.manual_seed(0)
        >>> rnn = agrad.nn.RNN(10, 20, 2, nonlinearity="relu")
        >>> output, h_n = rnn(agrad.randn(5, 3, 10), agrad.randn(2, 3, 20))
        >>> output.shape, h_n.shape
        (agrad.Size([5, 3, 20]), agrad.Size([2, 3, 20]))
    """

    nonlinearity: str
    _input_dim_error = "{name}: Expected input to be 2D or 3D, got {dim}D tensor instead"

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, nonlinearity: str = "tanh",
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device: Any = None, dtype: Any = None, **kwargs: Any) -> None:
        _refuse_proj_size(kwargs)
        if nonlinearity not in _RNN_MODES:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        super().__init__(_RNN_MODES[nonlinearity], input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, device=device, dtype=dtype, **kwargs)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    r"""A multi-layer long short-term memory RNN, gates ``i, f, g, o`` in PyTorch's order:
    ``c_t = f * c_{t-1} + i * g``, ``h_t = o * tanh(c_t)``, and with ``proj_size > 0``
    ``h_t = (o * tanh(c_t)) @ W_hr^T`` of size ``proj_size``.

    Takes ``(input, (h_0, c_0))`` (or no state: zeros) and returns ``(output, (h_n, c_n))``.

        >>> _ = agrad.manual_seed(0)
        >>> lstm = agrad.nn.LSTM(4, 6, proj_size=2, batch_first=True)
        >>> output, (h_n, c_n) = lstm(agrad.randn(3, 5, 4))
        >>> output.shape, h_n.shape, c_n.shape
        (agrad.Size([3, 5, 2]), agrad.Size([1, 3, 2]), agrad.Size([1, 3, 6]))
        >>> lstm
        LSTM(4, 6, proj_size=2, batch_first=True)
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, proj_size: int = 0,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device=device, dtype=dtype)

    def get_expected_cell_size(self, input: Tensor, batch_sizes: Tensor | None) -> tuple[int, int, int]:
        """``(num_layers * num_directions, batch, hidden_size)``."""
        mini_batch = int(batch_sizes[0]) if batch_sizes is not None else input.size(0 if self.batch_first else 1)
        return (self.num_layers * self._directions, mini_batch, self.hidden_size)

    def check_forward_args(self, input: Tensor, hidden: Any, batch_sizes: Tensor | None) -> None:
        self.check_input(input, batch_sizes)
        self.check_hidden_size(hidden[0], self.get_expected_hidden_size(input, batch_sizes),
                               "Expected hidden[0] size {}, got {}")
        self.check_hidden_size(hidden[1], self.get_expected_cell_size(input, batch_sizes),
                               "Expected hidden[1] size {}, got {}")

    def _as_state(self, hx: Any) -> _State:
        return tuple(hx)

    def _as_hidden(self, state: _State) -> Any:
        return state

    def _state_dim_error(self, state: _State, batched: bool) -> str:
        return (f"For {'batched 3-D' if batched else 'unbatched 2-D'} input, hx and cx should also be "
                f"{3 if batched else 2}-D but got ({state[0].dim()}-D, {state[1].dim()}-D) tensors")

    def _state_sizes(self, input: Tensor, batch_sizes: Tensor | None) -> list[tuple[int, int, int]]:
        return [self.get_expected_hidden_size(input, batch_sizes), self.get_expected_cell_size(input, batch_sizes)]

    def permute_hidden(self, hx: Any, permutation: Tensor | None) -> Any:
        """``(h, c)`` with their batch reordered by ``permutation`` (None: as they are)."""
        if permutation is None:
            return hx
        return hx[0].index_select(1, permutation), hx[1].index_select(1, permutation)


class GRU(RNNBase):
    r"""A multi-layer gated recurrent unit RNN, gates ``r, z, n`` in PyTorch's order:
    ``n_t = tanh(W_in x_t + b_in + r * (W_hn h_{t-1} + b_hn))``, ``h_t = (1 - z) * n_t + z * h_{t-1}``.

    Takes ``(input, hx=None)`` and returns ``(output, h_n)``.

        >>> _ = agrad.manual_seed(0)
        >>> gru = agrad.nn.GRU(4, 3, num_layers=2, bidirectional=True)
        >>> output, h_n = gru(agrad.randn(7, 4))
        >>> output.shape, h_n.shape
        (agrad.Size([7, 6]), agrad.Size([4, 3]))
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False, device: Any = None,
                 dtype: Any = None, **kwargs: Any) -> None:
        _refuse_proj_size(kwargs)
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype, **kwargs)


# -- the cells --------------------------------------------------------------------------


class RNNCellBase(Module):
    """Base class of the cells: ``weight_ih``, ``weight_hh``, ``bias_ih`` and ``bias_hh`` for
    ``num_chunks`` gates, all drawn from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)).

        >>> cell = agrad.nn.GRUCell(3, 2)
        >>> [(name, tuple(p.shape)) for name, p in cell.named_parameters()]
        [('weight_ih', (6, 3)), ('weight_hh', (6, 2)), ('bias_ih', (6,)), ('bias_hh', (6,))]
    """

    __constants__ = ["input_size", "hidden_size", "bias"]
    input_size: int
    hidden_size: int
    bias: bool
    weight_ih: Parameter
    weight_hh: Parameter
    bias_ih: Parameter | None
    bias_hh: Parameter | None

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.weight_ih = Parameter(empty((num_chunks * hidden_size, input_size), device=device, dtype=dtype))
        self.weight_hh = Parameter(empty((num_chunks * hidden_size, hidden_size), device=device, dtype=dtype))
        for name in ("bias_ih", "bias_hh"):
            self.register_parameter(
                name, Parameter(empty(num_chunks * hidden_size, device=device, dtype=dtype)) if bias else None)
        self.reset_parameters()

    def extra_repr(self) -> str:
        s = "{input_size}, {hidden_size}"
        if "bias" in self.__dict__ and self.bias is not True:
            s += ", bias={bias}"
        if "nonlinearity" in self.__dict__ and self.nonlinearity != "tanh":
            s += ", nonlinearity={nonlinearity}"
        return s.format(**self.__dict__)

    def reset_parameters(self) -> None:
        """Redraw every parameter, in registration order, from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))."""
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _step(self, mode: str, input: Tensor, hx: Sequence[Tensor] | None) -> _State:
        """One step of ``mode`` with PyTorch's checks; ``input`` ``(N, H_in)`` or unbatched ``(H_in,)``,
        ``hx`` the states (LSTM: two) or None for zeros."""
        name = type(self).__name__
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        gates = _MODES[mode]
        for i, value in enumerate(hx or ()):
            if value.dim() not in (1, 2):
                what = f"hx[{i}]" if gates.states > 1 else "hidden"
                raise ValueError(f"{name}: Expected {what} to be 1D or 2D, got {value.dim()}D instead")
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
        if hx is None:
            state = (zeros(input.size(0), self.hidden_size, dtype=input.dtype, device=input.device),) * gates.states
        else:
            state = tuple(hx) if batched else tuple(s.unsqueeze(0) for s in hx)
        self._check_sizes(input, state)
        state = gates.step(F.linear(input, self.weight_ih, self.bias_ih), state,
                           _Recurrence(self.weight_hh.mT, self.bias_hh))
        return state if batched else tuple(s.squeeze(0) for s in state)

    def _check_sizes(self, input: Tensor, state: _State) -> None:
        """PyTorch's ``check_rnn_cell_forward_input`` and ``_hidden``."""
        if input.size(1) != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.size(1)} expected {self.input_size}")
        for i, s in enumerate(state):
            if s.size(0) != input.size(0):
                raise RuntimeError(f"Input batch size {input.size(0)} doesn't match hidden{i} batch size {s.size(0)}")
            if s.size(1) != self.hidden_size:
                raise RuntimeError(f"hidden{i} has inconsistent hidden_size: got {s.size(1)}, "
                                   f"expected {self.hidden_size}")


class RNNCell(RNNCellBase):
    """One Elman RNN step: ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (or ``relu``).

        >>> _ = agrad.manual_seed(0)
        >>> cell = agrad.nn.RNNCell(10, 20)
        >>> hx = agrad.randn(3, 20)
        >>> for x in agrad.randn(6, 3, 10):
        ...     hx = cell(x, hx)
        >>> hx.shape
        agrad.Size([3, 20])
    """

    __constants__ = ["input_size", "hidden_size", "bias", "nonlinearity"]
    nonlinearity: str

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, nonlinearity: str = "tanh",
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=1, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        if self.nonlinearity not in _RNN_MODES:
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        return self._step(_RNN_MODES[self.nonlinearity], input, None if hx is None else (hx,))[0]


class LSTMCell(RNNCellBase):
    """One LSTM step, gates ``i, f, g, o``: ``c' = f * c + i * g``, ``h' = o * tanh(c')``; returns ``(h', c')``.

        >>> cell = agrad.nn.LSTMCell(10, 20)
        >>> h, c = cell(agrad.zeros(3, 10))
        >>> h.shape, c.shape
        (agrad.Size([3, 20]), agrad.Size([3, 20]))
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=4, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        h, c = self._step("LSTM", input, hx)
        return h, c


class GRUCell(RNNCellBase):
    """One GRU step, gates ``r, z, n``: ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``,
    ``h' = (1 - z) * n + z * h``.

        >>> cell = agrad.nn.GRUCell(10, 20)
        >>> cell(agrad.zeros(10)).shape
        agrad.Size([20])
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, bias, num_chunks=3, device=device, dtype=dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:
        return self._step("GRU", input, None if hx is None else (hx,))[0]
