"""``tpusim topo``: topology metrics of one or more systems."""

from __future__ import annotations

import argparse

from pydantic import BaseModel, Field

from tpusim.cli.console import print_json
from tpusim.cli.flags import Subparsers
from tpusim.cli.model_flags import JsonOutput, add_model_flags
from tpusim.config import load_system
from tpusim.report import topology_lines, topology_summary


class Systems(BaseModel):
    """The systems ``tpusim topo`` describes."""

    system: list[str] = Field(
        description="shipped system name or path to a system YAML",
        json_schema_extra={"positional": True},
    )


def cmd_topo(args: argparse.Namespace) -> None:
    records = [topology_summary(load_system(name)) for name in args.system]
    if args.as_json:
        print_json(records[0] if len(records) == 1 else {"topologies": records})
        return
    print("\n\n".join("\n".join(topology_lines(rec)) for rec in records))


def add_parsers(sub: Subparsers) -> None:
    p = sub.add_parser("topo")
    add_model_flags(p, Systems)
    add_model_flags(p, JsonOutput)
    p.set_defaults(func=cmd_topo)
