"""Grad mode: ``no_grad``, ``enable_grad``, ``set_grad_enabled``, ``inference_mode``, ``is_grad_enabled``.

As context managers and as decorators (on plain and ``async def``
functions), checked against PyTorch where PyTorch has the same behaviour.  Grad
mode lives in a ``ContextVar``: two tasks interleaving on one event loop (each
suspended inside its own ``with`` block while the other runs) must each see
only their own mode, which a thread-local would get wrong.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import agrad
from tests.helpers import torch

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def restore_grad_mode():
    """Tests below flip the mode with the function form: never leak it into other tests."""
    yield
    agrad.set_grad_enabled(True)
    if torch is not None:
        torch.set_grad_enabled(True)


@pytest.fixture(params=["agrad", "torch"])
def lib(request: pytest.FixtureRequest) -> Any:
    """The library under test: agrad, or PyTorch as the oracle of the same assertions."""
    if request.param == "torch":
        if torch is None:
            pytest.skip("PyTorch (the test oracle) is not installed")
        return torch
    return agrad


def records(lib: Any) -> bool:
    """Whether an op on a tensor requiring grad records a graph right now."""
    x = lib.ones(2, requires_grad=True)
    y = x * 2
    return y.requires_grad and y.grad_fn is not None


# Context managers that set the mode to the given value.
MANAGERS: dict[str, tuple[Callable[[Any], Any], bool]] = {
    "no_grad()": (lambda lib: lib.no_grad(), False),
    "enable_grad()": (lambda lib: lib.enable_grad(), True),
    "set_grad_enabled(False)": (lambda lib: lib.set_grad_enabled(False), False),
    "set_grad_enabled(True)": (lambda lib: lib.set_grad_enabled(True), True),
    "inference_mode()": (lambda lib: lib.inference_mode(), False),
    "inference_mode(True)": (lambda lib: lib.inference_mode(True), False),
    "inference_mode(False)": (lambda lib: lib.inference_mode(False), True),
}


@pytest.mark.parametrize("outer", [True, False], ids=["outside: enabled", "outside: disabled"])
@pytest.mark.parametrize("name", list(MANAGERS))
def test_context_managers_set_and_restore_the_mode(lib, name: str, outer: bool) -> None:
    make, mode = MANAGERS[name]
    lib.set_grad_enabled(outer)
    with make(lib):
        assert lib.is_grad_enabled() is mode
        assert records(lib) is mode
    assert lib.is_grad_enabled() is outer
    assert records(lib) is outer


@pytest.mark.parametrize("name", list(MANAGERS))
def test_mode_is_restored_when_the_block_raises(name: str) -> None:
    make, _ = MANAGERS[name]
    with pytest.raises(KeyError), make(agrad):
        raise KeyError("inside")
    assert agrad.is_grad_enabled()


def test_nesting(lib) -> None:
    with lib.no_grad():
        with lib.enable_grad():
            assert lib.is_grad_enabled()
            with lib.inference_mode():
                assert not lib.is_grad_enabled()
                with lib.set_grad_enabled(True):
                    assert lib.is_grad_enabled()
                assert not lib.is_grad_enabled()
            assert lib.is_grad_enabled()
        assert not lib.is_grad_enabled()
    assert lib.is_grad_enabled()


def test_one_instance_entered_twice() -> None:
    # agrad's managers save the previous mode per entry, so one instance may be
    # re-entered while active (torch's keep a single ``prev`` and do not support this).
    ng = agrad.no_grad()
    with agrad.enable_grad():
        with ng:
            with agrad.enable_grad():
                with ng:
                    assert not agrad.is_grad_enabled()
                assert agrad.is_grad_enabled()
            assert not agrad.is_grad_enabled()
        assert agrad.is_grad_enabled()


def test_set_grad_enabled_function_form(lib) -> None:
    lib.set_grad_enabled(False)
    assert not lib.is_grad_enabled() and not records(lib)
    lib.set_grad_enabled(True)
    assert lib.is_grad_enabled() and records(lib)


@pytest.mark.parametrize("name", ["no_grad()", "enable_grad()", "set_grad_enabled(False)", "set_grad_enabled(True)",
                                  "inference_mode()", "inference_mode(False)"])
@pytest.mark.parametrize("outer", [True, False], ids=["outside: enabled", "outside: disabled"])
def test_decorators_on_plain_functions(lib, name: str, outer: bool) -> None:
    make, mode = MANAGERS[name]
    lib.set_grad_enabled(outer)

    @make(lib)
    def inner(a: int, *, b: int) -> tuple[bool, bool, int]:
        """Docstring kept."""
        return lib.is_grad_enabled(), records(lib), a + b

    # Decorating does not change the mode (set_grad_enabled's constructor is undone).
    assert lib.is_grad_enabled() is outer
    assert inner(1, b=2) == (mode, mode, 3)
    assert inner(1, b=2) == (mode, mode, 3)  # the decorator is reusable
    assert lib.is_grad_enabled() is outer
    assert inner.__name__ == "inner" and inner.__doc__ == "Docstring kept."


@pytest.mark.parametrize("name", ["no_grad", "enable_grad", "inference_mode"])
def test_bare_class_as_decorator(lib, name: str) -> None:
    # torch (>= 2.1) accepts ``@torch.no_grad`` without parentheses.
    mode = name == "enable_grad"
    lib.set_grad_enabled(not mode)

    @getattr(lib, name)
    def inner() -> bool:
        return lib.is_grad_enabled()

    assert inner() is mode
    assert lib.is_grad_enabled() is (not mode)


@pytest.mark.parametrize("name", ["no_grad()", "enable_grad()", "set_grad_enabled(False)", "inference_mode()"])
async def test_decorators_on_async_functions(name: str) -> None:
    # An ``async def`` decorated with a grad-mode manager runs its whole body,
    # across awaits, in that mode (torch's decorators only cover creating the coroutine).
    make, mode = MANAGERS[name]
    outer = not mode
    agrad.set_grad_enabled(outer)

    @make(agrad)
    async def inner() -> list[bool]:
        seen = [agrad.is_grad_enabled()]
        await anyio.lowlevel.checkpoint()
        seen.append(agrad.is_grad_enabled())
        seen.append(records(agrad))
        return seen

    assert agrad.is_grad_enabled() is outer
    assert await inner() == [mode, mode, mode]
    assert agrad.is_grad_enabled() is outer


async def test_backward_restores_the_callers_mode(api) -> None:
    x = agrad.ones(2, requires_grad=True)
    with agrad.no_grad():
        y = x * 2
    assert not y.requires_grad
    z = (x * x).sum()
    with agrad.no_grad():
        # Inside a backward grad mode is create_graph; after it, the caller's mode again.
        (g,) = await api.grad(z, x, create_graph=True)
        assert not agrad.is_grad_enabled()
    assert g.requires_grad
    await api.tensor_backward((x * x).sum())
    assert agrad.is_grad_enabled()


# -- two tasks interleaving on one loop ---------------------------------------------------------------
class Baton:
    """Lets tasks take turns in a fixed order: ``await baton.turn(k)`` waits for turn k."""

    def __init__(self, turns: int) -> None:
        self.events = [anyio.Event() for _ in range(turns + 1)]
        self.events[0].set()

    async def turn(self, k: int) -> None:
        await self.events[k].wait()

    def done(self, k: int) -> None:
        self.events[k + 1].set()


def disabling(variant: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Wrap a task body so it runs with grad disabled, the way ``variant`` says."""
    def wrap(body: Callable[..., Any]) -> Callable[..., Any]:
        if variant == "decorated @no_grad()":
            return agrad.no_grad()(body)

        async def run(*args: Any) -> Any:
            if variant == "set_grad_enabled(False) function form":
                agrad.set_grad_enabled(False)
                return await body(*args)
            cm = {"with no_grad()": agrad.no_grad, "with inference_mode()": agrad.inference_mode,
                  "with set_grad_enabled(False)": lambda: agrad.set_grad_enabled(False)}[variant]()
            with cm:
                return await body(*args)
        return run
    return wrap


