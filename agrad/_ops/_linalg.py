"""Linear algebra ops: matrix products (``matmul``, ``mm``, ``addmm``, ``mv``…),
products built from them (``inner``, ``tensordot``, ``multi_dot``, ``matrix_power``),
``einsum``, ``cross``, and the linear solves ``solve`` and ``inv``.

The decompositions and what is built on them live in ``_decompositions``.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from agrad import _backends, _dtype
from agrad._device import CPU
from agrad._errors import broadcast_error
from agrad._ops._common import _r
from agrad._ops._elementwise import abs as _abs
from agrad._ops._elementwise import sign, where
from agrad._ops._registry import defop
from agrad._ops._shape import _expand_error, _wrap_dim
from agrad._tensor import Tensor

# The public names of this family (star-imported by ``agrad/__init__.py``).
__all__ = ["matmul", "mm", "addmm", "bmm", "dot", "outer", "einsum", "mv", "addmv", "addr", "addbmm", "baddbmm",
           "vdot", "dist", "cross", "inner", "tensordot", "chain_matmul", "matrix_power", "ger"]


class LinAlgError(RuntimeError):
    """A matrix that a linear-algebra function cannot factor: singular, or not
    positive-definite (``torch.linalg.LinAlgError``, a ``RuntimeError``)."""


LinAlgError.__module__ = "agrad.linalg"  # its public home, as torch.linalg.LinAlgError's


def _legacy_name(dt: Any) -> str:
    """PyTorch's name of a numpy dtype in messages: ``Float``, ``Long``…"""
    return _dtype.SCALAR_TYPE_NAMES[_dtype.from_numpy_dtype(dt).name]


def _check_float(name: str, a: Any) -> None:
    """PyTorch's refusal of an integer or bool matrix in a linear-algebra function."""
    if a.dtype.kind != "f":
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. Got {_legacy_name(a.dtype)}")


def _host(a: Any) -> np.ndarray:
    """``a`` as a numpy array (copied from its device: for error messages and integer results)."""
    return np.asarray(a) if isinstance(a, (np.ndarray, np.generic)) else np.asarray(_backends.transfer(a, CPU))


def first_failure(shape: tuple[int, ...], info: Any) -> tuple[str, int] | None:
    """For LAPACK-style ``info`` (nonzero where a matrix of a batch of ``shape`` failed):
    ``(prefix, code)`` of the first failure, the prefix ``"(Batch element i): "`` with which
    PyTorch's messages name it in a batch (empty for a single matrix); None if none failed."""
    flat = _host(info).reshape(-1)
    failed = np.flatnonzero(flat)
    if not failed.size:
        return None
    return (f"(Batch element {int(failed[0])}): " if len(shape) > 2 else ""), int(flat[failed[0]])


# -- linear algebra -------------------------------------------------------------


def _column_major(strides: tuple[int, ...]) -> bool:
    """Whether a 2-D layout's columns are its contiguous direction, as ``weight.mT``'s in ``linear``."""
    return len(strides) == 2 and strides[0] < strides[1]


# Note [Gradients in their input's layout]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The grads of matmul, mm and addmm compute a 2-D product in the layout of the
# input it flows to, as PyTorch's mm_mat1_backward/mm_mat2_backward do: for
# ``x @ W.mT`` (``linear``) the gradient of ``W.mT`` is built as
# ``(g.mT @ x).mT``, so after the transpose node it reaches ``W`` row-major and
# is stored as ``W.grad`` without a copy, in the parameter's layout.  An
# optimizer then combines it with its row-major state at full speed: Adam over
# a 784x512 weight took 4.0 ms with a column-major gradient, 0.85 ms without.
# Only the layout is saved (``mat2_strides``, PyTorch's ``mat2_sym_strides``),
# never the tensor: an optimizer step that writes ``W`` between the forward
# and the backward of a loss whose input needs no gradient must not make the
# backward fail on ``W``'s version, as it does not in PyTorch.  (mm's and
# addmm's input gradient keeps the row-major layout, a transposed ``mat1``
# being rare.)
def _dense(g: Tensor) -> Tensor:
    """``g`` without zero strides.  A reduction's gradient is a broadcast view
    (SumBackward0 expands), and numpy's matmul copies such an operand itself,
    slowly: for 2048x2048 float32 a product took 15 ms longer with it than
    with a plain copy made first (W6 of bench_perf.py)."""
    return g.clone() if g._data.size > 1 and 0 in g._data.strides else g


def _mm_grad_other(g: Tensor, input: Tensor, other_strides: tuple[int, ...]) -> Tensor:
    """``input.mT @ g`` for 2-D ``input`` and ``g``, in the layout of the input whose strides are
    ``other_strides`` (Note [Gradients in their input's layout]); an ``mm``, whose rows the engine
    may split over kernel threads."""
    return mm(g.mT, input).mT if _column_major(other_strides) else mm(input.mT, g)


def _matmul_grad_input(g: Tensor, input_strides: tuple[int, ...], other: Tensor) -> Tensor:
    g = _dense(g)
    if other.ndim == 1:
        return g.unsqueeze(-1) * other if len(input_strides) > 1 else g * other
    if len(input_strides) == 1:
        return (g.unsqueeze(-2) @ other.mT).squeeze(-2)
    if _column_major(input_strides) and g.ndim == 2:
        return (other @ g.mT).mT
    return g @ other.mT


