"""Ops: the registry (``_registry``) and the op table, one module per family.

Every primitive op is one ``@defop`` entry in one of these modules: forward,
backward rule(s), Tensor methods, test samples and PyTorch reference.  The
modules are imported here, which registers every op and binds its methods;
then the hand-written methods (``_methods``) are bound.

The registry's jobs, one module each: ``_schema`` (the frozen ``OpDef``),
``_dispatch`` (running an op), ``_record`` (recording its node),
``_inplace`` (in-place variants), ``_registry`` (``defop``).
"""

from agrad._ops import (  # noqa: F401
    _aliases,
    _conv,
    _decompositions,
    _elementwise,
    _linalg,
    _methods,
    _numeric,
    _pointwise,
    _pool,
    _random,
    _reductions,
    _scatter,
    _shape,
    _sorting,
    _structure,
    _views,
)

_methods.bind()
