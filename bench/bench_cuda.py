"""CUDA benchmarks: agrad on a GPU (CuPy) next to PyTorch on the same GPU.

Two measurements, in one process, printed as tables:

* **MLP training step** — forward, cross-entropy, backward and an SGD update
  of a 1024-4096-4096-10 ReLU MLP, batch 512, float32, on the device: agrad
  awaited, agrad blocking and PyTorch (``torch.cuda``), each step ended by a
  device synchronize so the clock sees the kernels.  Harness block timing
  (A B C … C B A), medians and ratios to PyTorch; gradients are checked to
  agree with each other (and with the CPU) before timing.
* **responsiveness** — a 1 ms ticker task runs on the event loop while one
  large backward (the MLP at batch 16384) runs on the device: agrad awaited
  (kernels launched on the device's engine stream, completion awaited through
  a stream callback, Note [Engine streams]) against the blocking twin called
  in the coroutine.  Reported: the backward's wall time and the lateness
  p50 / p99 / max of the ticks due while it ran, medians over samples.

Run ``python bench/bench_cuda.py`` on a machine with a CUDA GPU and CuPy
(``pip install -e '.[cuda,bench]'`` and ``torch`` with CUDA for the peer).
``--device fake:0`` runs the same code on the test suite's CPU-backed fake
device (PyTorch then runs on the CPU): a smoke run of the script, not a
measurement.  Nothing here asserts on timings.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import _harness as H  # noqa: E402

import agrad  # noqa: E402
import agrad.nn.functional as F  # noqa: E402

TICK = 0.001
SIZES = (1024, 4096, 4096, 10)


def _params(rng: np.random.Generator, sizes: Sequence[int]) -> list[np.ndarray]:
    out = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        out += [(rng.standard_normal((a, b)) / np.sqrt(a)).astype(np.float32), np.zeros(b, np.float32)]
    return out


def _data(rng: np.random.Generator, batch: int) -> tuple[np.ndarray, np.ndarray]:
    return rng.standard_normal((batch, SIZES[0])).astype(np.float32), rng.integers(0, SIZES[-1], batch)


def _agrad_loss(ps: Sequence[agrad.Tensor], x: agrad.Tensor, y: agrad.Tensor) -> agrad.Tensor:
    h = x
    for i in range(0, len(ps), 2):
        h = h @ ps[i] + ps[i + 1]
        if i + 2 < len(ps):
            h = h.relu()
    return F.cross_entropy(h, y)


class AgradMLP:
    def __init__(self, dev: str, params: Sequence[np.ndarray], x: np.ndarray, y: np.ndarray) -> None:
        self.dev = agrad.device(dev)
        self.ps: list[Any] = [agrad.tensor(p, device=dev, requires_grad=True) for p in params]  # .grad read and reset
        self.x = agrad.tensor(x, device=dev)
        self.y = agrad.tensor(y, device=dev)

    def sync(self) -> None:
        if self.dev.type == "cuda":
            agrad.cuda.synchronize(self.dev)

    def loss(self) -> agrad.Tensor:
        return _agrad_loss(self.ps, self.x, self.y)

    def update(self) -> None:
        with agrad.no_grad():
            for p in self.ps:
                p.sub_(p.grad * 0.01)
                p.grad = None

    def grads(self) -> list[np.ndarray]:
        return [p.grad.cpu().numpy() for p in self.ps]

    def step_sync(self) -> float:
        t0 = H.clock()
        self.loss().backward_sync()
        self.update()
        self.sync()
        return H.clock() - t0

    async def step_async(self) -> float:
        t0 = H.clock()
        await self.loss().backward()
        self.update()
        self.sync()
        return H.clock() - t0


class TorchMLP:
    def __init__(self, dev: str, params: Sequence[np.ndarray], x: np.ndarray, y: np.ndarray) -> None:
        import torch

        self.torch = torch
        self.dev = torch.device(dev)
        self.ps: list[Any] = [torch.tensor(p, device=self.dev, requires_grad=True) for p in params]
        self.x = torch.tensor(x, device=self.dev)
        self.y = torch.tensor(y, device=self.dev)

    def sync(self) -> None:
        if self.dev.type == "cuda":
            self.torch.cuda.synchronize(self.dev)

    def loss(self) -> Any:
        h = self.x
        for i in range(0, len(self.ps), 2):
            h = h @ self.ps[i] + self.ps[i + 1]
            if i + 2 < len(self.ps):
                h = h.relu()
        return self.torch.nn.functional.cross_entropy(h, self.y)

    def grads(self) -> list[np.ndarray]:
        return [p.grad.cpu().numpy() for p in self.ps]

    def step(self) -> float:
        t0 = H.clock()
        self.loss().backward()
        with self.torch.no_grad():
            for p in self.ps:
                p.sub_(p.grad * 0.01)
                p.grad = None
        self.sync()
        return H.clock() - t0


def _torch_device(dev: str) -> str | None:
    try:
        import torch
    except ImportError:
        return None
    if dev.startswith("cuda"):
        return dev if torch.cuda.is_available() else None
    return "cpu"


def training_step(dev: str, batch: int, warmup: int, repeats: int, rounds: int) -> None:
    rng = np.random.default_rng(0)
    params, (x, y) = _params(rng, SIZES), _data(rng, batch)
    agr = AgradMLP(dev, params, x, y)
    tdev = _torch_device(dev)
    tor = TorchMLP(tdev, params, x, y) if tdev else None
    # Same gradients first: agrad on the device, agrad on the CPU, PyTorch.
    grads = {}
    for label, m in (("agrad " + dev, agr), ("agrad cpu", AgradMLP("cpu", params, x, y))):
        m.loss().backward_sync()
        grads[label] = m.grads()
        for p in m.ps:
            p.grad = None
    if tor is not None:
        tor.loss().backward()
        grads[f"torch {tdev}"] = tor.grads()
        for t in tor.ps:
            t.grad = None
    H.check_same_gradients("MLP step", grads, rtol=2e-3, atol=2e-5)
    loop = asyncio.new_event_loop()
    systems = [H.System("agrad await", agr.step_async, is_async=True), H.System("agrad blocking", agr.step_sync)]
    if tor is not None:
        systems.append(H.System(f"torch {tdev}", tor.step))
    try:
        results = H.measure(systems, warmup, repeats, pause=0.2, rounds=rounds)
    finally:
        loop.close()
    refs = {"/ torch": systems[-1].label} if tor is not None else {}
    print(H.format_table(f"MLP training step {'-'.join(map(str, SIZES))}, batch {batch}, float32, on {dev}",
                         "ms", 1e3, results, refs))


async def _ticker(ticks: list[tuple[float, float]], stop: asyncio.Event) -> None:
    while not stop.is_set():
        t0 = H.clock()
        await asyncio.sleep(TICK)
        t1 = H.clock()
        ticks.append((t1, t1 - t0 - TICK))


async def _ticked(model: AgradMLP, blocking: bool) -> tuple[float, list[float]]:
    loss = model.loss()
    model.sync()
    ticks: list[tuple[float, float]] = []
    stop = asyncio.Event()
    ticker = asyncio.create_task(_ticker(ticks, stop))
    await asyncio.sleep(0.02)
    with H.blocking_on_purpose():
        t0 = H.clock()
        if blocking:
            loss.backward_sync()
        else:
            await loss.backward()
        model.sync()
        t1 = H.clock()
    await asyncio.sleep(0.01)
    stop.set()
    await ticker
    for p in model.ps:
        p.grad = None
    return t1 - t0, [late for wake, late in ticks if wake >= t0 and wake - late <= t1]


def _pct(xs: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs), q)) if xs else float("nan")


def responsiveness(dev: str, batch: int, repeats: int) -> None:
    rng = np.random.default_rng(1)
    model = AgradMLP(dev, _params(rng, SIZES), *_data(rng, batch))
    stats: dict[str, list[tuple[float, float, float, float, int]]] = {"await": [], "blocking": []}
    runner: Callable[[Any], Any] = asyncio.new_event_loop().run_until_complete
    for blocking in (False, True):  # warm-up
        runner(_ticked(model, blocking))
    for i in range(repeats):
        for mode in (("await", "blocking") if i % 2 == 0 else ("blocking", "await")):
            wall, late = runner(_ticked(model, mode == "blocking"))
            stats[mode].append((wall, _pct(late, 50), _pct(late, 99), max(late, default=float("nan")), len(late)))
    print(f"responsiveness: 1 ms ticker during one backward of the MLP at batch {batch} on {dev}  "
          f"[ms, median of {repeats} samples]")
    print(f"  {'mode':<16}{'backward':>10}{'ticks':>7}{'late p50':>10}{'late p99':>10}{'late max':>10}")
    for mode, rows in stats.items():
        med = [statistics.median(r[k] for r in rows) for k in range(5)]
        print(f"  {'agrad ' + mode:<16}{med[0] * 1e3:>10.2f}{med[4]:>7.0f}{med[1] * 1e3:>10.3f}"
              f"{med[2] * 1e3:>10.3f}{med[3] * 1e3:>10.3f}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda:0", help="cuda:N (default cuda:0), or fake:0 for a smoke run")
    parser.add_argument("--quick", action="store_true", help="small sizes and few samples: a smoke run")
    args = parser.parse_args(argv)
    if args.device.startswith("fake"):
        from tests.devices.fake_backend import FakeBackend
        agrad._backends.register_backend(FakeBackend())
    elif not agrad.cuda.is_available():
        print("bench_cuda: no CUDA device here (CuPy and a GPU are needed); nothing measured.")
        return 0
    global SIZES
    if args.quick or args.device.startswith("fake"):
        SIZES = (64, 128, 128, 10)
    with contextlib.suppress(ImportError):  # the peer, if installed: imported now, the header gives its threads
        import torch  # noqa: F401
    print(H.machine_info())
    print(f"device     {args.device}")
    quick = args.quick or args.device.startswith("fake")
    train_batch, resp_batch = (64, 256) if quick else (512, 16384)
    H.progress(1, 2, f"MLP training step {'-'.join(map(str, SIZES))}, batch {train_batch}, on {args.device}")
    training_step(args.device, train_batch, warmup=2 if quick else 10, repeats=3 if quick else 30,
                  rounds=1 if quick else 2)
    H.progress(2, 2, f"responsiveness: a 1 ms ticker during a backward at batch {resp_batch} on {args.device}")
    responsiveness(args.device, resp_batch, repeats=2 if quick else 10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
