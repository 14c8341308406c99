"""Sequential, ModuleList, ModuleDict, ParameterList and ParameterDict against torch.nn's.

Each test builds the same container in both libraries (from layers with the
same shapes), applies the same operations to both, and compares what a user
sees: entry names and order, ``state_dict`` keys, ``repr`` and the errors of
misuse (type and message, with 'torch' read as 'agrad').
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import agrad
from agrad import nn
from tests.helpers import requires_torch, torch
from tests.nn.oracle import check_module, load_from_torch

pytestmark = requires_torch


def _lib(which: str) -> Any:
    return agrad if which == "agrad" else torch


def _layers(lib: Any) -> list[Any]:
    """Four distinguishable layers, built alike in either library."""
    return [lib.nn.Linear(2, 3), lib.nn.Identity(), lib.nn.Linear(3, 1, bias=False), lib.nn.Dropout(0.25)]


def _same_repr(ours: Any, theirs: Any) -> None:
    assert repr(ours) == repr(theirs).replace("torch", "agrad")


def _same_keys(ours: Any, theirs: Any) -> None:
    assert list(ours.state_dict()) == list(theirs.state_dict())


def _raises_like(ours: Callable[[], Any], theirs: Callable[[], Any]) -> None:
    """Both calls raise the same exception type with the same message ('torch' read as 'agrad';
    agrad's Module says it is ``agrad.nn.Module``, its public path)."""
    with pytest.raises(Exception) as t:
        theirs()
    with pytest.raises(type(t.value)) as a:
        ours()
    assert type(a.value) is type(t.value)
    assert str(a.value) == str(t.value).replace("nn.modules.module.Module", "nn.Module").replace("torch", "agrad")


def _both(build: Callable[[Any], Any]) -> tuple[Any, Any]:
    return build(agrad), build(torch)


# -- Sequential ----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_sequential_forward_chains_like_torch(dtype: str) -> None:
    ours, theirs = _both(lambda lib: lib.nn.Sequential(lib.nn.Linear(4, 3), lib.nn.Flatten(0), lib.nn.Linear(6, 2)))
    check_module(ours, theirs, [np.random.default_rng(0).standard_normal((2, 4))], dtype)


def test_sequential_from_ordered_dict_keeps_names() -> None:
    ours, theirs = _both(lambda lib: lib.nn.Sequential(OrderedDict(
        [("fc", lib.nn.Linear(2, 3)), ("drop", lib.nn.Dropout()), ("out", lib.nn.Linear(3, 1))])))
    _same_keys(ours, theirs)
    _same_repr(ours, theirs)
    assert ours.fc is ours[0] and ours.out is ours[-1]


@pytest.mark.parametrize("op", [
    lambda s: s[1:],
    lambda s: s[::-2],
    lambda s: s.append(s[0]),
    lambda s: s.insert(1, s[3]),
    lambda s: s.insert(-1, s[3]),
    lambda s: s.insert(4, s[1]),
    lambda s: s.extend(s[:2]),
    lambda s: s + s[2:],
    lambda s: s * 2,
    lambda s: 2 * s,
])
def test_sequential_operations_match_torch(op: Callable[[Any], Any]) -> None:
    ours, theirs = _both(lambda lib: lib.nn.Sequential(*_layers(lib)))
    out_a, out_t = op(ours), op(theirs)
    assert type(out_a).__name__ == type(out_t).__name__ == "Sequential"
    _same_keys(out_a, out_t)
    _same_repr(out_a, out_t)
    _same_repr(ours, theirs)


@pytest.mark.parametrize("op", [
    lambda s: s.__delitem__(1),
    lambda s: s.__delitem__(-1),
    lambda s: s.__delitem__(slice(0, 3, 2)),
    lambda s: s.pop(0),
    lambda s: s.__setitem__(-2, type(s[1])()),
    lambda s: s.__iadd__(s[:2]),
    lambda s: s.__imul__(3),
])
def test_sequential_mutations_renumber_like_torch(op: Callable[[Any], Any]) -> None:
    ours, theirs = _both(lambda lib: lib.nn.Sequential(*_layers(lib)))
    op(ours)
    op(theirs)
    assert list(ours._modules) == list(theirs._modules)
    _same_keys(ours, theirs)
    _same_repr(ours, theirs)


def test_sequential_sharing_and_protocol() -> None:
    seq = nn.Sequential(*_layers(agrad))
    assert seq[1:][0] is seq[1]
    assert len(seq) == 4 and list(seq) == [seq[i] for i in range(4)]
    doubled = seq * 2
    assert doubled[0] is doubled[4] is seq[0]
    assert len(list(doubled.parameters())) == 3  # shared modules are listed once
    same = seq
    seq += nn.Sequential(nn.Identity())
    seq *= 1
    assert seq is same and len(seq) == 5
    assert seq.pop(slice(3, None))[0] is not None and len(seq) == 3
    assert "0" not in dir(seq)


@pytest.mark.parametrize("op", [
    lambda s: s[4],
    lambda s: s[-5],
    lambda s: s["0"],
    lambda s: s.__setitem__(7, s[0]),
    lambda s: s.__delitem__(9),
    lambda s: s + [s[0]],
    lambda s: s.__iadd__(3),
    lambda s: s * 1.5,
    lambda s: s * 0,
    lambda s: s.__imul__(-1),
    lambda s: s.insert(6, s[0]),
    lambda s: s.insert(0, 3),
    lambda s: s.append(3),
    lambda s: s.extend([3]),
])
def test_sequential_misuse_raises_like_torch(op: Callable[[Any], Any]) -> None:
    ours, theirs = _both(lambda lib: lib.nn.Sequential(*_layers(lib)))
    _raises_like(lambda: op(ours), lambda: op(theirs))


def test_empty_sequential_is_the_identity() -> None:
    x = agrad.ones(2)
    assert nn.Sequential()(x) is x
    assert repr(nn.Sequential()) == "Sequential()"


# -- ModuleList ------------------------------------------------------------------------


@pytest.mark.parametrize("op", [
    lambda m: m,
    lambda m: m[1:3],
    lambda m: m.append(m[0]),
    lambda m: m.extend([m[1], m[2]]),
    lambda m: m + m[:1],
    lambda m: m.__iadd__(m[2:]),
    lambda m: m.insert(1, m[3]) or m,
    lambda m: m.insert(0, m[0]) or m,
])
def test_module_list_operations_match_torch(op: Callable[[Any], Any]) -> None:
    ours, theirs = _both(lambda lib: lib.nn.ModuleList(_layers(lib)))
    out_a, out_t = op(ours), op(theirs)
    assert type(out_a).__name__ == type(out_t).__name__ == "ModuleList"
    _same_keys(out_a, out_t)
    _same_repr(out_a, out_t)
    _same_repr(ours, theirs)


@pytest.mark.parametrize("op", [
    lambda m: m.__delitem__(0),
    lambda m: m.__delitem__(slice(1, None, 2)),
    lambda m: m.pop(-1),
    lambda m: m.pop(slice(0, 2)),
    lambda m: m.__setitem__(1, type(m[0])(5, 5)),
])
def test_module_list_mutations_renumber_like_torch(op: Callable[[Any], Any]) -> None:
    ours, theirs = _both(lambda lib: lib.nn.ModuleList(_layers(lib)))
    op(ours)
    op(theirs)
    _same_keys(ours, theirs)
    _same_repr(ours, theirs)


def test_module_list_repr_folds_repeats_like_torch() -> None:
    def build(lib: Any) -> Any:
        inner = lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.Identity())
        return lib.nn.ModuleList([lib.nn.Linear(2, 2), lib.nn.Linear(2, 2), inner, lib.nn.Identity(),
                                  lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.Identity()), lib.nn.Identity()])

    ours, theirs = _both(build)
    _same_repr(ours, theirs)
    _same_repr(*_both(lambda lib: lib.nn.ModuleList()))