VARIANTS = ["with no_grad()", "with inference_mode()", "with set_grad_enabled(False)",
            "set_grad_enabled(False) function form", "decorated @no_grad()"]


@pytest.mark.parametrize("variant", VARIANTS)
async def test_two_interleaved_tasks_each_see_only_their_own_mode(variant: str) -> None:
    rounds = 4
    baton = Baton(2 * rounds)
    x = agrad.ones(2, requires_grad=True)
    log: list[tuple[str, int, bool, bool]] = []

    async def body(name: str, first_turn: int) -> None:
        for i in range(rounds):
            k = first_turn + 2 * i
            await baton.turn(k)
            y = x * 2
            log.append((name, i, agrad.is_grad_enabled(), y.requires_grad and y.grad_fn is not None))
            await anyio.lowlevel.checkpoint()
            baton.done(k)

    without_grad = disabling(variant)(body)

    async with anyio.create_task_group() as tg:
        tg.start_soon(without_grad, "no-grad task", 0)
        tg.start_soon(body, "grad task", 1)

    # The turns alternated: each task ran while the other was suspended mid-block.
    assert [entry[0] for entry in log] == ["no-grad task", "grad task"] * rounds
    for name, _, enabled, recorded in log:
        expected = name == "grad task"
        assert (enabled, recorded) == (expected, expected), (name, variant)
    assert agrad.is_grad_enabled()  # nothing leaked into the parent task


