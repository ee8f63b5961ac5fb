"""Exposed and hidden communication of a run, per collective kind.

A collective is *hidden* while the TensorCore of its chip class computes (a compute
op runs) and *exposed* while it is in flight and nothing computes. At an instant
when ``k`` collectives are exposed together, each is charged ``1/k`` of the time, so
the exposed times of the kinds sum to the step's time with a collective in flight and
no compute; the hidden time of a collective is its whole time under compute (two
collectives hidden under one matmul both count it). Only the SPMD class's ops count
(the class that sets the step in an SPMD program).

Columns (:data:`BREAKDOWN_COLUMNS`): ``exposed_<kind>_s`` and ``hidden_<kind>_s`` for
each kind of :data:`COLLECTIVE_KINDS` (``all_gather``, ``reduce_scatter``,
``all_reduce``, ``all_to_all``, ``collective_permute``), in s.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from tpusim.results.simulation import OpRecord

COLLECTIVE_KINDS = (
    "all-gather",
    "reduce-scatter",
    "all-reduce",
    "all-to-all",
    "collective-permute",
)
"""The collective kinds the breakdown reports (other kinds count as their own key)."""


def column(side: str, kind: str) -> str:
    """``exposed_all_gather_s`` for ``("exposed", "all-gather")``."""
    return f"{side}_{kind.replace('-', '_')}_s"


BREAKDOWN_COLUMNS = tuple(
    column(side, k) for k in COLLECTIVE_KINDS for side in ("exposed", "hidden")
)


def breakdown(
    ops: Iterable[OpRecord], lo: float = float("-inf"), hi: float = float("inf"), spmd: str = "spmd"
) -> dict[str, float]:
    """Exposed and hidden seconds per collective kind of ``ops`` inside [lo, hi]
    (see the module docstring); every column of :data:`BREAKDOWN_COLUMNS` is present."""
    compute: list[tuple[float, float]] = []
    comms: list[tuple[float, float, str]] = []
    for r in ops:
        if not r.chips.startswith(spmd):
            continue
        start, end = max(r.start_at, lo), min(r.end_at, hi)
        if end <= start:
            continue
        if r.kind != "collective":
            compute.append((start, end))
        elif r.unit == "ici":
            comms.append((start, end, r.collective or "collective"))
    out = dict.fromkeys(BREAKDOWN_COLUMNS, 0.0)
    for (start, end), kinds, computing in _segments(_union(compute), comms):
        for kind in kinds:
            side = "hidden" if computing else "exposed"
            share = (end - start) if computing else (end - start) / len(kinds)
            out[column(side, kind)] = out.get(column(side, kind), 0.0) + share
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
    busy: list[tuple[float, float]], comms: list[tuple[float, float, str]]
) -> list[tuple[tuple[float, float], list[str], bool]]:
    """Elementary intervals between successive boundaries of the collectives and of
    the compute union ``busy``, each with the kinds of the collectives in flight and
    whether compute runs in it (constant inside one)."""
    edges = sorted({t for s, e, _ in comms for t in (s, e)} | {t for s, e in busy for t in (s, e)})
    starts = sorted(comms)
    out: list[tuple[tuple[float, float], list[str], bool]] = []
    live: list[tuple[float, float, str]] = []
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
