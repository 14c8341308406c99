"""The public surface mirrors PyTorch's module paths, each public module has
``__all__``, and nothing public is missing from it or leaks from private code
(as anyio's ``test_all_attributes`` does)."""

from __future__ import annotations

import importlib
import inspect

import pytest

from tests.helpers import requires_torch, torch

PUBLIC_MODULES = [
    "agrad", "agrad.autograd", "agrad.autograd.function", "agrad.autograd.functional", "agrad.autograd.gradcheck",
    "agrad.autograd.graph", "agrad.cuda", "agrad.linalg",
    "agrad.nn", "agrad.nn.functional", "agrad.nn.init", "agrad.nn.modules", "agrad.nn.modules.activation",
    "agrad.nn.modules.batchnorm", "agrad.nn.modules.channelshuffle", "agrad.nn.modules.container",
    "agrad.nn.modules.conv", "agrad.nn.modules.distance", "agrad.nn.modules.dropout", "agrad.nn.modules.flatten",
    "agrad.nn.modules.fold", "agrad.nn.modules.instancenorm", "agrad.nn.modules.loss", "agrad.nn.modules.module",
    "agrad.nn.modules.normalization", "agrad.nn.modules.padding", "agrad.nn.modules.pixelshuffle",
    "agrad.nn.modules.pooling", "agrad.nn.modules.rnn", "agrad.nn.modules.sparse", "agrad.nn.modules.upsampling",
    "agrad.nn.modules.utils",
    "agrad.nn.parameter", "agrad.nn.utils", "agrad.nn.utils.convert_parameters",
    "agrad.func",
    "agrad.optim", "agrad.optim.adadelta", "agrad.optim.adagrad", "agrad.optim.adam", "agrad.optim.adamax",
    "agrad.optim.adamw", "agrad.optim.asgd", "agrad.optim.lbfgs", "agrad.optim.lr_scheduler", "agrad.optim.nadam",
    "agrad.optim.optimizer", "agrad.optim.radam", "agrad.optim.rmsprop", "agrad.optim.rprop", "agrad.optim.sgd",
    "agrad.random", "agrad.serialization",
    "agrad.utils", "agrad.utils.checkpoint", "agrad.utils.data", "agrad.utils.data.dataloader",
    "agrad.utils.data.dataset", "agrad.utils.data.sampler", "agrad.utils.hooks",
]

# agrad's additions to PyTorch's API: the blocking twins (and queue_callback,
# which PyTorch exposes only as Variable._execution_engine.queue_callback), and
# the engine's scheduling options, and cooperative calls of synchronous code.
AGRAD_ONLY = {"backward_sync", "grad_sync", "queue_callback", "vjp_sync", "jacobian_sync", "hessian_sync",
              "engine_options", "cooperative", "get_admission_limit", "set_admission_limit",
              "NotAwaitedWarning", "BlockingCallWarning", "grad_and_value_sync"}


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_all_names_resolve(name: str) -> None:
    module = importlib.import_module(name)
    assert hasattr(module, "__all__"), f"{name} has no __all__"
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert not missing


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_public_definitions_are_exported(name: str) -> None:
    module = importlib.import_module(name)
    defined_here = {
        n for n, obj in vars(module).items()
        if not n.startswith("_") and (inspect.isfunction(obj) or inspect.isclass(obj))
        and getattr(obj, "__module__", None) == name
    }
    assert defined_here <= set(module.__all__), f"public but not in __all__: {defined_here - set(module.__all__)}"


@requires_torch
@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_names_exist_at_pytorch_paths(name: str) -> None:
    module = importlib.import_module(name)
    torch_module = importlib.import_module(name.replace("agrad", "torch", 1))
    absent = [n for n in module.__all__ if n not in AGRAD_ONLY and not hasattr(torch_module, n)]
    assert not absent, f"{name} exports names PyTorch does not have at {torch_module.__name__}: {absent}"
    assert torch is not None
