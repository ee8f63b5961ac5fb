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

import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

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

if TYPE_CHECKING:
    from multiprocessing.connection import Connection
    from multiprocessing.process import BaseProcess

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


def write_outputs(out: str | Path, outputs: Outputs, processes: int = 1) -> dict[str, list[Path]]:
    """Create the folder ``out`` and run every registered writer into it; returns the
    paths each writer wrote (in ``out``), by writer name.

    The writers write into a hidden staging folder inside ``out`` whose files are
    moved into ``out`` only once every writer has finished
    (:func:`tpusim.results.files.staged_folder`): a failed or interrupted write
    leaves ``out`` as it was. With ``processes`` > 1 on Linux, the ``plots`` writer
    runs in a forked process (:class:`_Drawing`) while this one writes the tables
    and the claims (the same files; a drawing process that fails or dies is
    redone here). Raises the OSError of a failed write.
    """
    folder = Path(out)
    with staged_folder(folder) as staging:
        drawing = _Drawing.start(staging, outputs) if processes > 1 else None
        try:
            written = {
                name: drawing.result()
                if name == PLOTS and drawing
                else writer.write(staging, outputs)
                for name, writer in WRITERS.items()
            }
        finally:
            if drawing is not None:
                drawing.stop()
    return {
        name: [folder / Path(p).relative_to(staging) for p in paths]
        for name, paths in written.items()
    }


#: The writer drawn in a process of its own when :func:`write_outputs` may use several.
PLOTS = "plots"


@dataclass
class _Drawing:
    """The ``plots`` writer running in a forked process into the staging folder; its
    paths come back down a pipe (figures take matplotlib most of their time, the
    claims and tables another core's worth)."""

    staging: Path
    outputs: Outputs
    process: BaseProcess
    reader: Connection

    @classmethod
    def start(cls, staging: Path, outputs: Outputs) -> _Drawing | None:
        """Fork the drawing process; None where there is nothing to draw, no ``plots``
        writer or no fork (not Linux)."""
        if not outputs.with_plots or PLOTS not in WRITERS or not sys.platform.startswith("linux"):
            return None
        import multiprocessing

        context = multiprocessing.get_context("fork")
        reader, writer = context.Pipe(duplex=False)
        process = context.Process(  # type: ignore[attr-defined]
            target=_draw, args=(staging, outputs, writer), daemon=True
        )
        process.start()
        writer.close()  # the child holds the only write end: its exit is the reader's EOF
        return cls(staging, outputs, process, reader)

    def result(self) -> list[Path]:
        """The paths the drawing process wrote (waiting for it); drawn here instead if
        it failed or died before sending them."""
        try:
            paths: list[Path] = self.reader.recv()
        except (EOFError, OSError):
            self.stop()
            return WRITERS.get(PLOTS).write(self.staging, self.outputs)
        self.stop()
        return paths

    def stop(self) -> None:
        """End the drawing process (a no-op once it has exited) and close the pipe."""
        if self.process.is_alive():
            self.process.terminate()
        self.process.join()
        self.reader.close()


def _draw(staging: Path, outputs: Outputs, paths: Connection) -> None:
    """The drawing process: run the ``plots`` writer and send its paths; on any error
    exit without them (the parent draws again and raises it there)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        paths.send(WRITERS.get(PLOTS).write(staging, outputs))
    except BaseException:
        os._exit(1)
