"""``tpusim collective``: one collective, or a sweep of sizes, on a system."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from tpusim import units
from tpusim.cli.console import print_json
from tpusim.cli.flags import (
    Subparsers,
    axes_flag,
    check_network_work,
    pairs_flag,
    size_flag,
    size_in_binary,
    sweep_sizes,
)
from tpusim.cli.model_flags import add_model_flags, fill
from tpusim.cli.network_flags import add_network_flags, network_of
from tpusim.config import load_system
from tpusim.config.limits import MAX_SWEEP_POINTS
from tpusim.errors import InputError
from tpusim.results.files import atomic_csv, check_file_target, output_error
from tpusim.vocabulary import EngineChoice, Op

if TYPE_CHECKING:
    from tpusim.config.loader import System
    from tpusim.engine import CollectiveOptions, CollectiveResult
    from tpusim.network import Network
    from tpusim.topology import Topology


def _collective_options(args: argparse.Namespace) -> CollectiveOptions:
    """The flags as :class:`~tpusim.engine.CollectiveOptions`."""
    from tpusim.cli.faults import fault_flags
    from tpusim.engine import CollectiveOptions

    if args.axes is not None and args.chips is not None:
        raise InputError("give --axes or --chips, not both")
    if args.chips is not None and args.chips < 1:
        raise InputError(f"--chips {args.chips}: must be >= 1")
    network = network_of(args)
    flags = fault_flags(args)
    return CollectiveOptions(
        axes=axes_flag(args.axes) or (),
        chips=args.chips,
        pairs=pairs_flag(args.pairs) or (),
        algorithm=args.algorithm,
        engine="tensorcore" if args.no_offload else args.engine,
        network=network,
        faults=flags.fault_set(),
        routing=flags.routing or "minimal",
        seed=flags.seed or 0,
    )


def _run_one(
    system: System,
    topology: Topology,
    args: argparse.Namespace,
    size: float,
    options: CollectiveOptions,
) -> tuple[CollectiveResult, Network]:
    from tpusim.collectives import AlgorithmError
    from tpusim.engine import run_collective

    try:
        return run_collective(
            topology, args.op, size, options, chip=system.chip, system_name=system.name
        )
    except (AlgorithmError, ValueError) as exc:
        raise InputError(str(exc)) from None


def cmd_collective(args: argparse.Namespace) -> None:
    from tpusim.topology import build_topology

    fill(args, CollectiveFlags, command="tpusim collective")
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
    check_network_work(system.num_chips, sizes, options, args.op)
    topology = build_topology(system)
    binary = size_in_binary(args.sweep_bytes or args.bytes)
    if args.sweep_bytes is not None:
        _collective_sweep(system, topology, args, sizes, options, binary)
        return
    result, network = _run_one(system, topology, args, sizes[0], options)
    if args.links_csv:
        _write_links(topology, network, result.time_s, args.links_csv)
    rec = with_intervals(result.record(), system) | network.fault_report
    if args.as_json:
        print_json(rec)
    else:
        print("\n".join(_collective_lines(rec, binary)))
        if "failed_links" in rec:
            from tpusim.cli.faults import fault_lines

            print("\n".join(fault_lines(rec)))


def _write_links(topology: Topology, network: Network, time_s: float, file: str) -> None:
    from tpusim.engine import link_table

    try:
        atomic_csv(link_table(topology, network, time_s), file, index=False)
    except OSError as exc:
        raise output_error("--links-csv", file, exc) from None


def _collective_sweep(
    system: System,
    topology: Topology,
    args: argparse.Namespace,
    sizes: list[float],
    options: CollectiveOptions,
    binary: bool,
) -> None:
    """``--sweep-bytes``: each row printed as it finishes (text), or one JSON object at
    the end; progress on stderr unless ``--quiet``: a bar on a terminal, and with
    ``--json`` plain lines on a pipe too."""
    import time

    from tpusim.study.progress import Finished, Progress

    rows = []
    if not args.as_json:
        print(_SWEEP_HEADER, flush=True)
    what = f"{system.name} {args.op}"
    # text rows on stdout are the progress; with --json a pipe gets plain lines on stderr
    with Progress(len(sizes), what, enabled=not args.quiet, terminal_only=not args.as_json) as bar:
        for size in sizes:
            began = time.perf_counter()
            record = _run_one(system, topology, args, size, options)[0].record()
            rows.append(with_intervals(record, system))
            if not args.as_json:
                print(_sweep_row(rows[-1], binary), flush=True)
            wall_s = time.perf_counter() - began
            bar.finished(Finished(units.format_bytes(size, binary), wall_s))
    if args.as_json:
        print_json({"system": system.name, "op": args.op, "sweep": rows})


def with_intervals(record: dict[str, Any], system: System) -> dict[str, Any]:
    """A collective's record with ``time_s_interval``, ``algbw_Bps_interval``,
    ``busbw_Bps_interval`` and ``interval_basis`` (80%, :mod:`tpusim.results.intervals`)."""
    from tpusim.results.intervals import json_intervals
    from tpusim.results.records import CollectiveRecord

    columns = {k: v for k, v in CollectiveRecord.interval_columns.items() if k != "step_time_s"}
    return record | json_intervals(record, columns, system.chip.name)


def _collective_lines(rec: dict[str, Any], binary: bool = True) -> list[str]:
    from tpusim.results.intervals import range_text

    return [
        f"system          {rec['system']}",
        f"collective      {rec['op']} of {units.format_bytes(rec['bytes'], binary)} "
        f"({rec['algorithm']}, {rec['fidelity']} fidelity, reductions on {rec['engine']})",
        f"chips           {rec['chips']:,} in {rec['num_groups']:,} group(s) of "
        f"{rec['group_size']:,}",
        f"time            {units.format_time(rec['time_s'])}"
        + range_text(rec, "time_s", units.format_time),
        f"interval basis  {rec['interval_basis']}",
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


class CollectiveFlags(BaseModel):
    """``tpusim collective``'s options, besides the fault and network flags."""

    system: str = Field(
        description="shipped system name or path to a system YAML",
        json_schema_extra={"positional": True},
    )
    op: Op
    bytes: str | None = Field(
        None, description="size with a unit (nccl-tests convention), e.g. 64MiB"
    )
    sweep_bytes: str | None = Field(None, description="LOW:HIGH, powers of two, e.g. 1KiB:1GiB")
    axes: str | None = Field(
        None, description="torus axes to run over, e.g. x,z (one group per rest)"
    )
    chips: int | None = Field(
        None, description="run on the first N chips", json_schema_extra={"flag_type": "int"}
    )
    algorithm: str = Field(
        "auto", description="auto (default): the fastest predicted under the cost model"
    )
    engine: EngineChoice = Field(
        "auto",
        description="who runs the collective: auto = the chip's default (collectives.offload "
        "in its file); none = the network alone, no on-chip cost, nominal link bandwidth",
    )
    no_offload: bool = Field(
        False, description="reduce on the TensorCore (turns the CAE/SparseCore offload off)"
    )
    pairs: str | None = Field(
        None, description="collective-permute chip pairs SRC:DST[,SRC:DST...]"
    )
    links_csv: str | None = Field(None, description="write the per-link table to this CSV file")
    calibration: str | None = Field(
        None, description="calibration overlay YAML (from tpusim calibrate)"
    )
    quiet: bool = Field(False, description="no progress bar on stderr (sweeps)")
    as_json: bool = Field(False, alias="json", description="print one JSON object")
    max_points: int = Field(
        MAX_SWEEP_POINTS,
        description=f"most sizes of --sweep-bytes to run (default {MAX_SWEEP_POINTS:,}; "
        "refused above it)",
        json_schema_extra={"flag_type": "positive"},
    )


def _add_collective(sub: Subparsers) -> None:
    from tpusim.cli.faults import add_fault_flags
    from tpusim.collectives import ALGORITHMS

    p = sub.add_parser("collective", help="simulate one collective (or a sweep of sizes)")
    algorithms = ("auto", *ALGORITHMS.names())
    add_model_flags(p, CollectiveFlags, choices={"algorithm": algorithms})
    add_network_flags(p)
    add_fault_flags(p)
    p.set_defaults(func=cmd_collective)


def add_parsers(sub: Subparsers) -> None:
    _add_collective(sub)
