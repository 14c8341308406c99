"""Linear algebra ops."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from agrad import _backends, _dtype
from agrad._errors import broadcast_error
from agrad._ops._common import _r
from agrad._ops._registry import defop
from agrad._tensor import Tensor

# The public names of this family (star-imported by ``agrad/__init__.py``).
__all__ = ["matmul", "mm", "addmm", "bmm", "dot", "outer", "einsum"]

# -- linear algebra -------------------------------------------------------------


def _transposed(t: Tensor) -> bool:
    """A 2-D tensor laid out column-major, like ``weight.mT`` in ``linear``."""
    f = t._data.flags
    return t.ndim == 2 and f.f_contiguous and not f.c_contiguous


# Both grads below compute a 2-D product in the layout of the input it flows
# to, as PyTorch's mm_mat1_backward/mm_mat2_backward do: for ``x @ W.mT`` the
# gradient of ``W.mT`` is built as ``(g.mT @ x).mT``, so after the transpose
# node it reaches ``W`` row-major and is stored as ``W.grad`` without a copy.
def _dense(g: Tensor) -> Tensor:
    """``g`` without zero strides.  A reduction's gradient is a broadcast view
    (SumBackward0 expands), and numpy's matmul copies such an operand itself,
    slowly: for 2048x2048 float32 a product took 15 ms longer with it than
    with a plain copy made first (W6 of bench_perf.py)."""
    return g.clone() if g._data.size > 1 and 0 in g._data.strides else g


def _matmul_grad_input(g: Tensor, input: Tensor, other: Tensor) -> Tensor:
    g = _dense(g)
    if other.ndim == 1:
        return g.unsqueeze(-1) * other if input.ndim > 1 else g * other
    if input.ndim == 1:
        return (g.unsqueeze(-2) @ other.mT).squeeze(-2)
    if _transposed(input) and g.ndim == 2:
        return (other @ g.mT).mT
    return g @ other.mT


def _matmul_grad_other(g: Tensor, input: Tensor, other: Tensor) -> Tensor:
    g = _dense(g)
    if input.ndim == 1:
        return input.unsqueeze(-1) * g.unsqueeze(-2) if other.ndim > 1 else g * input
    if other.ndim == 1:
        return (input.mT @ g.unsqueeze(-1)).squeeze(-1)
    if _transposed(other) and g.ndim == 2:
        return (g.mT @ input).mT
    return input.mT @ g


def _product_work(tensors: Any, result: Tensor) -> int:
    """Backward work of a matrix product, solve or inverse (Note [Offload threshold]).

    Two products of ``k`` multiply-adds per output element (``k`` the
    contracted size).  BLAS runs about sixteen of them in the time an
    elementwise kernel touches one element, so it counts a sixth as much
    again, offloaded by default from about two milliseconds (a 512x512x512
    product's backward is, a 64x1024x1024 one's is not).  A thin product
    (``(1, k) @ (k, n)``) is memory-bound instead: it also counts the
    elements it touches, which it must read: BLAS streams them at about an
    eighth of an elementwise kernel's cost per element.
    """
    touched = result._data.size + sum(t._data.size for t in tensors)
    return result._data.size * tensors[0]._data.shape[-1] // 48 + touched // 8


def _matmul_samples(rng: np.random.Generator) -> list[tuple[tuple, dict]]:
    shapes = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
              ((5, 2, 3), (3, 4)), ((2, 3), (5, 3, 4)), ((5, 1, 2, 3), (4, 3, 2)), ((3,), (2, 3, 4))]
    return [((_r(rng, *a), _r(rng, *b)), {}) for a, b in shapes]


@defop(ref=lambda torch: torch.matmul,
       vjp=(_matmul_grad_input, _matmul_grad_other), node="MmBackward0", work=_product_work, saved_as={"other": "mat2"},
       split_rows=0,
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
    try:
        return xp.matmul(input, other)
    except ValueError:  # Note [Translating numpy's errors]: free unless it failed
        raise _matmul_error(input.shape, other.shape) from None


def _matmul_error(a: tuple[int, ...], b: tuple[int, ...]) -> RuntimeError:
    """PyTorch's error for ``matmul`` of shapes ``a`` and ``b``, named after the kernel
    its dispatch picks (dot, mv, mm on folded rows, or bmm after broadcasting batches)."""
    if len(a) == 1 and len(b) == 1:
        return RuntimeError(f"inconsistent tensor size, expected tensor [{a[0]}] and src [{b[0]}] to have the same "
                            f"number of elements, but got {a[0]} and {b[0]} elements respectively")
    if len(b) == 1:
        rows = math.prod(a[:-1])
        return RuntimeError(f"size mismatch, got input ({rows}), mat ({rows}x{a[-1]}), vec ({b[0]})")
    if len(b) == 2:
        return RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({math.prod(a[:-1])}x{a[-1]} and "
                            f"{b[0]}x{b[1]})")
    batch_a, batch_b = a[:-2], b[:-2]
    err = broadcast_error([batch_a, batch_b])
    if err is not None:
        return err
    batch = math.prod(np.broadcast_shapes(batch_a, batch_b))
    return RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{batch}, {a[-1]}] "
                        f"but got: [{batch}, {b[-2]}].")



def _dtypes_match(name: str, a: np.ndarray, b: np.ndarray) -> None:
    if a.dtype != b.dtype:
        raise RuntimeError(f"{name}: expected m1 and m2 to have the same dtype, but got: "
                           f"{_dtype.from_numpy_dtype(a.dtype)} != {_dtype.from_numpy_dtype(b.dtype)}")


@defop(ref=lambda torch: torch.mm,
       vjp=(lambda g, mat2: mm(_dense(g), mat2.mT), lambda g, input: mm(input.mT, _dense(g))),
       node="MmBackward0", methods=("mm",), work=_product_work, split_rows=0,
       samples=lambda rng: [((_r(rng, 2, 3), _r(rng, 3, 4)), {}), ((_r(rng, 1, 5), _r(rng, 5, 1)), {})])
def mm(xp, input, mat2):
    """Product of two matrices (2-D only, no broadcasting)."""
    return _mm(xp, input, mat2)


def _mm(xp: Any, input: Any, mat2: Any) -> Any:
    if input.ndim != 2:
        raise RuntimeError("self must be a matrix")
    if mat2.ndim != 2:
        raise RuntimeError("mat2 must be a matrix")
    if input.shape[1] != mat2.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({input.shape[0]}x{input.shape[1]} "
                           f"and {mat2.shape[0]}x{mat2.shape[1]})")
    _dtypes_match("mm", input, mat2)
    return xp.matmul(input, mat2)


def _scaled(t: Tensor, factor: Any) -> Tensor:
    return t if factor == 1 else t * factor


def _addmm_work(tensors: Any, result: Tensor) -> int:
    return _product_work(tensors[1:], result)  # the product's: mat1 @ mat2


# Note [Linear as one node]
# ~~~~~~~~~~~~~~~~~~~~~~~~~
# ``F.linear(x, W, b)`` with a matrix ``x`` and a bias is ``addmm(b, x, W.t())``:
# one product node, AddmmBackward0 with its inputs in PyTorch's order, instead
# of a product and a sum.  A per-request forward at batch 1 is mostly dispatch
# per op and bookkeeping per node (issue 15's serving benchmark), so each op
# and node saved counts.
@defop(ref=lambda torch: torch.addmm,
       vjp=(lambda g, beta: _scaled(g, beta),
            lambda g, mat2, alpha: _scaled(mm(_dense(g), mat2.mT), alpha),
            lambda g, mat1, alpha: _scaled(mm(mat1.mT, _dense(g)), alpha)),
       node="AddmmBackward0", methods=("addmm",), work=_addmm_work, split_rows=1,
       samples=lambda rng: [((_r(rng, 4), _r(rng, 2, 3), _r(rng, 3, 4)), {}),
                            ((_r(rng, 2, 4), _r(rng, 2, 3), _r(rng, 3, 4)), {"beta": 0.5, "alpha": 2.0}),
                            ((_r(rng, 1), _r(rng, 1, 5), _r(rng, 5, 1)), {})])
def addmm(xp, input, mat1, mat2, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat1 @ mat2)``, ``input`` broadcast to the product's shape."""
    out = _mm(xp, mat1, mat2)  # mm's checks and messages
    if input.dtype != out.dtype:
        raise RuntimeError(f"self and mat2 must have the same dtype, but got "
                           f"{_dtype.from_numpy_dtype(input.dtype)} and {_dtype.from_numpy_dtype(out.dtype)}")
    if alpha != 1:
        out *= alpha
    if beta != 0:
        try:
            out += input if beta == 1 else beta * input
        except ValueError:
            raise RuntimeError(f"The expanded size of the tensor ({out.shape[-1]}) must match the existing size "
                               f"({input.shape[-1]}) at non-singleton dimension 1.  Target sizes: "
                               f"{list(out.shape)}.  Tensor sizes: {list(input.shape)}") from None
    return out


