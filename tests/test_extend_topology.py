"""How to extend: a new topology from this file alone, through the registries.

The toy is a ring of chips that only lists its links. Everything else (routes,
hops, metrics, the collectives' axis structure, plot layout) comes from the
defaults of :class:`tpusim.topology.Topology`; a spec class makes system files
accept ``kind: toy-ring``. Nothing in ``tpusim/`` is edited.

W is the one-direction link bandwidth (bytes/s), a the per-hop latency (s), V the
all-reduce size (bytes per chip), n the chips.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np
import pytest
from pydantic import PositiveInt

from tpusim.collectives.offload import OnChipModel
from tpusim.config import System, load_system
from tpusim.config.system import BaseTopologySpec
from tpusim.engine import CollectiveOptions, run_collective
from tpusim.errors import ConfigError
from tpusim.network import NetworkSettings
from tpusim.topology import TOPOLOGIES, LinkTable, Topology, TopologyKind, build_topology

MiB = 2**20
REL = 0.01


class ToyRingSpec(BaseTopologySpec):
    """``topology: {kind: toy-ring, chips: N}`` in a system file."""

    kind: Literal["toy-ring"]
    chips: PositiveInt

    @property
    def num_chips(self) -> int:
        return self.chips


class ToyRing(Topology):
    """``n`` chips, chip i linked both ways to chip i + 1 (mod n); nothing else defined."""

    kind = "toy-ring"

    def __init__(self, n: int, *, link_bandwidth_Bps: float, hop_latency_s: float):
        self.num_chips = n
        self.link_bandwidth_Bps, self.hop_latency_s = link_bandwidth_Bps, hop_latency_s

    def build_links(self) -> LinkTable:
        chips = np.arange(self.num_chips)
        nxt = (chips + 1) % self.num_chips
        return LinkTable.build([(chips, nxt, self.link_bandwidth_Bps, self.hop_latency_s, "ring")])


def build_toy_ring(system: System) -> ToyRing:
    return ToyRing(
        system.num_chips,
        link_bandwidth_Bps=system.link_bandwidth_Bps,
        hop_latency_s=system.hop_latency_s,
    )


TOPOLOGIES.register("toy-ring", TopologyKind(build_toy_ring, spec=ToyRingSpec))


def toy_system(folder: Path, n: int) -> System:
    path = folder / f"toy-{n}.yaml"
    path.write_text(
        f"name: toy-{n}\nchip: v5e\ntopology: {{kind: toy-ring, chips: {n}}}\n"
        "ici: {link_bandwidth: 45 GB/s, hop_latency: 1 us}\n",
        encoding="utf-8",
    )
    return load_system(str(path))


def ring_distance(i: int, j: int, n: int) -> int:
    d = (j - i) % n
    return min(d, n - d)


@pytest.mark.parametrize("n", [5, 6])
def test_system_file_builds_the_toy(tmp_path, n):
    system = toy_system(tmp_path, n)
    topo = build_topology(system)
    assert isinstance(topo, ToyRing)
    assert system.num_chips == topo.num_chips == n
    assert system.topology_kind == "toy-ring"
    assert topo.link_bandwidth_Bps == 45e9 and topo.hop_latency_s == 1e-6


@pytest.mark.parametrize("fidelity", ["analytic", "flow", "packet"])
@pytest.mark.parametrize("n", [5, 6])
def test_ring_all_reduce_matches_closed_form(tmp_path, fidelity, n):
    system = toy_system(tmp_path, n)
    topo = build_topology(system)
    W, a, V = system.link_bandwidth_Bps, system.hop_latency_s, 8 * MiB
    result, network = run_collective(
        topo,
        "all-reduce",
        V,
        CollectiveOptions(algorithm="ring", network=NetworkSettings.of(fidelity)),
        onchip=OnChipModel.none(),
    )
    assert result.time_s == pytest.approx(2 * (n - 1) * (a + V / (n * W)), rel=REL)
    assert result.chips == n and result.max_hops == 1
    # every chip sends 2(n-1) chunks of V/n to its successor, on one link each
    forward = topo.find_links(np.arange(n), (np.arange(n) + 1) % n)
    assert network.link_bytes[forward] == pytest.approx(2 * (n - 1) * V / n, rel=1e-12)


@pytest.mark.parametrize("fidelity", ["analytic", "flow"])
def test_point_to_point_takes_the_shortest_route(tmp_path, fidelity):
    n = 7
    topo = build_topology(toy_system(tmp_path, n))
    W, a, V = topo.link_bandwidth_Bps, topo.hop_latency_s, 4 * MiB
    result, network = run_collective(
        topo,
        "collective-permute",
        V,
        CollectiveOptions(algorithm="direct", pairs=[(0, 3)], network=NetworkSettings.of(fidelity)),
        onchip=OnChipModel.none(),
    )
    assert result.max_hops == 3
    assert result.time_s == pytest.approx(3 * a + V / W, rel=REL)
    on_route = topo.link_ids([0, 1, 2, 3])
    assert network.link_bytes[on_route] == pytest.approx(V, rel=1e-12)
    assert network.link_bytes.sum() == pytest.approx(3 * V, rel=1e-12)


def test_routes_and_hops_come_from_the_defaults(tmp_path):
    n = 6
    topo = build_topology(toy_system(tmp_path, n))
    assert topo.route(0, 2) == [0, 1, 2]
    assert topo.route(0, 4) == [0, 5, 4]
    assert topo.route(0, 3) == [0, 1, 2, 3]  # a tie goes by the lowest-numbered chip
    assert topo.route(4, 4) == [4]
    for src in range(n):
        assert topo.hops_from(src).tolist() == [ring_distance(src, d, n) for d in range(n)]
    src, dst = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    ptr, links = topo.route_links_many(src.ravel(), dst.ravel())
    for k, (s, d) in enumerate(zip(src.ravel(), dst.ravel(), strict=True)):
        assert links[ptr[k] : ptr[k + 1]].tolist() == topo.link_ids(topo.route(s, d)).tolist()
    assert topo.vectorised_routes and not topo.has_port_routes
    # pairs at distance 1 and 2 twice per chip, the opposite chip once: 6, 6, 3 x 2 dirs
    assert topo.hop_histogram().tolist() == [0, 2 * n, 2 * n, n]
    assert topo.diameter_hops == 3
    assert topo.mean_hops == pytest.approx((1 * 12 + 2 * 12 + 3 * 6) / 30)
    assert topo.num_links == n
    assert topo.bisection_bandwidth_Bps == pytest.approx(2 * topo.link_bandwidth_Bps)


def test_axes_and_plot_layout_come_from_the_defaults(tmp_path):
    n = 5
    topo = build_topology(toy_system(tmp_path, n))
    chips, axes = topo.axis_structure()
    assert chips.tolist() == list(range(n))
    assert [(ax.name, ax.size, ax.kind) for ax in axes] == [("chips", n, "any")]
    layout = topo.plot_layout()
    assert layout.shape == (1, n)
    values = np.arange(n, dtype=float) * 10
    assert layout.grid(values).tolist() == [values.tolist()]
    assert "ToyRing" in layout.title


def test_heatmap_draws_the_toy(tmp_path):
    pytest.importorskip("matplotlib")
    from tpusim.report import link_plots

    n = 5
    topo = build_topology(toy_system(tmp_path, n))
    result, network = run_collective(
        topo, "all-reduce", MiB, CollectiveOptions(algorithm="ring"), onchip=OnChipModel.none()
    )
    fig = link_plots.link_utilization_heatmap(topo, network.link_bytes, result.time_s)
    image = fig.axes[0].images[0].get_array()
    assert image.shape == (1, n)
    assert fig.axes[0].get_title().endswith(f"ToyRing ({n} chips)")
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_registering_a_kind_twice_is_refused():
    TOPOLOGIES.register("toy-ring", TopologyKind(build_toy_ring, spec=ToyRingSpec))  # a no-op
    with pytest.raises(ValueError, match=r"topology kind 'toy-ring' is already registered"):
        TOPOLOGIES.register("toy-ring", TopologyKind(lambda system: build_toy_ring(system)))


def test_a_toy_spec_is_validated_with_file_and_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\nchip: v5e\ntopology:\n  kind: toy-ring\n  chips: 0\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml:5 topology\.chips: "):
        load_system(str(path))
