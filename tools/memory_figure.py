"""Draw ``docs/memory-timeline.png``: the memory model's HBM per chip over one training
step of a published run, layer by layer, beside XLA's peak of the same step (its
record in ``configs/measurements/memory/``)::

    python tools/memory_figure.py [CASE_ID] [--out docs/memory-timeline.png]
    python tools/memory_figure.py --table   # the records against the model, as markdown
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from tpusim.program.builders.memory import memory_timeline, peak_stage
from tpusim.report.workload_plots import memory_timeline as draw
from tpusim.validation.memory_records import xla_peak_per_chip
from tpusim.validation.workloads import load_workload_cases
from tpusim.validation.workloads_run import case_system, memory_verdict, workload_fields

HERE = Path(__file__).resolve().parent.parent


def _why(failure: str) -> str:
    """A failed compile's reason, short: XLA's out-of-HBM numbers when it says so."""
    oom = re.search(r"temporaries \(([\d.]+G)\) exceeds available HBM \(([\d.]+G)\)", failure)
    if oom:
        return f"XLA: out of HBM, {oom[1]} of temporaries > {oom[2]}"
    return failure.split(": ", 1)[-1][:120]


def table() -> str:
    """Every compile record (finished or not) against the memory model, per chip."""
    from tpusim.validation.memory_records import RECORDS_DIR, read_record
    from tpusim.validation.workloads_run import simulate_workload

    cases = {c.id: c for c in load_workload_cases()}
    lines = [
        "| runs | compiled for | compile (s) | XLA arguments (GB) | XLA temporaries (GB) "
        "| XLA peak (GB) | model peak (GB) | model error |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for path in sorted(RECORDS_DIR.glob("*.json")):
        found = read_record(path)
        data = json.loads(path.read_text())
        where = data["compile_topology"] + (
            f" x{data['num_slices']}" if data["num_slices"] > 1 else ""
        )
        if isinstance(found, str):
            lines.append(
                f"| {', '.join(data['cases'])} | {where} | {data['compile_time_s']} | "
                f"{_why(found)} | | | | |"
            )
            continue
        case = cases[found.cases[0]]
        n = case.spec.devices_per_chip
        model = simulate_workload(case, simulate=False).peak_hbm_bytes
        xla = found.peak_bytes * n
        extrapolated = "" if found.is_reference else f" (extrapolated; {_why(found.full_compile)})"
        lines.append(
            f"| {', '.join(found.cases)} | {where}{extrapolated} | {found.compile_time_s:.0f} | "
            f"{found.argument_bytes * n / 1e9:.1f} | {found.temp_bytes * n / 1e9:.1f} | "
            f"{xla / 1e9:.1f} | {model / 1e9:.1f} | {model / xla - 1:+.1%} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", nargs="?", default="v5p-maxtext-1x128-32b")
    parser.add_argument("--out", type=Path, default=HERE / "docs" / "memory-timeline.png")
    parser.add_argument("--table", action="store_true", help="print the records' table")
    args = parser.parse_args()
    if args.table:
        print(table())
        return
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
    args.out.with_suffix(".svg").unlink(missing_ok=True)  # the page shows the PNG
    print(args.out)


if __name__ == "__main__":
    main()
