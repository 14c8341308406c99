"""PyTorch's everyday surface, group by group, and how much of it agrad has.

Each group is a set of names read from torch itself (so the denominators
follow the installed torch, 2.13) and the agrad namespace where the same
names must live.  :data:`REQUIRED` lists, per group, the names agrad must
have: a test fails when one is missing.  :data:`PENDING` lists names the
surface issue asks for that agrad does not have yet, each with why; a test
fails when one of them appears (it then moves to ``REQUIRED``), so neither
list goes stale.

Run as a script to print the coverage table::

    python -m tests.api.torch_surface
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import agrad


def _functions(module: Any, names: list[str]) -> set[str]:
    """The public functions among ``names`` of ``module`` (no classes, modules or private names)."""
    out = set()
    for n in names:
        obj = getattr(module, n, None)
        if n.startswith("_") or not callable(obj) or inspect.isclass(obj) or isinstance(obj, types.ModuleType):
            continue
        out.add(n)
    return out


# Python's operator protocol, as far as a tensor implements it.
_OPERATORS = {
    f"__{p}{op}__"
    for op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor",
               "lshift", "rshift")
    for p in ("", "r", "i")
} | {
    f"__{op}__" for op in ("neg", "pos", "abs", "invert", "eq", "ne", "lt", "le", "gt", "ge", "getitem",
                           "setitem", "len", "iter", "bool", "float", "int", "index", "complex", "contains",
                           "reversed")
}

# torch.nn.functional's helpers that are not functions a model calls.
_F_INTERNALS = {"Optional", "boolean_dispatch", "assert_int_or_pair", "handle_torch_function", "has_torch_function",
                "has_torch_function_unary", "has_torch_function_variadic"}

# Factories and utilities of ``torch.*`` a script uses besides the ops.
_FACTORIES = """
tensor as_tensor asarray from_numpy zeros ones full empty zeros_like ones_like full_like empty_like empty_strided
rand randn randint rand_like randn_like randint_like randperm normal bernoulli multinomial poisson arange linspace
logspace eye scalar_tensor manual_seed seed initial_seed get_rng_state set_rng_state Generator save load finfo iinfo
meshgrid Size set_printoptions set_default_device get_default_device set_default_dtype get_default_dtype is_tensor
numel is_floating_point is_complex is_nonzero promote_types result_type can_cast typename device dtype no_grad
enable_grad set_grad_enabled is_grad_enabled inference_mode is_inference_mode_enabled get_num_threads
set_num_threads get_num_interop_threads set_num_interop_threads broadcast_shapes autograd nn linalg cuda random
utils
""".split()

# torch's dtypes a program names (the quantized, bit and sub-byte types left out).
_DTYPES = """
float16 float32 float64 bfloat16 complex64 complex128 int8 int16 int32 int64 uint8 bool half float double long int
short cfloat cdouble
""".split()


@dataclass(frozen=True)
class Group:
    """One row of the coverage table: torch's names and where agrad keeps them."""

    name: str
    torch_names: Callable[[Any], set[str]]
    agrad_namespace: Callable[[], Any]


GROUPS = [
    Group("torch.* functions", lambda torch: _functions(torch, torch.__all__) - set(_FACTORIES), lambda: agrad),
    Group("torch.* factories and utilities", lambda torch: {n for n in _FACTORIES if hasattr(torch, n)},
          lambda: agrad),
    Group("Tensor methods and properties", lambda torch: {n for n in dir(torch.Tensor) if not n.startswith("_")},
          lambda: agrad.Tensor),
    Group("operators", lambda torch: {n for n in dir(torch.Tensor) if n in _OPERATORS}, lambda: agrad.Tensor),
    Group("torch.nn.functional", lambda torch: _functions(torch.nn.functional, dir(torch.nn.functional))
          - _F_INTERNALS, lambda: agrad.nn.functional),
    Group("torch.linalg", lambda torch: _functions(torch.linalg, dir(torch.linalg)), lambda: agrad.linalg),
    Group("dtypes", lambda torch: {n for n in _DTYPES if hasattr(torch, n)}, lambda: agrad),
]


def _names(text: str) -> set[str]:
    return set(text.split())


