"""Fit y = sin(x) with a cubic written as a custom ``nn.Module``.

A port of "Learning PyTorch with Examples" (PyTorch: Custom nn Modules):
``torch`` renamed ``agrad`` and ``loss.backward()`` spelt ``backward_sync()``.
Run: ``python examples/tutorials/polynomial_module.py``.
"""

import math

import agrad


class Polynomial3(agrad.nn.Module):
    """a + b x + c x^2 + d x^3, with its four coefficients as parameters."""

    def __init__(self):
        super().__init__()
        # Parameters assigned as attributes are registered: parameters() finds them.
        self.a = agrad.nn.Parameter(agrad.randn(()))
        self.b = agrad.nn.Parameter(agrad.randn(()))
        self.c = agrad.nn.Parameter(agrad.randn(()))
        self.d = agrad.nn.Parameter(agrad.randn(()))

    def forward(self, x):
        return self.a + self.b * x + self.c * x ** 2 + self.d * x ** 3

    def string(self):
        return f'y = {self.a.item()} + {self.b.item()} x + {self.c.item()} x^2 + {self.d.item()} x^3'


x = agrad.linspace(-math.pi, math.pi, 2000)
y = agrad.sin(x)

model = Polynomial3()

# The loss and an optimizer over the module's four parameters.
criterion = agrad.nn.MSELoss(reduction='sum')
optimizer = agrad.optim.SGD(model.parameters(), lr=1e-6)
for t in range(2000):
    y_pred = model(x)

    loss = criterion(y_pred, y)
    if t % 100 == 99:
        print(t, loss.item())

    optimizer.zero_grad()
    loss.backward_sync()
    optimizer.step()

print(f'Result: {model.string()}')
