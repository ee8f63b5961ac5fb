"""``tpusim systems``: the shipped systems, a line each."""

from __future__ import annotations

import argparse

from tpusim.cli.console import print_json
from tpusim.cli.flags import Subparsers
from tpusim.cli.model_flags import JsonOutput, add_model_flags
from tpusim.config import load_system, shipped
from tpusim.report import text_table


def cmd_systems(args: argparse.Namespace) -> None:
    rows = []
    for name in shipped("systems"):
        system = load_system(name)
        rows.append(
            {
                "name": name,
                "chip": system.chip.name,
                "topology": system.topology_kind,
                "chips": system.num_chips,
                "description": system.spec.description,
            }
        )
    if args.as_json:
        print_json({"systems": rows})
    else:
        print(text_table(rows, ["name", "chip", "topology", "chips", "description"]))


def add_parsers(sub: Subparsers) -> None:
    p = sub.add_parser("systems")
    add_model_flags(p, JsonOutput)
    p.set_defaults(func=cmd_systems)
