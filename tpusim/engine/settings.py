"""What a simulation runs with besides the program and the system, as typed values.

- :class:`RunSettings`: the network (:class:`~tpusim.network.NetworkSettings`), the seed
  of the simulation's one random generator, the faults and the routing policy, and
  whether the ops table gets per-port rows; one object handed to
  :class:`~tpusim.engine.Simulation`.
- :class:`CollectiveOptions`: one collective's group, algorithm, reduction engine and
  run settings, handed to :func:`~tpusim.engine.run_collective` (the ``tpusim
  collective`` command and the ``collective`` workload both build one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tpusim.collectives.base import Algorithm
from tpusim.config.faults import FaultSet, Routing
from tpusim.network import NetworkSettings
from tpusim.vocabulary import EngineChoice

__all__ = ["CollectiveOptions", "RunSettings"]


@dataclass(frozen=True)
class RunSettings:
    """``network``: which network model, with its options; ``seed`` seeds the
    simulation's only source of randomness (random failures and routes: equal inputs,
    equal numbers); ``faults`` and ``routing`` (minimal, valiant, ugal): see
    :mod:`tpusim.engine.faults`; ``port_rows=False`` skips the per-port op rows."""

    network: NetworkSettings = field(default_factory=NetworkSettings)
    seed: int = 0
    faults: FaultSet | None = None
    routing: Routing = "minimal"
    port_rows: bool = True


@dataclass(frozen=True, kw_only=True)
class CollectiveOptions:
    """One collective besides its op, size and topology.

    The group: ``axes`` (mesh axes; none: every chip), ``chips`` (the first N chips
    instead) or ``pairs`` (collective-permute's (src, dst) chips). ``algorithm`` (None
    or ``auto``: the predicted fastest); ``engine`` runs the reductions (``auto``: the
    chip's default). ``network``, ``faults``, ``routing``, ``seed``: as in
    :class:`RunSettings`. ``name_replanning``: with faults and ``auto``, name the
    algorithm the healthy topology would have had (``replanned`` in the fault report).
    """

    axes: Sequence[str] = ()
    chips: int | None = None
    pairs: Sequence[tuple[int, int]] = ()
    algorithm: Algorithm | None = None
    engine: EngineChoice = "auto"
    network: NetworkSettings = field(default_factory=NetworkSettings)
    faults: FaultSet | None = None
    routing: Routing = "minimal"
    seed: int = 0
    name_replanning: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "axes", tuple(self.axes))
        object.__setattr__(self, "pairs", tuple((int(a), int(b)) for a, b in self.pairs))

    def run_settings(self) -> RunSettings:
        """The simulation's settings (a one-op program needs no per-port rows)."""
        return RunSettings(self.network, self.seed, self.faults, self.routing, port_rows=False)
