"""The two training claims (TPU 8t's perf/$ over Ironwood, Virgo's scaling) against
closed forms: tokens/s = global batch x sequence / step time, the break-even price by
ratio arithmetic, and the multi-pod system's chips, bisection and peak from its
shape; each verdict flips when its inputs say so. Small systems and a two-layer
fragment keep the simulations to seconds."""

from __future__ import annotations

import math

import pytest

from tpusim.config import load_system
from tpusim.config.uncertainty import load_uncertainty
from tpusim.network import NetworkSettings
from tpusim.study.claim_specs import ClaimsFile
from tpusim.study.claims import claim_rows
from tpusim.study.claims_training import step_figure

WORKLOAD = {
    "name": "tiny",
    "kind": "training_step",
    "model": "llama-3.1-8b",
    "layers": 2,
    "dtype": "bf16",
    "seq": 1024,
    "batch_per_shard": 1,
    "mesh": {"fsdp": "auto", "tensor": 4},
}
#: The claims file's network for the steps simulated here.
FLOW_5PCT = NetworkSettings.of("flow", tolerance=0.05)
PRICES = {"v5e": (1.0, 2.0), "ironwood": (3.0, 5.0)}


def perf_claim(claimed: float = 2.7) -> dict:
    return {
        "check": "training_perf_per_dollar",
        "claim": "subject trains cheaper",
        "source": "a test",
        "subject": "ironwood-256",
        "baseline": "v5e-pod",
        "claimed_ratio": claimed,
        "workload": WORKLOAD,
        "figure": "{perf_ratio} {breakeven_price_ratio} {breakeven_price_low} "
        "{breakeven_price_high} {subject_tokens_per_s} {baseline_tokens_per_chip_hour}",
        "assumptions": "{source}",
        "reading": "{deciding_price_ratio} {deciding_price_low} {deciding_price_high}",
    }


def virgo_claim(**over) -> dict:
    return {
        "check": "virgo_scaling",
        "claim": "slices scale",
        "source": "a test",
        "system": "ironwood-multislice",
        "pod": "ironwood-256",
        "claimed_chips": 1000,
        "claimed_bisection_Pbps": 0.01,
        "claimed_EF": 4,
        "flops_dtype": "fp8",
        "claimed_efficiency": 0.8,
        "workload": WORKLOAD,
        "figure": "{chips} {bisection_Pbps} {bisection_both_Pbps} {pod_EF} {step_s} "
        "{allreduce_ms} {efficiency} {chips_verdict} {bisection_verdict} {flops_verdict} "
        "{scaling_verdict}",
        "assumptions": "{source}",
        "reading": "{bisection_verdict} {bisection_one_way_verdict}",
    } | over


def rows_of(claim: dict, rows: list | None = None) -> dict:
    file = ClaimsFile.model_validate(
        {"name": "t", "ratio_margin": 0.9, "prices_usd_per_chip_hour": PRICES, "claims": [claim]}
    )
    (row,) = claim_rows(rows, files=(file,))
    return row


def numbers(row: dict) -> list[float]:
    return [float(x) for x in row["tpusim"].split()[:7]]


def training_row(system: str, chips: int, step_s: float, tokens: float) -> dict:
    return {
        "system": system,
        "kind": "training_step",
        "workload": "tiny[dtype=bf16]",
        "chips": chips,
        "step_time_s": step_s,
        "tokens_per_s": tokens / step_s,
    }


SUBJECT_TOKENS = (40e6, 26e6, 12e6, 2e6)
"""Subject tokens/s giving per-chip ratios 20, 13, 6 and 1 over a baseline's 1e6."""

PRICE_RATIOS = (3.0 / 2.0, 5.0 / 1.0)
"""The subject's price over the baseline's, cheapest and dearest: Ironwood $3-5
against v5e $1-2 per chip-hour (PRICES)."""


def interval_verdict_by_hand(advantage: float, threshold: float) -> str:
    """``advantage`` with the 80% interval of the shipped paired training residuals
    (times exp(q10), exp(q90)) against ``threshold``."""
    q = load_uncertainty().kinds["training_step_time"].pairs
    lo, hi = advantage * math.exp(q.q10), advantage * math.exp(q.q90)
    if lo >= threshold:
        return "holds"
    if advantage >= threshold:
        return "holds within the interval"
    return "cannot tell" if hi >= threshold else "does not hold"


def expected_verdict(perf: float) -> str:
    """The verdict by hand over the price range, against 0.9 x 2.7: the dearest
    price's when the claim holds there, "does not hold" when it fails at the cheapest
    (interval included), else "cannot tell" (the unknown price decides)."""
    cheapest, dearest = (interval_verdict_by_hand(perf / r, 0.9 * 2.7) for r in PRICE_RATIOS)
    if dearest in ("holds", "holds within the interval"):
        return dearest
    return "does not hold" if cheapest == "does not hold" else "cannot tell"


def test_the_perf_cases_span_every_interval_verdict():
    verdicts = [expected_verdict(t / 2e6) for t in SUBJECT_TOKENS]
    assert verdicts == ["holds", "holds within the interval", "cannot tell", "does not hold"]


