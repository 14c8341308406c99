"""Custom Functions that support double backward.

A port of PyTorch's tutorial "Double Backward with Custom Functions":
``torch`` renamed ``agrad``.  Whether a custom Function can be
differentiated twice depends on whether its backward is itself recorded;
each case below is checked to second order with ``gradgradcheck``.
Run: ``python examples/tutorials/double_backward.py``.
"""

import agrad


class Square(agrad.autograd.Function):
    """Saves an input: its backward is recorded through that input's graph."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 2

    @staticmethod
    def backward(ctx, grad_out):
        x, = ctx.saved_tensors
        return grad_out * 2 * x


class Exp(agrad.autograd.Function):
    """Saves an output: outputs carry a grad_fn too, so this works the same way."""

    @staticmethod
    def forward(ctx, x):
        result = agrad.exp(x)
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad_out):
        result, = ctx.saved_tensors
        return result * grad_out


class Sinh(agrad.autograd.Function):
    """Reuses the forward's intermediate results exp(x) and exp(-x) in backward.

    They are returned as outputs, so that they are part of the graph and the
    backward's use of them is differentiated correctly."""

    @staticmethod
    def forward(ctx, x):
        expx = agrad.exp(x)
        expnegx = agrad.exp(-x)
        ctx.save_for_backward(expx, expnegx)
        return (expx - expnegx) / 2, expx, expnegx

    @staticmethod
    def backward(ctx, grad_out, grad_expx, grad_expnegx):
        expx, expnegx = ctx.saved_tensors
        grad_input = grad_out * (expx + expnegx) / 2
        # The extra outputs' gradients flow too (the second backward needs them).
        grad_input += grad_expx * expx
        grad_input -= grad_expnegx * expnegx
        return grad_input


def sinh(x):
    return Sinh.apply(x)[0]


class SinhBad(agrad.autograd.Function):
    """What not to do: intermediates kept on ctx are constants to autograd, so
    the gradient it returns has no graph of its own."""

    @staticmethod
    def forward(ctx, x):
        ctx.expx = agrad.exp(x)
        ctx.expnegx = agrad.exp(-x)
        return (ctx.expx - ctx.expnegx) / 2

    @staticmethod
    def backward(ctx, grad_out):
        return grad_out * (ctx.expx + ctx.expnegx) / 2


def cube_backward(grad_out, x):
    return grad_out * 3 * x ** 2


class Cube(agrad.autograd.Function):
    """A backward autograd cannot see into (think: a NumPy kernel), made
    differentiable by writing it as a custom Function of its own."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, grad_out):
        x, = ctx.saved_tensors
        return CubeBackward.apply(grad_out, x)


class CubeBackward(agrad.autograd.Function):
    @staticmethod
    def forward(ctx, grad_out, x):
        ctx.save_for_backward(x, grad_out)
        return cube_backward(grad_out, x)

    @staticmethod
    def backward(ctx, grad_out):
        x, saved_grad_out = ctx.saved_tensors
        return grad_out * 3 * x ** 2, grad_out * saved_grad_out * 6 * x


# Double precision: finite differences magnify rounding errors.
x = agrad.rand(3, 3, requires_grad=True, dtype=agrad.double)
print("Square", agrad.autograd.gradcheck(Square.apply, x), agrad.autograd.gradgradcheck(Square.apply, x))

x = agrad.tensor(1.0, requires_grad=True, dtype=agrad.double).clone()
print("Exp", agrad.autograd.gradcheck(Exp.apply, x), agrad.autograd.gradgradcheck(Exp.apply, x))

x = agrad.rand(3, 3, requires_grad=True, dtype=agrad.double)
print("Sinh", agrad.autograd.gradcheck(sinh, x), agrad.autograd.gradgradcheck(sinh, x))

out = SinhBad.apply(x)
grad_x, = agrad.autograd.grad_sync(out.sum(), x, create_graph=True)
print("SinhBad: grad_x requires grad:", grad_x.requires_grad)

x = agrad.tensor(2.0, requires_grad=True, dtype=agrad.double)
print("Cube", agrad.autograd.gradcheck(Cube.apply, x), agrad.autograd.gradgradcheck(Cube.apply, x))

# The first gradient is itself a function of x: d/dx (x^3) = 3x^2 = 12, d2/dx2 = 6x = 12.
out = Cube.apply(x)
grad_x, = agrad.autograd.grad_sync(out, x, create_graph=True)
grad_grad_x, = agrad.autograd.grad_sync(grad_x, x)
print("Cube at 2:", grad_x.item(), grad_grad_x.item(), type(grad_x.grad_fn).__name__)
