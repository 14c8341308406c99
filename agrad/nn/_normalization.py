"""Normalisation functions of nn.functional: batch_norm, group_norm, instance_norm, rms_norm, normalize..."""

from __future__ import annotations

__all__: list[str] = []