def _matmul_grad_other(g: Tensor, input: Tensor, other_strides: tuple[int, ...]) -> Tensor:
    g = _dense(g)
    if input.ndim == 1:
        return input.unsqueeze(-1) * g.unsqueeze(-2) if len(other_strides) > 1 else g * input
    if len(other_strides) == 1:
        return (input.mT @ g.unsqueeze(-1)).squeeze(-1)
    if g.ndim == 2:
        return _mm_grad_other(g, input, other_strides)
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


# Note [matmul's node names]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch's ``matmul`` (``_matmul_impl`` in ATen's LinearAlgebra.cpp) runs
# ``dot``, ``mv`` or ``mm`` for 1-D and 2-D operands (``unsqueeze(0).mm``
# then an in-place ``squeeze_(0)`` for 1-D @ 2-D), and folds batched
# operands into one ``mm``/``mv``/``bmm`` between reshapes, ending in an
# ``_unsafe_view``.  Its ``grad_fn`` is the last of those ops: DotBackward0,
# MvBackward0, SqueezeBackward4, MmBackward0, and UnsafeViewBackward0 for
# anything batched -- except a 2-D input that requires grad times a batch
# (also a 3-D input whose single batch broadcasts, which it squeezes to 2-D
# first): that product is folded transposed and ends in ``.mT.contiguous()``,
# a CloneBackward0, or TransposeBackward0 where the transposed result is
# contiguous already (one row, one column, or no elements).  agrad computes
# every case in one node and gives it that name (``_matmul_node``), so
# ``grad_fn`` reprs and graph pictures read as PyTorch's.
_PRODUCT_NODES = {(1, 1): "DotBackward0", (2, 1): "MvBackward0", (1, 2): "SqueezeBackward4",
                  (2, 2): "MmBackward0"}
_MATMUL_NODES = (*_PRODUCT_NODES.values(), "UnsafeViewBackward0", "CloneBackward0", "TransposeBackward0")


def _matmul_node(input: Any, other: Any) -> str:
    """PyTorch's ``grad_fn`` name for ``matmul(input, other)`` (Note [matmul's node names])."""
    a, b = getattr(input, "ndim", 0), getattr(other, "ndim", 0)
    if a <= 2 and b <= 2:
        return _PRODUCT_NODES.get((a, b), "MmBackward0")  # 0-D: the forward raises
    if not getattr(input, "requires_grad", False) or b < 3:
        return "UnsafeViewBackward0"
    if a == 3 and b == 3 and input.shape[0] == 1 != other.shape[0]:
        a = 2  # the broadcast batch squeezed away
    if a != 2:
        return "UnsafeViewBackward0"
    rows, cols = input.shape[-2], other.shape[-1]
    empty = rows == 0 or math.prod(other.shape[:-2]) * cols == 0
    return "TransposeBackward0" if rows == 1 or cols == 1 or empty else "CloneBackward0"


@defop(ref=lambda torch: torch.matmul,
       vjp=(_matmul_grad_input, _matmul_grad_other), node=_MATMUL_NODES, node_for=lambda node: node,
       parse=lambda input, other: ((input, other), {"node": _matmul_node(input, other)}),
       work=_product_work, saved_as={"other": "mat2"}, split_rows=0,
       methods=("matmul", "__matmul__"), rmethods=("__rmatmul__",), samples=_matmul_samples)
def matmul(xp, input, other, *, node="MmBackward0"):
    """Matrix product with numpy/PyTorch broadcasting of batch dimensions (1-D, 2-D, batched);
    ``node`` is PyTorch's name of its ``grad_fn`` (Note [matmul's node names])."""
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
       vjp=(lambda g, mat2: mm(_dense(g), mat2.mT),
            lambda g, input, mat2_strides: _mm_grad_other(_dense(g), input, mat2_strides)),
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
            lambda g, mat1, mat2_strides, alpha: _scaled(_mm_grad_other(_dense(g), mat1, mat2_strides), alpha)),
       node="AddmmBackward0", methods=("addmm",), inplace=("addmm_",), work=_addmm_work, split_rows=1,
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
    return _dot(xp, input, tensor)


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


# -- matrix-vector and batched products ---------------------------------------------


def _same_dtype(name: str, *arrays: Any) -> None:
    """PyTorch's refusal of mixed dtypes in ``addmv``/``mv`` (no type promotion there)."""
    if len({a.dtype for a in arrays}) > 1:
        names = [_legacy_name(a.dtype) for a in arrays]
        raise RuntimeError(f"{name} input tensors must have the same dtype, but got {', '.join(names[:-1])}, "
                           f"and {names[-1]}")


def _mv_shapes(input_shape: tuple[int, ...], mat: Any, vec: Any) -> None:
    if mat.ndim != 2 or vec.ndim != 1 or len(input_shape) > 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {len(input_shape)}, {mat.ndim}, {vec.ndim}")
    if mat.shape[1] != vec.shape[0] or (input_shape and input_shape[0] not in (1, mat.shape[0])):
        rows = input_shape[0] if input_shape else 1
        raise RuntimeError(f"size mismatch, got input ({rows}), mat ({mat.shape[0]}x{mat.shape[1]}), "
                           f"vec ({vec.shape[0]})")


@defop(ref=lambda torch: torch.mv,
       vjp=(lambda g, vec: outer(g, vec), lambda g, input: mv(input.mT, g)),
       node="MvBackward0", methods=("mv",), work=_product_work,
       samples=lambda rng: [((_r(rng, 2, 3), _r(rng, 3)), {}), ((_r(rng, 0, 3), _r(rng, 3)), {}),
                            ((_r(rng, 4, 3)[::2], _r(rng, 6)[::2]), {})])
