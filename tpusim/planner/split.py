"""The search's closed-form stages (memory pruning, then the screen) over worker
processes: the candidate layouts go by mesh to ``workers`` parts (every layout of a
mesh in one part, so pruning's skips within a mesh are the same; meshes dealt in
turn), the parent process takes the first part and a forked worker each other one
(:class:`concurrent.futures.ProcessPoolExecutor` with ``fork``: it inherits the
layouts, the system and its topology). A worker sends back only figures: per layout,
its rejection or its peak bytes and screen; the parent's :class:`Fitted` of a
worker's layout builds its step on first use. The parts are merged in the layouts'
order, so the report and the screens are those of one process doing it all (each
layout's figures depend on that layout alone). Without ``fork``, or with one worker,
it all runs here.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from typing import TYPE_CHECKING, Any

from tpusim.engine.placement import map_mesh
from tpusim.hardware import ChipCostModel
from tpusim.planner.estimate import LayerMemo, Network, PassMemo, Screen, Screener
from tpusim.planner.memory import Fitted, MemoryReport, Outcome, memo_step, outcomes

if TYPE_CHECKING:
    from tpusim.config.loader import System
    from tpusim.planner.candidates import Layout
    from tpusim.topology import Topology

Answer = tuple[Fitted | tuple[float, float] | str | None, Screen | None]
"""What a part says of one layout: what pruning made of it (a worker sends (peak
bytes, capacity bytes) for a Fitted) and, when it fits, its screen."""

_SHARED: tuple[list[Layout], list[list[int]], dict[str, Any], System, Topology] | None = None
"""What forked workers inherit: set by :func:`assess_all` just before it forks."""


def assess_all(
    found: list[Layout], base: dict[str, Any], system: System, topology: Topology, workers: int
) -> tuple[MemoryReport, dict[int, Screen]]:
    """Every layout of ``found`` pruned by memory on top of the builder fields
    ``base``, and the screen of each that fits, by ``id`` of its Fitted."""
    global _SHARED
    parts = mesh_parts(found, workers)
    if len(parts) <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return _merge(
            found, base, [_assess(found, list(range(len(found))), base, system, topology)]
        )
    _SHARED = (found, parts, base, system, topology)
    try:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(len(parts) - 1, mp_context=context) as pool:
            futures = [pool.submit(_worker, k) for k in range(1, len(parts))]
            mine = _assess(found, parts[0], base, system, topology)
            theirs = [f.result() for f in futures]
    finally:
        _SHARED = None
    return _merge(found, base, [mine, *theirs])


def mesh_parts(found: list[Layout], workers: int) -> list[list[int]]:
    """Indices of ``found`` in ``workers`` parts (fewer when there are fewer meshes):
    the layouts of the ``k``-th mesh go to part ``k mod workers``."""
    meshes: dict[tuple[tuple[str, int], ...], int] = {}
    parts: list[list[int]] = [[] for _ in range(max(1, workers))]
    for i, layout in enumerate(found):
        k = meshes.setdefault(tuple(layout.mesh.items()), len(meshes))
        parts[k % len(parts)].append(i)
    return [part for part in parts if part]


def screens_of(fitting: list[Fitted], system: System, topology: Topology) -> list[Screen]:
    """The screened step of each of ``fitting`` (memos shared between them)."""

    costs = ChipCostModel(system.chip)
    memo: LayerMemo = {}
    passes: PassMemo = {}
    pieces: dict[tuple[tuple[str, int], ...], dict[str, list[str]]] = {}
    out = []
    for fitted in fitting:
        mesh = tuple(fitted.step.mesh.items())
        if mesh not in pieces:
            pieces[mesh] = map_mesh(topology, fitted.step.mesh)
        net = Network(system.link_bandwidth_Bps, system.hop_latency_s, pieces[mesh])
        out.append(Screener(costs, net, memo, passes).screen(memo_step(fitted.step)))
    return out


def _assess(
    found: list[Layout], part: list[int], base: dict[str, Any], system: System, topology: Topology
) -> dict[int, Answer]:
    """The layouts ``part`` of ``found`` pruned, and those that fit screened, by index."""
    done = list(outcomes((found[i] for i in part), base, system.chip))
    fitting = [o for o in done if isinstance(o, Fitted) and o.fits]
    screens = dict(zip(map(id, fitting), screens_of(fitting, system, topology), strict=True))
    return {i: (o, screens.get(id(o))) for i, o in zip(part, done, strict=True)}


def _worker(k: int) -> dict[int, Answer]:
    """In a worker: part ``k``'s answers, figures only (no steps: the parent rebuilds
    the ones it uses)."""
    assert _SHARED is not None
    found, parts, base, system, topology = _SHARED
    done = _assess(found, parts[k], base, system, topology)
    return {i: (_figures(o), screen) for i, (o, screen) in done.items()}


def _figures(outcome: Fitted | tuple[float, float] | str | None) -> tuple[float, float] | Outcome:
    """A Fitted as its (peak bytes, capacity bytes); anything else as it is."""
    if isinstance(outcome, Fitted):
        return outcome.peak_hbm_bytes, outcome.capacity_bytes
    return outcome


def _merge(
    found: list[Layout], base: dict[str, Any], parts: list[dict[int, Answer]]
) -> tuple[MemoryReport, dict[int, Screen]]:
    """The parts' answers in the order of ``found``: one report, the screens."""
    answers: dict[int, Answer] = {}
    for part in parts:
        answers.update(part)
    report, screens = MemoryReport(), {}
    for i, layout in enumerate(found):
        answer, screen = answers[i]
        outcome = Fitted(layout, *answer, base) if isinstance(answer, tuple) else answer
        report.add(outcome)
        if screen is not None:
            screens[id(outcome)] = screen
    return report, screens
