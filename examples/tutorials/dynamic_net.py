"""Fit y = sin(x) with a polynomial whose degree each forward draws at random.

A port of "Learning PyTorch with Examples" (PyTorch: Control Flow + Weight
Sharing): ``torch`` renamed ``agrad`` and ``loss.backward()`` spelt
``backward_sync()``.  The graph is rebuilt on every forward, so ordinary
Python control flow decides its shape, and one parameter can be used by
several terms.  Run: ``python examples/tutorials/dynamic_net.py``.
"""

import math
import random

import agrad


class DynamicNet(agrad.nn.Module):
    """A cubic plus zero, one or two higher terms that share the coefficient e."""

    def __init__(self):
        super().__init__()
        self.a = agrad.nn.Parameter(agrad.randn(()))
        self.b = agrad.nn.Parameter(agrad.randn(()))
        self.c = agrad.nn.Parameter(agrad.randn(()))
        self.d = agrad.nn.Parameter(agrad.randn(()))
        self.e = agrad.nn.Parameter(agrad.randn(()))

    def forward(self, x):
        # Degree 3, 4 or 5, chosen anew every call; e is reused for x^4 and x^5.
        y = self.a + self.b * x + self.c * x ** 2 + self.d * x ** 3
        for exp in range(4, random.randint(4, 6)):
            y = y + self.e * x ** exp
        return y

    def string(self):
        return (f'y = {self.a.item()} + {self.b.item()} x + {self.c.item()} x^2 + {self.d.item()} x^3 + '
                f'{self.e.item()} x^4 ? + {self.e.item()} x^5 ?')


x = agrad.linspace(-math.pi, math.pi, 2000)
y = agrad.sin(x)

model = DynamicNet()

# Plain SGD struggles here: momentum carries it through.
criterion = agrad.nn.MSELoss(reduction='sum')
optimizer = agrad.optim.SGD(model.parameters(), lr=1e-8, momentum=0.9)
for t in range(30000):
    y_pred = model(x)

    loss = criterion(y_pred, y)
    if t % 2000 == 1999:
        print(t, loss.item())

    optimizer.zero_grad()
    loss.backward_sync()
    optimizer.step()

print(f'Result: {model.string()}')
