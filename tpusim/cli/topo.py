"""``tpusim topo``: topology metrics of one or more systems."""

from __future__ import annotations

import argparse

from tpusim.cli.console import print_json
from tpusim.cli.flags import Subparsers
from tpusim.config import load_system
from tpusim.report import topology_lines, topology_summary


def cmd_topo(args: argparse.Namespace) -> None:
    records = [topology_summary(load_system(name)) for name in args.system]
    if args.json:
        print_json(records[0] if len(records) == 1 else {"topologies": records})
        return
    print("\n\n".join("\n".join(topology_lines(rec)) for rec in records))


def add_parsers(sub: Subparsers) -> None:
    p = sub.add_parser("topo", help="topology metrics of one or more systems")
    p.add_argument("system", nargs="+", help="shipped system name or path to a system YAML")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_topo)
