"""Loud misuse of the two ways to run a backward (Notes [A forgotten await] and
[A blocking call on a loop's thread] in ``agrad/_misuse.py``).

A dropped ``loss.backward()`` is reported at its own line with both fixes, and
fails the test through agrad's pytest plugin: shown on an inner pytest run
(``pytester``), since in this suite the plugin would fail the outer test too.
"""

from __future__ import annotations

import asyncio
import textwrap
import threading

import anyio
import pytest
import trio

import agrad

pytest_plugins = ["pytester"]

FIXES = ("await loss.backward()", "loss.backward_sync()")

INNER = textwrap.dedent("""\
    import asyncio
    import agrad

    def test_forgotten_backward():
        x = agrad.tensor([1.0, 2.0], requires_grad=True)
        loss = (x * x).sum()
        loss.backward()  # line 7: the misuse
        assert x.grad is None  # nothing ran

    def test_forgotten_grad_in_coroutine():
        async def main():
            x = agrad.tensor(3.0, requires_grad=True)
            agrad.autograd.grad(x * x, x)  # line 13
        asyncio.run(main())

    def test_awaited():
        x = agrad.tensor([1.0, 2.0], requires_grad=True)
        asyncio.run((x * x).sum().backward())
        assert x.grad.tolist() == [2.0, 4.0]
""")


def _run_inner(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_inner=INNER)
    return pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", *args)


def test_forgotten_await_fails_the_test_at_its_line(pytester: pytest.Pytester) -> None:
    result = _run_inner(pytester)
    result.assert_outcomes(passed=1, failed=2)
    out = result.stdout.str()
    assert "Tensor.backward() was never awaited (at " in out and "test_inner.py:7)" in out
    assert all(fix in out for fix in FIXES)
    assert "agrad.autograd.grad(...) was never awaited" in out and "test_inner.py:13)" in out
    assert "agrad.autograd.grad_sync(...)" in out


def test_without_the_plugin_the_report_is_a_warning_at_the_line(pytester: pytest.Pytester) -> None:
    result = _run_inner(pytester, "-p", "no:agrad", "-W", "default")
    result.assert_outcomes(passed=3)
    out = result.stdout.str()
    assert "test_inner.py:7: NotAwaitedWarning: Tensor.backward() was never awaited" in out


def test_using_the_unawaited_result_raises_with_the_fixes() -> None:
    x = agrad.tensor(3.0, requires_grad=True)
    with pytest.raises(TypeError, match=r"grad\(\.\.\.\) was never awaited .*`await agrad\.autograd\.grad"):
        (gx,) = agrad.autograd.grad(x * x, x)
    with pytest.raises(TypeError, match=r"functional\.vjp\(\.\.\.\) was never awaited"):
        agrad.autograd.functional.vjp(lambda t: t * t, x)[1]
    _, vjp_fn = agrad.func.vjp(lambda t: t * t, x)
    with pytest.raises(TypeError, match=r"vjp_fn\(\.\.\.\) from agrad\.func\.vjp was never awaited"):
        (gx,) = vjp_fn(agrad.tensor(1.0))


def test_the_awaitable_runs_wherever_a_coroutine_does() -> None:
    x = agrad.tensor([1.0, 2.0], requires_grad=True)

    async def on_asyncio() -> None:
        await (x * x).sum().backward()
        await asyncio.create_task(agrad.autograd.backward((x * x).sum()))
        (g,) = (await asyncio.gather(agrad.autograd.grad((x * x).sum(), x)))[0]
        assert g.tolist() == [2.0, 4.0]

    async def on_trio() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agrad.autograd.backward, (x * x).sum())

    async def on_anyio() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(agrad.autograd.backward, (x * x).sum())

    asyncio.run(agrad.autograd.backward((x * x).sum()))  # 1
    asyncio.run(on_asyncio())  # 2
    trio.run(on_trio)  # 1
    anyio.run(on_anyio)  # 1
    assert x.grad.tolist() == [10.0, 20.0]


def test_a_closed_awaitable_is_not_reported() -> None:
    x = agrad.tensor(1.0, requires_grad=True)
    pending = (x * 2).backward()
    pending.close()
    del pending
    assert x.grad is None


def _call_site(source: str, name: str) -> object:
    """``source`` compiled as a call site of its own (``name`` as its file name): each
    backend's run of a test warns anew, as its site is new."""
    return compile(source, name, "exec")


@pytest.mark.anyio
async def test_blocking_twin_on_a_running_loop_warns_once_per_call_site(anyio_backend: str) -> None:
    x = agrad.tensor([1.0, 2.0], requires_grad=True)
    site = _call_site("(x * x).sum().backward_sync()", f"<backward_sync on {anyio_backend}>")
    with pytest.warns(agrad.BlockingCallWarning, match=r"backward_sync\(\) blocks the event loop") as rec:
        exec(site, {"x": x})
    assert [w.filename for w in rec] == [f"<backward_sync on {anyio_backend}>"]
    for _ in range(2):
        exec(site, {"x": x})  # the same site: no second warning (warnings are errors in this suite)
    with pytest.warns(agrad.BlockingCallWarning, match=r"grad_sync\(\) blocks"):
        exec(_call_site("agrad.autograd.grad_sync((x * x).sum(), x)", f"<grad_sync on {anyio_backend}>"),
             {"x": x, "agrad": agrad})
    assert x.grad.tolist() == [6.0, 12.0]


@pytest.mark.anyio
async def test_blocking_twin_off_the_loop_or_cooperative_does_not_warn() -> None:
    x = agrad.tensor([1.0, 2.0], requires_grad=True)
    await anyio.to_thread.run_sync(lambda: (x * x).sum().backward_sync())
    await agrad.cooperative(lambda: (x * x).sum().backward_sync())
    assert x.grad.tolist() == [4.0, 8.0]


def test_blocking_twin_with_no_loop_does_not_warn() -> None:
    x = agrad.tensor(2.0, requires_grad=True)
    done = threading.Event()

    def worker() -> None:
        (x * x).backward_sync()
        done.set()

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    (x * x).backward_sync()
    assert done.is_set() and x.grad.item() == 8.0


@pytest.mark.anyio
async def test_reentrant_blocking_backward_inside_a_node_does_not_warn() -> None:
    """PyTorch's checkpoint pattern: a custom backward runs a backward of its own; the
    engine already holds the thread, so there is nothing to warn about."""
    class Inner(agrad.autograd.Function):
        @staticmethod
        def forward(ctx, t):  # type: ignore[no-untyped-def]
            ctx.save_for_backward(t)
            return t * 2

        @staticmethod
        def backward(ctx, g):  # type: ignore[no-untyped-def]
            (t,) = ctx.saved_tensors
            with agrad.enable_grad():
                leaf = t.detach().requires_grad_()
                (leaf * leaf).sum().backward_sync()
            return g * 2 + leaf.grad

    x = agrad.tensor([1.0, 3.0], requires_grad=True)
    await Inner.apply(x).sum().backward()
    assert x.grad.tolist() == [4.0, 8.0]
