"""The layers of ``agrad.nn``, one module per family as in ``torch.nn.modules``."""

from agrad.nn.modules import (
    activation,
    batchnorm,
    container,
    conv,
    distance,
    dropout,
    flatten,
    fold,
    instancenorm,
    linear,
    loss,
    normalization,
    padding,
    pixelshuffle,
    pooling,
    rnn,
    sparse,
    transformer,
    upsampling,
)
from agrad.nn.modules.activation import *  # noqa: F403
from agrad.nn.modules.batchnorm import *  # noqa: F403
from agrad.nn.modules.container import *  # noqa: F403
from agrad.nn.modules.conv import *  # noqa: F403
from agrad.nn.modules.distance import *  # noqa: F403
from agrad.nn.modules.dropout import *  # noqa: F403
from agrad.nn.modules.flatten import *  # noqa: F403
from agrad.nn.modules.fold import *  # noqa: F403
from agrad.nn.modules.instancenorm import *  # noqa: F403
from agrad.nn.modules.linear import *  # noqa: F403
from agrad.nn.modules.loss import *  # noqa: F403
from agrad.nn.modules.module import Module
from agrad.nn.modules.normalization import *  # noqa: F403
from agrad.nn.modules.padding import *  # noqa: F403
from agrad.nn.modules.pixelshuffle import *  # noqa: F403
from agrad.nn.modules.pooling import *  # noqa: F403
from agrad.nn.modules.rnn import *  # noqa: F403
from agrad.nn.modules.sparse import *  # noqa: F403
from agrad.nn.modules.transformer import *  # noqa: F403
from agrad.nn.modules.upsampling import *  # noqa: F403

__all__ = [
    "Module",
    *activation.__all__, *batchnorm.__all__, *container.__all__, *conv.__all__, *distance.__all__,
    *dropout.__all__, *flatten.__all__, *fold.__all__, *instancenorm.__all__, *linear.__all__, *loss.__all__,
    *normalization.__all__, *padding.__all__, *pixelshuffle.__all__, *pooling.__all__, *rnn.__all__,
    *sparse.__all__, *transformer.__all__, *upsampling.__all__,
]
