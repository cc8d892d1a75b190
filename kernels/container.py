"""TVM's container types (``tvm.container`` / ``tvm.ir.container``): ``Map`` and ``Array`` are the
Python dict and list the core returns where TVM returns its own containers."""

from __future__ import annotations


class Map(dict):
    """A mapping returned by the core (e.g. ``te.schedule.InferBound``): a dict keyed by nodes,
    compared by identity as TVM's maps are."""

    def items(self):  # TVM's Map.items() is a list of pairs
        return list(super().items())


class Array(list):
    """A sequence returned by the core (TVM's ``Array``)."""