@defop(ref=lambda torch: torch.bmm,
       vjp=(lambda g, mat2: bmm(_dense(g), mat2.mT), lambda g, input: bmm(input.mT, _dense(g))),
       node="BmmBackward0", methods=("bmm",), work=_product_work,
       samples=lambda rng: [((_r(rng, 2, 2, 3), _r(rng, 2, 3, 4)), {})])
def bmm(xp, input, mat2):
    """Batched product of two 3-D tensors of matrices with equal batch sizes."""
    if input.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if mat2.ndim != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    if input.shape[0] != mat2.shape[0] or input.shape[2] != mat2.shape[1]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{input.shape[0]}, {input.shape[2]}] but got: [{mat2.shape[0]}, {mat2.shape[1]}].")
    _dtypes_match("bmm", input, mat2)
    return xp.matmul(input, mat2)


@defop(ref=lambda torch: torch.dot, vjp=(lambda g, tensor: g * tensor, lambda g, input: g * input),
       node="DotBackward0", methods=("dot",), samples=lambda rng: [((_r(rng, 4), _r(rng, 4)), {})])
def dot(xp, input, tensor):
    """Inner product of two 1-D tensors of the same size."""
    if input.ndim != 1 or tensor.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {tensor.ndim}D tensors")
    if input.shape[0] != tensor.shape[0]:
        n, m = input.shape[0], tensor.shape[0]
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{n}] and src [{m}] to have the same "
                           f"number of elements, but got {n} and {m} elements respectively")
    if input.dtype != tensor.dtype:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found "
                           f"{_dtype.from_numpy_dtype(input.dtype)} and {_dtype.from_numpy_dtype(tensor.dtype)}")
    return xp.dot(input, tensor)


