"""``tpusim collective``'s run: one collective on a system, its lines and record; a
sweep of sizes runs in :mod:`tpusim.cli.collective_sweep` (which loads the progress
bar only for a sweep)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from tpusim import units
from tpusim.cli.collective import CollectiveFlags
from tpusim.cli.console import print_json
from tpusim.cli.faults import fault_flags, fault_lines
from tpusim.cli.flags import (
    axes_flag,
    check_network_work,
    pairs_flag,
    size_flag,
    size_in_binary,
    sweep_sizes,
)
from tpusim.cli.model_flags import fill
from tpusim.cli.network_flags import network_of
from tpusim.collectives import AlgorithmError
from tpusim.config import load_system
from tpusim.engine import CollectiveOptions, CollectiveResult, link_table, run_collective
from tpusim.errors import InputError
from tpusim.later import Later
from tpusim.results.files import atomic_csv, check_file_target, output_error
from tpusim.results.intervals import json_intervals, range_text
from tpusim.results.records import CollectiveRecord
from tpusim.topology import build_topology

if TYPE_CHECKING:
    from tpusim.config.loader import System
    from tpusim.network import Network
    from tpusim.topology import Topology

#: ``--sweep-bytes``: the sizes one by one, with progress.
SWEEP = Later("tpusim.cli.collective_sweep", "collective_sweep")
#: ``--calibration``: its overlay read and applied (the module only then).
LOAD_CALIBRATION = Later("tpusim.config.calibration", "load_calibration")
CALIBRATED_SYSTEM = Later("tpusim.config.calibration", "calibrated_system")


def _collective_options(args: argparse.Namespace) -> CollectiveOptions:
    """The flags as :class:`~tpusim.engine.CollectiveOptions`."""
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


def run_one(
    system: System,
    topology: Topology,
    args: argparse.Namespace,
    size: float,
    options: CollectiveOptions,
) -> tuple[CollectiveResult, Network]:

    try:
        return run_collective(
            topology, args.op, size, options, chip=system.chip, system_name=system.name
        )
    except (AlgorithmError, ValueError) as exc:
        raise InputError(str(exc)) from None


def cmd_collective(args: argparse.Namespace) -> None:
    fill(args, CollectiveFlags, command="tpusim collective")
    if (args.bytes is None) == (args.sweep_bytes is None):
        raise InputError("give exactly one of --bytes SIZE and --sweep-bytes LOW:HIGH")
    options = _collective_options(args)
    if args.links_csv:
        check_file_target(args.links_csv, "--links-csv")
    system = load_system(args.system)
    if args.calibration:
        system = CALIBRATED_SYSTEM(system, LOAD_CALIBRATION(args.calibration))
    if args.sweep_bytes is not None:
        sizes = sweep_sizes(args.sweep_bytes, args.max_points)
    else:
        sizes = [size_flag(args.bytes, "--bytes")]
    check_network_work(system.num_chips, sizes, options, args.op)
    topology = build_topology(system)
    binary = size_in_binary(args.sweep_bytes or args.bytes)
    if args.sweep_bytes is not None:
        SWEEP(system, topology, args, sizes, options, binary)
        return
    result, network = run_one(system, topology, args, sizes[0], options)
    if args.links_csv:
        _write_links(topology, network, result.time_s, args.links_csv)
    rec = with_intervals(result.record(), system) | network.fault_report
    if args.as_json:
        print_json(rec)
    else:
        print("\n".join(_collective_lines(rec, binary)))
        if "failed_links" in rec:
            print("\n".join(fault_lines(rec)))


def _write_links(topology: Topology, network: Network, time_s: float, file: str) -> None:
    try:
        atomic_csv(link_table(topology, network, time_s), file, index=False)
    except OSError as exc:
        raise output_error("--links-csv", file, exc) from None


def with_intervals(record: dict[str, Any], system: System) -> dict[str, Any]:
    """A collective's record with ``time_s_interval``, ``algbw_Bps_interval``,
    ``busbw_Bps_interval`` and ``interval_basis`` (80%, :mod:`tpusim.results.intervals`)."""
    columns = {k: v for k, v in CollectiveRecord.interval_columns.items() if k != "step_time_s"}
    return record | json_intervals(record, columns, system.chip.name)


def _collective_lines(rec: dict[str, Any], binary: bool = True) -> list[str]:
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


SWEEP_HEADER = f"{'size':>10} {'time':>10} {'algbw GB/s':>11} {'busbw GB/s':>11}  algorithm"


def sweep_row(r: dict[str, Any], binary: bool) -> str:
    return (
        f"{units.format_bytes(r['bytes'], binary):>10} {units.format_time(r['time_s']):>10} "
        f"{_gbps_text(r['algbw_Bps']):>11} {_gbps_text(r['busbw_Bps']):>11}  {r['algorithm']}"
    )
