"""Figures of single workload kinds, beside the scenario-wide ones of
:mod:`tpusim.report.plots`: a training step's HBM over its schedule (``memory.png``) and the
links several jobs share (``jobs-<system>-<workload>.png``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tpusim.report.drawing import close
from tpusim.report.plots import finish, pyplot
from tpusim.results.files import save_figure
from tpusim.results.writers import Outputs, trace_name
from tpusim.workloads.jobs import JobsResults

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from tpusim.topology import Topology
    from tpusim.topology.base import PlotLayout


# -- training memory ---------------------------------------------------------------
def memory_timeline(
    points: Sequence[tuple[float, Mapping[str, float]]],
    capacity_bytes: float | None = None,
    path: str | Path | None = None,
    title: str = "HBM per chip over the step",
    reference: tuple[str, float] | None = None,
) -> Figure:
    """Stacked areas of a training step's HBM per chip by part (weights, optimizer
    state, gradients, activations, buffers) over the step's schedule (fraction done,
    layer by layer through each forward and backward of a chunk-microbatch), from
    :func:`tpusim.program.builders.memory.memory_timeline`; a dashed line at the
    chip's ``capacity_bytes`` when given and a dotted one at ``reference`` (label,
    bytes: XLA's peak of the same step, say). Bytes shown in GB (1e9)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    x = [p[0] for p in points]
    parts = list(points[0][1]) if points else []
    stacks = [[p[1][part] / 1e9 for p in points] for part in parts]
    if points:
        ax.stackplot(x, *stacks, labels=parts, step="post", alpha=0.8)
    if capacity_bytes:
        ax.axhline(capacity_bytes / 1e9, color="black", linestyle="--", label="HBM capacity")
    if reference:
        ax.axhline(reference[1] / 1e9, color="crimson", linestyle=":", label=reference[0])
    ax.set_xlabel("schedule done (fraction of the stage's layer forwards and backwards)")
    ax.set_ylabel("HBM per chip (GB)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return finish(fig, path)


# -- links shared by several jobs ---------------------------------------------------------
def shared_links_heatmap(
    topology: Topology,
    job_link_bytes: Mapping[str, np.ndarray],
    time_s: float,
    path: str | Path | None = None,
) -> Figure:
    """Two panels on the grid of :meth:`~tpusim.topology.base.Topology.plot_layout`,
    each cell showing the largest value among its chips (a torus: over z): how many
    jobs send bytes over the chip's most-shared outgoing link (0: no job's bytes), and
    the utilisation (%) over ``time_s`` (s, the jobs' run together) of its busiest
    outgoing link that carries bytes of two or more jobs. ``job_link_bytes``: bytes
    per directed link of each job (name -> array)."""
    plt = pyplot()
    links, n = topology.links, topology.num_chips
    per_job = np.array([np.asarray(b, dtype=float) for b in job_link_bytes.values()])
    users = (per_job > 0).sum(axis=0)
    capacity = links.bandwidth_Bps * time_s if time_s > 0 else np.inf
    shared_util = np.where(users > 1, 100.0 * per_job.sum(axis=0) / capacity, 0.0)
    row, col, shape, xlabel, ylabel = _wrapped_layout(topology.plot_layout())
    out = links.src < n
    cells = (row[links.src[out]], col[links.src[out]])
    panels = []
    for values in (users, shared_util):
        grid = np.zeros(shape)
        np.maximum.at(grid, cells, values[out])
        panels.append(grid)
    fig, axes = plt.subplots(
        1, 2, figsize=(min(16, 4 + 0.9 * shape[1]), min(9, 2.4 + 0.45 * shape[0]))
    )
    titles = ("jobs on the most-shared outgoing link", "busiest shared link utilisation (%)")
    for ax, grid, title, unit in zip(axes, panels, titles, ("jobs", "%"), strict=True):
        top = max(2.0 if unit == "jobs" else 1.0, float(grid.max()))
        cmap = "magma" if unit == "jobs" else "viridis"
        image = ax.imshow(grid, origin="lower", cmap=cmap, aspect="auto", vmin=0, vmax=top)
        fig.colorbar(image, ax=ax).set_label(unit)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(f"{title}\n(largest over the chips of each cell)", fontsize="medium")
    fig.suptitle(f"Links shared by jobs {', '.join(job_link_bytes)}")
    return finish(fig, path)


#: Chips per row when a one-row plot layout of many chips is folded into a grid.
FOLDED_ROW_CHIPS = 32


def _wrapped_layout(layout: PlotLayout) -> tuple[np.ndarray, np.ndarray, tuple[int, int], str, str]:
    """(row, col, shape, xlabel, ylabel) of ``layout``; a single row of more than
    ``FOLDED_ROW_CHIPS`` cells is folded into rows of that many."""
    rows, cols = layout.shape
    if rows > 1 or cols <= FOLDED_ROW_CHIPS:
        return layout.row, layout.col, layout.shape, layout.xlabel, layout.ylabel
    width = FOLDED_ROW_CHIPS
    shape = (-(-cols // width), width)
    xlabel, ylabel = f"{layout.xlabel} mod {width}", f"{layout.xlabel} // {width}"
    return layout.col // width, layout.col % width, shape, xlabel, ylabel


def write_jobs_heatmaps(out: Path, outputs: Outputs) -> list[Path]:
    """The ``jobs`` output writer: per jobs workload and system,
    ``jobs-<system>-<workload>.png`` and ``.svg`` (:func:`shared_links_heatmap`), if
    the scenario asks for plots (``plots: false`` writes no figure)."""
    written: list[Path] = []
    if not outputs.with_plots:
        return written
    for detail in outputs.run.details:
        system, label, results = detail.system, detail.label, detail.results
        if not isinstance(results, JobsResults) or results.job_link_bytes is None:
            continue
        topology = outputs.run.topologies[system]
        stem = trace_name(system, label).removeprefix("trace-").removesuffix(".json")
        fig = shared_links_heatmap(topology, results.job_link_bytes, results.step_time_s)
        fig.suptitle(f"{label} on {system}: jobs sharing links")
        written += save_figure(fig, out / f"jobs-{stem}")
        close(fig)
    return written
