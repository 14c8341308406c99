"""Helpers for modules' state dicts (mirrors ``torch.nn.modules.utils``).

    >>> sd = {"module.fc.weight": agrad.zeros(1)}
    >>> agrad.nn.modules.utils.consume_prefix_in_state_dict_if_present(sd, "module.")
    >>> list(sd)
    ['fc.weight']
"""

from __future__ import annotations

from typing import Any

__all__ = ["consume_prefix_in_state_dict_if_present"]


def consume_prefix_in_state_dict_if_present(state_dict: dict[str, Any], prefix: str) -> None:
    """Strip ``prefix`` from the keys of ``state_dict`` (and of its ``_metadata``) in place, if any:
    a checkpoint of a wrapped model (``"module."`` keys) then loads into the bare model."""
    for key in list(state_dict):
        if key.startswith(prefix):
            state_dict[key[len(prefix):]] = state_dict.pop(key)
    metadata = getattr(state_dict, "_metadata", None)
    if metadata is not None:
        for key in list(metadata):
            # '' is the wrapper's own entry, kept; 'module' and 'module.xx' lose the prefix
            if key and (key == prefix.replace(".", "") or key.startswith(prefix)):
                metadata[key[len(prefix):]] = metadata.pop(key)
