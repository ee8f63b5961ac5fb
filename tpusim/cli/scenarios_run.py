"""``tpusim run``, ``tpusim check`` and ``tpusim scenarios`` run (their flags in
:mod:`tpusim.cli.scenarios`): the scenario checked, run and written, and what they print."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tpusim.cli.faults import fault_flags
from tpusim.cli.model_flags import model_values
from tpusim.cli.network_flags import given_network
from tpusim.cli.scenarios import OTHER
from tpusim.errors import InputError, SimulationError
from tpusim.later import LaterModule
from tpusim.report import format_table, integer_bytes, text_table
from tpusim.results.files import check_folder_target, file_in, json_text, output_error
from tpusim.results.intervals import json_row
from tpusim.results.run import PointFailure
from tpusim.study.check import CheckFailed, check_scenario
from tpusim.study.claims import format_claims
from tpusim.study.options import CheckOptions, ScenarioRunOptions
from tpusim.study.outputs import write_outputs
from tpusim.study.point_log import PointLog, default_jobs
from tpusim.study.runner import run_scenario
from tpusim.study.systems import locate_scenario, scenario_listing

if TYPE_CHECKING:
    import pandas as pd

    from tpusim.results.writers import Outputs
    from tpusim.study.schema import ScenarioSpec
else:
    pd = LaterModule("pandas")  # for the --json comparison only

__all__ = ["cmd_check", "cmd_run", "cmd_scenarios", "run_options", "written_text"]


def cmd_scenarios(args: argparse.Namespace) -> None:
    rows = scenario_listing()
    if args.as_json:
        print(json_text({"scenarios": rows}))
    else:
        print(text_table(rows, ["name", "description", "path"]) if rows else "(none)")


def cmd_check(args: argparse.Namespace) -> None:
    options = CheckOptions.model_validate(model_values(args, CheckOptions, skip=OTHER))
    checked = check_scenario(locate_scenario(args.scenario), options)
    if options.as_json:
        print(json_text(checked.record()))
        if checked.problems:
            raise CheckFailed(checked.problems, reported=True)
        return
    checked.raise_problems()
    assert checked.scenario is not None
    print(
        f"{checked.scenario.spec.name}: {len(checked.scenario.systems)} systems x "
        f"{len(checked.scenario.runs)} workload points checked, no problems"
    )


def run_options(args: argparse.Namespace) -> ScenarioRunOptions:
    """``tpusim run``'s flags as :class:`ScenarioRunOptions`; raises InputError for flags that
    do not go together (``--scheduler`` without ``--executor dask``, fault flags)."""
    given = model_values(args, ScenarioRunOptions, skip=OTHER)
    options = ScenarioRunOptions.model_validate(given | {"network": given_network(args)})
    if options.scheduler is not None and options.executor != "dask":
        raise InputError("--scheduler needs --executor dask")
    if options.jobs is not None and options.executor != "local":
        raise InputError(
            f"--jobs sets the local executor's processes; --executor {options.executor} "
            "spreads the points over its cluster's workers instead: leave out --jobs"
        )
    return options.model_copy(update={"fault_flags": fault_flags(args)})


def cmd_run(args: argparse.Namespace) -> None:
    options = run_options(args)
    checked = check_scenario(locate_scenario(args.scenario), options)
    checked.raise_problems(before_run=True)
    scenario = checked.scenario
    assert scenario is not None
    if options.out:
        out = Path(options.out)
    else:  # out/NAME: the scenario's name must stay one folder inside out/
        out = file_in("out", scenario.spec.name, f"{scenario.file}: name")
    check_folder_target(out, "--out")  # before minutes of simulation, not after
    with PointLog(out) as log:
        run = run_scenario(scenario, options, log.write)
    if not run.records:
        raise SimulationError(_failure_text(run.failures) + log.kept_text())
    outputs = scenario.outputs(run)
    if not options.quiet:
        print(f"writing {out}/", file=sys.stderr, flush=True)
    try:
        # as many processes as simulated: the figures are drawn beside the other files
        written = write_outputs(out, outputs, options.jobs or default_jobs(len(scenario.systems)))
    except OSError as exc:
        raise output_error("--out", out, exc) from None
    pictures = [p for p in written.get("plots", []) if p.suffix == ".png"]
    files = [p for paths in written.values() for p in paths]
    files += [log.path] if log.handle is not None else []
    if options.as_json:
        print(json_text(integer_bytes(_run_record(scenario.spec.name, outputs, out, pictures))))
    else:
        print("\n".join(_run_lines(scenario.spec, outputs, out, files)))
    if run.failures:
        sys.stdout.flush()
        raise SimulationError(_failure_text(run.failures) + log.kept_text())


def _failure_text(failures: list[PointFailure]) -> str:
    """One line per failed point (the command line prefixes each)."""
    return "\n".join(failure.line() for failure in failures)


def _run_record(name: str, outputs: Outputs, out: Path, pictures: list[Path]) -> dict[str, object]:
    """The ``tpusim run --json`` object."""
    comparison = outputs.comparison
    record: dict[str, object] = {
        "scenario": name,
        "results": [json_row(row) for row in outputs.run.rows],
        "out": str(out),
        "comparison": {
            system: {k: v for k, v in column.items() if pd.notna(v)}
            for system, column in comparison.to_dict().items()
        },
        "comparison_intervals": {
            figure: {system: list(pair) for system, pair in by_system.items()}
            for figure, by_system in comparison.attrs.get("intervals", {}).items()
        },
        "comparison_ratios": {
            figure: {
                system: {"ratio": r, "ratio_interval": [lo, hi], "baseline": comparison.columns[0]}
                for system, (r, lo, hi) in by_system.items()
            }
            for figure, by_system in comparison.attrs.get("ratios", {}).items()
        },
        "plots": [str(p) for p in pictures],
        "wall_s": outputs.run.wall_s,
    }
    if outputs.claims is not None:
        record["claims"] = outputs.claims.to_dict("records")
    if outputs.run.failures:
        record["failures"] = [
            {"system": f.system, "workload": f.label, "error": f.message}
            for f in outputs.run.failures
        ]
    return record


def _run_lines(spec: ScenarioSpec, outputs: Outputs, out: Path, files: list[Path]) -> list[str]:
    """The text ``tpusim run`` prints: the comparison table, the claims, the files
    that were written (:func:`written_text`)."""
    lines = [f"{spec.name}: {spec.description}".rstrip(": "), "", format_table(outputs.comparison)]
    if outputs.claims is not None:
        lines += ["\nVendor claims against tpusim\n", format_claims(outputs.claims)]
    lines.append(
        f"\nwrote {out}/ ({written_text(Path(out), files)}); simulated in "
        f"{outputs.run.wall_s:.1f} s"
    )
    return lines


def written_text(out: Path, files: list[Path]) -> str:
    """The files under ``out`` that were written, by name, with a run of numbered or
    per-system files of one kind (``trace-*.json``, the plots) as one pattern and a
    count: ``report.html, summary.csv, trace-*.json (4), 6 plots (PNG and SVG)``."""
    names: dict[str, int] = {}
    plots = 0
    for path in files:
        relative = path.relative_to(out) if path.is_relative_to(out) else path
        if relative.suffix in (".png", ".svg") and relative.name != "report.html":
            plots += relative.suffix == ".png"
            continue
        name = relative.name
        if "-" in relative.stem and relative.suffix == ".json":
            name = relative.stem.split("-")[0] + "-*.json"
        names[name] = names.get(name, 0) + 1
    shown = [name if count == 1 else f"{name} ({count})" for name, count in names.items()]
    if plots:
        shown.append(f"{plots} plots (PNG and SVG)")
    return ", ".join(shown) or "nothing"
