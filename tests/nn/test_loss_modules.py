"""The loss and distance layers of ``agrad.nn`` against ``torch.nn``'s: forward
and backward (float64 and float32, every reduction, through ``check_module``),
weight buffers in ``state_dict``, ``repr``, the legacy ``size_average``/``reduce``
arguments, and misuse errors (same exception type as torch)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
from tests.helpers import requires_torch, torch
from tests.nn.oracle import check_module

Factory = Callable[..., Any]  # (library, reduction) -> a loss module
Inputs = Callable[[np.random.Generator], list[Any]]

REDUCTIONS = ("none", "mean", "sum")


def _normal(*shape: int) -> Inputs:
    return lambda rng: [rng.standard_normal(shape)]


def _pair(*shape: int) -> Inputs:
    return lambda rng: [rng.standard_normal(shape), rng.standard_normal(shape)]


def _classes(rng: np.random.Generator, n_classes: int, *shape: int, ignore: int | None = None) -> np.ndarray:
    t = rng.integers(0, n_classes, shape).astype(np.int64)
    if ignore is not None:
        t.reshape(-1)[0] = ignore
    return t


def _signs(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.choice([-1.0, 1.0], shape)


def _ctc_wrapper(lib: Any, loss: Any) -> Any:
    """CTC from logits: PyTorch's CTC gradient assumes ``log_probs`` came out of a
    log_softmax (Note [CTC in log space]), so both are compared through one."""

    class LogSoftmaxThenCTC(lib.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.loss = loss

        def forward(self, logits: Any, *rest: Any) -> Any:
            return self.loss(logits.log_softmax(2), *rest)

    return LogSoftmaxThenCTC()


def _ctc_inputs(padded: bool) -> Inputs:
    def make(rng: np.random.Generator) -> list[Any]:
        lengths = np.array([3, 1, 0], np.int64)
        targets = rng.integers(1, 4, (3, 3)).astype(np.int64)
        if not padded:
            targets = np.concatenate([targets[i, :n] for i, n in enumerate(lengths)])
        return [rng.standard_normal((6, 3, 4)), targets, np.array([6, 4, 5], np.int64), lengths]
    return make


def _cosine_distance(lib: Any) -> Callable[[Any, Any], Any]:
    return lambda a, b: 1 - lib.nn.functional.cosine_similarity(a, b)


def _w(lib: Any, values: list[float]) -> Any:
    return lib.tensor(values, dtype=lib.float64)


# (id, factory(lib, reduction), inputs(rng)).  Float arrays become inputs that
# require grad (targets too, where PyTorch differentiates them).
CASES: list[tuple[str, Factory, Inputs]] = [
    ("L1Loss", lambda lib, r: lib.nn.L1Loss(reduction=r), _pair(3, 4)),
    ("MSELoss", lambda lib, r: lib.nn.MSELoss(reduction=r), _pair(2, 3, 2)),
    ("NLLLoss", lambda lib, r: lib.nn.NLLLoss(reduction=r), lambda g: [g.standard_normal((4, 3)), _classes(g, 3, 4)]),
    ("NLLLoss-weight-ignore", lambda lib, r: lib.nn.NLLLoss(_w(lib, [0.5, 2.0, 1.0]), ignore_index=1, reduction=r),
     lambda g: [g.standard_normal((5, 3)), np.array([0, 1, 2, 2, 0], np.int64)]),
    ("NLLLoss-2d", lambda lib, r: lib.nn.NLLLoss(reduction=r),
     lambda g: [g.standard_normal((2, 3, 2, 2)), _classes(g, 3, 2, 2, 2)]),
    ("NLLLoss-unbatched", lambda lib, r: lib.nn.NLLLoss(reduction=r),
     lambda g: [g.standard_normal(3), np.array(2, np.int64)]),
    ("PoissonNLLLoss", lambda lib, r: lib.nn.PoissonNLLLoss(reduction=r),
     lambda g: [g.standard_normal((3, 4)), g.uniform(0, 4, (3, 4))]),
    ("PoissonNLLLoss-rate-full", lambda lib, r: lib.nn.PoissonNLLLoss(log_input=False, full=True, reduction=r),
     lambda g: [g.uniform(0.5, 3, (3, 4)), g.uniform(0.2, 4, (3, 4))]),
    ("GaussianNLLLoss", lambda lib, r: lib.nn.GaussianNLLLoss(reduction=r),
     lambda g: [g.standard_normal((3, 4)), g.standard_normal((3, 4)), g.uniform(0.5, 2, (3, 4))]),
    ("GaussianNLLLoss-full-homoscedastic", lambda lib, r: lib.nn.GaussianNLLLoss(full=True, reduction=r),
     lambda g: [g.standard_normal((3, 4)), g.standard_normal((3, 4)), g.uniform(0.5, 2, (3, 1))]),
    ("KLDivLoss", lambda lib, r: lib.nn.KLDivLoss(reduction=r),
     lambda g: [g.standard_normal((3, 4)), g.uniform(0.1, 1, (3, 4))]),
    ("KLDivLoss-log-target", lambda lib, r: lib.nn.KLDivLoss(reduction=r, log_target=True), _pair(3, 4)),
    ("BCELoss", lambda lib, r: lib.nn.BCELoss(reduction=r),
     lambda g: [g.uniform(0.05, 0.95, (3, 4)), g.uniform(0, 1, (3, 4))]),
    ("BCELoss-weight", lambda lib, r: lib.nn.BCELoss(_w(lib, [1.0, 2.0, 0.5, 3.0]), reduction=r),
     lambda g: [g.uniform(0.05, 0.95, (3, 4)), g.uniform(0, 1, (3, 4))]),
    ("BCEWithLogitsLoss", lambda lib, r: lib.nn.BCEWithLogitsLoss(reduction=r),
     lambda g: [g.standard_normal((3, 4)) * 3, g.uniform(0, 1, (3, 4))]),
    ("BCEWithLogitsLoss-weights", lambda lib, r: lib.nn.BCEWithLogitsLoss(
        _w(lib, [1.0, 2.0, 0.5, 3.0]), pos_weight=_w(lib, [2.0, 1.0, 0.5, 4.0]), reduction=r),
     lambda g: [g.standard_normal((3, 4)) * 3, g.uniform(0, 1, (3, 4))]),
    ("HingeEmbeddingLoss", lambda lib, r: lib.nn.HingeEmbeddingLoss(margin=0.5, reduction=r),
     lambda g: [g.standard_normal((3, 4)), _signs(g, 3, 4)]),
    ("MultiLabelMarginLoss", lambda lib, r: lib.nn.MultiLabelMarginLoss(reduction=r),
     lambda g: [g.standard_normal((3, 4)), np.array([[3, 0, -1, 1], [1, 2, 3, 0], [-1, 1, 2, 3]], np.int64)]),
    ("MultiLabelMarginLoss-unbatched", lambda lib, r: lib.nn.MultiLabelMarginLoss(reduction=r),
     lambda g: [g.standard_normal(4), np.array([2, 0, -1, 1], np.int64)]),
    ("SmoothL1Loss", lambda lib, r: lib.nn.SmoothL1Loss(reduction=r), _pair(3, 4)),
    ("SmoothL1Loss-beta", lambda lib, r: lib.nn.SmoothL1Loss(reduction=r, beta=0.5), _pair(3, 4)),
    ("HuberLoss", lambda lib, r: lib.nn.HuberLoss(reduction=r, delta=0.7), _pair(3, 4)),
    ("CrossEntropyLoss", lambda lib, r: lib.nn.CrossEntropyLoss(reduction=r),
     lambda g: [g.standard_normal((4, 3)), _classes(g, 3, 4)]),
    ("CrossEntropyLoss-all-options", lambda lib, r: lib.nn.CrossEntropyLoss(
        _w(lib, [0.5, 2.0, 1.0]), ignore_index=0, reduction=r, label_smoothing=0.2),
     lambda g: [g.standard_normal((5, 3)), np.array([0, 1, 2, 2, 1], np.int64)]),
    ("CrossEntropyLoss-2d", lambda lib, r: lib.nn.CrossEntropyLoss(reduction=r, label_smoothing=0.1),
     lambda g: [g.standard_normal((2, 3, 2, 2)), _classes(g, 3, 2, 2, 2, ignore=-100)]),
    ("CrossEntropyLoss-probabilities", lambda lib, r: lib.nn.CrossEntropyLoss(
        _w(lib, [0.5, 2.0, 1.0]), reduction=r, label_smoothing=0.3),
     lambda g: [g.standard_normal((4, 3)), g.dirichlet(np.ones(3), 4)]),
    ("MultiLabelSoftMarginLoss", lambda lib, r: lib.nn.MultiLabelSoftMarginLoss(_w(lib, [1.0, 2.0, 0.5]),
                                                                                reduction=r),
     lambda g: [g.standard_normal((4, 3)), g.integers(0, 2, (4, 3)).astype(np.float64)]),
    ("CosineEmbeddingLoss", lambda lib, r: lib.nn.CosineEmbeddingLoss(margin=0.2, reduction=r),
     lambda g: [g.standard_normal((4, 3)), g.standard_normal((4, 3)), np.array([1.0, -1.0, -1.0, 1.0])]),
    ("MarginRankingLoss", lambda lib, r: lib.nn.MarginRankingLoss(margin=0.3, reduction=r),
     lambda g: [g.standard_normal(5), g.standard_normal(5), _signs(g, 5)]),
    ("MultiMarginLoss", lambda lib, r: lib.nn.MultiMarginLoss(reduction=r),
     lambda g: [g.standard_normal((4, 3)), _classes(g, 3, 4)]),
    ("MultiMarginLoss-p2-weight", lambda lib, r: lib.nn.MultiMarginLoss(2, 0.5, _w(lib, [1.0, 3.0, 0.5]),
                                                                        reduction=r),
     lambda g: [g.standard_normal((4, 3)), _classes(g, 3, 4)]),
    ("TripletMarginLoss", lambda lib, r: lib.nn.TripletMarginLoss(reduction=r),
     lambda g: [g.standard_normal((4, 3)) for _ in range(3)]),
    ("TripletMarginLoss-p1-swap", lambda lib, r: lib.nn.TripletMarginLoss(2.0, p=1.0, swap=True, reduction=r),
     lambda g: [g.standard_normal((4, 3)) for _ in range(3)]),
    ("TripletMarginWithDistanceLoss", lambda lib, r: lib.nn.TripletMarginWithDistanceLoss(reduction=r),
     lambda g: [g.standard_normal((4, 3)) for _ in range(3)]),
    ("TripletMarginWithDistanceLoss-cosine", lambda lib, r: lib.nn.TripletMarginWithDistanceLoss(
        distance_function=_cosine_distance(lib), margin=0.5, swap=True, reduction=r),
     lambda g: [g.standard_normal((4, 3)) for _ in range(3)]),
    ("CTCLoss", lambda lib, r: _ctc_wrapper(lib, lib.nn.CTCLoss(reduction=r)), _ctc_inputs(padded=True)),
    ("CTCLoss-concatenated-blank", lambda lib, r: _ctc_wrapper(lib, lib.nn.CTCLoss(blank=3, reduction=r,
                                                                                    zero_infinity=True)),
     _ctc_inputs(padded=False)),
]


@requires_torch
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("factory,inputs", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_forward_backward_match_torch(factory: Factory, inputs: Inputs, reduction: str, dtype: str) -> None:
    xs = inputs(np.random.default_rng(0))
    with warnings.catch_warnings():
        # KLDivLoss's 'mean' warns (in both): the values must still agree.
        warnings.filterwarnings("ignore", "reduction: 'mean' divides the total loss", UserWarning)
        check_module(factory(agrad, reduction), factory(torch, reduction), xs, dtype)


@requires_torch
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_soft_margin_loss_matches_torch(dtype: str) -> None:
    # The target may not require grad (neither library differentiates it), so it
    # is a constant of the module under test, not an input.
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((3, 4)), _signs(rng, 3, 4)

    def with_target(lib: Any, reduction: str) -> Any:
        class SoftMargin(lib.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.loss = lib.nn.SoftMarginLoss(reduction=reduction)
                self.register_buffer("target", lib.from_numpy(y), persistent=False)

            def forward(self, input: Any) -> Any:
                return self.loss(input, self.target)

        return SoftMargin()

    for reduction in REDUCTIONS:
        check_module(with_target(agrad, reduction), with_target(torch, reduction), [x], dtype)


@requires_torch
def test_kl_div_mean_warns() -> None:
    x = agrad.zeros(2, 3)
    with pytest.warns(UserWarning, match="'batchmean' divides only by the batch size"):
        agrad.nn.KLDivLoss()(x, x.exp())
    assert float(agrad.nn.KLDivLoss(reduction="batchmean")(x, x.exp())) == 0.0


@requires_torch
def test_weights_are_buffers_in_state_dict() -> None:
    w = [1.0, 2.0, 3.0]
    for name in ["NLLLoss", "CrossEntropyLoss", "BCELoss", "MultiLabelSoftMarginLoss", "MultiMarginLoss"]:
        ours, theirs = getattr(agrad.nn, name)(weight=agrad.tensor(w)), getattr(torch.nn, name)(weight=torch.tensor(w))
        assert list(ours.state_dict()) == list(theirs.state_dict()) == ["weight"]
        assert [n for n, _ in ours.named_buffers()] == ["weight"] and not list(ours.parameters())
        assert list(getattr(agrad.nn, name)().state_dict()) == []  # a None weight is registered, not saved
        assert "weight" in getattr(agrad.nn, name)()._buffers
    ours_bce = agrad.nn.BCEWithLogitsLoss(pos_weight=agrad.tensor(w))
    theirs_bce = torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor(w))
    assert list(ours_bce.state_dict()) == list(theirs_bce.state_dict()) == ["pos_weight"]
    assert list(ours_bce._buffers) == list(theirs_bce._buffers) == ["weight", "pos_weight"]
    assert ours_bce.to(agrad.float64).pos_weight.dtype is agrad.float64  # buffers follow .to()


# Constructions whose repr must equal torch's (torch -> agrad).
REPRS: list[Callable[[Any], Any]] = [
    lambda lib: lib.nn.L1Loss(), lambda lib: lib.nn.NLLLoss(ignore_index=2), lambda lib: lib.nn.PoissonNLLLoss(),
    lambda lib: lib.nn.GaussianNLLLoss(full=True), lambda lib: lib.nn.KLDivLoss(log_target=True),
    lambda lib: lib.nn.MSELoss(reduction="sum"), lambda lib: lib.nn.BCELoss(weight=lib.ones(2)),
    lambda lib: lib.nn.BCEWithLogitsLoss(pos_weight=lib.ones(2)), lambda lib: lib.nn.HingeEmbeddingLoss(),
    lambda lib: lib.nn.MultiLabelMarginLoss(), lambda lib: lib.nn.SmoothL1Loss(beta=2.0),
    lambda lib: lib.nn.HuberLoss(), lambda lib: lib.nn.SoftMarginLoss(),
    lambda lib: lib.nn.CrossEntropyLoss(label_smoothing=0.1), lambda lib: lib.nn.MultiLabelSoftMarginLoss(),
    lambda lib: lib.nn.CosineEmbeddingLoss(), lambda lib: lib.nn.MarginRankingLoss(),
    lambda lib: lib.nn.MultiMarginLoss(p=2), lambda lib: lib.nn.TripletMarginLoss(swap=True),
    lambda lib: lib.nn.TripletMarginWithDistanceLoss(),
    lambda lib: lib.nn.TripletMarginWithDistanceLoss(distance_function=lib.nn.PairwiseDistance(p=1.0)),
    lambda lib: lib.nn.TripletMarginWithDistanceLoss(distance_function=_cosine_distance(lib)),
    lambda lib: lib.nn.CTCLoss(blank=2), lambda lib: lib.nn.PairwiseDistance(p=1.0),
    lambda lib: lib.nn.CosineSimilarity(dim=0),
]


@requires_torch
@pytest.mark.parametrize("factory", REPRS, ids=range(len(REPRS)))
def test_repr_matches_torch(factory: Callable[[Any], Any]) -> None:
    assert repr(factory(agrad)) == repr(factory(torch)).replace("torch", "agrad")


@requires_torch
@pytest.mark.parametrize("size_average,reduce", [(False, None), (None, False), (True, True), (False, True)])
def test_legacy_size_average_and_reduce(size_average: bool | None, reduce: bool | None) -> None:
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated") as ours:
        loss = agrad.nn.MSELoss(size_average, reduce)
    with pytest.warns(UserWarning) as theirs:
        expected = torch.nn.MSELoss(size_average, reduce).reduction
    assert loss.reduction == expected
    assert str(ours[0].message) == str(theirs[0].message)
    with pytest.warns(UserWarning, match="reduction='none'"):  # the legacy pair overrides reduction
        assert agrad.nn.CrossEntropyLoss(reduce=False, reduction="sum").reduction == "none"


def test_nll_loss_2d_is_deprecated() -> None:
    with pytest.warns(FutureWarning, match="`NLLLoss2d` has been deprecated"):
        loss = agrad.nn.NLLLoss2d(ignore_index=1)
    assert isinstance(loss, agrad.nn.NLLLoss) and loss.ignore_index == 1


@requires_torch
@pytest.mark.parametrize("factory,inputs", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_reduction_raises_value_error(factory: Factory, inputs: Inputs) -> None:
    xs = inputs(np.random.default_rng(0))
    for lib in (agrad, torch):
        args = [lib.from_numpy(x) if isinstance(x, np.ndarray) else x for x in xs]
        with pytest.raises(ValueError, match="bogus"):
            factory(lib, "bogus")(*args)


@requires_torch
def test_constructor_checks() -> None:
    for lib in (agrad, torch):
        with pytest.raises(ValueError, match="only p == 1 and p == 2 supported"):
            lib.nn.MultiMarginLoss(p=3)
        with pytest.raises(ValueError, match="expected weight to be None or 1D tensor, got 2D instead"):
            lib.nn.MultiMarginLoss(weight=lib.ones(2, 2))
        with pytest.raises(ValueError, match="TripletMarginLoss: expected margin to be greater than 0, got 0"):
            lib.nn.TripletMarginLoss(margin=0)
        with pytest.raises(ValueError, match="TripletMarginWithDistanceLoss: expected margin to be greater than 0"):
            lib.nn.TripletMarginWithDistanceLoss(margin=-1.0)
        with pytest.raises(TypeError, match="delta must be a float or int"):
            lib.nn.HuberLoss(delta="1")
        with pytest.raises(TypeError):
            lib.nn.GaussianNLLLoss(True)  # keyword-only
        with pytest.raises(TypeError):
            lib.nn.TripletMarginWithDistanceLoss(None)  # keyword-only


# (id, loss(lib), inputs(lib)): misuse that must fail with torch's exception type.
MISUSE: list[tuple[str, Callable[[Any], Any], Callable[[Any], list[Any]]]] = [
    ("MSELoss-shapes", lambda lib: lib.nn.MSELoss(), lambda lib: [lib.ones(3), lib.ones(4)]),
    ("L1Loss-shapes", lambda lib: lib.nn.L1Loss(), lambda lib: [lib.ones(2, 3), lib.ones(3, 2)]),
    ("BCELoss-shapes", lambda lib: lib.nn.BCELoss(), lambda lib: [lib.full((3,), 0.5), lib.ones(2, 3)]),
    ("BCELoss-range", lambda lib: lib.nn.BCELoss(), lambda lib: [lib.full((3,), 1.5), lib.ones(3)]),
    ("BCEWithLogitsLoss-shapes", lambda lib: lib.nn.BCEWithLogitsLoss(), lambda lib: [lib.ones(3), lib.ones(3, 1)]),
    ("NLLLoss-batch", lambda lib: lib.nn.NLLLoss(), lambda lib: [lib.zeros(3, 2), lib.zeros(4, dtype=lib.int64)]),
    ("NLLLoss-class-range", lambda lib: lib.nn.NLLLoss(), lambda lib: [lib.zeros(2, 3), lib.tensor([0, 3])]),
    ("NLLLoss-0d", lambda lib: lib.nn.NLLLoss(), lambda lib: [lib.zeros(()), lib.tensor(0)]),
    ("CrossEntropyLoss-float-classes", lambda lib: lib.nn.CrossEntropyLoss(),
     lambda lib: [lib.zeros(2, 3), lib.tensor([0.0, 1.0])]),
    ("CrossEntropyLoss-target-dims", lambda lib: lib.nn.CrossEntropyLoss(),
     lambda lib: [lib.zeros(2, 3, 4), lib.zeros(2, 5, dtype=lib.int64)]),
    ("CosineEmbeddingLoss-dims", lambda lib: lib.nn.CosineEmbeddingLoss(),
     lambda lib: [lib.ones(2, 3), lib.ones(3), lib.ones(2)]),
    ("MarginRankingLoss-dims", lambda lib: lib.nn.MarginRankingLoss(),
     lambda lib: [lib.ones(2, 3), lib.ones(3), lib.ones(3)]),
    ("MultiMarginLoss-target-size", lambda lib: lib.nn.MultiMarginLoss(),
     lambda lib: [lib.ones(2, 3), lib.tensor([0, 1, 2])]),
    ("MultiLabelMarginLoss-target-size", lambda lib: lib.nn.MultiLabelMarginLoss(),
     lambda lib: [lib.ones(2, 3), lib.zeros(2, 2, dtype=lib.int64)]),
    ("TripletMarginLoss-dims", lambda lib: lib.nn.TripletMarginLoss(),
     lambda lib: [lib.ones(2, 3), lib.ones(2, 3), lib.ones(3)]),
    ("GaussianNLLLoss-var-size", lambda lib: lib.nn.GaussianNLLLoss(),
     lambda lib: [lib.ones(2, 3), lib.ones(2, 3), lib.ones(3, 2)]),
    ("GaussianNLLLoss-negative-var", lambda lib: lib.nn.GaussianNLLLoss(),
     lambda lib: [lib.ones(2, 3), lib.ones(2, 3), -lib.ones(2, 3)]),
    ("CTCLoss-blank", lambda lib: lib.nn.CTCLoss(blank=4),
     lambda lib: [lib.zeros(3, 1, 4), lib.tensor([[1]]), lib.tensor([3]), lib.tensor([1])]),
    ("CosineSimilarity-shapes", lambda lib: lib.nn.CosineSimilarity(),
     lambda lib: [lib.ones(2, 3), lib.ones(2, 4)]),
    ("PairwiseDistance-shapes", lambda lib: lib.nn.PairwiseDistance(),
     lambda lib: [lib.ones(2, 3), lib.ones(2, 4)]),
]


@requires_torch
@pytest.mark.parametrize("loss,inputs", [c[1:] for c in MISUSE], ids=[c[0] for c in MISUSE])
def test_misuse_raises_torchs_error_type(loss: Callable[[Any], Any], inputs: Callable[[Any], list[Any]]) -> None:
    def failure(lib: Any) -> BaseException:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the broadcast warnings that come first
            with pytest.raises(Exception) as info:
                loss(lib)(*inputs(lib))
        return info.value

    ours, theirs = failure(agrad), failure(torch)
    assert type(ours) is type(theirs), (ours, theirs)


# -- distance layers ----------------------------------------------------------------------

DISTANCES: list[tuple[str, Callable[[Any], Any], tuple[int, ...], tuple[int, ...]]] = [
    ("PairwiseDistance", lambda lib: lib.nn.PairwiseDistance(), (4, 3), (4, 3)),
    ("PairwiseDistance-p1-keepdim", lambda lib: lib.nn.PairwiseDistance(p=1.0, keepdim=True), (4, 3), (4, 3)),
    ("PairwiseDistance-p3-broadcast", lambda lib: lib.nn.PairwiseDistance(p=3.0, eps=0.0), (4, 3), (3,)),
    ("PairwiseDistance-inf-1d", lambda lib: lib.nn.PairwiseDistance(p=float("inf")), (5,), (5,)),
    ("CosineSimilarity", lambda lib: lib.nn.CosineSimilarity(), (4, 3), (4, 3)),
    ("CosineSimilarity-dim0-broadcast", lambda lib: lib.nn.CosineSimilarity(dim=0, eps=1e-6), (3, 4), (3, 1)),
    ("CosineSimilarity-last", lambda lib: lib.nn.CosineSimilarity(dim=-1), (2, 3, 4), (2, 3, 4)),
]


@requires_torch
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("factory,shape1,shape2", [c[1:] for c in DISTANCES], ids=[c[0] for c in DISTANCES])
def test_distances_match_torch(factory: Callable[[Any], Any], shape1: tuple[int, ...], shape2: tuple[int, ...],
                               dtype: str) -> None:
    rng = np.random.default_rng(0)
    check_module(factory(agrad), factory(torch), [rng.standard_normal(shape1), rng.standard_normal(shape2)], dtype)


def test_distance_attributes() -> None:
    d = agrad.nn.PairwiseDistance(p=3.0, eps=0.5, keepdim=True)
    assert (d.norm, d.eps, d.keepdim) == (3.0, 0.5, True)  # PyTorch keeps p as ``norm``
    c = agrad.nn.CosineSimilarity(dim=2, eps=1e-3)
    assert (c.dim, c.eps) == (2, 1e-3)
    assert not list(d.state_dict()) and not list(c.state_dict())
