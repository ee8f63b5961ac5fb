"""The ``tpusim topo`` record of a system (:func:`topology_summary`) and its pod-wide
totals (:func:`pod_totals`); a scenario's topology rows are built from it
(:class:`~tpusim.results.records.TopologyRecord`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tpusim.config.loader import System
    from tpusim.topology import Topology

__all__ = ["pod_totals", "topology_summary"]


def pod_totals(system: System) -> dict[str, Any]:
    """Peak FLOP/s per dtype and HBM and SRAM bytes summed over every chip of the system."""
    chips = system.num_chips
    return {
        "peak_flops": {dtype: rate * chips for dtype, rate in system.chip.peak_flops.items()},
        "hbm_capacity_bytes": system.chip.hbm.capacity_bytes * chips,
        "sram_capacity_bytes": system.chip.sram.capacity_bytes * chips,
    }


def topology_summary(system: System, topology: Topology | None = None) -> dict[str, Any]:
    """The ``tpusim topo`` record (DESIGN.md contract fields first): counts, hops,
    bandwidths in bytes/s (one direction), latency in s, capacities in bytes."""
    from tpusim.topology import build_topology

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
