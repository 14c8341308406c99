"""Functional neural-network ops (mirrors ``torch.nn.functional``).

Composites of table ops (``agrad/_ops/``): their gradients come from the
primitives', so they need no backward rule of their own.  The functions live
in private modules by family; this module is their public path.
"""

from agrad._ops._shape import _pad as pad
from agrad.nn import _activations, _attention, _convolution, _distance, _layers, _losses, _normalization
from agrad.nn._activations import *  # noqa: F403
from agrad.nn._attention import *  # noqa: F403
from agrad.nn._convolution import *  # noqa: F403
from agrad.nn._distance import *  # noqa: F403
from agrad.nn._layers import *  # noqa: F403
from agrad.nn._losses import *  # noqa: F403
from agrad.nn._normalization import *  # noqa: F403

__all__ = [
    *_losses.__all__, *_activations.__all__, *_layers.__all__, *_normalization.__all__, *_attention.__all__,
    *_distance.__all__, *_convolution.__all__, "pad",
]
