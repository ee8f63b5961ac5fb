"""Collectives as schedules of flow batches.

An algorithm turns a collective on one or more groups of chips into a
:class:`Schedule`: concurrent *pipelines*, each a sequence of :class:`Step`\\ s.
Every step is a set of transfers (src chip, dst chip, bytes) that start together
when the previous step of the same pipeline has completed on every chip; steps
are vectorised over all groups of a collective, so a 9,216-chip all-reduce over
one torus axis is 576 rings advancing in lock step, one batch per step.

Sizes follow nccl-tests: all-reduce and all-to-all: bytes per chip; all-gather:
bytes of the gathered output; reduce-scatter: bytes of the full input;
collective-permute and broadcast: bytes each chip sends / the root sends.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from tpusim.topology.base import Axis
from tpusim.topology.base import AxisKind as AxisKind  # re-exported from its old home
from tpusim.vocabulary import Op

#: A registered algorithm's name (:mod:`tpusim.collectives.registry`).
Algorithm = str


class AlgorithmError(ValueError):
    """The algorithm cannot run this collective on this group (wrong shape, wrong op)."""


@dataclass(frozen=True)
class Group:
    """Chips of a collective: ``chips[g, i0, i1, ...]`` is the chip at position
    (i0, i1, ...) of group g; ``axes`` describe the position axes."""

    chips: np.ndarray
    axes: tuple[Axis, ...]

    @property
    def num_groups(self) -> int:
        return int(self.chips.shape[0])

    @property
    def size(self) -> int:
        """Chips per group."""
        return int(np.prod(self.chips.shape[1:]))

    @property
    def on_torus_axes(self) -> bool:
        """Every axis is a torus axis (a wrapped ring or a line)."""
        return all(a.kind in ("ring", "line") for a in self.axes)

    @property
    def flat(self) -> np.ndarray:
        """(groups, size) chips in mixed-radix position order (first axis slowest)."""
        return self.chips.reshape(self.num_groups, self.size)


@dataclass(frozen=True)
class Step:
    """Transfers that start together; ``reduce_bytes`` is what each receiving chip
    must reduce (add) once the step's data has arrived."""

    src: np.ndarray
    dst: np.ndarray
    bytes: np.ndarray
    reduce_bytes: float = 0.0
    route_order: np.ndarray | None = None  # per transfer: torus axis order to route by

    @staticmethod
    def of(
        src: np.ndarray,
        dst: np.ndarray,
        size: float,
        reduce: bool = False,
        route_order: np.ndarray | None = None,
    ) -> Step:
        src, dst = np.ravel(src).astype(np.int64), np.ravel(dst).astype(np.int64)
        return Step(
            src, dst, np.full(src.size, float(size)), float(size) if reduce else 0.0, route_order
        )


@dataclass
class Schedule:
    """Concurrent pipelines of steps, plus what they implement."""

    op: Op
    algorithm: Algorithm
    bytes: float
    group: Group
    pipelines: list[list[Step]] = field(default_factory=list)

    @property
    def num_steps(self) -> int:
        return sum(len(p) for p in self.pipelines)


def bus_factor(op: Op, n: int) -> float:
    """nccl-tests' busbw / algbw factor for ``op`` on ``n`` chips."""
    if n <= 1:
        return 0.0 if op != "broadcast" else 1.0
    return {
        "all-reduce": 2 * (n - 1) / n,
        "all-gather": (n - 1) / n,
        "reduce-scatter": (n - 1) / n,
        "all-to-all": (n - 1) / n,
        "collective-permute": 1.0,
        "broadcast": 1.0,
    }[op]


# -- ring orders and steps along one axis of a group ---------------------------------------
def ring_order(size: int, kind: AxisKind) -> np.ndarray:
    """Positions in ring order: natural on a wrapped axis; folded (0, 2, 4, ..., 5, 3, 1)
    on a line so every ring hop uses each link direction once."""
    if kind == "line":
        return np.concatenate(
            [
                np.arange(0, size, 2),
                np.arange(size - 1 - (size % 2 == 1), 0, -2)
                if size > 1
                else np.zeros(0, dtype=np.int64),
            ]
        ).astype(np.int64)
    return np.arange(size)


