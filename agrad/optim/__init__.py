"""Optimizers (mirrors ``torch.optim``): they update parameters in place from their ``.grad``.

Every optimizer follows PyTorch's single-tensor implementation operation for
operation, on the parameters' arrays (Note [Updates on arrays] in
``optimizer.py``); ``lr_scheduler`` adjusts their learning rates.
"""

from agrad.optim import lr_scheduler
from agrad.optim.adadelta import Adadelta
from agrad.optim.adagrad import Adagrad
from agrad.optim.adam import Adam
from agrad.optim.adamax import Adamax
from agrad.optim.adamw import AdamW
from agrad.optim.asgd import ASGD
from agrad.optim.lbfgs import LBFGS
from agrad.optim.nadam import NAdam
from agrad.optim.optimizer import Optimizer
from agrad.optim.radam import RAdam
from agrad.optim.rmsprop import RMSprop
from agrad.optim.rprop import Rprop
from agrad.optim.sgd import SGD

__all__ = ["Adadelta", "Adagrad", "Adam", "Adamax", "AdamW", "ASGD", "LBFGS", "lr_scheduler", "NAdam", "Optimizer",
           "RAdam", "RMSprop", "Rprop", "SGD"]
