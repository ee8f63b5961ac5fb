"""``tpusim validate --workloads`` and ``tpusim calibrate --workloads``: what they print.
Imported only for ``--workloads`` (:mod:`tpusim.cli.validate_run`)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from tpusim import units
from tpusim.cli.network_flags import network_of
from tpusim.cli.validate_text import coverage_text, uncertainty_target, worse_sentence
from tpusim.config.cost_terms import load_cost_terms_file, with_terms
from tpusim.config.loader import load_chip
from tpusim.errors import InputError
from tpusim.later import Later
from tpusim.report import text_table
from tpusim.results.files import atomic_write_text, check_file_target, json_text, output_error
from tpusim.validation.residuals import family_grouping, training_model, workload_residuals
from tpusim.validation.uncertainty import nested_coverage, write_grouping, write_kind
from tpusim.validation.workloads import load_workload_cases
from tpusim.validation.workloads_fit import (
    calibrate_workloads,
    cost_terms_text,
    cross_validate,
    fit_results,
)
from tpusim.validation.workloads_run import validate_workloads, workload_summary

COMPILED = Later("tpusim.cli.validate_compiled", "cmd_validate_compiled")
COLUMNS = ("id", "chip", "model", "slice", "measured", "simulated", "error", "split", "status")


def cmd_validate_workloads(args: argparse.Namespace) -> None:
    """Simulate every workload case (with ``--calibration``'s shared cost terms, a file
    ``calibrate --workloads`` wrote) and print the table and summary, or one JSON object
    with ``--json``; with ``--cv`` the cross-validation instead."""
    cases = load_workload_cases(args.measurements)
    if getattr(args, "cv", None):
        return cmd_cross_validate(args, cases)
    if getattr(args, "compiled", False):
        return COMPILED(args, cases)
    chips = _calibrated_chips(args.calibration, cases) if args.calibration else {}
    results = validate_workloads(cases, chips, network_of(args), args.approximate)
    stats = workload_summary(results)
    if args.as_json:
        print(json_text({"cases": [r.row() for r in results], **stats}))
        return
    print(results_table([r.row() for r in results]))
    print()
    print(summary_lines(stats))


def _calibrated_chips(path: str, cases: list[Any]) -> dict[str, Any]:
    """The cases' chips at the shared terms of the file at ``path``."""
    terms = load_cost_terms_file(Path(path)).terms
    names = dict.fromkeys(c.spec.chip for c in cases)
    return {name: with_terms(load_chip(name), terms) for name in names}


def cmd_cross_validate(args: argparse.Namespace, cases: list[Any]) -> None:
    """``validate --workloads --cv chip|family``: per group, the terms fitted without it
    and its cases' errors; then the held-out summary over every group."""
    folds = cross_validate(cases, args.cv, network_of(args), args.approximate, _jobs(args))
    held = [r for f in folds for r in f.results]
    record = {
        "cv": args.cv,
        "folds": [
            {
                "group": f.group,
                "median_abs_error": f.median_abs_error,
                "terms": f.fit.terms.model_dump(),
                "fit_on": f.fit.fit_on,
                "at_bound": f.fit.at_bound,
                "cases": [r.row() for r in f.results],
            }
            for f in folds
        ],
        "held_out": workload_summary(held),
    }
    rows = [r.row() for r in held]
    record["held_out"]["coverage_80"] = nested_coverage(workload_residuals(rows, args.cv))
    if args.write_uncertainty is not None:
        _write_training(args, rows, [c.file for c in cases])
    if args.as_json:
        print(json_text(record))
        return
    print(results_table([r.row() for r in held]))
    print()
    for fold in record["folds"]:
        median = fold["median_abs_error"]
        shown = "-" if median is None else f"{median:.1%}"
        terms = ", ".join(f"{k} {v:.3g}" for k, v in fold["terms"].items())
        print(
            f"{args.cv} {fold['group']:<12} held-out median |error| {shown}; fitted without "
            f"it on {len(fold['fit_on'])} cases: {terms}"
        )
    print()
    print("held out (each case predicted by terms fitted without its group):")
    print(summary_lines(record["held_out"]))


def _write_training(args: argparse.Namespace, rows: list[Any], files: list[str]) -> None:
    """The held-out rows as the ``training_step_time`` model in ``--write-uncertainty``'s
    file; a line on stderr naming it."""
    target = uncertainty_target(args)
    command = " ".join(["tpusim", *sys.argv[1:]])
    try:
        if args.cv == "chip":
            write_kind(target, "training_step_time", training_model(rows, files, command))
        else:
            write_grouping(
                target, "training_step_time", args.cv, family_grouping(rows, files, command)
            )
    except OSError as exc:
        raise output_error("--write-uncertainty", str(target), exc) from None
    except ValueError as exc:
        raise InputError(f"--write-uncertainty: {exc} (run --cv chip first)") from None
    print(f"wrote training_step_time ({args.cv}) to {target}", file=sys.stderr)


