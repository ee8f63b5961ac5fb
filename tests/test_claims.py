"""The vendor-claims table against closed forms computed here from the published
numbers (reference/tpu-specs.md) and the topologies' shapes."""

from __future__ import annotations

import re

import pytest

from tpusim.claims import format_claims, vendor_claims

HOP_S = 1e-6  # 1 us per hop on every shipped system


@pytest.fixture(scope="module")
def table():
    return vendor_claims()


def figures(text: str, op: str) -> tuple[float, float]:
    match = re.search(rf"{op} ([0-9.]+) -> ([0-9.]+) us", text)
    assert match, text
    return float(match.group(1)) * 1e-6, float(match.group(2)) * 1e-6


def test_six_claims_each_with_a_verdict(table):
    assert len(table) == 6
    assert set(table.columns) == {"claim", "source", "tpusim", "assumptions", "verdict"}
    assert all(table.verdict.str.len() > 0) and all(table.assumptions.str.len() > 0)
    text = format_claims(table)
    assert text.count("verdict:") == 6


def test_diameter_claim_matches_the_closed_forms(table):
    """8x8x16 torus with wraparound: 8/2 + 8/2 + 16/2 = 16 hops; Boardfly minimal
    routes: local, board, local, global, local, board, local = 7 hops."""
    row = table.iloc[0]
    assert "16 hops" in row.tpusim and "7 hops" in row.tpusim and row.verdict == "holds"


def test_latency_claim_matches_hop_counts(table):
    """Network only, 1 KiB (latency-bound), 1 us per hop. All-reduce: the torus
    algorithm's reduce-scatter and all-gather are bidirectional rings of
    ceil((k-1)/2) neighbour steps per axis each, 2 (4 + 4 + 8) = 32 hops; Boardfly's
    hierarchy exchanges directly per level, whose longest routes are 1 (board), 3
    (group) and 7 (pod) hops: 2 (1 + 3 + 7) = 22. All-to-all: direct on the torus,
    its diameter 16; level by level on Boardfly, 11."""
    text = table.iloc[1].tpusim
    assert figures(text, "all-reduce") == pytest.approx((32 * HOP_S, 22 * HOP_S))
    assert figures(text, "all-gather") == pytest.approx((16 * HOP_S, 11 * HOP_S))
    assert figures(text, "all-to-all") == pytest.approx((16 * HOP_S, 11 * HOP_S))
    assert table.iloc[1].verdict == "does not hold"  # 1 - 22/32 = 31% < 50%


def test_cae_claim_is_marked_as_an_input(table):
    row = table.iloc[2]
    assert "5.0x lower" in row.tpusim and row.verdict == "holds by construction"


def test_sram_claim_from_the_published_capacities(table):
    """8i: 192 MiB VMEM per TensorCore x 2; Ironwood: 64 MiB x 2 (JAX tpu_info)."""
    row = table.iloc[3]
    assert f"{(2 * 192) / (2 * 64):.2f}x" in row.tpusim and row.verdict == "holds"


def test_ici_claim_all_reduce_gains_less_than_the_link_rate(table):
    """Doubling every link at most doubles a bandwidth-bound all-reduce; latency and
    on-chip reductions keep it below 2x."""
    row = table.iloc[4]
    ratio = float(re.search(r"\(([0-9.]+)x\)$", row.tpusim).group(1))
    assert 1.6 < ratio < 2.0
    assert row.verdict == ("holds" if ratio >= 1.8 else "does not hold")


def test_compute_claim_from_the_published_peaks(table):
    """8t pod 9,600 x 12.6 PF fp4 over Ironwood 9,216 x 4.614 PF fp8 = 2.84x; fp8 on
    both, 9,600 x 5.9769 PF: 1.35x."""
    row = table.iloc[5]
    assert f"{9600 * 12.6e15 / (9216 * 4614e12):.2f}x" in row.tpusim
    assert f"{9600 * 5976.9e12 / (9216 * 4614e12):.2f}x" in row.tpusim
    assert row.verdict.startswith("partly")


def test_claims_command_prints_the_same_table(capsys, table):
    import json

    from helpers import run

    code, out, _ = run(capsys, "claims", "--json")
    assert code == 0
    assert json.loads(out)["claims"] == table.to_dict("records")
    code, out, _ = run(capsys, "claims")
    assert code == 0 and out.count("verdict:") == 6
