"""The run path of issue 25: scenario -> point set -> executor -> records, one way
(each module imports only those before it, in every import form), typed (frozen points,
typed details and failures), with ``tpusim run``'s options as a model and the workload
kinds in one registry."""

from __future__ import annotations

import ast
import dataclasses
import math
import pickle
from pathlib import Path
from typing import Literal

import pytest
from test_code_shape import PACKAGE, _imported

from tpusim.errors import InputError, SimulationError
from tpusim.registry import DuplicateEntryError, UnknownEntryError
from tpusim.results.run import PointFailure, ProgramDetail
from tpusim.study.executors import Dask, InProcess, executor_for
from tpusim.study.options import ScenarioRunOptions
from tpusim.study.pointset import point_set_of
from tpusim.study.runner import run_point_set
from tpusim.study.scenario import Scenario
from tpusim.study.workers import WorkerProcesses
from tpusim.workloads import WORKLOADS, Outcome, WorkloadContext, WorkloadKind, WorkloadSpec

#: The run path, in its one direction.
ORDER = ("scenario", "pointset", "points", "workers", "executors", "runner")

SCENARIO = """\
name: path
systems: [v5e-pod, v6e-pod, torus-8x8x16]
workloads:
  - {name: ar, kind: collective, op: all-reduce, bytes: 1 MiB,
     sweep: {bytes: [1 MiB, 4 MiB], op: [all-reduce, all-gather]}}
  - {name: prog, kind: program, systems: [v6e-pod],
     ops: [{name: mm, kind: matmul, m: 1024, n: 1024, k: 1024}]}
  - {name: big, kind: program, systems: [v5e-pod, torus-8x8x16],
     ops: [{name: mm, kind: matmul, m: 2048, n: 2048, k: 2048}]}
"""
SYSTEMS = ["v5e-pod", "v6e-pod", "torus-8x8x16"]


@pytest.fixture
def scenario(tmp_path):
    path = tmp_path / "path.yaml"
    path.write_text(SCENARIO)
    return Scenario(path)


def _study_imports(name: str) -> set[str]:
    """The run-path modules ``study/<name>.py`` imports (any form, anywhere in it)."""
    path = PACKAGE / "study" / f"{name}.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        for dotted in _imported(path, node):
            parts = dotted.split(".")
            if parts[:2] == ["tpusim", "study"] and len(parts) > 2 and parts[2] in ORDER:
                found.add(parts[2])
    return found - {name}


@pytest.mark.parametrize("position", range(len(ORDER)))
def test_each_run_path_module_imports_only_those_before_it(position):
    name = ORDER[position]
    assert _study_imports(name) <= set(ORDER[:position]), name