def _jobs(args: argparse.Namespace) -> int:
    """``--jobs``, default one worker process per core."""
    return args.jobs or os.cpu_count() or 1


def cmd_calibrate_workloads(args: argparse.Namespace) -> None:
    """Fit the shared cost terms on the ``fit`` cases of every chip, write them to
    ``--out`` (the ``configs/cost_terms.yaml`` format) and print the terms and the fit
    and holdout errors."""
    cases = load_workload_cases(args.measurements)
    check_file_target(args.out, "--out")
    fit = calibrate_workloads(cases, network_of(args), args.approximate, _jobs(args))
    if not fit.fit_on:
        raise InputError("calibrate --workloads: no expressible 'fit' case to fit the terms on")
    results = fit_results(fit, cases, network_of(args), args.approximate)
    worse = _worse_than_shipped(args, cases, fit.fit_on, results)
    try:  # the last step: a Ctrl-C while fitting leaves no file behind
        atomic_write_text(args.out, cost_terms_text(fit, worse))
    except OSError as exc:
        raise output_error("--out", args.out, exc) from None
    record = {
        "calibration": args.out,
        "terms": fit.terms.model_dump(),
        "fit_on": fit.fit_on,
        "not_fitted": fit.skipped,
        "at_bound": fit.at_bound,
        "worse_than_shipped": worse,
        "cases": [r.row() for r in results],
        **workload_summary(results),
    }
    if args.as_json:
        print(json_text(record))
        return
    terms = ", ".join(f"{k} {v:.4g}" for k, v in record["terms"].items())
    bound = f"; at bound: {', '.join(fit.at_bound)}" if fit.at_bound else ""
    print(f"shared terms: {terms} ({len(fit.fit_on)} cases){bound}")
    print()
    print(results_table(record["cases"]))
    print()
    print(summary_lines(record))
    if worse:
        print(f"\nWORSE THAN THE SHIPPED TERMS: {worse}")
    print(f"\nwrote {args.out} (apply with validate --workloads --calibration {args.out})")


def _worse_than_shipped(
    args: argparse.Namespace, cases: list[Any], fit_on: list[str], results: list[Any]
) -> str | None:
    """A sentence when the fitted terms give the cases they were fitted on a larger
    median |error| than the shipped terms (``validate --workloads`` without
    ``--calibration``) by over WORSE_TOLERANCE; else None."""
    ids = set(fit_on)
    shipped = validate_workloads(
        [c for c in cases if c.id in ids], {}, network_of(args), args.approximate
    )
    before = [abs(r.error) for r in shipped if r.error is not None]
    after = [abs(r.error) for r in results if r.case.id in ids and r.error is not None]
    return worse_sentence(before, after, len(ids), "cases")


def summary_lines(stats: dict[str, Any]) -> str:
    """One line per split (all, fit, holdout) and one of the statuses."""
    lines = []
    for label, part in (("all", stats), ("fit", stats["fit"]), ("holdout", stats["holdout"])):
        n = part["simulated"]
        median = part["median_abs_error"]
        shown = "-" if median is None else f"{median:.1%}"
        lines.append(
            f"{label:<8} {part['total']:>3} cases, {n:>3} simulated, "
            f"{part['within_10pct']:>3} within 10% ({_share(part['within_10pct'], n)}), "
            f"{part['within_15pct']:>3} within 15% ({_share(part['within_15pct'], n)}), "
            f"median |error| {shown}" + coverage_text(part)
        )
    lines.append("status   " + ", ".join(f"{k}: {v}" for k, v in stats["status"].items()))
    return "\n".join(lines)


def _share(count: int, total: int) -> str:
    return f"{count / total:.0%}" if total else "-"


def results_table(rows: list[dict[str, Any]]) -> str:
    """The cases as a text table; a not simulated case shows ``-``."""

    def when(seconds: float | None) -> str:
        return "-" if seconds is None else units.format_time(seconds)

    shown = [
        {
            "id": r["id"],
            "chip": r["chip"],
            "model": r["model"],
            "slice": r["slice"],
            "measured": when(r["measured_s"]),
            "simulated": when(r["simulated_s"]),
            "error": "-" if r["error"] is None else f"{r['error']:+.1%}",
            "split": r["split"],
            "status": _status(r),
        }
        for r in rows
    ]
    return text_table(shown, COLUMNS)


def _status(row: dict[str, Any]) -> str:
    if row["status"] == "not expressible":
        return f"not expressible: {row['detail']}"
    dropped = f" (dropped: {', '.join(row['dropped'])})" if row["dropped"] else ""
    return row["status"] + dropped
