"""``tpusim validate --serving [--fit [--out DIR]]`` and ``tpusim calibrate --serving
[--out DIR]``: the public serving figures simulated on the slices they ran on, their
errors (fit and holdout figures apart) and the fit of the server profiles' terms,
written as profile YAML (:mod:`tpusim.validation.serving_fit`). Imported only for
``--serving`` (:mod:`tpusim.cli.validate_run`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tpusim.cli.network_flags import network_flags_given, network_of
from tpusim.cli.validate_text import uncertainty_target
from tpusim.errors import InputError
from tpusim.network import NetworkSettings
from tpusim.report import text_table
from tpusim.results.files import json_text, output_error
from tpusim.validation.serving import Simulator, cases, load_figures, summary, warnings
from tpusim.validation.serving_cv import (
    cross_validate,
    held_out_rows,
    write_serving_uncertainty,
)
from tpusim.validation.serving_figures import shipped_files
from tpusim.validation.serving_fit import fit as fit_terms
from tpusim.validation.serving_fit import terms_of, write_profiles


def cmd_serving(args: argparse.Namespace, fit: bool, out: str | None) -> None:
    """Validate (and with ``fit`` refit, writing the profiles to ``out`` when given)."""
    paths = [Path(p) for p in args.measurements] if args.measurements else None
    figures = load_figures(paths)
    simulator = Simulator()
    if getattr(args, "cv", None):
        return cmd_serving_cv(args, figures, simulator)
    fitted = fit_terms(figures, simulator) if fit else None
    rows = cases(figures, terms_of(fitted) if fitted else None, simulator)
    stats = summary(rows)
    record: dict[str, Any] = {"cases": rows, **stats, "warnings": warnings(figures)}
    if fitted is not None:
        record["fitted"] = [_fitted_row(f) for f in fitted]
    if fitted is not None and out is not None:
        try:
            record["wrote"] = [str(p) for p in write_profiles(out, fitted)]
        except OSError as exc:
            raise output_error("--out", out, exc) from None
    if args.as_json:
        print(json_text(record))
        return
    for line in record["warnings"]:
        print(line, file=sys.stderr)
    print(table(rows))
    print()
    print(summary_lines(stats, record.get("fitted", []), record.get("wrote", [])))


def cmd_serving_cv(args: argparse.Namespace, figures: list[Any], simulator: Any) -> None:
    """``validate --serving --cv chip|server``: per group, the terms fitted without it
    and its figures' errors; then the held-out summary over every group."""
    folds = cross_validate(figures, args.cv, simulator)
    held = held_out_rows(folds)
    record: dict[str, Any] = {
        "cv": args.cv,
        "folds": [
            {
                "group": f.group,
                "median_abs_error": f.median_abs_error,
                "fitted": [_fitted_row(x) for x in f.fitted],
                "cases": f.rows,
            }
            for f in folds
        ],
        "held_out": summary(held),
    }
    if getattr(args, "write_uncertainty", None) is not None:
        record["wrote_uncertainty"] = _write_uncertainty(args, held)
    if args.as_json:
        print(json_text(record))
        return
    print(table(held))
    print()
    for fold in folds:
        shown = "-" if fold.median_abs_error is None else f"{fold.median_abs_error:.1%}"
        terms = "; ".join(
            f"{x.server}: host {x.overheads.host_s * 1e3:.3g} ms, device "
            f"{x.overheads.step_s * 1e3:.3g} ms, HBM efficiency "
            f"{x.overheads.hbm_efficiency:.2f}, MoE {x.overheads.moe_token_s * 1e6:.3g} us a token "
            f"on {len(x.fit_on)} figures"
            for x in fold.fitted
        )
        print(
            f"{args.cv} {fold.group:<20} held-out median |error| {shown}; "
            f"fitted without it: {terms}"
        )
    print()
    print("held out (each figure predicted by terms fitted without its group):")
    print(summary_lines(record["held_out"], [], []))


def _write_uncertainty(args: argparse.Namespace, held: list[dict[str, Any]]) -> list[str]:
    """The serving kinds of the residual model from the chip-held-out rows, written
    where ``--write-uncertainty`` says; a line on stderr naming the file."""
    target = uncertainty_target(args)
    files = [str(p) for p in (args.measurements or shipped_files())]
    command = " ".join(["tpusim", *sys.argv[1:]])
    try:
        kinds = write_serving_uncertainty(target, held, command, files)
    except OSError as exc:
        raise output_error("--write-uncertainty", str(target), exc) from None
    print(f"wrote {', '.join(kinds)} to {target}", file=sys.stderr)
    return kinds


