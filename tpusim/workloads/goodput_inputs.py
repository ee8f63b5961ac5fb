"""Where a goodput run's step time and checkpoint cost come from.

- Step time: ``step_time`` as given, or the step of a ``training:`` workload (a
  ``training_step`` mapping, simulated on the same system first: its record's
  ``step_time_s``).
- Checkpoint cost: ``checkpoint_cost`` as given, or the state each chip writes over
  its storage bandwidth. The state is ``state_bytes_per_chip`` as given, or the
  training step's parameters on the chip (its largest pipeline stage, fsdp-sharded)
  times the weights' dtype bytes plus :data:`~tpusim.program.builders.training.ADAM_STATE_BYTES`
  (fp32 master and two moments; gradients are not saved). Every chip writes its shard
  in parallel (data-parallel replicas each write a whole copy: an upper bound where
  a checkpointer splits the copies). The bandwidth is ``storage_bandwidth`` per chip
  as given, or the chip's DCN bandwidth (``dcn.bandwidth`` in the chip file, with its
  source): the checkpoint leaves through the host's network, storage assumed not to
  be the bottleneck (assumption).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from tpusim.program.builders.training import ADAM_STATE_BYTES
from tpusim.workloads.training_step import prepare
from tpusim.workloads.training_step import run as run_training

if TYPE_CHECKING:
    from tpusim.workloads.registry import WorkloadContext
    from tpusim.workloads.training_step import TrainingWorkload


class GoodputSource(Protocol):
    """What the inputs are resolved from (a goodput workload's fields): a step time or
    a training workload, and a checkpoint cost or what it follows from."""

    @property
    def step_time_s(self) -> float | None: ...
    @property
    def training(self) -> TrainingWorkload | None: ...
    @property
    def checkpoint_cost_s(self) -> float | None: ...
    @property
    def state_bytes_per_chip(self) -> float | None: ...
    @property
    def storage_bandwidth_Bps(self) -> float | None: ...


@dataclass(frozen=True)
class GoodputInputs:
    """Step time and checkpoint cost (s), with what they were derived from: the state
    bytes per chip and storage bandwidth (B/s per chip; None when the cost was given)
    and where the step time came from (``input`` or ``simulated``)."""

    step_time_s: float
    checkpoint_cost_s: float
    state_bytes_per_chip: float | None
    storage_bandwidth_Bps: float | None
    step_time_from: str


def resolve_inputs(spec: GoodputSource, context: WorkloadContext) -> GoodputInputs:
    """The inputs of goodput ``spec`` on the context's system (see the module docstring).
    Raises what the training workload raises (ConfigError, SimulationError)."""
    if spec.training is None:
        assert spec.step_time_s is not None  # the spec gives one of the two
        step_s, source = spec.step_time_s, "input"
    else:
        training = spec.training  # its own faults, if it gives any, apply to its step
        record = run_training(training, context.with_faults_of(training)).record
        step_s, source = float(record.step_time_s), "simulated"  # type: ignore[attr-defined]
    if spec.checkpoint_cost_s is not None:
        return GoodputInputs(step_s, spec.checkpoint_cost_s, None, None, source)
    state = spec.state_bytes_per_chip
    if state is None:
        assert spec.training is not None  # the spec gives a state, a cost or a training
        state = state_bytes_per_chip(spec.training, context)
    bandwidth = spec.storage_bandwidth_Bps or context.system.chip.dcn.bandwidth_Bps
    return GoodputInputs(step_s, state / bandwidth, state, bandwidth, source)


def state_bytes_per_chip(training: TrainingWorkload, context: WorkloadContext) -> float:
    """Bytes of weights and optimiser state the chip holds in ``training``'s step."""

    step = prepare(training, context)
    return float(step.local_params * (step.bytes_per_element + ADAM_STATE_BYTES))
