"""Collective algorithms: one module per algorithm, each turning a collective on a
group of chips into a :class:`~tpusim.collectives.base.Schedule` of flow batches.

``build_schedule`` picks the module (or the default for the group's structure)
and ``run_collective`` (in :mod:`.runner`) simulates it on a network fidelity.
"""

from __future__ import annotations

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
from tpusim.collectives.registry import (
    AlgorithmName,
    algorithm_builder,
    algorithm_names,
    register_algorithm,
)
from tpusim.vocabulary import OPS, Op

__all__ = [
    "OPS",
    "Algorithm",
    "AlgorithmError",
    "AlgorithmName",
    "Group",
    "Op",
    "Schedule",
    "Step",
    "algorithm_builder",
    "algorithm_names",
    "build_schedule",
    "bus_factor",
    "default_algorithm",
    "make_group",
    "register_algorithm",
]

DIRECT_ALL_TO_ALL_MAX_CHIPS = {"torus": 1152, "other": 256}


def default_algorithm(op: Op, group: Group) -> Algorithm:
    """The fastest algorithm tpusim knows for ``op`` on this group's structure (as XLA
    would pick): multi-axis torus on torus axes, hierarchical on Boardfly and pods
    (also over one fully connected Boardfly level, where it exchanges directly: a ring
    over the 32 groups of a 1,024-chip Boardfly puts every chip's step on one global
    link and takes 15x longer), direct permute, and direct all-to-all up to 1,152
    chips on a torus and 256 elsewhere (beyond, level by level: n^2 flows with uneven
    routes make the flow fidelity slow, see README)."""
    torus_axes = all(a.kind in ("ring", "line") for a in group.axes)
    if op == "collective-permute":
        return "direct"
    limit = DIRECT_ALL_TO_ALL_MAX_CHIPS["torus" if torus_axes else "other"]
    if op == "all-to-all" and group.size <= limit:
        return "direct"
    if torus_axes:
        return "torus"
    if len(group.axes) > 1 or group.axes[0].kind == "full":
        return "hierarchical"
    return "bidir-ring"


def build_schedule(
    op: Op,
    size: float,
    group: Group,
    algorithm: Algorithm | None = None,
    pairs: list[tuple[int, int]] | None = None,
) -> Schedule:
    """Schedule of ``op`` with ``size`` bytes (nccl-tests convention) on ``group``.

    Raises AlgorithmError when the algorithm does not fit the op or the group.
    """
    if op not in OPS:
        raise AlgorithmError(f"unknown op '{op}' (choose from {', '.join(OPS)})")
    alg = algorithm or default_algorithm(op, group)
    build = algorithm_builder(alg)
    if op == "collective-permute" and alg != "direct":
        raise AlgorithmError("collective-permute is point to point: use --algorithm direct")
    if pairs and op != "collective-permute":
        raise AlgorithmError("pairs only apply to collective-permute")
    if op == "broadcast" and alg != "direct":
        pipelines = _scatter_then_gather(size, group, alg)
    elif pairs:
        pipelines = build(op, size, group, pairs=pairs)
    else:
        pipelines = build(op, size, group)
    return Schedule(op, alg, size, group, pipelines)


def _scatter_then_gather(size: float, group: Group, alg: Algorithm) -> list[list[Step]]:
    """Broadcast as the root scattering 1/n to every chip, then an all-gather."""
    gather = algorithm_builder(alg)("all-gather", size, group)
    flat, n = group.flat, group.size
    part = size / max(1, len(gather)) / n
    root = np.repeat(flat[:, 0], n - 1)
    scatter = Step.of(root, flat[:, 1:], part)
    return [[scatter, *pipeline] for pipeline in gather]