@pytest.mark.parametrize("subject_tokens", SUBJECT_TOKENS)
def test_perf_per_dollar_from_rows_is_ratio_arithmetic(subject_tokens):
    """Rows of 256 chips each: per-chip tokens/s ratio; the break-even price ratio is
    perf / 2.7, times the baseline's prices; the verdict over the price range from the
    ratio's 80% interval; the deciding price ratio perf / (0.9 x 2.7) in ``reading``."""
    rows = [
        training_row("ironwood-256", 256, 2.0, subject_tokens),
        training_row("v5e-pod", 256, 1.0, 1e6),
    ]
    row = rows_of(perf_claim(), rows)
    perf, breakeven, low, high, tokens_s, chip_hour = (float(x) for x in row["tpusim"].split())
    expected = (subject_tokens / 2.0) / 1e6
    assert perf == pytest.approx(expected)
    assert breakeven == pytest.approx(expected / 2.7)
    assert (low, high) == pytest.approx((expected / 2.7 * 1.0, expected / 2.7 * 2.0))
    assert tokens_s == pytest.approx(subject_tokens / 2.0)
    assert chip_hour == pytest.approx(1e6 / 256 * 3600)
    assert row["verdict"] == expected_verdict(expected)
    assert row["assumptions"] == "the run's rows"
    assert row["interval"].startswith(f"tokens/s per chip ratio {expected:.3g} [")
    deciding, low, high = (float(x) for x in row["reading"].split()[:3])
    assert deciding == pytest.approx(expected / (0.9 * 2.7))
    assert (low, high) == pytest.approx((deciding * 1.0, deciding * 2.0))


def test_simulated_step_counts_its_tokens_by_hand():
    """256 chips, tensor 4: fsdp 64 shards of one 1,024-token sequence each."""
    figure = step_figure([], "ironwood-256", WORKLOAD, FLOW_5PCT)
    assert figure.source == "simulated" and figure.chips == 256
    assert figure.tokens_per_step == 64 * 1024
    assert figure.tokens_per_s == pytest.approx(64 * 1024 / figure.step_time_s)
    assert step_figure([], "ironwood-256", WORKLOAD, FLOW_5PCT) is figure  # cached


def test_virgo_row_structural_figures_from_the_systems_shape():
    """4 slices of 256 Ironwood chips over 100 Gb/s per chip: bisection = chips x
    bandwidth / 2 one way; peak = chips x 4,614 TFLOP/s fp8; efficiency = step /
    (step + all-reduce); the ring over 4 slices takes at least 2 (P - 1) / P of the
    gradient bytes over the per-chip fabric bandwidth."""
    system = load_system("ironwood-multislice")
    row = rows_of(virgo_claim())
    chips, one_way, both, ef, step_s, allreduce_ms, eff = numbers(row)
    assert chips == 1024 == system.num_chips
    assert one_way == pytest.approx(1024 * 100e9 / 2 / 1e15)
    assert both == pytest.approx(2 * one_way)
    assert ef == pytest.approx(1024 * 4614e12 / 1e18)
    assert eff == pytest.approx(step_s / (step_s + allreduce_ms / 1e3))
    assert allreduce_ms > 0
    assert row["tpusim"].split()[7:10] == ["holds"] * 3
    lo, _ = efficiency_bounds(row)
    scaling = "holds" if lo >= 0.8 else "holds within the interval" if eff >= 0.8 else "other"
    assert " ".join(row["tpusim"].split()[10:]) == scaling
    assert row["verdict"] == scaling  # the weakest part
    assert row["interval"].startswith("exact: chips, bisection and peak; scaling efficiency")


def efficiency_bounds(row: dict) -> tuple[float, float]:
    """efficiency = s / (s + a): its low end with the step at its low bound s / exp(q90)
    of the training residuals and the all-reduce at its high bound a / exp(q10) of the
    collective residuals, its high end the reverse."""
    *_, step_s, allreduce_ms, _ = numbers(row)
    kinds = load_uncertainty().kinds
    t, c = kinds["training_step_time"].quantiles, kinds["collective_time"].quantiles
    a = allreduce_ms / 1e3
    s_lo, s_hi = step_s / math.exp(t.q90), step_s / math.exp(t.q10)
    a_lo, a_hi = a / math.exp(c.q90), a / math.exp(c.q10)
    return s_lo / (s_lo + a_hi), s_hi / (s_hi + a_lo)


def test_virgo_efficiency_interval_takes_both_bounds_at_their_worst():
    row = rows_of(virgo_claim())
    lo, hi = efficiency_bounds(row)
    assert f"[{lo:.4g}-{hi:.4g}]" in row["interval"]


def test_virgo_verdicts_flip_with_the_claimed_figures():
    """0.0512 Pb/s one way, 0.1024 both: a claimed 0.1 holds counting both directions
    (as Google counts ICI bandwidth) though not one way, a claimed 1 not at all; more
    chips, EF or efficiency than the system has: the row by its weakest part."""
    both = rows_of(virgo_claim(claimed_bisection_Pbps=0.1, claimed_efficiency=0.1))
    assert both["reading"] == "holds does not hold" and both["verdict"] == "holds"
    neither = rows_of(virgo_claim(claimed_bisection_Pbps=1))
    assert neither["tpusim"].split()[8] == "does" and neither["verdict"] == "does not hold"
    assert rows_of(virgo_claim(claimed_chips=2000))["verdict"] == "does not hold"
    assert rows_of(virgo_claim(claimed_EF=40))["verdict"] == "does not hold"
    assert rows_of(virgo_claim(claimed_efficiency=1.0))["verdict"] == "does not hold"
