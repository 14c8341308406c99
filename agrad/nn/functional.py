"""Functional neural-network ops (mirrors ``torch.nn.functional``).

Composites of table ops (``agrad/_ops/``): their gradients come from the
primitives', so they need no backward rule of their own.  The functions live
in private modules by family; this module is their public path.
"""

from agrad._ops._shape import _pad as pad
from agrad.nn import _activations, _layers, _losses
from agrad.nn._activations import *  # noqa: F403
from agrad.nn._layers import *  # noqa: F403
from agrad.nn._losses import *  # noqa: F403

__all__ = [*_losses.__all__, *_activations.__all__, *_layers.__all__, "pad"]
