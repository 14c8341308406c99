"""Neural-network building blocks (mirrors ``torch.nn``): Module, Parameter, the layers,
``init``, ``utils`` and ``functional``."""

from agrad.nn import functional, init, modules, parameter, utils
from agrad.nn.modules import *  # noqa: F403
from agrad.nn.parameter import Buffer, Parameter

__all__ = ["functional", "init", "modules", "parameter", "utils", "Parameter", "Buffer"]
__all__ += modules.__all__  # the form type checkers follow
