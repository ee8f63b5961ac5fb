"""The TensorCore's order of a scheduled HLO module: :class:`CoreOrder`.

A module XLA has scheduled (``HloModule ..., is_scheduled=true``, as every compiled
TPU module is) lists each computation's instructions in the order the TensorCore
runs them: XLA's latency-hiding scheduler chose that order to place each asynchronous
``-start`` early and its ``-done`` late, with compute between them. The replay keeps
it: every op that holds the TensorCore (a compute op, a synchronous collective or host
transfer) comes after the one before it in the module's order; an asynchronous op
(``overlap``: a ``-start``) is issued at its position, after the TensorCore ops before
it, and runs beside the compute that follows; the TensorCore waits for it at its
``-done``, so every TensorCore op after the ``-done`` comes after it, whether or not
it uses its result. Loop bodies, branches and calls run at their call site, in the
walk's order (:func:`~tpusim.program.hlo.callgraph.walk`). A module without
``is_scheduled=true`` runs by its data dependencies alone (each op once its operands
are ready, the TensorCore taking ready ops first come, first served).
"""

from __future__ import annotations

from collections.abc import Iterable

from tpusim.program.ir import Op

Deps = frozenset[str]


def holds_core(op: Op) -> bool:
    """Whether ``op`` holds the TensorCore while it runs (all but asynchronous
    collectives and host transfers, which run on the DMA engines beside it)."""
    return not (op.overlap and op.kind in ("collective", "host_transfer"))


class CoreOrder:
    """The ops the next op of a scheduled module must wait for, besides its operands:
    the last TensorCore op issued and the asynchronous ops whose ``-done`` the
    TensorCore has passed since (the module doc). ``scheduled=False``: none (data
    dependencies only)."""

    def __init__(self, scheduled: bool) -> None:
        self.scheduled = scheduled
        self._frontier: Deps = frozenset()

    def after(self, before: Iterable[str]) -> tuple[str, ...]:
        """The ``after`` of an op issued now whose operands wait for ``before``."""
        return tuple(sorted(self._frontier.union(before)))

    def issued(self, ops: Iterable[Op]) -> None:
        """``ops`` were issued in this order: the TensorCore ops among them become
        what the next op waits for."""
        for op in ops:
            if self.scheduled and holds_core(op):
                self._frontier = frozenset({op.name})

    def waited(self, deps: Deps) -> None:
        """The TensorCore passed a ``-done`` whose operand waits for ``deps``: every
        later op waits for them too."""
        if self.scheduled:
            self._frontier = self._frontier | deps
