"""The ``tpusim`` command line: parse, load, run, print. Thin by design.

Every command prints a readable table, or exactly one JSON object with
``--json``. Bad input exits 2 and a failed simulation 1, each with one line on
stderr and no traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from tpusim import units
from tpusim.config import load_system, shipped
from tpusim.errors import InputError, TpusimError
from tpusim.report import topology_summary


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag as one line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        raise InputError(f"{self.prog}: {message} (see {self.prog} --help)")


def _print_json(record: Any) -> None:
    print(json.dumps(record, indent=2, sort_keys=False))


def _table(rows: list[dict[str, Any]], columns: Sequence[str]) -> str:
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns)]
    lines += ["  ".join(str(r[c]).ljust(widths[c]) for c in columns) for r in rows]
    return "\n".join(lines)


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
    if args.json:
        _print_json({"systems": rows})
    else:
        print(_table(rows, ["name", "chip", "topology", "chips", "description"]))


def _topo_lines(rec: dict[str, Any]) -> list[str]:
    degree = rec["degree"]
    flops = ", ".join(f"{d} {units.format_flops(v)}" for d, v in rec["peak_flops"].items())
    kinds = ", ".join(f"{k} {n}" for k, n in rec["links_by_kind"].items())
    return [
        f"system          {rec['system']} ({rec['chip']} chips)",
        f"topology        {rec['topology']}  {_shape_text(rec['shape'])}",
        f"chips           {rec['chips']:,}",
        f"links           {rec['links']:,} bidirectional ({kinds})",
        f"degree          min {degree['min']}, mean {degree['mean']:.2f}, max {degree['max']}",
        f"diameter        {rec['diameter_hops']} hops",
        f"mean hops       {rec['mean_hops']:.3f}",
        f"bisection       {units.format_bandwidth(rec['bisection_bandwidth_Bps'])} (one direction)",
        f"ICI link        {units.format_bandwidth(rec['link_bandwidth_Bps'])} per direction, "
        f"{units.format_time(rec['hop_latency_s'])} per hop",
        f"peak compute    {flops}",
        f"HBM total       {units.format_bytes(rec['hbm_capacity_bytes'], binary=False)}",
    ]


def _shape_text(shape: dict[str, Any]) -> str:
    if "dims" in shape:
        wrap = "".join("W" if w else "-" for w in shape["wraparound"])
        return f"{'x'.join(map(str, shape['dims']))} wrap {wrap}" + (
            " twisted" if shape["twisted"] else ""
        )
    if "groups" in shape:
        return (
            f"{shape['chips_per_board']} chips/board x {shape['boards_per_group']} boards/group "
            f"x {shape['groups']} groups ({shape['arrangement']})"
        )
    return f"{shape['pods']} pods of {shape['chips_per_pod']:,} chips via {shape['fabric']}"


def cmd_topo(args: argparse.Namespace) -> None:
    records = [topology_summary(load_system(name)) for name in args.system]
    if args.json:
        _print_json(records[0] if len(records) == 1 else {"topologies": records})
        return
    print("\n\n".join("\n".join(_topo_lines(rec)) for rec in records))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tpusim", description="Discrete-event simulator of TPU pods and their interconnect."
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser("systems", help="list the shipped systems")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_systems)
    p = sub.add_parser("topo", help="topology metrics of one or more systems")
    p.add_argument("system", nargs="+", help="shipped system name or path to a system YAML")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_topo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``tpusim`` and ``python -m tpusim``; returns the exit code."""
    try:
        args = build_parser().parse_args(argv)
        args.func(args)
    except TpusimError as exc:
        print(f"tpusim: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
