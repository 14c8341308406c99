"""nn.functional's convolution, pooling and resampling functions, on the op table's conv and pool entries."""

from __future__ import annotations

__all__: list[str] = []
