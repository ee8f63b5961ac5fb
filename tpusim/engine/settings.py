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

import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field

from tpusim.collectives.base import Algorithm
from tpusim.config.faults import ROUTINGS, FaultSet, Routing
from tpusim.errors import InputError
from tpusim.network import NetworkSettings
from tpusim.vocabulary import ENGINE_CHOICES, EngineChoice

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
    Raises InputError for a field of the wrong type or out of range.
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
        _check_options(self)
        object.__setattr__(self, "axes", tuple(self.axes))
        object.__setattr__(self, "pairs", tuple((int(a), int(b)) for a, b in self.pairs))

    def run_settings(self) -> RunSettings:
        """The simulation's settings (a one-op program needs no per-port rows)."""
        return RunSettings(self.network, self.seed, self.faults, self.routing, port_rows=False)


def _whole(value: object) -> bool:
    """A whole number that is not a boolean (numpy integers included)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check_options(o: CollectiveOptions) -> None:
    """Raise InputError naming the first field of ``o`` of the wrong type or out of
    range (a library caller gets what the command line's flags would refuse)."""
    problem = None
    if isinstance(o.axes, str) or not all(isinstance(a, str) for a in o.axes):
        problem = f"axes: expected a list of axis names, got {o.axes!r}"
    elif o.chips is not None and not (_whole(o.chips) and o.chips >= 1):
        problem = f"chips: expected a whole number of chips >= 1 or None, got {o.chips!r}"
    elif not all(
        isinstance(p, (tuple, list)) and len(p) == 2 and all(_whole(c) and c >= 0 for c in p)
        for p in o.pairs
    ):
        problem = f"pairs: expected (src, dst) pairs of chip indices, got {o.pairs!r}"
    elif o.algorithm is not None and not isinstance(o.algorithm, str):
        problem = f"algorithm: expected an algorithm name or None, got {o.algorithm!r}"
    elif o.engine not in ENGINE_CHOICES:
        problem = f"engine: expected one of {', '.join(ENGINE_CHOICES)}, got {o.engine!r}"
    elif not isinstance(o.network, NetworkSettings):
        problem = f"network: expected a NetworkSettings, got {o.network!r}"
    elif o.faults is not None and not isinstance(o.faults, FaultSet):
        problem = f"faults: expected a FaultSet or None, got {o.faults!r}"
    elif o.routing not in ROUTINGS:
        problem = f"routing: expected one of {', '.join(ROUTINGS)}, got {o.routing!r}"
    elif not (_whole(o.seed) and o.seed >= 0):
        problem = f"seed: expected a whole number >= 0, got {o.seed!r}"
    if problem is not None:
        raise InputError(f"CollectiveOptions {problem}")