@pytest.mark.parametrize("op", [
    lambda m: m[4],
    lambda m: m[-9],
    lambda m: m[None],
    lambda m: m.__setitem__(4, m[0]),
    lambda m: m.extend(3),
    lambda m: m.append("x"),
    lambda m: m(),
])
def test_module_list_misuse_raises_like_torch(op: Callable[[Any], Any]) -> None:
    ours, theirs = _both(lambda lib: lib.nn.ModuleList(_layers(lib)))
    _raises_like(lambda: op(ours), lambda: op(theirs))


# -- ModuleDict ------------------------------------------------------------------------


def _dict_source(lib: Any, kind: str) -> Any:
    items = [("z", lib.nn.Linear(2, 2)), ("a", lib.nn.Identity()), ("m", lib.nn.Linear(2, 1))]
    if kind == "dict":
        return dict(items)
    if kind == "ordered":
        return OrderedDict(items)
    if kind == "module_dict":
        return lib.nn.ModuleDict(items)
    return [list(pair) for pair in items]


@pytest.mark.parametrize("kind", ["dict", "ordered", "module_dict", "pairs"])
def test_module_dict_update_keeps_order_like_torch(kind: str) -> None:
    ours, theirs = _both(lambda lib: lib.nn.ModuleDict(_dict_source(lib, kind)))
    assert list(ours) == list(theirs) == ["z", "a", "m"]
    _same_keys(ours, theirs)
    _same_repr(ours, theirs)


