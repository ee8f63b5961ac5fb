"""A Monte Carlo of a collective's time against random failed links (``tpusim faults``).

For each count of failed links the collective runs ``trials`` times, each trial with
links drawn from its own seed (derived from ``seed``: the same seed, the same table);
a row gives percentiles of the time per count and the slowdown against the healthy
run. As a runtime would, every trial re-point sets the algorithm on the surviving links
(``auto``; the row lists the algorithms its trials ran), and a trial whose failed
links cut the group apart is counted as ``disconnected``, not timed (percentiles over
the connected trials; none when none is). The network is the caller's settings
(``tpusim faults`` defaults to ``analytic``: static faults, routes around the failed
links, the busiest surviving link bounds each step).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from tpusim.collectives import fewest_sends_per_chip
from tpusim.config.faults import FaultSet, Routing
from tpusim.config.loader import System, load_system
from tpusim.engine import CollectiveOptions, CollectiveResult, run_collective
from tpusim.errors import InputError
from tpusim.network import NetworkSettings
from tpusim.network.faults import DisconnectedError
from tpusim.network.routes import RouteCache
from tpusim.topology import build_topology
from tpusim.vocabulary import Op

__all__ = ["MAX_TRIALS", "PERCENTILES", "CountRow", "FaultTrials", "monte_carlo"]

#: Percentiles of the time reported per count of failed links (percent).
PERCENTILES = (10, 50, 90, 99)

#: Most trials per count ``tpusim faults`` accepts (a guard against typos, not a model limit).
MAX_TRIALS = 10_000


@dataclass(frozen=True)
class CountRow:
    """The trials at one count of failed links: how many ran, how many found the group
    cut apart, and over the connected ones the time percentiles (s, by PERCENTILES;
    None when every trial was cut), mean and max (s), the median's slowdown against
    the healthy time and the algorithms run (``;``-separated)."""

    failed_links: int
    trials: int
    disconnected: int
    percentiles_s: tuple[float, ...] | None = None
    mean_s: float | None = None
    max_s: float | None = None
    p50_slowdown: float | None = None
    algorithms: str = ""

    def record(self) -> dict[str, object]:
        """The row as ``tpusim faults`` prints and writes it (``p10_s`` ... columns)."""
        times = self.percentiles_s or (None,) * len(PERCENTILES)
        row: dict[str, object] = {
            "failed_links": self.failed_links,
            "trials": self.trials,
            "disconnected": self.disconnected,
        }
        row |= {f"p{q}_s": t for q, t in zip(PERCENTILES, times, strict=True)}
        row |= {"mean_s": self.mean_s, "max_s": self.max_s, "p50_slowdown": self.p50_slowdown}
        return row | {"algorithms": self.algorithms}


@dataclass(frozen=True)
class FaultTrials:
    """A Monte Carlo (see the module docstring): the collective, the healthy run's
    algorithm and time (s) and one :class:`CountRow` per count of failed links."""

    system: str
    op: Op
    bytes: float
    algorithm: str
    fidelity: str
    routing: Routing
    trials: int
    seed: int
    healthy_time_s: float
    counts: tuple[CountRow, ...]

    def record(self) -> dict[str, object]:
        """The JSON record of ``tpusim faults --json``."""
        head = {k: v for k, v in vars(self).items() if k != "counts"}
        return head | {"counts": [row.record() for row in self.counts]}


def _trials(
    run: Callable[[CollectiveOptions], CollectiveResult], trials: list[CollectiveOptions]
) -> tuple[list[CollectiveResult], int]:
    """``run`` of every trial: the results of those that finished, and how many found
    the topology cut in two (DisconnectedError)."""
    results, cut = [], 0
    for trial in trials:
        try:
            results.append(run(trial))
        except DisconnectedError:
            cut += 1
    return results, cut


def _runner(system: System, op: Op, size: float) -> Callable[[CollectiveOptions], CollectiveResult]:
    """Runs the collective on ``system`` with given options (one topology and route
    cache for every trial)."""
    topology = build_topology(system)
    routes = RouteCache(topology)
    chip, name = system.chip, system.name

    def run(options: CollectiveOptions) -> CollectiveResult:
        result, _ = run_collective(
            topology, op, size, options, chip=chip, system_name=name, routes=routes
        )
        return result

    return run


def check_runnable(system: System, op: Op, size: float, options: CollectiveOptions) -> None:
    """Refuse (InputError) a system with nothing to fail and a collective over the work
    limit of its fidelity (the limit ``tpusim collective`` applies)."""
    if system.num_chips < 2:
        raise InputError(
            f"{system.name}: one chip has no links to fail and a collective on it moves "
            "nothing; give a system of 2 or more chips"
        )
    sends = fewest_sends_per_chip(op, system.num_chips, options.algorithm)
    problem = options.network.work_problem(system.num_chips, size, sends)
    if problem is not None:
        raise InputError(problem)


def _row(
    count: int, times: np.ndarray, healthy_s: float, cut: int, algorithms: list[str]
) -> CountRow:
    trials = int(times.size) + cut
    if not times.size:  # every trial cut the group apart: no time to report
        return CountRow(count, trials, cut)
    percentiles = tuple(float(np.percentile(times, q)) for q in PERCENTILES)
    slowdown = percentiles[PERCENTILES.index(50)] / healthy_s if healthy_s > 0 else None
    return CountRow(
        count,
        trials,
        cut,
        percentiles,
        float(times.mean()),
        float(times.max()),
        slowdown,
        ";".join(algorithms),
    )


def monte_carlo(
    system_name: str,
    op: Op,
    size: float,
    counts: list[int],
    trials: int,
    seed: int,
    network: NetworkSettings | None = None,
    routing: Routing = "minimal",
) -> FaultTrials:
    """The Monte Carlo of ``op`` of ``size`` bytes on ``system_name`` at each count of
    failed links (``network``: analytic at its defaults when None)."""
    system = load_system(system_name)
    network = network or NetworkSettings.of("analytic")
    options = CollectiveOptions(network=network, routing=routing)
    check_runnable(system, op, size, options)
    run = _runner(system, op, size)
    healthy = run(options)
    options = replace(options, name_replanning=False)  # the healthy algorithm is the record's
    draw = np.random.default_rng(seed)
    rows = []
    for count in counts:
        sets = [
            FaultSet(fail_links=count, seed=int(draw.integers(2**31)))
            for _ in range(trials if count else 1)
        ]
        results, cut = _trials(run, [replace(options, faults=s) for s in sets])
        times = np.array([r.time_s for r in results])
        algorithms = sorted({r.algorithm for r in results})
        rows.append(_row(count, times, healthy.time_s, cut, algorithms))
    return FaultTrials(
        system.name,
        op,
        size,
        healthy.algorithm,  # healthy; each row lists its trials' algorithms
        network.fidelity,
        routing,
        trials,
        seed,
        healthy.time_s,
        tuple(rows),
    )
