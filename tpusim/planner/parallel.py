"""The search's simulations in parallel worker processes: each layout of the ranking
(its fragments) and of the confirmation is one task, ``workers`` at a time
(:class:`concurrent.futures.ProcessPoolExecutor` with the ``fork`` start method, so a
worker inherits the system, its topology and the layouts instead of receiving them;
only the figures come back). Without ``fork`` (not Linux or macOS's default), with
one worker or one task, they run here in order: the numbers are the same either way
(each simulation is deterministic and shares nothing with the others).
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from typing import Literal

from tpusim.network import NetworkSettings
from tpusim.planner.memory import Fitted
from tpusim.planner.rank import Simulated, Simulator

How = Literal["run", "fragments"]

_SHARED: tuple[Simulator, list[Fitted]] | None = None
"""What forked workers inherit: set by :func:`simulate_all` just before it forks."""


def simulate_all(
    sim: Simulator, fitted: list[Fitted], network: NetworkSettings, how: How, workers: int
) -> list[Simulated]:
    """Each of ``fitted`` simulated on ``network`` (``how``: the whole step with
    reuse, :meth:`Simulator.run`; or its fragments, :meth:`Simulator.extrapolated`),
    in order; errors are raised as the sequential run raises them."""
    global _SHARED
    methods = multiprocessing.get_all_start_methods()
    if workers <= 1 or len(fitted) <= 1 or "fork" not in methods:
        return [_simulate(sim, f, network, how) for f in fitted]
    _SHARED = (sim, fitted)
    try:
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(min(workers, len(fitted)), mp_context=context) as pool:
            figures = list(
                pool.map(_task, range(len(fitted)), [network] * len(fitted), [how] * len(fitted))
            )
    finally:
        _SHARED = None
    return [Simulated(f, *numbers) for f, numbers in zip(fitted, figures, strict=True)]


def _simulate(sim: Simulator, fitted: Fitted, network: NetworkSettings, how: How) -> Simulated:
    return sim.extrapolated(fitted, network) if how == "fragments" else sim.run(fitted, network)


def _task(
    index: int, network: NetworkSettings, how: How
) -> tuple[str, float, float, float, float, str, float]:
    """In a worker: layout ``index``'s figures (everything but its Fitted)."""
    assert _SHARED is not None
    sim, fitted = _SHARED
    s = _simulate(sim, fitted[index], network, how)
    return (
        s.fidelity,
        s.step_time_s,
        s.compute_time_s,
        s.exposed_communication_time_s,
        s.mfu,
        s.how,
        s.wall_s,
    )
