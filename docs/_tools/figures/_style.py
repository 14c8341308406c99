"""What the figure scripts share: colours, the figure width, and a deterministic PNG writer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["COLORS", "IMAGES", "WIDTH_IN", "DPI", "save"]

IMAGES = Path(__file__).resolve().parents[2] / "images"  # docs/images
WIDTH_IN, DPI = 12.0, 100  # 1200 px wide

COLORS = {
    "worker": "#1f77b4",     # the loop's CPU worker running an awaited backward
    "other": "#9467bd",      # another request's backward, on the same worker
    "ticker": "#2ca02c",     # other coroutines on the loop
    "kernel": "#ff7f0e",     # kernels in the kernel pool's threads
    "blocking": "#d62728",   # a blocking twin holding the loop
    "device": "#8c564b",     # device workers and streams
    "box": "#f4f4f4",
    "edge": "#444444",
}


def save(fig: Any, path: Path) -> None:
    """Write ``fig`` as a PNG with no metadata that changes between runs or versions."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, metadata={"Software": None})