def mv(xp, input, vec):
    """Product of a matrix and a vector."""
    # PyTorch runs mv as addmv into an empty result: its messages name that result first.
    _mv_shapes((input.shape[0],) if input.ndim == 2 else (0,), input, vec)
    _same_dtype("addmv", np.empty(0, np.result_type(input.dtype, vec.dtype)), input, vec)
    return xp.matmul(input, vec)


@defop(ref=lambda torch: torch.addmv,
       vjp=(lambda g, beta: _scaled(g, beta), lambda g, vec, alpha: _scaled(outer(g, vec), alpha),
            lambda g, mat, alpha: _scaled(mv(mat.mT, g), alpha)),
       node="AddmvBackward0", methods=("addmv",), inplace=("addmv_",), work=_addmm_work,
       samples=lambda rng: [((_r(rng, 2), _r(rng, 2, 3), _r(rng, 3)), {}),
                            ((_r(rng, 1), _r(rng, 2, 3), _r(rng, 3)), {"beta": 0.5, "alpha": -2.0}),
                            ((_r(rng), _r(rng, 4, 6)[:, ::2], _r(rng, 3)), {"beta": 0.0}),
                            ((_r(rng, 0), _r(rng, 0, 3), _r(rng, 3)), {})])
def addmv(xp, input, mat, vec, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat @ vec)``, ``input`` broadcast to the product's length."""
    _mv_shapes(input.shape, mat, vec)
    _same_dtype("addmv", input, mat, vec)
    return _scaled_sum(xp, input, xp.matmul(mat, vec), beta, alpha)


def _scaled_sum(xp: Any, input: Any, product: Any, beta: Any, alpha: Any) -> Any:
    """``beta * input + alpha * product`` broadcast to the product's shape; ``beta == 0``
    ignores ``input`` (its NaN and inf too), as PyTorch's BLAS-backed ops do."""
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return product
    return product + (input if beta == 1 else beta * input)


@defop(ref=lambda torch: torch.addr,
       vjp=(lambda g, beta: _scaled(g, beta), lambda g, vec2, alpha: _scaled(mv(g, vec2), alpha),
            lambda g, vec1, alpha: _scaled(mv(g.mT, vec1), alpha)),
       node="AddrBackward0", methods=("addr",), inplace=("addr_",), promote=True,
       samples=lambda rng: [((_r(rng, 2, 3), _r(rng, 2), _r(rng, 3)), {}),
                            ((_r(rng, 3), _r(rng, 2), _r(rng, 3)), {"beta": 2.0, "alpha": 0.5}),
                            ((_r(rng), _r(rng, 0), _r(rng, 3)), {})])
def addr(xp, input, vec1, vec2, *, beta=1, alpha=1):
    """``beta * input + alpha * outer(vec1, vec2)``, ``input`` broadcast to the outer product's shape."""
    for name, v in (("vec1", vec1), ("vec2", vec2)):
        if v.ndim != 1:
            raise RuntimeError(f"addr: Expected 1-D argument {name}, but got {v.ndim}-D")
    size = (vec1.shape[0], vec2.shape[0])
    if broadcast_error([input.shape, size]) is not None or input.ndim > 2:
        raise _expand_error(input.shape, size)
    return _scaled_sum(xp, input, xp.multiply.outer(vec1, vec2), beta, alpha)


def _bmm_shapes(batch1: Any, batch2: Any) -> None:
    for name, b in (("batch1", batch1), ("batch2", batch2)):
        if b.ndim != 3:
            raise RuntimeError(f"{name} must be a 3D tensor")
    if batch1.shape[0] != batch2.shape[0] or batch1.shape[2] != batch2.shape[1]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{batch1.shape[0]}, {batch1.shape[2]}] but got: [{batch2.shape[0]}, {batch2.shape[1]}].")
    _dtypes_match("bmm", batch1, batch2)


def _expanded_to(input: Any, size: tuple[int, ...]) -> None:
    if input.ndim > len(size) or broadcast_error([input.shape, size]) is not None or \
            np.broadcast_shapes(input.shape, size) != size:
        raise _expand_error(input.shape, size)


def _bmm_work(tensors: Any, result: Tensor) -> int:
    b1 = tensors[1]._data
    return b1.size * tensors[2]._data.shape[-1] // 48 + (result._data.size + b1.size + tensors[2]._data.size) // 8


def _batched(g: Tensor, batch: int) -> Tensor:
    """The gradient of a sum over the batch, ``g`` repeated for each of its ``batch`` matrices."""
    return g.unsqueeze(0).expand(batch, *g.shape)


@defop(ref=lambda torch: torch.addbmm,
       vjp=(lambda g, beta: _scaled(g, beta),
            lambda g, batch2, alpha: _scaled(bmm(_batched(g, batch2.shape[0]), batch2.mT), alpha),
            lambda g, batch1, alpha: _scaled(bmm(batch1.mT, _batched(g, batch1.shape[0])), alpha)),
       node="AddbmmBackward0", methods=("addbmm",), inplace=("addbmm_",), work=_bmm_work,
       samples=lambda rng: [((_r(rng, 2, 4), _r(rng, 3, 2, 3), _r(rng, 3, 3, 4)), {}),
                            ((_r(rng, 4), _r(rng, 2, 2, 3), _r(rng, 2, 3, 4)), {"beta": 0.5, "alpha": 2.0}),
                            ((_r(rng), _r(rng, 2, 2, 3), _r(rng, 2, 3, 4)), {}),
                            ((_r(rng, 2, 4), _r(rng, 0, 2, 3), _r(rng, 0, 3, 4)), {})])
