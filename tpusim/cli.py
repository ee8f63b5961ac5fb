"""The ``tpusim`` command line: parse, load, run, print. Thin by design.

Every command prints a readable table, or exactly one JSON object with
``--json``. Bad input exits 2 and a failed simulation 1, each with one line on
stderr and no traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from tpusim import package_version, units
from tpusim.cli_flags import (
    axes_flag,
    check_packet_work,
    flow_tolerance_flag,
    pairs_flag,
    positive_flag,
    size_flag,
    size_in_binary,
    sweep_sizes,
)
from tpusim.config import load_system, shipped
from tpusim.config.limits import MAX_SWEEP_POINTS
from tpusim.console import (
    INTERRUPTED_EXIT_CODE,
    drop_stdout,
    interrupts_handled,
    raised_by_print,
    text_table,
)
from tpusim.errors import InputError, TpusimError
from tpusim.report import integer_bytes, topology_lines, topology_summary
from tpusim.results.files import (
    atomic_csv,
    check_file_target,
    json_text,
    output_error,
)
from tpusim.vocabulary import FIDELITIES
from tpusim.workloads.hlo import hlo_summary

__all__ = ["build_parser", "hlo_summary", "main"]


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad flag as one line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("tpusim").strip()  # main prints "tpusim: error:"
        where = f"{command}: " if command else ""
        raise InputError(f"{where}{message} (see {self.prog} --help)")


def _print_json(record: Any) -> None:
    """Print ``record`` as strict JSON: no ``NaN``/``Infinity`` (:func:`json_text`), byte
    counts as integers (:func:`~tpusim.report.integer_bytes`)."""
    print(json_text(integer_bytes(record)))


def cmd_systems(args: argparse.Namespace) -> None:
    rows = []
    for name in shipped("systems"):
        system = load_system(name)
        rows.append(
            {
                "name": name,
                "chip": system.chip.name,
                "topology": system.topology_kind,
                "chips": system.num_chips,
                "description": system.spec.description,
            }
        )
    if args.json:
        _print_json({"systems": rows})
    else:
        print(text_table(rows, ["name", "chip", "topology", "chips", "description"]))


def cmd_claims(args: argparse.Namespace) -> None:
    from tpusim.claims import format_claims, vendor_claims

    claims = vendor_claims()
    if args.json:
        _print_json({"claims": claims.to_dict("records")})
    else:
        print(format_claims(claims))


def cmd_topo(args: argparse.Namespace) -> None:
    records = [topology_summary(load_system(name)) for name in args.system]
    if args.json:
        _print_json(records[0] if len(records) == 1 else {"topologies": records})
        return
    print("\n\n".join("\n".join(topology_lines(rec)) for rec in records))


def _collective_options(args: argparse.Namespace) -> dict[str, Any]:
    if args.axes is not None and args.chips is not None:
        raise InputError("give --axes or --chips, not both")
    if args.chips is not None and args.chips < 1:
        raise InputError(f"--chips {args.chips}: must be >= 1")
    if args.packet_bytes is not None and args.fidelity != "packet":
        raise InputError("--packet-bytes only applies to --fidelity packet")
    if args.flow_tolerance is not None and args.fidelity != "flow":
        raise InputError("--flow-tolerance only applies to --fidelity flow")
    options: dict[str, Any] = {
        "axes": axes_flag(args.axes),
        "chips": args.chips,
        "algorithm": args.algorithm,
        "fidelity": args.fidelity,
        "engine": "tensorcore" if args.no_offload else args.engine,
        "pairs": pairs_flag(args.pairs),
        "flow_tolerance": args.flow_tolerance,
    }
    if args.packet_bytes is not None:
        options["packet_bytes"] = size_flag(args.packet_bytes, "--packet-bytes")
    from tpusim.faults_cli import fault_options

    return options | fault_options(args)


def _run_one(
    system: Any, topology: Any, args: argparse.Namespace, size: float, options: dict[str, Any]
) -> tuple[Any, Any]:
    from tpusim.collectives import AlgorithmError
    from tpusim.engine import run_collective

    try:
        return run_collective(
            topology, args.op, size, chip=system.chip, system_name=system.name, **options
        )
    except (AlgorithmError, ValueError) as exc:
        raise InputError(str(exc)) from None


def cmd_collective(args: argparse.Namespace) -> None:
    from tpusim.topology import build_topology

    if (args.bytes is None) == (args.sweep_bytes is None):
        raise InputError("give exactly one of --bytes SIZE and --sweep-bytes LOW:HIGH")
    options = _collective_options(args)
    if args.links_csv:
        check_file_target(args.links_csv, "--links-csv")
    system = load_system(args.system)
    if args.calibration:
        from tpusim.config.calibration import calibrated_system, load_calibration

        system = calibrated_system(system, load_calibration(args.calibration))
    if args.sweep_bytes is not None:
        sizes = sweep_sizes(args.sweep_bytes, args.max_points)
    else:
        sizes = [size_flag(args.bytes, "--bytes")]
    check_packet_work(system.num_chips, sizes, options)
    topology = build_topology(system)
    binary = size_in_binary(args.sweep_bytes or args.bytes)
    if args.sweep_bytes is not None:
        _collective_sweep(system, topology, args, sizes, options, binary)
        return
    result, network = _run_one(system, topology, args, sizes[0], options)
    if args.links_csv:
        _write_links(topology, network, result.time_s, args.links_csv)
    rec = result.record() | network.fault_report
    if args.json:
        _print_json(rec)
    else:
        print("\n".join(_collective_lines(rec, binary)))
        if "failed_links" in rec:
            from tpusim.faults_cli import fault_lines

            print("\n".join(fault_lines(rec)))


def _write_links(topology: Any, network: Any, time_s: float, file: str) -> None:
    from tpusim.engine import link_table

    try:
        atomic_csv(link_table(topology, network, time_s), file, index=False)
    except OSError as exc:
        raise output_error("--links-csv", file, exc) from None


def _collective_sweep(
    system: Any,
    topology: Any,
    args: argparse.Namespace,
    sizes: list[float],
    options: dict[str, Any],
    binary: bool,
) -> None:
    """``--sweep-bytes``: each row printed as it finishes (text), or one JSON object at
    the end; progress on stderr unless ``--quiet``: a bar on a terminal, and with
    ``--json`` plain lines on a pipe too."""
    import time

    from tpusim.progress import Finished, Progress

    rows = []
    if not args.json:
        print(_SWEEP_HEADER, flush=True)
    what = f"{system.name} {args.op}"
    # text rows on stdout are the progress; with --json a pipe gets plain lines on stderr
    with Progress(len(sizes), what, enabled=not args.quiet, terminal_only=not args.json) as bar:
        for size in sizes:
            began = time.perf_counter()
            rows.append(_run_one(system, topology, args, size, options)[0].record())
            if not args.json:
                print(_sweep_row(rows[-1], binary), flush=True)
            wall_s = time.perf_counter() - began
            bar.finished(Finished(units.format_bytes(size, binary), wall_s))
    if args.json:
        _print_json({"system": system.name, "op": args.op, "sweep": rows})


def _collective_lines(rec: dict[str, Any], binary: bool = True) -> list[str]:
    return [
        f"system          {rec['system']}",
        f"collective      {rec['op']} of {units.format_bytes(rec['bytes'], binary)} "
        f"({rec['algorithm']}, {rec['fidelity']} fidelity, reductions on {rec['engine']})",
        f"chips           {rec['chips']:,} in {rec['num_groups']:,} group(s) of "
        f"{rec['group_size']:,}",
        f"time            {units.format_time(rec['time_s'])}",
        f"algbw / busbw   {_bandwidth_text(rec['algbw_Bps'])} / "
        f"{_bandwidth_text(rec['busbw_Bps'])}",
        f"hops            max {rec['max_hops']}, mean {rec['mean_hops']:.2f}",
        f"links           max utilisation {rec['max_link_utilization']:.1%}, mean "
        f"{rec['mean_link_utilization']:.1%} (links used), busiest "
        f"{units.format_bytes(rec['busiest_link_bytes'], binary)}",
        f"work            {rec['num_steps']:,} steps, {rec['num_flows']:,} flows, "
        f"{rec['num_events']:,} network events",
    ]


def _bandwidth_text(value: float | None) -> str:
    """A bandwidth, or "n/a" for a collective that took no time (None)."""
    return "n/a" if value is None else units.format_bandwidth(value)


def _gbps_text(value: float | None) -> str:
    return "n/a" if value is None else f"{value / 1e9:.2f}"


_SWEEP_HEADER = f"{'size':>10} {'time':>10} {'algbw GB/s':>11} {'busbw GB/s':>11}  algorithm"


def _sweep_row(r: dict[str, Any], binary: bool) -> str:
    return (
        f"{units.format_bytes(r['bytes'], binary):>10} {units.format_time(r['time_s']):>10} "
        f"{_gbps_text(r['algbw_Bps']):>11} {_gbps_text(r['busbw_Bps']):>11}  {r['algorithm']}"
    )


def cmd_hlo(args: argparse.Namespace) -> None:
    try:
        order = [int(c) for c in args.device_chips.split(",")] if args.device_chips else None
    except ValueError:
        raise InputError(
            f"--device-chips {args.device_chips}: expected chip ids like 0,1,16,17"
        ) from None
    if args.flow_tolerance is not None and args.fidelity != "flow":
        raise InputError("--flow-tolerance only applies to --fidelity flow")
    system, file = _hlo_target(args)
    record = hlo_summary(file, system, args.fidelity, order, args.calibration, args.flow_tolerance)
    if record["unknown_ops"]:
        ops = ", ".join(f"{op} ({n})" for op, n in record["unknown_ops"].items())
        print(f"tpusim: warning: {file}: unknown ops costed by bytes: {ops}", file=sys.stderr)
    if args.json:
        _print_json(record)
        return
    collectives = ", ".join(f"{k} {v}" for k, v in record["collectives"].items()) or "none"
    print(
        "\n".join(
            [
                f"module          {record['file']} ({record['chips']} devices, "
                f"{record['num_ops']} ops)",
                f"system          {record['system']}",
                f"FLOPs per chip  {record['flops_per_chip']:.4g}",
                f"collectives     {collectives} "
                f"({units.format_bytes(record['collective_bytes_per_chip'])} per chip)",
                f"step            {units.format_time(record['step_time_s'])} (compute "
                f"{units.format_time(record['compute_time_s'])}, communication "
                f"{units.format_time(record['communication_time_s'])}, exposed "
                f"{units.format_time(record['exposed_communication_time_s'])})",
            ]
        )
    )


def _add_hlo_parser(sub: Any) -> None:
    """The ``hlo`` command's flags."""
    p = sub.add_parser(
        "hlo",
        help="replay an XLA-compiled HLO module on a system",
        usage="tpusim hlo SYSTEM FILE [options]  (or: tpusim hlo FILE --system SYSTEM)",
    )
    p.add_argument(
        "where",
        nargs="+",
        metavar="SYSTEM FILE",
        help="shipped system name or path, then the HLO text (as "
        "jax.jit(f).lower(...).compile().as_text()); the system first, as every command "
        "takes it",
    )
    p.add_argument("--system", help="the system, with FILE alone (the older form, kept)")
    _add_fidelity(p)
    p.add_argument(
        "--device-chips",
        help="chip of each device in order, e.g. 0,1,16,17 (default: device d on chip d)",
    )
    p.add_argument("--calibration", help="calibration overlay YAML (from tpusim calibrate)")
    _add_flow_tolerance(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_hlo)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tpusim", description="Discrete-event simulator of TPU pods and their interconnect."
    )
    parser.add_argument("--version", action="version", version=f"tpusim {package_version()}")
    parser.set_defaults(func=None)
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    p = sub.add_parser("systems", help="list the shipped systems")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_systems)
    p = sub.add_parser(
        "claims", help="Google's TPU 8 claims against tpusim's figures (shipped systems)"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_claims)
    p = sub.add_parser("topo", help="topology metrics of one or more systems")
    p.add_argument("system", nargs="+", help="shipped system name or path to a system YAML")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_topo)
    _add_collective(sub)
    from tpusim.scenarios_cli import add_parsers as add_scenario_parsers
    from tpusim.validation.commands import add_parsers as add_validation_parsers

    add_scenario_parsers(sub)
    add_validation_parsers(sub)
    from tpusim.models_cli import add_parsers as add_models_parsers

    add_models_parsers(sub)
    from tpusim.faults_cli import add_parsers as add_faults_parsers

    add_faults_parsers(sub)
    from tpusim.serving.cli import add_parsers as add_serving_parsers

    add_serving_parsers(sub)
    from tpusim.plan_cli import add_parsers as add_plan_parsers

    add_plan_parsers(sub)
    _add_hlo_parser(sub)
    return parser


