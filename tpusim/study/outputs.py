"""The files of a scenario run: every output writer by name, the shipped ones
registered here in one list, and :func:`write_outputs`, which runs them all.

A writer is ``write(out, outputs) -> paths`` (:data:`tpusim.results.writers.Writer`):
it writes its file(s) into the folder ``out`` from
:class:`~tpusim.results.writers.Outputs` and returns the paths it wrote (none when it
has nothing to write). They run in registration order:

==============  ===================================================================
name            file(s)
==============  ===================================================================
``summary``     ``summary.csv``: one row per record (:mod:`tpusim.results.records`);
                ``summary.parquet`` too when pyarrow is installed
``traces``      ``trace-<system>-<workload>.json`` per simulated program
``ops``         ``ops.csv``: every op of every simulated program
``links``       ``links.csv``: the links that carried bytes, per simulated program
``resolved``    ``resolved.yaml``: the scenario as validated (defaults filled in)
``comparison``  ``comparison.csv``: figures x systems
                (:func:`~tpusim.results.comparison.comparison_frame`)
``claims``      ``claims.csv``: vendor claims against the run, if the scenario asks
``jobs``        ``jobs-<system>-<workload>.png/.svg``: the links each job of a ``jobs``
                workload loads (:mod:`tpusim.report.workload_plots`)
``serving_trace`` ``serving_trace.json``: every serving replica's iterations
                (:func:`~tpusim.report.traces.write_serving_trace`)
``plots``       PNG and SVG figures, if the scenario asks (:mod:`tpusim.report.figures`)
``sources``     ``sources.csv``: every configured number with its source and grade
``report``      ``report.html``: one page with the tables and the figures
==============  ===================================================================

Adding a file is a function and one ``WRITERS.register(name, OutputWriter(write,
files))`` call; it runs after the shipped writers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tpusim.registry import Registry
from tpusim.report.figures import write_plots
from tpusim.report.html import write_html_report
from tpusim.report.sources import write_sources
from tpusim.report.traces import write_serving_trace
from tpusim.report.workload_plots import write_jobs_heatmaps
from tpusim.results.files import staged_folder
from tpusim.results.writers import (
    Outputs,
    Writer,
    write_claims,
    write_comparison,
    write_links,
    write_ops,
    write_resolved,
    write_summary,
    write_traces,
)

__all__ = ["WRITERS", "OutputWriter", "write_outputs"]


@dataclass(frozen=True)
class OutputWriter:
    """One output of a scenario run: ``write(out, outputs) -> paths`` and ``files``,
    the file name(s) it writes (for the docs and error reports)."""

    write: Writer
    files: str


#: Output writers by name, run in registration order; raises UnknownEntryError /
#: DuplicateEntryError (:mod:`tpusim.registry`).
WRITERS: Registry[OutputWriter] = Registry("output writer")
WRITERS.register_all(
    (
        ("summary", OutputWriter(write_summary, "summary.csv, summary.parquet")),
        ("traces", OutputWriter(write_traces, "trace-<system>-<workload>.json")),
        ("ops", OutputWriter(write_ops, "ops.csv")),
        ("links", OutputWriter(write_links, "links.csv")),
        ("resolved", OutputWriter(write_resolved, "resolved.yaml")),
        ("comparison", OutputWriter(write_comparison, "comparison.csv")),
        ("claims", OutputWriter(write_claims, "claims.csv")),
        ("jobs", OutputWriter(write_jobs_heatmaps, "jobs-<system>-<workload>.png, .svg")),
        ("serving_trace", OutputWriter(write_serving_trace, "serving_trace.json")),
        ("plots", OutputWriter(write_plots, "*.png, *.svg")),
        # after the plots: the page inlines the figures the plots writer wrote
        ("sources", OutputWriter(write_sources, "sources.csv")),
        ("report", OutputWriter(write_html_report, "report.html")),
    )
)


def write_outputs(out: str | Path, outputs: Outputs) -> dict[str, list[Path]]:
    """Create the folder ``out`` and run every registered writer into it; returns the
    paths each writer wrote (in ``out``), by writer name.

    The writers write into a hidden staging folder inside ``out`` whose files are
    moved into ``out`` only once every writer has finished
    (:func:`tpusim.results.files.staged_folder`): a failed or interrupted write
    leaves ``out`` as it was. Raises the OSError of a failed write.
    """
    folder = Path(out)
    with staged_folder(folder) as staging:
        written = {name: writer.write(staging, outputs) for name, writer in WRITERS.items()}
    return {
        name: [folder / Path(p).relative_to(staging) for p in paths]
        for name, paths in written.items()
    }