def addbmm(xp, input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * sum_b(batch1[b] @ batch2[b])``, ``input`` broadcast to the product's shape."""
    for name, b in (("batch1", batch1), ("batch2", batch2)):
        if b.ndim != 3:
            raise RuntimeError(f"{name} must be a 3D tensor")
    if batch1.shape[0] != batch2.shape[0]:
        raise RuntimeError(f"batch1 and batch2 must have same number of batches, got {batch1.shape[0]} and "
                           f"{batch2.shape[0]}")
    if batch1.shape[2] != batch2.shape[1]:
        raise RuntimeError(f"Incompatible matrix sizes for bmm ({batch1.shape[1]}x{batch1.shape[2]} and "
                           f"{batch2.shape[1]}x{batch2.shape[2]})")
    _dtypes_match("addbmm", batch1, batch2)
    size = (batch1.shape[1], batch2.shape[2])
    _expanded_to(input, size)
    product = xp.matmul(batch1, batch2).sum(axis=0) if batch1.shape[0] else xp.zeros(size, batch1.dtype)
    return _scaled_sum(xp, input, product, beta, alpha)


@defop(ref=lambda torch: torch.baddbmm,
       vjp=(lambda g, beta: _scaled(g, beta), lambda g, batch2, alpha: _scaled(bmm(_dense(g), batch2.mT), alpha),
            lambda g, batch1, alpha: _scaled(bmm(batch1.mT, _dense(g)), alpha)),
       node="BaddbmmBackward0", methods=("baddbmm",), inplace=("baddbmm_",), work=_bmm_work,
       samples=lambda rng: [((_r(rng, 2, 2, 4), _r(rng, 2, 2, 3), _r(rng, 2, 3, 4)), {}),
                            ((_r(rng, 4), _r(rng, 2, 2, 3), _r(rng, 2, 3, 4)), {"beta": -1.0, "alpha": 0.5}),
                            ((_r(rng), _r(rng, 2, 2, 3), _r(rng, 2, 3, 4)), {}),
                            ((_r(rng, 1, 2, 1), _r(rng, 3, 2, 0), _r(rng, 3, 0, 1)), {})])
def baddbmm(xp, input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * (batch1 @ batch2)``, batched, ``input`` broadcast to the product's shape."""
    _bmm_shapes(batch1, batch2)
    _expanded_to(input, (batch1.shape[0], batch1.shape[1], batch2.shape[2]))
    return _scaled_sum(xp, input, xp.matmul(batch1, batch2), beta, alpha)


@defop(ref=lambda torch: torch.vdot, vjp=(lambda g, other: g * other, lambda g, input: g * input),
       node="VdotBackward0", methods=("vdot",), samples=lambda rng: [((_r(rng, 4), _r(rng, 4)), {}),
                                                                      ((_r(rng, 0), _r(rng, 0)), {})])
def vdot(xp, input, other):
    """Inner product of two 1-D tensors (the first conjugated: the same as ``dot`` for real tensors)."""
    return _dot(xp, input, other)


def _dot(xp: Any, input: Any, other: Any) -> Any:
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    if input.shape[0] != other.shape[0]:
        n, m = input.shape[0], other.shape[0]
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{n}] and src [{m}] to have the same "
                           f"number of elements, but got {n} and {m} elements respectively")
    if input.dtype != other.dtype:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found "
                           f"{_legacy_name(input.dtype)} and {_legacy_name(other.dtype)}")
    return xp.dot(input, other)


# Note [dist's gradient]
# ~~~~~~~~~~~~~~~~~~~~~~
# ``dist(x, y, p)`` is the p-norm of ``x - y`` over all elements: its gradient
# is PyTorch's norm_backward of the difference (its sign for p = 1, ``d / out``
# for p = 2, the elements of largest magnitude sharing it for p = inf…), and
# ``y`` takes the opposite.  Where the norm is 0 the gradient is 0, as PyTorch
# masks it, not NaN.
def _dist_grad(g: Tensor, input: Tensor, other: Tensor, out: Tensor, p: Any) -> Tensor:
    diff = input - other
    if p == 0:
        return diff * 0.0
    if p == 1:
        return g * sign(diff)
    if math.isinf(p):
        mask = _abs(diff) == out
        return g * sign(diff) * mask / mask.sum()
    zero = out == 0
    scale = where(zero, 0.0, g / where(zero, 1.0, out) ** (p - 1))
    if p == 2:
        return diff * scale
    return sign(diff) * _abs(diff) ** (p - 1) * scale


@defop(ref=lambda torch: torch.dist,
       vjp=(_dist_grad, lambda g, input, other, out, p: -_dist_grad(g, input, other, out, p)),
       node="DistBackward0", methods=("dist",), promote=True,
       parse=lambda input, other, p=2: ((input, other), {"p": p}),
       samples=lambda rng: [((_r(rng, 3, 4), _r(rng, 3, 4)), {}), ((_r(rng, 3, 1), _r(rng, 4)), {"p": 1}),
                            ((_r(rng, 2, 3), _r(rng, 3)), {"p": 3.0}), ((_r(rng, 5), _r(rng, 5)), {"p": math.inf}),
                            ((_r(rng), _r(rng, 2)), {"p": 0.5}), ((_r(rng, 0, 2), _r(rng, 2)), {})])
