"""Classify two moons with a small MLP: micrograd's demo, in PyTorch's form.

Andrej Karpathy's micrograd trains ``MLP(2, [16, 16, 1])`` on
``make_moons(n_samples=100, noise=0.1)`` with an SVM max-margin loss, an L2
penalty and plain gradient descent whose step shrinks from 1.0 to 0.1.  Here
the same program is written against PyTorch's API (``nn.Sequential``,
``nn.Linear``, ``nn.ReLU``, ``optim.SGD``) with ``torch`` renamed ``agrad``
and ``loss.backward()`` spelt ``backward_sync()``.  The moons are made with
numpy from a fixed seed (no scikit-learn).  The layers keep PyTorch's
default initialisation, not micrograd's U(-1, 1).
Run: ``python examples/tutorials/micrograd_mlp.py``.
"""

import numpy as np

import agrad


def make_moons(n_samples, noise, rng):
    """Two interleaved half circles, labels 0 (upper) and 1 (lower), with Gaussian noise:
    scikit-learn's make_moons(shuffle=False)."""
    n_out = n_samples // 2
    n_in = n_samples - n_out
    outer = np.linspace(0, np.pi, n_out)
    inner = np.linspace(0, np.pi, n_in)
    X = np.concatenate([np.stack([np.cos(outer), np.sin(outer)], 1),
                        np.stack([1 - np.cos(inner), 1 - np.sin(inner) - 0.5], 1)])
    y = np.concatenate([np.zeros(n_out), np.ones(n_in)])
    return X + rng.normal(scale=noise, size=X.shape), y


X, y = make_moons(100, 0.1, np.random.default_rng(1))
X = agrad.tensor(X, dtype=agrad.float)
y = agrad.tensor(y * 2 - 1, dtype=agrad.float)  # labels -1 and +1, as the margin loss wants

# 2 -> 16 -> 16 -> 1: ReLU after each hidden layer, a linear score out.
model = agrad.nn.Sequential(
    agrad.nn.Linear(2, 16), agrad.nn.ReLU(),
    agrad.nn.Linear(16, 16), agrad.nn.ReLU(),
    agrad.nn.Linear(16, 1),
)
optimizer = agrad.optim.SGD(model.parameters(), lr=1.0)


def loss_and_accuracy():
    scores = model(X).squeeze(1)
    # SVM max-margin loss: zero once a point is on its side by a margin of 1.
    data_loss = agrad.relu(1 - y * scores).mean()
    # L2 regularisation of every parameter, weights and biases alike.
    alpha = 1e-4
    reg_loss = alpha * sum((p * p).sum() for p in model.parameters())
    accuracy = ((y > 0) == (scores > 0)).float().mean()
    return data_loss + reg_loss, accuracy


for k in range(100):
    total_loss, acc = loss_and_accuracy()

    optimizer.zero_grad()
    total_loss.backward_sync()

    # The step shrinks linearly from 1.0 to 0.1 over the run.
    for group in optimizer.param_groups:
        group['lr'] = 1.0 - 0.9 * k / 100
    optimizer.step()

    if k % 10 == 0:
        print(f"step {k} loss {total_loss.item()}, accuracy {acc.item() * 100}%")
