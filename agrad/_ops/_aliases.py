"""PyTorch's other spellings of existing ops: the torch-level in-place
functions (``torch.exp_``), torch-level forms of Tensor functions, the
complex-number helpers that are no-ops on agrad's real tensors, a few
operators, and the global flags agrad only stores and reports.

Nothing here computes anything of its own: each name calls an existing
function or method (or, for ``angle``, is one small table entry), so its
values, dtypes, errors and gradients are those of what it calls.
"""

from __future__ import annotations

from typing import Any

# The public names of this family (star-imported by ``agrad/__init__.py``).
__all__: list[str] = []

# Tensor methods of this family that are not one entry's ``methods=``
# (composites, aliases with another signature); bound by ``_methods.bind``.
METHODS: dict[str, Any] = {}
