"""A product saves its operand's layout, not the operand, for that operand's own
gradient (Note [Gradients in their input's layout]): a weight written in place
between the forward and the backward (an optimizer step) does not fail a
backward that never needed the weight's values, as in PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

import agrad
from tests.helpers import requires_torch, torch

CALLS = {
    "linear": lambda lib, x, w: lib.nn.functional.linear(x, w, None),
    "linear_bias": lambda lib, x, w: lib.nn.functional.linear(x, w, lib.ones(w.shape[0], dtype=w.dtype)),
    "mm_t": lambda lib, x, w: lib.mm(x, w.t()),
    "matmul_t": lambda lib, x, w: x @ w.t(),
    "matmul_batched": lambda lib, x, w: x.unsqueeze(0).expand(2, *x.shape) @ w.t(),
    "matmul_vec": lambda lib, x, w: x[0] @ w.t(),
}


@requires_torch
@pytest.mark.parametrize("call", sorted(CALLS))
def test_writing_the_weight_after_the_forward_keeps_its_gradient(call: str) -> None:
    rng = np.random.default_rng(0)
    x_np, w_np = rng.standard_normal((4, 5)), rng.standard_normal((3, 5))
    grads = []
    for lib in (agrad, torch):
        w = lib.tensor(w_np, requires_grad=True)
        loss = CALLS[call](lib, lib.tensor(x_np), w).sum()
        with lib.no_grad():
            w.add_(1.0)  # an optimizer step before this loss's backward
        (loss.backward_sync() if lib is agrad else loss.backward())
        grads.append(w.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12)


@requires_torch
def test_the_saved_layout_is_pytorchs() -> None:
    x_np, w_np = np.ones((4, 5)), np.ones((3, 5))
    ours = agrad.mm(agrad.tensor(x_np), agrad.tensor(w_np, requires_grad=True).t()).grad_fn
    theirs = torch.mm(torch.tensor(x_np), torch.tensor(w_np, requires_grad=True).t()).grad_fn
    assert ours._saved_mat2_sym_strides == theirs._saved_mat2_sym_strides == (1, 5)
