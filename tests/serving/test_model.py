"""The serving example's computations, without a server: every form agrees with the numpy reference."""

from __future__ import annotations

import numpy as np
import pytest

from examples.serving import model

pytestmark = pytest.mark.anyio

BATCHES = [1, 5]


def _inputs(batch: int) -> np.ndarray:
    return model.checkable_inputs(batch, np.random.default_rng(batch))


def _assert_close(answer: np.ndarray, expected: np.ndarray) -> None:
    assert answer.dtype == np.float32
    np.testing.assert_allclose(answer, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("batch", BATCHES)
def test_blocking_twins_match_the_reference(batch: int) -> None:
    x = _inputs(batch)
    _assert_close(model.saliency_agrad_sync(x), model.saliency_reference(x))
    _assert_close(model.tta_agrad_sync(x), model.tta_reference(x))


@pytest.mark.parametrize("batch", BATCHES)
async def test_awaited_forms_match_the_reference(batch: int) -> None:
    pytest.importorskip("greenlet")  # agrad.cooperative's
    x = _inputs(batch)
    _assert_close(await model.saliency_agrad(x), model.saliency_reference(x))
    _assert_close(await model.tta_agrad(x), model.tta_reference(x))


@pytest.mark.parametrize("batch", BATCHES)
def test_torch_matches_the_reference(batch: int) -> None:
    pytest.importorskip("torch")
    x = _inputs(batch)
    _assert_close(model.saliency_torch(x), model.saliency_reference(x))
    _assert_close(model.tta_torch(x), model.tta_reference(x))


def test_shared_weights_are_read_only_and_unchanged_by_tta() -> None:
    before = [(w.copy(), b.copy()) for w, b in model.weights()]
    params = list(model.mlp().parameters())
    model.tta_agrad_sync(_inputs(4))
    for (w, b), (w0, b0) in zip(model.weights(), before):
        assert not w.flags.writeable and not b.flags.writeable
        np.testing.assert_array_equal(w, w0)
        np.testing.assert_array_equal(b, b0)
    assert list(model.mlp().parameters()) == params  # the agrad module's own Parameters, unchanged
    for (w, b), layer in zip(before, model.mlp()[::2]):
        assert not layer.weight.requires_grad and layer.weight.grad is None
        np.testing.assert_array_equal(layer.weight.numpy(), w)
        np.testing.assert_array_equal(layer.bias.numpy(), b)
