"""Train a small classifier with agrad: one training loop, driven awaited and blocking.

The model, the data, the loss, the optimizer and the learning-rate schedule
are PyTorch's API with ``torch`` renamed ``agrad``.  The loop is written once,
as a generator that yields each step's loss at the point where its backward
must run, and two short drivers run it:

1. ``train_awaited``: ``await loss.backward()`` inside ``asyncio.run``, the
   form for code that lives on an event loop (a server adapting a model per
   request): the backward hands the loop back every time slice.
2. ``train_blocking``: ``loss.backward_sync()``, the form for scripts and
   threads: the same engine, no event loop.

Both start from the same seed, so they print the same losses.  The task:
three interleaved spirals in the plane (300 points), classified by an MLP
2-64-64-3 with ReLU, cross-entropy, Adam with a cosine schedule, mini-batches
of 60 drawn by ``agrad.randperm``.  Runs in seconds::

    python examples/training.py                     # both forms, 300 steps
    python examples/training.py --steps 50 --form blocking
    python examples/training.py --plot docs/images/loss_curve.png

``--plot`` draws the loss curve with matplotlib (``pip install 'agrad[bench]'``).
"""

from __future__ import annotations

import argparse
import asyncio
import math
from collections.abc import Callable, Iterator, Sequence

import numpy as np

import agrad
from agrad import nn

N_CLASSES, PER_CLASS, BATCH = 3, 100, 60


def make_spirals(seed: int = 0) -> tuple[agrad.Tensor, agrad.Tensor]:
    """Three spiral arms with a little noise: inputs (300, 2) float32 and labels (300,) int64."""
    rng = np.random.default_rng(seed)
    radius = np.tile(np.linspace(0.0, 1.0, PER_CLASS), N_CLASSES)
    labels = np.repeat(np.arange(N_CLASSES), PER_CLASS)
    angle = labels * 2 * np.pi / N_CLASSES + radius * 4 + rng.normal(scale=0.2, size=radius.shape)
    points = np.stack([radius * np.sin(angle), radius * np.cos(angle)], axis=1)
    return agrad.tensor(points, dtype=agrad.float32), agrad.tensor(labels)


def make_model() -> nn.Module:
    """An MLP 2-64-64-3 with ReLU, PyTorch's default initialisation."""
    return nn.Sequential(
        nn.Linear(2, 64), nn.ReLU(),
        nn.Linear(64, 64), nn.ReLU(),
        nn.Linear(64, N_CLASSES),
    )


def training_steps(model: nn.Module, x: agrad.Tensor, y: agrad.Tensor, steps: int) -> Iterator[agrad.Tensor]:
    """The training loop, written once for both drivers.

    Yields each step's loss; the driver runs its backward before asking for the
    next, and the optimizer and scheduler steps run when it does.  This is the
    whole of PyTorch's loop with ``loss.backward()`` lifted out.
    """
    model.train()
    loss_fn = nn.CrossEntropyLoss()
    optimizer = agrad.optim.Adam(model.parameters(), lr=1e-2)
    scheduler = agrad.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
    batches_per_epoch = len(x) // BATCH
    for step in range(steps):
        if step % batches_per_epoch == 0:
            order = agrad.randperm(len(x))
        index = order[step % batches_per_epoch * BATCH:][:BATCH]
        optimizer.zero_grad()
        loss = loss_fn(model(x[index]), y[index])
        yield loss  # the driver runs loss's backward here
        optimizer.step()
        scheduler.step()


def train_blocking(model: nn.Module, x: agrad.Tensor, y: agrad.Tensor, steps: int) -> list[float]:
    """Drive the loop with ``loss.backward_sync()``; the losses, one per step."""
    losses = []
    for loss in training_steps(model, x, y, steps):
        loss.backward_sync()
        losses.append(loss.item())
    return losses


async def train_awaited(model: nn.Module, x: agrad.Tensor, y: agrad.Tensor, steps: int) -> list[float]:
    """Drive the loop with ``await loss.backward()``; the losses, one per step."""
    losses = []
    for loss in training_steps(model, x, y, steps):
        await loss.backward()
        losses.append(loss.item())
    return losses


def accuracy(model: nn.Module, x: agrad.Tensor, y: agrad.Tensor) -> float:
    """The fraction of points classified right, in eval mode and without recording a graph."""
    model.eval()
    with agrad.no_grad():
        return (model(x).argmax(dim=1) == y).float().mean().item()


FORMS: dict[str, Callable[[nn.Module, agrad.Tensor, agrad.Tensor, int], list[float]]] = {
    "awaited": lambda *args: asyncio.run(train_awaited(*args)),
    "blocking": train_blocking,
}


def plot(curves: dict[str, list[float]], path: str) -> None:
    """Draw the loss curves (log scale) to ``path``; matplotlib is imported only here."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.6), layout="constrained")
    for (form, losses), style in zip(curves.items(), ("-", "--")):
        ax.plot(losses, style, label=form)
    ax.set(xlabel="step", ylabel="cross-entropy (mini-batch)", yscale="log",
           title="MLP 2-64-64-3 on three spirals, Adam + cosine schedule")
    ax.legend(title="backward")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"plot: {path}")


def main(argv: Sequence[str] | None = None) -> dict[str, list[float]]:
    """Train once per form from the same seed; print losses and accuracy; the losses by form."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300, help="optimizer steps per form (default 300)")
    parser.add_argument("--form", choices=[*FORMS, "both"], default="both", help="which driver (default both)")
    parser.add_argument("--every", type=int, help="print the loss every this many steps (default steps/10)")
    parser.add_argument("--plot", metavar="PATH", help="write the loss curves to PATH (needs matplotlib)")
    args = parser.parse_args(argv)
    every = args.every or max(1, math.ceil(args.steps / 10))
    x, y = make_spirals()
    curves = {}
    for form in FORMS if args.form == "both" else [args.form]:
        agrad.manual_seed(0)  # the same initial weights and batches for every form
        model = make_model()
        losses = FORMS[form](model, x, y, args.steps)
        for step in sorted({*range(0, args.steps, every), args.steps - 1}):
            print(f"{form:8} step {step:4d}  loss {losses[step]:.4f}")
        print(f"{form:8} accuracy {accuracy(model, x, y):.1%}")
        curves[form] = losses
    if len(curves) == 2:
        print("awaited and blocking losses equal:", curves["awaited"] == curves["blocking"])
    if args.plot:
        plot(curves, args.plot)
    return curves


if __name__ == "__main__":
    main()
