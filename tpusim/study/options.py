"""The options of ``tpusim check`` and ``tpusim run`` as typed models: the command line
builds them from its flags (:mod:`tpusim.cli.scenarios`) and the study layer takes
them (:func:`tpusim.study.check.check_scenario`, :func:`tpusim.study.runner.run_scenario`),
so no namespace or flag text goes below the command line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, PositiveInt

from tpusim.config.faults import FaultFlags
from tpusim.config.limits import MAX_SWEEP_POINTS
from tpusim.config.types import Frozen
from tpusim.errors import InputError
from tpusim.network import NetworkTree
from tpusim.study.point_log import WORKER_MEMORY_BYTES

__all__ = ["EXECUTORS", "IN_PROCESS", "CheckOptions", "ExecutorName", "ScenarioRunOptions"]

#: Where ``tpusim run`` runs the points: ``local`` (this machine's processes) or
#: ``dask`` (a Dask cluster, :mod:`tpusim.study.executors`).
ExecutorName = Literal["local", "dask"]
EXECUTORS: tuple[ExecutorName, ...] = ("local", "dask")


class CheckOptions(Frozen):
    """How a scenario is loaded and checked: ``max_points`` overrides the file's
        ``max_points`` (None: the file's); ``fault_flags`` are the command line's fault
        flags (:class:`~tpusim.config.faults.FaultFlags`), set on every workload that
        takes them; ``network`` (the network flags) replaces the file's ``network:`` (None:
        the file's); ``as_json``: print one JSON object (``--json``). The command line's flags
    are generated from these fields (:mod:`tpusim.cli.scenarios`)."""

    max_points: PositiveInt | None = Field(
        default=None,
        description="most workload points (sweep points over all workloads) to run "
        f"(default {MAX_SWEEP_POINTS:,}; refused above it)",
        json_schema_extra={"flag_type": "positive"},
    )
    fault_flags: FaultFlags = Field(default_factory=FaultFlags)
    network: NetworkTree | None = None
    as_json: bool = Field(default=False, alias="json", description="print one JSON object")


class ScenarioRunOptions(CheckOptions):
    """How a scenario is run (``tpusim run``), besides how it is checked: ``out``, the
    output folder (None: ``out/SCENARIO_NAME``); ``executor`` and, for Dask, its
    ``scheduler`` address (None: a local cluster); ``jobs``, systems simulated at once
    by the local executor (None: :func:`~tpusim.study.point_log.default_jobs`; 1: in
    this process); ``quiet``: no progress on stderr."""

    out: Path | None = Field(
        default=None,
        description="output folder (default out/SCENARIO_NAME)",
        json_schema_extra={"flag_type": "path"},
    )
    executor: ExecutorName = Field(
        default="local",
        description="local (default): this machine; dask: one task per (system, workload "
        "point) on a Dask cluster (pip install 'tpusim[dask]')",
    )
    scheduler: str | None = Field(
        default=None,
        description="Dask scheduler address, e.g. tcp://10.0.0.5:8786 (default: a local "
        "cluster of 2 worker processes)",
    )
    jobs: PositiveInt | None = Field(
        default=None,
        description="local executor: systems simulated at once, each in its own process "
        "(default: one per CPU core, fewer when free memory is short: "
        f"{WORKER_MEMORY_BYTES // 2**30} GiB each; 1 runs in-process)",
        json_schema_extra={"flag_type": "positive"},
    )
    quiet: bool = Field(default=False, description="no progress on stderr")

    def check_executor(self) -> None:
        """Raise InputError for a scheduler given without the Dask executor."""
        if self.scheduler is not None and self.executor != "dask":
            raise InputError(
                f"a scheduler address needs the dask executor (executor is {self.executor!r})"
            )


#: Running in this process with progress on stderr (``run_scenario``'s default).
IN_PROCESS = ScenarioRunOptions(jobs=1)
