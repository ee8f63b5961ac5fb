"""Exposed and hidden communication of a run, per collective kind and per role.

A collective is *hidden* while the TensorCore of its chip class computes (a compute
op runs) and *exposed* while it is in flight and nothing computes. At an instant
when ``k`` collectives are exposed together, each is charged ``1/k`` of the time, so
the exposed times of the kinds sum to the step's time with a collective in flight and
no compute; the hidden time of a collective is its whole time under compute (two
collectives hidden under one matmul both count it). Only the SPMD class's ops count
(the class that sets the step in an SPMD program).

Columns (:func:`breakdown_columns`): ``exposed_<kind>_s`` and ``hidden_<kind>_s`` for
each kind of :data:`COLLECTIVE_KINDS` (``all_gather``, ``reduce_scatter``,
``all_reduce``, ``all_to_all``, ``collective_permute``), then the same by purpose:
one pair per registered parallelism role (:func:`purposes`: ``data``, ``fsdp``,
``tensor``, ``expert``, ``pipeline``, ``context`` and any registered since, in
registration order), the role that issued each collective (:attr:`OpRecord.role`,
which the training step builder sets; a collective no role issued counts under its
kind only), in s.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from tpusim.results.ops import OpRecord

COLLECTIVE_KINDS = (
    "all-gather",
    "reduce-scatter",
    "all-reduce",
    "all-to-all",
    "collective-permute",
)
"""The collective kinds the breakdown reports (other kinds count as their own key)."""


def purposes() -> tuple[str, ...]:
    """What a step's collectives are for: the registered roles, in registration order."""
    # here, not at the top: the registry's package loads the builders' model stack,
    # which the commands that never break a step down (a collective) need not pay
    from tpusim.program.builders.roles import ROLES

    return ROLES.names()


def column(side: str, kind: str) -> str:
    """``exposed_all_gather_s`` for ``("exposed", "all-gather")``."""
    return f"{side}_{kind.replace('-', '_')}_s"


def breakdown_columns() -> tuple[str, ...]:
    """Every column :func:`breakdown` fills: the kinds', then the purposes'."""
    keys = (*COLLECTIVE_KINDS, *purposes())
    return tuple(column(side, k) for k in keys for side in ("exposed", "hidden"))


def breakdown(
    ops: Iterable[OpRecord], lo: float = float("-inf"), hi: float = float("inf"), spmd: str = "spmd"
) -> dict[str, float]:
    """Exposed and hidden seconds per collective kind and per purpose of ``ops``
    inside [lo, hi] (see the module docstring); every column of
    :func:`breakdown_columns` is present (a collective no role issued counts under
    its kind only)."""
    compute: list[tuple[float, float]] = []
    comms: list[tuple[float, float, tuple[str, ...]]] = []
    for r in ops:
        if not r.chips.startswith(spmd):
            continue
        start, end = max(r.start_at, lo), min(r.end_at, hi)
        if end <= start:
            continue
        if r.kind != "collective":
            compute.append((start, end))
        elif r.unit == "ici":
            comms.append((start, end, (r.collective or "collective", *filter(None, [r.role]))))
    out = dict.fromkeys(breakdown_columns(), 0.0)
    for (start, end), keys, computing in _segments(_union(compute), comms):
        side = "hidden" if computing else "exposed"
        share = (end - start) if computing else (end - start) / len(keys)
        for key in (k for pair in keys for k in pair):
            out[column(side, key)] = out.get(column(side, key), 0.0) + share
    return out


def _union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The disjoint, sorted union of ``spans``."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _segments(
    busy: list[tuple[float, float]], comms: list[tuple[float, float, tuple[str, ...]]]
) -> list[tuple[tuple[float, float], list[tuple[str, ...]], bool]]:
    """Elementary intervals between successive boundaries of the collectives and of
    the compute union ``busy``, each with the kinds of the collectives in flight and
    whether compute runs in it (constant inside one)."""
    edges = sorted({t for s, e, _ in comms for t in (s, e)} | {t for s, e in busy for t in (s, e)})
    starts = sorted(comms)
    out: list[tuple[tuple[float, float], list[tuple[str, ...]], bool]] = []
    live: list[tuple[float, float, tuple[str, ...]]] = []
    i = j = 0
    for a, b in itertools.pairwise(edges):
        while i < len(starts) and starts[i][0] <= a:
            live.append(starts[i])
            i += 1
        live = [c for c in live if c[1] > a]
        while j < len(busy) and busy[j][1] <= a:
            j += 1
        if live:
            computing = j < len(busy) and busy[j][0] <= a
            out.append(((a, b), [c[2] for c in live], computing))
    return out
