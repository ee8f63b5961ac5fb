"""Building blocks shared by the algorithms: one phase of a collective along one axis.

A phase runs on every line of chips along one array axis of a group (all other
positions fixed), vectorised over all of them. ``data`` is the bytes each chip
holds for this pipeline when the phase starts (reduce-scatter shrinks it by the
axis size, all-gather grows it).

Per axis of k chips (one-direction link bandwidth W, hop latency a, ``data`` = D):

- wrapped (``ring``): bidirectional ring, ceil((k-1)/2) steps,
  ceil((k-1)/2) a + (k-1)/k D / (2W) for a reduce-scatter of D or an all-gather to D
  (:func:`~tpusim.collectives.base.bidir_ring_steps`);
- ``line``: the folded one-way ring, k - 1 steps of 2 hops (k - 1)(2a + D/(kW));
- ``full`` (all chips linked): one all-pairs step, a + D/(kW);
- all-to-all: one all-pairs step on every kind.
"""

from __future__ import annotations

import numpy as np

from tpusim.collectives.base import AlgorithmError, Axis, Step, bidir_ring_steps, ring_steps


def reduce_scatter(chips: np.ndarray, axis: int, info: Axis, data: float) -> list[Step]:
    """``data`` -> ``data / k`` per chip along ``axis``."""
    k = info.size
    if k == 1:
        return []
    if info.kind == "full":
        return [all_pairs_step(chips, axis, data / k, reduce_bytes=(k - 1) * data / k)]
    if info.kind == "ring":
        return bidir_ring_steps(chips, axis, info.kind, data / k, reduce=True)
    return ring_steps(chips, axis, info.kind, data / k, k - 1, reduce=True)


def all_gather(chips: np.ndarray, axis: int, info: Axis, data: float) -> list[Step]:
    """``data`` -> ``data * k`` per chip along ``axis``."""
    k = info.size
    if k == 1:
        return []
    if info.kind == "full":
        return [all_pairs_step(chips, axis, data)]
    if info.kind == "ring":
        return bidir_ring_steps(chips, axis, info.kind, data, reduce=False)
    return ring_steps(chips, axis, info.kind, data, k - 1, reduce=False)


def all_to_all(chips: np.ndarray, axis: int, info: Axis, data: float) -> list[Step]:
    """Every chip sends ``data / k`` to every other chip on its line along ``axis``."""
    if info.size == 1:
        return []
    return [all_pairs_step(chips, axis, data / info.size)]


def all_pairs_step(chips: np.ndarray, axis: int, size: float, reduce_bytes: float = 0.0) -> Step:
    """One step: every chip sends ``size`` bytes to every other chip along ``axis``."""
    lines = np.moveaxis(chips, axis, -1).reshape(-1, chips.shape[axis])
    k = lines.shape[1]
    i, j = np.nonzero(~np.eye(k, dtype=bool))
    src, dst = lines[:, i].ravel(), lines[:, j].ravel()
    return Step(src.astype(np.int64), dst.astype(np.int64), np.full(src.size, size), reduce_bytes)


def all_reduce_axes(
    chips: np.ndarray, order: list[int], axes: tuple[Axis, ...], data: float
) -> list[Step]:
    """Reduce-scatter along ``order`` (array axes of ``chips``), then all-gather back
    in reverse order: the multi-dimensional all-reduce."""
    steps, sizes = [], []
    for axis in order:
        info = axes[axis - 1]
        steps += reduce_scatter(chips, axis, info, data)
        sizes.append(data)
        data /= info.size
    for axis, before in zip(reversed(order), reversed(sizes), strict=True):
        info = axes[axis - 1]
        steps += all_gather(chips, axis, info, before / info.size)
    return steps


def gather_axes(
    chips: np.ndarray, order: list[int], axes: tuple[Axis, ...], data: float
) -> list[Step]:
    """All-gather along ``order``; ``data`` is each chip's shard at the start."""
    steps = []
    for axis in order:
        steps += all_gather(chips, axis, axes[axis - 1], data)
        data *= axes[axis - 1].size
    return steps


def scatter_axes(
    chips: np.ndarray, order: list[int], axes: tuple[Axis, ...], data: float
) -> list[Step]:
    """Reduce-scatter along ``order``; ``data`` is each chip's full input."""
    steps = []
    for axis in order:
        steps += reduce_scatter(chips, axis, axes[axis - 1], data)
        data /= axes[axis - 1].size
    return steps


def alltoall_axes(
    chips: np.ndarray, order: list[int], axes: tuple[Axis, ...], data: float
) -> list[Step]:
    """Dimension-by-dimension all-to-all: along each axis every chip exchanges its data."""
    steps = []
    for axis in order:
        steps += all_to_all(chips, axis, axes[axis - 1], data)
    return steps


def axis_phases(
    op: str, chips: np.ndarray, order: list[int], axes: tuple[Axis, ...], size: float
) -> list[Step]:
    """Steps of ``op`` (nccl-tests size ``size`` for this pipeline) run axis by axis.

    Raises AlgorithmError for an op that does not run axis by axis (broadcast, permute).
    """
    n = int(np.prod([a.size for a in axes]))
    if op == "all-reduce":
        return all_reduce_axes(chips, order, axes, size)
    if op == "reduce-scatter":
        return scatter_axes(chips, order, axes, size)
    if op == "all-gather":
        return gather_axes(chips, list(reversed(order)), axes, size / n)
    if op == "all-to-all":
        return alltoall_axes(chips, order, axes, size)
    raise AlgorithmError(f"{op} does not run axis by axis")