def _add_collective(sub: Any) -> None:
    from tpusim.collectives import algorithm_names
    from tpusim.vocabulary import ENGINE_CHOICES, OPS

    p = sub.add_parser("collective", help="simulate one collective (or a sweep of sizes)")
    p.add_argument("system", help="shipped system name or path to a system YAML")
    p.add_argument("--op", required=True, choices=OPS)
    p.add_argument("--bytes", help="size with a unit (nccl-tests convention), e.g. 64MiB")
    p.add_argument("--sweep-bytes", help="LOW:HIGH, powers of two, e.g. 1KiB:1GiB")
    p.add_argument("--axes", help="torus axes to run over, e.g. x,z (one group per rest)")
    p.add_argument("--chips", type=int, help="run on the first N chips")
    p.add_argument(
        "--algorithm",
        choices=("auto", *algorithm_names()),
        default="auto",
        help="auto (default): the fastest predicted under the cost model",
    )
    _add_fidelity(p)
    p.add_argument(
        "--engine",
        choices=ENGINE_CHOICES,
        default="auto",
        help="who runs the collective: auto = the chip's default (collectives.offload in "
        "its file); none = the network alone, no on-chip cost, nominal link bandwidth",
    )
    p.add_argument(
        "--no-offload",
        action="store_true",
        help="reduce on the TensorCore (turns the CAE/SparseCore offload off)",
    )
    p.add_argument("--pairs", help="collective-permute chip pairs SRC:DST[,SRC:DST...]")
    p.add_argument("--packet-bytes", help="packet size for --fidelity packet (default 64KiB)")
    p.add_argument("--links-csv", help="write the per-link table to this CSV file")
    p.add_argument("--calibration", help="calibration overlay YAML (from tpusim calibrate)")
    _add_flow_tolerance(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar on stderr (sweeps)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    _add_max_points(p, "sizes of --sweep-bytes", MAX_SWEEP_POINTS)
    from tpusim.faults_cli import add_fault_flags

    add_fault_flags(p)
    p.set_defaults(func=cmd_collective)


def _add_fidelity(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--fidelity",
        choices=FIDELITIES,
        default="flow",
        help="network model: analytic (closed forms), flow (max-min fair, the default) "
        "or packet (small systems)",
    )


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


def _add_flow_tolerance(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--flow-tolerance",
        type=flow_tolerance_flag,
        help="flow fidelity: max-min rates solved to this relative tolerance and flows "
        "finishing within it retired together (default 0.01; 0 is exact; a scenario's "
        "flow_tolerance: is the same setting)",
    )


def _add_max_points(p: argparse.ArgumentParser, what: str, default: int | None) -> None:
    p.add_argument(
        "--max-points",
        type=positive_flag,
        default=default,
        help=f"most {what} to run (default {MAX_SWEEP_POINTS:,}; refused above it)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``tpusim`` and ``python -m tpusim``; returns the exit code.

    Without a command, prints the help and returns 0. A tpusim error prints one line
    per problem (``tpusim: error: ...``) and returns its exit code (2 for bad input, 1
    for a failed simulation); Ctrl-C prints ``tpusim: interrupted`` and returns 130; a
    closed stdout (``| head``) returns 0; a stdout that cannot be written (a full
    disk) is an error on one line, exit 2; running out of memory is one line, exit 1.
    """
    try:
        with interrupts_handled():
            parser = build_parser()
            args = parser.parse_args(argv)
            if args.func is None:  # bare ``tpusim``
                parser.print_help()
                return 0
            args.func(args)
            sys.stdout.flush()
    except TpusimError as exc:
        if not getattr(exc, "reported", False):
            for line in str(exc).splitlines() or [""]:
                print(f"tpusim: error: {line}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("tpusim: interrupted", file=sys.stderr)
        return INTERRUPTED_EXIT_CODE
    except BrokenPipeError:
        drop_stdout()
        return 0
    except MemoryError:  # a legal but huge run past the machine's (or ulimit's) memory
        print(
            "tpusim: error: out of memory (the run is too large for this machine: try a "
            "smaller system, fewer sweep points or a lower fidelity)",
            file=sys.stderr,
        )
        return 1
    except OSError as exc:  # not one of tpusim's own files: each names its flag
        if exc.filename is None and raised_by_print(exc):
            drop_stdout()
            print(f"tpusim: error: stdout: cannot write ({exc.strerror})", file=sys.stderr)
        else:
            where = exc.filename if exc.filename is not None else "input/output"
            print(f"tpusim: error: {where}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
