"""Draw ``docs/memory-timeline.png``: the memory model's HBM per chip over one training
step of a published run, layer by layer, beside XLA's peak of the same step (its
record in ``configs/measurements/memory/``)::

    python tools/memory_figure.py [CASE_ID] [--out docs/memory-timeline.png]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tpusim.program.builders.memory import memory_timeline, peak_stage
from tpusim.report.workload_plots import memory_timeline as draw
from tpusim.validation.memory_records import xla_peak_per_chip
from tpusim.validation.workloads import load_workload_cases
from tpusim.validation.workloads_run import case_system, memory_verdict, workload_fields

HERE = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", nargs="?", default="v5p-maxtext-1x128-32b")
    parser.add_argument("--out", type=Path, default=HERE / "docs" / "memory-timeline.png")
    args = parser.parse_args()
    case = next(c for c in load_workload_cases() if c.id == args.case)
    from tpusim.validation.workloads_run import _context

    context = _context(case, case_system(case), "analytic")
    step, _, _ = memory_verdict(case, workload_fields(case), context)
    stage = peak_stage(step).stage
    xla = xla_peak_per_chip(case.id, case.spec.devices_per_chip)
    reference = ("XLA's peak (memory_analysis)", xla) if xla else None
    title = f"{case.id}: HBM per chip over the step, layer by layer"
    draw(
        memory_timeline(step, stage),
        context.system.chip.hbm.capacity_bytes,
        path=args.out.with_suffix(""),
        title=title,
        reference=reference,
    )
    print(args.out)


if __name__ == "__main__":
    main()
