"""``kind: training_step``: a transformer training step (data, FSDP, tensor, expert,
pipeline and context parallelism) built by :func:`tpusim.program.builders.training_step`.

Layout fields (MaxText's names): ``remat_policy`` (``none``, ``full``, ``minimal``,
``minimal_with_context``, ``save_dot_with_context_except_mlp``,
``save_dot_except_mlpwi``, ``save_dot_except_mlp``, ``save_qkv_proj``,
``save_out_proj``, ``qkv_proj_offloaded``, ``minimal_offloaded``, ``custom``) with
``remat_tensors`` for ``custom`` (tensor name -> ``remat | device | offload``; see
:mod:`tpusim.program.builders.remat`), ``recompute`` (``true`` = ``full``),
``sequence_parallel``, ``context_axis`` (a ``context`` mesh axis plays it),
``shard_optimizer_over_data`` (ZeRO-1), ``optimizer_memory_host_offload`` and
``param_memory_host_offload``. Host transfers run at the chip's ``host.bandwidth``
(the default host link of :mod:`tpusim.program.ir` when the chip file has none).

Reuse: the step's forward and backward loops repeat one iteration ``m v + p - 1``
times. With ``reuse: true`` (the default) a longer loop is simulated with
:data:`REUSE_ITERATIONS` iterations per loop; when two successive steady iterations
of each loop take the same time (to :data:`REUSE_PERIODIC_TOLERANCE` of the step) the
iterations are identical in time and network state, and the missing ones are inserted
in the middle of each loop: the step, its compute, communication and busy times and
its link bytes grow by one steady iteration's share per iteration (the ops table then
holds the simulated run). A step of one iteration (no pipeline, one microbatch)
whose layers are all of one kind reuses its layers the same way: its first
:data:`REUSE_ITERATIONS` layers are simulated and the layer passes compared.
Otherwise, and with ``reuse: false``, the whole step is simulated (see
:mod:`tpusim.workloads.training_reuse`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

from pydantic import ConfigDict, StrictBool, model_validator

from tpusim.config.faults import FaultKeys
from tpusim.config.model import PositiveInt
from tpusim.program.builders.fields import TrainingFields
from tpusim.results.economics import Economics
from tpusim.results.energy import busy_share
from tpusim.results.records import TrainingRecord
from tpusim.results.simulation import Results
from tpusim.workloads.registry import Outcome, WorkloadContext, WorkloadKind
from tpusim.workloads.simulate import check_program
from tpusim.workloads.spec import ModelWorkload

if TYPE_CHECKING:
    from tpusim.program.builders.training import TrainingStep
    from tpusim.program.ir import Program
    from tpusim.workloads.training_reuse import IterationClock

REUSE_ITERATIONS = 5
"""Loop length simulated to extrapolate a step: iterations 1 and 2 of each loop are
compared (the first fills the FSDP prefetch; the last two drain it, the last runs the
gradient collectives; an assumption checked on every run)."""

REUSE_PERIODIC_TOLERANCE = 1e-9
"""Largest relative difference (to the step) between two successive iteration
durations that still counts as periodic (floating-point noise; an assumption)."""


class TrainingWorkload(TrainingFields, ModelWorkload, FaultKeys):
    """``batch`` (or ``global_batch``) is the global batch in sequences; or
    ``batch_per_shard`` sequences per shard of the batch axes (data, fsdp, expert),
    which keeps the work per chip the same on systems of different sizes. The other
    fields are the builder's (:class:`~tpusim.program.builders.fields.TrainingFields`,
    declared there once: the model's shape, the role axes, the schedule and layout);
    ``reuse`` simulates identical loop iterations once (see the module docstring)."""

    model_config = ConfigDict(extra="allow")

    kind: Literal["training_step"]
    batch_per_shard: PositiveInt | None = None
    reuse: StrictBool = True

    @model_validator(mode="after")
    def _recompute_agrees(self) -> TrainingWorkload:
        policy = self.remat_policy
        if (
            "recompute" in self.model_fields_set
            and not self.recompute
            and policy
            not in (
                None,
                "none",
            )
        ):
            raise ValueError(
                f"recompute: false contradicts remat_policy: {policy}, which recomputes "
                "activations in the backward pass: drop recompute (remat_policy says it)"
            )
        return self

    @model_validator(mode="after")
    def _one_batch(self) -> TrainingWorkload:
        given = [self.batch, self.global_batch, self.batch_per_shard]
        if sum(v is not None for v in given) != 1:
            raise ValueError(
                "give exactly one of 'batch' and 'batch_per_shard' "
                "('global_batch' is another name for 'batch')"
            )
        return self

    def fields_for_mesh(self, mesh: dict[str, int]) -> dict[str, object]:
        """``batch`` from ``batch_per_shard`` x the shards of the batch axes (the
        roles that shard the batch: data, fsdp, expert, by field or by role name) in
        ``mesh``."""
        from tpusim.program.builders.mesh import role_axes, sharding_axes

        if not self.batch_per_shard:
            return {}
        axes = role_axes({a: int(s) if s != "auto" else 1 for a, s in mesh.items()}, self.axes)
        names = sharding_axes(axes, "batch")
        shards = math.prod([mesh.get(a, 1) for a in names])
        return {"batch": self.batch_per_shard * shards}

    @property
    def sequences(self) -> int:
        """The global batch in sequences (resolved from ``batch_per_shard`` per system)."""
        value = self.batch if self.batch is not None else self.global_batch
        assert value is not None
        return value


def prepare(spec: TrainingWorkload, context: WorkloadContext) -> TrainingStep:
    """The step prepared for ``context``'s system; a shape the builder rejects is a
    ConfigError at the workload."""
    from tpusim.program.builders import prepare_training
    from tpusim.program.ir import ProgramError

    fields = spec.builder_fields()
    for key in ("batch_per_shard", "reuse"):
        fields.pop(key, None)
    host = context.system.chip.host
    if host is not None:
        fields["host_bandwidth_Bps"] = host.bandwidth_Bps
    try:
        step = prepare_training(**fields)
        if spec.fsdp_prefetch_layers is None and step.fsdp_group and not _fits(step, context):
            # XLA's latency-hiding scheduler gives up the prefetch that does not fit its
            # memory limit: each layer's all-gather then waits for the layer before
            step = prepare_training(**fields | {"fsdp_prefetch_layers": 1})
        return step
    except ProgramError as exc:
        raise context.error(str(exc)) from None


def _fits(step: TrainingStep, context: WorkloadContext) -> bool:
    """Whether the run's own memory check (:func:`check_fits`) passes."""
    from tpusim.errors import SimulationError
    from tpusim.workloads.training_memory import check_fits

    try:
        check_fits(step, context.system.chip)
    except SimulationError:
        return False
    return True


