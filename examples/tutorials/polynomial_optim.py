"""Fit y = sin(x) with a cubic ``Linear`` layer, updated by an optimizer.

A port of "Learning PyTorch with Examples" (PyTorch: optim): ``torch``
renamed ``agrad`` and ``loss.backward()`` spelt ``backward_sync()``.  The
hand-written update of the ``nn`` version becomes ``agrad.optim.RMSprop``.
Run: ``python examples/tutorials/polynomial_optim.py``.
"""

import math

import agrad

x = agrad.linspace(-math.pi, math.pi, 2000)
y = agrad.sin(x)

# The features (x, x^2, x^3), as in the nn version.
p = agrad.tensor([1, 2, 3])
xx = x.unsqueeze(-1).pow(p)

model = agrad.nn.Sequential(
    agrad.nn.Linear(3, 1),
    agrad.nn.Flatten(0, 1)
)
loss_fn = agrad.nn.MSELoss(reduction='sum')

# The optimizer updates the parameters it is given; RMSprop scales each step
# by a running average of the squared gradient.
learning_rate = 1e-3
optimizer = agrad.optim.RMSprop(model.parameters(), lr=learning_rate)
for t in range(2000):
    y_pred = model(xx)

    loss = loss_fn(y_pred, y)
    if t % 100 == 99:
        print(t, loss.item())

    # Gradients accumulate in .grad: clear them before the backward.
    optimizer.zero_grad()
    loss.backward_sync()

    # One update of every parameter.
    optimizer.step()

linear_layer = model[0]
print(f'Result: y = {linear_layer.bias.item()} + {linear_layer.weight[:, 0].item()} x + '
      f'{linear_layer.weight[:, 1].item()} x^2 + {linear_layer.weight[:, 2].item()} x^3')
