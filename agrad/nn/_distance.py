"""Distance functions of nn.functional: cosine_similarity, pairwise_distance, pdist."""

from __future__ import annotations

__all__: list[str] = []
