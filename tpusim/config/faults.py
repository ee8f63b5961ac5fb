"""Faults and routing choices: what breaks, when, and what the runtime does about it.

A fault set is a list of faults plus random link failures, read from a scenario
(``faults:``, ``fail_links:``, ``seed:``, ``on_chip_failure:``) or a file given to
``tpusim collective|run --faults FILE``::

    faults:
      - {kind: link_down, link: [0, 1]}                       # chips 0 and 1, both directions
      - {kind: link_degraded, link: [5, 6], bandwidth_fraction: 0.5}
      - {kind: chip_down, chip: 3, at: 2 ms}                  # `at` optional: from the start
      - {kind: slow_chip, chip: 7, slowdown: 1.5}
    fail_links: 4          # random healthy links down from the start (drawn from the run's seed)
    on_chip_failure: fail  # fail | exclude | spare_cube

This module checks each entry on its own (kinds, fields, fractions in (0, 1], times
>= 0); whether a link or chip exists is checked against the topology by
:func:`tpusim.network.faults.resolve_faults`, which names the entry.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from tpusim.config.limits import MAX_SLOWDOWN, MIN_BANDWIDTH_FRACTION
from tpusim.config.loader import validate
from tpusim.config.types import Frozen, Time
from tpusim.config.yamlio import load_yaml

FaultKind = Literal["link_down", "link_degraded", "chip_down", "slow_chip"]
#: What a collective does when a chip of its group is down: ``fail`` (exit 1),
#: ``exclude`` (the group shrinks), ``spare_cube`` (the OCS swaps in a spare 4x4x4 cube).
ChipFailurePolicy = Literal["fail", "exclude", "spare_cube"]
#: How flows choose their path: ``minimal`` (the topology's route), ``valiant`` (via a
#: random intermediate), ``ugal`` (minimal or Valiant per flow, by current load).
Routing = Literal["minimal", "valiant", "ugal"]
ROUTINGS: tuple[Routing, ...] = ("minimal", "valiant", "ugal")

_NEEDS: dict[str, tuple[str, ...]] = {
    "link_down": ("link",),
    "link_degraded": ("link", "bandwidth_fraction"),
    "chip_down": ("chip",),
    "slow_chip": ("chip", "slowdown"),
}
_FIELDS = ("link", "chip", "bandwidth_fraction", "slowdown")
#: A chip index: a whole number >= 0, never a boolean or a float read as one.
ChipIndex = Annotated[int, Field(ge=0, strict=True)]


class FaultSpec(Frozen):
    """One fault. ``link``: the two chips a link joins (both directions fail);
    ``chip``: a chip index; ``at``: when it happens (s, from the start by default);
    ``bandwidth_fraction``: what a degraded link keeps, MIN_BANDWIDTH_FRACTION to 1
    (below it, the link is down: ``link_down``); ``slowdown``: how
    many times slower a slow chip computes (1 .. MAX_SLOWDOWN: a chip below 1 would be
    faster, not slow)."""

    kind: FaultKind
    link: tuple[ChipIndex, ChipIndex] | None = None
    chip: ChipIndex | None = None
    at: Time = 0.0
    bandwidth_fraction: Annotated[float, Field(ge=MIN_BANDWIDTH_FRACTION, le=1)] | None = None
    slowdown: Annotated[float, Field(ge=1, le=MAX_SLOWDOWN)] | None = None

    @model_validator(mode="after")
    def _fields_of_kind(self) -> FaultSpec:
        needs = _NEEDS[self.kind]
        for name in _FIELDS:
            given = getattr(self, name) is not None
            if name in needs and not given:
                raise ValueError(f"{self.kind} needs '{name}'")
            if name not in needs and given:
                raise ValueError(f"{self.kind} takes no '{name}'")
        if self.kind == "slow_chip" and self.at:
            raise ValueError("slow_chip takes no 'at' (it is slow for the whole run)")
        return self


def _target(spec: FaultSpec) -> tuple[object, ...]:
    """What a fault acts on and when: two entries with the same target would silently
    let the last one win."""
    if spec.link is not None:
        return ("link", tuple(sorted(spec.link)), spec.at)
    return (spec.kind, spec.chip, spec.at)


def _distinct(faults: list[FaultSpec]) -> list[FaultSpec]:
    """Refuse an entry that repeats an earlier one's link or chip at the same time."""
    seen: dict[tuple[object, ...], int] = {}
    for i, spec in enumerate(faults):
        first = seen.setdefault(_target(spec), i)
        if first != i:
            what = f"link {list(spec.link)}" if spec.link is not None else f"chip {spec.chip}"
            raise ValueError(
                f"faults[{i}] repeats the {what} of faults[{first}] at the same time "
                "(the last would win): keep one entry"
            )
    return faults


#: A list of faults, each link or chip at most once per instant.
FaultList = Annotated[list[FaultSpec], AfterValidator(_distinct)]


Count = Annotated[int, Field(ge=0)]
"""A count or seed: a whole number >= 0."""


class FaultSetKeys(Frozen):
    """The keys a fault set and a workload share: the listed ``faults``, ``fail_links``
    random links down from the start and the ``on_chip_failure`` policy."""

    faults: FaultList = Field(default_factory=list)
    fail_links: Count = 0
    on_chip_failure: ChipFailurePolicy = "fail"


class FaultSet(FaultSetKeys):
    """Faults of a run: :class:`FaultSetKeys`, the random links drawn from ``seed``
    (None: from the run's random generator)."""

    seed: Count | None = None

    @property
    def empty(self) -> bool:
        """No fault at all (the healthy path)."""
        return not self.faults and not self.fail_links

    def with_random(self, fail_links: int | None, seed: int | None) -> FaultSet:
        """This fault set with ``fail_links`` / ``seed`` replaced where given."""
        update: dict[str, int] = {}
        if fail_links is not None:
            update["fail_links"] = fail_links
        if seed is not None:
            update["seed"] = seed
        return self.model_copy(update=update)


