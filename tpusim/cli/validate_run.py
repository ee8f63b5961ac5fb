"""``tpusim validate`` and ``tpusim calibrate``: the checks of their flags, the
collective measurements validated and calibrated, and what they print. ``--workloads``
and ``--serving`` run in :mod:`tpusim.cli.validate_workloads` and
:mod:`tpusim.cli.validate_serving`, imported only for their kind."""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

import yaml

from tpusim import units
from tpusim.cli.model_flags import fill
from tpusim.cli.network_flags import network_of
from tpusim.cli.validate import CalibrateFlags, ValidateFlags
from tpusim.cli.validate_text import (
    DEFAULT_SERVING_OUT,
    coverage_text,
    uncertainty_target,
    worse_sentence,
)
from tpusim.collectives import fewest_sends_per_chip
from tpusim.config.calibration import Calibration, load_calibration
from tpusim.errors import InputError
from tpusim.later import Later
from tpusim.network import NETWORKS, NetworkSettings
from tpusim.report import integer_bytes, text_table
from tpusim.results.files import atomic_write_text, check_file_target, json_text, output_error
from tpusim.validation.fit import calibrate, overlay_yaml
from tpusim.validation.measurements import load_measurements
from tpusim.validation.residuals import collective_model, collective_residuals
from tpusim.validation.uncertainty import nested_coverage, write_kind
from tpusim.validation.validate import summary, validate

RESULT_COLUMNS = ("id", "op", "bytes", "measured", "simulated", "error", "split", "algorithm")

#: The other kinds, each imported only when asked for.
CHECK_SERVING = Later("tpusim.cli.validate_serving", "check_serving_flags")
SERVING = Later("tpusim.cli.validate_serving", "cmd_serving")
VALIDATE_WORKLOADS = Later("tpusim.cli.validate_workloads", "cmd_validate_workloads")
CALIBRATE_WORKLOADS = Later("tpusim.cli.validate_workloads", "cmd_calibrate_workloads")


def check_work_limits(measurements: Any, network: NetworkSettings) -> None:
    """Refuse (before simulating any) every measurement over ``network``'s work limits
    (:meth:`~tpusim.network.NetworkSettings.work_problem`: the packet fidelity's), one
    line each naming its file, line and id; raises InputError."""
    problems = []
    for m in measurements:
        chips = math.prod(m.slice)
        problem = network.work_problem(chips, m.bytes, fewest_sends_per_chip(m.op, chips))
        if problem is not None:
            where = f"{m.file}:{m.line}" if m.line is not None else m.file
            problems.append(f"{where} {m.id}: {problem.replace('(--packet-bytes) ', '')}")
    if problems:
        raise InputError("\n".join(problems))


def _check_workloads(args: argparse.Namespace) -> None:
    if args.approximate and not args.workloads:
        raise InputError("--approximate needs --workloads")
    if args.jobs is not None and (args.jobs < 1 or not args.workloads):
        raise InputError("--jobs needs --workloads and a count of at least 1")
    network = network_of(args)
    if args.workloads and not network.backend.whole_programs:
        whole = [name for name, backend in NETWORKS.items() if backend.whole_programs]
        raise InputError(
            f"--fidelity {network.fidelity} is not offered with --workloads (whole training "
            f"steps on up to 512 chips); use {' or '.join(whole)}"
        )


def _check_kinds(args: argparse.Namespace) -> None:
    """The flags that pick what is validated (--serving, --workloads, --fit, --cv)."""
    if args.fit and not args.serving:
        raise InputError("tpusim validate: --fit refits the serving terms; give --serving")
    if args.serving and args.workloads:
        raise InputError("tpusim validate: give one of --serving and --workloads")
    if args.cv and not (args.workloads or args.serving):
        raise InputError(
            "tpusim validate: --cv cross-validates the workload or serving terms; give "
            "--workloads or --serving"
        )
    if args.cv == "server" and not args.serving:
        raise InputError("tpusim validate: --cv server groups serving figures; give --serving")
    if args.cv == "family" and args.serving:
        raise InputError("tpusim validate --serving: --cv takes chip or server, not family")
    if args.compiled and (not args.workloads or args.cv or args.calibration or args.approximate):
        raise InputError(
            "tpusim validate: --compiled replays the compiled runs; give it with --workloads, "
            "without --cv, --calibration or --approximate"
        )
    if args.cv and args.calibration:
        raise InputError("tpusim validate: --cv refits the terms itself; leave out --calibration")


