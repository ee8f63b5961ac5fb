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
from tpusim.validation.compiled import by_chip, estimate_stats, validate_compiled
from tpusim.validation.workloads import WorkloadCase
from tpusim.validation.workloads_run import workload_summary

#: The replay's op kinds shown beside each run (TensorCore seconds).
KINDS = ("matmul", "elementwise", "kernel", "host_transfer")


def cmd_validate_compiled(args: argparse.Namespace, cases: list[WorkloadCase]) -> None:
    """Replay every compiled run; print the table, the summary, the per-chip medians
    and the replay's time per op kind, or one JSON object with ``--json``."""
    results = validate_compiled(cases, network=network_of(args))
    rows = [r.row() for r in results]
    stats = {
        **workload_summary(results),
        "xla_estimate": estimate_stats(results),
        "by_chip": by_chip(results),
    }
    if args.as_json:
        print(json_text({"cases": rows, **stats}))
        return
    print(results_table(rows))
    print()
    print(summary_lines(stats))
    for chip, part in {"all": stats["xla_estimate"], **stats["by_chip"]}.items():
        print(
            f"{chip:<8} {part['runs']:>3} runs, median |error|: replayed "
            f"{_share_text(part['median_abs_error'])}, replayed at XLA's op costs "
            f"{_share_text(part['xla_costed_median_abs_error'])}, XLA's estimate "
            f"{_share_text(part['xla_estimate_median_abs_error'])}"
        )
    print()
    print(breakdown_table(rows))


def _share_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


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
            "at XLA costs": when(r["xla_costed_s"]),
            "XLA estimate": when(r["xla_estimate_s"]),
            "measured": when(r["measured_s"]),
        }
        for r in rows
    ]
    columns = ("id", *KINDS, "exposed comm", "replayed", "at XLA costs", "XLA estimate", "measured")
    return text_table(shown, columns)