def dist(xp, input, other, *, p=2):
    """The ``p``-norm of ``input - other`` (broadcast), over all elements."""
    if input.dtype.kind != "f":
        raise RuntimeError(f"norm(): input dtype should be either floating point or complex. Got "
                           f"{_legacy_name(input.dtype)} instead.")
    err = broadcast_error([input.shape, other.shape])
    if err is not None:
        raise err
    d = xp.abs(input - other)
    if p == 0:
        return xp.asarray(xp.count_nonzero(d), dtype=d.dtype)
    if math.isinf(p):
        return d.max(initial=0) if p > 0 else d.min(initial=math.inf)
    with np.errstate(over="ignore"):
        return xp.sum(d ** p) ** (1.0 / p) if p != 2 else xp.sqrt(xp.sum(d * d))


# -- cross products -----------------------------------------------------------------


def _cross_args(input: Tensor, other: Tensor, dim: int | None = None) -> tuple[tuple, dict]:
    """``torch.cross``'s arguments: its default ``dim`` is the first of size 3 (deprecated, with
    PyTorch's warning), where ``linalg.cross``'s is -1."""
    if dim is None:
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\\nPlease either pass the "
                      "dim explicitly or simply use torch.linalg.cross.\\nThe default value of dim will change to "
                      "agree with that of linalg.cross in a future release.", UserWarning, stacklevel=3)
        shape = np.broadcast_shapes(input.shape, other.shape) if broadcast_error([input.shape, other.shape]) is None \
            else input.shape
        if 3 not in shape:
            raise RuntimeError("no dimension of size 3 in input")
        dim = shape.index(3)
    return (input, other), {"dim": dim}


@defop(ref=lambda torch: torch.linalg.cross,
       vjp=(lambda g, other, dim: _linalg_cross(other, g, dim=dim),
            lambda g, input, dim: _linalg_cross(g, input, dim=dim)),
       node="LinalgCrossBackward0",
       samples=lambda rng: [((_r(rng, 4, 3), _r(rng, 4, 3)), {}), ((_r(rng, 3, 2), _r(rng, 3, 1)), {"dim": 0}),
                            ((_r(rng, 1, 3), _r(rng, 2, 3)), {}), ((_r(rng, 0, 3), _r(rng, 1, 3)), {"dim": -1})])
def _linalg_cross(xp, input, other, *, dim=-1):
    """The cross product of 3-vectors along ``dim`` (``torch.linalg.cross``), broadcast."""
    if input.ndim != other.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    if input.dtype != other.dtype:
        raise RuntimeError(f"expected scalar type {_legacy_name(input.dtype)} but found {_legacy_name(other.dtype)}")
    err = broadcast_error([input.shape, other.shape])
    if err is not None:
        raise err
    shape = np.broadcast_shapes(input.shape, other.shape)
    d = _wrap_dim(dim, len(shape))
    a, b = xp.broadcast_to(input, shape), xp.broadcast_to(other, shape)
    if shape[d] != 3:
        sizes = [t.shape[d - len(shape)] if t.ndim >= len(shape) - d else 1 for t in (input, other)]
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {sizes[0]} and {sizes[1]}")
    return xp.cross(a, b, axis=d)


linalg_cross = _linalg_cross


def cross(input: Tensor, other: Tensor, dim: int | None = None) -> Tensor:
    """``torch.cross``: the cross product along ``dim``, by default the first dimension of
    size 3 (deprecated: ``linalg.cross`` takes the last)."""
    args, attrs = _cross_args(input, other, dim)
    return linalg_cross(*args, **attrs)


# -- products built from products ----------------------------------------------------


def inner(input: Tensor, other: Tensor) -> Tensor:
    """Sum of products over the last dimension of both; a 0-d operand scales the other."""
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    k = input.shape[-1]
    if other.shape[-1] != k:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but got shapes "
                           f"{list(input.shape)} and {list(other.shape)}")
    out = matmul(input.reshape(-1, k), other.reshape(-1, k).mT)
    return out.reshape(*input.shape[:-1], *other.shape[:-1])


def tensordot(a: Tensor, b: Tensor, dims: Any = 2) -> Tensor:
    """Contract ``a``'s dimensions ``dims[0]`` with ``b``'s ``dims[1]`` (an int ``n``: ``a``'s last ``n``
    with ``b``'s first ``n``) as one matrix product."""
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        dims_a, dims_b = list(range(-dims, 0)), list(range(dims))
    else:
        dims_a, dims_b = ([d] if isinstance(d, int) else list(d) for d in dims)
    if len(dims_a) != len(dims_b):
        raise RuntimeError("both dimension lists should have same length")
    wa = [_wrap_dim(d, a.ndim) for d in dims_a]
    wb = [_wrap_dim(d, b.ndim) for d in dims_b]
    for da, db, ia, ib in zip(dims_a, dims_b, wa, wb):
        if a.shape[ia] != b.shape[ib]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size {a.shape[ia]} in dim {da} "
                               f"and second has size {b.shape[ib]} in dim {db}")
    free_a = [d for d in range(a.ndim) if d not in wa]
    free_b = [d for d in range(b.ndim) if d not in wb]
    k = math.prod(a.shape[d] for d in wa)
    left = a.permute(*free_a, *wa).reshape(math.prod(a.shape[d] for d in free_a), k)
    right = b.permute(*wb, *free_b).reshape(k, math.prod(b.shape[d] for d in free_b))
    return mm(left, right).reshape(*(a.shape[d] for d in free_a), *(b.shape[d] for d in free_b))


