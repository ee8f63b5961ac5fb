"""The collectives the vendor-claims checks (:mod:`tpusim.study.claims`) simulate on
whole shipped systems, at the analytic fidelity: each system's topology and route cache
built once per check (:class:`Built`), so the algorithms and ops that repeat a step
route it once.
"""

from __future__ import annotations

from dataclasses import dataclass

from tpusim.collectives import default_algorithm, make_group
from tpusim.collectives.offload import OnChipModel
from tpusim.config.loader import System
from tpusim.engine import CollectiveOptions, run_collective
from tpusim.network import NetworkSettings
from tpusim.network.routes import RouteCache
from tpusim.topology import Topology, build_topology
from tpusim.vocabulary import Op

__all__ = ["ANALYTIC", "Built", "latency", "structural"]

ANALYTIC = NetworkSettings.of("analytic")
"""Claims on latency and structure compare patterns in closed form."""


@dataclass(frozen=True)
class Built:
    """A system's topology and route cache, built once for every collective a check
    runs on it."""

    topology: Topology
    routes: RouteCache

    @classmethod
    def of(cls, system: System) -> Built:
        """``system``'s topology, built, and an empty route cache of it."""
        topology = build_topology(system)
        return cls(topology, RouteCache(topology))


def latency(
    built: Built, op: Op, size_bytes: float, onchip: OnChipModel, algorithm: str | None = None
) -> tuple[float, str]:
    """Seconds and algorithm of ``op`` of ``size_bytes`` over all of the built system
    (auto, or the algorithm named), at the analytic fidelity."""
    options = CollectiveOptions(algorithm=algorithm, network=ANALYTIC)
    result, _ = run_collective(
        built.topology, op, size_bytes, options, onchip=onchip, routes=built.routes
    )
    return result.time_s, result.algorithm


def structural(built: Built, op: Op) -> str:
    """The algorithm a runtime without a cost model runs (torus axes: torus;
    Boardfly: hierarchical): :func:`tpusim.collectives.default_algorithm`."""
    return default_algorithm(op, make_group(built.topology))
