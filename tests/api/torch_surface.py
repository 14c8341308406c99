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
    Group("torch.nn", lambda torch: {n for n in dir(torch.nn) if not n.startswith("_")}, lambda: agrad.nn),
    Group("torch.nn.init", lambda torch: set(torch.nn.init.__all__), lambda: agrad.nn.init),
    Group("torch.nn.utils", lambda torch: set(torch.nn.utils.__all__), lambda: agrad.nn.utils),
    Group("torch.optim", lambda torch: set(torch.optim.__all__), lambda: agrad.optim),
    Group("torch.optim.lr_scheduler", lambda torch: set(torch.optim.lr_scheduler.__all__),
          lambda: agrad.optim.lr_scheduler),
    Group("torch.func", lambda torch: set(torch.func.__all__), lambda: agrad.func),
]


def _names(text: str) -> set[str]:
    return set(text.split())


# Names agrad must have, per group: every name of the group agrad has (the
# surface issue's examples and everything added with them), so that none is
# lost.  Regenerate after adding names: the coverage only grows.
REQUIRED: dict[str, set[str]] = {
    "torch.* functions": _names("""
        abs abs_ acos acos_ acosh acosh_ adaptive_avg_pool1d adaptive_max_pool1d add addbmm addcdiv addcmul
        addmm addmv addmv_ addr adjoint all allclose alpha_dropout alpha_dropout_ amax amin aminmax angle
        any arccos arccos_ arccosh arccosh_ arcsin arcsin_ arcsinh arcsinh_ arctan arctan2 arctan_ arctanh
        arctanh_ are_deterministic_algorithms_enabled argmax argmin argsort argwhere asin asin_ asinh asinh_
        atan atan2 atan_ atanh atanh_ atleast_1d atleast_2d atleast_3d avg_pool1d baddbmm bartlett_window
        batch_norm bilinear binary_cross_entropy_with_logits bincount bitwise_and bitwise_left_shift
        bitwise_not bitwise_or bitwise_right_shift bitwise_xor blackman_window block_diag bmm
        broadcast_tensors broadcast_to bucketize cartesian_prod cat cdist ceil ceil_ celu celu_ chain_matmul
        channel_shuffle cholesky cholesky_inverse cholesky_solve chunk clamp clamp_ clamp_max clamp_max_
        clamp_min clamp_min_ clip clip_ clone column_stack combinations concat concatenate conj
        conj_physical conj_physical_ constant_pad_nd conv1d conv2d conv3d conv_transpose1d conv_transpose2d
        conv_transpose3d convolution copysign corrcoef cos cos_ cosh cosh_ cosine_embedding_loss
        cosine_similarity count_nonzero cov cross ctc_loss cummax cummin cumprod cumsum cumulative_trapezoid
        deg2rad deg2rad_ det detach detach_ diag diag_embed diagflat diagonal diagonal_scatter diff digamma
        dist div divide dot dropout dropout_ dsplit dstack einsum embedding eq equal erf erf_ erfc erfc_
        erfinv exp exp2 exp2_ exp_ expm1 expm1_ feature_alpha_dropout feature_alpha_dropout_ feature_dropout
        feature_dropout_ fill fill_ fix fix_ flatten flip fliplr flipud float_power floor floor_
        floor_divide fmax fmin fmod frac frac_ frexp frobenius_norm gather gcd gcd_ ge ger
        get_deterministic_debug_mode get_device get_float32_matmul_precision gradient greater greater_equal
        group_norm gt hamming_window hann_window hardshrink heaviside hinge_embedding_loss histc histogram
        hsplit hstack hypot i0 i0_ imag index_add index_copy index_fill index_put index_put_ index_reduce
        index_select inner instance_norm inverse is_anomaly_check_nan_enabled is_anomaly_enabled is_conj
        is_deterministic_algorithms_warn_only_enabled is_inference is_neg is_same_size is_signed is_storage
        is_warn_always_enabled isclose isfinite isin isinf isnan isneginf isposinf isreal kaiser_window
        kl_div kron kthvalue layer_norm lcm lcm_ ldexp ldexp_ le lerp less less_equal lgamma log log10
        log10_ log1p log1p_ log2 log2_ log_ log_softmax logaddexp logaddexp2 logcumsumexp logdet logical_and
        logical_not logical_or logical_xor logit logit_ logsumexp lt lu_solve margin_ranking_loss
        masked_fill masked_scatter masked_select matmul matrix_exp matrix_power max max_pool1d
        max_pool1d_with_indices max_pool2d max_pool3d maximum mean median min minimum mm mode moveaxis
        movedim msort mul multiply mv mvlgamma nan_to_num nan_to_num_ nanmean nanmedian nanquantile nansum
        narrow ne neg neg_ negative negative_ nextafter nonzero norm not_equal nuclear_norm outer
        pairwise_distance pdist permute pinverse pixel_shuffle pixel_unshuffle poisson_nll_loss polygamma
        positive pow prelu prod put qr quantile rad2deg rad2deg_ range ravel real reciprocal reciprocal_
        relu relu_ remainder renorm repeat_interleave reshape resolve_conj resolve_neg rms_norm roll rot90
        round round_ row_stack rrelu rrelu_ rsqrt rsqrt_ rsub scatter scatter_add scatter_reduce
        searchsorted select select_scatter selu selu_ set_anomaly_enabled set_deterministic_debug_mode
        set_float32_matmul_precision set_flush_denormal set_warn_always sgn sigmoid sigmoid_ sign signbit
        sin sin_ sinc sinc_ sinh sinh_ slice_scatter slogdet softmax sort split split_with_sizes sqrt sqrt_
        square square_ squeeze stack std std_mean sub subtract sum svd swapaxes swapdims t take
        take_along_dim tan tan_ tanh tanh_ tensor_split tensordot threshold threshold_ tile topk trace
        transpose trapezoid trapz triangular_solve tril tril_indices triplet_margin_loss triu triu_indices
        true_divide trunc trunc_ unbind unflatten unique_consecutive unravel_index unsafe_chunk unsafe_split
        unsafe_split_with_sizes unsqueeze use_deterministic_algorithms vander var var_mean vdot vsplit
        vstack where xlogy xlogy_ zero_
    """),
    "torch.* factories and utilities": _names("""
        Generator Size arange as_tensor asarray autograd bernoulli broadcast_shapes can_cast cuda device
        dtype empty empty_like empty_strided enable_grad eye finfo from_numpy full full_like
        get_default_device get_default_dtype get_num_interop_threads get_num_threads get_rng_state iinfo
        inference_mode initial_seed is_complex is_floating_point is_grad_enabled is_inference_mode_enabled
        is_nonzero is_tensor linalg linspace load logspace manual_seed meshgrid multinomial nn no_grad
        normal numel ones ones_like poisson promote_types rand rand_like randint randint_like randn
        randn_like random randperm result_type save scalar_tensor seed set_default_device set_default_dtype
        set_grad_enabled set_num_interop_threads set_num_threads set_printoptions set_rng_state tensor
        typename utils zeros zeros_like
    """),
    "Tensor methods and properties": _names("""
        H T abs abs_ absolute absolute_ acos acos_ acosh acosh_ add add_ addbmm addbmm_ addcdiv addcdiv_
        addcmul addcmul_ addmm addmm_ addmv addmv_ addr addr_ adjoint all allclose amax amin aminmax angle
        any apply_ arccos arccos_ arccosh arccosh_ arcsin arcsin_ arcsinh arcsinh_ arctan arctan2 arctan2_
        arctan_ arctanh arctanh_ argmax argmin argsort argwhere asin asin_ asinh asinh_ atan atan2 atan2_
        atan_ atanh atanh_ backward baddbmm baddbmm_ bernoulli bernoulli_ bfloat16 bincount bitwise_and
        bitwise_and_ bitwise_left_shift bitwise_left_shift_ bitwise_not bitwise_not_ bitwise_or bitwise_or_
        bitwise_right_shift bitwise_right_shift_ bitwise_xor bitwise_xor_ bmm bool broadcast_to byte cauchy_
        ceil ceil_ char cholesky cholesky_inverse cholesky_solve chunk clamp clamp_ clamp_max clamp_max_
        clamp_min clamp_min_ clip clip_ clone conj conj_physical conj_physical_ contiguous copy_ copysign
        copysign_ corrcoef cos cos_ cosh cosh_ count_nonzero cov cpu cross cuda cummax cummin cumprod
        cumprod_ cumsum cumsum_ data data_ptr deg2rad deg2rad_ det detach detach_ device diag diag_embed
        diagflat diagonal diagonal_scatter diff digamma digamma_ dim dim_order dist div div_ divide divide_
        dot double dsplit dtype eig element_size eq eq_ equal erf erf_ erfc erfc_ erfinv erfinv_ exp exp2
        exp2_ exp_ expand expand_as expm1 expm1_ exponential_ fill_ fill_diagonal_ fix fix_ flatten flip
        fliplr flipud float float_power float_power_ floor floor_ floor_divide floor_divide_ fmax fmin fmod
        fmod_ frac frac_ frexp gather gcd gcd_ ge ge_ geometric_ ger get_device grad grad_fn greater
        greater_ greater_equal greater_equal_ gt gt_ half heaviside heaviside_ histc histogram hsplit hypot
        hypot_ i0 i0_ imag index_add index_add_ index_copy index_copy_ index_fill index_fill_ index_put
        index_put_ index_reduce index_reduce_ index_select inner int inverse is_complex is_conj
        is_contiguous is_cpu is_cuda is_floating_point is_inference is_leaf is_neg is_nonzero is_same_size
        is_signed isclose isfinite isinf isnan isneginf isposinf isreal item itemsize kron kthvalue lcm lcm_
        ldexp ldexp_ le le_ lerp lerp_ less less_ less_equal less_equal_ lgamma lgamma_ log log10 log10_
        log1p log1p_ log2 log2_ log_ log_normal_ log_softmax logaddexp logaddexp2 logcumsumexp logdet
        logical_and logical_and_ logical_not logical_not_ logical_or logical_or_ logical_xor logical_xor_
        logit logit_ logsumexp long lstsq lt lt_ lu lu_solve mH mT map_ masked_fill masked_fill_
        masked_scatter masked_scatter_ masked_select matmul matrix_exp matrix_power max maximum mean median
        min minimum mm mode moveaxis movedim msort mul mul_ multinomial multiply multiply_ mv mvlgamma
        mvlgamma_ nan_to_num nan_to_num_ nanmean nanmedian nanquantile nansum narrow nbytes ndim ndimension
        ne ne_ neg neg_ negative negative_ nelement new_empty new_full new_ones new_tensor new_zeros
        nextafter nextafter_ nonzero norm normal_ not_equal not_equal_ numel numpy outer output_nr permute
        pinverse polygamma polygamma_ positive pow pow_ prod put put_ qr quantile rad2deg rad2deg_ random_
        ravel real reciprocal reciprocal_ register_hook register_post_accumulate_grad_hook relu relu_
        remainder remainder_ renorm renorm_ repeat repeat_interleave requires_grad requires_grad_ reshape
        reshape_as resolve_conj resolve_neg retain_grad retains_grad roll rot90 round round_ rsqrt rsqrt_
        scatter scatter_ scatter_add scatter_add_ scatter_reduce scatter_reduce_ select select_scatter sgn
        sgn_ shape short sigmoid sigmoid_ sign sign_ signbit sin sin_ sinc sinc_ sinh sinh_ size
        slice_scatter slogdet softmax solve sort split split_with_sizes sqrt sqrt_ square square_ squeeze
        squeeze_ std storage_offset stride sub sub_ subtract subtract_ sum sum_to_size svd swapaxes
        swapaxes_ swapdims swapdims_ symeig t t_ take take_along_dim tan tan_ tanh tanh_ tensor_split tile
        to tolist topk trace transpose transpose_ triangular_solve tril tril_ triu triu_ true_divide
        true_divide_ trunc trunc_ type type_as unbind unflatten unfold uniform_ unique unique_consecutive
        unsafe_chunk unsafe_split unsafe_split_with_sizes unsqueeze unsqueeze_ var vdot view view_as vsplit
        where xlogy xlogy_ zero_
    """),
    "operators": _names("""
        __abs__ __add__ __and__ __bool__ __complex__ __contains__ __eq__ __float__ __floordiv__ __ge__
        __getitem__ __gt__ __iadd__ __iand__ __ifloordiv__ __ilshift__ __imod__ __imul__ __index__ __int__
        __invert__ __ior__ __ipow__ __irshift__ __isub__ __iter__ __itruediv__ __ixor__ __le__ __len__
        __lshift__ __lt__ __matmul__ __mod__ __mul__ __ne__ __neg__ __or__ __pos__ __pow__ __radd__ __rand__
        __reversed__ __rfloordiv__ __rlshift__ __rmatmul__ __rmod__ __rmul__ __ror__ __rpow__ __rrshift__
        __rshift__ __rsub__ __rtruediv__ __rxor__ __setitem__ __sub__ __truediv__ __xor__
    """),
    "torch.nn.functional": _names("""
        adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d adaptive_max_pool1d
        adaptive_max_pool1d_with_indices adaptive_max_pool2d adaptive_max_pool2d_with_indices
        adaptive_max_pool3d adaptive_max_pool3d_with_indices alpha_dropout avg_pool1d avg_pool2d avg_pool3d
        batch_norm bilinear binary_cross_entropy binary_cross_entropy_with_logits celu celu_ channel_shuffle
        conv1d conv2d conv3d conv_transpose1d conv_transpose2d conv_transpose3d cosine_embedding_loss
        cosine_similarity cross_entropy ctc_loss dropout dropout1d dropout2d dropout3d elu elu_ embedding
        embedding_bag feature_alpha_dropout fold gaussian_nll_loss gelu glu group_norm gumbel_softmax
        hardshrink hardsigmoid hardswish hardtanh hardtanh_ hinge_embedding_loss huber_loss instance_norm
        interpolate kl_div l1_loss layer_norm leaky_relu leaky_relu_ linear local_response_norm log_softmax
        logsigmoid lp_pool1d lp_pool2d lp_pool3d margin_ranking_loss max_pool1d max_pool1d_with_indices
        max_pool2d max_pool2d_with_indices max_pool3d max_pool3d_with_indices max_unpool1d max_unpool2d
        max_unpool3d mish mse_loss multi_head_attention_forward multi_margin_loss multilabel_margin_loss
        multilabel_soft_margin_loss nll_loss normalize one_hot pad pairwise_distance pdist pixel_shuffle
        pixel_unshuffle poisson_nll_loss prelu relu relu6 relu_ rms_norm rrelu rrelu_
        scaled_dot_product_attention selu selu_ sigmoid silu smooth_l1_loss soft_margin_loss softmax softmin
        softplus softshrink softsign tanh tanhshrink threshold threshold_ triplet_margin_loss
        triplet_margin_with_distance_loss unfold upsample upsample_bilinear upsample_nearest
    """),
    "torch.linalg": _names("""
        cholesky cholesky_ex cond cross det diagonal eigh eigvalsh householder_product inv inv_ex lstsq lu
        lu_factor lu_factor_ex lu_solve matmul matrix_exp matrix_norm matrix_power matrix_rank multi_dot
        norm pinv qr slogdet solve solve_ex solve_triangular svd svdvals tensorinv tensorsolve vander vecdot
        vector_norm
    """),
    "dtypes": _names("""
        bfloat16 bool double float float16 float32 float64 half int int16 int32 int64 int8 long short uint8
    """),
    "torch.nn": _names("""
        AdaptiveAvgPool1d AdaptiveAvgPool2d AdaptiveAvgPool3d AdaptiveMaxPool1d AdaptiveMaxPool2d AdaptiveMaxPool3d
        AlphaDropout AvgPool1d AvgPool2d AvgPool3d BCELoss BCEWithLogitsLoss BatchNorm1d BatchNorm2d BatchNorm3d
        Bilinear Buffer CELU CTCLoss ChannelShuffle CircularPad1d CircularPad2d CircularPad3d ConstantPad1d
        ConstantPad2d ConstantPad3d Container Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d
        CosineEmbeddingLoss CosineSimilarity CrossEntropyLoss Dropout Dropout1d Dropout2d Dropout3d ELU Embedding
        EmbeddingBag FeatureAlphaDropout Flatten Fold GELU GLU GRU GRUCell GaussianNLLLoss GroupNorm Hardshrink
        Hardsigmoid Hardswish Hardtanh HingeEmbeddingLoss HuberLoss Identity InstanceNorm1d InstanceNorm2d
        InstanceNorm3d KLDivLoss L1Loss LPPool1d LPPool2d LPPool3d LSTM LSTMCell LayerNorm LeakyReLU Linear
        LocalResponseNorm LogSigmoid LogSoftmax MSELoss MarginRankingLoss MaxPool1d MaxPool2d MaxPool3d MaxUnpool1d
        MaxUnpool2d MaxUnpool3d Mish Module ModuleDict ModuleList MultiLabelMarginLoss MultiLabelSoftMarginLoss
        MultiMarginLoss MultiheadAttention NLLLoss NLLLoss2d PReLU PairwiseDistance Parameter ParameterDict
        ParameterList PixelShuffle PixelUnshuffle PoissonNLLLoss RMSNorm RNN RNNBase RNNCell RNNCellBase RReLU ReLU
        ReLU6 ReflectionPad1d ReflectionPad2d ReflectionPad3d ReplicationPad1d ReplicationPad2d ReplicationPad3d
        SELU Sequential SiLU Sigmoid SmoothL1Loss SoftMarginLoss Softmax Softmax2d Softmin Softplus Softshrink
        Softsign Tanh Tanhshrink Threshold Transformer TransformerDecoder TransformerDecoderLayer TransformerEncoder
        TransformerEncoderLayer TripletMarginLoss TripletMarginWithDistanceLoss Unflatten Unfold Upsample
        UpsamplingBilinear2d UpsamplingNearest2d ZeroPad1d ZeroPad2d ZeroPad3d functional init modules parameter
        utils
    """),
    "torch.nn.init": _names("""
        calculate_gain constant_ dirac_ eye_ kaiming_normal_ kaiming_uniform_ normal_ ones_ orthogonal_ sparse_
        trunc_normal_ uniform_ xavier_normal_ xavier_uniform_ zeros_
    """),
    "torch.nn.utils": _names("""
        clip_grad_norm clip_grad_norm_ clip_grad_value_ clip_grads_with_norm_ get_total_norm parameters_to_vector
        rnn vector_to_parameters
    """),
    "torch.optim": _names("""
        ASGD Adadelta Adagrad Adam AdamW Adamax LBFGS NAdam Optimizer RAdam RMSprop Rprop SGD lr_scheduler
    """),
    "torch.optim.lr_scheduler": _names("""
        ChainedScheduler ConstantLR CosineAnnealingLR CosineAnnealingWarmRestarts CyclicLR ExponentialLR LRScheduler
        LambdaLR LinearLR MultiStepLR MultiplicativeLR OneCycleLR PolynomialLR ReduceLROnPlateau SequentialLR StepLR
    """),
    "torch.func": _names("""
        functional_call grad grad_and_value vjp
    """),
}


# Names the surface issue asks for that agrad does not have yet, with why.
_COMPLEX = ("complex dtypes are not in agrad yet: PyTorch's conjugate-Wirtinger gradients need every op to "
            "declare whether it is holomorphic, the engine to route complex gradients to real inputs by their real "
            "part, gradcheck to perturb both parts, and the printer to format them; a change of its own")
PENDING: dict[str, dict[str, str]] = {
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