def _chain_order(shapes: Sequence[tuple[int, ...]]) -> list[list[int]]:
    """The split points of the cheapest parenthesisation of a chain of matrices of ``shapes``
    (the textbook dynamic programme, as ``multi_dot`` uses for three or more)."""
    n = len(shapes)
    p = [shapes[0][0]] + [s[1] for s in shapes]
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf  # type: ignore[call-overload]
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + p[i] * p[k + 1] * p[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def _chain(tensors: Sequence[Tensor], split: list[list[int]], i: int, j: int) -> Tensor:
    if i == j:
        return tensors[i]
    k = split[i][j]
    return mm(_chain(tensors, split, i, k), _chain(tensors, split, k + 1, j))


# The C++ names PyTorch's multi_dot prints for dtypes.
_C_NAMES = {"float32": "float", "float64": "double", "float16": "c10::Half", "int64": "long int", "int32": "int",
            "int16": "short int", "int8": "signed char", "uint8": "unsigned char", "bool": "bool"}


def multi_dot(tensors: Sequence[Tensor]) -> Tensor:
    """The product of two or more matrices, multiplied in the cheapest order; the first may
    be a row vector and the last a column vector given as 1-D tensors (``torch.linalg.multi_dot``)."""
    n = len(tensors)
    if n < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {n}")
    first, last = tensors[0], tensors[-1]
    for t, which in ((first, "first"), (last, "last")):
        if t.ndim not in (1, 2):
            raise RuntimeError(f"multi_dot(): the {which} tensor must be 1D or 2D but got {t.ndim}D")
    for i, t in enumerate(tensors[1:-1], 1):
        if t.ndim != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {t.ndim}D")
    for i, t in enumerate(tensors[1:], 1):
        if t.dtype != first.dtype:
            raise RuntimeError(f"multi_dot(): all tensors must have be the same dtype but tensor 0 is "
                               f"{_C_NAMES.get(first.dtype.name, first.dtype.name)} and tensor {i} "
                               f"{_C_NAMES.get(t.dtype.name, t.dtype.name)}")
    mats = list(tensors)
    if first.ndim == 1:
        mats[0] = first.unsqueeze(0)
    if last.ndim == 1:
        mats[-1] = last.unsqueeze(-1)
    for i in range(n - 1):
        if mats[i].shape[1] != mats[i + 1].shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {i} and {i + 1} with shapes {list(tensors[i].shape)} and "
                               f"{list(tensors[i + 1].shape)} cannot be multiplied")
    out = mm(mats[0], mats[1]) if n == 2 else _chain(mats, _chain_order([m.shape for m in mats]), 0, n - 1)
    if first.ndim == 1:
        out = out.squeeze(0)
    if last.ndim == 1:
        out = out.squeeze(-1)
    return out


def chain_matmul(*matrices: Tensor) -> Tensor:
    """The product of matrices, in the cheapest order (deprecated: use ``linalg.multi_dot``)."""
    warnings.warn("torch.chain_matmul is deprecated and will be removed in a future PyTorch release. Use "
                  "torch.linalg.multi_dot instead, which accepts a list of two or more tensors rather than multiple "
                  "parameters.", UserWarning, stacklevel=2)
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    for m in matrices:
        if m.ndim != 2:
            raise RuntimeError(f"Tensor dimension is {m.ndim}, expected 2 instead.")
    if len(matrices) == 1:
        return matrices[0].clone()
    return multi_dot(matrices)


