"""Ops: the registry (``_registry``) and the table of primitive ops (``_table``)."""

from agrad._ops import _table  # noqa: F401  - importing the table registers every op
