"""Network fidelities as registered backends, and the settings a run picks one with.

A backend is a :class:`NetworkBackend` in :data:`NETWORKS`: the model it builds, the
options it owns (a pydantic model: ``tolerance`` for ``flow``, ``packet_bytes`` for
``packet``, none for ``analytic``) and the properties rules ask about (whether it moves
flows off a link that fails mid-run, what it refuses as too large to simulate).

A run names its backend and that backend's options once, in a :class:`NetworkSettings`
made where the run is described (the CLI's flags, generated from the options models;
a scenario's ``network:`` tree, :mod:`tpusim.network.tree`; a Python caller); the
settings travel unchanged to :func:`make_network`, the one place a network is built.
A new fidelity is a :class:`~tpusim.network.base.Network` subclass and one
``NETWORKS.register`` call (the shipped three are registered in :mod:`tpusim.network`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated

import simpy
from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError

from tpusim.network.base import Network
from tpusim.registry import Registry
from tpusim.topology import Topology

__all__ = [
    "NETWORKS",
    "BackendOptions",
    "FidelityName",
    "NetworkBackend",
    "NetworkSettings",
    "make_network",
    "option_keys",
]


class BackendOptions(BaseModel):
    """A backend's own options (none here): frozen, no unknown keys, finite numbers."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, allow_inf_nan=False, populate_by_name=True
    )


def option_keys(options: type[BackendOptions]) -> dict[str, str]:
    """Each key of an options model as YAML and flags write it (a field's alias, else
    its name) -> the field's name."""
    return {(info.alias or name): name for name, info in options.model_fields.items()}


def _no_work_limit(
    num_chips: int, size_bytes: float, options: BackendOptions, sends_per_chip: int = 0
) -> str | None:
    return None


@dataclass(frozen=True)
class NetworkBackend:
    """One network fidelity.

    ``build(env, topology, options, check_capacity)`` makes the network; ``options``
    is the model of the options it owns; ``work_problem(num_chips, size_bytes,
    options, sends_per_chip)`` says why a collective (each chip sending at least
    ``sends_per_chip`` transfers) is too large to simulate at this fidelity (None: it
    is not), checked before running; ``reroutes_in_flight``: flows on a link that
    fails during the run move to the survivors (a fidelity that cannot takes only
    faults present from the start); ``checks_capacity``: ``check_capacity`` means
    something to it; ``whole_programs``: it simulates whole training steps (offered by
    ``plan`` and ``validate --workloads``; a fidelity that moves every packet is not);
    ``exact``: the options that make it solve its own model exactly (the flow
    fidelity's ``tolerance: 0``), used where an option is not given and the cases are
    small (``validate``); ``hop_event_bytes(options)``: the bytes one event carries over
    one hop (the packet fidelity's packet), so that a schedule's events are counted
    before it runs (None: its events are not counted per hop)."""

    build: Callable[[simpy.Environment, Topology, BackendOptions, bool], Network]
    options: type[BackendOptions] = BackendOptions
    work_problem: Callable[[int, float, BackendOptions, int], str | None] = _no_work_limit
    reroutes_in_flight: bool = True
    checks_capacity: bool = False
    whole_programs: bool = True
    exact: Mapping[str, object] = field(default_factory=dict)
    hop_event_bytes: Callable[[BackendOptions], float] | None = None
    description: str = ""


#: Every network fidelity by name (the ``fidelity`` of flags, scenarios and records).
NETWORKS: Registry[NetworkBackend] = Registry("network fidelity")


def _known_fidelity(name: str) -> str:
    NETWORKS.get(name)  # raises UnknownEntryError (a ValueError) naming the known ones
    return name


#: A registered fidelity's name, as a pydantic field type (scenario and serve options).
FidelityName = Annotated[str, AfterValidator(_known_fidelity)]


