"""Fit y = sin(x) with a cubic, gradients by hand (no autograd).

A port of "Learning PyTorch with Examples" (PyTorch: Tensors): the same
program with ``torch`` renamed ``agrad``.  Run: ``python examples/tutorials/polynomial_tensor.py``.
"""

import math

import agrad

dtype = agrad.float
device = agrad.device("cpu")

# Inputs and targets.
x = agrad.linspace(-math.pi, math.pi, 2000, device=device, dtype=dtype)
y = agrad.sin(x)

# Random weights.
a = agrad.randn((), device=device, dtype=dtype)
b = agrad.randn((), device=device, dtype=dtype)
c = agrad.randn((), device=device, dtype=dtype)
d = agrad.randn((), device=device, dtype=dtype)

learning_rate = 1e-6
for t in range(2000):
    # Forward: predict y.
    y_pred = a + b * x + c * x ** 2 + d * x ** 3

    # The loss, as a Python number.
    loss = (y_pred - y).pow(2).sum().item()
    if t % 100 == 99:
        print(t, loss)

    # Backward by hand: the gradients of the loss with respect to a, b, c, d.
    grad_y_pred = 2.0 * (y_pred - y)
    grad_a = grad_y_pred.sum()
    grad_b = (grad_y_pred * x).sum()
    grad_c = (grad_y_pred * x ** 2).sum()
    grad_d = (grad_y_pred * x ** 3).sum()

    # Gradient descent.
    a -= learning_rate * grad_a
    b -= learning_rate * grad_b
    c -= learning_rate * grad_c
    d -= learning_rate * grad_d

print(f"Result: y = {a.item()} + {b.item()} x + {c.item()} x^2 + {d.item()} x^3")