def matrix_power(A: Tensor, n: int) -> Tensor:
    """``A`` to the integer power ``n`` by repeated squaring; ``n < 0`` raises the inverse, ``n == 0``
    gives identities (whose gradient is 0)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"linalg_matrix_power(): argument 'n' (position 2) must be int, not {type(n).__name__}")
    _square("matrix_power", A._data)
    if n == 0:
        with _backends.on(A.device):
            eye = _backends.array_module(A._data).eye(A.shape[-1], dtype=A._data.dtype)
        return A.masked_fill(Tensor._make(np.ones((), bool)), 0) + Tensor._make(eye)  # A's graph, gradient 0
    if n < 0:
        A, n = inv(A), -n
    if n == 1:
        return A.clone()
    result: Tensor | None = None
    power = A
    while True:  # over the bits of n: O(log n) products
        if n & 1:
            result = power if result is None else matmul(result, power)
        n >>= 1
        if not n:
            return result  # type: ignore[return-value]  # n >= 2 had a bit set
        power = matmul(power, power)


ger = outer  # torch.ger: the deprecated name of outer


# -- einsum -------------------------------------------------------------------------


# Note [einsum subscripts]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# ``_einsum_plan`` turns PyTorch's equation into explicit letters, so that
# numpy's einsum and the gradient (``_einsum_grad``, itself an einsum) see no
# ellipsis and no broadcasting:
# * an ellipsis becomes fresh letters, one per dimension it covers, right
#   aligned across the operands (an operand covering fewer dims takes the last
#   letters), and stands for all of them in the output (first, when the
#   equation has no ``->``), as numpy's broadcasting;
# * a dimension of size 1 under a letter that another operand gives a larger
#   size is broadcast, as PyTorch does: that operand's array is reshaped
#   without it and its subscripts drop the letter (einsum then repeats it
#   along that letter).  Its gradient, computed in the dropped subscripts, is
#   reshaped back to the operand's shape.
# Other size mismatches get PyTorch's errors.


def _einsum_plan(equation: str, shapes: Sequence[tuple[int, ...]]
                 ) -> tuple[list[str], str, dict[str, int]]:
    """``(subs, rhs, sizes)``: each operand's subscripts with broadcast size-1
    dims dropped, the output's, and each letter's size (Note [einsum subscripts])."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    subs = lhs.split(",")
    n = len(shapes)
    if len(subs) != n:
        which = "fewer" if n < len(subs) else "more"
        raise RuntimeError(f"einsum(): {which} operands were provided than specified in the equation")
    for k, s in enumerate(subs):
        rest = s.replace("...", "", 1)
        if "." in rest:
            found = "for which an ellipsis was already found" if "..." in s else "that is not part of any ellipsis"
            raise RuntimeError(f"einsum(): found '.' for operand {k} {found}")
    for i, c in enumerate(equation):
        in_arrow = equation[i:i + 2] == "->" or equation[i - 1:i + 1] == "->"
        if not (c.isascii() and c.isalpha() or c in " ,." or in_arrow):
            raise RuntimeError(f"einsum(): invalid subscript given at index {i} in the equation string, "
                               "subscripts must be in [a-zA-Z]")
    unused = [c for c in "ZYXWVUTSRQPONMLKJIHGFEDCBAzyxwvutsrqponmlkjihgfedcba" if c not in eq]
    covered = [len(shape) - len(s) + 3 for s, shape in zip(subs, shapes) if "..." in s]
    ell = "".join(unused[:max(covered, default=0)])[::-1]
    full = []
    for k, (s, shape) in enumerate(zip(subs, shapes)):
        if "..." in s:
            if len(s) - 3 > len(shape):
                raise RuntimeError(f"einsum(): the number of subscripts in the equation ({len(s) - 3}) is more "
                                   f"than the number of dimensions ({len(shape)}) for operand {k}")
            s = s.replace("...", ell[len(ell) - (len(shape) - len(s) + 3):])
        elif len(s) != len(shape):
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({len(s)}) does not match "
                               f"the number of dimensions ({len(shape)}) for operand {k} and no ellipsis was given")
        full.append(s)
    if arrow:
        rhs = rhs.replace("...", ell)
    else:
        letters = "".join(subs)
        rhs = ell + "".join(sorted(c for c in set(letters) if c.isalpha() and letters.count(c) == 1))
    sizes: dict[str, int] = {}
    for k, (s, shape) in enumerate(zip(full, shapes)):
        own: dict[str, int] = {}
        for c, m in zip(s, shape):
            if own.setdefault(c, m) != m:
                raise RuntimeError(f"einsum(): subscript {c} is repeated for operand {k} but the sizes don't match, "
                                   f"{m} != {own[c]}")
            seen = sizes.setdefault(c, m)
            if seen != m and 1 not in (seen, m) and c in ell:
                raise RuntimeError(f"einsum(): dimension {s.index(c)} covered by ellipsis in operand {k}has size {m} "
                                   f"which does not broadcast with previously seen ellipsis with size {seen} for the "
                                   "respective dimension")  # sic: PyTorch's message lacks the space
            if seen != m and 1 not in (seen, m):
                raise RuntimeError(f"einsum(): subscript {c} has size {m} for operand {k} which does not broadcast "
                                   f"with previously seen size {seen}")
            sizes[c] = seen if m == 1 else m
    kept = ["".join(c for c, m in zip(s, shape) if m == sizes[c]) for s, shape in zip(full, shapes)]
    return kept, rhs, sizes


def _einsum_grad(g: Tensor, tensors: tuple[Tensor, ...], equation: str) -> list[Tensor]:
    """The gradient of operand k is an einsum of the incoming gradient with the
    other operands, written into operand k's subscripts: a letter repeated in
    them (a diagonal) goes through an identity, a letter summed away by operand
    k alone through a vector of ones (both constants, made on ``g``'s device).
    Subscripts are ``_einsum_plan``'s (Note [einsum subscripts])."""
    dt, dev = g._data.dtype, g.device
    subs, rhs, sizes = _einsum_plan(equation, [t.shape for t in tensors])
    kept = [_kept(t, s, sizes) for t, s in zip(tensors, subs)]
    free = [chr(c) for c in range(ord("A"), ord("Z") + 1)] + [chr(c) for c in range(ord("a"), ord("z") + 1)]
    free = [c for c in free if c not in sizes]
    grads = []
    for k, target in enumerate(subs):
        operands = [g] + [t for j, t in enumerate(kept) if j != k]
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
        grad = einsum(",".join(in_subs) + "->" + out_subs, *operands)
        grads.append(grad if grad.shape == tensors[k].shape else grad.reshape(tensors[k].shape))
    return grads


def _kept(t: Any, sub: str, sizes: dict[str, int]) -> Any:
    """Operand ``t`` (a Tensor or an array) without its broadcast size-1 dims."""
    return t if t.ndim == len(sub) else t.reshape(tuple(sizes[c] for c in sub))


_EINSUM_SAMPLES = [("ij,jk->ik", (2, 3), (3, 4)), ("bij,bjk->bik", (2, 2, 3), (2, 3, 4)), ("i,i->", (4,), (4,)),
                   ("ij->ji", (2, 3)), ("ii->i", (3, 3)), ("ij->", (2, 3)), ("bi,bi->b", (3, 4), (3, 4)),
                   ("i,j->ij", (3,), (4,)), ("ii", (3, 3)), ("ij,jk", (2, 3), (3, 2)),
                   ("ij,j,k->ik", (2, 3), (3,), (2,)),
                   # ellipses, broadcast against each other, and size-1 broadcasting (Note [einsum subscripts])
                   ("...ij,...jk->...ik", (2, 1, 2, 3), (3, 3, 2)), ("...i,...i", (2, 3), (4, 1, 3)),
                   ("i...->...", (2, 3, 4)), ("...->...", ()), ("b...,b...->b", (2, 3), (2, 3)),
                   ("ij,ij->ij", (2, 3), (1, 3)), ("...ii->...i", (2, 3, 3)), ("i...j,j->i", (2, 0, 3), (3,))]


