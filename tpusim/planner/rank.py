"""Ranking by simulation: a layout run as the ``training_step`` workload runs it
(:func:`tpusim.workloads.training_step.run`: the memory check, the layer and loop
reuse, the training record) at a chosen fidelity.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from tpusim.errors import ConfigError, InputError
from tpusim.network import NetworkSettings, network_tree
from tpusim.network.routes import RouteCache
from tpusim.planner.memory import Fitted
from tpusim.program.builders import prepare_training
from tpusim.program.builders.emit import useful_flops
from tpusim.program.builders.training import TrainingStep
from tpusim.results.records import TrainingRecord
from tpusim.workloads.registry import WorkloadContext
from tpusim.workloads.training_step import TrainingWorkload, run

if TYPE_CHECKING:
    from tpusim.config.loader import System
    from tpusim.topology import Topology


@dataclass(frozen=True)
class Simulated:
    """A layout's simulated step at ``fidelity``: step, compute and exposed
    communication times (s) and MFU of the whole step, ``how`` it was found (``run``:
    the workload's own run; ``fragments``: extrapolated from fragments, see
    :meth:`Simulator.extrapolated`) and the wall time it took (s)."""

    fitted: Fitted
    fidelity: str
    step_time_s: float
    compute_time_s: float
    exposed_communication_time_s: float
    mfu: float
    how: str
    wall_s: float

    @classmethod
    def of(cls, fitted: Fitted, record: TrainingRecord, wall_s: float) -> Simulated:
        """From the workload's record of the whole step."""
        return cls(
            fitted,
            record.fidelity,
            float(record.step_time_s),
            float(record.compute_time_s),
            float(record.exposed_communication_time_s),
            float(record.mfu),
            "run",
            wall_s,
        )


class Simulator:
    """Runs layouts of one workload (``workload``: the training_step workload's fields
    without the layout's) on one system, sharing its topology. Each run gets a fresh
    route cache: a cache kept across layouts holds every group's routes (all pairs of
    a large group under the ``direct`` candidate) and grows without bound."""

    def __init__(self, system: System, topology: Topology, workload: dict[str, Any]):
        self.system, self.topology, self.workload = system, topology, workload

    def context(self, network: NetworkSettings | str, label: str) -> WorkloadContext:
        """Where a layout runs, on ``network`` (settings or a fidelity's name at its
        defaults); errors name the plan command, not a scenario file."""
        return WorkloadContext(
            system=self.system,
            topology=self.topology,
            routes=RouteCache(self.topology),
            network=network_tree(network),
            power_per_chip_W=None,
            price_per_chip_hour_usd=None,
            file="plan",
            lines={},
            path=(),
            label=label,
        )

    def run(self, fitted: Fitted, network: NetworkSettings | str, **fields: Any) -> Simulated:
        """``fitted``'s layout (with ``fields`` on top) simulated on ``network``;
        raises InputError when the workload rejects it (it passed the builder's
        checks, so that would be a bug)."""
        layout = fitted.layout
        try:
            spec = TrainingWorkload.model_validate(self.workload | layout.fields() | fields)
        except ValidationError as exc:
            raise InputError(f"layout {layout.label()}: {exc.errors()[0]['msg']}") from None
        began = time.perf_counter()
        try:
            outcome = run(spec, self.context(network, layout.label()))
        except ConfigError as exc:
            raise InputError(f"layout {layout.label()}: {exc.problem}") from None
        record = outcome.record
        assert isinstance(record, TrainingRecord)
        return Simulated.of(fitted, record, time.perf_counter() - began)

    def extrapolated(self, fitted: Fitted, network: NetworkSettings | str) -> Simulated:
        """``fitted``'s whole step from two fragments of ``a, b`` =
        :data:`FRAGMENT_LAYERS` layers per chunk (``a p v`` and ``b p v`` layers),
        each simulated as the workload runs it: past the FSDP prefetch's first layers,
        a step whose layers repeat is affine in its chunk's length ``c`` (what the
        training step's layer reuse assumes), so ``t(c) = t_a + (c - a) (t_b - t_a) /
        (b - a)`` for the step, compute and exposed times; MFU is the whole step's
        useful FLOPs over its time. The whole step is run instead when its chunk has
        at most ``b`` layers or its first layers are dense and the rest MoE (a
        fragment would change the mix)."""

        whole = fitted.step
        c, per = len(whole.chunk()), whole.schedule.stages * whole.schedule.virtual
        if c <= FRAGMENT_LAYERS[-1] or whole.args.dense_layers:
            return self.run(fitted, network)
        one, two = (self.run(fitted, network, layers=k * per) for k in FRAGMENT_LAYERS)
        step, compute, exposed = (
            _affine(getattr(one, name), getattr(two, name), c)
            for name in ("step_time_s", "compute_time_s", "exposed_communication_time_s")
        )
        flops_two = two.mfu * two.step_time_s  # MFU x step = useful FLOPs / peak
        fragment_flops = useful_flops(_fragment_step(fitted, FRAGMENT_LAYERS[1] * per))
        mfu = flops_two * useful_flops(whole) / fragment_flops / step
        wall = one.wall_s + two.wall_s
        return Simulated(fitted, one.fidelity, step, compute, exposed, mfu, "fragments", wall)


FRAGMENT_LAYERS = (2, 3)
"""Layers per chunk of the two fragments :meth:`Simulator.extrapolated` simulates
(the first has as many layers as the FSDP prefetch keeps gathered, so both start the
same way; checked against whole runs in the tests)."""


def _affine(one: float, two: float, length: int) -> float:
    """The value at ``length`` of the line through the two fragments' values."""
    a, b = FRAGMENT_LAYERS
    return one + (length - a) * (two - one) / (b - a)


def _fragment_step(fitted: Fitted, layers: int) -> TrainingStep:
    """``fitted``'s step with ``layers`` layers."""

    return prepare_training(**(fitted.step.args.fields() | {"layers": layers}))
