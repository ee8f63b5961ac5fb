"""``tpusim collective --sweep-bytes``: the sizes one by one, each row printed as it
finishes, with a progress bar (the study layer's, loaded only for a sweep)."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from tpusim import units
from tpusim.cli import collective_run
from tpusim.cli.collective_run import SWEEP_HEADER, sweep_row, with_intervals
from tpusim.cli.console import print_json
from tpusim.study.progress import Finished, Progress

if TYPE_CHECKING:
    from tpusim.config.loader import System
    from tpusim.engine import CollectiveOptions
    from tpusim.topology import Topology


def collective_sweep(
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
    rows = []
    if not args.as_json:
        print(SWEEP_HEADER, flush=True)
    what = f"{system.name} {args.op}"
    # text rows on stdout are the progress; with --json a pipe gets plain lines on stderr
    with Progress(len(sizes), what, enabled=not args.quiet, terminal_only=not args.as_json) as bar:
        for size in sizes:
            began = time.perf_counter()
            record = collective_run.run_one(system, topology, args, size, options)[0].record()
            rows.append(with_intervals(record, system))
            if not args.as_json:
                print(sweep_row(rows[-1], binary), flush=True)
            wall_s = time.perf_counter() - began
            bar.finished(Finished(units.format_bytes(size, binary), wall_s))
    if args.as_json:
        print_json({"system": system.name, "op": args.op, "sweep": rows})