def test_module_dict_mapping_protocol() -> None:
    md = nn.ModuleDict(_dict_source(agrad, "ordered"))
    assert "a" in md and "b" not in md and len(md) == 3
    assert list(md.keys()) == ["z", "a", "m"] and [k for k, _ in md.items()] == list(md)
    assert list(md.values())[1] is md["a"]
    md["b"] = nn.Identity()
    assert md.pop("z") is not None and list(md) == ["a", "m", "b"]
    del md["a"]
    assert list(md.state_dict()) == ["m.weight", "m.bias"]
    md.clear()
    assert len(md) == 0 and list(md.parameters()) == []


@pytest.mark.parametrize("op", [
    lambda d: d["nope"],
    lambda d: d.__delitem__("nope"),
    lambda d: d.update(3),
    lambda d: d.update([3]),
    lambda d: d.update([("a",)]),
    lambda d: d.__setitem__("", d["a"]),
    lambda d: d.__setitem__("x", 3),
])
def test_module_dict_misuse_raises_like_torch(op: Callable[[Any], Any]) -> None:
    ours, theirs = _both(lambda lib: lib.nn.ModuleDict(_dict_source(lib, "ordered")))
    _raises_like(lambda: op(ours), lambda: op(theirs))


# -- ParameterList ---------------------------------------------------------------------


def _param_values(lib: Any) -> list[Any]:
    return [lib.ones(2, 3), lib.nn.Parameter(lib.zeros(4, dtype=lib.float64)), "label", lib.ones(1),
            lib.nn.Parameter(lib.ones(3), requires_grad=False)]


def test_parameter_list_registers_and_prints_like_torch() -> None:
    ours, theirs = _both(lambda lib: lib.nn.ParameterList(_param_values(lib)))
    _same_repr(ours, theirs)
    _same_keys(ours, theirs)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert isinstance(ours[0], nn.Parameter) and ours[0].requires_grad and not ours[4].requires_grad
    assert ours[2] == "label" and len(ours) == 5 and ours[-1] is list(ours)[4]
    sliced = ours[1::2]
    assert type(sliced) is nn.ParameterList and sliced[0] is ours[1] and len(sliced) == 2


def test_parameter_list_append_extend_setitem_like_torch() -> None:
    def build(lib: Any) -> Any:
        pl = lib.nn.ParameterList([lib.ones(2)])
        pl.append(lib.zeros(3)).extend([lib.ones(1, 1), 7])
        pl += [lib.zeros(2, 2)]
        pl[0] = lib.zeros(5)
        return pl

    ours, theirs = _both(build)
    _same_repr(ours, theirs)
    _same_keys(ours, theirs)
    _same_repr(*_both(lambda lib: lib.nn.ParameterList()))


def test_parameter_list_tensor_becomes_parameter_sharing_memory() -> None:
    t = agrad.zeros(3)
    pl = nn.ParameterList([t])
    with agrad.no_grad():
        pl[0].add_(1)
    assert t.tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("op", [
    lambda p: p[2],
    lambda p: p[-3],
    lambda p: p["0"],
    lambda p: p.__setitem__(5, p[0]),
    lambda p: p.extend(p[0]),
    lambda p: p.extend(3),
    lambda p: p(),
    lambda p: p.__setitem__(0, "not a parameter"),
])
def test_parameter_list_misuse_raises_like_torch(op: Callable[[Any], Any]) -> None:
    ours, theirs = _both(lambda lib: lib.nn.ParameterList([lib.ones(2), lib.ones(3)]))
    _raises_like(lambda: op(ours), lambda: op(theirs))


# -- ParameterDict ---------------------------------------------------------------------


def _pdict_source(lib: Any, kind: str) -> Any:
    items = [("w", lib.ones(2, 3)), ("b", lib.nn.Parameter(lib.zeros(3, dtype=lib.float64))), ("note", 1.5)]
    if kind == "dict":
        return dict(items)  # a plain mapping goes in sorted key order
    if kind == "ordered":
        return OrderedDict(items)
    if kind == "parameter_dict":
        return lib.nn.ParameterDict(OrderedDict(items))
    return items


