"""Collective algorithms: one module per algorithm, each turning a collective on a
group of chips into a :class:`~tpusim.collectives.base.Schedule` of flow batches.

``build_schedule`` builds the named algorithm, or with ``auto`` the fastest predicted
one (:mod:`.select`); :func:`tpusim.engine.run_collective` simulates it on a network
fidelity.
"""

from __future__ import annotations

from typing import cast

import numpy as np

from tpusim.collectives.base import (
    Algorithm,
    AlgorithmError,
    Group,
    Schedule,
    Step,
    bus_factor,
)
from tpusim.collectives.groups import make_group
from tpusim.collectives.registry import ALGORITHMS, AlgorithmName, CollectiveAlgorithm
from tpusim.collectives.select import AUTO, AUTO_MAX_CHIPS, Predictor, affordable, choose
from tpusim.vocabulary import OPS, Op

__all__ = [
    "ALGORITHMS",
    "AUTO",
    "OPS",
    "Algorithm",
    "AlgorithmError",
    "AlgorithmName",
    "CollectiveAlgorithm",
    "Group",
    "Op",
    "Predictor",
    "Schedule",
    "Step",
    "build_schedule",
    "bus_factor",
    "default_algorithm",
    "fewest_sends_per_chip",
    "make_group",
]


DEFAULT_DIRECT_MAX_CHIPS = 256
"""Largest group (chips) whose all-to-all the structural default runs ``direct`` (its
n^2 transfers; past it, the axis-by-axis default). Used only without a cost model or
past ``AUTO_MAX_CHIPS`` (assumption; a speed limit, not a physical one)."""


def default_algorithm(op: Op, group: Group) -> Algorithm:
    """A structural guess for when no cost model is at hand (``build_schedule`` without a
    predictor): direct permute and small all-to-all, multi-axis torus on torus axes,
    hierarchical on Boardfly and pods, else the bidirectional ring. With a topology and
    a cost model, ``auto`` (:mod:`tpusim.collectives.select`) picks by predicted time."""
    if op == "collective-permute":
        return "direct"
    if op == "all-to-all" and group.size <= DEFAULT_DIRECT_MAX_CHIPS:
        return "direct"
    if group.on_torus_axes:
        return "torus"
    if len(group.axes) > 1 or group.axes[0].kind == "full":
        return "hierarchical"
    return "bidir-ring"


def fewest_sends_per_chip(op: str, n: int, algorithm: str | None = None) -> int:
    """Fewest transfers a chip of a group of ``n`` sends over ``op`` under ``algorithm``
    (each is at least one packet at the packet fidelity): its critical-path steps or its
    share of the declared transfers, from the cost class. With ``auto`` (or None), the
    most over every algorithm that runs ``op``, since ``auto`` may simulate any of them
    (an all-pairs candidate on 1,152 chips: 2,302 per chip)."""
    if algorithm in (None, AUTO):
        names = [name for name, entry in ALGORITHMS.items() if op in entry.cost.ops]
    else:
        names = [algorithm] if algorithm in ALGORITHMS.names() else []
    costs = [ALGORITHMS.get(name).cost for name in names]
    known = cast(Op, op)  # an op no algorithm runs has no cost class: 0
    return max(
        (
            max(cost.min_steps(known, n), cost.transfers(known, n) // max(n, 1))
            for cost in costs
            if op in cost.ops
        ),
        default=0,
    )


def build_schedule(
    op: Op,
    size: float,
    group: Group,
    algorithm: Algorithm | None = None,
    pairs: list[tuple[int, int]] | None = None,
    predictor: Predictor | None = None,
) -> Schedule:
    """Schedule of ``op`` with ``size`` bytes (nccl-tests convention) on ``group``.

    ``algorithm`` None or ``auto``: with a ``predictor`` the fastest predicted of every
    registered algorithm that declares it supports it
    (:func:`tpusim.collectives.select.choose`, pruning by cost bounds),
    without one, or on a group of more than ``AUTO_MAX_CHIPS``, :func:`default_algorithm`.
    Raises AlgorithmError when the algorithm does not fit the op or the group.
    """
    if op not in OPS:
        raise AlgorithmError(f"unknown op '{op}' (choose from {', '.join(OPS)})")
    if pairs and op != "collective-permute":
        raise AlgorithmError("pairs only apply to collective-permute")
    if algorithm not in (None, AUTO):
        return _build_named(op, size, group, algorithm, pairs)
    if predictor is None or group.size > AUTO_MAX_CHIPS:
        return _build_named(op, size, group, default_algorithm(op, group), pairs)
    torus_axes = group.on_torus_axes
    candidates = [
        (name, entry.cost)
        for name, entry in ALGORITHMS.items()
        if entry.cost.supports(op, torus_axes) and affordable(entry.cost, op, group)
    ]

    def build(name: str) -> Schedule:
        return _build_named(op, size, group, name, pairs)

    return choose(op, size, group, candidates, build, predictor)[0]


def _build_named(
    op: Op, size: float, group: Group, alg: Algorithm, pairs: list[tuple[int, int]] | None
) -> Schedule:
    entry = ALGORITHMS.get(alg)
    build = entry.build
    if op == "collective-permute" and not entry.supports(op):
        point_to_point = " or ".join(ALGORITHMS.names(where=lambda e: e.supports(op)))
        raise AlgorithmError(
            f"collective-permute is point to point: use the {point_to_point} algorithm"
        )
    if pairs:
        return Schedule(op, alg, size, group, build(op, size, group, pairs=pairs))
    if op == "broadcast" and entry.broadcast_fallback:
        try:
            return Schedule(op, alg, size, group, build(op, size, group))
        except ValueError:  # no broadcast of its own: scatter, then its all-gather
            return Schedule(op, alg, size, group, _scatter_then_gather(size, group, alg))
    return Schedule(op, alg, size, group, build(op, size, group))


def _scatter_then_gather(size: float, group: Group, alg: Algorithm) -> list[list[Step]]:
    """Broadcast as the root scattering 1/n to every chip, then an all-gather."""
    gather = ALGORITHMS.get(alg).build("all-gather", size, group)
    flat, n = group.flat, group.size
    part = size / max(1, len(gather)) / n
    root = np.repeat(flat[:, 0], n - 1)
    scatter = Step.of(root, flat[:, 1:], part)
    return [[scatter, *pipeline] for pipeline in gather]
