"""Checking an ``agrad.nn`` module against the same ``torch.nn`` module.

The torch module is built first; its ``state_dict`` is loaded into agrad's
(so both start from the same weights), then both run forward on the same
inputs and backward from the same weighted sum of their outputs.  Values,
input gradients and every parameter's gradient must agree: float64 to 1e-10,
float32 to 1e-5, relative to the larger of 1 and the reference's magnitude.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

import agrad
from tests.helpers import torch

RTOL = {"float64": 1e-10, "float32": 1e-5}


def assert_close(mine: Any, theirs: Any, dtype: str, what: str = "") -> None:
    a = mine.detach().numpy() if isinstance(mine, agrad.Tensor) else np.asarray(mine)
    b = theirs.detach().numpy() if torch is not None and isinstance(theirs, torch.Tensor) else np.asarray(theirs)
    assert a.shape == b.shape, f"{what}: shape {a.shape} != torch's {b.shape}"
    rtol = RTOL[dtype]
    scale = max(1.0, float(np.abs(b).max())) if b.size and np.issubdtype(b.dtype, np.floating) else 1.0
    np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * scale, err_msg=what)


def load_from_torch(ours: agrad.nn.Module, theirs: Any) -> None:
    """Give ``ours`` the parameters and buffers of ``theirs`` (a torch module) through
    ``load_state_dict``, after checking both state dicts have the same keys and shapes."""
    state = theirs.state_dict()
    mine = ours.state_dict()
    assert list(mine) == list(state), f"state_dict keys {list(mine)} != torch's {list(state)}"
    for k in state:
        assert tuple(mine[k].shape) == tuple(state[k].shape), f"{k}: {tuple(mine[k].shape)} != {tuple(state[k].shape)}"
    ours.load_state_dict({k: agrad.from_numpy(v.detach().numpy().copy()) for k, v in state.items()})


def _flat(out: Any) -> list[Any]:
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return [] if out is None else [out]


def check_module(ours: agrad.nn.Module, theirs: Any, inputs: Sequence[np.ndarray | Any], dtype: str = "float64",
                 kwargs: dict[str, Any] | None = None, grad_inputs: bool = True) -> None:
    """Forward and backward of ``ours`` and ``theirs`` (same architecture) on ``inputs`` agree.

    ``inputs``: numpy arrays (float ones become leaves that require grad when
    ``grad_inputs``) or other plain values passed to both as they are.
    """
    kwargs = kwargs or {}
    tdt = getattr(torch, dtype)
    theirs.to(tdt)
    ours.to(getattr(agrad, dtype))
    load_from_torch(ours, theirs)
    ours.train(theirs.training)

    def make(lib: Any, a: Any) -> Any:
        if not isinstance(a, np.ndarray):
            return a
        is_float = np.issubdtype(a.dtype, np.floating)
        t = lib.from_numpy(a.astype(dtype) if is_float else a.copy())
        return t.requires_grad_() if is_float and grad_inputs else t

    xs = [make(agrad, a) for a in inputs]
    ts = [make(torch, a) for a in inputs]
    out_a, out_t = _flat(ours(*xs, **kwargs)), _flat(theirs(*ts, **kwargs))
    assert len(out_a) == len(out_t)
    for i, (a, t) in enumerate(zip(out_a, out_t)):
        assert_close(a, t, dtype, f"output {i}")
    rng = np.random.default_rng(0)
    pairs = [(a, t) for a, t in zip(out_a, out_t) if t.requires_grad]
    if not pairs:
        return
    weights = [rng.standard_normal(tuple(t.shape)).astype(dtype) for _, t in pairs]
    loss_a = sum((a * agrad.from_numpy(w)).sum() for (a, _), w in zip(pairs, weights))
    loss_t = sum((t * torch.from_numpy(w)).sum() for (_, t), w in zip(pairs, weights))
    loss_a.backward_sync()
    loss_t.backward()
    for i, (x, t) in enumerate(zip(xs, ts)):
        if isinstance(t, torch.Tensor) and t.requires_grad:
            assert (x.grad is None) == (t.grad is None), f"input {i} grad presence"
            if t.grad is not None:
                assert_close(x.grad, t.grad, dtype, f"input {i} grad")
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        tp = theirs_params[name]
        assert (p.grad is None) == (tp.grad is None), f"{name}.grad presence"
        if tp.grad is not None:
            assert_close(p.grad, tp.grad, dtype, f"{name}.grad")
    for name, buf in ours.state_dict().items():  # running stats and counters after the forward
        assert_close(buf, theirs.state_dict()[name], dtype, f"state {name}")
