"""``tpusim faults``'s run: the Monte Carlo (:mod:`tpusim.study.fault_trials`), its
table, and ``--out``'s ``faults.csv`` and ``faults.png``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from tpusim import units
from tpusim.cli.faults import FaultsOptions, link_counts
from tpusim.cli.flags import size_flag
from tpusim.cli.model_flags import model_values
from tpusim.cli.network_flags import network_of
from tpusim.errors import InputError
from tpusim.later import LaterModule
from tpusim.report.fault_plots import degradation_curve
from tpusim.results.files import atomic_csv, check_folder_target, json_text, output_error
from tpusim.study.fault_trials import MAX_TRIALS, PERCENTILES, FaultTrials, monte_carlo

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = LaterModule("pandas")  # only for --out


def cmd_faults(args: argparse.Namespace) -> None:
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
        print(json_text(trials.record() | ({"files": files} if files else {})))
        return
    print("\n".join(_lines(trials, files)))


def _lines(trials: FaultTrials, files: list[str]) -> list[str]:
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
