"""Figures about a system that the command line and notebooks print: topology metrics
and pod totals, as one flat dict whose keys carry their units."""

from __future__ import annotations

from typing import Any

from tpusim.config.loader import System
from tpusim.topology import Topology, build_topology


def pod_totals(system: System) -> dict[str, Any]:
    """Peak FLOP/s per dtype and HBM summed over every chip of the system."""
    chips = system.num_chips
    return {
        "peak_flops": {dtype: rate * chips for dtype, rate in system.chip.peak_flops.items()},
        "hbm_capacity_bytes": system.chip.hbm.capacity_bytes * chips,
        "sram_capacity_bytes": system.chip.sram.capacity_bytes * chips,
    }


def topology_summary(system: System, topology: Topology | None = None) -> dict[str, Any]:
    """The ``tpusim topo`` record (DESIGN.md contract fields first)."""
    topo = topology or build_topology(system)
    hist = topo.hop_histogram()
    return {
        "system": system.name,
        "topology": topo.kind,
        "chip": system.chip.name,
        "chips": topo.num_chips,
        "links": topo.num_links,
        "diameter_hops": topo.diameter_hops,
        "mean_hops": topo.mean_hops,
        "bisection_bandwidth_Bps": topo.bisection_bandwidth_Bps,
        "link_bandwidth_Bps": system.link_bandwidth_Bps,
        "hop_latency_s": system.hop_latency_s,
        "links_by_kind": topo.link_counts(),
        "degree": topo.degree_stats(),
        "hop_histogram": {str(h): int(n) for h, n in enumerate(hist) if n},
        "shape": topo.describe(),
        **pod_totals(system),
    }


def _base(label: str) -> str:
    return label.split("[", 1)[0]


def comparison_table(rows: list[dict[str, Any]]) -> Any:
    """Key figures of a scenario run: one column per system, one row per figure (the
    figure's unit in its name). Collectives give their time at the smallest size and
    bus bandwidth at the largest; programs their step time, MFU, exposed communication,
    throughput per chip and, where configured, energy and cost per token."""
    import pandas as pd

    from tpusim.units import format_bytes

    table: dict[str, dict[str, float]] = {}
    systems = list(dict.fromkeys(r["system"] for r in rows))

    def put(metric: str, system: str, value: Any) -> None:
        if value is not None:
            table.setdefault(metric, {})[system] = float(value)

    collectives: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        system, kind = row["system"], row.get("kind")
        if kind == "topology":
            put("chips", system, row["chips"])
            put("diameter (hops)", system, row["diameter_hops"])
            put("mean hops", system, row["mean_hops"])
            put("bisection (TB/s, one direction)", system, row["bisection_bandwidth_Bps"] / 1e12)
        elif kind == "collective":
            collectives.setdefault((_base(row["workload"]), system), []).append(row)
        elif kind in ("training_step", "decode_step", "program", "hlo"):
            label = row["workload"]
            if kind == "decode_step":
                put(f"{label}: per-token latency (us)", system, row["step_time_s"] * 1e6)
            else:
                put(f"{label}: step time (ms)", system, row["step_time_s"] * 1e3)
                put(
                    f"{label}: exposed communication (ms)",
                    system,
                    row["exposed_communication_time_s"] * 1e3,
                )
                put(f"{label}: MFU (%)", system, 100 * row["mfu"])
            put(f"{label}: tokens/s per chip", system, row.get("tokens_per_s_per_chip"))
            if row.get("energy_per_token_J") is not None:
                put(f"{label}: energy per token (mJ)", system, 1e3 * row["energy_per_token_J"])
            put(
                f"{label}: cost per 1M tokens (USD)", system, row.get("cost_per_million_tokens_usd")
            )
    for (name, system), runs in collectives.items():
        small = min(runs, key=lambda r: r["bytes"])
        large = max(runs, key=lambda r: r["bytes"])
        if small is not large:
            put(f"{name} {format_bytes(small['bytes'])}: time (us)", system, small["time_s"] * 1e6)
        put(
            f"{name} {format_bytes(large['bytes'])}: busbw (GB/s)", system, large["busbw_Bps"] / 1e9
        )
    frame = pd.DataFrame.from_dict(table, orient="index")
    return frame.reindex(columns=systems)


def format_table(frame: Any) -> str:
    """A comparison table as text: 4 significant digits (whole numbers with thousands
    separators from 10,000), blanks for missing values."""

    def cell(value: float) -> str:
        return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"

    return frame.to_string(float_format=cell, na_rep="", justify="right")


def write_scenario_plots(out: Any, run: Any) -> list[Any]:
    """The figures of a scenario run (see :mod:`tpusim.plots`), PNG and SVG, into
    ``out``; returns the PNG paths. Written when there is something to show:

    * ``busbw-<op>.png``: bus bandwidth against message size per system, for each
      collective op swept over ``bytes``;
    * ``hops.png``: hop-count histograms of the systems with a topology workload;
    * ``links-<system>.png``: link utilisation per chip during the largest all-reduce
      (else the largest collective) on that system;
    * ``steps.png``: compute, exposed and hidden communication per program run;
    * ``timeline.png``: the first training step (else the first program) simulated.
    """
    from pathlib import Path

    import pandas as pd

    from tpusim import plots
    from tpusim.units import format_bytes

    out = Path(out)
    written: list[Path] = []
    rows = run.rows
    curves = pd.DataFrame([r for r in rows if r.get("kind") == "collective"])
    if not curves.empty:
        for op, part in curves.groupby("op", sort=False):
            if part["bytes"].nunique() > 1:
                fig = plots.busbw_vs_size(part)
                fig.axes[0].set_title(f"{op}: bus bandwidth vs message size")
                plots.save(fig, out / f"busbw-{op}")
                written.append(out / f"busbw-{op}.png")
                _close(fig)
    measured = [r["system"] for r in rows if r.get("kind") == "topology"]
    if measured:
        fig = plots.hop_histograms({s: run.topologies[s] for s in measured}, out / "hops")
        written.append(out / "hops.png")
        _close(fig)
    chosen: dict[str, Any] = {}
    for entry in run.collectives:
        best = chosen.get(entry.system)
        rank = (entry.op == "all-reduce", entry.bytes)
        if best is None or rank > (best.op == "all-reduce", best.bytes):
            chosen[entry.system] = entry
    for system, entry in chosen.items():
        fig = plots.link_utilization_heatmap(run.topologies[system], entry.link_bytes, entry.time_s)
        ax = fig.axes[0]
        shape = ax.get_title().split(": ", 1)[-1]
        ax.set_title(
            f"{system}, {shape}: mean outgoing link utilisation per chip\n"
            f"during a {format_bytes(entry.bytes)} {entry.op}"
        )
        plots.save(fig, out / f"links-{system}")
        written.append(out / f"links-{system}.png")
        _close(fig)
    programs = [r for r in rows if r.get("kind") in ("training_step", "program", "hlo")]
    if programs:
        fig = plots.step_breakdown(programs, out / "steps")
        written.append(out / "steps.png")
        _close(fig)
    if run.details:
        trained = [
            d
            for d in run.details
            if any(
                r.get("kind") == "training_step" and r["system"] == d[0] and r["workload"] == d[1]
                for r in rows
            )
        ]
        system, label, results = (trained or run.details)[0]
        fig = plots.timeline(results.ops)
        fig.axes[0].set_title(f"Timeline of one step: {label} on {system}")
        plots.save(fig, out / "timeline")
        written.append(out / "timeline.png")
        _close(fig)
    return written


def _close(fig: Any) -> None:
    import matplotlib.pyplot as plt

    plt.close(fig)