@defop(ref=lambda torch: torch.outer,
       vjp=(lambda g, vec2: matmul(g, vec2), lambda g, input: matmul(input, g)),
       node="MulBackward0", methods=("outer", "ger"), promote=True,
       samples=lambda rng: [((_r(rng, 3), _r(rng, 4)), {})])
def outer(xp, input, vec2):
    """Outer product of two 1-D tensors."""
    for name, a in (("self", input), ("vec2", vec2)):
        if a.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {a.ndim}-D")
    return xp.multiply.outer(input, vec2)


# -- einsum -------------------------------------------------------------------------


def _parse_equation(equation: str, n: int) -> tuple[list[str], str]:
    eq = equation.replace(" ", "")
    if "." in eq:
        raise NotImplementedError("einsum(): ellipsis ('...') is not supported by agrad")
    lhs, arrow, rhs = eq.partition("->")
    subs = lhs.split(",")
    if len(subs) != n:
        which = "fewer" if n < len(subs) else "more"
        raise RuntimeError(f"einsum(): {which} operands were provided than specified in the equation")
    for s in subs + [rhs]:
        if not all(c.isalpha() for c in s):
            raise RuntimeError(f"einsum(): invalid subscript given in equation {equation!r}")
    if not arrow:
        letters = "".join(subs)
        rhs = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    return subs, rhs


