"""The files of a scenario run written from its records: one writer function each.

A writer is ``write(out, outputs) -> paths``: it writes its file(s) into the folder
``out`` from :class:`Outputs` and returns the paths it wrote (none when it has
nothing to write). Here: ``summary`` (:func:`write_summary`), ``traces``, ``ops``,
``links``, ``resolved``, ``comparison`` and ``claims``. Which writers a run runs, in
which order, is the output-writer registry's (:data:`tpusim.study.outputs.WRITERS`,
where every shipped writer, these and the report's, is registered in one list).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import yaml

from tpusim.later import LaterModule
from tpusim.results.comparison import comparison_for_csv, comparison_frame
from tpusim.results.files import atomic_csv, atomic_write, atomic_write_text, file_stem
from tpusim.results.run import ScenarioRun
from tpusim.results.trace import write_trace

if TYPE_CHECKING:
    import pandas as pd

    from tpusim.config.loader import System
else:
    pd = LaterModule("pandas")


@dataclass
class Outputs:
    """What the writers read: a scenario run, the scenario as validated (YAML data),
    whether it asks for plots and for the claims table, and the systems it ran
    (:class:`~tpusim.config.loader.System`, for ``sources.csv`` and the report's
    assumptions); the comparison and claims tables are computed once, on first use
    (the command line prints them too)."""

    run: ScenarioRun
    resolved: dict[str, Any] = field(default_factory=dict)
    with_plots: bool = False
    with_claims: bool = False
    #: rows -> the vendor-claims table (:func:`tpusim.study.claims.vendor_claims`), given by
    #: the caller so that results/ does not import the layers above it
    claims_of: Callable[[list[dict[str, Any]]], pd.DataFrame] | None = None
    systems: list[System] = field(default_factory=list)

    @cached_property
    def comparison(self) -> pd.DataFrame:
        """The comparison table (DataFrame: figures x systems)."""
        return comparison_frame(self.run.records, self.run.chips)

    @cached_property
    def claims(self) -> pd.DataFrame | None:
        """The vendor-claims table (:func:`tpusim.study.claims.vendor_claims`), or None when
        the scenario does not ask for it."""
        if not self.with_claims or self.claims_of is None:
            return None
        return self.claims_of(self.run.rows)


#: ``write(out, outputs) -> paths`` (module doc).
Writer = Callable[[Path, Outputs], list[Path]]


def summary_frame(rows: Sequence[Mapping[str, object]]) -> pd.DataFrame:
    """The ``summary`` table: one row per record, columns in first-seen order; a
    column whose values are all whole numbers given as integers (chips, links, hop
    and step counts) is an integer column with blanks (pandas ``Int64``), not floats."""
    frame = pd.DataFrame(rows)
    for column in frame.columns:
        values = [row[column] for row in rows if row.get(column) is not None]
        if values and all(_is_int(v) for v in values):
            frame[column] = frame[column].astype("Int64")
    return frame


def _is_int(value: object) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def parquet_available() -> bool:
    """True when pyarrow is installed (the ``parquet`` extra), so Parquet is written."""

    return importlib.util.find_spec("pyarrow") is not None


def write_summary(out: Path, outputs: Outputs) -> list[Path]:
    """``summary.csv`` (:func:`summary_frame`), and ``summary.parquet`` with the same
    columns and types when pyarrow is installed."""
    frame = summary_frame(outputs.run.rows)
    path = out / "summary.csv"
    atomic_csv(frame, path, index=False)
    if not parquet_available():
        return [path]
    parquet = out / "summary.parquet"
    atomic_write(parquet, lambda f: frame.to_parquet(f, index=False), True)
    return [path, parquet]


def trace_name(system: str, label: str) -> str:
    """The trace file of one program: its names made one file name (:func:`file_stem`)."""
    return f"trace-{file_stem(f'{system}-{label}')}.json"


def write_traces(out: Path, outputs: Outputs) -> list[Path]:
    """One Chrome/Perfetto trace per simulated program (:mod:`tpusim.results.trace`)."""
    paths = []
    for detail in outputs.run.details:
        path = out / trace_name(detail.system, detail.label)
        write_trace(path, detail.results.ops)
        paths.append(path)
    return paths


def _program_table(out: Path, outputs: Outputs, name: str, table: str) -> list[Path]:
    """``<name>.csv``: the ``table`` frame of every simulated program, with system and
    workload columns first; nothing without a simulated program."""
    details = outputs.run.details
    if not details:
        return []
    frames = [
        getattr(d.results, table)().assign(system=d.system, workload=d.label) for d in details
    ]
    merged = pd.concat(frames)
    columns = ["system", "workload"] + [c for c in merged if c not in ("system", "workload")]
    path = out / f"{name}.csv"
    atomic_csv(merged[columns], path, index=False)
    return [path]


def write_ops(out: Path, outputs: Outputs) -> list[Path]:
    """``ops.csv``: name, kind, chips, unit, start_at, end_at, flops of every op."""
    return _program_table(out, outputs, "ops", "ops_frame")


def write_links(out: Path, outputs: Outputs) -> list[Path]:
    """``links.csv``: the links that carried bytes (:mod:`tpusim.results.tables`)."""
    return _program_table(out, outputs, "links", "links_frame")


def write_resolved(out: Path, outputs: Outputs) -> list[Path]:
    """``resolved.yaml``: the scenario as validated, keys in schema order."""

    path = out / "resolved.yaml"
    atomic_write_text(path, yaml.safe_dump(outputs.resolved, sort_keys=False))
    return [path]


def write_comparison(out: Path, outputs: Outputs) -> list[Path]:
    """``comparison.csv``: one row per figure (index column ``figure``), one column per
    system; figures that are counts (chips, hops) written as integers."""
    path = out / "comparison.csv"
    atomic_csv(comparison_for_csv(outputs.comparison), path, index_label="figure")
    return [path]


def write_claims(out: Path, outputs: Outputs) -> list[Path]:
    """``claims.csv``: claim, source, tpusim, assumptions, verdict, interval, reading (if
    asked for)."""
    if outputs.claims is None:
        return []
    path = out / "claims.csv"
    atomic_csv(outputs.claims, path, index=False)
    return [path]
