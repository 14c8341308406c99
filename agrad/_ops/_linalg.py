"""Linear algebra ops."""

from __future__ import annotations

import numpy as np

from agrad import _dtype
from agrad._ops._common import _r
from agrad._ops._registry import defop
from agrad._tensor import Tensor

# The public names of this family (star-imported by ``agrad/__init__.py``).
__all__ = ["matmul"]

# -- linear algebra -------------------------------------------------------------


def _transposed(t: Tensor) -> bool:
    """A 2-D tensor laid out column-major, like ``weight.mT`` in ``linear``."""
    f = t._data.flags
    return t.ndim == 2 and f.f_contiguous and not f.c_contiguous


# Both grads below compute a 2-D product in the layout of the input it flows
# to, as PyTorch's mm_mat1_backward/mm_mat2_backward do: for ``x @ W.mT`` the
# gradient of ``W.mT`` is built as ``(g.mT @ x).mT``, so after the transpose
# node it reaches ``W`` row-major and is stored as ``W.grad`` without a copy.
def _matmul_grad_input(g: Tensor, input: Tensor, other: Tensor) -> Tensor:
    if other.ndim == 1:
        return g.unsqueeze(-1) * other if input.ndim > 1 else g * other
    if input.ndim == 1:
        return (g.unsqueeze(-2) @ other.mT).squeeze(-2)
    if _transposed(input) and g.ndim == 2:
        return (other @ g.mT).mT
    return g @ other.mT


def _matmul_grad_other(g: Tensor, input: Tensor, other: Tensor) -> Tensor:
    if input.ndim == 1:
        return input.unsqueeze(-1) * g.unsqueeze(-2) if other.ndim > 1 else g * input
    if other.ndim == 1:
        return (input.mT @ g.unsqueeze(-1)).squeeze(-1)
    if _transposed(other) and g.ndim == 2:
        return (g.mT @ input).mT
    return input.mT @ g


def _matmul_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    shapes = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
              ((5, 2, 3), (3, 4)), ((2, 3), (5, 3, 4)), ((5, 1, 2, 3), (4, 3, 2)), ((3,), (2, 3, 4))]
    return [((_r(rng, *a), _r(rng, *b)), {}) for a, b in shapes]


@defop(ref=lambda torch: torch.matmul,
       vjp=(_matmul_grad_input, _matmul_grad_other), node="MmBackward0",
       methods=("matmul", "__matmul__"), rmethods=("__rmatmul__",), samples=_matmul_samples)
def matmul(xp, input, other):
    """Matrix product with numpy/PyTorch broadcasting of batch dimensions (1-D, 2-D, batched)."""
    if input.dtype != other.dtype:
        raise RuntimeError(
            f"expected m1 and m2 to have the same dtype, but got: {_dtype.from_numpy_dtype(input.dtype)} "
            f"!= {_dtype.from_numpy_dtype(other.dtype)}"
        )
    if input.ndim == 0 or other.ndim == 0:
        raise RuntimeError("both arguments to matmul need to be at least 1D, but they are "
                           f"{input.ndim}D and {other.ndim}D")
    return xp.matmul(input, other)
