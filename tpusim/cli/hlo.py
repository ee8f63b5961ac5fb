"""``tpusim hlo``: replay an XLA-compiled HLO module on a system."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pydantic import BaseModel, Field

from tpusim import units
from tpusim.cli.console import print_json
from tpusim.cli.flags import Subparsers
from tpusim.cli.model_flags import add_model_flags, fill
from tpusim.cli.network_flags import add_network_flags, network_of
from tpusim.errors import InputError
from tpusim.results.intervals import chip_of, json_intervals, range_text
from tpusim.results.records import ProgramRecord
from tpusim.workloads.hlo import HloSummary, hlo_summary


def cmd_hlo(args: argparse.Namespace) -> None:
    fill(args, HloFlags, command="tpusim hlo")
    try:
        order = [int(c) for c in args.device_chips.split(",")] if args.device_chips else None
    except ValueError:
        raise InputError(
            f"--device-chips {args.device_chips}: expected chip ids like 0,1,16,17"
        ) from None
    network = network_of(args)
    system, file = _hlo_target(args)
    summary = hlo_summary(file, system, network, order, args.calibration)
    intervals = json_intervals(summary, ProgramRecord.interval_columns, chip_of(system))
    record: dict[str, Any] = {**summary, **intervals}
    if record["unknown_ops"]:
        ops = ", ".join(f"{op} ({n})" for op, n in record["unknown_ops"].items())
        print(f"tpusim: warning: {file}: unknown ops costed by bytes: {ops}", file=sys.stderr)
    if args.as_json:
        print_json(record)
        return
    collectives = ", ".join(f"{k} {v}" for k, v in record["collectives"].items()) or "none"
    print(
        "\n".join(
            [
                f"module          {record['file']} ({record['chips']} chips{_per_chip(summary)}, "
                f"{record['num_ops']} ops)",
                f"system          {record['system']}",
                f"FLOPs per chip  {record['flops_per_chip']:.4g}",
                f"collectives     {collectives} "
                f"({units.format_bytes(record['collective_bytes_per_chip'])} per chip)",
                f"step            {units.format_time(record['step_time_s'])}"
                + range_text(record, "step_time_s", units.format_time)
                + " (compute "
                f"{units.format_time(record['compute_time_s'])}, communication "
                f"{units.format_time(record['communication_time_s'])}, exposed "
                f"{units.format_time(record['exposed_communication_time_s'])})",
                f"interval basis  {record['interval_basis']}",
                *_xla_line(summary),
            ]
        )
    )


def _xla_line(record: HloSummary) -> list[str]:
    """XLA's own figures of a ``tpusim compile`` artifact (none for plain HLO text)."""
    compiled = record["compiled"]
    if not compiled:
        return []
    return [
        f"XLA             {compiled['xla_flops']:.4g} FLOPs per device with loop bodies once "
        f"(tpusim: {compiled['flops_loop_bodies_once']:.4g}), peak memory "
        f"{units.format_bytes(compiled['xla_peak_memory_bytes'])} per device"
    ]


def _per_chip(record: HloSummary) -> str:
    """`` x 2 devices`` for a compiled artifact of several devices per chip, else ''."""
    per_chip = int(record["compiled"].get("devices_per_chip", 1))
    return f" x {per_chip} devices" if per_chip > 1 else ""


class HloFlags(BaseModel):
    """``tpusim hlo``'s options, besides the network flags."""

    where: list[str] = Field(
        description="shipped system name or path, then the HLO text (as "
        "jax.jit(f).lower(...).compile().as_text()) or a tpusim compile artifact "
        "(*.json.gz); the system first, as every command takes it",
        json_schema_extra={"positional": True, "metavar": "SYSTEM FILE"},
    )
    system: str | None = Field(
        None, description="the system, with FILE alone (the older form, kept)"
    )
    device_chips: str | None = Field(
        None,
        description="chip of each device in order, e.g. 0,1,16,17 (default: device d on chip d)",
    )
    calibration: str | None = Field(
        None, description="calibration overlay YAML (from tpusim calibrate)"
    )
    as_json: bool = Field(False, alias="json", description="print one JSON object")


def _add_hlo_parser(sub: Subparsers) -> None:
    """The ``hlo`` command's flags."""
    p = sub.add_parser(
        "hlo",
        usage="tpusim hlo SYSTEM FILE [options]  (or: tpusim hlo FILE --system SYSTEM)",
    )
    add_model_flags(p, HloFlags)
    add_network_flags(p)
    p.set_defaults(func=cmd_hlo)


def _hlo_target(args: argparse.Namespace) -> tuple[str, str]:
    """(system, file) of ``tpusim hlo SYSTEM FILE`` or ``tpusim hlo FILE --system S``."""
    where = args.where
    if args.system is not None and len(where) == 1:
        return args.system, where[0]
    if args.system is None and len(where) == 2:
        return where[0], where[1]
    raise InputError(
        "hlo: give SYSTEM FILE (or FILE --system SYSTEM), got "
        + " ".join(where)
        + (f" --system {args.system}" if args.system else "")
        + " (see tpusim hlo --help)"
    )


def add_parsers(sub: Subparsers) -> None:
    _add_hlo_parser(sub)
