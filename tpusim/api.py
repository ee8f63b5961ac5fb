"""The front door: what ``import tpusim`` gives (``tpusim.__all__``), each a typed record
from the same path the command line runs.

- :func:`run` (``tpusim run``): a scenario file or shipped name, checked then run ->
  :class:`~tpusim.results.run.ScenarioRun` (its ``records``, ``failures``...);
- :func:`collective`, :func:`training_step`, :func:`serve` (``tpusim collective``, a
  ``training_step`` workload, ``tpusim serve``): one workload on one system ->
  its kind's record (:class:`~tpusim.results.records.CollectiveRecord`,
  :class:`~tpusim.results.records.TrainingRecord`,
  :class:`~tpusim.workloads.serving.ServingRecord`), the numbers a scenario with that
  workload gives;
- :func:`plan` (``tpusim plan``) -> :class:`~tpusim.planner.PlanResult`;
- ``load_system`` and ``Session`` (:mod:`tpusim.config`, :mod:`tpusim.session`).

A workload's keyword arguments are its scenario keys (:mod:`tpusim.workloads`), checked
by the same models: a wrong one is one :class:`~tpusim.errors.ConfigError` naming the
call and the key. ``network`` is the scenario's ``network:`` (a fidelity name, a tree
``{"fidelity": "flow", "tolerance": 0.05}`` or a
:class:`~tpusim.network.NetworkSettings`). ``system`` is a name, a YAML path, a loaded
:class:`~tpusim.config.System` or a :class:`~tpusim.session.Session` (whose topology
and routes are reused). The package imports this module on first use of one of its
names (PEP 562 in ``tpusim/__init__.py``).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

from pydantic import ValidationError

from tpusim.config.loader import System, validate
from tpusim.errors import InputError
from tpusim.network import NetworkSettings
from tpusim.planner import PlanRequest, PlanResult, plan_layouts
from tpusim.results.records import CollectiveRecord, Record, TrainingRecord
from tpusim.results.run import ScenarioRun
from tpusim.session import Session
from tpusim.study.check import check_scenario
from tpusim.study.options import ScenarioRunOptions
from tpusim.study.points import check_point, run_workload
from tpusim.study.pointset import Point, PointSet
from tpusim.study.runner import run_scenario
from tpusim.study.schema import ScenarioSpec
from tpusim.study.systems import locate_scenario
from tpusim.validation.maxtext_run import maxtext_run
from tpusim.workloads import WORKLOADS
from tpusim.workloads.serving import ServingRecord

__all__ = ["collective", "plan", "run", "serve", "training_step", "workload"]

#: A system as the front door takes it.
SystemArg = System | Session | str | os.PathLike[str]
#: A network as the front door takes it: a fidelity name, a ``network:`` tree or settings.
NetworkArg = NetworkSettings | str | dict[str, object] | None

#: What :func:`run` does unless told: in this process, no progress on stderr.
RUN_DEFAULTS: dict[str, object] = {"jobs": 1, "quiet": True}
#: ``tpusim run`` options that are about the command line's output, not the run.
NOT_RUN_OPTIONS = ("out", "json", "as_json")


def run(scenario: str | os.PathLike[str], **options: object) -> ScenarioRun:
    """Scenario ``scenario`` (a YAML path or a shipped name) checked (every problem: a
    :class:`~tpusim.study.check.CheckFailed`, as ``tpusim check``) and run, as ``tpusim
    run`` but writing nothing. ``options`` are :class:`ScenarioRunOptions` fields
    (``jobs``, ``executor``, ``scheduler``, ``max_points``, ``network``,
    ``fault_flags``, ``quiet``; default one job, quiet). The run's points that failed are
    in its ``failures``. Raises InputError for an unknown option or scenario."""
    given = [key for key in options if key in NOT_RUN_OPTIONS]
    if given:
        raise InputError(f"run: {given[0]}: tpusim.run writes nothing (see tpusim.report)")
    try:
        settings = ScenarioRunOptions.model_validate(RUN_DEFAULTS | options)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise InputError(f"run: {where}: {error['msg']}") from None
    settings.check_executor()
    checked = check_scenario(locate_scenario(os.fspath(scenario)), settings)
    checked.raise_problems(before_run=True)
    assert checked.scenario is not None  # no problem: it loaded
    return run_scenario(checked.scenario, settings)


def workload(system: SystemArg, kind: str, network: NetworkArg = None, **fields: object) -> Record:
    """One workload of ``kind`` (a registered kind, :data:`~tpusim.workloads.WORKLOADS`)
    with its scenario keys ``fields`` on ``system``, checked then run as a scenario
    point is; returns its record. Raises ConfigError (naming ``tpusim.KIND()`` and the
    key) for a bad field, InputError for an unknown kind or system, SimulationError for
    a run that cannot finish (out of memory, a deadlock)."""
    if kind not in WORKLOADS:
        known = ", ".join(WORKLOADS.names())
        raise InputError(f"unknown workload kind '{kind}' (choose from {known})")
    session = system if isinstance(system, Session) else Session(system)
    where = f"tpusim.{kind}()"
    spec = validate(WORKLOADS.get(kind).spec, {"kind": kind, "name": kind} | fields, where, {})
    scenario: dict[str, object] = {"name": where, "systems": [session.system.name]}
    scenario |= {"workloads": [spec]} | ({} if network is None else {"network": network})
    point = Point(0, 0, session.system, spec, kind, ())
    point_set = PointSet(
        where, validate(ScenarioSpec, scenario, where, {}), {}, (session.system,), (point,)
    )
    context = point_set.context(point, session.topology, session.routes)
    check_point(point_set, point, context)
    return run_workload(point_set, point, context).record


def collective(
    system: SystemArg,
    op: str,
    bytes: float | str,
    network: NetworkArg = None,
    **fields: object,
) -> CollectiveRecord:
    """``op`` of ``bytes`` (nccl-tests convention; a number or ``"64 MiB"``) on
    ``system``; ``fields`` are the collective workload's other keys (``axes``,
    ``chips``, ``algorithm``, ``faults``, ``fail_links``, ``seed``, ``routing``).
    Returns the :class:`CollectiveRecord` (its ``result``: ``time_s``, ``busbw_Bps``...)."""
    record = workload(system, "collective", network, op=op, bytes=bytes, **fields)
    assert isinstance(record, CollectiveRecord)
    return record


def training_step(
    system: SystemArg, network: NetworkArg = None, maxtext: str | None = None, **fields: object
) -> TrainingRecord:
    """One training step on ``system``: ``fields`` are the training_step workload's keys
    (``model``, ``seq``, ``batch`` or ``batch_per_shard``, ``mesh``, the axes, the
    layout; :mod:`tpusim.workloads.training_step`). With ``maxtext`` (MaxText's command
    line or its ``key=value`` overrides, :mod:`tpusim.validation.maxtext_run`) the
    fields are the line's on the system's slices, ``fields`` overriding them; its keys
    tpusim does not model are named in one :class:`UserWarning`, a field the line needs
    that ``training_step`` lacks is an InputError. Returns its :class:`TrainingRecord`."""
    if maxtext is not None:
        session = system if isinstance(system, Session) else Session(system)
        fields = maxtext_fields(maxtext, session.system) | fields
        system = session
    record = workload(system, "training_step", network, **fields)
    assert isinstance(record, TrainingRecord)
    return record


def maxtext_fields(line: str, system: System) -> dict[str, object]:
    """The training_step fields of MaxText's ``line`` on ``system`` (see
    :func:`training_step`); warns once naming the keys tpusim does not model."""
    run = maxtext_run(line, system)
    if run.missing:
        raise InputError(
            f"maxtext: the run needs {', '.join(run.missing)}, which training_step "
            "does not model yet"
        )
    if run.not_modelled:
        warnings.warn(
            "maxtext: not modelled: " + " ".join(run.not_modelled),
            UserWarning,
            stacklevel=3,
        )
    return dict(run.fields)


def serve(system: SystemArg, network: NetworkArg = None, **fields: object) -> ServingRecord:
    """An inference service on ``system``: ``fields`` are the serving workload's keys
    (``tpusim serve``'s options by field name: ``model``, ``rate``, ``requests``,
    ``find_capacity``...; :class:`~tpusim.serving.options.ServeSpec`). Returns its
    :class:`ServingRecord`."""
    record = workload(system, "serving", network, **fields)
    assert isinstance(record, ServingRecord)
    return record


def plan(
    model: str, system: str | Path, global_batch: int, seq: int, **request: object
) -> PlanResult:
    """``tpusim plan``: the layouts of ``model`` (a preset name or YAML path) training
    ``global_batch`` sequences of ``seq`` tokens on ``system`` (a name or path), searched
    and ranked; ``request`` are more :class:`~tpusim.planner.PlanRequest` fields
    (``dtype``, ``overrides``, ``shortlist``, ``confirm``, ``rank_network``,
    ``confirm_network``: a fidelity name, a ``network:`` tree or settings...).
    Returns the :class:`PlanResult` (``best()``, ``ordered()``). Raises InputError for
    a bad request, SimulationError when no layout fits."""
    try:
        wanted = PlanRequest(model, os.fspath(system), global_batch, seq, **request)
    except TypeError as exc:
        raise InputError(f"plan: {exc}") from None
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise InputError(f"plan: {where}: {error['msg']}") from None
    return plan_layouts(wanted)