def _einsum_grad(g: Tensor, tensors: tuple[Tensor, ...], equation: str) -> list[Tensor]:
    """The gradient of operand k is an einsum of the incoming gradient with the
    other operands, written into operand k's subscripts: a letter repeated in
    them (a diagonal) goes through an identity, a letter summed away by operand
    k alone through a vector of ones (both constants, made on ``g``'s device)."""
    dt, dev = g._data.dtype, g.device
    subs, rhs = _parse_equation(equation, len(tensors))
    sizes = {c: t.shape[i] for t, s in zip(tensors, subs) for i, c in enumerate(s)}
    free = [chr(c) for c in range(ord("A"), ord("Z") + 1)] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    free = [c for c in free if c not in sizes]
    grads = []
    for k, target in enumerate(subs):
        operands = [g] + [t for j, t in enumerate(tensors) if j != k]
        in_subs = [rhs] + [s for j, s in enumerate(subs) if j != k]
        available = set("".join(in_subs))
        out_subs = ""
        seen: set[str] = set()
        for c in target:
            if c in seen:  # a repeated letter: a fresh one tied to c by an identity
                new = free.pop()
                with _backends.on(dev):
                    eye = _backends.array_module(g._data).eye(sizes[c], dtype=dt)
                operands.append(Tensor._make(eye))
                in_subs.append(c + new)
                out_subs += new
                continue
            seen.add(c)
            out_subs += c
            if c not in available:
                operands.append(Tensor._make(_backends.full((sizes[c],), 1, dt, dev)))
                in_subs.append(c)
                available.add(c)
        grads.append(einsum(",".join(in_subs) + "->" + out_subs, *operands))
    return grads


_EINSUM_SAMPLES = [("ij,jk->ik", (2, 3), (3, 4)), ("bij,bjk->bik", (2, 2, 3), (2, 3, 4)), ("i,i->", (4,), (4,)),
                   ("ij->ji", (2, 3)), ("ii->i", (3, 3)), ("ij->", (2, 3)), ("bi,bi->b", (3, 4), (3, 4)),
                   ("i,j->ij", (3,), (4,)), ("ii", (3, 3)), ("ij,jk", (2, 3), (3, 2)),
                   ("ij,j,k->ik", (2, 3), (3,), (2,))]


@defop(ref=lambda torch: torch.einsum, vjp=_einsum_grad, node="EinsumBackward0", promote=True,
       parse=lambda equation, *operands: (
           tuple(operands[0]) if len(operands) == 1 and isinstance(operands[0], (list, tuple)) else operands,
           {"equation": equation}),
       samples=lambda rng: [((eq, *(_r(rng, *s) for s in shapes)), {}) for eq, *shapes in _EINSUM_SAMPLES])
def _einsum(xp, *tensors, equation):
    """Einstein summation over the operands' subscripts (no ellipsis)."""
    subs, rhs = _parse_equation(equation, len(tensors))
    sizes: dict[str, int] = {}
    for k, (t, s) in enumerate(zip(tensors, subs)):
        if len(s) != t.ndim:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({len(s)}) does not match "
                               f"the number of dimensions ({t.ndim}) for operand {k} and no "
                               "ellipsis was given")
        own: dict[str, int] = {}
        for c, n in zip(s, t.shape):
            if own.setdefault(c, n) != n:
                raise RuntimeError(f"einsum(): subscript {c} is repeated for operand {k} but the sizes don't match, "
                                   f"{n} != {own[c]}")
            if sizes.setdefault(c, n) != n:
                raise _einsum_size_error(c, n, k, sizes[c])
    return xp.einsum(",".join(subs) + "->" + rhs, *tensors)


einsum = _einsum


# Note [einsum without broadcasting]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch broadcasts a subscript of size 1 against the same subscript of
# another size (``einsum('i,i->i', ones(1), ones(3))``).  agrad's einsum and
# its gradient (``_einsum_grad``) assume one size per subscript, so agrad
# refuses that case; sizes that would not broadcast in PyTorch either get
# PyTorch's message.
def _einsum_size_error(c: str, n: int, k: int, seen: int) -> RuntimeError:
    if n == 1 or seen == 1:
        return RuntimeError(f"einsum(): subscript {c} has size {n} for operand {k} and size {seen} for an earlier "
                            "one: agrad does not broadcast einsum subscripts of size 1")
    return RuntimeError(f"einsum(): subscript {c} has size {n} for operand {k} which does not broadcast with "
                        f"previously seen size {seen}")


