"""Parameters as one flat vector and back (mirrors ``torch.nn.utils.convert_parameters``).

    >>> model = agrad.nn.Linear(3, 2)
    >>> vec = agrad.nn.utils.parameters_to_vector(model.parameters())
    >>> vec.shape
    agrad.Size([8])
    >>> agrad.nn.utils.vector_to_parameters(agrad.zeros(8), model.parameters())
    >>> model.weight.sum().item(), model.bias.sum().item()
    (0.0, 0.0)
"""

from __future__ import annotations

from collections.abc import Iterable

from agrad._creation import typename
from agrad._device import device
from agrad._ops._shape import cat
from agrad._tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """The parameters flattened and concatenated in order, as one 1-D tensor
    (differentiable: gradients flow back to each parameter)."""
    first: device | None = None
    vec = []
    for param in parameters:
        first = _check_param_device(param, first)
        vec.append(param.reshape(-1))
    return cat(vec)


def vector_to_parameters(vec: Tensor, parameters: Iterable[Tensor]) -> None:
    """Give each parameter, in order, the next ``numel()`` elements of ``vec`` as its data
    (``param.data = ...``, as PyTorch: no graph is recorded)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected agrad.Tensor, but got: {typename(vec)}")
    first: device | None = None
    pointer = 0
    for param in parameters:
        first = _check_param_device(param, first)
        num_param = param.numel()
        param.data = vec[pointer:pointer + num_param].view_as(param).data
        pointer += num_param


def _check_param_device(param: Tensor, first: device | None) -> device:
    """The device of the first parameter; ``TypeError`` (PyTorch's) if ``param`` is on another."""
    if first is None:
        return param.device
    if param.device != first:
        raise TypeError("Found two parameters on different devices, this is currently not supported.")
    return first
