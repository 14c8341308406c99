"""Fit y = sin(x) with a Legendre polynomial of degree three, written as a
custom autograd Function.

A port of "Learning PyTorch with Examples" (PyTorch: Defining new autograd
functions): ``torch`` renamed ``agrad``, ``backward()`` spelt
``backward_sync()``.  Run: ``python examples/tutorials/polynomial_custom_function.py``.
"""

import math

import agrad


class LegendrePolynomial3(agrad.autograd.Function):
    """P3(x) = (5x^3 - 3x) / 2, with its derivative 3/2 (5x^2 - 1) written by hand."""

    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return 0.5 * (5 * input ** 3 - 3 * input)

    @staticmethod
    def backward(ctx, grad_output):
        input, = ctx.saved_tensors
        return grad_output * 1.5 * (5 * input ** 2 - 1)


dtype = agrad.float
device = agrad.device("cpu")

x = agrad.linspace(-math.pi, math.pi, 2000, device=device, dtype=dtype)
y = agrad.sin(x)

# Weights near the answer, so that the fit converges.
a = agrad.full((), 0.0, device=device, dtype=dtype, requires_grad=True)
b = agrad.full((), -1.0, device=device, dtype=dtype, requires_grad=True)
c = agrad.full((), 0.0, device=device, dtype=dtype, requires_grad=True)
d = agrad.full((), 0.3, device=device, dtype=dtype, requires_grad=True)

learning_rate = 5e-6
for t in range(2000):
    P3 = LegendrePolynomial3.apply

    y_pred = a + b * P3(c + d * x)

    loss = (y_pred - y).pow(2).sum()
    if t % 100 == 99:
        print(t, loss.item())

    loss.backward_sync()

    with agrad.no_grad():
        a -= learning_rate * a.grad
        b -= learning_rate * b.grad
        c -= learning_rate * c.grad
        d -= learning_rate * d.grad

        a.grad = None
        b.grad = None
        c.grad = None
        d.grad = None

print(f"Result: y = {a.item()} + {b.item()} * P3({c.item()} + {d.item()} x)")
