"""``tpusim validate --workloads --compiled``: the shipped compiled runs replayed on
their slices (:mod:`tpusim.validation.compiled`), as a table and a summary or one JSON
object."""

from __future__ import annotations

import argparse
from typing import Any

from tpusim import units
from tpusim.cli.network_flags import network_of
from tpusim.cli.validate_workloads import results_table, summary_lines
from tpusim.report import text_table
from tpusim.results.files import json_text
from tpusim.validation.compiled import by_chip, validate_compiled
from tpusim.validation.workloads import WorkloadCase
from tpusim.validation.workloads_run import workload_summary

#: The replay's op kinds shown beside each run (TensorCore seconds).
KINDS = ("matmul", "elementwise", "kernel", "host_transfer")


def cmd_validate_compiled(args: argparse.Namespace, cases: list[WorkloadCase]) -> None:
    """Replay every compiled run; print the table, the summary, the per-chip medians
    and the replay's time per op kind, or one JSON object with ``--json``."""
    results = validate_compiled(cases, network=network_of(args))
    rows = [r.row() for r in results]
    stats = {**workload_summary(results), "by_chip": by_chip(results)}
    if args.as_json:
        print(json_text({"cases": rows, **stats}))
        return
    print(results_table(rows))
    print()
    print(summary_lines(stats))
    for chip, part in stats["by_chip"].items():
        print(f"{chip:<8} {part['runs']:>3} runs, median |error| {part['median_abs_error']:.1%}")
    print()
    print(breakdown_table(rows))


def breakdown_table(rows: list[dict[str, Any]]) -> str:
    """Per run: the replay's TensorCore time per op kind and its exposed communication."""

    def when(seconds: float | None) -> str:
        return "-" if not seconds else units.format_time(seconds)

    shown = [
        {
            "id": r["id"],
            **{kind: when((r["busy_by_kind_s"] or {}).get(kind)) for kind in KINDS},
            "exposed comm": when(r["exposed_communication_s"]),
            "replayed": when(r["simulated_s"]),
            "measured": when(r["measured_s"]),
        }
        for r in rows
    ]
    return text_table(shown, ("id", *KINDS, "exposed comm", "replayed", "measured"))