def _fitted_row(f: Any) -> dict[str, Any]:
    return {
        "server": f.server,
        "chips": list(f.chips),
        "host_s": f.overheads.host_s,
        "hbm_efficiency": f.overheads.hbm_efficiency,
        "step_s": f.overheads.step_s,
        "moe_layer_s": f.overheads.moe_layer_s,
        "moe_token_s": f.overheads.moe_token_s,
        "expert_efficiency": f.overheads.expert_efficiency,
        "fit_on": list(f.fit_on),
        "points": f.points,
        "at_bound": list(f.at_bound),
        "kept": f.kept,
        "median_abs_error_shipped": f.shipped_error,
        "median_abs_error_fitted": f.fitted_error,
    }


def _fitted_line(f: dict[str, Any]) -> str:
    """What a fit found, what it was fitted on, and what it says of itself."""
    said = f"fitted {f['server']} on {', '.join(f['chips'])}: " + (
        f"host {f['host_s'] * 1e3:.3g} ms and device {f['step_s'] * 1e3:.3g} ms per "
        f"iteration, HBM efficiency {f['hbm_efficiency']:.2f}, "
        f"{f['moe_token_s'] * 1e6:.3g} us per token of a MoE layer "
        f"({f['points']} points of {len(f['fit_on'])} figures)"
    )
    if not f["kept"]:
        said += (
            f"; NOT KEPT: it raised the fit figures' median |error| from "
            f"{f['median_abs_error_shipped']:.1%} to {f['median_abs_error_fitted']:.1%}, "
            "the shipped terms stand"
        )
    if f["at_bound"]:
        said += f"; AT A GRID BOUND: {', '.join(f['at_bound'])}"
    return said


def check_serving_flags(args: argparse.Namespace, fit: bool) -> None:
    """``--out`` needs a fit; ``--calibration``, ``--approximate``, ``--jobs`` and
    non-flow fidelities do not apply (InputError naming the flag: never ignored)."""
    if args.out is not None and not fit:
        raise InputError("tpusim validate --serving: --out writes the fitted profiles; give --fit")
    if getattr(args, "cv", None) and fit:
        raise InputError("tpusim validate --serving: --cv refits every fold itself; drop --fit")
    if getattr(args, "calibration", None):
        raise InputError("--calibration applies to collectives, not to --serving")
    if getattr(args, "approximate", False):
        raise InputError("--approximate applies to --workloads, not to --serving")
    if getattr(args, "jobs", None) is not None:
        raise InputError("--jobs applies to --workloads, not to --serving")
    _check_network(args)


def _check_network(args: argparse.Namespace) -> None:
    """The serving figures run on the default network: a network flag that asks for
    another is refused, naming it."""
    given = network_flags_given(args)
    default = NetworkSettings()
    if given and network_of(args) != default:
        flag = f"--fidelity {args.fidelity}" if "--fidelity" in given else given[0]
        raise InputError(
            f"{flag} applies to collectives and --workloads, not to --serving (its figures "
            f"run on the {default.fidelity} fidelity at its defaults)"
        )


def table(rows: list[dict[str, Any]]) -> str:
    """The readable table of the cases."""
    shown = [
        {
            "id": r["id"],
            "split": r["split"],
            "slice": r["slice"],
            "metric": r["metric"],
            "measured": f"{r['measured']:.4g}",
            "simulated": "-" if r["simulated"] is None else f"{r['simulated']:.4g}",
            "error": "-" if r["error"] is None else f"{r['error']:+.1%}",
        }
        for r in rows
    ]
    return text_table(shown, ("id", "split", "slice", "metric", "measured", "simulated", "error"))


def summary_lines(stats: dict[str, Any], fitted: list[dict[str, Any]], wrote: list[str]) -> str:
    """One line per part (all, fit, holdout, each metric), then the fitted terms."""
    parts = [("all", stats), ("fit", stats["fit"]), ("holdout", stats["holdout"])]
    parts += [(m, p) for m, p in stats["metrics"].items() if p["total"]]
    lines = [
        f"{label:<26} {p['total']:>3} points, {p['within_10pct']:>3} within 10%, "
        f"median |error| {p['median_abs_error']:.1%}"
        for label, p in parts
        if p["total"]
    ]
    lines += [_fitted_line(f) for f in fitted]
    lines += [f"wrote {path}" for path in wrote]
    return "\n".join(lines)