def test_the_plan_has_every_point_once_systems_in_order(scenario):
    point_set = point_set_of(scenario)
    # closed form: 4 collective points on 3 systems, one program on 1, one on 2
    assert len(point_set.points) == 4 * 3 + 1 + 2
    assert [s.name for s in point_set.systems] == SYSTEMS
    keys = [(p.system_index, p.run_index) for p in point_set.points]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    for point in point_set.points:
        assert point_set.systems[point.system_index] == point.system
        only = point.workload.systems
        assert only is None or point.system.name in only
    labels = {p.label for p in point_set.on_system(1)}
    assert "prog" in labels and "big" not in labels
    first = point_set.points[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.label = "other"  # type: ignore[misc]
    assert (
        pickle.loads(pickle.dumps(point_set)).points == point_set.points
    )  # point sets cross processes


def test_sweep_points_carry_the_swept_values(scenario):
    runs = [r for r in scenario.runs if r.index == 0]
    values = [(r.workload.bytes, r.workload.op) for r in runs]
    assert values == [(m * 2**20, op) for m in (1, 4) for op in ("all-reduce", "all-gather")]
    ops = ("all-reduce", "all-gather")
    written = [(("bytes", f"{m} MiB"), ("op", op)) for m in (1, 4) for op in ops]
    assert [r.sweep for r in runs] == written
    assert {p.sweep for p in point_set_of(scenario).points if p.label.startswith("ar[")} == set(
        written
    )
    assert math.prod(len(v) for v in scenario.spec.workloads[0].sweep.values()) == len(runs)


def test_executors_give_the_same_records_and_typed_details(scenario):
    point_set = point_set_of(scenario)
    here = run_point_set(point_set, ScenarioRunOptions(quiet=True, jobs=1))
    pooled = run_point_set(point_set, ScenarioRunOptions(quiet=True, jobs=2))
    assert here.rows == pooled.rows
    assert [(r["system"], r["workload"]) for r in here.rows] == [
        (p.system.name, p.label) for p in point_set.points
    ]
    programs = [(r.system, r.workload) for r in here.records if r.kind == "program"]
    assert [(d.system, d.label) for d in here.details] == programs
    assert all(isinstance(d, ProgramDetail) and d.results.step_time_s > 0 for d in here.details)
    assert sorted(here.topologies) == sorted(SYSTEMS) and here.failures == []


class Broken(WorkloadSpec):
    """A kind whose run always fails (a simulation error)."""

    kind: Literal["broken_for_path"]
    name: str


def run_broken(spec: Broken, context: WorkloadContext) -> Outcome:
    raise SimulationError(f"{spec.name} cannot run")


def test_a_failed_point_is_a_typed_failure(tmp_path):
    WORKLOADS.register("broken_for_path", WorkloadKind(Broken, run_broken))
    try:
        path = tmp_path / "s.yaml"
        path.write_text(
            "name: f\nsystems: [v5e-pod]\nworkloads:\n"
            "  - {name: b, kind: broken_for_path}\n"
            "  - {name: ar, kind: collective, op: all-reduce, bytes: 1 MiB}\n"
        )
        run = run_point_set(point_set_of(Scenario(path)), ScenarioRunOptions(quiet=True, jobs=1))
    finally:
        WORKLOADS.unregister("broken_for_path")
    assert [r.workload for r in run.records] == ["ar"]
    assert run.failures == [PointFailure("v5e-pod", "b", "b cannot run")]
    assert run.failures[0].line() == "v5e-pod b failed: b cannot run"


def test_options_choose_the_executor():
    assert executor_for(ScenarioRunOptions(jobs=1), 3) == InProcess()
    assert executor_for(ScenarioRunOptions(jobs=8), 3) == WorkerProcesses(3)
    assert executor_for(ScenarioRunOptions(jobs=8), 1) == InProcess()
    assert executor_for(ScenarioRunOptions(executor="dask", jobs=8), 3) == Dask(None)
    with pytest.raises(InputError, match="a scheduler address needs the dask executor"):
        executor_for(ScenarioRunOptions(scheduler="tcp://h:8786"), 3)


def test_run_flags_become_run_options(tmp_path):
    from tpusim.cli.app import build_parser
    from tpusim.cli.scenarios_run import run_options

    args = build_parser().parse_args(
        [
            *("run", "demo", "--out", str(tmp_path), "--jobs", "3", "--quiet", "--json"),
            *("--max-points", "7", "--fail-links", "2", "--seed", "5"),
        ]
    )
    options = run_options(args)
    assert options == ScenarioRunOptions(
        out=Path(tmp_path),
        jobs=3,
        quiet=True,
        json=True,
        max_points=7,
        fault_flags=options.fault_flags,
    )
    assert options.as_json and options.executor == "local" and options.scheduler is None
    assert options.fault_flags.fail_links == 2 and options.fault_flags.seed == 5


def test_workload_kinds_are_one_registry_of_their_modules_entries():
    from tpusim import workloads
    from tpusim.workloads import WORKLOADS

    names = WORKLOADS.names()
    assert list(names) == sorted(names)  # the order of the choices in messages
    for name in names:
        module = getattr(workloads, name)
        assert WORKLOADS.get(name) is module.KIND
        assert module.KIND.spec.model_fields["kind"].annotation.__args__ == (name,)
    with pytest.raises(DuplicateEntryError):
        WORKLOADS.register("hlo", WORKLOADS.get("program"))
    with pytest.raises(UnknownEntryError):
        WORKLOADS.get("broken_for_path")