# Names agrad must have, per group: the surface issue's examples and what was
# added with them.
REQUIRED: dict[str, set[str]] = {
    "torch.* functions": _names("""
        abs add addmm all allclose amax amin any argmax argmin argsort bmm broadcast_to cat ceil chunk clamp clip
        clone cos cumsum diagonal div dot einsum eq erf exp expm1 flatten flip floor gather ge gt index_select
        isclose le log log1p log2 log_softmax logical_and logical_not logical_or logical_xor logsumexp lt masked_fill
        matmul max maximum mean min minimum mm mul narrow ne neg norm outer permute pow prod reciprocal relu reshape
        roll round rsqrt scatter_add select sigmoid sign sin softmax split sqrt squeeze stack std std_mean sub sum
        tan tanh tile transpose unbind unsqueeze var var_mean where bitwise_not
    """),
    "torch.* factories and utilities": _names("""
        tensor as_tensor from_numpy zeros ones full empty zeros_like ones_like full_like empty_like rand randn
        randint rand_like randn_like arange linspace eye manual_seed get_rng_state set_rng_state Generator
        set_default_dtype get_default_dtype is_tensor device dtype no_grad enable_grad set_grad_enabled
        is_grad_enabled inference_mode is_inference_mode_enabled get_num_threads set_num_threads
        get_num_interop_threads set_num_interop_threads autograd nn linalg cuda random utils
    """),
    "Tensor methods and properties": _names("""
        backward grad requires_grad requires_grad_ grad_fn is_leaf retain_grad retains_grad detach detach_ item
        tolist numpy shape size dim ndim numel dtype device to cpu float double long int bool half clone view
        reshape expand expand_as permute transpose squeeze unsqueeze flatten contiguous is_contiguous view_as
        sum mean max min argmax argmin softmax log_softmax clamp clamp_ masked_fill masked_fill_ gather
        index_select register_hook zero_ fill_ copy_ add_ mul_ mT T unbind
    """),
    "operators": _names("""
        __add__ __radd__ __iadd__ __sub__ __rsub__ __isub__ __mul__ __rmul__ __imul__ __truediv__ __rtruediv__
        __itruediv__ __pow__ __rpow__ __ipow__ __matmul__ __rmatmul__ __neg__ __abs__ __invert__ __eq__ __ne__
        __lt__ __le__ __gt__ __ge__ __getitem__ __setitem__ __len__ __iter__ __bool__ __float__ __int__ __index__
    """),
    "torch.nn.functional": _names("""
        relu sigmoid tanh softmax log_softmax linear mse_loss nll_loss cross_entropy l1_loss smooth_l1_loss
        huber_loss binary_cross_entropy binary_cross_entropy_with_logits kl_div leaky_relu elu gelu silu softplus
        hardtanh relu6 dropout layer_norm embedding pad
    """),
    "torch.linalg": _names("vector_norm solve inv norm"),
    "dtypes": _names("float16 float32 float64 int8 int16 int32 int64 uint8 bool half float double long int"),
}

# Names the surface issue asks for that agrad does not have yet, with why.
_COMPLEX = ("complex dtypes are not in agrad yet: PyTorch's conjugate-Wirtinger gradients need every op to "
            "declare whether it is holomorphic, the engine to route complex gradients to real inputs by their real "
            "part, gradcheck to perturb both parts, and the printer to format them; a change of its own")
_SAVE_LOAD = ("agrad.save/agrad.load come with agrad.nn's state dicts (issue 18), which fixes their format: "
              "safetensors for tensors, JSON for the rest, never pickle")
PENDING: dict[str, dict[str, str]] = {
    "torch.* factories and utilities": {"save": _SAVE_LOAD, "load": _SAVE_LOAD},
    "dtypes": {"complex64": _COMPLEX, "complex128": _COMPLEX, "cfloat": _COMPLEX, "cdouble": _COMPLEX},
}


def coverage(torch: Any) -> list[tuple[str, int, int, list[str]]]:
    """Per group: (name, agrad has, torch has, required names agrad lacks)."""
    rows = []
    for g in GROUPS:
        names = g.torch_names(torch)
        ns = g.agrad_namespace()
        have = {n for n in names if hasattr(ns, n)}
        missing = sorted(n for n in REQUIRED.get(g.name, set()) if not hasattr(ns, n))
        rows.append((g.name, len(have), len(names), missing))
    return rows


def table(torch: Any) -> str:
    lines = [f"{'group':<34} {'agrad':>6} {'torch':>6} {'share':>6}"]
    for name, have, total, _ in coverage(torch):
        lines.append(f"{name:<34} {have:>6} {total:>6} {have / total:>6.0%}")
    return "\n".join(lines)


if __name__ == "__main__":
    import torch as _torch

    print(f"agrad against torch {_torch.__version__}")
    print(table(_torch))
