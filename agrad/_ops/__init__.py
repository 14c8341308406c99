"""Ops: the registry (``_registry``) and the op table, one module per family.

Every primitive op is one ``@defop`` entry in one of these modules: forward,
backward rule(s), Tensor methods, test samples and PyTorch reference.  The
modules are imported here, which registers every op and binds its methods.
"""

from agrad._ops import _elementwise, _linalg, _reductions, _shape, _views  # noqa: F401
