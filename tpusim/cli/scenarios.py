"""The scenario commands: ``tpusim run``, ``tpusim check`` and ``tpusim scenarios``;
their flags here (read by every parser), their run in :mod:`tpusim.cli.scenarios_run`.

``run`` checks the whole scenario first (:mod:`tpusim.study.check`: every problem listed,
exit 2, nothing simulated), then runs it (:mod:`tpusim.study.runner`: locally or on Dask,
with progress on stderr) and writes what ran; points that failed are listed on stderr
after the results (exit 1). The flags become a
:class:`~tpusim.study.options.ScenarioRunOptions` (or ``CheckOptions``), which is what the
study layer takes. A scenario is a path or a shipped name
(:func:`tpusim.study.systems.locate_scenario`).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from tpusim.cli.faults import add_fault_flags
from tpusim.cli.flags import Subparsers
from tpusim.cli.model_flags import JsonOutput, add_model_flags
from tpusim.cli.network_flags import add_network_flags
from tpusim.later import Later
from tpusim.study.options import CheckOptions, ScenarioRunOptions

__all__ = ["OTHER", "ScenarioArgument", "add_parsers"]

#: The module that runs the three commands.
RUN = "tpusim.cli.scenarios_run"


class ScenarioArgument(BaseModel):
    """The scenario ``run`` and ``check`` take."""

    scenario: str = Field(
        description="shipped scenario name (tpusim scenarios) or YAML path",
        json_schema_extra={"positional": True},
    )


#: What the command line does not set through these options' own flags.
OTHER = ("fault_flags", "network")


def add_parsers(sub: Subparsers) -> None:
    """Register ``run``, ``check`` and ``scenarios`` on the subcommand parsers ``sub``: the
    flags of ``run`` and ``check`` are generated from their options models
    (:class:`~tpusim.study.options.ScenarioRunOptions`, ``CheckOptions``), the fault
    flags and the network flags."""
    p = sub.add_parser("scenarios")
    add_model_flags(p, JsonOutput)
    p.set_defaults(func=Later(RUN, "cmd_scenarios"))
    p = sub.add_parser("check")
    add_model_flags(p, ScenarioArgument)
    add_model_flags(p, CheckOptions, skip=OTHER)
    p.set_defaults(func=Later(RUN, "cmd_check"))
    p = sub.add_parser("run")
    add_model_flags(p, ScenarioArgument)
    add_model_flags(p, ScenarioRunOptions, skip=OTHER)
    add_fault_flags(p)
    add_network_flags(p, default=None)
    p.set_defaults(func=Later(RUN, "cmd_run"))
