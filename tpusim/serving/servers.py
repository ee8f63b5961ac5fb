"""Server profiles: what a serving engine version adds to each iteration, as data
(``configs/servers/*.yaml``, one file per profile, or a user's YAML path).

A profile names its engine and gives, per chip generation, the three per-iteration
terms of :class:`~tpusim.serving.overheads.IterationOverheads` (the host time with a
unit, ``host_time: 13.1 ms``; the HBM efficiency; the sampler's extra passes) and the
engine's scheduling mode:

* ``sync``: the host schedules between iterations, so an iteration takes
  ``device + host``;
* ``async`` (vLLM's ``--async-scheduling``): the host prepares iteration ``i`` while
  the chips run iteration ``i - 1``, so an iteration takes ``max(device, host)``.

Every value carries its grade: ``calibrated`` names the figures it was fitted on
(``fit_on``, ids of ``configs/measurements/serving/``), ``assumption`` says why in its
``note``; ``primary``/``secondary`` give the ``url`` that states it. Chips without an
entry take the ``fallback`` chip's terms (itself graded). Loading refuses unknown
keys, duplicate keys, a missing unit and out-of-range values as one
:class:`~tpusim.errors.ConfigError` naming ``file:line path``.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from tpusim.config.types import Frozen, Time
from tpusim.errors import ConfigError
from tpusim.serving.overheads import IterationOverheads

#: The profile the shipped serving figures' newest engine is described by, and the
#: default of ``tpusim serve`` and ``kind: serving`` (vLLM's tpu-inference backend).
DEFAULT_SERVER = "vllm-tpu-inference"
#: Largest host time per iteration a profile may give (a local plausibility bound: a
#: second per iteration is beyond any serving engine).
MAX_HOST_TIME_S = 1.0
#: Most extra sampler passes over the logits (a local plausibility bound).
MAX_SAMPLING_PASSES = 16

TermGrade = Literal["primary", "secondary", "calibrated", "assumption"]
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
        if self.grade in ("primary", "secondary") and not self.url.startswith("https://"):
            raise ValueError(f"a {self.grade} value gives the https url that states it")
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


class ChipTerms(Frozen):
    """One chip generation's per-iteration terms."""

    host_time: HostTime
    hbm_efficiency: Efficiency
    sampling_passes: Passes

    def overheads(self) -> IterationOverheads:
        """The terms as the iteration costs take them."""
        return IterationOverheads(
            self.host_time.value, self.hbm_efficiency.value, self.sampling_passes.value
        )


class Fallback(Graded):
    """The chip whose terms chips without an entry take."""

    chip: str


class ServerProfile(Frozen):
    """A server profile (see the module docstring)."""

    name: str
    description: str = ""
    engine: str
    scheduling: SchedulingMode
    chips: dict[str, ChipTerms] = Field(min_length=1)
    fallback: Fallback

    @model_validator(mode="after")
    def _fallback_known(self) -> ServerProfile:
        from tpusim.config.loader import shipped

        known = shipped("chips")
        for chip in self.chips:
            if chip not in known:  # a typo would never be used: the fallback runs instead
                raise ValueError(
                    f"chips.{chip}: no chip of that name (shipped: {', '.join(known)})"
                )
        if self.fallback.chip not in self.chips:
            raise ValueError(f"fallback.chip {self.fallback.chip!r} has no entry in chips")
        return self

    @property
    def async_scheduling(self) -> bool:
        """Whether the host overlaps the previous iteration's device time."""
        return self.scheduling.value == "async"

    def terms(self, chip: str) -> ChipTerms:
        """The terms of chip generation ``chip`` (else the fallback chip's)."""
        return self.chips.get(chip, self.chips[self.fallback.chip])

    def overheads(self, chip: str) -> IterationOverheads:
        """:meth:`terms` as :class:`IterationOverheads`."""
        return self.terms(chip).overheads()


def servers_dir() -> Path:
    """``configs/servers/`` (inside the wheel or the repository)."""
    from tpusim.config.loader import configs_dir

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
    from tpusim.config.loader import validate
    from tpusim.config.yamlio import load_yaml

    data, lines = load_yaml(path)
    return validate(ServerProfile, data, str(path), lines)


def load_server(name_or_path: str) -> ServerProfile:
    """A server profile by shipped name (``vllm-tpu-inference``) or YAML path. Raises
    ConfigError naming ``file:line path`` (an unknown name: the shipped ones)."""
    return _load_file(locate_server(name_or_path).resolve())


def profile_data(profile: ServerProfile) -> dict[str, object]:
    """``profile`` as YAML data in the file's shape (units written out, empty source
    fields left out), so that :func:`load_server` reads it back to the same profile."""
    data = _value_first(profile.model_dump(mode="json", exclude_defaults=True))
    assert isinstance(data, dict)
    for terms in data["chips"].values():
        terms["host_time"]["value"] = f"{terms['host_time']['value'] * 1e3:.4g} ms"
    return data


def _value_first(data: object) -> object:
    """Mappings with their ``value`` key first (as the shipped files write them)."""
    if not isinstance(data, dict):
        return data
    front = {"value": data["value"]} if "value" in data else {}
    return front | {k: _value_first(v) for k, v in data.items() if k != "value"}
