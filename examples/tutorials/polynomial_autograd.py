"""Fit y = sin(x) with a cubic, gradients by autograd.

A port of "Learning PyTorch with Examples" (PyTorch: Tensors and autograd):
``torch`` renamed ``agrad`` and ``loss.backward()`` spelt ``backward_sync()``,
its blocking twin for scripts.  Run: ``python examples/tutorials/polynomial_autograd.py``.
"""

import math

import agrad

dtype = agrad.float
device = "cpu"

x = agrad.linspace(-math.pi, math.pi, 2000, dtype=dtype, device=device)
y = agrad.sin(x)

# The weights require gradients: autograd records what is computed from them.
a = agrad.randn((), dtype=dtype, device=device, requires_grad=True)
b = agrad.randn((), dtype=dtype, device=device, requires_grad=True)
c = agrad.randn((), dtype=dtype, device=device, requires_grad=True)
d = agrad.randn((), dtype=dtype, device=device, requires_grad=True)

learning_rate = 1e-6
for t in range(2000):
    y_pred = a + b * x + c * x ** 2 + d * x ** 3

    # The loss stays a tensor, so that it can be differentiated.
    loss = (y_pred - y).pow(2).sum()
    if t % 100 == 99:
        print(t, loss.item())

    # a.grad, b.grad, c.grad and d.grad now hold the loss's gradients.
    loss.backward_sync()

    # Update the weights without recording the update.
    with agrad.no_grad():
        a -= learning_rate * a.grad
        b -= learning_rate * b.grad
        c -= learning_rate * c.grad
        d -= learning_rate * d.grad

        # Gradients accumulate: clear them for the next step.
        a.grad = None
        b.grad = None
        c.grad = None
        d.grad = None

print(f"Result: y = {a.item()} + {b.item()} x + {c.item()} x^2 + {d.item()} x^3")
