"""``tpusim plan MODEL SYSTEM --global-batch B --seq S``: the fastest training layouts
(mesh roles, remat, microbatches) that fit in memory (see :mod:`tpusim.planner`). Its
flags here (read by every parser); :mod:`tpusim.cli.plan_run` runs it."""

from __future__ import annotations

from pydantic import Field

from tpusim.cli.flags import Subparsers
from tpusim.cli.model_flags import add_model_flags
from tpusim.cli.network_flags import add_network_flags
from tpusim.later import Later
from tpusim.network import FidelityName, NetworkSettings
from tpusim.planner.request import COUNT_FLAG, PlanRequest, plan_fidelities

DEFAULT_TOP = 5


def _default_fidelity(field: str) -> str:
    """The fidelity of the request's default network ``field`` (declared there once)."""
    default = PlanRequest.model_fields[field].get_default(call_default_factory=True)
    assert isinstance(default, NetworkSettings)
    return default.fidelity


class PlanFlags(PlanRequest):
    """``tpusim plan``'s flags: the request's fields (:class:`~tpusim.planner.PlanRequest`),
    what only the command line has (the rows to print, the fragment, JSON) and the
    fidelities the search ranks and confirms at, whose options come from the network
    flags (:mod:`tpusim.cli.network_flags`)."""

    layers: int | None = Field(
        None, description="plan a fragment of this many layers", json_schema_extra=COUNT_FLAG
    )
    top: int = Field(DEFAULT_TOP, description="layouts to print", json_schema_extra=COUNT_FLAG)
    rank_fidelity: FidelityName = Field(
        _default_fidelity("rank_network"),
        description="the network layouts are ranked at (its options: the flags below)",
    )
    confirm_fidelity: FidelityName = Field(
        _default_fidelity("confirm_network"),
        description="the network the best layouts are confirmed at",
    )
    as_json: bool = Field(False, alias="json", description="print one JSON object")


#: Fields the command line does not set: its networks come from the fidelity flags.
NOT_FLAGS = ("overrides", "margin", "rank_network", "confirm_network", "progress")


def add_parsers(sub: Subparsers) -> None:
    """The subcommand, on the CLI's subparsers: one flag per field of :class:`PlanFlags`
    and the network option flags."""
    p = sub.add_parser("plan")
    offered = plan_fidelities()
    fidelities = {"rank_fidelity": offered, "confirm_fidelity": offered}
    add_model_flags(p, PlanFlags, skip=NOT_FLAGS, choices=fidelities)
    add_network_flags(p, choices=offered, fidelity_flag=False)
    p.set_defaults(func=Later("tpusim.cli.plan_run", "cmd_plan"))
