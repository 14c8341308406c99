"""Fit y = sin(x) with a cubic, written as a ``Linear`` layer over (x, x^2, x^3).

A port of "Learning PyTorch with Examples" (PyTorch: nn): ``torch`` renamed
``agrad`` and ``loss.backward()`` spelt ``backward_sync()``.  The model and
the loss come from ``agrad.nn``; the update is still written by hand.
Run: ``python examples/tutorials/polynomial_nn.py``.
"""

import math

import agrad

x = agrad.linspace(-math.pi, math.pi, 2000)
y = agrad.sin(x)

# The output is linear in (x, x^2, x^3): broadcasting (2000, 1) against (3,)
# gives the (2000, 3) features of one linear layer.
p = agrad.tensor([1, 2, 3])
xx = x.unsqueeze(-1).pow(p)

# Linear(3, 1) holds the weight and bias; Flatten(0, 1) turns its (2000, 1)
# output into the (2000,) shape of y.
model = agrad.nn.Sequential(
    agrad.nn.Linear(3, 1),
    agrad.nn.Flatten(0, 1)
)

# The summed squared error, as a module.
loss_fn = agrad.nn.MSELoss(reduction='sum')

learning_rate = 1e-6
for t in range(2000):
    # Calling a module runs its forward.
    y_pred = model(xx)

    loss = loss_fn(y_pred, y)
    if t % 100 == 99:
        print(t, loss.item())

    # Clear the previous step's gradients, then fill every parameter's .grad.
    model.zero_grad()
    loss.backward_sync()

    # Gradient descent over the model's parameters, unrecorded.
    with agrad.no_grad():
        for param in model.parameters():
            param -= learning_rate * param.grad

# A Sequential indexes like a list; the Linear layer keeps `weight` and `bias`.
linear_layer = model[0]

print(f'Result: y = {linear_layer.bias.item()} + {linear_layer.weight[:, 0].item()} x + '
      f'{linear_layer.weight[:, 1].item()} x^2 + {linear_layer.weight[:, 2].item()} x^3')
