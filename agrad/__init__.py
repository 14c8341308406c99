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
    func,
    linalg,
    nn,
    optim,
    random,
    serialization,
    utils,
)
from agrad._blas import get_num_threads, set_num_threads
from agrad._creation import (
    Generator,
    arange,
    as_tensor,
    asarray,
    bartlett_window,
    blackman_window,
    empty,
    empty_like,
    empty_strided,
    eye,
    from_numpy,
    full,
    full_like,
    get_default_device,
    hamming_window,
    hann_window,
    initial_seed,
    is_complex,
    is_floating_point,
    is_nonzero,
    is_same_size,
    is_storage,
    kaiser_window,
    linspace,
    logspace,
    manual_seed,
    multinomial,
    numel,
    ones,
    ones_like,
    rand,
    rand_like,
    randint,
    randint_like,
    randn,
    randn_like,
    randperm,
    range,
    result_type,
    scalar_tensor,
    seed,
    set_default_device,
    tensor,
    typename,
    zeros,
    zeros_like,
)
from agrad._device import device
from agrad._dtype import (
    bfloat16,
    bool,
    can_cast,
    dtype,
    finfo,
    float16,
    float32,
    float64,
    get_default_dtype,
    iinfo,
    int8,
    int16,
    int32,
    int64,
    promote_types,
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
from agrad._misuse import BlockingCallWarning, NotAwaitedWarning
from agrad._ops import (
    _aliases,
    _conv,
    _decompositions,
    _elementwise,
    _linalg,
    _numeric,
    _pointwise,
    _pool,
    _reductions,
    _scatter,
    _shape,
    _sorting,
    _structure,
)
from agrad._ops._aliases import *  # noqa: F403
from agrad._ops._conv import *  # noqa: F403
from agrad._ops._decompositions import *  # noqa: F403
from agrad._ops._elementwise import *  # noqa: F403
from agrad._ops._linalg import *  # noqa: F403
from agrad._ops._numeric import *  # noqa: F403
from agrad._ops._pointwise import *  # noqa: F403
from agrad._ops._pool import *  # noqa: F403
from agrad._ops._random import bernoulli, normal, poisson
from agrad._ops._reductions import *  # noqa: F403
from agrad._ops._scatter import *  # noqa: F403
from agrad._ops._shape import *  # noqa: F403
from agrad._ops._sorting import *  # noqa: F403
from agrad._ops._structure import *  # noqa: F403
from agrad._repr import set_printoptions
from agrad._size import Size
from agrad._tensor import Tensor
from agrad.nn import _toplevel
from agrad.nn._distance import cdist
from agrad.nn._toplevel import *  # noqa: F403
from agrad.nn.functional import (  # the functions torch also has at top level, with the same signature
    bilinear,
    celu,
    celu_,
    cosine_similarity,
    hardshrink,
    pairwise_distance,
    pdist,
    prelu,
    rrelu,
    rrelu_,
    selu,
    selu_,
    threshold,
    threshold_,
)
from agrad.random import get_rng_state, set_rng_state
from agrad.serialization import load, save

_blas.apply_default()  # once, process-wide: Note [BLAS threads]

float = float32  # noqa: A001 - torch.float
double = float64
half = float16
long = int64
int = int32  # noqa: A001 - torch.int
short = int16

__version__ = "0.1.0"


def is_tensor(obj: object) -> builtins.bool:
    """Whether ``obj`` is an agrad Tensor."""
    return isinstance(obj, Tensor)


def softmax(input: Tensor, dim: builtins.int) -> Tensor:
    """Normalised exponentials along ``dim`` (``agrad.nn.functional.softmax``)."""
    return nn.functional.softmax(input, dim)


__all__ = [
    "Tensor", "Size", "tensor", "as_tensor", "from_numpy", "zeros", "ones", "full", "empty", "arange", "linspace",
    "eye",
    "rand", "randn", "randint", "zeros_like", "ones_like", "full_like", "empty_like", "rand_like", "randn_like",
    "manual_seed", "get_rng_state", "set_rng_state", "Generator", "device", "dtype", "float16", "float32",
    "float64", "int8", "int16", "int32", "int64", "uint8", "bool", "float", "double", "half", "long", "int",
    "get_default_dtype", "set_default_dtype", "bfloat16", "short", "finfo", "iinfo", "promote_types", "can_cast",
    "set_printoptions", "asarray", "empty_strided", "logspace", "range", "scalar_tensor", "randperm",
    "randint_like", "multinomial", "normal", "bernoulli", "poisson", "hann_window", "hamming_window",
    "blackman_window", "bartlett_window", "kaiser_window", "seed", "initial_seed", "set_default_device",
    "get_default_device", "numel", "is_floating_point", "is_complex", "is_nonzero", "is_same_size", "result_type",
    "typename", "is_storage",
    "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode", "is_inference_mode_enabled",
    "is_anomaly_enabled", "is_anomaly_check_nan_enabled", "softmax", "is_tensor", "cdist",
    "bilinear", "celu", "celu_", "cosine_similarity", "hardshrink", "pairwise_distance",
    "pdist", "prelu", "rrelu", "rrelu_", "selu", "selu_", "threshold", "threshold_",
    "get_num_threads", "set_num_threads", "get_num_interop_threads", "set_num_interop_threads", "cooperative",
    "NotAwaitedWarning", "BlockingCallWarning",
    "autograd", "cuda", "func", "linalg", "nn", "optim", "random", "utils", "serialization", "save", "load",
] + [
    *_elementwise.__all__, *_linalg.__all__, *_reductions.__all__, *_shape.__all__, *_pointwise.__all__,
    *_sorting.__all__, *_scatter.__all__, *_structure.__all__, *_conv.__all__, *_pool.__all__,
    *_decompositions.__all__, *_aliases.__all__, *_numeric.__all__, *_toplevel.__all__,
]
