"""The scenario file's schema (:class:`ScenarioSpec`): its systems, workloads (each
validated by its kind's spec class, :mod:`tpusim.workloads`), network fidelity, point
limit, fault defaults and what to write; the :class:`Assumptions` behind energy and
cost columns; and the rewrite of workloads' ``model:`` paths relative to the file
(:func:`models_beside`). :class:`tpusim.study.scenario.Scenario` loads a file through it.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field, PositiveFloat, PositiveInt

from tpusim.config.chip import ChipSpec
from tpusim.config.faults import GivenFaultKeys
from tpusim.config.limits import MAX_SWEEP_POINTS
from tpusim.config.types import Frozen, Power, Source
from tpusim.network import NetworkSettings, NetworkTree
from tpusim.study.systems import SystemVariants
from tpusim.vocabulary import Dtype
from tpusim.workloads import Workload

__all__ = ["Assumptions", "OneWorkload", "ScenarioSpec", "models_beside"]


class Assumptions(Frozen):
    """Figures nothing publishes, keyed by chip name: all-in power per chip at full load
    (energy columns, :mod:`tpusim.results.energy`) and price per chip-hour in US dollars
    (cost columns). A chip missing here falls back to its file's ``power.typical``;
    without a price there is no cost. ``power_basis``: the dtype whose peak the power
    figures were derived at (shown beside the energy figures); ``sources``: the source
    and grade of each figure, keyed by its path (``power_per_chip.tpu8t``)."""

    power_per_chip_W: dict[str, Power] = Field(default_factory=dict, alias="power_per_chip")
    price_per_chip_hour_usd: dict[str, PositiveFloat] = Field(
        default_factory=dict, alias="price_per_chip_hour_usd"
    )
    power_basis: Dtype | None = None
    sources: dict[str, Source] = Field(default_factory=dict)

    def power_W(self, chip: ChipSpec) -> float | None:
        """All-in power per chip (W): the assumption, else the chip file's typical power."""
        power = self.power_per_chip_W.get(chip.name)
        if power is None and chip.power is not None:
            power = chip.power.typical_W
        return power

    def price_usd(self, chip: ChipSpec) -> float | None:
        """Price per chip-hour (USD), if assumed."""
        return self.price_per_chip_hour_usd.get(chip.name)


def models_beside(data: object, folder: Path) -> object:
    """``data`` with each workload's ``model:`` path (a YAML file, not a shipped name),
    serving ``server:`` profile path and ``trace:`` CSV taken relative to ``folder``,
    the scenario's, as its ``calibration:`` and HLO files are (a jobs workload's
    ``serve:`` entries' too); shipped names and
    absolute paths are kept.
    Anything else is left for validation to report."""
    workloads = data.get("workloads") if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(workloads, list):
        return data
    return {**data, "workloads": [_model_beside(w, folder) for w in workloads]}


def _model_beside(workload: object, folder: Path) -> object:
    if not isinstance(workload, dict):
        return workload
    trace = workload.get("trace")
    if isinstance(trace, str) and trace and not Path(trace).is_absolute():
        workload = {**workload, "trace": os.path.join(folder, trace)}  # a serving trace CSV
    for key in ("model", "server"):  # a model file; a serving workload's server profile
        value = workload.get(key)
        if _is_relative_file(value):
            workload = {**workload, key: os.path.join(folder, str(value))}
    jobs = workload.get("jobs")
    if isinstance(jobs, list):  # a jobs workload's serving entries
        entries = [
            {**job, "serve": _model_beside(job["serve"], folder)}
            if isinstance(job, dict) and isinstance(job.get("serve"), dict)
            else job
            for job in jobs
        ]
        workload = {**workload, "jobs": entries}
    return workload


def _is_relative_file(value: object) -> bool:
    """Whether ``value`` names a YAML file by a relative path (not a shipped name)."""
    if not isinstance(value, str) or not value or Path(value).is_absolute():
        return False
    return value.endswith((".yaml", ".yml")) or "/" in value


class ScenarioSpec(GivenFaultKeys):
    """A scenario file: systems x workloads (each validated by its kind's spec class,
    see :mod:`tpusim.workloads`), the network every point runs on (a tree,
    :mod:`tpusim.network.tree`), what to write and the fault keys its workloads default
    to (:class:`~tpusim.config.faults.GivenFaultKeys`)."""

    name: str
    description: str = ""
    network: NetworkTree = Field(default_factory=NetworkSettings)
    calibration: str | None = None
    systems: list[str | SystemVariants] = Field(min_length=1)
    workloads: list[Workload] = Field(min_length=1)
    assumptions: Assumptions = Field(default_factory=Assumptions)
    plots: bool = True
    claims: bool = False
    max_points: PositiveInt = MAX_SWEEP_POINTS


class OneWorkload(Frozen):
    """One workload validated alone, keyed by its index in the file (its YAML path)."""

    workloads: dict[int, Workload]