@defop(ref=lambda torch: torch.einsum, vjp=_einsum_grad, node="EinsumBackward0", promote=True,
       parse=lambda equation, *operands: (
           tuple(operands[0]) if len(operands) == 1 and isinstance(operands[0], (list, tuple)) else operands,
           {"equation": equation}),
       samples=lambda rng: [((eq, *(_r(rng, *s) for s in shapes)), {}) for eq, *shapes in _EINSUM_SAMPLES])
def _einsum(xp, *tensors, equation):
    """Einstein summation over the operands' subscripts, with PyTorch's ellipsis
    and broadcasting (Note [einsum subscripts])."""
    subs, rhs, sizes = _einsum_plan(equation, [t.shape for t in tensors])
    return xp.einsum(",".join(subs) + "->" + rhs, *(_kept(t, s, sizes) for t, s in zip(tensors, subs)))


einsum = _einsum


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
       node="LinalgSolveExBackward0", work=_product_work,
       samples=lambda rng: [((_r(rng, 3, 3) + 4 * np.eye(3), _r(rng, 3, 2)), {}),
                            ((_r(rng, 3, 3) + 4 * np.eye(3), _r(rng, 3)), {}),
                            ((_r(rng, 2, 3, 3) + 4 * np.eye(3), _r(rng, 2, 3, 4)), {}),
                            ((_r(rng, 2, 3, 3) + 4 * np.eye(3), _r(rng, 3, 1)), {})])
def solve(xp, A, B):
    """The solution X of ``A @ X = B`` (``torch.linalg.solve``), batched and broadcast."""
    _check_float("linalg.solve", A)
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
    except np.linalg.LinAlgError:  # on the error path only: which matrix, from the pivots
        prefix, _ = first_failure(A.shape, lu_kernel(xp, A)[2]) or ("", 0)
        raise LinAlgError(f"torch.linalg.solve: {prefix}The solver failed because the input matrix is "
                          "singular.") from None


@defop(ref=lambda torch: torch.linalg.inv, vjp=lambda g, out: -(out.mT @ g @ out.mT),
       node="LinalgInvExBackward0", work=_product_work,
       samples=lambda rng: [((_r(rng, 3, 3) + 4 * np.eye(3),), {}), ((_r(rng, 2, 3, 3) + 4 * np.eye(3),), {}),
                            ((_r(rng, 1, 1) + 3,), {}), ((_r(rng, 0, 2, 2),), {})])
def inv(xp, A):
    """The inverse of a square matrix (or batch of them), ``torch.linalg.inv``."""
    _square("inv", A)
    _check_float("linalg.inv", A)
    try:
        return xp.linalg.inv(A)
    except np.linalg.LinAlgError:
        raise singular_error("linalg.inv", A, lu_kernel(xp, A)[2]) from None


def singular_error(name: str, A: Any, info: Any) -> LinAlgError:
    """PyTorch's error for inverting the singular matrices of ``A`` (``info``: the first zero
    pivot of each, 1-based, or 0), naming the first failing matrix and pivot."""
    prefix, k = first_failure(A.shape, info) or ("", 1)
    return LinAlgError(f"{name}: {prefix}The diagonal element {k} is zero, the inversion could not be completed "
                       "because the input matrix is singular.")


# Note [LU in numpy]
# ~~~~~~~~~~~~~~~~~~
# numpy has no LU factorisation (its solve and inv call LAPACK's getrf inside
# and keep the factors to themselves), and agrad has no SciPy.  ``lu_kernel``
# is getrf's algorithm, partial pivoting by the largest magnitude in the
# column: one pass per column, each vectorised over the whole batch and the
# trailing block, so its Python loop runs min(m, n) times whatever the batch.
# It gives PyTorch's pivots and factors (up to rounding, which may pick
# another of two nearly equal pivots), and the ``info`` of its error messages:
# the 1-based index of the first exactly zero pivot.
def lu_kernel(xp: Any, A: Any) -> tuple[Any, Any, Any]:
    """``(LU, pivots, info)`` of each matrix of ``A`` (``..., m, n``), as LAPACK's getrf:
    ``LU`` holds U and the unit-diagonal L below it, ``pivots`` the 1-based rows swapped
    with each row (int32), ``info`` the first zero pivot (1-based) or 0."""
    *batch, m, n = A.shape
    k = min(m, n)
    LU = A.reshape(math.prod(batch), m, n).astype(A.dtype if A.dtype.kind == "f" else np.float64, copy=True)
    rows = xp.arange(LU.shape[0])
    pivots = xp.empty((LU.shape[0], k), dtype=np.int32)
    info = xp.zeros(LU.shape[0], dtype=np.int32)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        for j in range(k):
            p = j + xp.argmax(xp.abs(LU[:, j:, j]), axis=1)
            pivots[:, j] = p + 1
            row = LU[rows, j].copy()
            LU[rows, j] = LU[rows, p]
            LU[rows, p] = row
            pivot = LU[:, j, j]
            zero = pivot == 0
            info = xp.where((info == 0) & zero, j + 1, info)
            LU[:, j + 1:, j] /= xp.where(zero, 1, pivot)[:, None]
            LU[:, j + 1:, j + 1:] -= LU[:, j + 1:, j, None] * LU[:, j, None, j + 1:]
    return LU.reshape(*batch, m, n), pivots.reshape(*batch, k), info.reshape(batch)