def run(spec: TrainingWorkload, context: WorkloadContext) -> Outcome:
    """Build the step, check that its peak stage fits in HBM (SimulationError, exit 1,
    naming what takes the memory), simulate it (with reuse unless ``reuse: false``)
    and make its :class:`TrainingRecord`; tokens per step = global batch x sequence
    length. A shape the builder rejects is a ConfigError at the workload."""
    from tpusim.program.builders.emit import useful_flops
    from tpusim.program.builders.memory import memory_timeline, peak_stage
    from tpusim.workloads.training_memory import check_fits
    from tpusim.workloads.training_reuse import training_results

    step = prepare(spec, context)
    check_fits(step, context.system.chip)
    peak = peak_stage(step)
    results = training_results(
        simulate_step(step, context, spec.reuse),
        flops_per_chip=useful_flops(step),
        hbm_capacity_bytes=context.system.chip.hbm.capacity_bytes,
        memory_stage=peak.stage,
        memory_points=memory_timeline(step, peak.stage),
    )
    s = step.schedule
    record = TrainingRecord.of(
        results.summary(),
        economics=_economics(results, context, float(spec.sequences * spec.seq)),
        workload=context.label,
        kind=spec.kind,
        chips=context.system.num_chips,
        peak_hbm_bytes_per_chip=peak.total_bytes,
        fragment=spec.fragment(),
        pipeline_bubble_fraction=s.bubble_fraction if s.stages > 1 else None,
        communication=results.communication_breakdown(),
    )
    return Outcome(record, results=results)


def check(spec: TrainingWorkload, context: WorkloadContext) -> None:
    """Plan the step and check it fits the system without simulating: its peak stage
    in HBM, its mesh and collective groups on the topology (on the short loop the
    run simulates when the loop is long: the groups are the same)."""
    from tpusim.program.builders.emit import emit_marked, emit_program
    from tpusim.workloads.training_memory import check_fits

    step = prepare(spec, context)
    check_fits(step, context.system.chip)
    if step.schedule.iterations > REUSE_ITERATIONS:
        program = emit_marked(step, iterations=REUSE_ITERATIONS)[0]
    else:
        program = emit_program(step)
    check_program(program, context)


def _economics(results: Results, context: WorkloadContext, tokens: float) -> Economics:
    return Economics.of(
        results.step_time_s,
        context.system.num_chips,
        tokens,
        context.power_per_chip_W,
        context.price_per_chip_hour_usd,
        busy_share(results.compute_time_s, results.step_time_s),
    )


def simulate_step(step: TrainingStep, context: WorkloadContext, reuse: bool = True) -> Results:
    """The step's results: extrapolated from a short loop (or, for a one-iteration
    step of layers of one kind, from its first layers) when ``reuse`` and the loop is
    long and periodic enough, else the whole step simulated."""
    from tpusim.program.builders.emit import emit_marked, emit_program
    from tpusim.workloads.training_reuse import IterationClock, extrapolate

    iterations, chunk = step.schedule.iterations, step.chunk()
    one_kind = len({step.shape(layer) for layer in chunk}) == 1
    short: dict[str, int] = {}
    if iterations > REUSE_ITERATIONS:
        short, more = {"iterations": REUSE_ITERATIONS}, iterations - REUSE_ITERATIONS
    elif iterations == 1 and one_kind and len(chunk) > REUSE_ITERATIONS:
        short, more = {"layers": REUSE_ITERATIONS}, len(chunk) - REUSE_ITERATIONS
    if reuse and short:
        program, marks = emit_marked(step, **short)
        clock = IterationClock(marks)
        results = _simulate(program, context, clock)
        steady = clock.steady(results, REUSE_PERIODIC_TOLERANCE)
        if steady is not None:
            return extrapolate(results, steady, more)
    return _simulate(emit_program(step), context)


def _simulate(
    program: Program, context: WorkloadContext, clock: IterationClock | None = None
) -> Results:
    """``program`` on the context's system, topology and route cache; ``clock`` (an
    :class:`IterationClock`) watches it when given."""
    from tpusim.engine import Simulation

    sim = Simulation(
        context.system,
        program,
        context.settings,
        topology=context.topology,
        routes=context.routes,
    )
    if clock is not None:
        clock.network = sim.network
        sim.observers.append(clock)
    return sim.run()


KIND = WorkloadKind(TrainingWorkload, run, record=TrainingRecord, check=check)