def axis_neighbours(
    chips: np.ndarray, axis: int, kind: AxisKind, reverse: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) arrays: every chip sends to its successor in ring order along ``axis``
    (array axis of ``chips``), or predecessor when ``reverse``."""
    order = ring_order(chips.shape[axis], kind)
    nxt = np.roll(order, 1 if reverse else -1)
    return np.take(chips, order, axis=axis), np.take(chips, nxt, axis=axis)


def ring_steps(
    chips: np.ndarray,
    axis: int,
    kind: AxisKind,
    chunk: float,
    count: int,
    reduce: bool,
    directions: Sequence[bool] = (False,),
) -> list[Step]:
    """``count`` identical ring steps along ``axis``; with two directions each carries
    half the chunk in one step (a bidirectional ring)."""
    pairs = [axis_neighbours(chips, axis, kind, reverse=r) for r in directions]
    src = np.concatenate([p[0].ravel() for p in pairs])
    dst = np.concatenate([p[1].ravel() for p in pairs])
    part = chunk / len(directions)
    step = Step(src, dst, np.full(src.size, part), chunk if reduce else 0.0)
    return [step] * count


def bidir_ring_steps(
    chips: np.ndarray, axis: int, kind: AxisKind, shard: float, reduce: bool
) -> list[Step]:
    """Bidirectional ring all-gather along ``axis`` (k chips) in ceil((k-1)/2) steps, or
    with ``reduce`` its mirror, the reduce-scatter; ``shard`` is one chip's block (V/k).

    In step s = 1 .. floor((k-1)/2) every chip sends a whole shard to BOTH ring
    neighbours (the shard that originated s - 1 positions behind it on that side); when
    k is even the antipodal shard goes half each way in one last step. Each direction
    of every ring link carries (k-1)/2 shards: T = ceil((k-1)/2) a + (k-1)/k V/(2W).
    A reduce-scatter chip adds both shards it receives (2 x shard per full step).
    """
    k = chips.shape[axis]
    both = (False, True)
    steps = ring_steps(chips, axis, kind, 2 * shard, (k - 1) // 2, reduce, both)
    if k % 2 == 0:
        steps += ring_steps(chips, axis, kind, shard, 1, reduce, both)
    return steps


def bidir_relay_steps(chips: np.ndarray, axis: int, kind: AxisKind, chunk: float) -> list[Step]:
    """All-to-all relayed along a bidirectional ring (k chips, ``chunk`` = V/k for each
    destination): the chunk for the chip at ring distance d travels the shorter way
    (antipodal: half each way), forwarded one hop per step along that direction only.

    Step j = 1 .. floor(k/2) forwards on each side the chunks still travelling:
    floor((k-1)/2) - j + 1 whole ones (if positive) plus the antipodal half when k
    is even. Each link direction carries k V / 8 in all for even k ((k^2 - 1) V / (8k)
    for odd k): T = floor(k/2) a + k V / (8W) (formulas.md 1.6 with V per chip).
    """
    k = chips.shape[axis]
    whole, half = (k - 1) // 2, 0.5 if k % 2 == 0 else 0.0
    return [
        ring_steps(
            chips, axis, kind, 2 * (max(0, whole - j + 1) + half) * chunk, 1, False, (False, True)
        )[0]
        for j in range(1, k // 2 + 1)
    ]


def snake(chips: np.ndarray) -> np.ndarray:
    """(groups, size) positions in boustrophedon order: consecutive chips are
    neighbours on a torus or mesh."""
    groups, *shape = chips.shape
    if len(shape) <= 1:
        return chips.reshape(groups, -1)
    index = np.indices(shape).reshape(len(shape), -1).T  # rows in C order, last axis fastest
    out = index.copy()
    for axis in range(1, len(shape)):
        flips = out[:, :axis].sum(axis=1) % 2 == 1
        out[flips, axis] = shape[axis] - 1 - out[flips, axis]
    flat_pos = np.ravel_multi_index(out.T, shape)
    return chips.reshape(groups, -1)[:, flat_pos]