def cmd_validate(args: argparse.Namespace) -> None:
    fill(args, ValidateFlags, command="tpusim validate")
    _check_kinds(args)
    _check_write_uncertainty(args)
    if args.serving:
        CHECK_SERVING(args, args.fit)
        return SERVING(args, args.fit, args.out)
    if args.out is not None:
        raise InputError(
            "tpusim validate: --out writes fitted server profiles; give --serving --fit"
        )
    _check_workloads(args)
    if args.workloads:
        return VALIDATE_WORKLOADS(args)
    measurements = load_measurements(args.measurements)
    network = network_of(args)
    check_work_limits(measurements, network)
    calibration = load_calibration(args.calibration) if args.calibration else None
    cases = validate(measurements, calibration, network)
    stats = summary(cases)
    holdout = stats["holdout"]
    assert isinstance(holdout, dict)
    holdout["coverage_80"] = collective_coverage(cases)
    if args.write_uncertainty is not None:
        write_collective_uncertainty(args, cases)
    if args.as_json:
        print(json_text(integer_bytes({"cases": [c.row() for c in cases], **stats})))
        return
    print(_cases_table([c.row() for c in cases]))
    print()
    print(_summary_lines(stats))


def _check_write_uncertainty(args: argparse.Namespace) -> None:
    """``--write-uncertainty`` writes held-out residuals: from --workloads only with
    --cv chip, never from --serving (its cross-validation writes its own), never with
    a calibration overlay (its residuals are not the shipped model's)."""
    if args.write_uncertainty is None:
        return
    if args.serving and args.cv != "chip":
        raise InputError(
            "tpusim validate --serving: --write-uncertainty needs --cv chip (the intervals "
            "are made from chip-held-out residuals)"
        )
    if args.workloads and args.cv is None:
        raise InputError(
            "tpusim validate: --write-uncertainty with --workloads needs --cv chip (the "
            "intervals are made from chip-held-out residuals; --cv family adds the family "
            "grouping for reading)"
        )
    if args.calibration:
        raise InputError(
            "tpusim validate: --write-uncertainty writes the shipped model's residuals; "
            "leave out --calibration"
        )
    if args.write_uncertainty:
        check_file_target(args.write_uncertainty, "--write-uncertainty")


def write_collective_uncertainty(args: argparse.Namespace, cases: Any) -> None:
    """The holdout cases' residuals as the ``collective_time`` model; a line on stderr
    naming the file."""
    target = uncertainty_target(args)
    model = collective_model(cases, " ".join(["tpusim", *sys.argv[1:]]))
    try:
        write_kind(target, "collective_time", model)
    except OSError as exc:
        raise output_error("--write-uncertainty", str(target), exc) from None
    print(f"wrote collective_time to {target}", file=sys.stderr)


def collective_coverage(cases: Any) -> float | None:
    """Nested leave-one-chip-out coverage of the holdout cases' 80% intervals."""
    return nested_coverage(collective_residuals(cases))


def cmd_calibrate(args: argparse.Namespace) -> None:
    fill(args, CalibrateFlags, command="tpusim calibrate")
    if args.serving:
        if args.workloads:
            raise InputError("tpusim calibrate: give one of --serving and --workloads")
        CHECK_SERVING(args, True)
        return SERVING(args, True, args.out or DEFAULT_SERVING_OUT)
    args.out = args.out or "calibration.yaml"
    _check_workloads(args)
    if args.workloads:
        return CALIBRATE_WORKLOADS(args)
    _calibrate_collectives(args)


