"""``tpusim step SYSTEM --maxtext LINE``: one MaxText training step, pasted as its
command line, run as a ``training_step`` on a system (:mod:`tpusim.validation.
maxtext_run` reads the line; the record is the one a scenario's ``training_step``
gives, with its 80% intervals)."""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any

from pydantic import BaseModel, Field

from tpusim import units
from tpusim.cli.console import print_json
from tpusim.cli.flags import Subparsers
from tpusim.cli.model_flags import add_model_flags, fill
from tpusim.cli.network_flags import add_network_flags, network_of


def cmd_step(args: argparse.Namespace) -> None:
    from tpusim.api import training_step
    from tpusim.config.loader import load_system
    from tpusim.results.intervals import json_row, range_text

    fill(args, StepFlags, command="tpusim step")
    system = load_system(args.system)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        record = training_step(system, network_of(args), maxtext=args.maxtext)
    for warning in caught:
        print(f"tpusim: warning: {warning.message}", file=sys.stderr)
    row: dict[str, Any] = json_row(record.interval_row(system.chip.name))
    if args.as_json:
        print_json(row)
        return
    peak = row["peak_hbm_bytes_per_chip"]
    capacity = system.chip.hbm.capacity_bytes
    print(
        "\n".join(
            [
                f"system          {system.name} ({row['chips']} chips of {system.chip.name})",
                f"step            {units.format_time(row['step_time_s'])}"
                + range_text(row, "step_time_s", units.format_time)
                + f" (compute {units.format_time(row['compute_time_s'])}, exposed "
                f"communication {units.format_time(row['exposed_communication_time_s'])})",
                f"MFU             {100 * row['mfu']:.1f}%"
                + range_text(row, "mfu", lambda x: f"{100 * x:.1f}%"),
                f"tokens/s        {row['tokens_per_s']:,.0f}"
                + range_text(row, "tokens_per_s", lambda x: f"{x:,.0f}"),
                f"HBM per chip    {units.format_bytes(peak)} of "
                f"{units.format_bytes(capacity)} at the peak stage",
                f"interval basis  {row['interval_basis']}",
            ]
        )
    )


class StepFlags(BaseModel):
    """``tpusim step``'s options, besides the network flags."""

    system: str = Field(
        description="shipped system name or path to a system YAML (one slice, or pods "
        "of slices as MaxText's DCN slices)",
        json_schema_extra={"positional": True},
    )
    maxtext: str = Field(
        description="MaxText's command line or its key=value overrides, quoted, e.g. "
        "'model_name=llama3.1-70b per_device_batch_size=2 max_target_length=8192 "
        "remat_policy=full ici_fsdp_parallelism=-1' (MaxText's defaults for the rest; "
        "keys tpusim does not model are named in one warning)",
    )
    as_json: bool = Field(False, alias="json", description="print one JSON object")


def add_parsers(sub: Subparsers) -> None:
    p = sub.add_parser("step", usage="tpusim step SYSTEM --maxtext 'key=value ...' [options]")
    add_model_flags(p, StepFlags)
    add_network_flags(p)
    p.set_defaults(func=cmd_step)
