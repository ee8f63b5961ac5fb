"""One op of a simulated program on one chip class, as the engine reports it."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["OpRecord"]


@dataclass
class OpRecord:
    """One op on one chip class: ``start_at``/``end_at`` in s, ``unit`` that ran it
    (``tensorcore``, ``sparsecore``, ``host``, ``ici`` for a collective, or the name of
    an ICI port the collective's transfers leave by), ``flops`` per chip;
    ``collective`` the kind of a collective (``all-gather``, ...; empty otherwise);
    ``role`` the parallelism role that issued it (:attr:`tpusim.program.ir.Op.role`;
    empty for none)."""

    name: str
    kind: str
    chips: str
    unit: str
    start_at: float
    end_at: float
    flops: float
    collective: str = ""
    role: str = ""
