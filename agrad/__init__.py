"""agrad: reverse-mode autograd whose backward pass is a cooperative asyncio program.

PyTorch's autograd API with ``await`` added:

    >>> import asyncio
    >>> import agrad
    >>> x = agrad.tensor([1.0, 2.0], requires_grad=True)
    >>> async def step():
    ...     loss = (x * x).sum()
    ...     await loss.backward()        # in async code
    >>> asyncio.run(step())
    >>> x.grad
    tensor([2., 4.])
    >>> (x * x).sum().backward_sync()    # in a script or a thread
    >>> x.grad
    tensor([4., 8.])
"""

import builtins

from agrad import (
    _blas,
    autograd,
    cuda,
    linalg,
    nn,
    random,
    utils,
)
from agrad._blas import get_num_threads, set_num_threads
from agrad._creation import (
    Generator,
    arange,
    as_tensor,
    empty,
    empty_like,
    eye,
    from_numpy,
    full,
    full_like,
    linspace,
    manual_seed,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    tensor,
    zeros,
    zeros_like,
)
from agrad._device import device
from agrad._dtype import (
    bool,
    dtype,
    float16,
    float32,
    float64,
    get_default_dtype,
    int8,
    int16,
    int32,
    int64,
    set_default_dtype,
    uint8,
)
from agrad._engine._cooperative import cooperative
from agrad._engine._options import get_num_interop_threads, set_num_interop_threads
from agrad._grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)
from agrad._graph._anomaly import is_anomaly_check_nan_enabled, is_anomaly_enabled
from agrad._ops import (
    _conv,
    _decompositions,
    _elementwise,
    _linalg,
    _pointwise,
    _pool,
    _reductions,
    _scatter,
    _shape,
    _sorting,
    _structure,
)
from agrad._ops._conv import *  # noqa: F403
from agrad._ops._decompositions import *  # noqa: F403
from agrad._ops._elementwise import *  # noqa: F403
from agrad._ops._linalg import *  # noqa: F403
from agrad._ops._pointwise import *  # noqa: F403
from agrad._ops._pool import *  # noqa: F403
from agrad._ops._reductions import *  # noqa: F403
from agrad._ops._scatter import *  # noqa: F403
from agrad._ops._shape import *  # noqa: F403
from agrad._ops._sorting import *  # noqa: F403
from agrad._ops._structure import *  # noqa: F403
from agrad._tensor import Tensor
from agrad.random import get_rng_state, set_rng_state

_blas.apply_default()  # once, process-wide: Note [BLAS threads]

float = float32  # noqa: A001 - torch.float
double = float64
half = float16
long = int64
int = int32  # noqa: A001 - torch.int

__version__ = "0.1.0"


def is_tensor(obj: object) -> builtins.bool:
    """Whether ``obj`` is an agrad Tensor."""
    return isinstance(obj, Tensor)


def softmax(input: Tensor, dim: builtins.int) -> Tensor:
    """Normalised exponentials along ``dim`` (``agrad.nn.functional.softmax``)."""
    return nn.functional.softmax(input, dim)


__all__ = [
    "Tensor", "tensor", "as_tensor", "from_numpy", "zeros", "ones", "full", "empty", "arange", "linspace", "eye",
    "rand", "randn", "randint", "zeros_like", "ones_like", "full_like", "empty_like", "rand_like", "randn_like",
    "manual_seed", "get_rng_state", "set_rng_state", "Generator", "device", "dtype", "float16", "float32",
    "float64", "int8", "int16", "int32", "int64", "uint8", "bool", "float", "double", "half", "long", "int",
    "get_default_dtype", "set_default_dtype",
    "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode", "is_inference_mode_enabled",
    "is_anomaly_enabled", "is_anomaly_check_nan_enabled", "softmax", "is_tensor",
    "get_num_threads", "set_num_threads", "get_num_interop_threads", "set_num_interop_threads", "cooperative",
    "autograd", "cuda", "linalg", "nn", "random", "utils",
] + [
    *_elementwise.__all__, *_linalg.__all__, *_reductions.__all__, *_shape.__all__, *_pointwise.__all__,
    *_sorting.__all__, *_scatter.__all__, *_structure.__all__, *_conv.__all__, *_pool.__all__,
    *_decompositions.__all__,
]
