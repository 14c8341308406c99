"""Train a small CNN on MNIST-shaped data with TensorDataset, DataLoader, nn and optim.

A port of "What is torch.nn really?" (PyTorch tutorial by Jeremy Howard), in
its final form: ``get_data`` / ``loss_batch`` / ``fit``, a ``WrappedDataLoader``
that reshapes each batch, and a three-layer CNN trained by SGD with momentum;
``torch`` renamed ``agrad`` and ``loss.backward()`` spelt ``backward_sync()``.
The changes: MNIST is replaced by a synthetic data set of the same shapes
(784 features, 10 classes), made with numpy from a fixed seed so nothing is
downloaded (the training loader shuffles, as the tutorial's, from agrad's
generator: ``agrad.manual_seed`` makes a run repeatable); the learning rate
is 0.05, not 0.1, and there are 4 epochs, not 2 (at 0.1 this small data set's
loss sits on a plateau, then falls off it at a step that rounding decides, so
two correct libraries print losses percents apart); and the tutorial's move to
a GPU is left out: the program runs on the CPU.
Run: ``python examples/tutorials/nn_tutorial_mnist_like.py``.
"""

import numpy as np

import agrad
import agrad.nn.functional as F
from agrad import nn, optim
from agrad.utils.data import DataLoader, TensorDataset

agrad.manual_seed(0)  # the model's initial weights, drawn below

# MNIST-like data: each class is a fixed random 28x28 stroke pattern, each
# image its class's pattern, dimmed at random, over noise, in [0, 1].
rng = np.random.default_rng(0)
patterns = (rng.random((10, 784)) > 0.7).astype(np.float32)


def make_split(n):
    y = rng.integers(0, 10, n)
    x = patterns[y] * rng.uniform(0.3, 1.0, (n, 1)) + rng.random((n, 784)) * 0.3
    return np.clip(x, 0, 1).astype(np.float32), y.astype(np.int64)


(x_train, y_train), (x_valid, y_valid) = make_split(2000), make_split(500)

# The tutorial's data arrive as numpy arrays too.
x_train, y_train, x_valid, y_valid = map(agrad.tensor, (x_train, y_train, x_valid, y_valid))
n, c = x_train.shape
print(x_train.shape, y_train.min().item(), y_train.max().item())

bs = 64
lr = 0.05
epochs = 4
loss_func = F.cross_entropy

train_ds = TensorDataset(x_train, y_train)
valid_ds = TensorDataset(x_valid, y_valid)


def get_data(train_ds, valid_ds, bs):
    # The validation set needs no gradients, so twice the batch fits.
    return (
        DataLoader(train_ds, batch_size=bs, shuffle=True),
        DataLoader(valid_ds, batch_size=bs * 2),
    )


def loss_batch(model, loss_func, xb, yb, opt=None):
    # One batch's loss; with an optimizer, also one training step.
    loss = loss_func(model(xb), yb)

    if opt is not None:
        loss.backward_sync()
        opt.step()
        opt.zero_grad()

    return loss.item(), len(xb)


def fit(epochs, model, loss_func, opt, train_dl, valid_dl):
    for epoch in range(epochs):
        model.train()
        for xb, yb in train_dl:
            loss_batch(model, loss_func, xb, yb, opt)

        model.eval()
        with agrad.no_grad():
            losses, nums = zip(
                *[loss_batch(model, loss_func, xb, yb) for xb, yb in valid_dl]
            )
        val_loss = np.sum(np.multiply(losses, nums)) / np.sum(nums)

        print(epoch, val_loss)


class Lambda(nn.Module):
    # A layer made of a function, for use in nn.Sequential.
    def __init__(self, func):
        super().__init__()
        self.func = func

    def forward(self, x):
        return self.func(x)


def preprocess(x, y):
    # Rows of 784 features become 1x28x28 images.
    return x.view(-1, 1, 28, 28), y


class WrappedDataLoader:
    # A DataLoader whose batches pass through func.
    def __init__(self, dl, func):
        self.dl = dl
        self.func = func

    def __len__(self):
        return len(self.dl)

    def __iter__(self):
        for b in self.dl:
            yield (self.func(*b))


train_dl, valid_dl = get_data(train_ds, valid_ds, bs)
train_dl = WrappedDataLoader(train_dl, preprocess)
valid_dl = WrappedDataLoader(valid_dl, preprocess)

model = nn.Sequential(
    nn.Conv2d(1, 16, kernel_size=3, stride=2, padding=1),
    nn.ReLU(),
    nn.Conv2d(16, 16, kernel_size=3, stride=2, padding=1),
    nn.ReLU(),
    nn.Conv2d(16, 10, kernel_size=3, stride=2, padding=1),
    nn.ReLU(),
    nn.AdaptiveAvgPool2d(1),
    Lambda(lambda x: x.view(x.size(0), -1)),
)

opt = optim.SGD(model.parameters(), lr=lr, momentum=0.9)

fit(epochs, model, loss_func, opt, train_dl, valid_dl)
