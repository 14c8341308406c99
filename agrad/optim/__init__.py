"""Optimizers (mirrors ``torch.optim``): they update parameters in place from their ``.grad``."""

from agrad.optim import adadelta, adagrad, adam, adamw, lr_scheduler, optimizer, rmsprop, sgd
from agrad.optim.adadelta import *  # noqa: F403
from agrad.optim.adagrad import *  # noqa: F403
from agrad.optim.adam import *  # noqa: F403
from agrad.optim.adamw import *  # noqa: F403
from agrad.optim.optimizer import *  # noqa: F403
from agrad.optim.rmsprop import *  # noqa: F403
from agrad.optim.sgd import *  # noqa: F403

__all__ = [
    "lr_scheduler", *optimizer.__all__, *sgd.__all__, *adam.__all__, *adamw.__all__, *rmsprop.__all__,
    *adagrad.__all__, *adadelta.__all__,
]
