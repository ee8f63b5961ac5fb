"""A system kept loaded between calls, for notebooks: ``tpusim.Session(system)``.

A notebook changes one thing and looks again; rebuilding the topology and rerouting
every transfer on each call costs more than the simulation itself on a large system.
A :class:`Session` loads the system and builds its topology once, and keeps one
:class:`~tpusim.network.routes.RouteCache` (every route computed stays for the next
call: a collective's steps at another size, another algorithm over the same pairs), so
from the second call on only the schedule and the simulation are paid::

    s = tpusim.Session("ironwood-pod")
    result, network = s.collective("all-reduce", "1 GiB")   # as simulate_collective
    s.collective("all-reduce", "4 GiB")                     # same routes, no rebuild
"""

from __future__ import annotations

from tpusim import units
from tpusim.collectives.offload import OnChipModel
from tpusim.config.loader import System, load_system
from tpusim.engine.collective import DEFAULT_OPTIONS, run_collective
from tpusim.engine.settings import CollectiveOptions
from tpusim.network import Network
from tpusim.network.routes import RouteCache
from tpusim.results.simulation import CollectiveResult
from tpusim.topology import Topology, build_topology
from tpusim.vocabulary import Op

__all__ = ["Session"]


class Session:
    """``system`` (a loaded system, a shipped name or a YAML path) with its topology
    built once and its routes kept between calls. Raises what :func:`load_system`
    raises for a bad name or file."""

    def __init__(self, system: System | str):
        self.system: System = load_system(system) if isinstance(system, str) else system
        self.topology: Topology = build_topology(self.system)
        self.routes = RouteCache(self.topology)

    def collective(
        self,
        op: Op,
        size: float | str,
        options: CollectiveOptions = DEFAULT_OPTIONS,
        onchip: OnChipModel | None = None,
    ) -> tuple[CollectiveResult, Network]:
        """One collective of ``size`` (bytes, or a string with a unit: ``"1 GiB"``;
        nccl-tests convention) on the session's system: the same result and network as
        :func:`tpusim.engine.simulate_collective` with the same arguments. Raises
        ValueError (or AlgorithmError) for a bad size, op, group or algorithm."""
        size_bytes = units.parse_bytes(size) if isinstance(size, str) else float(size)
        return run_collective(
            self.topology,
            op,
            size_bytes,
            options,
            chip=self.system.chip,
            onchip=onchip,
            system_name=self.system.name,
            routes=self.routes,
        )

    def __repr__(self) -> str:
        return f"Session({self.system.name!r}, {self.topology.num_chips} chips)"
