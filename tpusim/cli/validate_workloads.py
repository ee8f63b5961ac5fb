"""``tpusim validate --workloads`` and ``tpusim calibrate --workloads``: what they print."""

from __future__ import annotations

import argparse
from typing import Any

from tpusim.results.files import atomic_write_text, check_file_target, json_text, output_error

COLUMNS = ("id", "chip", "model", "slice", "measured", "simulated", "error", "split", "status")


def cmd_validate_workloads(args: argparse.Namespace) -> None:
    """Simulate every workload case (with ``--calibration``'s efficiency terms) and
    print the table and summary, or one JSON object with ``--json``."""
    from tpusim.validation.workloads import load_workload_cases
    from tpusim.validation.workloads_fit import load_efficiency_overlay, overlay_chips
    from tpusim.validation.workloads_run import validate_workloads, workload_summary

    cases = load_workload_cases(args.measurements)
    chips = overlay_chips(load_efficiency_overlay(args.calibration)) if args.calibration else {}
    results = validate_workloads(cases, chips, args.fidelity, args.approximate)
    stats = workload_summary(results)
    if args.json:
        print(json_text({"cases": [r.row() for r in results], **stats}))
        return
    print(results_table([r.row() for r in results]))
    print()
    print(summary_lines(stats))


def cmd_calibrate_workloads(args: argparse.Namespace) -> None:
    """Fit the efficiency terms per chip on the ``fit`` cases, write the overlay to
    ``--out`` and print the terms and the fit and holdout errors."""
    from tpusim.validation.workloads import load_workload_cases
    from tpusim.validation.workloads_fit import calibrate_workloads, fit_results, overlay_text
    from tpusim.validation.workloads_run import workload_summary

    cases = load_workload_cases(args.measurements)
    check_file_target(args.out, "--out")
    fits = calibrate_workloads(cases, args.fidelity, args.approximate)
    try:
        atomic_write_text(args.out, overlay_text(fits))
    except OSError as exc:
        raise output_error("--out", args.out, exc) from None
    results = fit_results(fits, cases, args.fidelity, args.approximate)
    record = {
        "calibration": args.out,
        "chips": [
            {
                "chip": f.chip,
                "matmul_efficiency": f.matmul,
                "hbm_efficiency": f.hbm,
                "fit_on": f.fit_on,
                "not_fitted": f.skipped,
                "at_bound": f.at_bound,
            }
            for f in fits
        ],
        "cases": [r.row() for r in results],
        **workload_summary(results),
    }
    if args.json:
        print(json_text(record))
        return
    for chip in record["chips"]:
        terms = ", ".join(f"{k} {v:.3f}" for k, v in chip["matmul_efficiency"].items())
        bound = f"; at bound: {', '.join(chip['at_bound'])}" if chip["at_bound"] else ""
        print(
            f"{chip['chip']:<10} matmul {terms}; hbm {chip['hbm_efficiency']:.3f} "
            f"({len(chip['fit_on'])} points){bound}"
        )
    print()
    print(results_table(record["cases"]))
    print()
    print(summary_lines(record))
    print(f"\nwrote {args.out} (apply with validate --workloads --calibration {args.out})")


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
            f"median |error| {shown}"
        )
    lines.append("status   " + ", ".join(f"{k}: {v}" for k, v in stats["status"].items()))
    return "\n".join(lines)


def _share(count: int, total: int) -> str:
    return f"{count / total:.0%}" if total else "-"


def results_table(rows: list[dict[str, Any]]) -> str:
    """The cases as a text table; a not simulated case shows ``-``."""
    from tpusim import units
    from tpusim.report import text_table

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