# -- torch.linalg -------------------------------------------------------------------


def _square(name: str, a: np.ndarray, what: str = "A") -> None:
    if a.ndim < 2:
        raise RuntimeError(f"linalg.{name}: The input tensor {what} must have at least 2 dimensions.")
    if a.shape[-1] != a.shape[-2]:
        raise RuntimeError(f"linalg.{name}: {what} must be batches of square matrices, but they are "
                           f"{a.shape[-2]} by {a.shape[-1]} matrices")


def _solve_vector(A: Any, B: Any) -> bool:
    # PyTorch's rule: B is a (batch of) vector(s) when it has one dimension
    # fewer than A and its shape is A's batch shape plus n.
    return B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))


def _solve_grad_B(g: Tensor, A: Tensor) -> Tensor:
    return solve(A.mT, g)


def _solve_grad_A(g: Tensor, A: Tensor, out: Tensor) -> Tensor:
    gB = solve(A.mT, g)
    if _solve_vector(A, out):
        return -(gB.unsqueeze(-1) * out.unsqueeze(-2))
    return -(gB @ out.mT)


@defop(ref=lambda torch: torch.linalg.solve, vjp=(_solve_grad_A, lambda g, A: _solve_grad_B(g, A)),
       node="LinalgSolveExBackward0", to_float=True, work=_product_work,
       samples=lambda rng: [((_r(rng, 3, 3) + 4 * np.eye(3), _r(rng, 3, 2)), {}),
                            ((_r(rng, 3, 3) + 4 * np.eye(3), _r(rng, 3)), {}),
                            ((_r(rng, 2, 3, 3) + 4 * np.eye(3), _r(rng, 2, 3, 4)), {}),
                            ((_r(rng, 2, 3, 3) + 4 * np.eye(3), _r(rng, 3, 1)), {})])
def solve(xp, A, B):
    """The solution X of ``A @ X = B`` (``torch.linalg.solve``), batched and broadcast."""
    _square("solve", A)
    if A.dtype != B.dtype:
        raise RuntimeError(f"linalg.solve: Expected A and B to have the same dtype, but found A of type "
                           f"{_dtype.from_numpy_dtype(A.dtype)} and B of type {_dtype.from_numpy_dtype(B.dtype)} "
                           "instead")
    vector = _solve_vector(A, B)
    rows = B.shape[-1] if vector else (B.shape[-2] if B.ndim >= 2 else -1)
    if rows != A.shape[-1]:
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation AX = B "
                           f"({A.shape[-2]}x{A.shape[-1]} and {B.shape[-2] if B.ndim >= 2 else B.shape[-1]}x"
                           f"{B.shape[-1] if B.ndim >= 2 else 1})")
    try:
        if vector:
            return xp.linalg.solve(A, B[..., None])[..., 0]
        return xp.linalg.solve(A, B)
    except np.linalg.LinAlgError:
        raise RuntimeError("torch.linalg.solve: The solver failed because the input matrix is singular.") from None


@defop(ref=lambda torch: torch.linalg.inv, vjp=lambda g, out: -(out.mT @ g @ out.mT),
       node="LinalgInvExBackward0", to_float=True, work=_product_work,
       samples=lambda rng: [((_r(rng, 3, 3) + 4 * np.eye(3),), {}), ((_r(rng, 2, 3, 3) + 4 * np.eye(3),), {}),
                            ((_r(rng, 1, 1) + 3,), {})])
def inv(xp, A):
    """The inverse of a square matrix (or batch of them), ``torch.linalg.inv``."""
    _square("inv", A)
    try:
        return xp.linalg.inv(A)
    except np.linalg.LinAlgError:
        raise RuntimeError("linalg.inv: The diagonal element 1 is zero, the inversion could not be completed "
                           "because the input matrix is singular.") from None
