"""The three shipped network fidelities as backends: each one's options and builder.

- ``analytic``: closed-form alpha-beta per batch bounded by the busiest link
  (:class:`~tpusim.network.analytic.AnalyticNetwork`); no options.
- ``flow``: max-min fair fluid flows (:class:`~tpusim.network.flow.FlowNetwork`);
  ``tolerance`` sets both its rate and drain-merge tolerances (None: 1% each).
- ``packet``: per-link round-robin queues, cut-through
  (:class:`~tpusim.network.packet.PacketNetwork`); ``packet_bytes`` is the payload.
  It refuses collectives over :func:`~tpusim.config.limits.packet_work_problem`'s
  limits and takes only faults present from the start.

:mod:`tpusim.network` registers them in :data:`~tpusim.network.backends.NETWORKS`.
"""

from __future__ import annotations

from typing import Annotated

import simpy
from pydantic import AfterValidator, BeforeValidator, Field

from tpusim import units
from tpusim.config.limits import packet_work_problem, whole_bytes_problem
from tpusim.network.analytic import AnalyticNetwork
from tpusim.network.backends import BackendOptions, NetworkBackend
from tpusim.network.base import Network
from tpusim.network.flow import FlowNetwork
from tpusim.network.packet import DEFAULT_PACKET_BYTES, PacketNetwork
from tpusim.topology import Topology

__all__ = ["ANALYTIC", "FLOW", "PACKET", "FlowOptions", "PacketOptions"]


def _number(value: object) -> object:
    """A tolerance written as text (a flag's value) as a number; a boolean is refused."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number such as 0.01, got {value}")
    if not isinstance(value, str):
        return value
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"expected a number such as 0.01, got {value!r}") from None


def _below_one(value: float) -> float:
    if not 0 <= value < 1:
        raise ValueError(f"must be at least 0 and below 1, got {value:g}")
    return value


#: A relative tolerance: 0 <= value < 1 (0 is exact).
Tolerance = Annotated[float, BeforeValidator(_number), AfterValidator(_below_one)]


def _size(value: object) -> object:
    """A size with a unit (``64KiB``) or a plain number of bytes; a boolean is refused."""
    if isinstance(value, bool):
        raise ValueError(f"expected a size such as 64KiB, got {value}")
    if isinstance(value, str):
        return units.parse(value, "bytes")
    return value


def _whole(value: float) -> float:
    problem = whole_bytes_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


#: A packet's payload (bytes, > 0, whole): a number or a size with a unit.
PacketBytes = Annotated[float, BeforeValidator(_size), Field(gt=0), AfterValidator(_whole)]


class FlowOptions(BackendOptions):
    """``tolerance``: max-min rates solved to it and flows finishing within it retired
    together (dimensionless, 0 <= value < 1; 0 is exact; None: 1% each)."""

    tolerance: Tolerance | None = Field(
        None,
        description="max-min rates solved to this relative tolerance and flows finishing "
        "within it retired together (default 0.01; 0 is exact)",
    )


class PacketOptions(BackendOptions):
    """``packet_bytes``: the payload of one packet (bytes, > 0; default 64 KiB)."""

    packet_bytes: PacketBytes = Field(
        DEFAULT_PACKET_BYTES, description="the payload of one packet, e.g. 64KiB"
    )


def _analytic(
    env: simpy.Environment, topology: Topology, options: BackendOptions, check_capacity: bool
) -> Network:
    return AnalyticNetwork(env, topology)


def _flow(
    env: simpy.Environment, topology: Topology, options: BackendOptions, check_capacity: bool
) -> Network:
    assert isinstance(options, FlowOptions)
    if options.tolerance is None:
        return FlowNetwork(env, topology, check_capacity=check_capacity)
    tolerance = options.tolerance
    return FlowNetwork(
        env,
        topology,
        check_capacity=check_capacity,
        merge_tolerance=tolerance,
        rate_tolerance=tolerance,
    )


def _packet(
    env: simpy.Environment, topology: Topology, options: BackendOptions, check_capacity: bool
) -> Network:
    assert isinstance(options, PacketOptions)
    return PacketNetwork(env, topology, packet_bytes=options.packet_bytes)


def _packet_work(
    num_chips: int, size_bytes: float, options: BackendOptions, sends_per_chip: int = 0
) -> str | None:
    assert isinstance(options, PacketOptions)
    return packet_work_problem(num_chips, size_bytes, options.packet_bytes, sends_per_chip)


def _packet_bytes(options: BackendOptions) -> float:
    assert isinstance(options, PacketOptions)
    return options.packet_bytes


ANALYTIC = NetworkBackend(_analytic, description="closed forms")
FLOW = NetworkBackend(
    _flow,
    FlowOptions,
    checks_capacity=True,
    exact={"tolerance": 0.0},
    description="max-min fair, the default",
)
PACKET = NetworkBackend(
    _packet,
    PacketOptions,
    work_problem=_packet_work,
    reroutes_in_flight=False,
    whole_programs=False,
    hop_event_bytes=_packet_bytes,
    description="small systems",
)