async def test_set_grad_enabled_in_a_task_does_not_affect_its_sibling_or_parent() -> None:
    ready, flipped = anyio.Event(), anyio.Event()
    seen: dict[str, list[bool]] = {"flipper": [], "sibling": []}

    async def flipper() -> None:
        await ready.wait()
        agrad.set_grad_enabled(False)
        seen["flipper"].append(agrad.is_grad_enabled())
        flipped.set()
        await anyio.lowlevel.checkpoint()
        seen["flipper"].append(agrad.is_grad_enabled())

    async def sibling() -> None:
        seen["sibling"].append(agrad.is_grad_enabled())
        ready.set()
        await flipped.wait()
        seen["sibling"].append(agrad.is_grad_enabled())
        seen["sibling"].append(records(agrad))

    async with anyio.create_task_group() as tg:
        tg.start_soon(flipper)
        tg.start_soon(sibling)
    assert seen == {"flipper": [False, False], "sibling": [True, True, True]}
    assert agrad.is_grad_enabled()


async def test_a_task_under_no_grad_while_a_sibling_runs_a_create_graph_backward(api) -> None:
    # The backward sets grad mode (to create_graph) for its own nodes only.
    baton = Baton(3)
    x = agrad.tensor([1.0, 2.0], requires_grad=True)
    seen: dict[str, Any] = {}

    async def quiet() -> None:
        with agrad.no_grad():
            await baton.turn(0)
            seen["before"] = agrad.is_grad_enabled()
            baton.done(0)
            await baton.turn(2)
            seen["after"] = (agrad.is_grad_enabled(), records(agrad))
            baton.done(2)

    async def differentiate() -> None:
        await baton.turn(1)
        (g,) = await api.grad((x * x * x).sum(), x, create_graph=True)
        seen["g"] = (g.tolist(), g.requires_grad, agrad.is_grad_enabled())
        baton.done(1)

    async with anyio.create_task_group() as tg:
        tg.start_soon(quiet)
        tg.start_soon(differentiate)
    assert seen == {"before": False, "g": ([3.0, 12.0], True, True), "after": (False, False)}


@pytest.mark.parametrize("manager", ["no_grad()", "enable_grad()"])
async def test_child_tasks_inherit_the_mode_at_spawn(manager: str) -> None:
    make, mode = MANAGERS[manager]
    seen = []

    async def child() -> None:
        seen.append(agrad.is_grad_enabled())

    agrad.set_grad_enabled(not mode)
    with contextlib.ExitStack() as stack:
        stack.enter_context(make(agrad))
        async with anyio.create_task_group() as tg:
            tg.start_soon(child)
    assert seen == [mode]
    assert agrad.is_grad_enabled() is (not mode)
