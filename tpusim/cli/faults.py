"""``tpusim faults``: a Monte Carlo of a collective's time against random failed links
(:mod:`tpusim.study.fault_trials`), and the fault flags shared by ``tpusim collective``
and ``tpusim run`` (``--faults``, ``--fail-links``, ``--seed``, ``--routing``), read as
one :class:`~tpusim.config.faults.FaultFlags`.

The counts of failed links are 0 and the powers of two in ``--fail-links LOW:HIGH``,
both ends included; the fidelity is ``analytic`` by default (the network flags of
:mod:`tpusim.cli.model_flags`); ``--out DIR`` writes ``faults.csv`` and the
degradation curve ``faults.png`` (:mod:`tpusim.report.fault_plots`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field
from pydantic.json_schema import JsonDict

from tpusim import units
from tpusim.cli.flags import Subparsers, size_flag
from tpusim.cli.model_flags import add_model_flags, model_values
from tpusim.cli.network_flags import add_network_flags, network_of
from tpusim.config.faults import FaultFlags, GivenFaultFlags, Routing, load_faults
from tpusim.errors import InputError
from tpusim.vocabulary import Op

if TYPE_CHECKING:
    from tpusim.study.fault_trials import FaultTrials


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
    p = sub.add_parser("faults", help="Monte Carlo: a collective's time vs random failed links")
    add_model_flags(p, FaultsOptions)
    add_network_flags(p, default="analytic")
    p.set_defaults(func=cmd_faults)


def cmd_faults(args: argparse.Namespace) -> None:
    from tpusim.study.fault_trials import MAX_TRIALS, monte_carlo

    o = FaultsOptions.model_validate(model_values(args, FaultsOptions))
    if not 1 <= o.trials <= MAX_TRIALS:
        raise InputError(f"--trials {o.trials}: must be in 1..{MAX_TRIALS}")
    if o.seed < 0:
        raise InputError(f"--seed {o.seed}: must be >= 0")
    counts = link_counts(o.fail_links)
    size = size_flag(o.bytes, "--bytes")
    network = network_of(args)
    trials = monte_carlo(o.system, o.op, size, counts, o.trials, o.seed, network, o.routing)
    files = [str(p) for p in write_outputs(trials, Path(o.out))] if o.out else []
    if o.as_json:
        from tpusim.results.files import json_text

        print(json_text(trials.record() | ({"files": files} if files else {})))
        return
    print("\n".join(_lines(trials, files)))


def _lines(trials: FaultTrials, files: list[str]) -> list[str]:
    from tpusim.study.fault_trials import PERCENTILES

    head = (
        f"{trials.system}: {trials.op} of {units.format_bytes(trials.bytes)} "
        f"({trials.algorithm}, {trials.fidelity}, {trials.routing} routing), "
        f"{trials.trials} trials per count; healthy {units.format_time(trials.healthy_time_s)}"
    )
    lines = [head, f"{'links down':>10} " + " ".join(f"{'p' + str(q):>10}" for q in PERCENTILES)]
    for row in trials.counts:
        cut = f"  {row.disconnected} disconnected" if row.disconnected else ""
        if row.percentiles_s is None:
            lines.append(f"{row.failed_links:>10} every trial disconnected{cut}")
            continue
        cells = " ".join(f"{units.format_time(t):>10}" for t in row.percentiles_s)
        lines.append(
            f"{row.failed_links:>10} {cells}  x{row.p50_slowdown or 0:.2f}  {row.algorithms}{cut}"
        )
    return lines + [f"wrote {f}" for f in files]


def write_outputs(trials: FaultTrials, out: Path) -> list[Path]:
    """``faults.csv`` (one row per count) and ``faults.png`` (the degradation curve,
    over the counts with a connected trial)."""
    import pandas as pd

    from tpusim.report.fault_plots import degradation_curve
    from tpusim.results.files import atomic_csv, check_folder_target, output_error
    from tpusim.study.fault_trials import PERCENTILES

    check_folder_target(out, "--out")
    timed = [row for row in trials.counts if row.percentiles_s is not None]
    percentiles = {
        q: [row.percentiles_s[i] for row in timed if row.percentiles_s]
        for i, q in enumerate(PERCENTILES)
    }
    title = (
        f"{trials.system}: {trials.op} of {units.format_bytes(trials.bytes)} "
        f"({trials.trials} trials per count)"
    )
    try:
        out.mkdir(parents=True, exist_ok=True)
        table = pd.DataFrame([row.record() for row in trials.counts])
        atomic_csv(table, out / "faults.csv", index=False)
        counts = [row.failed_links for row in timed]
        degradation_curve(out / "faults.png", counts, percentiles, trials.healthy_time_s, title)
    except OSError as exc:
        raise output_error("--out", out, exc) from None
    return [out / "faults.csv", out / "faults.png"]
