"""Server profiles: what a serving engine version adds to each iteration, as data
(``configs/servers/*.yaml``, one file per profile, or a user's YAML path).

A profile names its engine and gives the three per-iteration terms of
:class:`~tpusim.serving.overheads.IterationOverheads` (the host time with a unit,
``host_time: 13.1 ms``; the HBM efficiency, a fraction of the chip's published HBM
bandwidth; the sampler's extra passes; optionally the MoE experts' kernel efficiency,
``expert_efficiency``, 1 when absent; a fixed device time per iteration,
``step_time``, per MoE layer, ``moe_layer_time``, and per token of a MoE layer,
``moe_token_time``, 0 when absent) once,
``terms:``, shared by every chip
generation: the chip file gives the physical numbers (HBM bandwidth, FLOP/s, the
interconnect), the profile the software's, as the training side's
``configs/cost_terms.yaml`` does. ``chips:`` may give one generation its own value of a
term (none shipped: a per-chip term would need figures of that chip to identify it,
and cross-validation by chip says whether the shared ones carry over).
``measured_chips`` lists the chips whose figures the terms were fitted on; a run on
another chip says in its row that it borrowed them (:meth:`ServerProfile.basis`). The
engine's scheduling mode:

* ``sync``: the host schedules between iterations, so an iteration takes
  ``device + host``;
* ``async`` (vLLM's ``--async-scheduling``): the host prepares iteration ``i`` while
  the chips run iteration ``i - 1``, so an iteration takes ``max(device, host)``.

``moe_kernel:`` names how the engine runs a MoE layer's routed experts (absent: as one
batched tensor-parallel matmul; ``gmm_ep``: tpu-inference's expert-parallel grouped
matmul, whose cost is derived from its structure, :mod:`tpusim.program.builders.gmm_ep`).
``batching:`` names how the engine forms an iteration's batch, a policy of
:mod:`tpusim.serving.batching` (absent: ``vllm-v1``, vLLM V1's chunked prefill mixed
with decodes); a run's ``batching`` option overrides it.

Every value carries its grade: ``calibrated`` names the figures it was fitted on
(``fit_on``, ids of ``configs/measurements/serving/``), ``assumption`` says why in its
``note``; ``primary``/``secondary`` give the ``url`` that states it; ``derived`` gives the
``url`` of the numbers it is computed from and the computation in its ``note``.
Loading refuses unknown keys, duplicate keys, a missing unit and out-of-range values as one
:class:`~tpusim.errors.ConfigError` naming ``file:line path``.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from tpusim.config.loader import configs_dir, shipped, validate
from tpusim.config.types import Frozen, Time
from tpusim.config.yamlio import load_yaml
from tpusim.errors import ConfigError
from tpusim.serving.batching import DEFAULT_BATCHING, BatchingName
from tpusim.serving.overheads import IterationOverheads

#: The profile the shipped serving figures' newest engine is described by, and the
#: default of ``tpusim serve`` and ``kind: serving`` (vLLM's tpu-inference backend).
DEFAULT_SERVER = "vllm-tpu-inference"
#: Largest host time per iteration a profile may give (a local plausibility bound: a
#: second per iteration is beyond any serving engine).
MAX_HOST_TIME_S = 1.0
#: Most extra sampler passes over the logits (a local plausibility bound).
MAX_SAMPLING_PASSES = 16

TermGrade = Literal["primary", "secondary", "derived", "calibrated", "assumption"]
Scheduling = Literal["sync", "async"]


class Graded(Frozen):
    """Where a profile's number comes from: its ``grade``, the figures it was fitted
    on (``calibrated``), a ``url`` (``primary``/``secondary``) and a ``note`` (why,
    for an ``assumption``)."""

    grade: TermGrade
    fit_on: tuple[str, ...] = ()
    url: str = ""
    note: str = ""

    @model_validator(mode="after")
    def _sourced(self) -> Graded:
        if self.grade == "calibrated" and not self.fit_on:
            raise ValueError("a calibrated value names the figures it was fitted on (fit_on)")
        if self.grade == "assumption" and not self.note.strip():
            raise ValueError("an assumption says why in its note")
        if self.grade in ("primary", "secondary", "derived") and not self.url.startswith(
            "https://"
        ):
            raise ValueError(f"a {self.grade} value gives the https url that states it")
        if self.grade == "derived" and not self.note.strip():
            raise ValueError("a derived value shows its derivation in its note")
        return self


class HostTime(Graded):
    """Host (CPU) seconds per iteration, with a unit: ``13.1 ms``."""

    value: Time

    @field_validator("value")
    @classmethod
    def _plausible(cls, value: float) -> float:
        if value > MAX_HOST_TIME_S:
            raise ValueError(
                f"{value:g} s per iteration is over the plausible {MAX_HOST_TIME_S:g} s "
                "(a plain number is seconds; write the unit: 13 ms)"
            )
        return value


class Efficiency(Graded):
    """A fraction of peak in (0, 1]."""

    value: Annotated[float, Field(gt=0, le=1)]


class Passes(Graded):
    """Extra passes over the logits, 0 to :data:`MAX_SAMPLING_PASSES`."""

    value: Annotated[float, Field(ge=0, le=MAX_SAMPLING_PASSES)]


class SchedulingMode(Graded):
    """``sync`` or ``async`` (see the module docstring)."""

    value: Scheduling


class MoeKernel(Graded):
    """How the engine runs a MoE layer's routed experts: ``gmm_ep``, tpu-inference's
    ``GMM_EP`` backend (whole experts per TensorCore, each step's tokens padded to a
    power of two of at least ``min_tokens``; :mod:`tpusim.program.builders.gmm_ep`)."""

    value: Literal["gmm_ep"]
    min_tokens: Annotated[int, Field(ge=1)] = 16


class Batching(Graded):
    """How the engine forms an iteration's batch: a name of
    :data:`~tpusim.serving.batching.BATCH_POLICIES`."""

    value: BatchingName


#: A profile that names no batching batches as vLLM V1.
V1_BATCHING = Batching(
    value=DEFAULT_BATCHING,
    grade="assumption",
    note="the profile names no batching: vLLM V1's (the default)",
)


class ChipTerms(Frozen):
    """The per-iteration terms a profile gives (shared by every chip, or one chip's own)."""

    host_time: HostTime
    hbm_efficiency: Efficiency
    sampling_passes: Passes
    expert_efficiency: Efficiency | None = None
    step_time: HostTime | None = None
    moe_layer_time: HostTime | None = None
    moe_token_time: HostTime | None = None

    def overheads(self) -> IterationOverheads:
        """The terms as the iteration costs take them (no ``expert_efficiency``: 1; no
        ``step_time``, ``moe_layer_time`` or ``moe_token_time``: 0 s)."""
        expert = 1.0 if self.expert_efficiency is None else self.expert_efficiency.value
        step = 0.0 if self.step_time is None else self.step_time.value
        moe = 0.0 if self.moe_layer_time is None else self.moe_layer_time.value
        token = 0.0 if self.moe_token_time is None else self.moe_token_time.value
        host, hbm, passes = self.host_time, self.hbm_efficiency, self.sampling_passes
        return IterationOverheads(host.value, hbm.value, passes.value, expert, step, moe, token)


class ChipOverride(Frozen):
    """One chip generation's own terms, where its figures identify them (each optional:
    the shared term otherwise)."""

    host_time: HostTime | None = None
    hbm_efficiency: Efficiency | None = None
    sampling_passes: Passes | None = None
    expert_efficiency: Efficiency | None = None
    step_time: HostTime | None = None
    moe_layer_time: HostTime | None = None
    moe_token_time: HostTime | None = None


class ServerProfile(Frozen):
    """A server profile (see the module docstring)."""

    name: str
    description: str = ""
    engine: str
    scheduling: SchedulingMode
    batching: Batching = V1_BATCHING
    moe_kernel: MoeKernel | None = None
    terms: ChipTerms
    chips: dict[str, ChipOverride] = Field(default_factory=dict)
    measured_chips: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _chips_known(self) -> ServerProfile:

        known = shipped("chips")
        for where, names in (("chips", tuple(self.chips)), ("measured_chips", self.measured_chips)):
            for chip in names:
                if chip not in known:  # a typo would never be used: the shared terms run instead
                    raise ValueError(
                        f"{where}.{chip}: no chip of that name (shipped: {', '.join(known)})"
                    )
        return self

    @property
    def async_scheduling(self) -> bool:
        """Whether the host overlaps the previous iteration's device time."""
        return self.scheduling.value == "async"

    def terms_of(self, chip: str) -> ChipTerms:
        """The terms of chip generation ``chip``: its own where the profile gives them,
        else the shared ones."""
        own = self.chips.get(chip)
        if own is None:
            return self.terms
        given = {k: v for k, v in own if v is not None}
        return self.terms.model_copy(update=given)

    def overheads(self, chip: str) -> IterationOverheads:
        """:meth:`terms_of` as :class:`IterationOverheads`."""
        return self.terms_of(chip).overheads()

    def basis(self, chip: str) -> str:
        """Where ``chip``'s terms come from, for an output row: fitted on figures of this
        chip, or borrowed (no serving figure of this engine on it)."""
        fitted = ", ".join(self.measured_chips) or "no chip"
        if chip in self.measured_chips:
            return f"{self.name} terms fitted on {fitted}"
        return f"no serving figure on {chip}: borrowed {self.name} terms fitted on {fitted}"


def servers_dir() -> Path:
    """``configs/servers/`` (inside the wheel or the repository)."""

    return configs_dir() / "servers"


def shipped_servers() -> dict[str, Path]:
    """Shipped profile names mapped to their files, sorted by name."""
    return {p.stem: p for p in sorted(servers_dir().glob("*.yaml"))}


def locate_server(name_or_path: str) -> Path:
    """The file of a shipped profile name or a YAML path. Raises ConfigError for an
    unknown name."""
    if name_or_path.endswith((".yaml", ".yml")) or "/" in name_or_path:
        return Path(name_or_path)
    known = shipped_servers()
    if name_or_path not in known:
        raise ConfigError(f"unknown server '{name_or_path}' (shipped: {', '.join(known)})")
    return known[name_or_path]


@cache
def _load_file(path: Path) -> ServerProfile:

    data, lines = load_yaml(path)
    return validate(ServerProfile, data, str(path), lines)


def load_server(name_or_path: str) -> ServerProfile:
    """A server profile by shipped name (``vllm-tpu-inference``) or YAML path. Raises
    ConfigError naming ``file:line path`` (an unknown name: the shipped ones)."""
    return _load_file(locate_server(name_or_path).resolve())


def profile_data(profile: ServerProfile) -> dict[str, object]:
    """``profile`` as YAML data in the file's shape (units written out, empty source
    fields left out), so that :func:`load_server` reads it back to the same profile."""
    dumped = profile.model_dump(mode="json", exclude_defaults=True, exclude_none=True)
    data = _value_first(dumped)
    assert isinstance(data, dict)
    for terms in [data["terms"], *data.get("chips", {}).values()]:
        for key in ("host_time", "step_time", "moe_layer_time"):
            if key in terms:
                terms[key]["value"] = f"{terms[key]['value'] * 1e3:.4g} ms"
        if "moe_token_time" in terms:
            terms["moe_token_time"]["value"] = f"{terms['moe_token_time']['value'] * 1e6:.4g} us"
    return data


def _value_first(data: object) -> object:
    """Mappings with their ``value`` key first (as the shipped files write them)."""
    if not isinstance(data, dict):
        return data
    front = {"value": data["value"]} if "value" in data else {}
    return front | {k: _value_first(v) for k, v in data.items() if k != "value"}
