"""Shipped systems against published pod figures (reference/tpu-specs.md sections 3.1-3.3).

Every expected value is computed here from the closed forms of the per-link model
(torus diameter = sum floor(k/2) over wrapped axes; bisection = links crossing the
mid-plane x 2 for wraparound x one-way link bandwidth; all-reduce = chips x per-chip
bidirectional ICI / 2) and then compared with the number Google published.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tpusim.config import load_system
from tpusim.report import pod_totals, topology_summary
from tpusim.topology import build_topology

TB, PB, PF, EF = 1e12, 1e15, 1e15, 1e18


def summary(name: str) -> dict:
    return topology_summary(load_system(name))


# -- 3.1 topology / hop counts ------------------------------------------------------------


def torus_diameter(dims, wrap) -> int:
    return sum(d // 2 if w else d - 1 for d, w in zip(dims, wrap, strict=True))


def test_torus_8x8x16_diameter_is_16_hops():
    system = load_system("torus-8x8x16")
    assert system.num_chips == 1024
    assert torus_diameter([8, 8, 16], system.wraparound) == 4 + 4 + 8 == 16
    assert summary("torus-8x8x16")["diameter_hops"] == 16


@pytest.mark.parametrize("name", ["tpu8i-1024", "tpu8i-pod"])
def test_boardfly_diameter_is_7_hops(name):
    rec = summary(name)
    assert rec["diameter_hops"] == 7
    assert rec["chips"] == {"tpu8i-1024": 1024, "tpu8i-pod": 4 * 8 * 36}[name]


def test_tpu8i_pod_is_4_5x_ironwood_256():
    assert load_system("tpu8i-pod").num_chips / load_system("ironwood-256").num_chips == 4.5


def test_tpu8t_virgo_chips():
    system = load_system("tpu8t-virgo")
    assert system.num_chips == 134_400 == 14 * 9600
    assert system.pod is not None and system.pod.num_chips == 9600


def test_ironwood_pod_chips_and_cubes():
    system = load_system("ironwood-pod")
    assert system.num_chips == 9216
    dims = system.spec.topology.dims
    assert math.prod(d // 4 for d in dims) == 144 == 16 * 24 * 24 // 64
    assert all(d % 4 == 0 for d in dims)
    assert system.num_chips == 144 * 64


# -- 3.3 bisection ------------------------------------------------------------------------


def wrap_torus_bisection(dims, link_bw) -> float:
    """Cut across the longest axis: chips in the cut plane x 2 (wraparound) x link_bw."""
    longest = max(dims)
    plane = math.prod(dims) // longest
    return plane * 2 * link_bw


@pytest.mark.parametrize(("name", "published"), [("v5e-pod", 1.6 * TB), ("v6e-pod", 3.2 * TB)])
def test_2d_pod_bisection_matches_docs_exactly(name, published):
    system = load_system(name)
    assert system.wraparound == (True, True)
    expected = wrap_torus_bisection([16, 16], system.link_bandwidth_Bps)
    assert expected == 16 * 2 * system.link_bandwidth_Bps
    assert expected == pytest.approx(published, rel=1e-9)
    assert summary(name)["bisection_bandwidth_Bps"] == pytest.approx(published, rel=1e-9)


def test_v4_pod_bisection_about_24_TBps():
    system = load_system("v4-pod")
    expected = wrap_torus_bisection([16, 16, 16], system.link_bandwidth_Bps)
    assert expected == 16 * 16 * 2 * 45e9
    got = summary("v4-pod")["bisection_bandwidth_Bps"]
    assert got == pytest.approx(expected, rel=1e-9)
    assert got == pytest.approx(24 * TB, rel=0.05)


# -- 3.3 all-reduce -----------------------------------------------------------------------


def allreduce_from_links(name: str) -> float:
    """chips x per-chip bidirectional ICI / 2, with per-chip bidi = out + in link bandwidth."""
    topo = build_topology(load_system(name))
    links = topo.links
    out_bw = np.bincount(links.src, weights=links.bandwidth_Bps, minlength=topo.num_nodes)
    in_bw = np.bincount(links.dst, weights=links.bandwidth_Bps, minlength=topo.num_nodes)
    per_chip_bidi = (out_bw + in_bw)[: topo.num_chips]
    return float(per_chip_bidi.sum() / 2)


@pytest.mark.parametrize(
    ("name", "published", "rel"),
    [("v5e-pod", 51.2 * TB, 1e-9), ("v6e-pod", 102.4 * TB, 1e-9), ("v4-pod", 1.1 * PB, 0.01)],
)
def test_pod_allreduce_bandwidth(name, published, rel):
    system = load_system(name)
    chip = system.chip
    per_chip_bidi = 2 * chip.ici.ports * system.link_bandwidth_Bps
    formula = system.num_chips * per_chip_bidi / 2
    assert formula == pytest.approx(published, rel=rel)
    assert allreduce_from_links(name) == pytest.approx(formula, rel=1e-9)


def test_v5e_and_v6e_per_chip_ici_match_docs():
    # tpu-specs 3.5: v5e 400 GB/s and v6e 800 GB/s bidirectional per chip
    for name, bidi in (("v5e-pod", 400e9), ("v6e-pod", 800e9)):
        system = load_system(name)
        assert 2 * system.chip.ici.ports * system.link_bandwidth_Bps == pytest.approx(bidi)


# -- 3.2 pod aggregates -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind", "dtype", "published", "rel"),
    [
        ("ironwood-pod", "flops", "fp8", 42.5 * EF, 0.005),
        ("ironwood-pod", "hbm", None, 1.77 * PB, 0.005),
        ("tpu8t-superpod", "flops", "fp4", 121 * EF, 0.005),
        ("tpu8t-superpod", "hbm", None, 2 * PB, 0.05),
        ("v4-pod", "flops", "bf16", 1.1 * EF, 0.03),
        ("v5e-pod", "flops", "bf16", 50.63 * PF, 0.01),
        ("v6e-pod", "flops", "bf16", 234.9 * PF, 0.005),
        ("v5p-pod", "flops", "bf16", 4e18, 0.03),
        ("tpu8i-1024", "flops", "fp4", 10.3 * EF, 0.005),
        ("tpu8i-1024", "hbm", None, 295e12, 0.005),
        ("tpu8t-virgo", "flops", "fp4", 1.7e21, 0.01),
    ],
)
def test_pod_totals(name, kind, dtype, published, rel):
    system = load_system(name)
    totals = pod_totals(system)
    if kind == "flops":
        got = totals["peak_flops"][dtype]
        assert got == pytest.approx(system.num_chips * system.chip.peak_flops[dtype])
    else:
        got = totals["hbm_capacity_bytes"]
        assert got == pytest.approx(system.num_chips * system.chip.hbm.capacity_bytes)
    assert got == pytest.approx(published, rel=rel)


def test_pod_totals_cover_every_dtype_and_sram():
    system = load_system("v5e-pod")
    totals = pod_totals(system)
    assert set(totals["peak_flops"]) == set(system.chip.peak_flops)
    assert totals["sram_capacity_bytes"] == 256 * system.chip.sram.capacity_bytes
    assert totals["peak_flops"]["int8"] == pytest.approx(100 * PF, rel=0.01)  # "100 PetaOps"