@pytest.mark.parametrize("kind", ["dict", "ordered", "parameter_dict", "pairs"])
def test_parameter_dict_update_order_and_repr_like_torch(kind: str) -> None:
    ours, theirs = _both(lambda lib: lib.nn.ParameterDict(_pdict_source(lib, kind)))
    assert list(ours) == list(theirs)
    _same_keys(ours, theirs)
    _same_repr(ours, theirs)


def test_parameter_dict_mapping_protocol_like_torch() -> None:
    def build(lib: Any) -> list[Any]:
        pd = lib.nn.ParameterDict(OrderedDict([("a", lib.ones(1)), ("b", lib.ones(2)), ("c", lib.ones(3))]))
        seen = [list(pd.keys()), [k for k, _ in pd.items()], [tuple(v.shape) for v in pd.values()],
                list(reversed(pd)), "a" in pd, pd.get("zz", 5)]
        pd.setdefault("d", lib.zeros(4))
        pd.setdefault("a", lib.zeros(9))
        seen.append(pd.popitem()[0])
        seen.append(tuple(pd.pop("b").shape))
        other = pd.fromkeys(["x", "y"], lib.zeros(1)) | pd
        pd |= lib.nn.ParameterDict({"e": lib.ones(5)})
        copy = pd.copy()
        seen += [list(other), list(pd), list(copy), copy["a"] is pd["a"], len(pd)]
        seen.append(list(pd.state_dict()))
        pd.clear()
        seen.append(len(pd))
        return seen

    assert build(agrad) == build(torch)


@pytest.mark.parametrize("op", [
    lambda d: d[1],
    lambda d: d["missing"],
    lambda d: d.__setitem__(2, d["a"]),
    lambda d: d.__delitem__("missing"),
    lambda d: d.update(3),
    lambda d: d.update([1]),
    lambda d: d.update(["abc"]),
    lambda d: d(d["a"]),
])
def test_parameter_dict_misuse_raises_like_torch(op: Callable[[Any], Any]) -> None:
    ours, theirs = _both(lambda lib: lib.nn.ParameterDict({"a": lib.ones(2)}))
    _raises_like(lambda: op(ours), lambda: op(theirs))


def test_parameter_dict_popitem_of_empty_raises_key_error() -> None:
    with pytest.raises(KeyError):
        nn.ParameterDict().popitem()


# -- nesting ---------------------------------------------------------------------------


class _Net:
    """The same nested model in either library: every container kind inside one another."""

    @staticmethod
    def build(lib: Any) -> Any:
        class Net(lib.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.blocks = lib.nn.ModuleList([lib.nn.Sequential(lib.nn.Linear(3, 3), lib.nn.Identity())
                                                 for _ in range(2)])
                self.heads = lib.nn.ModuleDict({"y": lib.nn.Linear(3, 2), "x": lib.nn.Bilinear(3, 3, 1)})
                self.scales = lib.nn.ParameterList([lib.ones(3), lib.ones(3)])
                self.extra = lib.nn.ParameterDict({"shift": lib.zeros(2)})
                self.register_buffer("steps", lib.zeros(1))

            def forward(self, x: Any) -> Any:
                for block, scale in zip(self.blocks, self.scales):
                    x = block(x) * scale
                return self.heads["y"](x) + self.extra["shift"], self.heads["x"](x, x)

        return Net()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_nested_containers_state_dict_and_gradients_match_torch(dtype: str) -> None:
    ours, theirs = _both(_Net.build)
    _same_repr(ours, theirs)
    check_module(ours, theirs, [np.random.default_rng(1).standard_normal((4, 3))], dtype)
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]


def test_containers_follow_to_and_train() -> None:
    ours, theirs = _both(_Net.build)
    load_from_torch(ours, theirs)
    ours.double().eval()
    assert all(p.dtype is agrad.float64 for p in ours.parameters())
    assert not any(m.training for m in ours.modules())
    assert ours.scales[0].dtype is agrad.float64 and isinstance(ours.scales[0], nn.Parameter)


def test_container_deprecated_warns() -> None:
    with pytest.warns(FutureWarning, match="nn.Container"):
        c = nn.Container(fc=nn.Linear(1, 1))
    assert list(c.state_dict()) == ["fc.weight", "fc.bias"]
