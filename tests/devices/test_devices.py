"""The device API: ``agrad.device``, tensors' devices, ``.to()``/``.cpu()``, mixed-device
errors and the 0-d CPU scalar exception, checked on the registered ``fake`` type."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import agrad
from agrad import _backends
from tests.devices.fake_backend import FakeBackend

HAS_CUPY = importlib.util.find_spec("cupy") is not None


def test_device_strings_parse_as_in_pytorch() -> None:
    d = agrad.device("cuda:1")
    assert (d.type, d.index, str(d), repr(d)) == ("cuda", 1, "cuda:1", "device(type='cuda', index=1)")
    assert agrad.device("cuda", 2) == agrad.device("cuda:2") == agrad.device(2)
    assert agrad.device("cpu") == "cpu" and agrad.device("cuda") != agrad.device("cuda:0")
    assert agrad.device(agrad.device("cuda:3")).index == 3


@pytest.mark.parametrize("spec, message", [
    ("tpu", "Expected one of cpu, cuda device type at start of device string: tpu"),
    ("cuda:x", "Invalid device string: 'cuda:x'"),
    ("cuda:-1", "Invalid device string"),
])
def test_bad_device_strings_name_what_is_wrong(spec: str, message: str) -> None:
    with pytest.raises(RuntimeError, match=message):
        agrad.device(spec)


def test_a_registered_type_is_known_only_while_registered(fake: FakeBackend) -> None:
    assert agrad.device("fake:1").type == "fake"
    _backends.unregister_backend("fake")
    with pytest.raises(RuntimeError, match="device type at start of device string: fake"):
        agrad.device("fake")
    _backends.register_backend(fake)  # for the fixture's teardown


def test_factories_place_tensors(fake: FakeBackend) -> None:
    x = agrad.randn(2, 3, device="fake:1", requires_grad=True)
    assert x.device == agrad.device("fake:1") and x.device is agrad.randn(1, device="fake:1").device
    assert x.is_leaf and x.requires_grad and not x.is_cpu and not x.is_cuda
    assert agrad.zeros(2, device="fake").device == "fake:0"  # the current index is filled in
    assert agrad.zeros_like(x).device == x.device and agrad.ones_like(x, device="cpu").is_cpu
    assert agrad.tensor(x).device == x.device and agrad.as_tensor(x) is x
    assert agrad.tensor([1, 2], device="fake:1").tolist() == [1, 2]
    with pytest.raises(RuntimeError, match="fake device index 5 is out of range: 2 fake device"):
        agrad.zeros(2, device="fake:5")


def test_to_cpu_and_back(fake: FakeBackend) -> None:
    x = agrad.arange(6.0).reshape(2, 3)
    y = x.to("fake:0")
    assert y.device == "fake:0" and y.to("fake:0") is y and x.to("cpu") is x
    z = y.to("fake:1")
    assert z.device == "fake:1" and fake.calls["move"] == 1
    np.testing.assert_array_equal(z.cpu().numpy(), x.numpy())
    w = x.to(agrad.tensor([1], dtype=agrad.float64, device="fake:1"))
    assert (w.device, w.dtype) == (agrad.device("fake:1"), agrad.float64)
    assert x.to("fake:0", agrad.float64).dtype is agrad.float64
    assert x.to("fake:0", copy=True).device == "fake:0"


def test_host_only_conversions(fake: FakeBackend) -> None:
    x = agrad.tensor([1.5, 2.0], device="fake:0")
    with pytest.raises(TypeError, match="can't convert fake:0 device type tensor to numpy. Use Tensor.cpu()"):
        x.numpy()
    np.testing.assert_array_equal(x.numpy(force=True), [1.5, 2.0])
    assert repr(x) == "tensor([1.5000, 2.0000], device='fake:0')"
    assert x.tolist() == [1.5, 2.0] and x[0].item() == 1.5 and float(x.sum()) == 3.5


def test_ops_run_on_their_inputs_device(fake: FakeBackend) -> None:
    a = agrad.randn(3, 4, device="fake:1")
    b = agrad.randn(4, device="fake:1")
    out = (a * b + 1.0).exp().sum(dim=0)
    assert out.device == "fake:1"
    expected = (a.cpu() * b.cpu() + 1.0).exp().sum(dim=0)
    np.testing.assert_allclose(out.cpu().numpy(), expected.numpy(), rtol=1e-6)


@pytest.mark.parametrize("other", ["cpu", "fake:1"])
def test_mixing_devices_raises_pytorchs_error(fake: FakeBackend, other: str) -> None:
    a = agrad.ones(3, device="fake:0")
    b = agrad.ones(3, device=other)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device, but found at least two "
                                           "devices, fake:0 and (cpu|fake:1)!"):
        a + b
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        agrad.cat([a, b])


def test_a_0d_cpu_tensor_goes_along_and_its_gradient_comes_back(fake: FakeBackend) -> None:
    s = agrad.tensor(3.0, requires_grad=True)
    x = agrad.tensor([1.0, 2.0], device="fake:0", requires_grad=True)
    y = x * s
    assert y.device == "fake:0"
    y.sum().backward_sync()
    assert s.grad.is_cpu and s.grad.item() == 3.0
    assert x.grad.device == "fake:0" and x.grad.tolist() == [3.0, 3.0]
    z = agrad.tensor(2.0, device="fake:0", requires_grad=True)
    (z * s).backward_sync()  # both 0-d: the CPU one still moves, and its gradient back
    assert s.grad.is_cpu and s.grad.item() == 5.0 and z.grad.device == "fake:0"


def test_to_is_differentiable_to_any_order(fake: FakeBackend) -> None:
    x = agrad.tensor([1.0, -2.0, 3.0], dtype=agrad.float64, requires_grad=True)
    xf = x.to("fake:0")
    assert xf.grad_fn.name() == "ToCopyBackward0"
    y = (xf ** 3).sum().cpu()
    (g,) = agrad.autograd.grad_sync(y, x, create_graph=True)
    assert g.is_cpu and g.tolist() == [3.0, 12.0, 27.0]
    (gg,) = agrad.autograd.grad_sync(g.sum(), x)
    assert gg.is_cpu and gg.tolist() == [6.0, -12.0, 18.0]


def test_gradients_across_two_devices(fake: FakeBackend) -> None:
    x = agrad.tensor([1.0, 2.0], requires_grad=True)
    y = (x.to("fake:0") * 2).to("fake:1").exp().to("cpu") * x
    y.sum().backward_sync()
    expected = np.exp([2.0, 4.0]) * (2 * np.array([1.0, 2.0]) + 1)
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-6)


def test_supplied_gradients_must_be_on_the_outputs_device(fake: FakeBackend) -> None:
    y = agrad.ones(2, device="fake:0", requires_grad=True) * 2
    with pytest.raises(RuntimeError, match="invalid gradient at index 0 - expected device fake:0 but got cpu"):
        y.backward_sync(agrad.ones(2))


def test_a_custom_function_returning_a_gradient_on_the_wrong_device_is_an_error(fake: FakeBackend) -> None:
    class Leak(agrad.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g.cpu()

    x = agrad.ones(2, device="fake:0", requires_grad=True)
    with pytest.raises(RuntimeError, match="invalid gradient at index 0 - expected device fake:0 but got cpu"):
        Leak.apply(x).sum().backward_sync()
    assert x.grad is None


def test_in_place_ops_on_a_device(fake: FakeBackend) -> None:
    # fake:1 is not the current device: kernels outside an op must still run there.
    x = agrad.zeros(3, device="fake:1", requires_grad=True)
    y = x * 1
    y.add_(2).mul_(agrad.tensor(3.0))
    assert y.device == "fake:1" and y.tolist() == [6.0, 6.0, 6.0]
    y.sum().backward_sync()
    assert x.grad.tolist() == [3.0, 3.0, 3.0]


@pytest.mark.skipif(HAS_CUPY, reason="CuPy is installed here")
def test_cuda_without_cupy_says_what_to_install() -> None:
    assert not agrad.cuda.is_available() and agrad.cuda.device_count() == 0
    with pytest.raises(RuntimeError, match=r"needs CuPy.*pip install 'agrad\[cuda\]'"):
        agrad.zeros(2, device="cuda")
    with pytest.raises(RuntimeError, match="needs CuPy"):
        agrad.zeros(2).cuda()


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_on_a_device(fake: FakeBackend, use_reentrant: bool) -> None:
    from agrad.utils.checkpoint import checkpoint

    x = agrad.randn(4, 5, dtype=agrad.float64, device="fake:1", requires_grad=True)
    w = agrad.randn(5, 5, dtype=agrad.float64, device="fake:1", requires_grad=True)

    def f(a: agrad.Tensor) -> agrad.Tensor:
        return (a @ w).tanh() @ w

    checkpoint(f, x, use_reentrant=use_reentrant).sum().backward_sync()
    got = x.grad.cpu().numpy(), w.grad.cpu().numpy()
    x.grad = w.grad = None
    f(x).sum().backward_sync()
    np.testing.assert_allclose(got[0], x.grad.cpu().numpy(), rtol=1e-12)
    np.testing.assert_allclose(got[1], w.grad.cpu().numpy(), rtol=1e-12)


def test_gradcheck_on_a_device(fake: FakeBackend) -> None:
    x = agrad.randn(3, dtype=agrad.float64, device="fake:0", requires_grad=True)
    assert agrad.autograd.gradcheck(lambda a: (a * a).sin(), (x,))
    assert agrad.autograd.gradgradcheck(lambda a: (a * a).sin(), (x,))