@dataclass(frozen=True)
class NetworkSettings:
    """Which network a run uses: the backend ``fidelity``, its own ``options`` (an
    instance of the backend's options model; left out, its defaults) and
    ``check_capacity`` (assert no link is offered more than its bandwidth, where the
    backend checks it). Made once where the run is described; see :meth:`of`."""

    fidelity: str = "flow"
    options: BackendOptions | None = None
    check_capacity: bool = False
    backend: NetworkBackend = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        backend = NETWORKS.get(self.fidelity)
        options = backend.options() if self.options is None else self.options
        if type(options) is not backend.options:
            raise ValueError(
                f"network fidelity '{self.fidelity}' takes {backend.options.__name__}, "
                f"not {type(options).__name__}"
            )
        object.__setattr__(self, "options", options)
        object.__setattr__(self, "backend", backend)

    @classmethod
    def of(
        cls, fidelity: str = "flow", check_capacity: bool = False, **given: object
    ) -> NetworkSettings:
        """Settings of ``fidelity`` with the options ``given`` by name (None: not given,
        the default). Raises ValueError for an unknown fidelity, an option it does not
        own or a bad value, naming them."""
        backend = NETWORKS.get(fidelity)
        chosen = {name: value for name, value in given.items() if value is not None}
        keys = option_keys(backend.options)
        for name in chosen:
            if name not in keys and name not in keys.values():
                known = ", ".join(keys) or "none"
                raise ValueError(
                    f"the {fidelity} fidelity has no option '{name}' (its options: {known})"
                )
        try:
            options = backend.options(**chosen)
        except ValidationError as exc:
            error = exc.errors()[0]
            name = ".".join(str(part) for part in error["loc"])
            raise ValueError(f"the {fidelity} fidelity's {name}: {error['msg']}") from None
        return cls(fidelity, options, check_capacity and backend.checks_capacity)

    def work_problem(
        self, num_chips: int, size_bytes: float, sends_per_chip: int = 0
    ) -> str | None:
        """Why a collective of ``size_bytes`` per chip over ``num_chips`` chips, each
        sending at least ``sends_per_chip`` transfers, is too large to simulate with
        these settings, or None."""
        assert self.options is not None  # set by __post_init__
        return self.backend.work_problem(num_chips, size_bytes, self.options, sends_per_chip)

    def program_work_problem(self, num_chips: int, sizes_bytes: Sequence[float]) -> str | None:
        """Why a program whose collectives move ``sizes_bytes`` each over ``num_chips``
        chips (every chip in some group, as SPMD programs run) is too large to simulate
        with these settings, or None: its collectives counted as one of their total size
        (their packet-hops add up)."""
        if not sizes_bytes:
            return None
        return self.work_problem(num_chips, float(sum(sizes_bytes)))

    def exact(self) -> NetworkSettings:
        """These settings with the backend's :attr:`NetworkBackend.exact` options where
        none was given (an option given explicitly is kept)."""
        assert self.options is not None  # set by __post_init__
        given = self.options.model_fields_set
        update = {k: v for k, v in self.backend.exact.items() if k not in given}
        options = self.options.model_copy(update=update) if update else self.options
        return NetworkSettings(self.fidelity, options, self.check_capacity)

    def hop_event_bytes(self) -> float | None:
        """The bytes one event of this network carries over one hop (packets), or None
        when its events are not counted per hop (:attr:`NetworkBackend.hop_event_bytes`)."""
        assert self.options is not None  # set by __post_init__
        count = self.backend.hop_event_bytes
        return None if count is None else count(self.options)

    def option(self, name: str) -> object:
        """The value of the backend option ``name`` (for records and reports)."""
        return getattr(self.options, name)


def make_network(
    settings: NetworkSettings,
    env: simpy.Environment,
    topology: Topology,
    link_efficiency: float = 1.0,
) -> Network:
    """The network ``settings`` describe, on ``topology`` inside ``env``, every link's
    bandwidth scaled by ``link_efficiency`` (:meth:`Network.set_link_efficiency`)."""
    assert settings.options is not None  # set by __post_init__
    backend = settings.backend
    network = backend.build(env, topology, settings.options, settings.check_capacity)
    if link_efficiency != 1.0:
        network.set_link_efficiency(link_efficiency)
    return network
