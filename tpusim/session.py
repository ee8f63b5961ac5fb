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

import os

from tpusim.collectives.offload import OnChipModel
from tpusim.config.loader import System
from tpusim.engine.arguments import collective_arguments, system_of
from tpusim.engine.collective import DEFAULT_OPTIONS, run_collective
from tpusim.engine.settings import CollectiveOptions
from tpusim.errors import InputError
from tpusim.network import Network
from tpusim.network.routes import RouteCache
from tpusim.results.simulation import CollectiveResult
from tpusim.topology import Topology, build_topology
from tpusim.vocabulary import Op

__all__ = ["Session"]


class Session:
    """``system`` (a loaded system, a shipped name or a YAML path, a ``str`` or a
    path-like) with its topology built once and its routes kept between calls. Raises
    InputError for another type, and what :func:`load_system` raises (ConfigError, an
    InputError) for a bad name or file."""

    def __init__(self, system: System | str | os.PathLike[str]):
        self.system: System = system_of(system)
        self.topology: Topology = build_topology(self.system)
        self.routes = RouteCache(self.topology)

    def collective(
        self,
        op: Op,
        size: float | str,
        options: CollectiveOptions | None = DEFAULT_OPTIONS,
        onchip: OnChipModel | None = None,
    ) -> tuple[CollectiveResult, Network]:
        """One collective of ``size`` (bytes, or a string with a unit: ``"1 GiB"``;
        nccl-tests convention) on the session's system: the same result and network as
        :func:`tpusim.engine.simulate_collective` with the same arguments (``options``
        None: the defaults). Raises InputError for a bad op, size (not a whole number
        of bytes in (0, MAX_BYTES]), options, on-chip model, group or algorithm, or a
        collective over the fidelity's work limit; SimulationError for one a failed
        chip stops."""
        op, size_bytes, options = collective_arguments(
            op, size, options, onchip, self.system.name, self.topology.num_chips
        )
        try:
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
        except ValueError as exc:  # AlgorithmError, a group the topology lacks
            raise InputError(f"{self.system.name}: {op}: {exc}") from None

    def __repr__(self) -> str:
        return f"Session({self.system.name!r}, {self.topology.num_chips} chips)"