def _calibrate_collectives(args: argparse.Namespace) -> None:
    """``tpusim calibrate``: the collective terms per chip fitted on the ``fit`` points,
    validated, written last (a Ctrl-C before leaves no file), at-bound terms and a fit
    worse than the shipped terms on its own points said in the output and the file."""
    measurements = load_measurements(args.measurements)
    if not any(m.split == "fit" for m in measurements):
        raise InputError(
            f"no 'fit' measurements among the {len(measurements)} given (holdout points "
            "are never fitted): nothing to calibrate"
        )
    network = network_of(args)
    check_work_limits(measurements, network)
    check_file_target(args.out, "--out")  # before minutes of fitting, not after
    fits = calibrate(measurements, network)
    text = overlay_yaml(fits)
    chips = {f.chip for f in fits}
    calibration = Calibration.model_validate(yaml.safe_load(text))  # the file, before it is
    cases = validate([m for m in measurements if m.chip in chips], calibration, network)
    fitted = [m for m in measurements if m.chip in chips and m.split == "fit"]
    before = [abs(c.error) for c in validate(fitted, None, network)]
    after = [abs(c.error) for c in cases if c.measurement.split == "fit"]
    worse = worse_sentence(before, after, len(fitted), "points")
    if worse:
        text = f"# WORSE THAN THE SHIPPED TERMS: {worse}.\n" + text
    try:  # the last step: a Ctrl-C while fitting or validating leaves no file behind
        atomic_write_text(args.out, text)
    except OSError as exc:
        raise output_error("--out", args.out, exc) from None
    record = _calibration_record(args.out, fits, cases) | {"worse_than_shipped": worse}
    _print_calibration(args, record)


def _print_calibration(args: argparse.Namespace, record: dict[str, Any]) -> None:
    """The collective calibration's record as JSON or as text."""
    if args.as_json:
        print(json_text(record))
        return
    for chip in record["chips"]:
        print(
            f"{chip['chip']:<10} hop latency {chip['hop_latency_s'] * 1e6:.3g} us, launch "
            f"{chip['launch_s'] * 1e6:.3g} us, step sync {chip['step_sync_s'] * 1e6:.3g} us, "
            f"link efficiency {chip['link_efficiency']:.3f} ({len(chip['fit_on'])} points)"
            + (f"; at bound: {', '.join(chip['at_bound'])}" if chip["at_bound"] else "")
        )
    print()
    print(_summary_lines(record))
    if record["worse_than_shipped"]:
        print(f"\nWORSE THAN THE SHIPPED TERMS: {record['worse_than_shipped']}")
    print(f"\nwrote {args.out} (apply with --calibration {args.out})")


def _calibration_record(out: str, fits: Any, cases: Any) -> dict[str, Any]:
    """The JSON record of a collective calibration: the fitted terms per chip and the
    fit and holdout errors."""
    return {
        "calibration": out,
        "chips": [
            {
                "chip": f.chip,
                "hop_latency_s": f.terms.hop_latency_s,
                "launch_s": f.terms.launch_s,
                "step_sync_s": f.terms.step_sync_s,
                "link_efficiency": f.terms.link_efficiency,
                "fit_on": list(f.terms.fit_on),
                "at_bound": list(f.at_bound),
                **{
                    split: summary([c for c in cases if c.measurement.chip == f.chip])[split]
                    for split in ("fit", "holdout")
                },
            }
            for f in fits
        ],
        **summary(cases),
    }


def _summary_lines(stats: dict[str, Any]) -> str:
    lines = []
    for label, part in (("all", stats), ("fit", stats["fit"]), ("holdout", stats["holdout"])):
        total = part["total"]
        share = part["within_10pct"] / total if total else 0.0
        lines.append(
            f"{label:<8} {total:>3} points, {part['within_10pct']:>3} within 10% ({share:.0%}), "
            f"median |error| {part['median_abs_error']:.1%}" + coverage_text(part)
        )
    return "\n".join(lines)


def _cases_table(rows: list[dict[str, Any]]) -> str:
    shown = [
        {
            "id": r["id"],
            "op": r["op"],
            "bytes": units.format_bytes(r["bytes"]),
            "measured": units.format_time(r["measured_s"]),
            "simulated": units.format_time(r["simulated_s"]),
            "error": f"{r['error']:+.1%}",
            "split": r["split"],
            "algorithm": r["algorithm"],
        }
        for r in rows
    ]
    return text_table(shown, RESULT_COLUMNS)