NO_FAULTS = FaultSet()


class FaultKeys(FaultSetKeys):
    """The fault keys, declared here once: :class:`FaultSetKeys`, ``seed`` (of the
    simulation's one random generator, which draws the random links too) and
    ``routing``. A workload kind that simulates a network has them as fields; a
    scenario's top level gives them to every such workload and the command line on top
    (:class:`GivenFaultKeys`, :class:`FaultFlags`); a kind without them refuses faults
    by name (:func:`unapplied_fault`)."""

    seed: Count = 0
    routing: Routing = "minimal"

    def fault_set(self) -> FaultSet | None:
        """The faults of this workload (None: healthy); its random links come from the
        run's generator (seeded with ``seed``)."""
        fault_set = FaultSet(
            faults=self.faults, fail_links=self.fail_links, on_chip_failure=self.on_chip_failure
        )
        return None if fault_set.empty else fault_set


#: The fault keys a scenario takes at its top level (defaults for every workload kind
#: that has them as fields) and the command line sets on top of everything.
FAULT_FIELDS = tuple(FaultKeys.model_fields)


class GivenFaultFlags(Frozen):
    """The fault keys a command-line flag sets (:class:`FaultKeys`' types; None: not
    given)."""

    fail_links: Count | None = Field(
        default=None,
        description="N random links down from the start",
        json_schema_extra={"flag_type": "int"},
    )
    seed: Count | None = Field(
        default=None,
        description="seed of the random failures (default 0)",
        json_schema_extra={"flag_type": "int"},
    )
    routing: Routing | None = Field(default=None, description="path choice per flow")


class GivenFaultKeys(GivenFaultFlags):
    """Every fault key of :class:`FaultKeys` as a scenario's top level gives it (None:
    not given): the defaults of its workloads'."""

    faults: FaultList | None = None
    on_chip_failure: ChipFailurePolicy | None = None


class FaultFlags(GivenFaultFlags):
    """The command line's fault flags, None where not given: ``--faults FILE`` read
    into ``faults``, ``--fail-links``, ``--seed`` and ``--routing``. ``tpusim run``
    sets them on every workload that takes them (:meth:`workload_keys`, over the
    scenario's own keys); ``tpusim collective`` runs with :meth:`fault_set`."""

    faults: FaultSet | None = None

    def workload_keys(self) -> dict[str, object]:
        """The flags given, as raw workload keys (YAML values); ``--fail-links`` and
        ``--seed`` win over the file's."""
        out: dict[str, object] = {"fail_links": self.fail_links, "seed": self.seed}
        if self.faults is not None:
            given = self.faults
            out["faults"] = [f.model_dump(exclude_none=True) for f in given.faults]
            out["on_chip_failure"] = given.on_chip_failure
            out["fail_links"] = given.fail_links if self.fail_links is None else self.fail_links
            out["seed"] = given.seed if self.seed is None else self.seed
        out["routing"] = self.routing
        return {key: value for key, value in out.items() if value is not None}

    def fault_set(self) -> FaultSet | None:
        """The faults of one run (None: healthy): the file's, with ``--fail-links`` and
        ``--seed`` replaced where given."""
        if self.faults is None and not self.fail_links:
            return None
        return (self.faults or FaultSet()).with_random(self.fail_links, self.seed)


NO_FAULT_FLAGS = FaultFlags()


def with_fault_defaults(
    data: dict[str, object],
    fields: Collection[str],
    top: Mapping[str, object],
    flags: FaultFlags = NO_FAULT_FLAGS,
) -> dict[str, object]:
    """A workload's raw ``data`` with the scenario's top-level fault keys (``top``, the
    scenario's raw mapping) as defaults and the command line's ``flags`` on top, for
    the keys among the workload kind's ``fields``."""
    wanted = [k for k in FAULT_FIELDS if k in fields]
    given = flags.workload_keys()
    out = {k: top[k] for k in wanted if top.get(k) is not None} | data
    return out | {k: given[k] for k in wanted if k in given}


def unapplied_fault(
    fields: Collection[str], top: Mapping[str, object], flags: FaultFlags = NO_FAULT_FLAGS
) -> tuple[str, bool] | None:
    """The fault key a workload kind with ``fields`` would drop: a fault, random link
    failures or non-minimal routing given by the scenario's top level (``top``) or the
    command line (``flags``) to a kind that has no such field, as (key, from the
    command line); None when nothing would be dropped."""
    if "faults" in fields:
        return None
    given = flags.workload_keys()
    for key in _CHANGING_KEYS:
        default = FaultKeys.model_fields[key].get_default(call_default_factory=True)
        for value, from_flags in ((given.get(key), True), (top.get(key), False)):
            if value is not None and value != default:
                return key, from_flags
    return None


#: The fault keys that change a run by themselves (a seed or a chip failure policy
#: changes nothing without a fault).
_CHANGING_KEYS = ("faults", "fail_links", "routing")


def load_faults(file: str | Path) -> FaultSet:
    """The fault set in YAML ``file`` (a mapping with ``faults:`` etc., or a bare list
    of faults). Raises ConfigError naming the file, the entry and the line."""
    data, lines = load_yaml(file)
    if isinstance(data, list):
        data = {"faults": data}
        lines = {("faults", *key): line for key, line in lines.items()}
    return validate(FaultSet, data, str(file), lines)
