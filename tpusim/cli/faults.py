"""``tpusim faults``: a Monte Carlo of a collective's time against random failed links
(:mod:`tpusim.study.fault_trials`), and the fault flags shared by ``tpusim collective``
and ``tpusim run`` (``--faults``, ``--fail-links``, ``--seed``, ``--routing``), read as
one :class:`~tpusim.config.faults.FaultFlags`.

The counts of failed links are 0 and the powers of two in ``--fail-links LOW:HIGH``,
both ends included; the fidelity is ``analytic`` by default (the network flags of
:mod:`tpusim.cli.model_flags`); ``--out DIR`` writes ``faults.csv`` and the
degradation curve ``faults.png`` (:mod:`tpusim.report.fault_plots`). This module holds
the flags; :mod:`tpusim.cli.faults_run` runs the command.
"""

from __future__ import annotations

import argparse
from typing import Any

from pydantic import BaseModel, Field
from pydantic.json_schema import JsonDict

from tpusim.cli.flags import Subparsers
from tpusim.cli.model_flags import add_model_flags
from tpusim.cli.network_flags import add_network_flags
from tpusim.config.faults import FaultFlags, GivenFaultFlags, Routing, load_faults
from tpusim.errors import InputError
from tpusim.later import Later
from tpusim.vocabulary import Op

_INT: JsonDict = {"flag_type": "int"}


class FaultFlagValues(GivenFaultFlags):
    """The fault flags of ``tpusim collective`` and ``tpusim run`` as the command line
    reads them (the keys of :class:`~tpusim.config.faults.GivenFaultFlags`, and
    ``faults`` the file to read), before they become a
    :class:`~tpusim.config.faults.FaultFlags`."""

    faults: str | None = Field(None, description="YAML file of faults (see docs/faults.md)")


def add_fault_flags(p: argparse.ArgumentParser) -> None:
    """``--faults FILE``, ``--fail-links N``, ``--seed S``, ``--routing R``."""
    add_model_flags(p, FaultFlagValues)


def fault_flags(args: argparse.Namespace) -> FaultFlags:
    """The fault flags given (``--faults FILE`` read; bad counts refused, naming the flag)."""
    if args.fail_links is not None and args.fail_links < 0:
        raise InputError(f"--fail-links {args.fail_links}: must be >= 0")
    if args.seed is not None and args.seed < 0:
        raise InputError(f"--seed {args.seed}: must be >= 0")
    faults = load_faults(args.faults) if args.faults else None
    return FaultFlags(
        faults=faults, fail_links=args.fail_links, seed=args.seed, routing=args.routing
    )


def fault_lines(rec: dict[str, Any]) -> list[str]:
    """The text lines ``tpusim collective`` adds for faults and routing."""
    failed = ", ".join(f"{a}-{b}" for a, b in rec["failed_links"]) or "none"
    lines = [
        f"faults          links down {failed}; {len(rec['degraded_links'])} degraded; "
        f"chips down {rec['chips_down'] or 'none'}",
        f"routing         {rec['routing']} ({rec['nonminimal_flows']:,} flows non-minimal, "
        f"{rec['rerouted_flows']:,} rerouted around failures)",
    ]
    return lines + [f"adapted         {note}" for note in rec["adapted"]]


def link_counts(text: str) -> list[int]:
    """``LOW:HIGH`` -> LOW, the powers of two between, HIGH (sorted, distinct)."""
    try:
        low, high = (int(part) for part in text.split(":"))
    except ValueError:
        raise InputError(f"--fail-links {text}: expected LOW:HIGH, e.g. 0:16") from None
    if not 0 <= low <= high:
        raise InputError(f"--fail-links {text}: need 0 <= LOW <= HIGH")
    powers = [2**k for k in range(0, high.bit_length() + 1) if low <= 2**k <= high]
    return sorted({low, high, *powers})


class FaultsOptions(BaseModel):
    """``tpusim faults``'s options, besides the network it runs on (default analytic)."""

    system: str = Field(
        description="shipped system name or path to a system YAML",
        json_schema_extra={"positional": True},
    )
    op: Op
    bytes: str = Field(description="size with a unit (nccl-tests convention)")
    fail_links: str = Field("0:16", description="LOW:HIGH failed links (default 0:16)")
    trials: int = Field(20, description="trials per count (default 20)", json_schema_extra=_INT)
    seed: int = Field(1, description="seed of the trials (default 1)", json_schema_extra=_INT)
    routing: Routing = Field("minimal", description="path choice per flow")
    out: str | None = Field(
        None, description="folder for faults.csv and the degradation curve faults.png"
    )
    as_json: bool = Field(False, alias="json", description="print one JSON object")


def add_parsers(sub: Subparsers) -> None:
    p = sub.add_parser("faults")
    add_model_flags(p, FaultsOptions)
    add_network_flags(p, default="analytic")
    p.set_defaults(func=Later("tpusim.cli.faults_run", "cmd_faults"))
