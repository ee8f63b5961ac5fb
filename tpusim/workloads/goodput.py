"""``kind: goodput``: the useful fraction of a long training run that fails and restarts.

Model (Young 1974, Daly 2006). The run computes in segments of ``tau`` seconds (the
checkpoint interval, a whole number of training steps), each followed by a checkpoint
costing ``delta`` seconds. Chips fail independently at a constant rate (exponential
times to failure, MTBF ``mtbf_per_chip``), so the job fails at rate 1 / M with
M = MTBF_chip / chips (the system MTBF). A failure loses the segment in progress
(the work since the last checkpoint and the checkpoint being written); the job then
restarts in ``restart`` seconds, itself interruptible by another failure, and resumes
from the last checkpoint.

Monte Carlo: ``trials`` runs of ``run_length`` wall-clock seconds each, seeded by
``seed`` (equal inputs, equal numbers). Each segment's wall time is drawn exactly:
the number of failed attempts is geometric, each failed attempt loses an exponential
time truncated to [0, tau + delta), and each restart is retried the same way. A run's
goodput is the work of its completed segments over its length.

Closed forms the Monte Carlo is checked against (renewal-reward on one segment):

- Daly's exact expectation: E[segment] = M e^(R/M) (e^((tau + delta)/M) - 1), so
  goodput = tau / E[segment];
- first order (Young): goodput ~ tau / (tau + delta) (1 - (tau + delta) / (2M) - R/M);
- optimum interval, first order (Young): sqrt(2 delta M); Daly's higher-order one:
  sqrt(2 delta M) (1 + sqrt(delta / (2M)) / 3 + delta / (18 M)) - delta for
  delta < 2M, else M.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields
from typing import Annotated, Literal

import numpy as np
from pydantic import BeforeValidator, Field, PositiveInt, model_validator

from tpusim.config.types import Bandwidth, Bytes
from tpusim.results.records import Figure, Record, Row
from tpusim.units import parse_time
from tpusim.workloads.goodput_inputs import resolve_inputs
from tpusim.workloads.registry import Outcome, WorkloadContext, WorkloadKind
from tpusim.workloads.spec import WorkloadSpec
from tpusim.workloads.training_step import TrainingWorkload

#: Units of long durations (s) on top of :func:`tpusim.units.parse_time`'s.
LONG_TIME_UNITS_S = {"min": 60.0, "h": 3600.0, "d": 86400.0}

#: Default MTBF per chip (h). Derived from a published figure for other accelerators
#: (no TPU failure rate is published): Llama 3 (Dubey et al. 2024, "The Llama 3 Herd
#: of Models", section 3.3.4) saw 419 unexpected interruptions in 54 days on 16,384
#: H100 GPUs: 16,384 x 54 x 24 / 419 = 50,676 GPU-hours per interruption. Grade:
#: derived (GPUs with their hosts and network, not TPUs); override per system.
DEFAULT_MTBF_PER_CHIP_H = 50_000.0
#: Default length of one simulated run (s): 30 days. Assumption (a "long" run: many
#: system MTBFs, so a run's last, unfinished segment weighs little).
DEFAULT_RUN_LENGTH_S = 30 * 86400.0
#: Default Monte Carlo runs. Assumption: the standard error of the mean goodput is
#: then about a tenth of one run's spread.
DEFAULT_TRIALS = 100


def parse_duration(text: str | float) -> float:
    """Seconds from ``"50000 h"``, ``"5 min"``, ``"30 d"`` or anything
    :func:`~tpusim.units.parse_time` takes (``"2 s"``, ``"10 ms"``, a number of s).
    Raises ValueError for another unit or a negative or non-finite value."""
    if isinstance(text, str):
        match = re.fullmatch(r"\s*([-+0-9.eE]+)\s*(min|h|d)\s*", text)
        if match:
            value = float(match.group(1)) * LONG_TIME_UNITS_S[match.group(2)]
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"'{text}' must be a finite time >= 0")
            return value
    try:
        value = parse_time(text)
    except ValueError:
        raise ValueError(f"'{text}' is not a time (units: s, ms, us, ns, min, h, d)") from None
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"'{text}' must be a finite time >= 0")
    return value


#: A duration in s, written with a unit (s, ms, us, min, h, d).
Duration = Annotated[float, BeforeValidator(parse_duration)]


class GoodputWorkload(WorkloadSpec):
    """A long training run under failures: MTBF per chip, chips (default: the
    system's), training step time (``step_time``, or simulated from a ``training:``
    training_step workload), checkpoint cost (``checkpoint_cost``, or the state per
    chip over the storage bandwidth: :mod:`tpusim.workloads.goodput_inputs`) and
    interval (default: Daly's optimum, rounded to whole steps), restart time, and the
    Monte Carlo's run length, number of runs and seed."""

    kind: Literal["goodput"]
    name: str
    mtbf_per_chip_s: Duration = Field(DEFAULT_MTBF_PER_CHIP_H * 3600.0, alias="mtbf_per_chip", gt=0)
    chips: PositiveInt | None = None
    step_time_s: Duration | None = Field(None, alias="step_time", gt=0)
    training: TrainingWorkload | None = None
    checkpoint_cost_s: Duration | None = Field(None, alias="checkpoint_cost")
    state_bytes_per_chip: Bytes | None = Field(None, alias="state_per_chip")
    storage_bandwidth_Bps: Bandwidth | None = Field(None, alias="storage_bandwidth")
    checkpoint_interval_s: Duration | Literal["optimal"] = Field(
        "optimal", alias="checkpoint_interval"
    )
    restart_s: Duration = Field(alias="restart")
    run_length_s: Duration = Field(DEFAULT_RUN_LENGTH_S, alias="run_length", gt=0)
    trials: PositiveInt = DEFAULT_TRIALS
    seed: int = 0

    @model_validator(mode="after")
    def _one_source_each(self) -> GoodputWorkload:
        if (self.step_time_s is None) == (self.training is None):
            raise ValueError("give exactly one of 'step_time' and 'training'")
        if self.training is not None and self.training.batch_per_shard is not None:
            raise ValueError("a goodput's training workload takes 'batch', not 'batch_per_shard'")
        derived = self.state_bytes_per_chip is not None or self.storage_bandwidth_Bps is not None
        if self.checkpoint_cost_s is not None and derived:
            raise ValueError(
                "give 'checkpoint_cost', or 'state_per_chip' / 'storage_bandwidth', not both"
            )
        given = (self.checkpoint_cost_s, self.state_bytes_per_chip, self.training)
        if all(v is None for v in given):
            raise ValueError(
                "give 'checkpoint_cost', 'state_per_chip' or a 'training' workload "
                "(its weights and optimiser state)"
            )
        return self


@dataclass(frozen=True)
class FailureModel:
    """Failures at rate 1 / ``mtbf_s`` (the system's), checkpoints costing ``delta_s``
    and restarts taking ``restart_s`` (all s)."""

    mtbf_s: float
    delta_s: float
    restart_s: float

    def mean_segment_s(self, tau_s: float) -> float:
        """Daly's exact mean wall time of one segment of ``tau_s`` s of work (s)."""
        m = self.mtbf_s
        return m * math.exp(self.restart_s / m) * math.expm1((tau_s + self.delta_s) / m)

    def goodput(self, tau_s: float) -> float:
        """Daly's exact long-run useful fraction at interval ``tau_s``."""
        return tau_s / self.mean_segment_s(tau_s)

    def goodput_first_order(self, tau_s: float) -> float:
        """Young's first-order useful fraction at interval ``tau_s``."""
        m, d = self.mtbf_s, self.delta_s
        return tau_s / (tau_s + d) * (1 - (tau_s + d) / (2 * m) - self.restart_s / m)

    def young_interval_s(self) -> float:
        """Young's first-order optimum interval sqrt(2 delta M) (s)."""
        return math.sqrt(2 * self.delta_s * self.mtbf_s)

    def daly_interval_s(self) -> float:
        """Daly's higher-order optimum interval (s); M when delta >= 2M."""
        m, d = self.mtbf_s, self.delta_s
        if d >= 2 * m:
            return m
        ratio = d / (2 * m)
        return math.sqrt(2 * d * m) * (1 + math.sqrt(ratio) / 3 + ratio / 9) - d

    def segment_times(self, rng: np.random.Generator, tau_s: float, n: int) -> np.ndarray:
        """Wall times (s) of ``n`` independent segments of ``tau_s`` s of work."""
        m, span = self.mtbf_s, tau_s + self.delta_s
        failures = rng.geometric(math.exp(-span / m), n) - 1
        owner = np.repeat(np.arange(n), failures)
        lost = truncated_exponential(rng, m, span, owner.size)
        retries = rng.geometric(math.exp(-self.restart_s / m), owner.size) - 1
        retry_owner = np.repeat(owner, retries)
        retry_lost = truncated_exponential(rng, m, self.restart_s, retry_owner.size)
        times = np.full(n, span)
        np.add.at(times, owner, lost + self.restart_s)
        np.add.at(times, retry_owner, retry_lost)
        return times


def truncated_exponential(
    rng: np.random.Generator, mean: float, upper: float, n: int
) -> np.ndarray:
    """``n`` exponential times of mean ``mean`` conditioned on being below ``upper``."""
    u = rng.random(n)
    return -mean * np.log1p(u * math.expm1(-upper / mean))


def simulate_runs(
    model: FailureModel, tau_s: float, run_length_s: float, trials: int, seed: int
) -> np.ndarray:
    """Goodput of each of ``trials`` runs of ``run_length_s`` s (work of the segments
    completed by the end of the run over its length)."""
    rng = np.random.default_rng(seed)
    per_run = math.ceil(1.2 * run_length_s / model.mean_segment_s(tau_s)) + 8
    out = np.empty(trials)
    for trial in range(trials):
        ends = np.cumsum(model.segment_times(rng, tau_s, per_run))
        while ends[-1] < run_length_s:
            more = np.cumsum(model.segment_times(rng, tau_s, per_run)) + ends[-1]
            ends = np.concatenate([ends, more])
        out[trial] = np.searchsorted(ends, run_length_s, side="right") * tau_s / run_length_s
    return out


@dataclass(frozen=True, kw_only=True)
class GoodputRecord(Record):
    """A training run under failures: the chips and system MTBF (s), the interval,
    checkpoint cost and restart (s), the Monte Carlo's goodput (mean of its runs) and
    standard error, the closed forms at the same interval, and the optimum intervals
    (s) with Daly's goodput at his."""

    chips: int
    mtbf_per_chip_s: float
    system_mtbf_s: float
    step_time_s: float
    steps_per_checkpoint: int
    checkpoint_interval_s: float
    checkpoint_cost_s: float
    restart_s: float
    run_length_s: float
    trials: int
    goodput: float
    goodput_stderr: float
    goodput_daly: float
    goodput_first_order: float
    optimum_interval_young_s: float
    optimum_interval_daly_s: float
    goodput_at_optimum: float
    step_time_from: str = "input"
    state_bytes_per_chip: float | None = None
    storage_bandwidth_Bps: float | None = None

    @classmethod
    def from_row(cls, row: Row) -> Record:
        """The record back from its row; the derived-input columns may be empty (a cost
        given as input) or absent (a row written before they existed)."""
        derived = ("step_time_from", "state_bytes_per_chip", "storage_bandwidth_Bps")
        values = {f.name: row[f.name] for f in fields(cls) if f.name not in derived}
        for name in derived[1:]:
            value = row.get(name)
            empty = value == "" or (isinstance(value, float) and math.isnan(value))
            values[name] = None if value is None or empty else float(value)
        return cls(**values, step_time_from=str(row.get("step_time_from") or "input"))

    def figures(self) -> list[Figure]:
        label = self.workload
        return [
            (f"{label}: goodput (%)", 100 * self.goodput),
            (f"{label}: optimum checkpoint interval (min)", self.optimum_interval_daly_s / 60),
        ]


def whole_steps(interval_s: float, step_s: float) -> int:
    """Steps per checkpoint: ``interval_s`` rounded to the nearest whole step (>= 1)."""
    return max(1, round(interval_s / step_s))


def run(spec: GoodputWorkload, context: WorkloadContext) -> Outcome:
    """The Monte Carlo and the closed forms for ``spec`` on the context's system."""
    chips = spec.chips or context.system.num_chips
    inputs = resolve_inputs(spec, context)
    model = FailureModel(spec.mtbf_per_chip_s / chips, inputs.checkpoint_cost_s, spec.restart_s)
    daly = model.daly_interval_s()
    wanted = daly if spec.checkpoint_interval_s == "optimal" else spec.checkpoint_interval_s
    steps = whole_steps(float(wanted), inputs.step_time_s)
    tau = steps * inputs.step_time_s
    runs = simulate_runs(model, tau, spec.run_length_s, spec.trials, spec.seed)
    stderr = float(runs.std(ddof=1) / math.sqrt(runs.size)) if runs.size > 1 else math.nan
    record = GoodputRecord(
        system=context.system.name,
        workload=context.label,
        kind="goodput",
        chips=chips,
        mtbf_per_chip_s=spec.mtbf_per_chip_s,
        system_mtbf_s=model.mtbf_s,
        step_time_s=inputs.step_time_s,
        steps_per_checkpoint=steps,
        checkpoint_interval_s=tau,
        checkpoint_cost_s=inputs.checkpoint_cost_s,
        restart_s=spec.restart_s,
        run_length_s=spec.run_length_s,
        trials=spec.trials,
        goodput=float(runs.mean()),
        goodput_stderr=stderr,
        goodput_daly=model.goodput(tau),
        goodput_first_order=model.goodput_first_order(tau),
        optimum_interval_young_s=model.young_interval_s(),
        optimum_interval_daly_s=daly,
        goodput_at_optimum=model.goodput(daly),
        step_time_from=inputs.step_time_from,
        state_bytes_per_chip=inputs.state_bytes_per_chip,
        storage_bandwidth_Bps=inputs.storage_bandwidth_Bps,
    )
    return Outcome(record)


KIND = WorkloadKind(GoodputWorkload, run, record=GoodputRecord)
