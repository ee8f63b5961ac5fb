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
