"""Expanding a checked scenario (:class:`~tpusim.study.checking.CheckedScenario`), the
last of its three steps: each workload once per point of its sweep's cross product,
the fault defaults set on the kinds that take them and each point validated again
(:class:`WorkloadPoint`); then the points' collectives checked against the network
fidelity's work limits, through the workloads' typed
:meth:`~tpusim.workloads.WorkloadSpec.network_demand`.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterator
from dataclasses import dataclass

from tpusim.collectives import fewest_sends_per_chip
from tpusim.config.faults import unapplied_fault, with_fault_defaults
from tpusim.config.loader import validate
from tpusim.errors import ConfigError
from tpusim.study.checking import CheckedScenario
from tpusim.units import format_bytes
from tpusim.workloads import WorkloadSpec
from tpusim.workloads.spec import VARIANT_KEYS, SweepRange

__all__ = ["WorkloadPoint", "check_network_work", "expand"]


@dataclass(frozen=True)
class WorkloadPoint:
    """One point of a workload's sweep: spec workload ``index`` (its place in the
    spec's list), the workload with the point's values set (validated), its label
    (``name[field=value,...]``, or the name without a sweep) and the swept fields'
    values, in the sweep's order (as written, or a range's numbers)."""

    index: int
    workload: WorkloadSpec
    label: str
    sweep: tuple[tuple[str, object], ...] = ()


def expand(checked: CheckedScenario) -> list[WorkloadPoint]:
    """Every workload point of ``checked``, workloads in order; collecting problems, a
    broken workload gives no point (and none is listed when the count was refused)."""
    if not checked.expandable:
        return []
    out: list[WorkloadPoint] = []
    for index, workload in enumerate(checked.spec.workloads):
        try:
            points = list(_points(checked, index, workload))
        except ConfigError as exc:
            checked.problem(exc)
            continue
        out += points
    return out


def check_network_work(checked: CheckedScenario, runs: list[WorkloadPoint]) -> None:
    """No system and collective over the fidelity's work limits (packet: no system
    over MAX_PACKET_CHIPS, no collective over MAX_PACKET_HOPS), checked before running."""
    if not runs:
        return

    network = checked.spec.network
    demands = [run.workload.network_demand() for run in runs]
    largest = max(1.0 if d is None else d.bytes for d in demands)
    ops = {(d.op, d.algorithm) for d in demands if d is not None}
    for system, entry in zip(checked.systems, checked.system_entries, strict=True):
        n = system.num_chips
        sends = max((fewest_sends_per_chip(op, n, alg) for op, alg in ops), default=0)
        problem = network.work_problem(n, largest, sends)
        if problem is not None:
            error = checked.read.error(f"{system.name}: {problem}", ("systems", entry))
            checked.problem(error)


def _sweep_values(values: list[object] | SweepRange) -> list[tuple[object, str]]:
    """(value, label) pairs of one swept field (a range's bounds and count were checked
    with the points)."""
    if isinstance(values, SweepRange):
        return [(v, format_bytes(v) if values.in_bytes else str(v)) for v in values.values()]
    return [(v, str(v)) for v in values]


def _refuse_faults(
    checked: CheckedScenario, index: int, workload: WorkloadSpec, fields: Collection[str]
) -> None:
    """A fault key the workload's kind would drop (it simulates no network) is an
    error naming the kind, at the top-level key or the workload."""
    dropped = unapplied_fault(fields, checked.read.data, checked.checking.fault_flags)
    if dropped is None:
        return
    key, from_flags = dropped
    where = "--" + key.replace("_", "-") if from_flags else f"'{key}'"
    problem = (
        f"{where} cannot apply to workload '{workload.name}': a {workload.kind} "
        "workload simulates no network under faults (give faults to the workloads "
        "that take them)"
    )
    raise checked.read.error(problem, checked.at(index) if from_flags else (key,))


def _points(
    checked: CheckedScenario, index: int, workload: WorkloadSpec
) -> Iterator[WorkloadPoint]:
    """Workload ``index`` once per point of its sweep's cross product, validated again."""
    read, kind = checked.read, type(workload)
    raw = checked.raw_workload(index)
    fields = list(workload.sweep)
    for name in fields:
        if name in VARIANT_KEYS or name not in kind.field_names():
            raise read.error(
                f"sweep over '{name}', which is not a field of a {workload.kind} workload",
                checked.at(index, "sweep", name),
            )
    axes = [_sweep_values(workload.sweep[f]) for f in fields]
    for point in itertools.product(*axes):
        values = tuple((f, value) for f, (value, _) in zip(fields, point, strict=True))
        data = {k: v for k, v in raw.items() if k != "sweep"} | dict(values)
        _refuse_faults(checked, index, workload, kind.model_fields)
        flags = checked.checking.fault_flags
        data = with_fault_defaults(data, kind.model_fields, read.data, flags)
        label = ",".join(f"{f}={text}" for f, (_, text) in zip(fields, point, strict=True))
        expanded = validate(kind, data, read.file, read.lines, checked.at(index))
        name = f"{workload.name}[{label}]" if label else workload.name
        yield WorkloadPoint(index, expanded, name, values)
